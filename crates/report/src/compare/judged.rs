//! Changes judged against the noise: each compared figure's change with its 95 % interval, and
//! whether it is larger than the noise (see [`crate::stats`] for the methods).
//!
//! One run per side: the circular block bootstrap over each run's seconds (the per-second
//! latency histograms the run's JSON carries in `second_histograms`), which sees the noise
//! within each run. Several runs per side: each run one unit, Welch's t on the logarithms,
//! which also sees what differs from run to run (another CPU placement, another machine
//! state), and is the one to use for a gate that must not flake.

use serde::Serialize;

use super::{Better, Row};
use crate::document::{decode_histogram, EncodedHistogram, Report};
use crate::stats::{
    compare_runs, compare_seconds, BootstrapOptions, Change, Figure, Verdict, Worse,
};

/// How a comparison judged its changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Plain figures, no interval (`--point`).
    Point,
    /// One run per side: the block bootstrap over each run's seconds.
    Seconds,
    /// Several runs per side: each run one unit (Welch's t on the logarithms).
    Runs,
}

impl Mode {
    /// The mode for `base` and `new` runs per side, unless `point` is asked for.
    pub fn of(base: usize, new: usize, point: bool) -> Mode {
        if point {
            Mode::Point
        } else if base == 1 && new == 1 {
            Mode::Seconds
        } else {
            Mode::Runs
        }
    }

    /// What the mode is, as the report says it.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Point => "plain figures, no interval (--point)",
            Mode::Seconds => {
                "one run per side: 95 % intervals by the circular block bootstrap over each run's seconds"
            }
            Mode::Runs => {
                "several runs per side: 95 % intervals by Welch's t on the logarithms of each run's figure"
            }
        }
    }
}

/// The figure of a row that can be judged, by its metric name.
fn figure_of(metric: &str) -> Option<Figure> {
    Some(match metric {
        "req/s" => Figure::Throughput,
        "p50" => Figure::Percentile(0.5),
        "p90" => Figure::Percentile(0.9),
        "p99" => Figure::Percentile(0.99),
        "p99.9" => Figure::Percentile(0.999),
        "mean" => Figure::Mean,
        _ => return None,
    })
}

/// A run's figure as one unit of the several-runs comparison.
fn run_figure(r: &Report, figure: Figure) -> f64 {
    let latency = |pick: fn(&tailscope_loadgen::Percentiles) -> u64| {
        r.latency_us.as_ref().map_or(f64::NAN, |p| pick(p) as f64)
    };
    match figure {
        Figure::Throughput => r.summary.rps,
        Figure::Mean => r.latency_us.as_ref().map_or(f64::NAN, |p| p.mean),
        Figure::Percentile(0.5) => latency(|p| p.p50),
        Figure::Percentile(0.9) => latency(|p| p.p90),
        Figure::Percentile(0.99) => latency(|p| p.p99),
        Figure::Percentile(_) => latency(|p| p.p999),
    }
}

/// A run's per-second latency histograms, in order. For throughput the last second is left
/// out when it is partial (it covers less than a second, so its count is no second's rate).
fn seconds_of(r: &Report, figure: Figure) -> Vec<crate::stats::bootstrap::Second> {
    r.second_histograms
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            figure != Figure::Throughput || !r.timeseries.get(*i).is_some_and(|t| t.partial)
        })
        .filter_map(|(_, data)| {
            decode_histogram(&EncodedHistogram {
                encoding: "hdrhistogram-v2-deflate-base64".into(),
                unit: "us".into(),
                data: data.clone(),
            })
        })
        .map(|h| crate::stats::bootstrap::Second::of(&h))
        .collect()
}

/// The change of one figure between the sides, by the mode's method.
pub fn change(
    base: &[&Report],
    new: &[&Report],
    figure: Figure,
    mode: Mode,
    options: &BootstrapOptions,
) -> Option<Change> {
    match mode {
        Mode::Point => None,
        Mode::Seconds => Some(compare_seconds(
            &seconds_of(base[0], figure),
            &seconds_of(new[0], figure),
            figure,
            options,
        )),
        Mode::Runs => {
            let figures = |side: &[&Report]| -> Vec<f64> {
                side.iter().map(|r| run_figure(r, figure)).collect()
            };
            Some(compare_runs(
                &figures(base),
                &figures(new),
                options.confidence,
            ))
        }
    }
}

/// Adds to each judgeable row of a runs' comparison its judged change (none for `--point`),
/// and, with several runs on a side, sets each row's figures to what the sides' runs make
/// together, judged or not: the geometric means of the runs' figures (what the change is of),
/// the largest maximum (a maximum has no interval: it is one sample, the
/// extreme, with nothing beyond it to bound it), the pooled error rate.
pub fn judge_runs(
    rows: &mut [Row],
    base: &[&Report],
    new: &[&Report],
    mode: Mode,
    options: &BootstrapOptions,
) {
    let several = base.len() > 1 || new.len() > 1;
    for row in rows.iter_mut() {
        let figure = figure_of(&row.metric);
        if let Some(figure) = figure {
            row.judged = change(base, new, figure, mode, options);
        }
        if !several {
            continue;
        }
        (row.base, row.new) = match (figure, row.metric.as_str()) {
            (Some(f), _) => (geometric_mean(base, f), geometric_mean(new, f)),
            (None, "max") => (pooled_max(base), pooled_max(new)),
            (None, "error rate") => (pooled_error_rate(base), pooled_error_rate(new)),
            _ => (row.base, row.new),
        };
    }
    correct(rows);
}

/// Corrects the verdicts of the rows judged together for their number (Holm's procedure,
/// [`crate::stats::family`]): six figures at 95 % each would flag some change between
/// identical servers up to a quarter of the time.
pub fn correct(rows: &mut [Row]) {
    let mut changes: Vec<&mut Change> = rows
        .iter_mut()
        .filter(|r| r.presence == super::Presence::Both)
        .filter_map(|r| r.judged.as_mut())
        .collect();
    crate::stats::family::holm(&mut changes);
}

/// What the rows' verdicts were corrected for, in a sentence; None when no row was.
pub fn correction_note(rows: &[Row]) -> Option<String> {
    let c = rows
        .iter()
        .filter_map(|r| r.judged.as_ref()?.correction.as_ref())
        .next()?;
    Some(format!(
        "Verdicts corrected for the {} figures judged together ({}, family-wise {} %): each interval shown is its figure's own {} % interval; a change is significant when that interval excludes 0 % and its Holm-adjusted p-value is at most {}.",
        c.family,
        c.describe(),
        fmt_level(c.alpha * 100.0),
        fmt_level((1.0 - c.alpha) * 100.0),
        fmt_level(c.alpha)
    ))
}

/// A level as the note writes it: `5`, `95`, `0.05` (no float noise such as 94.99999).
fn fmt_level(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The geometric mean of the side's runs' figure (None if a run has none, or it is 0).
fn geometric_mean(side: &[&Report], figure: Figure) -> Option<f64> {
    let logs: Vec<f64> = side
        .iter()
        .map(|r| run_figure(r, figure))
        .map(|x| (x.is_finite() && x > 0.0).then(|| x.ln()))
        .collect::<Option<Vec<f64>>>()?;
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

fn pooled_max(side: &[&Report]) -> Option<f64> {
    side.iter()
        .filter_map(|r| r.latency_us.as_ref().map(|p| p.max as f64))
        .reduce(f64::max)
}

fn pooled_error_rate(side: &[&Report]) -> Option<f64> {
    let requests: u64 = side.iter().map(|r| r.summary.requests).sum();
    let errors: u64 = side.iter().map(|r| r.summary.errors).sum();
    (requests > 0).then(|| errors as f64 / requests as f64)
}

/// Which way a row's figure gets worse, as the statistics say it.
pub fn worse(better: Better) -> Worse {
    match better {
        Better::Higher => Worse::Lower,
        Better::Lower => Worse::Higher,
    }
}

/// A percentage with its sign and the minus sign a reader expects: `+12.0`, `−4.0`.
fn signed(x: f64) -> String {
    let s = format!("{x:+.1}");
    s.replacen('-', "−", 1)
}

/// The change with its interval, `+12.0 % (+8.0 … +16.0 %)`; None without an interval.
pub fn interval_text(c: &Change) -> Option<String> {
    let (estimate, low, high) = c.percent()?;
    Some(format!(
        "{} % ({} … {} %)",
        signed(estimate),
        signed(low),
        signed(high)
    ))
}

/// The verdict as the table writes it: `significant`, `within noise`, `insufficient: …`.
pub fn verdict_text(c: &Change) -> String {
    match (c.verdict, &c.correction) {
        (Verdict::WithinNoise, Some(k)) if k.alone == Verdict::Significant => format!(
            "within noise after {} (alone: significant, p {})",
            k.describe(),
            fmt_p(c.p_value)
        ),
        _ => plain_verdict(c),
    }
}

/// A p-value to two significant digits, `n/a` when there is none.
fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p >= 0.001 => format!("{p:.3}"),
        Some(p) => format!("{p:.1e}"),
        None => "n/a".into(),
    }
}

/// The verdict without what a correction took away.
fn plain_verdict(c: &Change) -> String {
    match c.verdict {
        Verdict::Significant => "significant".into(),
        Verdict::WithinNoise => "within noise".into(),
        Verdict::Insufficient => format!(
            "insufficient: {}",
            c.reason.as_deref().unwrap_or("too little data")
        ),
    }
}

/// The line a reader takes away: `p99 +12.0 % (+8.0 … +16.0 %), significant`.
pub fn sentence(metric: &str, c: &Change) -> String {
    match interval_text(c) {
        Some(interval) => format!("{metric} {interval}, {}", verdict_text(c)),
        None => format!("{metric}: {}", verdict_text(c)),
    }
}

/// What a gate says of a judged, gated row: a regression beyond `limit_pct` that is larger
/// than the noise, or a change it cannot judge (the gate fails closed then: a gate that passes
/// what it could not see would pass anything).
pub fn gate(row: &Row, c: &Change, limit_pct: f64) -> Option<String> {
    if c.verdict == Verdict::Insufficient {
        let needed = match c.unit {
            crate::stats::Unit::Runs => "give at least 2 runs per side".to_string(),
            _ => format!(
                "run at least {} s per run, or give several runs per side (--base A1.json A2.json --new B1.json B2.json)",
                crate::stats::bootstrap::MIN_SECONDS
            ),
        };
        return Some(format!(
            "{}: cannot judge ({}): {needed}, or compare plain figures with --point",
            row.metric,
            c.reason.as_deref().unwrap_or("too little data"),
        ));
    }
    c.regression_beyond(limit_pct, worse(row.better)).then(|| {
        format!(
            "{}, beyond the {limit_pct} % limit",
            sentence(&row.metric, c)
        )
    })
}

/// The judged change table in markdown, then each judged change in a sentence.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| metric | base | new | change (95 % interval) | verdict |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.metric,
            super::show(r.base, r.unit),
            super::show(r.new, r.unit),
            r.change_with_interval(),
            r.verdict()
        ));
    }
    let sentences: Vec<String> = rows
        .iter()
        .filter(|r| r.presence == super::Presence::Both)
        .filter_map(|r| r.judged.as_ref().map(|c| sentence(&r.metric, c)))
        .collect();
    if !sentences.is_empty() {
        out.push('\n');
        for s in sentences {
            out.push_str(&format!("- {s}\n"));
        }
    }
    if let Some(note) = correction_note(rows) {
        out.push_str(&format!("\n{note}\n"));
    }
    out
}

/// Adds to the rows of two suites the judged change of each target and endpoint's req/s and
/// p99, each of its runs one unit (Welch's t on the logarithms), and sets those rows' figures
/// to the sides' geometric means, which the change is of.
pub fn judge_suites(
    rows: &mut [Row],
    base: &crate::suite::SuiteReport,
    new: &crate::suite::SuiteReport,
    confidence: f64,
) {
    type Pick = fn(&crate::suite::RunFigures) -> f64;
    let picks: [(&str, Pick); 2] = [
        ("req/s", |r| r.rps),
        ("p99", |r| r.p99_us.map_or(f64::NAN, |p| p as f64)),
    ];
    for row in rows.iter_mut() {
        if row.presence != super::Presence::Both {
            continue;
        }
        let Some((label, pick)) = picks
            .iter()
            .find(|(label, _)| row.metric.ends_with(&format!(" {label}")))
        else {
            continue;
        };
        let name = &row.metric[..row.metric.len() - label.len() - 1];
        let runs = |suite: &crate::suite::SuiteReport| -> Vec<f64> {
            suite
                .results
                .iter()
                .find(|r| format!("{} {}", r.target, r.endpoint) == name)
                .map(|r| r.runs.iter().map(pick).collect())
                .unwrap_or_default()
        };
        let c = compare_runs(&runs(base), &runs(new), confidence);
        (row.base, row.new) = (c.base.or(row.base), c.new.or(row.new));
        row.judged = Some(c);
    }
    correct(rows);
}

/// The judged change table as HTML (cells escaped by the table), then each judged change in a
/// sentence.
pub fn html(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.metric.clone(),
                super::show(r.base, r.unit),
                super::show(r.new, r.unit),
                r.change_with_interval(),
                r.verdict(),
            ]
        })
        .collect();
    let mut out = crate::page::table(
        &["metric", "base", "new", "change (95 % interval)", "verdict"],
        &cells,
    );
    let sentences: Vec<String> = rows
        .iter()
        .filter(|r| r.presence == super::Presence::Both)
        .filter_map(|r| r.judged.as_ref().map(|c| sentence(&r.metric, c)))
        .collect();
    if !sentences.is_empty() {
        out.push_str("<ul class=\"verdicts\">\n");
        for s in sentences {
            out.push_str(&format!("<li>{}</li>\n", crate::page::escape(&s)));
        }
        out.push_str("</ul>\n");
    }
    if let Some(note) = correction_note(rows) {
        out.push_str(&format!(
            "<p class=\"sub\">{}</p>\n",
            crate::page::escape(&note)
        ));
    }
    out
}

/// One compared row as the comparison's JSON writes it.
#[derive(Debug, Clone, Serialize)]
pub struct RowJson {
    /// What is compared.
    pub metric: String,
    /// The base side's figure (the geometric mean of its runs for several runs per side).
    pub base: Option<f64>,
    /// The new side's figure.
    pub new: Option<f64>,
    /// The plain change in percent (percentage points for the error rate).
    pub change: String,
    /// Whether the regression gate judges it.
    pub gated: bool,
    /// The change judged against the noise: the ratio new/base with its interval, the
    /// method (with the bootstrap's seed), the verdict and, when insufficient, why.
    pub judged: Option<Change>,
    /// The judged change in a sentence (`p99 +12.0 % (+8.0 … +16.0 %), significant`).
    pub sentence: Option<String>,
    /// Why the figure can have no interval at all (the maximum), when that is so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_interval: Option<String>,
}

/// The comparison as `compare --json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct CompareJson {
    /// Always "compare".
    pub kind: String,
    /// The base side's files.
    pub base: Vec<String>,
    /// The new side's files.
    pub new: Vec<String>,
    /// How the changes were judged.
    pub mode: Mode,
    /// The method, in words.
    pub method: String,
    /// What the verdicts were corrected for, judged together (`Holm over 6 figures` and what
    /// that means); None when nothing was corrected (a plain comparison, a single figure).
    pub correction: Option<String>,
    /// The settings in which the sides differ (empty for like reports).
    pub unlike: Vec<String>,
    /// Either side's warnings that its figures are partly the generator's own delay (its
    /// loop held up, sends late by its own delay), by side and file; empty when none.
    pub generator_warnings: Vec<super::generator::SideWarning>,
    /// Every compared figure.
    pub rows: Vec<RowJson>,
    /// The gate's limit in percent, when one was asked for.
    pub fail_if_regression: Option<f64>,
    /// What the gate failed on (empty when it held or there was no gate).
    pub regressions: Vec<String>,
}

impl CompareJson {
    /// The comparison as pretty JSON, ending in a newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a comparison always serializes") + "\n"
    }
}

impl RowJson {
    /// The row as the JSON writes it.
    pub fn of(r: &Row) -> RowJson {
        RowJson {
            metric: r.metric.clone(),
            base: r.base,
            new: r.new,
            change: r.change(),
            gated: r.gated,
            judged: r.judged.clone(),
            sentence: r.judged.as_ref().map(|c| sentence(&r.metric, c)),
            no_interval: r.no_interval().map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Presence, Unit};

    fn p99(judged: Change) -> Row {
        Row {
            metric: "p99".into(),
            base: judged.base,
            new: judged.new,
            unit: Unit::Micros,
            better: Better::Lower,
            gated: true,
            presence: Presence::Both,
            judged: Some(judged),
        }
    }

    #[test]
    fn the_gate_fails_only_beyond_the_noise_and_closed_when_it_cannot_judge() {
        // Five runs a side, +12 % with little spread: significant and beyond 5 %.
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
        let worse: Vec<f64> = base.iter().map(|x| x * 1.12).collect();
        let row = p99(compare_runs(&base, &worse, 0.95));
        let failed = row.gate(5.0).expect("a clear +12 % regression fails");
        assert!(failed.starts_with("p99 +12.0 % (+"), "{failed}");
        assert!(
            failed.contains("significant, beyond the 5 % limit"),
            "{failed}"
        );
        // The same +12 % in runs that spread by ±40 %: within noise, the gate holds, while
        // the plain comparison would have failed it.
        let noisy = [700.0, 1400.0, 800.0, 1300.0, 1000.0];
        let noisy_worse: Vec<f64> = noisy.iter().map(|x| x * 1.12).collect();
        let row = p99(compare_runs(&noisy, &noisy_worse, 0.95));
        assert_eq!(row.verdict(), "within noise");
        assert_eq!(row.gate(5.0), None);
        assert!(row.regression(5.0).is_some(), "the point gate flags it");
        // A significant +3 % is no regression beyond 5 %.
        let slight: Vec<f64> = base.iter().map(|x| x * 1.03).collect();
        let row = p99(compare_runs(&base, &slight, 0.95));
        assert_eq!(row.verdict(), "significant");
        assert_eq!(row.gate(5.0), None);
        // One run a side cannot be judged by runs: the gate fails closed, saying what is needed.
        let row = p99(compare_runs(&[1000.0], &[1000.0], 0.95));
        let failed = row.gate(5.0).expect("insufficient fails closed");
        assert!(
            failed.contains("cannot judge") && failed.contains("at least 2 runs per side"),
            "{failed}"
        );
        assert!(row
            .verdict()
            .starts_with("insufficient: 1 base and 1 new runs"));
    }

    #[test]
    fn too_few_seconds_say_insufficient_and_what_is_needed() {
        let second = || {
            let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            (1..=1000).for_each(|v| h.record(v).unwrap());
            h
        };
        let three: Vec<_> = (0..3).map(|_| second()).collect();
        let c = compare_seconds(
            &three,
            &three,
            Figure::Percentile(0.99),
            &BootstrapOptions::default(),
        );
        let row = p99(c);
        let table = markdown(std::slice::from_ref(&row));
        assert!(
            table.contains("| p99 | 990µs | 990µs | +0.0 % | insufficient: base: 3 s of data, the bootstrap needs at least 8 s |"),
            "{table}"
        );
        let failed = row.gate(5.0).unwrap();
        assert!(failed.contains("run at least 8 s per run"), "{failed}");
    }

    #[test]
    fn a_change_reads_with_its_interval_and_verdict() {
        let mut c = compare_runs(&[100.0, 101.0], &[112.0, 113.0], 0.95);
        (c.estimate, c.low, c.high) = (Some(1.12), Some(1.08), Some(1.16));
        c.verdict = Verdict::Significant;
        assert_eq!(
            sentence("p99", &c),
            "p99 +12.0 % (+8.0 … +16.0 %), significant"
        );
        (c.estimate, c.low, c.high) = (Some(1.03), Some(0.96), Some(1.10));
        c.verdict = Verdict::WithinNoise;
        assert_eq!(
            sentence("p99", &c),
            "p99 +3.0 % (−4.0 … +10.0 %), within noise"
        );
    }
}
