//! A suite's HTML page: req/s per target and endpoint with the range of its runs as whiskers
//! and the ratio to the baseline, p99 per target and endpoint, the host, and each result's
//! runs.

use std::fmt::Write as _;

use crate::document::{fmt_count, fmt_rate, fmt_us};

use super::{SuiteReport, SuiteResult};
use crate::chart::{bar_chart, Bar};
use crate::chart_style::{count_axis, us_axis};
use crate::page::{document, escape, footer, kpis, table};

fn label(r: &SuiteResult) -> String {
    format!("{} {}", r.target, r.endpoint)
}

fn or_na<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or("n/a".into(), f)
}

/// The HTML page of a suite's report.
pub fn page(suite: &SuiteReport) -> String {
    let mut body = String::new();
    write_heading(&mut body, suite);
    let measured: Vec<&SuiteResult> = suite.results.iter().filter(|r| r.error.is_none()).collect();
    write_charts(&mut body, &measured);
    write_results_table(&mut body, suite);
    for r in &measured {
        write_runs(&mut body, r, suite.interrupted);
    }
    body.push_str(&footer(&format!(
        "{} {} from its JSON report (schema {})",
        suite.tool.name, suite.tool.version, suite.schema_version
    )));
    document("tailscope suite", &body)
}

/// The title, the host's facts, the key figures and whether the suite was interrupted.
fn write_heading(body: &mut String, suite: &SuiteReport) {
    let _ = writeln!(body, "<h1>tailscope suite</h1>");
    let h = &suite.host;
    let mut facts = vec![format!("{} CPUs", h.cpus)];
    facts.extend(h.cpu_model.clone());
    facts.extend(
        h.memory_kb
            .map(|kb| format!("{} MiB", fmt_count(kb / 1024))),
    );
    facts.extend(h.kernel.as_ref().map(|k| format!("kernel {k}")));
    facts.extend(h.governor.as_ref().map(|g| format!("governor {g}")));
    facts.push(h.date.clone());
    facts.push(format!("{} {}", suite.tool.name, suite.tool.version));
    let _ = writeln!(body, "<p class=\"sub\">{}</p>", escape(&facts.join(" · ")));
    let runs: usize = suite.results.iter().map(|r| r.runs.len()).sum();
    // A result counts as measured when at least one run was; an interrupted suite lists the
    // endpoint it was cut short on, with no run.
    let measured_n = suite.results.iter().filter(|r| !r.runs.is_empty()).count();
    let results = if measured_n == suite.results.len() {
        fmt_count(measured_n as u64)
    } else {
        format!("{measured_n} of {}", suite.results.len())
    };
    body.push_str(&kpis(&[
        ("results measured", results),
        ("runs", fmt_count(runs as u64)),
        (
            "baseline",
            suite.baseline.clone().unwrap_or_else(|| "none".into()),
        ),
    ]));
    if suite.interrupted {
        body.push_str("<p class=\"warn\">The suite was interrupted: the run in progress was cut short and left out, and targets not reached are missing.</p>\n");
    }
}

/// Req/s (median, whiskers from the slowest to the fastest run) and p99 per result.
fn write_charts(body: &mut String, measured: &[&SuiteResult]) {
    body.push_str("<h2>Throughput and tail</h2>\n");
    let rps: Vec<Bar> = measured
        .iter()
        .filter_map(|r| {
            let median = r.rps_median?;
            let ratio = or_na(r.vs_baseline, |x| format!("{x:.2}× the baseline"));
            Some(Bar {
                label: label(r),
                value: median,
                tooltip: format!(
                    "{}: {} req/s (median of {}; {} – {}); {ratio}",
                    label(r),
                    fmt_rate(median),
                    r.runs.len(),
                    or_na(r.rps_min, fmt_rate),
                    or_na(r.rps_max, fmt_rate),
                ),
                whisker: r.rps_min.zip(r.rps_max),
                color: None,
            })
        })
        .collect();
    body.push_str(&bar_chart(
        "suite-rps",
        "Requests per second (median, whiskers: slowest to fastest run)",
        "requests/s",
        &rps,
        &count_axis,
    ));
    let p99: Vec<Bar> = measured
        .iter()
        .filter_map(|r| {
            let p99 = r.p99_us_median?;
            Some(Bar {
                label: label(r),
                value: p99,
                tooltip: format!("{}: p99 {} (median)", label(r), fmt_us(p99.round() as u64)),
                whisker: None,
                color: None,
            })
        })
        .collect();
    body.push_str(&bar_chart(
        "suite-p99",
        "p99 latency (median of the runs)",
        "latency",
        &p99,
        &us_axis,
    ));
}

/// The table of every result with its numbered notes, then the suite's warnings.
fn write_results_table(body: &mut String, suite: &SuiteReport) {
    body.push_str("<h2>Results</h2>\n");
    let base = suite
        .baseline
        .as_ref()
        .map_or("ratio".to_string(), |b| format!("ratio (vs {b}, 95 % CI)"));
    let us = |x: f64| fmt_us(x.round() as u64);
    // The caveats of the markdown table's notes column, numbered alike: a row whose runs
    // warned or named a cause must not look clean on the page.
    let mut notes = Vec::new();
    let rows: Vec<Vec<String>> = suite
        .results
        .iter()
        .map(|r| match &r.error {
            Some(e) => vec![
                r.target.clone(),
                r.endpoint.clone(),
                format!("failed: {}", e.lines().next().unwrap_or("")),
            ],
            None => vec![
                r.target.clone(),
                r.endpoint.clone(),
                super::with_interval(r.rps_median, r.median_ci95.get("rps"), fmt_rate),
                format!(
                    "{} – {}",
                    or_na(r.rps_min, fmt_rate),
                    or_na(r.rps_max, fmt_rate)
                ),
                super::with_interval(r.p50_us_median, r.median_ci95.get("p50_us"), us),
                super::with_interval(r.p95_us_median, r.median_ci95.get("p95_us"), us),
                super::with_interval(r.p99_us_median, r.median_ci95.get("p99_us"), us),
                or_na(r.server_us_per_request_median, |u| format!("{u:.2} µs")),
                super::rounds::ratio_text(r.vs_baseline, r.vs_baseline_ci95, r.vs_baseline_medians),
                super::run_notes(r).map_or(String::new(), |note| {
                    notes.push(note);
                    format!("[{}]", notes.len())
                }),
            ],
        })
        .collect();
    body.push_str(&table(
        &[
            "target",
            "endpoint",
            "req/s (median, 95 % CI)",
            "min – max",
            "p50",
            "p95",
            "p99",
            "server CPU/req",
            &base,
            "notes",
        ],
        &rows,
    ));
    for (i, note) in notes.iter().enumerate() {
        let _ = writeln!(body, "<p class=\"warn\">[{}] {}</p>", i + 1, escape(note));
    }
    for w in super::warnings(&suite.results) {
        let _ = writeln!(body, "<p class=\"warn\">{}</p>", escape(&w));
    }
}

/// One result's runs, and its per-request table for a mix.
fn write_runs(body: &mut String, r: &SuiteResult, interrupted: bool) {
    let _ = writeln!(body, "<h2>{}</h2>", escape(&label(r)));
    if r.runs.is_empty() {
        body.push_str(if interrupted {
            "<p class=\"empty\">Not measured: the suite was interrupted before this endpoint's first run finished.</p>\n"
        } else {
            "<p class=\"empty\">Not measured: no run of this endpoint finished.</p>\n"
        });
        return;
    }
    let ms = |v: Option<u64>| or_na(v, fmt_us);
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                fmt_rate(f.rps),
                fmt_count(f.requests),
                fmt_count(f.errors),
                fmt_count(f.non2xx),
                ms(f.p50_us),
                ms(f.p99_us),
                ms(f.p999_us),
                ms(f.max_us),
                format!("{:.2} s", f.duration_s),
                or_na(f.server_us_per_request, |u| format!("{u:.2} µs")),
            ]
        })
        .collect();
    body.push_str(&table(
        &[
            "run",
            "req/s",
            "requests",
            "errors",
            "non-2xx",
            "p50",
            "p99",
            "p99.9",
            "max",
            "duration",
            "server CPU/req",
        ],
        &rows,
    ));
    if !r.by_request.is_empty() {
        let _ = writeln!(body, "<h3>Per request (medians over the runs)</h3>");
        body.push_str(&table(
            &super::by_request::HEADER,
            &super::by_request::rows(r),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_suite_says_what_was_not_measured() {
        let run = serde_json::json!({"rps": 100.0, "requests": 100, "errors": 0, "p50_us": 50,
            "p99_us": 90, "p999_us": 95, "max_us": 99, "duration_s": 1.0,
            "server_us_per_request": null});
        let suite: SuiteReport = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "kind": "suite",
            "tool": {"name": "tailscope", "version": "0"},
            "host": {"kernel": null, "cpu_model": null, "cpus": 2, "memory_kb": null,
                     "governor": null, "date": "2026-11-22T00:00:00Z"},
            "baseline": null, "load": {},
            "results": [
                {"target": "ref", "endpoint": "/a", "error": null, "runs": [run],
                 "rps_median": 100.0, "rps_min": 100.0, "rps_max": 100.0,
                 "p50_us_median": 50.0, "p99_us_median": 90.0,
                 "server_us_per_request_median": null, "vs_baseline": null},
                {"target": "ref", "endpoint": "/b", "error": null, "runs": [],
                 "rps_median": null, "rps_min": null, "rps_max": null,
                 "p50_us_median": null, "p99_us_median": null,
                 "server_us_per_request_median": null, "vs_baseline": null}
            ],
            "interrupted": true
        }))
        .unwrap();
        let page = page(&suite);
        assert!(page.contains("<div class=\"v\">1 of 2</div>"), "{page}");
        assert!(
            page.contains("Not measured: the suite was interrupted"),
            "{page}"
        );
        // The p99 axis starts at a plain 0, not "0µs" under ticks in another unit.
        assert!(!page.contains(">0µs<"), "{page}");
    }

    #[test]
    fn the_page_shows_the_caveats_the_markdown_notes() {
        let run = |warnings: Vec<&str>, causes: Vec<&str>| {
            serde_json::json!({"rps": 100.0, "requests": 100, "errors": 0, "p50_us": 50,
                "p99_us": 90, "p999_us": 95, "max_us": 99, "duration_s": 1.0,
                "server_us_per_request": null, "warnings": warnings, "causes": causes})
        };
        let result = |endpoint: &str, runs: Vec<serde_json::Value>| {
            serde_json::json!({"target": "ref", "endpoint": endpoint, "error": null,
                "runs": runs, "rps_median": 100.0, "rps_min": 100.0, "rps_max": 100.0,
                "p50_us_median": 50.0, "p99_us_median": 90.0,
                "server_us_per_request_median": null, "vs_baseline": null})
        };
        let suite: SuiteReport = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "kind": "suite",
            "tool": {"name": "tailscope", "version": "0"},
            "host": {"kernel": null, "cpu_model": null, "cpus": 2, "memory_kb": null,
                     "governor": null, "date": "2026-11-22T00:00:00Z"},
            "baseline": null, "load": {},
            "results": [
                result("/clean", vec![run(vec![], vec![])]),
                result("/busy", vec![run(vec![], vec![]), run(
                    vec!["the generator fell behind: 40 % of sends were late"],
                    vec!["cpu_contention"],
                )]),
            ],
            "interrupted": false
        }))
        .unwrap();
        let markdown = super::super::markdown(&suite.results, None);
        assert!(markdown.contains("[1] ref /busy: run 2:"), "{markdown}");
        let page = page(&suite);
        assert!(page.contains("<td>[1]</td>"), "the row is marked: {page}");
        assert!(
            page.contains(
                "[1] ref /busy: run 2: the generator fell behind; diagnosed cpu_contention"
            ),
            "{page}"
        );
    }
}
