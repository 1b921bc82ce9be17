//! What changed between two reports of the same kind: a row per metric, the change table, and
//! the regressions a CI gate fails on.

use std::fmt::Write as _;

use crate::document::{fmt_us, Report};

use crate::chart::{bar_chart_with_legend, Bar};
use crate::chart_style::{count_axis, series, spectrum_chart, spectrum_of, BLUE, P99};
use crate::page::{document, escape, footer, table};
use crate::suite::{SuiteReport, SuiteResult};
use crate::AnyReport;

pub mod generator;
pub mod judged;
pub mod unlike;
pub use judged::Mode;
pub use unlike::unlike;

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

/// Which of the two reports has what a row compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Both (a figure may still be missing: nothing measured).
    Both,
    /// Only the base (a suite's target or endpoint removed).
    OnlyBase,
    /// Only the new report (a target or endpoint added).
    OnlyNew,
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
    /// Whether the regression gate judges it (req/s, p99, the error rate).
    pub gated: bool,
    /// Which report has it.
    pub presence: Presence,
    /// The change judged against the noise, with its interval (None for a plain comparison,
    /// `--point`, and for figures no interval is computed for: max, mean, error rate).
    pub judged: Option<crate::stats::Change>,
}

impl Row {
    /// The change from base to new, in percent of the base.
    pub fn change_pct(&self) -> Option<f64> {
        match (self.base, self.new) {
            (Some(b), Some(n)) if b != 0.0 => Some((n - b) / b * 100.0),
            _ => None,
        }
    }

    /// The change of a fraction (the error rate) in percentage points: 0 % → 50 % is
    /// +50 pp, where a change in percent of 0 is undefined.
    pub fn change_pp(&self) -> Option<f64> {
        Some((self.new? - self.base?) * 100.0)
    }

    /// The change as the table writes it: `+4.2 %`, `+50.000 pp` for a fraction, or `n/a`.
    pub fn change(&self) -> String {
        match self.presence {
            Presence::OnlyBase => return "removed (only in base)".into(),
            Presence::OnlyNew => return "added (only in new)".into(),
            Presence::Both => {}
        }
        match self.unit {
            Unit::Fraction => self
                .change_pp()
                .map_or("n/a".to_string(), |c| format!("{c:+.3} pp")),
            _ => self
                .change_pct()
                .map_or("n/a".to_string(), |c| format!("{c:+.1} %")),
        }
    }

    /// The change with its interval where it was judged (`+12.0 % (+8.0 … +16.0 %)`), else
    /// the plain change.
    pub fn change_with_interval(&self) -> String {
        match (&self.judged, self.presence) {
            (Some(c), Presence::Both) => judged::interval_text(c).unwrap_or_else(|| self.change()),
            _ => self.change(),
        }
    }

    /// The verdict as the table writes it; `not judged` for a figure without an interval,
    /// and for the maximum why it has none.
    pub fn verdict(&self) -> String {
        match (&self.judged, self.presence) {
            (Some(c), Presence::Both) => judged::verdict_text(c),
            _ => match self.no_interval() {
                Some(why) => why.into(),
                None => "not judged".into(),
            },
        }
    }

    /// Why this row's figure can have no interval, where that is its nature rather than the
    /// data's: the maximum is one sample, the most extreme, with nothing beyond it that a
    /// resample or an order statistic could bound it by.
    pub fn no_interval(&self) -> Option<&'static str> {
        (self.metric == "max").then_some("no interval: the largest single sample")
    }

    /// What the gate fails on for this row: with a judged change, a regression beyond
    /// `limit_pct` that is larger than the noise, or a change that cannot be judged (fail
    /// closed); without, the plain [`Row::regression`].
    pub fn gate(&self, limit_pct: f64) -> Option<String> {
        match (&self.judged, self.presence, self.gated) {
            (Some(c), Presence::Both, true) if self.new.is_some() || self.base.is_none() => {
                judged::gate(self, c, limit_pct)
            }
            _ => self.regression(limit_pct),
        }
    }

    /// The regression, in percent (percentage points for a fraction), when this row is worse
    /// than allowed.
    pub fn regression(&self, limit_pct: f64) -> Option<String> {
        if !self.gated {
            return None;
        }
        if self.presence == Presence::OnlyBase || (self.base.is_some() && self.new.is_none()) {
            return Some(format!("{}: missing in the new report", self.metric));
        }
        let (change, unit) = match self.unit {
            Unit::Fraction => (self.change_pp()?, "pp"),
            _ => (self.change_pct()?, "%"),
        };
        let worse = match self.better {
            Better::Higher => -change,
            Better::Lower => change,
        };
        (worse > limit_pct).then(|| {
            let shown = if unit == "pp" {
                format!("{change:+.3}")
            } else {
                format!("{change:+.1}")
            };
            format!("{}: {shown} {unit} (limit {limit_pct} {unit})", self.metric)
        })
    }
}

/// A rate in whole requests a second, halves rounded away from zero (85262.5 → 85263), as
/// the suite's table writes it too: `{:.0}` alone rounds a half to even (85262), and the
/// same median read differently in the two.
pub fn whole_rate(x: f64) -> String {
    format!("{:.0}", x.round())
}

/// A figure as the change table writes it (`n/a` when missing).
pub fn show(v: Option<f64>, unit: Unit) -> String {
    match v {
        None => "n/a".into(),
        Some(x) => match unit {
            Unit::Rate => whole_rate(x),
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
        presence: Presence::Both,
        judged: None,
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
            true,
        ),
    ]
}

/// The rows comparing two suites, by target and endpoint.
pub fn rows_of_suites(base: &SuiteReport, new: &SuiteReport) -> Vec<Row> {
    type Pick = fn(&SuiteResult) -> Option<f64>;
    let mut rows = Vec::new();
    let same = |a: &SuiteResult, b: &SuiteResult| a.target == b.target && a.endpoint == b.endpoint;
    // Base's results in its order, matched in new, then what only new has.
    let pairs = base
        .results
        .iter()
        .map(|b| (Some(b), new.results.iter().find(|n| same(b, n))))
        .chain(
            new.results
                .iter()
                .filter(|n| !base.results.iter().any(|b| same(b, n)))
                .map(|n| (None, Some(n))),
        );
    for (b, n) in pairs {
        let (presence, either) = match (b, n) {
            (Some(b), Some(_)) => (Presence::Both, b),
            (Some(b), None) => (Presence::OnlyBase, b),
            (None, Some(n)) => (Presence::OnlyNew, n),
            (None, None) => continue,
        };
        let name = format!("{} {}", either.target, either.endpoint);
        let picks: [(&str, Pick, Unit, Better, bool); 4] = [
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
            // Over all of the target's runs: a server that got fast by failing is a regression.
            (
                "error rate",
                SuiteResult::error_rate,
                Unit::Fraction,
                Better::Lower,
                true,
            ),
        ];
        for (label, pick, unit, better, gated) in picks {
            rows.push(Row {
                metric: format!("{name} {label}"),
                base: b.and_then(pick),
                new: n.and_then(pick),
                unit,
                better,
                gated,
                presence,
                judged: None,
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

/// The change table, in markdown: with each change's interval and verdict where they were
/// judged, then the judged changes in a sentence each.
pub fn markdown(rows: &[Row]) -> String {
    if rows.iter().any(|r| r.judged.is_some()) {
        return judged::markdown(rows);
    }
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
/// label the base and the new report (their file names, the first of each side's); `rows` are
/// the compared rows, judged or not, and `mode` how; `generator_warnings` either side's
/// warnings that its figures are partly the generator's. `None` when the kinds differ.
pub fn page(
    base: &AnyReport,
    new: &AnyReport,
    names: (&str, &str),
    rows: &[Row],
    mode: Mode,
    generator_warnings: &[generator::SideWarning],
) -> Option<String> {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>tailscope compare</h1>");
    let _ = writeln!(
        body,
        "<p class=\"sub\">base: {} · new: {}</p>",
        escape(names.0),
        escape(names.1)
    );
    let differences = unlike(base, new);
    if !differences.is_empty() {
        let _ = writeln!(
            body,
            "<p class=\"warn\">Unlike settings: {}. The changes below measure these settings as much as the server.</p>",
            escape(&differences.join("; "))
        );
    }
    body.push_str(&generator::html(generator_warnings));
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
            // Each target and endpoint's pair side by side: base, then new, in two colours.
            let mut keys: Vec<(&str, &str)> = Vec::new();
            for r in b.results.iter().chain(n.results.iter()) {
                let key = (r.target.as_str(), r.endpoint.as_str());
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            let mut bars = Vec::new();
            for (target, endpoint) in keys {
                for (side, suite, color) in [("base", b, BLUE), ("new", n, P99)] {
                    let Some(r) = suite
                        .results
                        .iter()
                        .find(|r| r.target == target && r.endpoint == endpoint)
                    else {
                        continue;
                    };
                    let Some(rps) = r.rps_median else { continue };
                    bars.push(Bar {
                        label: format!("{target} {endpoint} ({side})"),
                        value: rps,
                        tooltip: format!(
                            "{target} {endpoint} in the {side} suite: {} req/s (median)",
                            show(Some(rps), Unit::Rate)
                        ),
                        whisker: r.rps_min.zip(r.rps_max),
                        color: Some(color),
                    });
                }
            }
            body.push_str(&bar_chart_with_legend(
                "compare-rps",
                "Requests per second, base and new (median, whiskers: slowest to fastest run)",
                "requests/s",
                &bars,
                &count_axis,
                &[
                    (&format!("base: {}", names.0), BLUE),
                    (&format!("new: {}", names.1), P99),
                ],
            ));
        }
        _ => return None,
    }
    body.push_str("<h2>Changes</h2>\n");
    let _ = writeln!(body, "<p class=\"sub\">{}</p>", escape(mode.describe()));
    if mode == Mode::Point {
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
    } else {
        body.push_str(&judged::html(rows));
    }
    body.push_str(&footer("tailscope from two JSON reports"));
    Some(document("tailscope compare", &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::RunFigures;

    fn gated(base: f64, new: f64, better: Better) -> Row {
        Row {
            metric: "m".into(),
            base: Some(base),
            new: Some(new),
            unit: Unit::Rate,
            better,
            gated: true,
            presence: Presence::Both,
            judged: None,
        }
    }

    #[test]
    fn a_median_is_rounded_as_the_suite_table_rounds_it() {
        // The median of two runs is often a half.
        let mut r = SuiteResult::new("nginx", "/", None, Vec::new());
        r.rps_median = Some(85262.5);
        let table = crate::suite::markdown(&[r], None);
        assert!(table.contains("| nginx | / | 85263 |"), "{table}");
        assert_eq!(show(Some(85262.5), Unit::Rate), "85263");
        assert_eq!(show(Some(85263.5), Unit::Rate), "85264");
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
        let errors = |base: f64, new: f64| Row {
            unit: Unit::Fraction,
            ..gated(base, new, Better::Lower)
        };
        let rise = errors(0.0, 0.5);
        assert_eq!(rise.change(), "+50.000 pp", "0 → 50 % is no n/a");
        assert_eq!(
            rise.regression(5.0).as_deref(),
            Some("m: +50.000 pp (limit 5 pp)")
        );
        assert!(errors(0.01, 0.03).regression(5.0).is_none(), "+2 pp");
        assert!(errors(0.5, 0.0).regression(5.0).is_none(), "fewer errors");
        let mut missing = gated(100.0, 0.0, Better::Higher);
        missing.new = None;
        assert!(missing.regression(5.0).unwrap().contains("missing"));
    }

    /// A suite report of these results.
    fn suite(results: Vec<SuiteResult>) -> SuiteReport {
        SuiteReport {
            schema_version: 1,
            kind: "suite".into(),
            tool: crate::document::Tool {
                name: "tailscope".into(),
                version: "0".into(),
            },
            host: crate::suite::Host {
                kernel: None,
                cpu_model: None,
                cpus: 2,
                memory_kb: None,
                governor: None,
                date: "2026-11-22T00:00:00Z".into(),
            },
            baseline: None,
            load: crate::suite::SuiteLoad::default(),
            results,
            interrupted: false,
            rounds: None,
        }
    }

    /// One run of a suite with this req/s and p99.
    fn run(rps: f64, p99_us: u64) -> RunFigures {
        RunFigures {
            rps,
            requests: 1000,
            errors: 0,
            non2xx: 0,
            p50_us: Some(100),
            p95_us: Some(500),
            p99_us: Some(p99_us),
            p999_us: Some(1000),
            max_us: Some(2000),
            duration_s: 1.0,
            server_us_per_request: None,
            by_request: Default::default(),
            warnings: Vec::new(),
            causes: Vec::new(),
        }
    }

    /// Six figures judged together (three targets' req/s and p99, five runs a side): one
    /// whose p-value alone is just under 0.05 is within noise after Holm's correction (it was
    /// "significant" before: this test failed so), and says why; a real 20 % fall stays
    /// significant and still fails the gate.
    #[test]
    fn a_family_of_judged_figures_is_corrected_for_its_size() {
        let spread = [1000.0, 1020.0, 980.0, 1010.0, 990.0];
        let side = |edge_factor: f64, others: f64| {
            let target = |name: &str, factor: f64, p99_factor: f64| {
                let runs = spread
                    .iter()
                    .rev()
                    .map(|&x| run(x * factor, (x * p99_factor) as u64))
                    .collect();
                SuiteResult::new(name, "/", None, runs)
            };
            suite(vec![
                target("edge", edge_factor, others),
                target("calm", others, 1.0),
                target("still", 1.0, others),
            ])
        };
        let judge = |base: &SuiteReport, new: &SuiteReport| {
            let mut rows = rows_of_suites(base, new);
            judged::judge_suites(&mut rows, base, new, 0.95);
            rows
        };
        let find = |rows: &[Row], metric: &str| {
            rows.iter()
                .find(|r| r.metric == metric)
                .cloned()
                .unwrap_or_else(|| panic!("no {metric} in {rows:?}"))
        };
        let base = side(1.0, 1.0);
        let rows = judge(&base, &side(1.025, 1.002));
        let edge = find(&rows, "edge / req/s");
        let c = edge.judged.as_ref().unwrap();
        let p = c.p_value.unwrap();
        assert!((0.03..0.05).contains(&p), "p {p} alone: {c:?}");
        assert_eq!(c.verdict, crate::stats::Verdict::WithinNoise, "{c:?}");
        assert!(
            edge.verdict()
                .starts_with("within noise after Holm over 6 figures (alone: significant, p 0.0"),
            "{}",
            edge.verdict()
        );
        let table = markdown(&rows);
        assert!(
            table.contains("Verdicts corrected for the 6 figures judged together (Holm over 6 figures, family-wise 5 %)"),
            "{table}"
        );
        assert!(!table.contains("| significant |"), "{table}");

        let rows = judge(&base, &side(0.8, 1.002));
        let edge = find(&rows, "edge / req/s");
        let c = edge.judged.as_ref().unwrap();
        assert!(c.p_value.unwrap() < 1e-6, "{c:?}");
        assert_eq!(edge.verdict(), "significant");
        assert!(edge.gate(5.0).is_some(), "a 20 % fall fails a 5 % gate");
        assert_eq!(c.correction.as_ref().map(|k| k.family), Some(6), "{c:?}");
    }

    #[test]
    fn targets_in_only_one_suite_are_listed_as_added_or_removed() {
        let result = |target: &str, rps: f64| {
            let mut r = SuiteResult::new(target, "/", None, Vec::new());
            r.rps_median = Some(rps);
            r
        };
        let base = suite(vec![result("both", 10.0), result("gone", 20.0)]);
        let new = suite(vec![result("fresh", 30.0), result("both", 11.0)]);
        let rows = rows_of_suites(&base, &new);
        let req = |name: &str| {
            rows.iter()
                .find(|r| r.metric == format!("{name} / req/s"))
                .unwrap_or_else(|| panic!("no {name} row in {rows:?}"))
        };
        assert_eq!(req("both").change(), "+10.0 %");
        assert_eq!(req("gone").change(), "removed (only in base)");
        assert!(req("gone").regression(5.0).unwrap().contains("missing"));
        assert_eq!(req("fresh").change(), "added (only in new)");
        assert_eq!(req("fresh").new, Some(30.0));
        assert!(req("fresh").regression(5.0).is_none());
        assert!(markdown(&rows).contains("| fresh / req/s | n/a | 30 | added (only in new) |"));
        // No runs: no error rate, not a made-up 0 %.
        let errors = rows
            .iter()
            .find(|r| r.metric == "both / error rate")
            .unwrap();
        assert_eq!((errors.base, errors.new), (None, None));
    }

    #[test]
    fn a_suite_whose_errors_rose_fails_the_gate() {
        let run = |requests: u64, errors: u64| RunFigures {
            requests,
            errors,
            ..run(1000.0, 900)
        };
        let result = |runs| SuiteResult::new("nginx", "/", None, runs);
        let base = result(vec![run(1000, 0), run(1000, 10)]);
        let worse = result(vec![run(1000, 100), run(3000, 300)]);
        assert_eq!(base.error_rate(), Some(0.005));
        assert_eq!(worse.error_rate(), Some(0.1));
        let row = Row {
            metric: "nginx / error rate".into(),
            base: base.error_rate(),
            new: worse.error_rate(),
            unit: Unit::Fraction,
            better: Better::Lower,
            gated: true,
            presence: Presence::Both,
            judged: None,
        };
        assert!(row.regression(5.0).is_some(), "{}", row.change());
    }
}
