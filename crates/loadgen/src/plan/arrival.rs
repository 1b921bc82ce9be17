//! Load shapes: how open-loop requests arrive (`--arrival`, `--burst`) and how the rate or the
//! connection count changes over the run (`--stages`), and the schedule a worker draws its
//! intended send times from.
//!
//! A worker's schedule is a cumulative-count function Λ(t) = ∫₀ᵗ r(s) ds of its share of the
//! planned rate r(t) (piecewise linear: stages ramp linearly), and an arrival process on the
//! count axis: the k-th request is intended at Λ⁻¹(u_k). Uniform arrivals take u_k = k + phase
//! (one every 1/r, the workers' phases interleaving); Poisson arrivals take u_k as the partial
//! sums of Exp(1) draws, which makes the times a (non-homogeneous) Poisson process of rate
//! r(t) (the time-change theorem); the sum of the workers' independent Poisson processes is
//! again Poisson at the total rate. Bursts do not go through Λ: `size` requests at once every
//! `every`, the same instants on every worker.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::limits::{parse_duration, MAX_CONNECTIONS, MAX_RATE};

/// How open-loop requests are spread in time (`--arrival`, `--burst`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Arrival {
    /// Evenly spaced: one every 1/rate (wrk2's metronome).
    #[default]
    Uniform,
    /// Exponential gaps at the same mean rate: independent clients, as real ones arrive.
    Poisson,
    /// `size` requests at once every `every` (`--burst N/DUR`).
    Burst {
        /// Requests sent together.
        size: u64,
        /// Time between bursts.
        every: Duration,
    },
}

impl Arrival {
    /// The name reports use: "uniform", "poisson", "burst".
    pub fn name(&self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
            Arrival::Burst { .. } => "burst",
        }
    }
}

/// Parses `--arrival`: `uniform` or `poisson`.
pub fn parse_arrival(s: &str) -> Result<Arrival, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "uniform" => Ok(Arrival::Uniform),
        "poisson" => Ok(Arrival::Poisson),
        other => Err(format!(
            "{other:?} is not an arrival process: give uniform or poisson (bursts are --burst N/DUR)"
        )),
    }
}

/// Parses `--burst N/DUR`: N requests at once every DUR (`100/1s`, `50/200ms`).
pub fn parse_burst(s: &str) -> Result<Arrival, String> {
    let t = s.trim();
    let (n, every) = t
        .split_once('/')
        .ok_or_else(|| format!("{t:?} is not a burst: write N/DUR, e.g. 100/1s"))?;
    let size: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("{t:?}: {n:?} is not a request count: write N/DUR, e.g. 100/1s"))?;
    if size == 0 {
        return Err(format!("{t:?}: a burst needs at least 1 request"));
    }
    let every = parse_duration(every)?;
    if every < Duration::from_millis(1) {
        return Err(format!("{t:?}: bursts must be at least 1ms apart"));
    }
    if size as f64 / every.as_secs_f64() > MAX_RATE {
        return Err(format!("{t:?}: more than {MAX_RATE} requests per second"));
    }
    Ok(Arrival::Burst { size, every })
}

/// What one stage of `--stages` reaches by its end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StageTarget {
    /// Open loop: this many requests per second in total.
    Rate(f64),
    /// Closed loop: this many connections sending.
    Connections(usize),
}

/// One stage of `--stages`: over `duration`, the rate (or connection count) ramps linearly
/// from the previous stage's target (the first from 0) to its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadStage {
    /// How long the stage lasts.
    pub duration: Duration,
    /// Where it ends.
    pub target: StageTarget,
}

/// Parses `--stages`: `10s:1000,30s:1000,1m:5000` (open loop, requests per second) or
/// `30s:c=64,30s:c=1024` (closed loop, connections); one kind throughout.
pub fn parse_stages(s: &str) -> Result<Vec<LoadStage>, String> {
    let example = "write DUR:RATE or DUR:c=CONNS, comma-separated, e.g. 10s:1000,30s:5000";
    let mut stages = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (d, target) = part
            .split_once(':')
            .ok_or_else(|| format!("stage {part:?} has no target: {example}"))?;
        let duration = parse_duration(d).map_err(|e| format!("stage {part:?}: {e}"))?;
        if duration < Duration::from_millis(1) {
            return Err(format!("stage {part:?}: a stage lasts at least 1ms"));
        }
        let target = target.trim();
        let target = if let Some(c) = target.strip_prefix("c=") {
            let n: usize = c.trim().parse().map_err(|_| {
                format!("stage {part:?}: {c:?} is not a connection count: {example}")
            })?;
            if !(1..=MAX_CONNECTIONS).contains(&n) {
                return Err(format!(
                    "stage {part:?}: connections must be 1..={MAX_CONNECTIONS}"
                ));
            }
            StageTarget::Connections(n)
        } else {
            let r: f64 = target
                .strip_suffix("/s")
                .unwrap_or(target)
                .trim()
                .parse()
                .map_err(|_| format!("stage {part:?}: {target:?} is not a rate: {example}"))?;
            if !(0.0..=MAX_RATE).contains(&r) {
                return Err(format!(
                    "stage {part:?}: a rate must be 0..={MAX_RATE} requests per second"
                ));
            }
            StageTarget::Rate(r)
        };
        stages.push(LoadStage { duration, target });
    }
    let rates = stages
        .iter()
        .filter(|s| matches!(s.target, StageTarget::Rate(_)))
        .count();
    if rates != 0 && rates != stages.len() {
        return Err(format!(
            "{s:?} mixes rates and connection counts: stages are all DUR:RATE (open loop) or all DUR:c=N (closed loop)"
        ));
    }
    if rates != 0 && stages.iter().all(|s| s.target == StageTarget::Rate(0.0)) {
        return Err(format!(
            "{s:?}: every stage's rate is 0; nothing would be sent"
        ));
    }
    Ok(stages)
}

/// The stages' total length.
pub fn stages_duration(stages: &[LoadStage]) -> Duration {
    stages.iter().map(|s| s.duration).sum()
}

/// The value `stages` plan at `t` from their start (linear within a stage from the previous
/// target, the first from `from`); past the end, the last target.
pub fn planned_at(stages: &[LoadStage], from: f64, t: f64) -> f64 {
    let value = |s: &LoadStage| match s.target {
        StageTarget::Rate(r) => r,
        StageTarget::Connections(c) => c as f64,
    };
    let mut begin = 0.0;
    let mut prev = from;
    for s in stages {
        let d = s.duration.as_secs_f64();
        if t < begin + d {
            return prev + (value(s) - prev) * ((t - begin) / d).max(0.0);
        }
        begin += d;
        prev = value(s);
    }
    prev
}

/// Closed loop with connection stages: the earliest time ≥ `t` (seconds from the start) at
/// which connection `index` (0-based over the run) is among those planned to send, i.e. the
/// planned count exceeds its index; none if it never is again.
pub fn connection_active_from(stages: &[LoadStage], index: usize, t: f64) -> Option<f64> {
    let g = index as f64;
    let value = |s: &LoadStage| match s.target {
        StageTarget::Connections(c) => c as f64,
        StageTarget::Rate(r) => r,
    };
    let (mut begin, mut prev) = (0.0, 0.0);
    for s in stages {
        let d = s.duration.as_secs_f64();
        let end = begin + d;
        let to = value(s);
        if t < end {
            let from_t = t.max(begin);
            let at_from = prev + (to - prev) * (from_t - begin) / d;
            if at_from > g {
                return Some(from_t);
            }
            if to > g {
                // Rising through g inside the stage: where the line crosses it, just after.
                let cross = begin + (g - prev) / (to - prev) * d;
                return Some(cross.max(from_t) + 1e-9);
            }
        }
        begin = end;
        prev = to;
    }
    (prev > g).then_some(t.max(begin))
}

/// A piecewise-linear rate r(t), t in seconds from the schedule's origin, and its integral.
#[derive(Debug, Clone)]
struct Profile {
    /// (start, duration, rate at start, rate at end, count Λ at start); the last segment
    /// lasts for ever at its end rate past its duration.
    segments: Vec<(f64, f64, f64, f64, f64)>,
    /// The segment the last inversion ended in (counts only grow).
    cursor: usize,
}

impl Profile {
    fn constant(rate: f64) -> Profile {
        Profile {
            segments: vec![(0.0, f64::INFINITY, rate, rate, 0.0)],
            cursor: 0,
        }
    }

    fn from_stages(stages: &[(f64, f64)], from: f64) -> Profile {
        let mut segments = Vec::with_capacity(stages.len() + 1);
        let (mut t, mut count, mut prev) = (0.0, 0.0, from);
        for &(d, r) in stages {
            segments.push((t, d, prev, r, count));
            count += (prev + r) / 2.0 * d;
            t += d;
            prev = r;
        }
        segments.push((t, f64::INFINITY, prev, prev, count));
        Profile {
            segments,
            cursor: 0,
        }
    }

    /// The time t with Λ(t) = u, none if the rate stays 0 for ever before reaching it.
    fn inverse(&mut self, u: f64) -> Option<f64> {
        while let Some(&(t0, d, r0, r1, c0)) = self.segments.get(self.cursor) {
            let area = if d.is_finite() {
                (r0 + r1) / 2.0 * d
            } else if r1 > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            let v = u - c0;
            if v < area {
                // a x² + b x = v with a = (r1 − r0)/2d, b = r0; the form 2v/(b + √(b² + 4av))
                // stays exact as a → 0 and for b = 0.
                let a = if d.is_finite() {
                    (r1 - r0) / (2.0 * d)
                } else {
                    0.0
                };
                let root = (r0 * r0 + 4.0 * a * v).max(0.0).sqrt();
                let x = if r0 + root > 0.0 {
                    2.0 * v / (r0 + root)
                } else {
                    0.0
                };
                return Some(t0 + x.clamp(0.0, d));
            }
            self.cursor += 1;
        }
        None
    }

    fn rate_at(&self, t: f64) -> f64 {
        let i = self.segments.partition_point(|s| s.0 <= t).max(1) - 1;
        let (t0, d, r0, r1, _) = self.segments[i];
        if d.is_finite() {
            r0 + (r1 - r0) * ((t - t0) / d).clamp(0.0, 1.0)
        } else {
            r1
        }
    }
}

/// One worker's open-loop schedule: its intended send times, in seconds from its origin.
#[derive(Debug, Clone)]
pub struct Schedule {
    profile: Profile,
    process: Process,
    /// Added to every time: where the profile's t = 0 is, in seconds from the origin (moved
    /// by a rate change).
    shift: f64,
    /// The next intended time, cached (none: no more).
    next: Option<f64>,
}

#[derive(Debug, Clone)]
enum Process {
    Uniform {
        k: u64,
        phase: f64,
    },
    Poisson {
        u: f64,
        rng: Xoshiro256PlusPlus,
    },
    Burst {
        j: u64,
        of: u64,
        size: u64,
        every: f64,
    },
}

impl Schedule {
    /// A worker's schedule of `arrival` at `share` of the planned rate: `rate` in total, or
    /// the rate `stages` plan (`stages` as (duration s, total rate) from 0, when not empty).
    /// `phase` (0..1) places a uniform schedule's first slot within its interval; `burst_size`
    /// is this worker's part of a burst; `seed` seeds the Poisson draws.
    pub fn new(
        arrival: Arrival,
        rate: f64,
        stages: &[(f64, f64)],
        share: f64,
        phase: f64,
        burst_size: u64,
        seed: u64,
    ) -> Schedule {
        let profile = if stages.is_empty() {
            Profile::constant(rate * share)
        } else {
            let mine: Vec<(f64, f64)> = stages.iter().map(|&(d, r)| (d, r * share)).collect();
            Profile::from_stages(&mine, 0.0)
        };
        let process = match arrival {
            Arrival::Uniform => Process::Uniform { k: 0, phase },
            Arrival::Poisson => {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                let u = exp1(&mut rng);
                Process::Poisson { u, rng }
            }
            Arrival::Burst { every, .. } => Process::Burst {
                j: 0,
                of: 0,
                size: burst_size,
                every: every.as_secs_f64(),
            },
        };
        let mut s = Schedule {
            profile,
            process,
            shift: 0.0,
            next: None,
        };
        s.next = s.compute();
        s
    }

    fn compute(&mut self) -> Option<f64> {
        let u = match &self.process {
            Process::Uniform { k, phase } => *k as f64 + phase,
            Process::Poisson { u, .. } => *u,
            Process::Burst { j, size, every, .. } => {
                return (*size > 0).then(|| self.shift + *j as f64 * every);
            }
        };
        self.profile.inverse(u).map(|t| t + self.shift)
    }

    /// The next intended time (seconds from the origin), none when the plan sends no more.
    pub fn peek(&self) -> Option<f64> {
        self.next
    }

    /// Moves past the next intended time.
    pub fn advance(&mut self) {
        match &mut self.process {
            Process::Uniform { k, .. } => *k += 1,
            Process::Poisson { u, rng } => *u += exp1(rng),
            Process::Burst { j, of, size, .. } => {
                *of += 1;
                if *of >= *size {
                    *of = 0;
                    *j += 1;
                }
            }
        }
        self.next = self.compute();
    }

    /// From the next intended time on, this worker's share of a new total rate, constant
    /// (the live `+`/`-`): the stages no longer apply, bursts keep their size at the new
    /// mean rate.
    pub fn set_rate(&mut self, rate: f64) {
        if rate <= 0.0 || !rate.is_finite() {
            return;
        }
        let Some(at) = self.next else { return };
        self.shift = at;
        match &mut self.process {
            Process::Uniform { k, phase } => {
                *k = 0;
                *phase = 0.0;
            }
            Process::Poisson { u, .. } => *u = 0.0,
            Process::Burst { j, size, every, .. } => {
                *j = 0;
                *every = *size as f64 / rate;
            }
        }
        self.profile = Profile::constant(rate);
        self.next = self.compute();
    }

    /// The mean time between intended sends around the next one (seconds; 0 when unknown
    /// or bursting, whose sends leave together anyway).
    pub fn mean_interval_s(&self) -> f64 {
        if matches!(self.process, Process::Burst { .. }) {
            return 0.0;
        }
        let r = self
            .next
            .map_or(0.0, |t| self.profile.rate_at(t - self.shift));
        if r > 0.0 {
            1.0 / r
        } else {
            0.0
        }
    }
}

/// A draw of Exp(1) by inversion (1 − U is in (0, 1], so the logarithm is finite).
fn exp1(rng: &mut Xoshiro256PlusPlus) -> f64 {
    -(1.0 - rng.random::<f64>()).ln()
}

#[cfg(test)]
#[path = "arrival_tests.rs"]
mod tests;
