//! A suite: its file ([`file`](mod@file): parsed and validated before anything starts), its
//! results (the JSON schema of `tailscope suite --json`), the statistics over its runs
//! (medians, ranges, the baseline ratio), its markdown table and its page. The binary runs
//! the suite; this module knows nothing of the command line.

pub mod by_request;
pub mod file;
mod load;
mod page;
pub mod rounds;

pub use by_request::{NameFigures, NameSummary};
pub use load::SuiteLoad;
pub use page::page;
pub use rounds::{round_order, Rounds};

use std::collections::BTreeMap;
use std::time::SystemTime;

/// The version of the suite report's schema this build writes and reads (`schema_version`).
pub const SCHEMA_VERSION: u32 = 1;

use crate::document::{fmt_count, fmt_us, Report, Tool};
use serde::{Deserialize, Serialize};
use tailscope_forensics::{Cause, Diagnosis};

/// The machine a suite ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    /// `uname -r`.
    pub kernel: Option<String>,
    /// The first CPU's model name.
    pub cpu_model: Option<String>,
    /// CPUs this process may use.
    pub cpus: usize,
    /// Total memory in KiB.
    pub memory_kb: Option<u64>,
    /// CPU 0's frequency governor, where the kernel exposes it.
    pub governor: Option<String>,
    /// When the suite started (RFC 3339, UTC).
    pub date: String,
}

impl Host {
    /// This machine's facts from /proc and /sys; what cannot be read is `None`.
    pub fn of_this_machine() -> Host {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let cpu_model = read("/proc/cpuinfo").and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let memory_kb = read("/proc/meminfo").and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        });
        Host {
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model,
            cpus: tailscope_targets::cpus::available().len(),
            memory_kb,
            governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        }
    }
}

/// The figures of one measured run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunFigures {
    /// Requests per second.
    pub rps: f64,
    /// Requests counted.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Responses whose status was not 2xx (a 404 is a response, not an error, but its
    /// figures are of an error page, not of the endpoint).
    #[serde(default)]
    pub non2xx: u64,
    /// Median latency (null when nothing was measured).
    pub p50_us: Option<u64>,
    /// p95 (µs), if any response.
    #[serde(default)]
    pub p95_us: Option<u64>,
    /// 99th percentile.
    pub p99_us: Option<u64>,
    /// 99.9th percentile.
    pub p999_us: Option<u64>,
    /// Slowest.
    pub max_us: Option<u64>,
    /// The measured window.
    pub duration_s: f64,
    /// The server's CPU time per request (its service demand), from the profiler.
    #[serde(default)]
    pub server_us_per_request: Option<f64>,
    /// A mix's figures per request name (`load = "mix.toml"`); empty for a single request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_request: BTreeMap<String, NameFigures>,
    /// The run's warnings, as its own report gives them (`warnings`): a run whose generator
    /// fell behind measured the generator too, and the suite's medians took it as the
    /// server's without a word.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The causes its diagnosis named (`diagnosis[].cause`), most specific first, each once.
    #[serde(default)]
    pub causes: Vec<Cause>,
}

impl RunFigures {
    /// The figures of a run's report (its warnings with them); `server_us_per_request` from
    /// its profile. The diagnosis's causes are added by [`RunFigures::with_diagnosis`].
    pub fn of(report: &Report, server_us_per_request: Option<f64>) -> RunFigures {
        let p = report.latency_us;
        RunFigures {
            rps: report.summary.rps,
            requests: report.summary.requests,
            errors: report.summary.errors,
            non2xx: report.summary.non2xx,
            p50_us: p.map(|p| p.p50),
            p95_us: p.map(|p| p.p95),
            p99_us: p.map(|p| p.p99),
            p999_us: p.map(|p| p.p999),
            max_us: p.map(|p| p.max),
            duration_s: report.summary.duration_s,
            server_us_per_request,
            by_request: by_request::of_report(report),
            warnings: report.warnings.clone(),
            causes: Vec::new(),
        }
    }

    /// The figures with the causes `diagnosis` named, each once, in its order.
    pub fn with_diagnosis(mut self, diagnosis: &[Diagnosis]) -> RunFigures {
        for d in diagnosis {
            if !self.causes.contains(&d.cause) {
                self.causes.push(d.cause);
            }
        }
        self
    }

    /// Whether the run had anything to say beside its figures: a warning or a cause.
    pub fn has_notes(&self) -> bool {
        !self.warnings.is_empty() || !self.causes.is_empty()
    }
}

/// One target × endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteResult {
    /// Target name.
    pub target: String,
    /// Endpoint path.
    pub endpoint: String,
    /// Why there are no runs, if there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every measured run.
    pub runs: Vec<RunFigures>,
    /// Median req/s over the runs.
    pub rps_median: Option<f64>,
    /// Slowest run's req/s.
    pub rps_min: Option<f64>,
    /// Fastest run's req/s.
    pub rps_max: Option<f64>,
    /// Median of the runs' p50.
    pub p50_us_median: Option<f64>,
    /// Median of the runs' p95.
    #[serde(default)]
    pub p95_us_median: Option<f64>,
    /// Median of the runs' p99.
    pub p99_us_median: Option<f64>,
    /// The 95 % interval of each median, by order statistics over the runs (null with fewer
    /// than 6 runs, which cannot bound a median at 95 %): `rps`, `p50_us`, `p95_us`, `p99_us`.
    #[serde(default)]
    pub median_ci95: BTreeMap<String, [f64; 2]>,
    /// Median of the runs' server CPU µs per request.
    #[serde(default)]
    pub server_us_per_request_median: Option<f64>,
    /// The ratio of req/s to the baseline target's on the same endpoint: from runs paired by
    /// round, the geometric mean of the per-round ratios (else, where the runs do not pair,
    /// rps_median / the baseline's rps_median).
    pub vs_baseline: Option<f64>,
    /// The ratio's 95 % interval (Student's t over the rounds' log ratios); null where the
    /// runs do not pair or there are fewer than 2 rounds.
    #[serde(default)]
    pub vs_baseline_ci95: Option<[f64; 2]>,
    /// rps_median / the baseline's rps_median, where `vs_baseline` is the rounds' ratio: the
    /// table's medians can say the other way round from it (rounds 0.5×, 2×, 2× make 1.26×
    /// while the medians make 0.5×), and the ratio cell then says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_baseline_medians: Option<f64>,
    /// A mix's figures per request name over the runs; empty for a single request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_request: BTreeMap<String, NameSummary>,
}

impl SuiteResult {
    /// Errors over requests, over all runs (`None` without a request).
    pub fn error_rate(&self) -> Option<f64> {
        let requests: u64 = self.runs.iter().map(|r| r.requests).sum();
        let errors: u64 = self.runs.iter().map(|r| r.errors).sum();
        (requests > 0).then(|| errors as f64 / requests as f64)
    }

    /// A result with its runs; the medians and ratio are filled in by [`summarize`].
    pub fn new(target: &str, endpoint: &str, error: Option<String>, runs: Vec<RunFigures>) -> Self {
        SuiteResult {
            target: target.to_string(),
            endpoint: endpoint.to_string(),
            error,
            runs,
            rps_median: None,
            rps_min: None,
            rps_max: None,
            p50_us_median: None,
            p95_us_median: None,
            p99_us_median: None,
            median_ci95: BTreeMap::new(),
            server_us_per_request_median: None,
            vs_baseline: None,
            vs_baseline_ci95: None,
            vs_baseline_medians: None,
            by_request: BTreeMap::new(),
        }
    }
}

/// The suite's JSON report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteReport {
    /// 1.
    pub schema_version: u32,
    /// "suite".
    pub kind: String,
    /// Who wrote it.
    pub tool: Tool,
    /// Where it ran.
    pub host: Host,
    /// The baseline target, if any.
    pub baseline: Option<String>,
    /// Connections, duration, warm-up, runs, pipelining of every run.
    pub load: SuiteLoad,
    /// Every target × endpoint, in order.
    pub results: Vec<SuiteResult>,
    /// Stopped early by a signal.
    pub interrupted: bool,
    /// How the targets' runs were interleaved in rounds (the seed and each round's order);
    /// null in a suite written before rounds.
    #[serde(default)]
    pub rounds: Option<Rounds>,
}

/// The median of a non-empty list (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// Fills in each result's medians (with their intervals), range and ratio to the baseline
/// target (with its interval).
pub fn summarize(results: &mut [SuiteResult], baseline: Option<&str>) {
    for r in results.iter_mut() {
        let rps: Vec<f64> = r.runs.iter().map(|x| x.rps).collect();
        r.rps_median = median(&rps);
        r.rps_min = rps.iter().copied().reduce(f64::min);
        r.rps_max = rps.iter().copied().reduce(f64::max);
        let latency = |pick: fn(&RunFigures) -> Option<u64>| -> Vec<f64> {
            r.runs
                .iter()
                .filter_map(|x| pick(x).map(|v| v as f64))
                .collect()
        };
        let (p50, p95, p99) = (
            latency(|x| x.p50_us),
            latency(|x| x.p95_us),
            latency(|x| x.p99_us),
        );
        r.p50_us_median = median(&p50);
        r.p95_us_median = median(&p95);
        r.p99_us_median = median(&p99);
        r.median_ci95 = [
            ("rps", &rps),
            ("p50_us", &p50),
            ("p95_us", &p95),
            ("p99_us", &p99),
        ]
        .into_iter()
        .filter_map(|(name, v)| rounds::median_interval(v).map(|ci| (name.to_string(), ci)))
        .collect();
        let demand: Vec<f64> = r
            .runs
            .iter()
            .filter_map(|x| x.server_us_per_request)
            .collect();
        r.server_us_per_request_median = median(&demand);
        r.by_request = by_request::summarize(&r.runs);
    }
    let Some(base) = baseline else { return };
    let base_runs: Vec<(String, Option<f64>, Vec<f64>)> = results
        .iter()
        .filter(|r| r.target == base)
        .map(|r| {
            (
                r.endpoint.clone(),
                r.rps_median,
                r.runs.iter().map(|x| x.rps).collect(),
            )
        })
        .collect();
    for r in results.iter_mut() {
        let Some((_, b, b_runs)) = base_runs.iter().find(|(e, _, _)| *e == r.endpoint) else {
            continue;
        };
        if r.target == base {
            // The baseline against itself: 1 by definition, no interval to give.
            (r.vs_baseline, r.vs_baseline_ci95) = (b.filter(|b| *b > 0.0).map(|_| 1.0), None);
            continue;
        }
        let runs: Vec<f64> = r.runs.iter().map(|x| x.rps).collect();
        // Run i of each is of round i when both have every round's run.
        let paired = (runs.len() == b_runs.len())
            .then(|| rounds::paired_ratio(&runs, b_runs))
            .flatten();
        let medians = match (r.rps_median, b) {
            (Some(x), Some(b)) if *b > 0.0 => Some(x / b),
            _ => None,
        };
        (r.vs_baseline, r.vs_baseline_ci95, r.vs_baseline_medians) = match paired {
            Some((ratio, ci)) => (Some(ratio), Some(ci), medians),
            None => (medians, None, None),
        };
    }
}

/// A median with its 95 % interval where it has one: `85263 (84100–86020)`.
pub fn with_interval(
    value: Option<f64>,
    interval: Option<&[f64; 2]>,
    show: impl Fn(f64) -> String,
) -> String {
    match (value, interval) {
        (None, _) => "n/a".into(),
        (Some(v), None) => show(v),
        (Some(v), Some([lo, hi])) => format!("{} ({}–{})", show(v), show(*lo), show(*hi)),
    }
}

/// The markdown table of a suite's results: each median with its 95 % interval (6 runs or
/// more), and each ratio to the baseline with its interval, or "no clear difference".
pub fn markdown(results: &[SuiteResult], baseline: Option<&str>) -> String {
    let mut out = String::new();
    let base = baseline.map_or(String::new(), |b| format!(" (vs {b}, 95 % CI)"));
    out.push_str(&format!(
        "| target | endpoint | req/s (median, 95 % CI) | min – max | p50 | p95 | p99 | server CPU/req | ratio{base} | notes |\n"
    ));
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    let mut notes = Vec::new();
    for r in results {
        if let Some(e) = &r.error {
            out.push_str(&format!(
                "| {} | {} | failed: {} | | | | | | | |\n",
                r.target,
                r.endpoint,
                e.lines().next().unwrap_or("")
            ));
            continue;
        }
        let marker = match run_notes(r) {
            Some(note) => {
                notes.push(note);
                format!("[{}]", notes.len())
            }
            None => String::new(),
        };
        let num = |v: Option<f64>| v.map_or("n/a".to_string(), crate::compare::whole_rate);
        let us = |x: f64| fmt_us(x.round() as u64);
        let lat = |v: Option<f64>, name: &str| with_interval(v, r.median_ci95.get(name), us);
        out.push_str(&format!(
            "| {} | {} | {} | {} – {} | {} | {} | {} | {} | {} | {marker} |\n",
            r.target,
            r.endpoint,
            with_interval(
                r.rps_median,
                r.median_ci95.get("rps"),
                crate::compare::whole_rate
            ),
            num(r.rps_min),
            num(r.rps_max),
            lat(r.p50_us_median, "p50_us"),
            lat(r.p95_us_median, "p95_us"),
            lat(r.p99_us_median, "p99_us"),
            r.server_us_per_request_median
                .map_or("n/a".to_string(), |u| format!("{u:.2} µs")),
            rounds::ratio_text(r.vs_baseline, r.vs_baseline_ci95, r.vs_baseline_medians),
        ));
    }
    if results.iter().any(|r| (1..6).contains(&r.runs.len())) {
        out.push_str(
            "\nA median carries its 95 % interval from 6 runs on (order statistics); with fewer, the median alone.\n",
        );
    }
    for (i, note) in notes.iter().enumerate() {
        out.push_str(&format!("\n[{}] {note}\n", i + 1));
    }
    for w in warnings(results) {
        out.push_str(&format!("\n**Warning:** {w}\n"));
    }
    out.push_str(&by_request::markdown(results));
    out
}

/// The footnote of a row whose runs warned or had causes named: per such run, the head of
/// each warning (up to its first ": ", as the run's own text starts it) and the causes; the
/// whole warnings are in the JSON (`runs[].warnings`, `runs[].causes`). `None` for a row
/// whose runs said nothing.
fn run_notes(r: &SuiteResult) -> Option<String> {
    let runs: Vec<String> = r
        .runs
        .iter()
        .enumerate()
        .filter(|(_, f)| f.has_notes())
        .map(|(i, f)| {
            let mut said: Vec<String> = f.warnings.iter().map(|w| warning_head(w)).collect();
            if !f.causes.is_empty() {
                let causes: Vec<&str> = f.causes.iter().map(|c| c.as_str()).collect();
                said.push(format!("diagnosed {}", causes.join(", ")));
            }
            format!("run {}: {}", i + 1, said.join("; "))
        })
        .collect();
    (!runs.is_empty()).then(|| {
        format!(
            "{} {}: {} (the JSON's runs[].warnings and runs[].causes say them whole).",
            r.target,
            r.endpoint,
            runs.join(" · ")
        )
    })
}

/// A warning's head: up to its first ": " (`the generator fell behind`), at most 80
/// characters, cut at a word with "…".
fn warning_head(w: &str) -> String {
    const MAX: usize = 80;
    let head = w.split(": ").next().unwrap_or(w).trim_end_matches('.');
    if head.chars().count() <= MAX {
        return head.to_string();
    }
    let cut: String = head.chars().take(MAX).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(a, _)| a);
    format!("{cut}…")
}

/// One line per endpoint whose runs had responses that were not 2xx, or errors: a suite
/// that compares 404 pages as if they were the endpoint must say so where its table is read.
pub fn warnings(results: &[SuiteResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| {
            let requests: u64 = r.runs.iter().map(|f| f.requests).sum();
            let non2xx: u64 = r.runs.iter().map(|f| f.non2xx).sum();
            let errors: u64 = r.runs.iter().map(|f| f.errors).sum();
            let pct = |n: u64| 100.0 * n as f64 / requests.max(1) as f64;
            let mut what = Vec::new();
            if non2xx > 0 {
                what.push(format!(
                    "{} of {} requests ({:.1} %) were answered with a status other than 2xx (check the endpoint's path and method)",
                    fmt_count(non2xx),
                    fmt_count(requests),
                    pct(non2xx)
                ));
            }
            if errors > 0 {
                what.push(format!(
                    "{} of {} requests ({:.1} %) failed",
                    fmt_count(errors),
                    fmt_count(requests),
                    pct(errors)
                ));
            }
            (!what.is_empty()).then(|| format!("{} {}: {}.", r.target, r.endpoint, what.join("; ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(target: &str, endpoint: &str, rps: &[f64], p99: &[u64]) -> SuiteResult {
        SuiteResult::new(
            target,
            endpoint,
            None,
            rps.iter()
                .zip(p99)
                .map(|(&rps, &p99)| RunFigures {
                    rps,
                    requests: 1,
                    errors: 0,
                    non2xx: 0,
                    p50_us: Some(p99 / 2),
                    p95_us: Some(p99 / 2),
                    p99_us: Some(p99),
                    p999_us: None,
                    max_us: None,
                    duration_s: 1.0,
                    server_us_per_request: Some(rps / 100.0),
                    by_request: BTreeMap::new(),
                    warnings: Vec::new(),
                    causes: Vec::new(),
                })
                .collect(),
        )
    }

    /// A suite that loaded a path the server answers with 404 says so under its table (a
    /// newcomer's suite compared two servers' 404 pages as if they served the endpoint).
    #[test]
    fn endpoints_answered_with_errors_or_non_2xx_are_warned_under_the_table() {
        let mut not_found = result("python", "/json", &[900.0, 950.0], &[500, 600]);
        not_found.runs.iter_mut().for_each(|r| {
            r.requests = 1_000;
            r.non2xx = 1_000;
        });
        let mut flaky = result("nginx", "/", &[900.0], &[500]);
        flaky.runs[0].requests = 2_000;
        flaky.runs[0].errors = 20;
        let fine = result("nginx", "/ok", &[900.0], &[500]);
        let results = vec![not_found, flaky, fine];
        assert_eq!(
            warnings(&results),
            vec![
                "python /json: 2,000 of 2,000 requests (100.0 %) were answered with a status other than 2xx (check the endpoint's path and method).".to_string(),
                "nginx /: 20 of 2,000 requests (1.0 %) failed.".to_string(),
            ]
        );
        let table = markdown(&results, None);
        assert!(
            table.contains("**Warning:** python /json: 2,000 of 2,000"),
            "{table}"
        );
        assert!(!table.contains("/ok:"), "{table}");
        // Suite files written before the field existed still read.
        let old = r#"{"rps":1.0,"requests":1,"errors":0,"p50_us":1,"p99_us":1,"p999_us":1,"max_us":1,"duration_s":1.0}"#;
        assert_eq!(serde_json::from_str::<RunFigures>(old).unwrap().non2xx, 0);
    }

    /// Each run's warnings and diagnosed causes are in the JSON and footnoted under the
    /// table (a suite dropped them: a run whose generator fell behind read as the server's).
    #[test]
    fn runs_that_warned_or_had_causes_are_marked_and_keep_them_in_the_json() {
        let diagnosis = |cause| Diagnosis {
            cause,
            evidence: String::new(),
            requests_affected: 0,
            window: None,
            inside: None,
            requests: Vec::new(),
        };
        let mut r = result("ref", "/plaintext", &[900.0, 950.0], &[500, 600]);
        let warned = RunFigures {
            warnings: vec!["the generator fell behind: a generator thread's event loop was held up to 500.00ms in one second (generator_lag_us); the latency then includes the generator's own delay".into()],
            ..r.runs[1].clone()
        }
        .with_diagnosis(&[
            diagnosis(Cause::CpuContention),
            diagnosis(Cause::GeneratorSaturated),
            diagnosis(Cause::CpuContention),
        ]);
        assert_eq!(
            warned.causes,
            [Cause::CpuContention, Cause::GeneratorSaturated]
        );
        r.runs[1] = warned;
        let quiet = result("nginx", "/plaintext", &[900.0], &[500]);
        let mut results = vec![quiet, r];
        summarize(&mut results, None);
        let json = serde_json::to_value(&results[1]).unwrap();
        assert_eq!(json["runs"][0]["warnings"], serde_json::json!([]));
        assert_eq!(json["runs"][0]["causes"], serde_json::json!([]));
        assert_eq!(
            json["runs"][1]["causes"],
            serde_json::json!(["cpu_contention", "generator_saturated"])
        );
        assert!(json["runs"][1]["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("the generator fell behind: "));
        let table = markdown(&results, None);
        assert!(
            table.contains(
                "| nginx | /plaintext | 900 | 900 – 900 | 250µs | 250µs | 500µs | 9.00 µs | n/a |  |\n"
            ),
            "{table}"
        );
        assert!(table.contains("| n/a | [1] |\n"), "{table}");
        assert!(
            table.contains("\n[1] ref /plaintext: run 2: the generator fell behind; diagnosed cpu_contention, generator_saturated (the JSON's runs[].warnings and runs[].causes say them whole).\n"),
            "{table}"
        );
        // Suite files written before the fields existed still read.
        let old = r#"{"rps":1.0,"requests":1,"errors":0,"p50_us":1,"p99_us":1,"p999_us":1,"max_us":1,"duration_s":1.0}"#;
        let old: RunFigures = serde_json::from_str(old).unwrap();
        assert!(old.warnings.is_empty() && old.causes.is_empty());
        assert_eq!(
            warning_head(&"word ".repeat(30)),
            format!("{}…", "word ".repeat(16).trim_end())
        );
    }

    #[test]
    fn medians_ranges_and_baseline_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let mut results = vec![
            result(
                "nginx",
                "/plaintext",
                &[100.0, 120.0, 110.0],
                &[900, 1000, 1100],
            ),
            result(
                "ref",
                "/plaintext",
                &[260.0, 250.0, 270.0],
                &[400, 500, 450],
            ),
            result("ref", "/json", &[200.0], &[600]),
        ];
        summarize(&mut results, Some("nginx"));
        assert_eq!(results[0].rps_median, Some(110.0));
        assert_eq!(
            (results[1].rps_min, results[1].rps_max),
            (Some(250.0), Some(270.0))
        );
        assert_eq!(results[1].p99_us_median, Some(450.0));
        assert_eq!(results[0].vs_baseline, Some(1.0));
        // Paired by round: the geometric mean of 260/100, 250/120, 270/110.
        let paired =
            ((260.0f64 / 100.0).ln() + (250.0f64 / 120.0).ln() + (270.0f64 / 110.0).ln()) / 3.0;
        assert!((results[1].vs_baseline.unwrap() - paired.exp()).abs() < 1e-9);
        let [lo, hi] = results[1].vs_baseline_ci95.unwrap();
        assert!(
            lo < paired.exp() && paired.exp() < hi && lo > 1.0,
            "{lo} {hi}"
        );
        assert_eq!(results[2].vs_baseline, None, "no baseline run on /json");
        assert_eq!(results[1].server_us_per_request_median, Some(2.6));
        let table = markdown(&results, Some("nginx"));
        assert!(
            table.contains(
                &format!(
                    "| ref | /plaintext | 260 | 250 – 270 | 225µs | 225µs | 450µs | 2.60 µs | {:.2}× ({lo:.2}–{hi:.2}) |",
                    paired.exp()
                )
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| ref | /json | 200 | 200 – 200 | 300µs | 300µs | 600µs | 2.00 µs | n/a |"
            ),
            "{table}"
        );
        assert!(!table.contains("per request"), "no mix, no table per name");
    }

    /// An endpoint that is a mix gets its names' medians over the runs, and a table of them.
    #[test]
    fn a_mix_has_medians_and_a_table_per_name() {
        let mut r = result(
            "ref",
            "mix.toml",
            &[300.0, 310.0, 320.0],
            &[900, 1000, 1100],
        );
        for (i, run) in r.runs.iter_mut().enumerate() {
            let i = i as u64;
            let name = |requests, errors, p99| NameFigures {
                requests,
                errors,
                rps: Some(requests as f64),
                p50_us: Some(p99 / 4),
                p99_us: Some(p99),
            };
            run.by_request
                .insert("search".into(), name(200 + i, 0, 400 + i * 100));
            run.by_request.insert("up|load".into(), name(100, i, 5_000));
        }
        summarize(std::slice::from_mut(&mut r), None);
        let search = &r.by_request["search"];
        assert_eq!((search.requests, search.errors), (603, 0));
        assert_eq!(search.rps_median, Some(201.0));
        assert_eq!(search.p99_us_median, Some(500.0));
        assert_eq!(r.by_request["up|load"].errors, 3);
        let table = markdown(std::slice::from_ref(&r), None);
        assert!(table.contains("ref mix.toml, per request:"), "{table}");
        assert!(
            table.contains("| search | 201 | 125µs | 500µs | 0 of 603 |"),
            "{table}"
        );
        assert!(
            table.contains("| up\\|load | 100 | 1.25ms | 5.00ms | 3 of 300 |"),
            "{table}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["by_request"]["search"]["requests"], 603);
        assert_eq!(json["runs"][0]["by_request"]["search"]["p99_us"], 400);
    }
}
