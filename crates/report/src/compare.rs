//! What changed between two reports of the same kind: a row per metric, the change table, and
//! the regressions a CI gate fails on.

use std::fmt::Write as _;

use tailscope_loadgen::report::{fmt_us, Report};

use crate::chart::{bar_chart, Bar};
use crate::page::{document, escape, footer, table};
use crate::suite::{SuiteReport, SuiteResult};
use crate::{count_axis, series, spectrum_chart, spectrum_of, AnyReport, BLUE, P99};

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Better {
    /// More is better (req/s).
    Higher,
    /// Less is better (latency, errors).
    Lower,
}

#[derive(Debug, Clone, Copy, PartialEq)]
/// How a metric's figures are written.
pub enum Unit {
    /// Requests a second.
    Rate,
    /// Microseconds.
    Micros,
    /// A fraction, written as a percentage.
    Fraction,
}

/// One compared metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What is compared (`p99`, `nginx /plaintext req/s`).
    pub metric: String,
    /// Its figure in the base report, when there.
    pub base: Option<f64>,
    /// Its figure in the new report, when there.
    pub new: Option<f64>,
    /// How its figures are written.
    pub unit: Unit,
    /// Which way it improves.
    pub better: Better,
    /// Whether the regression gate judges it (req/s and p99).
    pub gated: bool,
}

impl Row {
    /// The change from base to new, in percent of the base.
    pub fn change_pct(&self) -> Option<f64> {
        match (self.base, self.new) {
            (Some(b), Some(n)) if b != 0.0 => Some((n - b) / b * 100.0),
            _ => None,
        }
    }

    /// The change as the table writes it: `+4.2 %`, or `n/a`.
    pub fn change(&self) -> String {
        self.change_pct()
            .map_or("n/a".to_string(), |c| format!("{c:+.1} %"))
    }

    /// The regression, in percent, when this row is worse than allowed.
    pub fn regression(&self, limit_pct: f64) -> Option<String> {
        if !self.gated {
            return None;
        }
        if self.base.is_some() && self.new.is_none() {
            return Some(format!("{}: missing in the new report", self.metric));
        }
        let change = self.change_pct()?;
        let worse = match self.better {
            Better::Higher => -change,
            Better::Lower => change,
        };
        (worse > limit_pct)
            .then(|| format!("{}: {change:+.1} % (limit {limit_pct} %)", self.metric))
    }
}

/// A figure as the change table writes it (`n/a` when missing).
pub fn show(v: Option<f64>, unit: Unit) -> String {
    match v {
        None => "n/a".into(),
        Some(x) => match unit {
            Unit::Rate => format!("{x:.0}"),
            Unit::Micros => fmt_us(x.round() as u64),
            Unit::Fraction => format!("{:.3} %", x * 100.0),
        },
    }
}

/// A latency figure of a run, `None` when nothing was measured.
fn latency(r: &Report, f: fn(&tailscope_loadgen::Percentiles) -> f64) -> Option<f64> {
    r.latency_us.as_ref().map(f)
}

/// The rows comparing two runs.
pub fn rows_of_runs(base: &Report, new: &Report) -> Vec<Row> {
    type Pick = fn(&Report) -> Option<f64>;
    let row = |metric: &str, pick: Pick, unit: Unit, better: Better, gated: bool| Row {
        metric: metric.to_string(),
        base: pick(base),
        new: pick(new),
        unit,
        better,
        gated,
    };
    vec![
        row(
            "req/s",
            |r| Some(r.summary.rps),
            Unit::Rate,
            Better::Higher,
            true,
        ),
        row(
            "p50",
            |r| latency(r, |p| p.p50 as f64),
            Unit::Micros,
            Better::Lower,
            false,
        ),
        row(
            "p90",
            |r| latency(r, |p| p.p90 as f64),
            Unit::Micros,
            Better::Lower,
            false,
        ),
        row(
            "p99",
            |r| latency(r, |p| p.p99 as f64),
            Unit::Micros,
            Better::Lower,
            true,
        ),
        row(
            "p99.9",
            |r| latency(r, |p| p.p999 as f64),
            Unit::Micros,
            Better::Lower,
            false,
        ),
        row(
            "max",
            |r| latency(r, |p| p.max as f64),
            Unit::Micros,
            Better::Lower,
            false,
        ),
        row(
            "mean",
            |r| latency(r, |p| p.mean),
            Unit::Micros,
            Better::Lower,
            false,
        ),
        row(
            "error rate",
            |r| Some(r.summary.error_rate),
            Unit::Fraction,
            Better::Lower,
            false,
        ),
    ]
}

/// The rows comparing two suites, by target and endpoint.
pub fn rows_of_suites(base: &SuiteReport, new: &SuiteReport) -> Vec<Row> {
    type Pick = fn(&SuiteResult) -> Option<f64>;
    let mut rows = Vec::new();
    for b in &base.results {
        let n = new
            .results
            .iter()
            .find(|n| n.target == b.target && n.endpoint == b.endpoint);
        let name = format!("{} {}", b.target, b.endpoint);
        let picks: [(&str, Pick, Unit, Better, bool); 3] = [
            ("req/s", |r| r.rps_median, Unit::Rate, Better::Higher, true),
            (
                "p50",
                |r| r.p50_us_median,
                Unit::Micros,
                Better::Lower,
                false,
            ),
            (
                "p99",
                |r| r.p99_us_median,
                Unit::Micros,
                Better::Lower,
                true,
            ),
        ];
        for (label, pick, unit, better, gated) in picks {
            rows.push(Row {
                metric: format!("{name} {label}"),
                base: pick(b),
                new: n.and_then(pick),
                unit,
                better,
                gated,
            });
        }
    }
    rows
}

/// The rows comparing two reports of the same kind; `None` when their kinds differ.
pub fn rows(base: &AnyReport, new: &AnyReport) -> Option<Vec<Row>> {
    match (base, new) {
        (AnyReport::Run(b), AnyReport::Run(n)) => Some(rows_of_runs(b, n)),
        (AnyReport::Suite(b), AnyReport::Suite(n)) => Some(rows_of_suites(b, n)),
        _ => None,
    }
}

/// The change table, in markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut table = String::from("| metric | base | new | change |\n|---|---|---|---|\n");
    for r in rows {
        table.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.metric,
            show(r.base, r.unit),
            show(r.new, r.unit),
            r.change()
        ));
    }
    table
}

/// The HTML page of a comparison: the two percentile spectra on one chart (runs) or the
/// req/s of each target and endpoint side by side (suites), then the change table. `names`
/// label the base and the new report (their file names). `None` when the kinds differ.
pub fn page(base: &AnyReport, new: &AnyReport, names: (&str, &str)) -> Option<String> {
    let rows = rows(base, new)?;
    let mut body = String::new();
    let _ = writeln!(body, "<h1>tailscope compare</h1>");
    let _ = writeln!(
        body,
        "<p class=\"sub\">base: {} · new: {}</p>",
        escape(names.0),
        escape(names.1)
    );
    match (base, new) {
        (AnyReport::Run(b), AnyReport::Run(n)) => {
            body.push_str(&spectrum_chart(
                "compare-spectrum",
                "Percentile spectra (latency by percentile, log scales)",
                vec![
                    series(&format!("base: {}", names.0), BLUE, spectrum_of(b)),
                    series(&format!("new: {}", names.1), P99, spectrum_of(n)),
                ],
            ));
        }
        (AnyReport::Suite(b), AnyReport::Suite(n)) => {
            let mut bars = Vec::new();
            for (side, suite) in [("base", b), ("new", n)] {
                for r in suite.results.iter() {
                    let Some(rps) = r.rps_median else { continue };
                    bars.push(Bar {
                        label: format!("{} {} ({side})", r.target, r.endpoint),
                        value: rps,
                        tooltip: format!(
                            "{} {} in the {side} suite: {} req/s (median)",
                            r.target,
                            r.endpoint,
                            show(Some(rps), Unit::Rate)
                        ),
                        whisker: r.rps_min.zip(r.rps_max),
                    });
                }
            }
            body.push_str(&bar_chart(
                "compare-rps",
                "Requests per second, base and new (median, whiskers: slowest to fastest run)",
                "requests/s",
                &bars,
                &count_axis,
            ));
        }
        _ => return None,
    }
    body.push_str("<h2>Changes</h2>\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.metric.clone(),
                show(r.base, r.unit),
                show(r.new, r.unit),
                r.change(),
            ]
        })
        .collect();
    body.push_str(&table(&["metric", "base", "new", "change"], &cells));
    body.push_str(&footer("tailscope from two JSON reports"));
    Some(document("tailscope compare", &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gated(base: f64, new: f64, better: Better) -> Row {
        Row {
            metric: "m".into(),
            base: Some(base),
            new: Some(new),
            unit: Unit::Rate,
            better,
            gated: true,
        }
    }

    #[test]
    fn regressions_are_judged_in_the_bad_direction_only() {
        assert!(
            gated(100.0, 94.0, Better::Higher).regression(5.0).is_some(),
            "req/s fell 6 %"
        );
        assert!(gated(100.0, 96.0, Better::Higher).regression(5.0).is_none());
        assert!(
            gated(100.0, 200.0, Better::Higher)
                .regression(5.0)
                .is_none(),
            "faster is fine"
        );
        assert!(
            gated(1000.0, 1060.0, Better::Lower)
                .regression(5.0)
                .is_some(),
            "p99 rose 6 %"
        );
        assert!(gated(1000.0, 500.0, Better::Lower)
            .regression(5.0)
            .is_none());
        let mut missing = gated(100.0, 0.0, Better::Higher);
        missing.new = None;
        assert!(missing.regression(5.0).unwrap().contains("missing"));
    }
}
