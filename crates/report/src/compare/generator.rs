//! The warnings of either side that its figures are partly the generator's: a run whose
//! generator could not keep up measured its own delay beside the server's, and so does a
//! comparison of it. They are carried over whole, named by side and file, above the table.

use serde::Serialize;

use crate::document::is_generator_warning;
use crate::AnyReport;

/// One side's warning that its figures are partly the generator's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideWarning {
    /// `base` or `new`.
    pub side: &'static str,
    /// The report file it is in, with the suite's target, endpoint and run where it is one.
    pub file: String,
    /// The warning as the run's report gives it.
    pub warning: String,
}

/// The generator's warnings of each side's reports, given as (file name, report): the base
/// side's first.
pub fn generator_warnings(
    base: &[(String, &AnyReport)],
    new: &[(String, &AnyReport)],
) -> Vec<SideWarning> {
    let mut out = Vec::new();
    for (side, reports) in [("base", base), ("new", new)] {
        for (file, report) in reports {
            let mut push = |file: String, warning: &String| {
                if is_generator_warning(warning) {
                    out.push(SideWarning {
                        side,
                        file,
                        warning: warning.clone(),
                    });
                }
            };
            match report {
                AnyReport::Run(r) => r.warnings.iter().for_each(|w| push(file.clone(), w)),
                AnyReport::Suite(s) => {
                    for result in &s.results {
                        for (i, run) in result.runs.iter().enumerate() {
                            let at = format!(
                                "{file} ({} {}, run {})",
                                result.target,
                                result.endpoint,
                                i + 1
                            );
                            run.warnings.iter().for_each(|w| push(at.clone(), w));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The carried-over warnings above the change table (markdown); empty when there are none.
pub fn note(warnings: &[SideWarning]) -> String {
    if warnings.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "**The generator could not keep up** in a compared run: that side's figures, and so the changes, are partly the generator's own delay.\n\n",
    );
    for w in warnings {
        out.push_str(&format!("- {} ({}): {}\n", w.side, w.file, w.warning));
    }
    out.push('\n');
    out
}

/// The carried-over warnings as HTML; empty when there are none.
pub fn html(warnings: &[SideWarning]) -> String {
    if warnings.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<p class=\"warn\">The generator could not keep up in a compared run: that side's figures, and so the changes, are partly the generator's own delay.</p>\n<ul class=\"warn\">\n",
    );
    for w in warnings {
        out.push_str(&format!(
            "<li>{} ({}): {}</li>\n",
            w.side,
            crate::page::escape(&w.file),
            crate::page::escape(&w.warning)
        ));
    }
    out.push_str("</ul>\n");
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tailscope_loadgen::plan::Plan;
    use tailscope_loadgen::recorder::new_histogram;
    use tailscope_loadgen::snapshot::{Counters, RunTotals, TimePoint};

    use super::*;
    use crate::document::Report;

    /// A run's report whose generator loop was held up `lag_us` at its worst second.
    fn run(lag_us: u64) -> AnyReport {
        let plan = Plan::new("http://127.0.0.1:9/x").unwrap();
        let mut latency = new_histogram(Duration::from_secs(60));
        (1..=100u64).for_each(|v| latency.record(v * 10).unwrap());
        let counters = Counters {
            successes: 100,
            ..Counters::default()
        };
        let mut t = RunTotals::of_latency(Duration::from_secs(2), counters, latency);
        t.timeseries = vec![
            TimePoint {
                t_s: 1.0,
                generator_lag_us: 3_000,
                ..TimePoint::default()
            },
            TimePoint {
                t_s: 2.0,
                generator_lag_us: lag_us,
                ..TimePoint::default()
            },
        ];
        AnyReport::Run(Box::new(Report::new(&plan, &t)))
    }

    /// A side whose generator fell behind is named, with its file and the warning whole, in
    /// the text and the HTML (escaped); a side that kept up is not.
    #[test]
    fn a_sides_generator_lag_is_carried_over() {
        let (lagged, steady) = (run(867_759), run(3_000));
        let AnyReport::Run(r) = &lagged else {
            unreachable!()
        };
        let warning = r
            .warnings
            .iter()
            .find(|w| w.starts_with("the generator fell behind"))
            .expect("the run itself warns");
        let found = generator_warnings(
            &[("a.json".into(), &steady)],
            &[("b<1>.json".into(), &lagged)],
        );
        assert_eq!(
            found,
            vec![SideWarning {
                side: "new",
                file: "b<1>.json".into(),
                warning: warning.clone(),
            }]
        );
        let text = note(&found);
        assert!(
            text.starts_with("**The generator could not keep up** in a compared run")
                && text.contains(&format!("- new (b<1>.json): {warning}\n")),
            "{text}"
        );
        let page = html(&found);
        assert!(
            page.contains("<li>new (b&lt;1&gt;.json): the generator fell behind: "),
            "{page}"
        );
        assert!(generator_warnings(&[("a.json".into(), &steady)], &[]).is_empty());
        assert_eq!((note(&[]), html(&[])), (String::new(), String::new()));
        // A late-sends warning of the server's side (every connection waiting on it) is not
        // the generator's; one of the generator's own delay is.
        assert!(!is_generator_warning("12 of 100 sends (12 %) left more than 1 ms after their intended time while the generator kept up: every connection was waiting on a response"));
        assert!(is_generator_warning("3 of 6 sends (50 %) left more than 1 ms after their intended time; most the generator's own, while it had a CPU: ...; the latency then includes the generator's own delay, not only the server's: give it more threads"));
    }
}
