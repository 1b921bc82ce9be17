//! A mix's figures per request name on the run's page: the table by request and the names
//! over time.

use std::fmt::Write as _;

use crate::document::{fmt_count, fmt_rate, fmt_us, Report};

use super::{in_load, over_time};
use crate::chart::Scale;
use crate::chart_style::*;
use crate::page::table as html_table;

/// The table by request: each name's figures over the run.
pub(super) fn table(report: &Report) -> String {
    let mut out = String::new();
    if !report.by_request.is_empty() {
        out.push_str("<h2>By request</h2>\n");
        let rows: Vec<Vec<String>> = report
            .by_request
            .iter()
            .map(|(name, r)| {
                let lat = |f: fn(&tailscope_loadgen::Percentiles) -> u64| {
                    r.latency_us.as_ref().map_or("n/a".into(), |p| fmt_us(f(p)))
                };
                vec![
                    name.clone(),
                    format!("{} {}", r.method, r.target),
                    fmt_count(r.requests),
                    format!("{:.1} %", r.share * 100.0),
                    r.rps.map_or("n/a".into(), fmt_rate),
                    fmt_count(r.errors),
                    fmt_count(r.non2xx),
                    lat(|p| p.p50),
                    lat(|p| p.p99),
                    lat(|p| p.max),
                ]
            })
            .collect();
        out.push_str(&html_table(
            &[
                "request", "sent as", "requests", "share", "req/s", "errors", "non-2xx", "p50",
                "p99", "max",
            ],
            &rows,
        ));
    }
    out
}

/// A mix's names over time: requests per second and p99 per second of each of the names
/// with the most requests (as many as the palette has colours; the rest are in the table).
pub(super) fn charts(report: &Report) -> String {
    let mut names: Vec<(&String, &crate::document::RequestReport)> = report
        .by_request
        .iter()
        .filter(|(_, r)| !r.timeseries.is_empty())
        .collect();
    if names.is_empty() {
        return String::new();
    }
    names.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(b.0)));
    let left_out = names.len().saturating_sub(PALETTE.len());
    names.truncate(PALETTE.len());
    let mut out = String::new();
    if left_out > 0 {
        let _ = writeln!(
            out,
            "<p>Over time: the {} requests with the most requests; {left_out} more are in the table by request.</p>",
            PALETTE.len()
        );
    }
    let load_seconds: Vec<f64> = report
        .timeseries
        .iter()
        .filter(|p| in_load(report, p))
        .map(|p| p.t_s)
        .collect();
    // A name has a point for each second it had requests in: the others had none (0/s).
    let rates = names
        .iter()
        .zip(PALETTE)
        .map(|((name, r), color)| {
            let points = load_seconds
                .iter()
                .map(|&t| {
                    let n = r
                        .timeseries
                        .iter()
                        .find(|p| p.t_s == t)
                        .map_or(0, |p| p.requests);
                    (t, n as f64)
                })
                .collect();
            series(name, color, points)
        })
        .collect();
    out.push_str(&over_time(
        "throughput-by-request",
        "Throughput by request (requests finished per second)",
        ("requests/s", Scale::Linear, &count_axis),
        rates,
    ));
    // A second without a response of the name has no p99 and no point: a gap in its line
    // (steps join adjacent seconds only). The seconds are the load's, as for the rates.
    let p99s = names
        .iter()
        .zip(PALETTE)
        .map(|((name, r), color)| {
            let points = r
                .timeseries
                .iter()
                .filter(|p| load_seconds.contains(&p.t_s))
                .filter_map(|p| p.p99_us.map(|v| (p.t_s, v as f64)))
                .collect();
            series(name, color, points)
        })
        .collect();
    out.push_str(&over_time(
        "p99-by-request",
        "p99 per second by request (log scale)",
        ("latency", Scale::Log, &us_axis),
        p99s,
    ));
    out
}

#[cfg(test)]
mod tests {
    use crate::run_page::run_page;
    use crate::run_page::tests::report_of;

    /// A mix's names over time: their rates and p99s, one line each, on the page.
    #[test]
    fn a_mix_has_charts_by_request() {
        let timeseries: Vec<_> = (1..=3)
            .map(|t| tailscope_loadgen::TimePoint {
                t_s: t as f64,
                requests: 10,
                p50_us: 100,
                p99_us: 200,
                max_us: 300,
                ..Default::default()
            })
            .collect();
        let mut report = report_of(3, timeseries);
        assert!(
            !run_page(&report).contains("p99-by-request"),
            "no mix, no chart"
        );
        let histogram = serde_json::to_value(&report.histogram).unwrap();
        for (name, seconds) in [("search", vec![1.0, 2.0, 3.0]), ("upload", vec![1.0, 3.0])] {
            let points: Vec<_> = seconds
                .iter()
                .map(|t| {
                    serde_json::json!({"t_s": t, "requests": 4, "errors": 0, "timeouts": 0,
                    "p50_us": 100, "p99_us": 5000, "max_us": 6000})
                })
                .collect();
            let r = serde_json::from_value(serde_json::json!({
                "method": "GET", "target": format!("/{name}"), "weight": 1, "requests": 12,
                "successes": 12, "errors": 0, "timeouts": 0, "unfinished": 0, "share": 0.5,
                "rps": 4.0, "error_rate": 0.0, "non2xx": 0, "bytes_read": 0,
                "latency_us": null, "status_codes": {}, "errors_by_kind": {},
                "histogram": histogram, "timeseries": points
            }))
            .unwrap();
            report.by_request.insert(name.into(), r);
        }
        let page = run_page(&report);
        for chart in ["throughput-by-request", "p99-by-request"] {
            let at = page.find(&format!("data-chart=\"{chart}\"")).expect(chart);
            let figure = &page[at..at + page[at..].find("</figure>").unwrap()];
            assert!(
                figure.contains(">search<") && figure.contains(">upload<"),
                "{figure}"
            );
        }
        // upload had no request in second 2: 0/s there, and no p99 (a gap in its line).
        let titles: Vec<&str> = page
            .split("<title>upload: ")
            .skip(1)
            .map(|t| &t[..t.find("</title>").unwrap()])
            .collect();
        assert_eq!(
            titles,
            vec![
                "4 in 0s–1s",
                "0 in 1s–2s",
                "4 in 2s–3s",
                "5.00ms in 0s–1s",
                "5.00ms in 2s–3s"
            ]
        );
    }
}
