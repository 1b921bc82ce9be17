//! `tailscope compare BASE.json NEW.json`: what changed between two reports, and a CI gate.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;
use tailscope_loadgen::report::{fmt_us, Report};
use tailscope_report::suite::{SuiteReport, SuiteResult};

use crate::args::CompareArgs;
use crate::exit::{Outcome, UsageError};
use crate::process::print_stdout;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Rate,
    Micros,
    Fraction,
}

/// One compared metric.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    metric: String,
    base: Option<f64>,
    new: Option<f64>,
    unit: Unit,
    better: Better,
    /// Whether `--fail-if-regression` judges it (req/s and p99).
    gated: bool,
}

impl Row {
    fn change_pct(&self) -> Option<f64> {
        match (self.base, self.new) {
            (Some(b), Some(n)) if b != 0.0 => Some((n - b) / b * 100.0),
            _ => None,
        }
    }

    /// The regression, in percent, when this row is worse than allowed.
    fn regression(&self, limit_pct: f64) -> Option<String> {
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

fn show(v: Option<f64>, unit: Unit) -> String {
    match v {
        None => "n/a".into(),
        Some(x) => match unit {
            Unit::Rate => format!("{x:.0}"),
            Unit::Micros => fmt_us(x.round() as u64),
            Unit::Fraction => format!("{:.3} %", x * 100.0),
        },
    }
}

fn load(path: &Path) -> Result<Value, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "{} is not a tailscope JSON report: {e}",
            path.display()
        ))
    })
}

fn kind(v: &Value) -> Option<&'static str> {
    if v["kind"] == "suite" {
        Some("suite")
    } else if v.get("summary").is_some() && v.get("latency_us").is_some() {
        Some("run")
    } else {
        None
    }
}

/// A latency figure of a run, `None` when nothing was measured.
fn latency(r: &Report, f: fn(&tailscope_loadgen::Percentiles) -> f64) -> Option<f64> {
    r.latency_us.as_ref().map(f)
}

fn rows_of_runs(base: &Report, new: &Report) -> Vec<Row> {
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

fn rows_of_suites(base: &SuiteReport, new: &SuiteReport) -> Vec<Row> {
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

/// Reads `v` as the typed report of its kind, or says what is wrong with `path`.
fn typed<T: serde::de::DeserializeOwned>(v: Value, path: &Path) -> Result<T, UsageError> {
    serde_json::from_value(v).map_err(|e| {
        UsageError(format!(
            "{} is not a tailscope JSON report of its kind: {e}",
            path.display()
        ))
    })
}

/// Compares two reports.
pub fn compare(args: CompareArgs) -> Result<Outcome> {
    if let Some(p) = args.fail_if_regression {
        if !(p.is_finite() && p >= 0.0) {
            return Err(UsageError(format!(
                "--fail-if-regression takes a percentage of 0 or more, got {p}"
            ))
            .into());
        }
    }
    let base = load(&args.base)?;
    let new = load(&args.new)?;
    let (Some(kb), Some(kn)) = (kind(&base), kind(&new)) else {
        return Err(UsageError("both files must be reports written by `tailscope run --json` or `tailscope suite --json`".into()).into());
    };
    if kb != kn {
        return Err(UsageError(format!("cannot compare a {kb} report with a {kn} report")).into());
    }
    let rows = if kb == "suite" {
        rows_of_suites(&typed(base, &args.base)?, &typed(new, &args.new)?)
    } else {
        rows_of_runs(&typed(base, &args.base)?, &typed(new, &args.new)?)
    };
    let mut table = String::from("| metric | base | new | change |\n|---|---|---|---|\n");
    for r in &rows {
        let change = r
            .change_pct()
            .map_or("n/a".to_string(), |c| format!("{c:+.1} %"));
        table.push_str(&format!(
            "| {} | {} | {} | {change} |\n",
            r.metric,
            show(r.base, r.unit),
            show(r.new, r.unit)
        ));
    }
    print_stdout(&table)?;
    let Some(limit) = args.fail_if_regression else {
        return Ok(Outcome::Success);
    };
    let regressions: Vec<String> = rows.iter().filter_map(|r| r.regression(limit)).collect();
    for r in &regressions {
        say!("regression: {r}");
    }
    Ok(if regressions.is_empty() {
        Outcome::Success
    } else {
        Outcome::ThresholdFailed
    })
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
