//! `by_request`: a mix's figures per request name, in the report and in a merge.
//!
//! Each name gets what the run has as a whole (requests, errors by kind, status codes, the
//! latency percentiles and their HDR histogram, so that `tailscope merge` adds histograms
//! rather than averaging percentiles) and what it was (method, target, weight). The per-name
//! histograms keep two significant figures (see `recorder::RequestFigures`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{decode_base64, encoded, percentiles, ratio, EncodedHistogram};
use tailscope_loadgen::error::{Error, ErrorKind};
use tailscope_loadgen::plan::Plan;
use tailscope_loadgen::snapshot::{Percentiles, RequestPoint, RunTotals};

/// One request name of a mix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestReport {
    /// Its method (of the first request of that name).
    pub method: String,
    /// Its target, path and query (of the first request of that name).
    pub target: String,
    /// Its weight in the mix (the sum, when several requests share the name).
    pub weight: u64,
    /// Requests counted: successes + errors + unfinished.
    pub requests: u64,
    /// Complete responses.
    pub successes: u64,
    /// Failed requests.
    pub errors: u64,
    /// Timed-out requests.
    pub timeouts: u64,
    /// Requests still unfinished at the end (their wait is in the latency as a lower bound).
    pub unfinished: u64,
    /// Its share of the run's requests sent under a name (0..1).
    pub share: f64,
    /// Its requests per second over the load window; null when the window has no length.
    pub rps: Option<f64>,
    /// errors / requests.
    pub error_rate: f64,
    /// Complete responses whose status was not 2xx.
    pub non2xx: u64,
    /// Response bytes, heads and bodies.
    pub bytes_read: u64,
    /// Its latency (corrected in open loop); null when nothing was measured.
    pub latency_us: Option<Percentiles>,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Failed requests by kind (the kinds that happened).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Its latency histogram (two significant figures), for merging.
    pub histogram: EncodedHistogram,
    /// One point for each second of the run's `timeseries` in which it had a request
    /// (a second not listed had none); empty in a merged report.
    #[serde(default)]
    pub timeseries: Vec<RequestPoint>,
}

/// Requests per second over a window of `duration_s`; none for a window of no length.
fn rate(requests: u64, duration_s: f64) -> Option<f64> {
    (duration_s > 0.0).then(|| requests as f64 / duration_s)
}

/// The figures per name of a run with a mix; empty for a single request.
pub(crate) fn by_request(plan: &Plan, totals: &RunTotals) -> BTreeMap<String, RequestReport> {
    let mut out = BTreeMap::new();
    if !plan.has_mix() {
        return out;
    }
    let names = plan.request_names();
    let named_total: u64 = totals
        .by_request
        .iter()
        .flatten()
        .map(|f| f.counters.requests())
        .sum();
    let duration_s = totals.duration.as_secs_f64();
    // A name nothing was recorded for (built once, not per name: it is ~20 KB).
    let empty =
        tailscope_loadgen::recorder::RequestFigures::new(std::time::Duration::from_secs(60));
    // Every request of a name is in the run's histogram, whose slowest bounds the name's.
    let run_max = percentiles(&totals.histograms.latency).map(|p| p.max);
    for (i, name) in names.iter().enumerate() {
        let spec = plan
            .requests
            .iter()
            .find(|r| r.name == *name)
            .expect("a name comes from a request");
        let weight = plan
            .requests
            .iter()
            .filter(|r| r.name == *name)
            .map(|r| u64::from(r.weight))
            .sum();
        let figures = totals.by_request.get(i).and_then(Option::as_ref);
        let f = figures.unwrap_or(&empty);
        let c = &f.counters;
        let requests = c.requests();
        out.insert(
            name.clone(),
            RequestReport {
                method: spec.method.clone(),
                target: spec.target.clone(),
                weight,
                requests,
                successes: c.successes,
                errors: c.error_total(),
                timeouts: c.timeouts(),
                unfinished: c.unfinished,
                share: ratio(requests, named_total),
                rps: rate(requests, duration_s),
                error_rate: ratio(c.error_total(), requests),
                non2xx: c.non2xx(),
                bytes_read: c.bytes_read,
                latency_us: capped(percentiles(&f.latency), run_max),
                status_codes: c
                    .status_codes
                    .iter()
                    .map(|(code, n)| (code.to_string(), *n))
                    .collect(),
                errors_by_kind: ErrorKind::ALL
                    .iter()
                    .filter(|k| c.errors[k.index()] > 0)
                    .map(|k| (k.as_str().to_string(), c.errors[k.index()]))
                    .collect(),
                histogram: encoded(&f.latency),
                timeseries: totals.request_series.get(i).cloned().unwrap_or_default(),
            },
        );
    }
    out
}

/// A name's figures, none above the run's slowest (`run_max`), when the run has one.
fn capped(p: Option<Percentiles>, run_max: Option<u64>) -> Option<Percentiles> {
    match (p, run_max) {
        (Some(p), Some(max)) => Some(p.capped(max)),
        (p, _) => p,
    }
}

/// Adds up the `by_request` of reports being merged, name by name: counts are summed,
/// histograms added, rates taken over the merged window of `duration_s`; no figure above
/// the merged run's slowest, `run_max`.
pub(crate) fn merge_by_request(
    parts: &[(&str, &BTreeMap<String, RequestReport>)],
    duration_s: f64,
    run_max: Option<u64>,
) -> Result<BTreeMap<String, RequestReport>, Error> {
    let mut out: BTreeMap<String, RequestReport> = BTreeMap::new();
    let mut hists: BTreeMap<String, hdrhistogram::Histogram<u64>> = BTreeMap::new();
    for (file, by) in parts {
        for (name, r) in *by {
            let h = decode_base64(&r.histogram.data).ok_or_else(|| {
                Error::Merge(format!(
                    "{file}: the latency histogram of request {name:?} cannot be decoded (a damaged or edited report)"
                ))
            })?;
            match hists.get_mut(name) {
                Some(sum) => sum
                    .add(&h)
                    .expect("an auto-resizing histogram takes any other of the same precision"),
                None => {
                    let mut h = h;
                    h.auto(true);
                    hists.insert(name.clone(), h);
                }
            }
            match out.get_mut(name) {
                None => {
                    // The generators' seconds are not aligned here: the merged report's
                    // series per name is left empty rather than wrong.
                    out.insert(
                        name.clone(),
                        RequestReport {
                            timeseries: Vec::new(),
                            ..r.clone()
                        },
                    );
                }
                Some(m) => {
                    m.requests += r.requests;
                    m.successes += r.successes;
                    m.errors += r.errors;
                    m.timeouts += r.timeouts;
                    m.unfinished += r.unfinished;
                    m.non2xx += r.non2xx;
                    m.bytes_read += r.bytes_read;
                    for (k, n) in &r.status_codes {
                        *m.status_codes.entry(k.clone()).or_default() += n;
                    }
                    for (k, n) in &r.errors_by_kind {
                        *m.errors_by_kind.entry(k.clone()).or_default() += n;
                    }
                }
            }
        }
    }
    let total: u64 = out.values().map(|r| r.requests).sum();
    for (name, r) in &mut out {
        let h = &hists[name];
        r.latency_us = capped(percentiles(h), run_max);
        r.histogram = encoded(h);
        r.share = ratio(r.requests, total);
        r.error_rate = ratio(r.errors, r.requests);
        r.rps = rate(r.requests, duration_s);
    }
    Ok(out)
}
