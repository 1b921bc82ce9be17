//! An endpoint that is a mix (`load = "mix.toml"`): its figures per request name, in each
//! run and as medians over the runs, in the results, the markdown and the page.

use std::collections::BTreeMap;

use crate::document::{fmt_count, fmt_us, Report};
use serde::{Deserialize, Serialize};

use super::{median, RunFigures, SuiteResult};

/// One request name's figures in one run of a mix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NameFigures {
    /// Its requests counted.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Its requests per second (null for a window of no length).
    pub rps: Option<f64>,
    /// Its median latency (null when nothing was measured).
    pub p50_us: Option<u64>,
    /// Its 99th percentile.
    pub p99_us: Option<u64>,
}

/// A run's figures per name (empty for a single request).
pub fn of_report(report: &Report) -> BTreeMap<String, NameFigures> {
    report
        .by_request
        .iter()
        .map(|(name, r)| {
            (
                name.clone(),
                NameFigures {
                    requests: r.requests,
                    errors: r.errors,
                    rps: r.rps,
                    p50_us: r.latency_us.map(|p| p.p50),
                    p99_us: r.latency_us.map(|p| p.p99),
                },
            )
        })
        .collect()
}

/// One request name over an endpoint's runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NameSummary {
    /// Its requests over all runs.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Median of the runs' req/s.
    pub rps_median: Option<f64>,
    /// Median of the runs' p50.
    pub p50_us_median: Option<f64>,
    /// Median of the runs' p99.
    pub p99_us_median: Option<f64>,
}

/// The figures per name over `runs` (every name any run had).
pub fn summarize(runs: &[RunFigures]) -> BTreeMap<String, NameSummary> {
    let mut names: Vec<&String> = runs.iter().flat_map(|r| r.by_request.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let of: Vec<&NameFigures> =
                runs.iter().filter_map(|r| r.by_request.get(name)).collect();
            let values = |f: fn(&NameFigures) -> Option<f64>| -> Vec<f64> {
                of.iter().filter_map(|n| f(n)).collect()
            };
            (
                name.clone(),
                NameSummary {
                    requests: of.iter().map(|n| n.requests).sum(),
                    errors: of.iter().map(|n| n.errors).sum(),
                    rps_median: median(&values(|n| n.rps)),
                    p50_us_median: median(&values(|n| n.p50_us.map(|v| v as f64))),
                    p99_us_median: median(&values(|n| n.p99_us.map(|v| v as f64))),
                },
            )
        })
        .collect()
}

/// The header of a table per name.
pub(super) const HEADER: [&str; 5] = ["request", "req/s (median)", "p50", "p99", "errors"];

/// The rows of `r`'s table per name (none for a single request).
pub(super) fn rows(r: &SuiteResult) -> Vec<Vec<String>> {
    let lat = |v: Option<f64>| v.map_or("n/a".to_string(), |x| fmt_us(x.round() as u64));
    r.by_request
        .iter()
        .map(|(name, n)| {
            vec![
                name.clone(),
                n.rps_median
                    .map_or("n/a".into(), |x| format!("{:.0}", x.round())),
                lat(n.p50_us_median),
                lat(n.p99_us_median),
                format!("{} of {}", fmt_count(n.errors), fmt_count(n.requests)),
            ]
        })
        .collect()
}

/// A markdown table per endpoint that is a mix, after the suite's table.
pub fn markdown(results: &[SuiteResult]) -> String {
    let mut out = String::new();
    for r in results.iter().filter(|r| !r.by_request.is_empty()) {
        out.push_str(&format!("\n{} {}, per request:\n\n", r.target, r.endpoint));
        out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
        out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
        for row in rows(r) {
            // A name may hold a '|' (a URL list's query): escaped, the table stays whole.
            let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    out
}
