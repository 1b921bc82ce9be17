//! find-max's HTML page: the latency–throughput curve and the result.

use super::fmt_rps as fmt_rate;
use crate::chart::{line_chart, LineChart, Scale};
use crate::chart_style::{count_axis, series, us_axis, BLUE, MAX, P50, P99, PALETTE};
use crate::page::{document, escape, footer, kpis, table};

use super::{knee_text, KneeReport};

/// A self-contained page: the result, the curve (latency percentiles and answered rate
/// against the offered rate, the SLO limits drawn across), the steps, the diagnosis.
pub fn knee_page(r: &KneeReport, limits_us: &[(String, f64)]) -> String {
    let curve = r.curve();
    let mut body = format!("<h1>find-max: {}</h1>\n", escape(&r.url));
    body.push_str(&kpis(&[
        (
            "highest rate meeting the SLO",
            match (r.highest_pass_rps, r.highest_unsure_rps) {
                (Some(p), _) => format!("{} req/s", fmt_rate(p)),
                (None, Some(u)) => format!("not shown (unsure up to {} req/s)", fmt_rate(u)),
                (None, None) => "none".into(),
            },
        ),
        (
            "lowest rate missing it",
            r.lowest_fail_rps
                .map_or("n/a".into(), |p| format!("{} req/s", fmt_rate(p))),
        ),
        ("SLO", r.slos.join(" and ")),
    ]));
    if let Some(len) = r.confirm_s.filter(|l| *l > 0.0) {
        body.push_str(&kpis(&[(
            &format!("highest rate that holds for {len} s"),
            r.confirmed_rps
                .map_or("none".into(), |c| format!("{} req/s", fmt_rate(c))),
        )]));
    }
    let point = |f: &dyn Fn(&super::KneeStep) -> Option<f64>| -> Vec<(f64, f64)> {
        curve
            .iter()
            .filter_map(|s| f(s).map(|y| (s.offered_rps, y)))
            .collect()
    };
    let mut lines = vec![
        series("p50", P50, point(&|s| s.p50_us.map(|v| v as f64))),
        series("p99", P99, point(&|s| s.p99_us.map(|v| v as f64))),
        series("p99.9", MAX, point(&|s| s.p999_us.map(|v| v as f64))),
    ];
    let (lo, hi) = (
        curve.first().map_or(0.0, |s| s.offered_rps),
        curve.last().map_or(1.0, |s| s.offered_rps),
    );
    for (name, limit) in limits_us {
        let mut l = series(
            &format!("SLO {name}"),
            BLUE,
            vec![(lo, *limit), (hi, *limit)],
        );
        l.dashed = true;
        lines.push(l);
    }
    // The rate confirmed, as a dashed line up the chart from the curve's lowest p50 to its
    // highest p99.9.
    if let Some(c) = r.confirmed_rps {
        let ys = curve
            .iter()
            .flat_map(|s| [s.p50_us, s.p99_us, s.p999_us])
            .flatten()
            .map(|v| v as f64);
        let (y0, y1) = ys.fold((f64::MAX, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
        if y1 > 0.0 {
            let mut l = series(
                &format!(
                    "holds for {} s: {} req/s",
                    r.confirm_s.unwrap_or(0.0),
                    fmt_rate(c)
                ),
                PALETTE[4],
                vec![(c, y0), (c, y1)],
            );
            l.dashed = true;
            lines.push(l);
        }
    }
    body.push_str(&line_chart(&LineChart {
        id: "knee-latency",
        title: "Latency against the offered rate (log scale)",
        x_desc: "offered requests/s",
        y_desc: "latency from the intended send time",
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        x_fmt: &count_axis,
        y_fmt: &us_axis,
        series: lines,
        per_second: false,
    }));
    let mut offered = series("offered", P50, point(&|s| Some(s.offered_rps)));
    offered.dashed = true;
    body.push_str(&line_chart(&LineChart {
        id: "knee-throughput",
        title: "Answered against offered rate",
        x_desc: "offered requests/s",
        y_desc: "requests/s",
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_fmt: &count_axis,
        y_fmt: &count_axis,
        series: vec![
            offered,
            series("answered", BLUE, point(&|s| Some(s.answered_rps))),
        ],
        per_second: false,
    }));
    let rows: Vec<Vec<String>> = r.steps.iter().map(step_row).collect();
    body.push_str("<h2>Steps, in the order they ran</h2>\n");
    body.push_str(&table(&STEP_HEAD, &rows));
    if !r.confirmation.is_empty() {
        let rows: Vec<Vec<String>> = r.confirmation.iter().map(step_row).collect();
        body.push_str(&format!(
            "<h2>Confirmation: {} s at one rate each, measured from its start</h2>\n",
            r.confirm_s.unwrap_or(0.0)
        ));
        body.push_str(&table(&STEP_HEAD, &rows));
    }
    body.push_str("<h2>Summary</h2>\n<pre>");
    body.push_str(&escape(&knee_text(r)));
    body.push_str("</pre>\n");
    body.push_str(&footer("tailscope find-max"));
    document(&format!("find-max: {}", r.url), &body)
}

/// The steps tables' columns.
const STEP_HEAD: [&str; 9] = [
    "#",
    "phase",
    "offered/s",
    "answered/s",
    "unanswered at end",
    "never sent",
    "p99",
    "errors",
    "verdict",
];

/// A step as a row of the steps tables.
fn step_row(s: &super::KneeStep) -> Vec<String> {
    vec![
        s.index.to_string(),
        s.phase.clone(),
        fmt_rate(s.offered_rps),
        fmt_rate(s.answered_rps),
        crate::document::fmt_count(s.backlog_end),
        crate::document::fmt_count(s.unsent_end),
        s.p99_us.map_or("n/a".into(), |v| us_axis(v as f64)),
        format!("{:.3} %", s.error_rate * 100.0),
        super::text::verdict(s),
    ]
}
