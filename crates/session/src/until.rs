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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use tailscope_loadgen::{Phase, RunControl, Snapshot};
use tailscope_report::document::{percentile_interval, Until, UntilCheck, UntilGoal};
use tailscope_report::stats::bootstrap::{MAX_UNITS, MIN_SECONDS};

/// The most units of consecutive seconds the checker keeps: reaching it, neighbours are merged
/// in pairs (units of twice the seconds). The bootstrap resamples at most [`MAX_UNITS`] units,
/// so twice that loses it nothing; a week-long `--max-duration` keeps 512 units, not 604,800
/// seconds.
const MAX_KEPT_UNITS: usize = 2 * MAX_UNITS;

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

/// One whole second of the measured run, cut on the aggregator's thread and sent to the
/// checker.
struct Second {
    /// Seconds into the measured run.
    at_s: f64,
    /// The run's cumulative histogram at that second.
    cumulative: Histogram<u64>,
    /// That second's own histogram, V2-serialized (a full histogram a second would not stay
    /// small over a long run).
    bytes: Vec<u8>,
}

/// Watches a run's snapshots for the goals, once a whole second.
///
/// The snapshot callback runs on the generator's aggregator thread, whose per-second work
/// (folding the workers' intervals, the journal) must not wait: there the watch only cuts
/// the second's histogram and hands it over. The check itself (order statistics, then the
/// block bootstrap over every second so far, which grows with the run) runs on a thread of
/// its own, which stops the run through its [`RunControl`] once every goal is met. Seconds
/// that arrive while a check runs are kept, and only the newest is checked.
pub struct UntilWatch {
    goals: Vec<Goal>,
    max_duration: Duration,
    /// Whole seconds cut so far.
    seconds_cut: usize,
    /// The cumulative histogram at the last whole second.
    at_last_second: Option<Histogram<u64>>,
    /// Set by the checker once every goal is met: no more seconds are cut.
    met: Arc<AtomicBool>,
    feed: Option<Sender<Second>>,
    checker: Option<JoinHandle<Checker>>,
}

/// The goals' state, owned by the checker thread.
struct Checker {
    goals: Vec<Goal>,
    seconds: SecondUnits,
    last: Vec<Option<UntilCheck>>,
    reached_at: Vec<Option<f64>>,
    /// When every goal was met at once.
    met_at: Option<f64>,
    /// Whether that stopped the run.
    stopped: bool,
}

/// What the watch found, once the run is over.
#[derive(Debug, Clone)]
pub struct UntilDone {
    /// What the report says of the goals.
    pub outcome: Until,
    /// Whether the goals stopped the run (a planned end, not an interruption).
    pub stopped_the_run: bool,
}

impl UntilWatch {
    /// A watch for `goals`, the run capped at `max_duration`, that stops the run through
    /// `control` when every goal is met (unless something else stopped it first: then the
    /// stop was not the goals').
    pub fn new(goals: Vec<Goal>, max_duration: Duration, control: &RunControl) -> UntilWatch {
        let n = goals.len();
        let met = Arc::new(AtomicBool::new(false));
        let (feed, seconds) = mpsc::channel::<Second>();
        let mut checker = Checker {
            goals: goals.clone(),
            seconds: SecondUnits::default(),
            last: vec![None; n],
            reached_at: vec![None; n],
            met_at: None,
            stopped: false,
        };
        let (control, met_flag) = (control.clone(), Arc::clone(&met));
        let handle = std::thread::Builder::new()
            .name("until-check".into())
            .spawn(move || {
                checker.serve(seconds, &control, &met_flag);
                checker
            });
        // Without the thread the goals are never checked: the run goes on to its cap, and
        // the report says the cap came first, which is then true.
        let (feed, checker) = match handle {
            Ok(h) => (Some(feed), Some(h)),
            Err(_) => (None, None),
        };
        UntilWatch {
            goals,
            max_duration,
            seconds_cut: 0,
            at_last_second: None,
            met,
            feed,
            checker,
        }
    }

    /// Takes a snapshot: at each new whole second of the measured run, cuts that second's
    /// histogram and hands it to the checker. Never waits for a check.
    pub fn watch(&mut self, snap: &Snapshot) {
        if snap.phase != Phase::Running || self.met.load(Ordering::Relaxed) {
            return;
        }
        let second = snap.elapsed.as_secs() as usize;
        if second <= self.seconds_cut {
            return;
        }
        let Some(feed) = &self.feed else {
            return;
        };
        let mut this_second = snap.histogram.clone();
        if let Some(before) = &self.at_last_second {
            // Counts only grow between snapshots of one run: the subtraction cannot fail.
            let _ = this_second.subtract(before);
        }
        let mut bytes = Vec::new();
        if V2Serializer::new()
            .serialize(&this_second, &mut bytes)
            .is_err()
        {
            return;
        }
        self.seconds_cut = second;
        match &mut self.at_last_second {
            Some(h) => {
                h.reset();
                let _ = h.add(&snap.histogram);
            }
            None => self.at_last_second = Some(snap.histogram.clone()),
        }
        let _ = feed.send(Second {
            at_s: snap.elapsed.as_secs_f64(),
            cumulative: snap.histogram.clone(),
            bytes,
        });
    }

    /// Ends the watch once the run is over (waiting for a check under way) and says what
    /// it found.
    pub fn finish(mut self) -> UntilDone {
        drop(self.feed.take());
        let checker = self.checker.take().and_then(|h| h.join().ok());
        let n = self.goals.len();
        let (last, reached_at, met_at, stopped) = match checker {
            Some(c) => (c.last, c.reached_at, c.met_at, c.stopped),
            None => (vec![None; n], vec![None; n], None, false),
        };
        UntilDone {
            outcome: Until {
                goals: self
                    .goals
                    .iter()
                    .zip(&last)
                    .zip(&reached_at)
                    .map(|((g, last), reached)| UntilGoal {
                        percentile: g.percentile.clone(),
                        quantile: g.quantile,
                        within_pct: g.within_pct,
                        reached_at_s: *reached,
                        last: *last,
                    })
                    .collect(),
                max_duration_s: self.max_duration.as_secs_f64(),
                reached: met_at.is_some(),
                reached_at_s: met_at,
            },
            stopped_the_run: stopped,
        }
    }
}

impl Checker {
    /// Checks each second handed over until the run ends (the feed is dropped).
    fn serve(&mut self, seconds: Receiver<Second>, control: &RunControl, met: &AtomicBool) {
        while let Ok(mut second) = seconds.recv() {
            self.seconds.push(std::mem::take(&mut second.bytes));
            // Seconds that came while the last check ran: keep them, check the newest.
            while let Ok(mut newer) = seconds.try_recv() {
                self.seconds.push(std::mem::take(&mut newer.bytes));
                second = newer;
            }
            if self.met_at.is_some() {
                continue;
            }
            let stopped_before = control.is_stopped();
            let all = self.check(&second.cumulative, second.at_s);
            if all && self.seconds.seconds >= MIN_SECONDS {
                self.met_at = Some(second.at_s);
                met.store(true, Ordering::Relaxed);
                if !stopped_before && !control.is_stopped() {
                    self.stopped = true;
                    control.stop();
                }
            }
        }
    }

    /// Checks every goal against the run so far; true when all are within.
    fn check(&mut self, h: &Histogram<u64>, at_s: f64) -> bool {
        if h.is_empty() {
            return false;
        }
        let enough = self.seconds.seconds >= MIN_SECONDS;
        let mut decoded: Option<Vec<Histogram<u64>>> = None;
        let mut all = true;
        for (i, g) in self.goals.iter().enumerate() {
            let estimate = h.value_at_quantile(g.quantile);
            // Order statistics first: they are never wider than the report's interval, so
            // a goal they miss is missed, without the bootstrap's cost.
            let ordered = percentile_interval::<[hdrhistogram::Histogram<u64>]>(h, &[], g.quantile)
                .ok()
                .map(|(b, _)| b);
            let mut check = UntilCheck::of(at_s, estimate, ordered);
            if check.within(g.within_pct) && enough {
                let seconds = decoded.get_or_insert_with(|| self.seconds.decoded());
                let full = percentile_interval(h, &seconds[..], g.quantile)
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
}

/// The run's seconds as the bootstrap reads them, in bounded memory: units of `unit_seconds`
/// consecutive seconds each (1 until [`MAX_KEPT_UNITS`] is reached, then 2, 4, ...), each
/// V2-serialized, in order, and the unit being filled. The interval over units of a few
/// seconds is the bootstrap's own over a long run (it merges consecutive seconds into at most
/// [`MAX_UNITS`] units), so the check judges a long run as the report does, up to where the
/// units' edges fall.
#[derive(Default)]
struct SecondUnits {
    /// Whole seconds taken.
    seconds: usize,
    /// Full units, oldest first.
    units: Vec<Vec<u8>>,
    /// Seconds per full unit (0 before the first second: read as 1).
    unit_seconds: usize,
    /// The unit being filled (when units are longer than a second) and its seconds so far.
    filling: Option<(Histogram<u64>, usize)>,
}

impl SecondUnits {
    /// Takes the next second (V2-serialized); one that cannot be read is counted but adds
    /// nothing (histograms serialized here always can be).
    fn push(&mut self, bytes: Vec<u8>) {
        self.seconds += 1;
        let width = self.unit_seconds.max(1);
        if width == 1 {
            self.units.push(bytes);
        } else {
            let Some(second) = decode_one(&bytes) else {
                return;
            };
            let (unit, filled) = match self.filling.take() {
                Some((mut unit, filled)) => {
                    let _ = unit.add(&second);
                    (unit, filled + 1)
                }
                None => (second, 1),
            };
            if filled < width {
                self.filling = Some((unit, filled));
                return;
            }
            self.units.push(encode(&unit));
        }
        if self.units.len() >= MAX_KEPT_UNITS {
            self.units = self
                .units
                .chunks(2)
                .map(|pair| {
                    let mut merged: Option<Histogram<u64>> = None;
                    for h in pair.iter().filter_map(|b| decode_one(b)) {
                        match &mut merged {
                            Some(m) => {
                                let _ = m.add(&h);
                            }
                            None => merged = Some(h),
                        }
                    }
                    merged.map_or_else(Vec::new, |m| encode(&m))
                })
                .collect();
            self.unit_seconds = width * 2;
        }
    }

    /// Every unit decoded, the one being filled last.
    fn decoded(&self) -> Vec<Histogram<u64>> {
        let mut units: Vec<Histogram<u64>> =
            self.units.iter().filter_map(|b| decode_one(b)).collect();
        units.extend(self.filling.as_ref().map(|(h, _)| h.clone()));
        units
    }
}

fn decode_one(bytes: &[u8]) -> Option<Histogram<u64>> {
    Deserializer::new().deserialize(&mut &bytes[..]).ok()
}

fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Into a Vec, serializing fails only on a histogram too large to describe, which one
    // merged from a run's seconds is not; an empty unit then reads as no unit.
    let _ = V2Serializer::new().serialize(h, &mut bytes);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_loadgen::conns::Gauges;
    use tailscope_loadgen::snapshot::Counters;
    use tailscope_loadgen::{Percentiles, SpikeCounts};

    /// A measured snapshot `elapsed` into the run whose histogram holds `per_second`
    /// responses of 1–1000 µs (uniform, the same every second) for each whole second so far.
    fn snapshot(elapsed: Duration, per_second: u64) -> Snapshot {
        let mut histogram = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        for _ in 0..elapsed.as_secs() {
            for i in 0..per_second {
                histogram.record(1 + i % 1000).unwrap();
            }
        }
        Snapshot {
            phase: Phase::Running,
            elapsed,
            warmup_left: Duration::ZERO,
            totals: Counters::default(),
            last_tick: Counters::default(),
            tick: Duration::from_millis(100),
            latency: Percentiles::default(),
            last_tick_latency: Percentiles::default(),
            histogram,
            slowest: Vec::new(),
            recent_seconds: Vec::new(),
            spike_counts: SpikeCounts::default(),
            conns: Gauges::default(),
            conns_peak: Gauges::default(),
            by_request: Vec::new(),
            seconds_closed: elapsed.as_secs() as usize,
            new_second_histograms: Vec::new(),
            checkpoint: None,
        }
    }

    /// The check runs on its own thread and still stops the run: steady seconds of 20,000
    /// responses bound p99 well within ±5 % once the bootstrap has its seconds, and the
    /// control is stopped by the checker (joined by `finish`), the report saying when.
    #[test]
    fn the_checker_thread_stops_the_run_once_the_goal_is_met() {
        let control = RunControl::new();
        let goal = parse_goal("p99±5%").unwrap();
        let mut watch = UntilWatch::new(vec![goal], Duration::from_secs(60), &control);
        for second in 1..=(MIN_SECONDS as u64 + 2) {
            watch.watch(&snapshot(Duration::from_secs(second), 20_000));
        }
        let done = watch.finish();
        assert!(control.is_stopped(), "{:?}", done.outcome);
        assert!(done.stopped_the_run);
        assert!(done.outcome.reached, "{:?}", done.outcome);
        let at = done.outcome.reached_at_s.unwrap();
        assert!(
            at >= MIN_SECONDS as f64,
            "met before the bootstrap had its seconds: {at}"
        );
        // A goal too narrow for these samples is never met, and nothing is stopped.
        let control = RunControl::new();
        let goal = parse_goal("p99±0.01%").unwrap();
        let mut watch = UntilWatch::new(vec![goal], Duration::from_secs(60), &control);
        for second in 1..=(MIN_SECONDS as u64 + 2) {
            watch.watch(&snapshot(Duration::from_secs(second), 20_000));
        }
        let done = watch.finish();
        assert!(!control.is_stopped() && !done.stopped_the_run);
        assert!(!done.outcome.reached);
        assert!(done.outcome.goals[0].last.is_some(), "the goal was checked");
    }

    /// A long `--until` run (3,000 seconds, constructed): the seconds kept never exceed
    /// [`MAX_KEPT_UNITS`] units, lose no response, and stay in order.
    #[test]
    fn a_long_runs_seconds_are_kept_in_bounded_units_in_order() {
        let mut kept = SecondUnits::default();
        let mut responses = 0;
        for i in 0..3000u64 {
            let mut second = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
            second.record_n(1000 + 100 * i, i % 7 + 1).unwrap();
            responses += i % 7 + 1;
            kept.push(encode(&second));
            assert!(kept.units.len() < MAX_KEPT_UNITS, "at second {i}");
        }
        // 512 seconds make 512 units, merged to 256 of 2 s; at 1,024 s to 256 of 4 s; at
        // 2,048 s to 256 of 8 s; then 952 more seconds are 119 units of 8 s.
        assert_eq!(kept.seconds, 3000);
        assert_eq!(kept.unit_seconds, 8);
        assert_eq!(kept.units.len(), 256 + 119);
        assert!(kept.filling.is_none());
        let units = kept.decoded();
        assert_eq!(units.iter().map(Histogram::len).sum::<u64>(), responses);
        for pair in units.windows(2) {
            let last_of_first = pair[0].lowest_equivalent(pair[0].max());
            assert!(last_of_first <= pair[1].min(), "units out of order");
        }
        // A second more starts a unit being filled, read last.
        let mut second = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        second.record(9_000_000).unwrap();
        kept.push(encode(&second));
        let units = kept.decoded();
        assert_eq!(units.len(), 376);
        assert_eq!(units.last().map(Histogram::len), Some(1));
    }

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
