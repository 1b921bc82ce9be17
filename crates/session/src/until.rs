//! `run --until 'p99±2%' --max-duration 5m`: keep the load on until each listed percentile's
//! 95 % interval is within ±X % of it, checked once a second, then stop.
//!
//! The interval checked is the report's own (`tailscope_report::document::percentile_interval`:
//! the wider of order statistics and the block bootstrap over the run's seconds), and no goal
//! counts as met before the run has the [`MIN_SECONDS`] seconds the bootstrap needs: order
//! statistics alone take the requests as independent, which in a load test they are not, so
//! a run stopped on them alone would stop too soon. The seconds are cut from the snapshots'
//! cumulative histogram at each whole second of the measured run (the generator's own
//! seconds, in the report, are cut by its aggregator: the final interval may differ a little
//! from the last check, and the report gives both).

use std::time::Duration;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use tailscope_loadgen::{Phase, RunControl, Snapshot};
use tailscope_report::document::{percentile_interval, Until, UntilCheck, UntilGoal};
use tailscope_report::stats::bootstrap::MIN_SECONDS;

/// One `--until 'pN±X%'`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// As given, normalised: `p99`, `p99.9`.
    pub percentile: String,
    /// In (0, 1): 0.99.
    pub quantile: f64,
    /// The half-width asked for, in percent: 2.0.
    pub within_pct: f64,
}

/// Parses `p99±2%` (or `p99+-2%`, for keyboards without ±): a percentile strictly between 0
/// and 100 and a width above 0 and at most 100 %.
pub fn parse_goal(s: &str) -> Result<Goal, String> {
    let form = "give a percentile and the interval's half-width, e.g. 'p99±2%' or 'p99.9+-5%'";
    let t = s.trim();
    let (p, width) = t
        .split_once('±')
        .or_else(|| t.split_once("+-"))
        .ok_or_else(|| format!("'{s}' has no ±: {form}"))?;
    let number = p
        .trim()
        .strip_prefix('p')
        .ok_or_else(|| format!("'{p}' is not a percentile: {form}"))?;
    let percent: f64 = number
        .parse()
        .map_err(|_| format!("'{p}' is not a percentile: {form}"))?;
    if !(percent > 0.0 && percent < 100.0) {
        return Err(format!(
            "{p} is not a percentile: the number after p is between 0 and 100 (p50, p99, p99.9)"
        ));
    }
    let width = width.trim();
    let within_pct: f64 = width
        .strip_suffix('%')
        .ok_or_else(|| format!("'{width}' needs a % (p99±2%): {form}"))?
        .trim()
        .parse()
        .map_err(|_| format!("'{width}' is not a width in percent: {form}"))?;
    if !(within_pct > 0.0 && within_pct <= 100.0) {
        return Err(format!(
            "±{width} can never be met or means nothing: give a width above 0 and at most 100 % (p99±2%)"
        ));
    }
    Ok(Goal {
        percentile: format!("p{number}"),
        quantile: percent / 100.0,
        within_pct,
    })
}

/// Watches a run's snapshots for the goals, once a whole second.
pub struct UntilWatch {
    goals: Vec<Goal>,
    max_duration: Duration,
    /// Each measured second's histogram, V2-serialized (a full histogram a second would
    /// not stay small over a long run).
    seconds: Vec<Vec<u8>>,
    /// The cumulative histogram at the last whole second.
    at_last_second: Option<Histogram<u64>>,
    last: Vec<Option<UntilCheck>>,
    reached_at: Vec<Option<f64>>,
    /// When every goal was met at once.
    met_at: Option<f64>,
    /// Whether that stopped the run.
    stopped: bool,
}

impl UntilWatch {
    /// A watch for `goals`, the run capped at `max_duration`.
    pub fn new(goals: Vec<Goal>, max_duration: Duration) -> UntilWatch {
        let n = goals.len();
        UntilWatch {
            goals,
            max_duration,
            seconds: Vec::new(),
            at_last_second: None,
            last: vec![None; n],
            reached_at: vec![None; n],
            met_at: None,
            stopped: false,
        }
    }

    /// Takes a snapshot; true the first time every goal is met (the caller stops the run).
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> bool {
        if snap.phase != Phase::Running || self.met_at.is_some() {
            return false;
        }
        let second = snap.elapsed.as_secs() as usize;
        if second <= self.seconds.len() {
            return false;
        }
        let mut this_second = snap.histogram.clone();
        if let Some(before) = &self.at_last_second {
            // Counts only grow between snapshots of one run: the subtraction cannot fail.
            let _ = this_second.subtract(before);
        }
        let mut bytes = Vec::new();
        if V2Serializer::new()
            .serialize(&this_second, &mut bytes)
            .is_ok()
        {
            self.seconds.push(bytes);
        }
        self.at_last_second = Some(snap.histogram.clone());
        let at_s = snap.elapsed.as_secs_f64();
        let all = self.check(&snap.histogram, at_s);
        if all && self.seconds.len() >= MIN_SECONDS {
            self.met_at = Some(at_s);
        }
        self.met_at.is_some()
    }

    /// Checks every goal against the run so far; true when all are within.
    fn check(&mut self, h: &Histogram<u64>, at_s: f64) -> bool {
        if h.is_empty() {
            return false;
        }
        let enough = self.seconds.len() >= MIN_SECONDS;
        let mut decoded: Option<Vec<Histogram<u64>>> = None;
        let mut all = true;
        for (i, g) in self.goals.iter().enumerate() {
            let estimate = h.value_at_quantile(g.quantile);
            // Order statistics first: they are never wider than the report's interval, so
            // a goal they miss is missed, without the bootstrap's cost.
            let ordered = percentile_interval(h, &[], g.quantile).ok().map(|(b, _)| b);
            let mut check = UntilCheck::of(at_s, estimate, ordered);
            if check.within(g.within_pct) && enough {
                let seconds = decoded.get_or_insert_with(|| decode(&self.seconds));
                let full = percentile_interval(h, seconds, g.quantile)
                    .ok()
                    .map(|(b, _)| b);
                check = UntilCheck::of(at_s, estimate, full);
            }
            let within = check.within(g.within_pct) && enough;
            if within && self.reached_at[i].is_none() {
                self.reached_at[i] = Some(at_s);
            }
            all &= within;
            self.last[i] = Some(check);
        }
        all
    }

    /// What the report says of the goals.
    pub fn outcome(&self) -> Until {
        Until {
            goals: self
                .goals
                .iter()
                .zip(&self.last)
                .zip(&self.reached_at)
                .map(|((g, last), reached)| UntilGoal {
                    percentile: g.percentile.clone(),
                    quantile: g.quantile,
                    within_pct: g.within_pct,
                    reached_at_s: *reached,
                    last: *last,
                })
                .collect(),
            max_duration_s: self.max_duration.as_secs_f64(),
            reached: self.met_at.is_some(),
            reached_at_s: self.met_at,
        }
    }

    /// Takes a snapshot, and stops the run through `control` when every goal is met
    /// (unless something else stopped it first: then the stop was not the goals').
    pub fn watch(&mut self, snap: &Snapshot, control: &RunControl) {
        let stopped_before = control.is_stopped();
        if self.on_snapshot(snap) && !stopped_before {
            self.stopped = true;
            control.stop();
        }
    }

    /// Whether the goals stopped the run (a planned end, not an interruption).
    pub fn stopped_the_run(&self) -> bool {
        self.stopped
    }
}

fn decode(seconds: &[Vec<u8>]) -> Vec<Histogram<u64>> {
    seconds
        .iter()
        .filter_map(|b| Deserializer::new().deserialize(&mut b.as_slice()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_goal("p99±2%"),
            Ok(Goal {
                percentile: "p99".into(),
                quantile: 0.99,
                within_pct: 2.0
            })
        );
        let g = parse_goal("p99.9+-5 %").unwrap();
        assert_eq!((g.percentile.as_str(), g.within_pct), ("p99.9", 5.0));
        assert!((g.quantile - 0.999).abs() < 1e-12);
        for (bad, says) in [
            ("p99", "has no ±"),
            ("p101±2%", "p101 is not a percentile"),
            ("p0±2%", "p0 is not a percentile"),
            ("99±2%", "is not a percentile"),
            ("p99±0%", "±0% can never be met"),
            ("p99±2", "needs a %"),
            ("p99±x%", "is not a width"),
            ("p99±200%", "at most 100 %"),
        ] {
            let e = parse_goal(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
