//! `tailscope merge`: the reports of N generators (`run --segment I/N`, each on its own host)
//! as one report of the same schema.
//!
//! Lossless where it can be: the HDR histograms are added (the merged percentiles are those
//! of the union of all samples, never an average of percentiles), counters and status codes
//! are summed, `rps` is over the union of the load windows (gaps between them left out), and the time series is aligned on
//! wall-clock time and summed second by second, with each second's percentiles from the sum
//! of that second's histograms. What belongs to one host (its profile, its diagnosis, its CPU
//! figures) is kept per host in [`MergeInfo::runs`], not summed.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{
    decode_base64, encoded, lower_bounds, percentiles, ratio, rfc3339, Config, Generator,
    LateSendsByCause, LittlesLaw, Report, Summary, TargetInfo,
};
use crate::sections::RunSections;
use tailscope_loadgen::error::Error;
use tailscope_loadgen::segment::Segment;

mod admit;
mod series;

use admit::{admit, Admitted};
use series::{series, Series};
use tailscope_loadgen::snapshot::Percentiles;

/// What a merged report was made of.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeInfo {
    /// How many segments the load was split into (the `N` of `--segment I/N`); null when
    /// the reports had no segment.
    pub segments: Option<usize>,
    /// Segments of `1..=N` no report was given for: the merged load is short of them.
    pub missing_segments: Vec<usize>,
    /// `--force` was given and a check that would have refused the merge was overridden
    /// (the reasons are in `warnings`).
    pub forced: bool,
    /// The earliest generator's start, RFC 3339 UTC: `timeseries` and `slowest` count from it.
    pub started_at: String,
    /// The latest generator's end (its load window and grace), RFC 3339 UTC.
    pub ended_at: String,
    /// Each report merged, in the order given.
    pub runs: Vec<MergedRun>,
}

/// One generator's report, as a merged report keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergedRun {
    /// The file it was read from.
    pub file: String,
    /// Its host.
    pub host: Option<String>,
    /// Its segment.
    pub segment: Option<Segment>,
    /// When its measurement began, RFC 3339 UTC.
    pub started_at: String,
    /// How long after the earliest generator it began (s). Its seconds and its slowest
    /// requests are moved onto the merged clock by this rounded to the whole second (a
    /// warning says when that is more than 0.1 s off).
    pub offset_s: f64,
    /// Its own connections.
    pub connections: usize,
    /// Its own requests.
    pub requests: u64,
    /// Its own requests per second.
    pub rps: f64,
    /// Its own latency percentiles.
    pub latency_us: Option<Percentiles>,
    /// The server it loaded, as it saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetInfo>,
    /// What its host measured besides the load (`profile`, `diagnosis`, ...), as it wrote it.
    #[serde(default, skip_serializing_if = "RunSections::is_empty")]
    pub sections: RunSections,
}

/// Runs whose starts are further apart than this did not load the server together for the
/// whole window: the merged report says so.
const START_SPREAD_WARN_S: f64 = 1.0;

/// A run's seconds are summed into the merged clock's whole seconds nearest to them: a run
/// that started further than this from one has its per-second figures added into seconds
/// that cover other wall-clock time, and the merged report says by how much.
const SECOND_ALIGN_WARN_S: f64 = 0.1;

fn decode(name: &str, what: &str, data: &str) -> Result<Histogram<u64>, Error> {
    decode_base64(data).ok_or_else(|| {
        Error::Merge(format!(
            "{name}: its {what} histogram cannot be decoded (a damaged or edited report)"
        ))
    })
}

/// Adds `h` into `sum`, which grows to hold it.
fn add(sum: &mut Option<Histogram<u64>>, h: Histogram<u64>) {
    match sum {
        None => {
            let mut h = h;
            h.auto(true);
            *sum = Some(h);
        }
        Some(s) => s
            .add(&h)
            .expect("an auto-resizing histogram takes any other of the same precision"),
    }
}

/// Sums an optional figure: known only when every report knows it.
fn sum_known(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.sum()
}

/// The late sends' causes added up: known only when every report has them (a closed-loop
/// or older report's late sends have none, and a partial sum would not add up to
/// `late_sends`). A host that could not read its run-queue wait put its late sends under
/// the other causes, so the CPU wait is the sum of the hosts that could (n/a when none
/// could), and the three still add up to `late_sends`.
fn late_sends_by_cause(
    each: impl Iterator<Item = Option<LateSendsByCause>>,
) -> Option<LateSendsByCause> {
    let all: Vec<LateSendsByCause> = each.collect::<Option<_>>()?;
    Some(LateSendsByCause {
        waited_for_cpu: all
            .iter()
            .map(|c| c.waited_for_cpu)
            .fold(None, tailscope_loadgen::snapshot::sum_some),
        no_free_connection: all.iter().map(|c| c.no_free_connection).sum(),
        generator: all.iter().map(|c| c.generator).sum(),
    })
}

/// The segments' shares of `-q` added back up, to 12 significant digits: r/N added N times
/// is not always r in floating point (100/7 × 7 = 100.00000000000001), and a rate anyone
/// asked for has fewer digits than that. Known only when every report has one.
fn sum_of_rates(rates: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let total: f64 = rates.sum::<Option<f64>>()?;
    format!("{total:.11e}").parse().ok()
}

/// Merges `reports` (each with the file it came from, for messages) into one report.
///
/// Refused with [`Error::Merge`] (the binary exits 2): no report, a report that is itself
/// merged, one without the `generator` section or per-second histograms (written by an
/// older tailscope), a damaged histogram, one run given twice; and, unless `force`, a
/// report run without `--segment`, reports of different settings (URL, method, mode,
/// duration, ...), whose segments overlap or count differently, or whose load windows
/// never overlapped. Missing segments are not refused: they are named in the result.
pub fn merge(reports: &[(String, Report)], force: bool) -> Result<Report, Error> {
    let admitted = admit(reports, force)?;
    let first = admitted.first;
    let (start, data_end) = (admitted.start, admitted.data_end);

    let Added {
        latency,
        connect,
        uncorrected,
    } = added_histograms(reports)?;
    let tls = merged_tls(reports)?;

    let Series {
        misaligned,
        timeseries,
        second_histograms,
        slowest,
    } = series(reports, &admitted.generators, start)?;

    let all = || reports.iter().map(|(_, r)| r);
    let summary = merged_summary(reports, &admitted);
    let duration_s = summary.duration_s;
    let (status_codes, error_kinds) = merged_status_codes_and_errors(reports);
    let target = all()
        .all(|r| r.target == first.target)
        .then(|| first.target.clone())
        .flatten();
    let runs = merged_runs(reports, &admitted.generators, start);
    let at = |unix_s: f64| {
        rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix_s.max(0.0)))
    };

    // The merged run's intervals, over the merged seconds (the bootstrap's unit).
    // Decoded one at a time into what each recorded and gathered into the bootstrap's units
    // (see `of_run`'s `decode_seconds`).
    let mut seconds = crate::stats::bootstrap::Units::for_run(second_histograms.len());
    for h in second_histograms.iter().filter_map(|d| decode_base64(d)) {
        seconds.push(crate::stats::bootstrap::Second::of(&h));
    }
    let latency_with_ci = super::confidence::latency(&latency, &seconds);
    let run_max = latency_with_ci.as_ref().map(|(p, _)| p.max);
    let mut merged = Report {
        schema_version: first.schema_version,
        tool: first.tool.clone(),
        config: merged_config(first, reports),
        target,
        latency_us: latency_with_ci.as_ref().map(|(p, _)| *p),
        latency_ci95: latency_with_ci.map(|(_, ci)| ci),
        latency_lower_bound: lower_bounds(&latency, summary.unfinished_min_us),
        summary,
        littles_law: merged_littles_law(reports),
        latency_uncorrected_us: uncorrected.as_ref().and_then(percentiles),
        connect_us: connect.as_ref().and_then(percentiles),
        tls_us: tls.as_ref().and_then(percentiles),
        status_codes,
        errors: error_kinds,
        by_request: super::by_request::merge_by_request(
            &reports
                .iter()
                .map(|(name, r)| (name.as_str(), &r.by_request))
                .collect::<Vec<_>>(),
            duration_s,
            run_max,
        )?,
        connections: tailscope_loadgen::conns::Connections::merged(
            all().filter_map(|r| r.connections.as_ref()),
            &timeseries,
        ),
        timeseries,
        rate_changes: Vec::new(),
        until: None,
        warmup_auto: None,
        stages: Vec::new(),
        interrupted: all().any(|r| r.interrupted),
        signal: all().find_map(|r| r.signal.clone()),
        warnings: Vec::new(),
        slowest,
        histogram: encoded(&latency),
        connect_histogram: connect.as_ref().map(encoded),
        tls_histogram: tls.as_ref().map(encoded),
        latency_uncorrected_histogram: uncorrected.as_ref().map(encoded),
        second_histograms,
        generator: None,
        merged: Some(MergeInfo {
            segments: admitted.any_segment.then_some(admitted.count),
            missing_segments: admitted.missing.clone(),
            forced: !admitted.overridden.is_empty(),
            started_at: at(start),
            ended_at: at(data_end),
            runs,
        }),
        sections: RunSections::default(),
    };
    merged.warnings = merge_warnings(&merged, reports, &admitted, &misaligned);
    Ok(merged)
}

/// The histograms of every report added up: latency always; connect times and uncorrected
/// latency only when every report has them (n/a rather than some generators' figures).
struct Added {
    latency: Histogram<u64>,
    connect: Option<Histogram<u64>>,
    uncorrected: Option<Histogram<u64>>,
}

/// Histograms are added, never averaged.
fn added_histograms(reports: &[(String, Report)]) -> Result<Added, Error> {
    let mut latency = None;
    let mut connect = None;
    let mut uncorrected = None;
    let mut connect_known = true;
    let mut uncorrected_known = true;
    for (name, r) in reports {
        add(&mut latency, decode(name, "latency", &r.histogram.data)?);
        match &r.connect_histogram {
            Some(h) => add(&mut connect, decode(name, "connect", &h.data)?),
            None => connect_known = false,
        }
        match &r.latency_uncorrected_histogram {
            Some(h) => add(
                &mut uncorrected,
                decode(name, "uncorrected latency", &h.data)?,
            ),
            None => uncorrected_known = false,
        }
    }
    Ok(Added {
        latency: latency.expect("at least one report"),
        connect: connect.filter(|_| connect_known),
        uncorrected: uncorrected.filter(|_| uncorrected_known),
    })
}

/// The counters of every report summed, over the time some run was loading.
fn merged_summary(reports: &[(String, Report)], admitted: &Admitted<'_>) -> Summary {
    let all = || reports.iter().map(|(_, r)| r);
    let sum = |f: fn(&Summary) -> u64| all().map(|r| f(&r.summary)).sum::<u64>();
    let requests = sum(|s| s.requests);
    let successes = sum(|s| s.successes);
    let errors = sum(|s| s.errors);
    let non2xx = sum(|s| s.non2xx);
    // The time some run was loading: with a gap between windows (forced), the gap is no load.
    let duration_s = admitted.loaded_s.max(0.0);
    Summary {
        requests,
        successes,
        errors,
        timeouts: sum(|s| s.timeouts),
        duration_s,
        grace_s: (admitted.data_end - admitted.window_end).max(0.0),
        rps: if duration_s > 0.0 {
            requests as f64 / duration_s
        } else {
            0.0
        },
        bytes_read: sum(|s| s.bytes_read),
        late_sends: sum(|s| s.late_sends),
        late_sends_by_cause: late_sends_by_cause(all().map(|r| r.summary.late_sends_by_cause)),
        reconnects: sum(|s| s.reconnects),
        aborted: sum(|s| s.aborted),
        still_connecting: sum(|s| s.still_connecting),
        connections_opened: sum(|s| s.connections_opened),
        connect_failures: sum(|s| s.connect_failures),
        unfinished: sum(|s| s.unfinished),
        unfinished_unsent: sum(|s| s.unfinished_unsent),
        unfinished_min_us: all().filter_map(|r| r.summary.unfinished_min_us).min(),
        unfinished_max_us: all().filter_map(|r| r.summary.unfinished_max_us).max(),
        retransmits: sum_known(all().map(|r| r.summary.retransmits)),
        syn_retransmits: sum_known(all().map(|r| r.summary.syn_retransmits)),
        transport: all().filter_map(|r| r.summary.transport.as_ref()).fold(
            None,
            |acc: Option<tailscope_loadgen::transport::TransportCounters>, t| {
                let mut acc = acc.unwrap_or_default();
                acc.merge(t);
                Some(acc)
            },
        ),
        error_rate: ratio(errors, requests),
        non2xx,
        non2xx_rate: ratio(non2xx, requests),
    }
}

/// Responses by status code and errors by kind, summed over the reports.
fn merged_status_codes_and_errors(
    reports: &[(String, Report)],
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut status_codes: BTreeMap<String, u64> = BTreeMap::new();
    let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
    for (_, r) in reports {
        for (k, n) in &r.status_codes {
            *status_codes.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &r.errors {
            *error_kinds.entry(k.clone()).or_default() += n;
        }
    }
    (status_codes, error_kinds)
}

/// Little's law over the connections of every run, when every report has it.
fn merged_littles_law(reports: &[(String, Report)]) -> Option<LittlesLaw> {
    let all = || reports.iter().map(|(_, r)| r);
    let connection_s: Option<f64> = all()
        .map(|r| r.littles_law.as_ref().map(|l| l.connection_s))
        .sum();
    let accounted_s: Option<f64> = all()
        .map(|r| r.littles_law.as_ref().map(|l| l.accounted_s))
        .sum();
    connection_s
        .zip(accounted_s)
        .filter(|&(c, _)| c > 0.0)
        .map(|(connection_s, accounted_s)| LittlesLaw {
            connection_s,
            accounted_s,
            unaccounted_pct: 100.0 * (1.0 - accounted_s / connection_s).max(0.0),
        })
}

/// The first report's settings with the load summed: connections, threads, rate, requests
/// and held connections; what belongs to one host (CPUs, source addresses) left out.
fn merged_config(first: &Report, reports: &[(String, Report)]) -> Config {
    let all = || reports.iter().map(|(_, r)| r);
    let mut config = first.config.clone();
    config.connections = all().map(|r| r.config.connections).sum();
    config.threads = all().map(|r| r.config.threads).sum();
    config.rate = sum_of_rates(all().map(|r| r.config.rate));
    config.requests = all().map(|r| r.config.requests).sum();
    config.cpus = Vec::new();
    config.idle_conns = all().map(|r| r.config.idle_conns).sum();
    config.slow_conns = all().map(|r| r.config.slow_conns).sum();
    config.source_addrs = Vec::new();
    config
}

/// Each merged run as the merged report lists it, with its offset from the earliest start.
fn merged_runs(
    reports: &[(String, Report)],
    generators: &[&Generator],
    start: f64,
) -> Vec<MergedRun> {
    reports
        .iter()
        .zip(generators)
        .map(|((name, r), g)| MergedRun {
            file: name.clone(),
            host: g.host.clone(),
            segment: g.segment,
            started_at: g.started_at.clone(),
            offset_s: g.started_unix_s - start,
            connections: r.config.connections,
            requests: r.summary.requests,
            rps: r.summary.rps,
            latency_us: r.latency_us,
            target: r.target.clone(),
            sections: r.sections.clone(),
        })
        .collect()
}

/// The merged report's warnings: its own, what the merge found (segments split differently
/// or missing, starts apart, seconds misaligned, rates changed, checks forced), then each
/// run's own warnings named by host, once each.
fn merge_warnings(
    merged: &Report,
    reports: &[(String, Report)],
    admitted: &Admitted<'_>,
    misaligned: &[(&str, f64)],
) -> Vec<String> {
    let (count, counts, missing) = (admitted.count, &admitted.counts, &admitted.missing);
    let (start, latest_start) = (admitted.start, admitted.latest_start);
    let mut warnings = merged.compute_warnings();
    if counts.len() > 1 {
        let list: Vec<String> = counts.iter().map(usize::to_string).collect();
        warnings.push(format!(
            "the reports split the load into different numbers of segments ({}): missing segments are counted among the {count} of the largest split",
            list.join(", ")
        ));
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|i| format!("{i}/{count}")).collect();
        warnings.push(format!(
            "{} of {count} segments merged: {} {} missing, so the load was short of what was asked",
            count - missing.len(),
            if missing.len() == 1 {
                "segment"
            } else {
                "segments"
            },
            list.join(", ") + if missing.len() == 1 { " is" } else { " are" }
        ));
    }
    if latest_start - start > START_SPREAD_WARN_S {
        warnings.push(format!(
            "the generators started up to {:.1} s apart: they did not load the server together for the whole window (give them one --start-at)",
            latest_start - start
        ));
    }
    if !misaligned.is_empty() {
        let runs: Vec<String> = misaligned
            .iter()
            .map(|(name, off)| format!("{name} {off:.2} s"))
            .collect();
        let worst = misaligned.iter().map(|&(_, off)| off).fold(0.0, f64::max);
        warnings.push(format!(
            "per-second figures are up to {worst:.2} s off: a run's seconds are summed into the merged whole second nearest them, and these started that far from one ({}); give the generators one --start-at",
            runs.join(", ")
        ));
    }
    if reports.iter().any(|(_, r)| !r.rate_changes.is_empty()) {
        warnings.push(
            "a generator's rate was changed during its run (+/-): the merged report does not list the changes; see each report"
                .into(),
        );
    }
    for m in &admitted.overridden {
        warnings.push(format!("merged with --force although {m}"));
    }
    for ((name, r), g) in reports.iter().zip(&admitted.generators) {
        let who = g.host.clone().unwrap_or_else(|| name.clone());
        for w in &r.warnings {
            let w = format!("{who}: {w}");
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    warnings
}

/// The TLS handshake histograms added up, when every report has one (https runs); none
/// when any lacks it (an http run, or a report written before they carried it): n/a rather
/// than the handshakes of some of the generators.
fn merged_tls(reports: &[(String, Report)]) -> Result<Option<Histogram<u64>>, Error> {
    let mut tls = None;
    for (name, r) in reports {
        let Some(h) = &r.tls_histogram else {
            return Ok(None);
        };
        add(&mut tls, decode(name, "TLS handshake", &h.data)?);
    }
    Ok(tls)
}

#[cfg(test)]
mod tests;
