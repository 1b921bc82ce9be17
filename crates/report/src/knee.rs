//! `tailscope find-max`: the highest open-loop rate at which every SLO holds (issue 34).
//!
//! The search lives in the session; here are its verdicts and its document. A step's verdict
//! on an SLO rests on an interval, not on the bare figure: a latency percentile's is the
//! circular block bootstrap over the step's seconds ([`crate::stats::figure_interval`], which
//! allows for seconds that depend on each other), or, for a step too short for it, the order
//! statistics of its histogram ([`crate::stats::quantile_ci`]); an error rate's is Wilson's
//! score interval. The SLO *passes* when the whole interval meets it, *fails* when the whole
//! interval misses it, and is *unsure* otherwise: the search then runs the step again, twice
//! as long, and, still unsure, counts it as not shown to pass (the rate reported is one
//! shown to meet the SLO, never one that merely did not miss it). A failing step is run
//! again before the search believes it (two of three decide), unless the server answered
//! under nine tenths of the offered rate.

use serde::{Deserialize, Serialize};

use crate::document::{decode_histogram, fmt_us, Report};
use crate::stats::{figure_interval, quantile_ci, BootstrapOptions, Figure};
use crate::threshold::{LatencyStat, Metric, Op, Threshold};

mod page;
mod text;

pub use page::knee_page;
pub use text::{knee_text, verdict};

/// The document's schema name.
pub const SCHEMA: &str = "tailscope.find_max/1";

/// The confidence of every step's intervals.
pub const CONFIDENCE: f64 = 0.95;

/// A step's verdict on an SLO, or on all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// The whole interval meets the SLO.
    Pass,
    /// The whole interval misses it.
    Fail,
    /// The interval straddles the limit (or nothing could bound the figure).
    Unsure,
}

/// What find-max's SLOs may be, as its usage errors say it.
const SLO_HELP: &str = "find-max judges a latency percentile (p50 … p9999) or error_rate / non2xx_rate below a limit, for the whole run, e.g. 'p99<10ms', 'error_rate<0.1%'";

/// An `--slo` as find-max takes it: parsed and checked with [`check_slo`]. The error is the
/// usage message, which suggests only what find-max accepts.
pub fn parse_slo(expr: &str) -> Result<Threshold, String> {
    let t = Threshold::parse_with_help(expr, SLO_HELP).map_err(|e| format!("--slo: {e}"))?;
    check_slo(&t)?;
    Ok(t)
}

/// Whether `t` is an SLO find-max can judge: a latency percentile or an error rate that must
/// stay below a limit, for the whole run. The error is the usage message.
pub fn check_slo(t: &Threshold) -> Result<(), String> {
    let below = matches!(t.op, Op::Lt | Op::Le);
    let judged = match t.metric {
        Metric::Latency(stat) => quantile_of(stat).is_some(),
        Metric::ErrorRate | Metric::Non2xxRate => true,
        _ => false,
    };
    if !judged || !below || t.request.is_some() {
        return Err(format!("--slo {:?}: {SLO_HELP}", t.expr));
    }
    Ok(())
}

fn quantile_of(stat: LatencyStat) -> Option<f64> {
    Some(match stat {
        LatencyStat::P50 => 0.5,
        LatencyStat::P75 => 0.75,
        LatencyStat::P90 => 0.9,
        LatencyStat::P95 => 0.95,
        LatencyStat::P99 => 0.99,
        LatencyStat::P999 => 0.999,
        LatencyStat::P9999 => 0.9999,
        _ => return None,
    })
}

/// One SLO judged on one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCall {
    /// The SLO as written.
    pub slo: String,
    /// The figure from all the step's data (µs, or a fraction); null when nothing measured it.
    pub estimate: Option<f64>,
    /// Its interval's bounds at [`CONFIDENCE`].
    pub low: Option<f64>,
    /// See `low`.
    pub high: Option<f64>,
    /// How the interval was had: "block bootstrap over N s", "order statistics", "Wilson".
    pub method: String,
    /// The verdict.
    pub call: Call,
}

/// Judges `slo` on a step's report (its seconds' histograms, its counts).
pub fn judge(slo: &Threshold, report: &Report) -> SloCall {
    let (estimate, bounds, method) = match slo.metric {
        Metric::Latency(stat) => latency_interval(report, quantile_of(stat).unwrap_or(0.99)),
        Metric::ErrorRate | Metric::Non2xxRate => {
            let s = &report.summary;
            let rate = if slo.metric == Metric::ErrorRate {
                s.error_rate
            } else {
                s.non2xx_rate
            };
            let bad = (rate * s.requests as f64).round() as u64;
            let n = s.requests;
            if n == 0 {
                (None, None, "no requests".to_string())
            } else {
                let p = bad as f64 / n as f64;
                (Some(p), Some(wilson(bad, n)), "Wilson score".to_string())
            }
        }
        _ => (None, None, "not judged".to_string()),
    };
    let holds = |v: f64| meets(slo, v);
    let call = match bounds {
        Some((low, high)) if holds(low) && holds(high) => Call::Pass,
        Some((low, high)) if !holds(low) && !holds(high) => Call::Fail,
        // Nothing bounds the figure, but all of it already misses: a p99.9 beyond the
        // timeout, every request failed.
        None if estimate.is_some_and(|e| !holds(e)) && report.summary.successes == 0 => Call::Fail,
        _ => Call::Unsure,
    };
    SloCall {
        slo: slo.expr.clone(),
        estimate,
        low: bounds.map(|b| b.0),
        high: bounds.map(|b| b.1),
        method,
        call,
    }
}

/// Whether the figure `v` meets `slo`.
pub fn meets(slo: &Threshold, v: f64) -> bool {
    match slo.op {
        Op::Lt => v < slo.limit,
        Op::Le => v <= slo.limit,
        Op::Gt => v > slo.limit,
        Op::Ge => v >= slo.limit,
    }
}

/// The requests a step needs before a rate SLO (`error_rate<L`) can pass with no failure at
/// all: Wilson's upper bound for 0 of n is z² / (n + z²), under L once n > z² (1 − L) / L
/// (about 3.84 / L: 3,842 for 0.1 %). Fewer, and even a flawless step is unsure. None for
/// a latency SLO (its interval narrows with the step's length, not a count).
pub fn requests_to_bound(slo: &Threshold) -> Option<u64> {
    let z2 = 1.959_963_984_540_054_f64.powi(2);
    match slo.metric {
        Metric::ErrorRate | Metric::Non2xxRate if slo.limit > 0.0 => {
            Some((z2 * (1.0 - slo.limit) / slo.limit).floor() as u64 + 1)
        }
        _ => None,
    }
}

type Interval = (Option<f64>, Option<(f64, f64)>, String);

/// A latency percentile's interval: the block bootstrap over the step's seconds where it
/// has enough of them, else the order statistics of the whole histogram.
fn latency_interval(report: &Report, q: f64) -> Interval {
    let seconds: Vec<_> = report
        .second_histograms
        .iter()
        .filter_map(|b| crate::document::decode_base64(b))
        .map(|h| crate::stats::bootstrap::Second::of(&h))
        .collect();
    if seconds.len() == report.second_histograms.len() {
        if let Ok(e) = figure_interval(
            &seconds,
            Figure::Percentile(q),
            &BootstrapOptions::default(),
        ) {
            let method = format!("block bootstrap over {} s", seconds.len());
            return (Some(e.estimate), Some((e.low, e.high)), method);
        }
    }
    let Some(h) = decode_histogram(&report.histogram).filter(|h| !h.is_empty()) else {
        return (None, None, "no responses".into());
    };
    match quantile_ci(&h, q, CONFIDENCE) {
        Ok(ci) => (
            Some(ci.estimate as f64),
            Some((ci.low as f64, ci.high as f64)),
            "order statistics".into(),
        ),
        Err(e) => (
            Some(h.value_at_quantile(q) as f64),
            None,
            format!("cannot bound: {} samples", e.samples),
        ),
    }
}

/// Wilson's score interval for `k` of `n` at [`CONFIDENCE`] (z = 1.96): it keeps its coverage
/// near 0 where the normal interval collapses to a point.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let n_f = n as f64;
    let p = k as f64 / n_f;
    let denom = 1.0 + z * z / n_f;
    let centre = (p + z * z / (2.0 * n_f)) / denom;
    let half = z * ((p * (1.0 - p) / n_f) + z * z / (4.0 * n_f * n_f)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// One step of the search: a run at one offered rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KneeStep {
    /// Its place in the order the steps ran (0-based).
    pub index: usize,
    /// "climb", "bisect", "repeat" (an unsure step run again, twice as long), "confirm" (a
    /// failing step run again before the search believes it) or "hold" (a run of the
    /// confirmation, [`KneeReport::confirmation`]).
    pub phase: String,
    /// The open-loop rate asked for.
    pub offered_rps: f64,
    /// Responses per second within the step's window (the grace period after it, where a
    /// backlog drains, left out): below the offered rate when the server fell behind.
    pub answered_rps: f64,
    /// Requests intended by the window's end (offered rate × window) but not answered by
    /// then: in flight on the connections, or still queued in the generator for one.
    #[serde(default)]
    pub backlog_end: u64,
    /// Of `backlog_end`, at least this many had not even been sent (more than the
    /// connections could hold in flight, and than a Poisson count or a burst may fall short
    /// of the mean by chance): the server fell behind the offered rate.
    #[serde(default)]
    pub unsent_end: u64,
    /// Requests finished, and of which failed.
    pub requests: u64,
    /// See `requests`.
    pub errors: u64,
    /// errors / requests.
    pub error_rate: f64,
    /// Seconds the verdict rests on.
    pub seconds: usize,
    /// Latency percentiles (µs, from the intended send times); null without responses.
    pub p50_us: Option<u64>,
    /// See `p50_us`.
    pub p99_us: Option<u64>,
    /// See `p50_us`.
    pub p999_us: Option<u64>,
    /// Sends that left late because no connection was free (open loop).
    pub late_no_free_connection: u64,
    /// Sends that left late because the generator's thread waited for a CPU.
    pub late_waited_for_cpu: u64,
    /// Each SLO's verdict.
    pub slos: Vec<SloCall>,
    /// Pass when every SLO passes, fail when any fails or the server fell behind, else
    /// unsure; unsure too, not fail, when the generator waited for a CPU on more than one
    /// send in ten ([`generator_bound`]).
    pub call: Call,
}

/// Responses within a report's load window (its time series' whole seconds up to
/// `duration_s`), the step's intended requests and its backlog at the window's end.
fn window_figures(report: &Report, offered: f64) -> (f64, u64, u64) {
    let window = report.summary.duration_s;
    let answered: u64 = report
        .timeseries
        .iter()
        .filter(|p| p.t_s <= window + 1e-3)
        .map(|p| p.requests)
        .sum();
    let intended = (offered * window).floor() as u64;
    let rps = if window > 0.0 {
        answered as f64 / window
    } else {
        0.0
    };
    (rps, intended, intended.saturating_sub(answered))
}

/// Whether a step fell behind: more sends than one in fifty (and than the connections hold)
/// were still waiting for a connection at the window's end. The server answered slower than
/// the offered rate, so every latency grows with the step's length: no SLO holds there,
/// whatever the step's own interval says.
pub fn fell_behind(step: &KneeStep, intended: u64) -> bool {
    step.unsent_end > 0 && step.unsent_end * 50 > intended
}

/// Whether the generator, not the server, limited a step: its threads waited for a CPU on
/// more than one send in ten. Its latencies (from the intended send times) then hold the
/// generator's own delays, and its backlog sends the generator could not make: a failing
/// step like that is inconclusive about the server (issue 34: nginx's knee was decided by a
/// step where 46 % of the sends waited for a CPU).
pub fn generator_bound(step: &KneeStep) -> bool {
    step.late_waited_for_cpu > 0 && step.late_waited_for_cpu * 10 > step.requests
}

impl KneeStep {
    /// The step from its run's report and verdicts.
    pub fn of(
        index: usize,
        phase: &str,
        offered: f64,
        report: &Report,
        slos: Vec<SloCall>,
    ) -> Self {
        let s = &report.summary;
        let (answered_rps, intended, backlog_end) = window_figures(report, offered);
        // Beyond what the connections hold in flight, and what the arrival process alone may
        // have left unplanned by the end (Poisson: three standard deviations of its count; a
        // burst: one burst), so that `unsent_end` is a lower bound.
        let slack = match (report.config.arrival.as_deref(), report.config.burst) {
            (Some("poisson"), _) => (3.0 * (intended as f64).sqrt()).ceil() as u64,
            (_, Some((size, _))) => size,
            _ => 0,
        };
        let unsent_end = backlog_end.saturating_sub(report.config.connections as u64 + slack);
        let call = if slos.iter().any(|c| c.call == Call::Fail) {
            Call::Fail
        } else if slos.iter().all(|c| c.call == Call::Pass) {
            Call::Pass
        } else {
            Call::Unsure
        };
        let late = s.late_sends_by_cause.as_ref();
        let mut step = KneeStep {
            index,
            phase: phase.into(),
            offered_rps: offered,
            answered_rps,
            backlog_end,
            unsent_end,
            requests: s.requests,
            errors: s.errors,
            error_rate: s.error_rate,
            seconds: report.second_histograms.len(),
            p50_us: report.latency_us.as_ref().map(|p| p.p50),
            p99_us: report.latency_us.as_ref().map(|p| p.p99),
            p999_us: report.latency_us.as_ref().map(|p| p.p999),
            late_no_free_connection: late.map_or(0, |l| l.no_free_connection),
            late_waited_for_cpu: late.and_then(|l| l.waited_for_cpu).unwrap_or(0),
            slos,
            call,
        };
        if fell_behind(&step, intended) {
            step.call = Call::Fail;
        }
        // A fail the generator's own CPU wait explains says nothing of the server.
        if step.call == Call::Fail && generator_bound(&step) {
            step.call = Call::Unsure;
        }
        step
    }
}

/// Where one SLO was crossed along the curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// The SLO.
    pub slo: String,
    /// The highest rate at which it passed, and the lowest at which it failed.
    pub last_pass_rps: Option<f64>,
    /// See `last_pass_rps`.
    pub first_fail_rps: Option<f64>,
    /// Where the estimate meets the limit, interpolated linearly between those two steps.
    pub at_rps: Option<f64>,
}

/// What find-max found (the default: a search with no step yet).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KneeReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The URL searched.
    pub url: String,
    /// The SLOs, as written.
    pub slos: Vec<String>,
    /// Connections the generator had.
    pub connections: usize,
    /// How requests arrived ("uniform", "poisson").
    pub arrival: String,
    /// Each step's length.
    pub step_s: f64,
    /// The unmeasured warm-up before each step (0 in documents from before it existed).
    #[serde(default)]
    pub warmup_s: f64,
    /// The search stops once the lowest fail is within this fraction above the highest pass.
    pub precision: f64,
    /// The steps in the order they ran.
    pub steps: Vec<KneeStep>,
    /// The highest rate at which every SLO passed; null when none did.
    pub highest_pass_rps: Option<f64>,
    /// The highest rate whose step was unsure while its figures met every SLO (not shown
    /// to pass, not shown to fail: too few requests or seconds to bound them), when above
    /// `highest_pass_rps`; null otherwise.
    #[serde(default)]
    pub highest_unsure_rps: Option<f64>,
    /// The lowest rate at which one failed (or was not shown to pass while a figure missed
    /// its SLO, or the generator was short of CPU); null when none did. It caps the search.
    pub lowest_fail_rps: Option<f64>,
    /// Each SLO's crossing.
    pub crossings: Vec<Crossing>,
    /// Why the search stopped.
    pub stopped_because: String,
    /// What limited the server at the step at the lowest failing rate (the one that bounds
    /// the answer, [`KneeReport::lowest_fail_step`]): the late sends, the forensics causes
    /// and the profile's figures, one sentence each.
    pub diagnosis: Vec<String>,
    /// The first failing step's index, if one failed.
    pub first_fail_step: Option<usize>,
    /// The index of the step at the lowest failing rate, the one `diagnosis` is of.
    #[serde(default)]
    pub lowest_fail_step: Option<usize>,
    /// The first failing step's diagnosis, when that step is not the lowest failing rate's
    /// (the climb overshoots: its first fail is far above the knee); else empty.
    #[serde(default)]
    pub first_fail_diagnosis: Vec<String>,
    /// The confirmation's length (`--confirm`, s): each of its runs holds one rate this long,
    /// measured from its start as `run -q RATE -z LEN` measures. 0 when it was skipped
    /// (`--confirm 0`); null in documents from before it existed.
    #[serde(default)]
    pub confirm_s: Option<f64>,
    /// The confirmation's runs in the order they ran (phase "hold"): the highest passing
    /// rate, then, while one misses (or is not shown to meet) the SLO, a rate lower by the
    /// precision, at most [`MAX_HOLDS`] in all. Not on the curve: its steps are the search's.
    #[serde(default)]
    pub confirmation: Vec<KneeStep>,
    /// The rate whose confirmation run passed: the highest rate shown to hold for
    /// `confirm_s`. Null when the confirmation was skipped, had nothing to confirm (no rate
    /// passed), was cut short, or no run of it passed.
    #[serde(default)]
    pub confirmed_rps: Option<f64>,
}

/// The most runs a confirmation makes: the rate found and up to three steps down.
pub const MAX_HOLDS: usize = 4;

/// The phase of a confirmation run.
pub const HOLD: &str = "hold";

impl KneeReport {
    /// The steps by offered rate (the curve); a repeated rate keeps its last step.
    pub fn curve(&self) -> Vec<&KneeStep> {
        let mut by_rate: Vec<&KneeStep> = Vec::new();
        for s in &self.steps {
            match by_rate.iter_mut().find(|p| p.offered_rps == s.offered_rps) {
                Some(p) => *p = s,
                None => by_rate.push(s),
            }
        }
        by_rate.sort_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps));
        by_rate
    }

    /// Fills `crossings` from the curve.
    pub fn find_crossings(&mut self, slos: &[Threshold]) {
        let curve: Vec<KneeStep> = self.curve().into_iter().cloned().collect();
        self.crossings = slos
            .iter()
            .enumerate()
            .map(|(i, slo)| {
                let call = |s: &KneeStep| s.slos.get(i).map(|c| c.call);
                let last_pass = curve.iter().rfind(|s| call(s) == Some(Call::Pass));
                let first_fail = curve.iter().find(|s| {
                    call(s) == Some(Call::Fail)
                        && last_pass.is_none_or(|p| s.offered_rps > p.offered_rps)
                });
                let est = |s: &KneeStep| s.slos.get(i).and_then(|c| c.estimate);
                let at_rps = match (last_pass, first_fail) {
                    (Some(p), Some(f)) => match (est(p), est(f)) {
                        (Some(a), Some(b)) if b > a => {
                            let x = ((slo.limit - a) / (b - a)).clamp(0.0, 1.0);
                            Some(p.offered_rps + x * (f.offered_rps - p.offered_rps))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                Crossing {
                    slo: slo.expr.clone(),
                    last_pass_rps: last_pass.map(|s| s.offered_rps),
                    first_fail_rps: first_fail.map(|s| s.offered_rps),
                    at_rps,
                }
            })
            .collect();
    }

    /// The document as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a find-max report always serializes")
    }

    /// A find-max document read back (`tailscope report KNEE.json`): `None` when `text` is not
    /// one (another kind of report, or not JSON); an error when it is one that cannot be read.
    pub fn from_json(text: &[u8]) -> Option<Result<KneeReport, String>> {
        let value: serde_json::Value = serde_json::from_slice(text).ok()?;
        (value["schema"] == SCHEMA).then(|| {
            serde_json::from_value(value).map_err(|e| {
                format!("a find-max report ({SCHEMA}) with a field missing or wrong: {e}")
            })
        })
    }

    /// The latency SLOs' limits (µs) its page draws as lines, from its SLOs as written.
    pub fn latency_limits(&self) -> Vec<(String, f64)> {
        latency_limits(self.slos.iter().filter_map(|s| Threshold::parse(s).ok()))
    }
}

/// The latency SLOs among `slos`, with their limits (µs): the lines of find-max's page.
pub fn latency_limits(slos: impl IntoIterator<Item = Threshold>) -> Vec<(String, f64)> {
    slos.into_iter()
        .filter(|s| matches!(s.metric, Metric::Latency(_)))
        .map(|s| (s.expr, s.limit))
        .collect()
}

/// A rate in whole requests per second, grouped: 2,500.
pub fn fmt_rps(r: f64) -> String {
    crate::document::fmt_count(r.max(0.0).round() as u64)
}

/// A figure as its SLO's unit writes it.
pub(crate) fn fmt_figure(slo: &str, v: f64) -> String {
    if slo.contains("rate") {
        format!("{:.3} %", v * 100.0)
    } else {
        fmt_us(v.round() as u64)
    }
}

#[cfg(test)]
mod tests;
