//! `run --until 'p99±2%' --max-duration 5m`: the run lasted until each listed percentile's
//! 95 % interval was within ±X % of it, or until the cap. This is what the report says of it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::fmt_us;

/// The goals of `--until` and what came of them: the JSON's `until`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Until {
    /// Each `--until`, in the order given.
    pub goals: Vec<UntilGoal>,
    /// `--max-duration`: the cap (s).
    pub max_duration_s: f64,
    /// Whether every goal was met at once before the cap.
    pub reached: bool,
    /// When they were (s into the measured run); null when the cap came first.
    pub reached_at_s: Option<f64>,
}

/// One `--until 'pN±X%'`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UntilGoal {
    /// The percentile as given: `p99`, `p99.9`.
    pub percentile: String,
    /// Its quantile: 0.99.
    pub quantile: f64,
    /// The half-width asked for, in percent of the percentile: 2.0 for ±2 %.
    pub within_pct: f64,
    /// When its interval first came within it (s into the measured run); null if never.
    pub reached_at_s: Option<f64>,
    /// The last check before the run stopped (null when none could be made).
    pub last: Option<UntilCheck>,
}

/// One check of a goal: the percentile so far and its interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct UntilCheck {
    /// When (s into the measured run).
    pub at_s: f64,
    /// The percentile so far (µs).
    pub estimate_us: u64,
    /// Its 95 % interval `[low, high]` (µs); null when its samples cannot bound it yet.
    pub ci95: Option<[u64; 2]>,
    /// The interval's larger side from the estimate, in percent of it; null when unbounded.
    pub half_width_pct: Option<f64>,
}

impl UntilCheck {
    /// A check of `estimate` with `interval` at `at_s`: its half-width is the larger of
    /// (estimate − low) and (high − estimate), relative to the estimate.
    pub fn of(at_s: f64, estimate_us: u64, ci95: Option<[u64; 2]>) -> UntilCheck {
        let half_width_pct = ci95.map(|[low, high]| {
            let e = estimate_us.max(1) as f64;
            100.0 * (e - low as f64).max(high as f64 - e).max(0.0) / e
        });
        UntilCheck {
            at_s,
            estimate_us,
            ci95,
            half_width_pct,
        }
    }

    /// Whether the interval is within ±`within_pct` %.
    pub fn within(&self, within_pct: f64) -> bool {
        self.half_width_pct.is_some_and(|h| h <= within_pct)
    }
}

impl Until {
    /// The text summary's line: `Until: p99 ±2 % reached at 12 s (1.15ms, ±1.8 %)`, or that
    /// the cap came first and how far each goal got.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let head = match self.reached_at_s {
            Some(t) => format!("every goal met at {t:.0} s, so the run stopped there"),
            None => format!(
                "--max-duration {:.0} s came first: the run stopped at the cap",
                self.max_duration_s
            ),
        };
        let _ = write!(out, "  Until:         {head}");
        for g in &self.goals {
            let now = match g.last {
                Some(c) => match (c.ci95, c.half_width_pct) {
                    (Some([low, high]), Some(h)) => format!(
                        "{} ({} – {}, ±{h:.1} %)",
                        fmt_us(c.estimate_us),
                        fmt_us(low),
                        fmt_us(high)
                    ),
                    _ => format!("{} (not yet bounded)", fmt_us(c.estimate_us)),
                },
                None => "n/a (no responses)".into(),
            };
            let when = match g.reached_at_s {
                Some(t) => format!("reached at {t:.0} s"),
                None => "not reached".into(),
            };
            let _ = write!(
                out,
                "\n                 {} ±{} %: {when}; last {now}",
                g.percentile, g.within_pct
            );
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checks_half_width_is_its_larger_side() {
        let c = UntilCheck::of(3.0, 1_000, Some([990, 1_030]));
        assert_eq!(c.half_width_pct, Some(3.0));
        assert!(c.within(3.0) && !c.within(2.9));
        let unbounded = UntilCheck::of(3.0, 1_000, None);
        assert!(!unbounded.within(100.0));
    }
}
