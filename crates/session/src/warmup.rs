//! `run --warmup auto`: load the server until its per-second figures have settled, then
//! measure.
//!
//! The warm-up is a run of its own before the measured one, recorded so that its seconds can
//! be judged: each whole second, the per-second throughput and p99 so far go to
//! `tailscope_report::stats::warmup_auto` (MSER: the warm-up is the first d seconds whose
//! removal minimises the marginal standard error of the rest), and once both say settled the
//! warm-up stops and the measured run starts. MSER needs 10 seconds to judge at all, so the
//! warm-up lasts at least that; it is capped at [`CAP`]. The warm-up's connections close
//! before the measured run opens its own: what warms in the server (caches, JIT, pools,
//! CPU frequency) stays warm, the connections' handshakes are done again.

use std::time::{Duration, Instant};

use tailscope_loadgen::{Phase, Plan, RunControl, Snapshot, Stop};
use tailscope_report::document::WarmupAuto;
use tailscope_report::stats::{warmup_auto, Warmup};

/// The longest an automatic warm-up lasts: a server not settled by then is measured as it
/// is, and the report says it had not settled.
pub const CAP: Duration = Duration::from_secs(120);

/// Judges the warm-up's seconds as they come.
#[derive(Default)]
struct Judge {
    /// Whole seconds judged so far.
    seconds: usize,
    /// When both series settled: the later of their warm-ups (s).
    settled_after: Option<usize>,
}

impl Judge {
    /// Takes a snapshot; true once the figures have settled.
    fn on_snapshot(&mut self, snap: &Snapshot) -> bool {
        // `recent_seconds` holds the last two minutes: the cap keeps the warm-up within it.
        let whole: Vec<_> = snap.recent_seconds.iter().filter(|p| !p.partial).collect();
        if whole.len() == self.seconds || self.settled_after.is_some() {
            return self.settled_after.is_some();
        }
        self.seconds = whole.len();
        let throughput: Vec<f64> = whole.iter().map(|p| p.requests as f64).collect();
        let p99: Vec<f64> = whole
            .iter()
            .map(|p| match p.p99_us {
                0 => f64::NAN,
                v => v as f64,
            })
            .collect();
        if let (Warmup::Settled { after_s: a, .. }, Warmup::Settled { after_s: b, .. }) =
            (warmup_auto(&throughput), warmup_auto(&p99))
        {
            self.settled_after = Some(a.max(b));
        }
        self.settled_after.is_some()
    }
}

/// Runs the automatic warm-up of `plan` (loaded as the measured run will be) until its
/// figures settle or [`CAP`] passes, showing `progress` each tick; stops early when `control`
/// is stopped (a signal, the dashboard). None when the warm-up could not run.
pub fn run_warmup(
    plan: &Plan,
    control: &RunControl,
    mut progress: impl FnMut(&Snapshot),
) -> Result<WarmupAuto, tailscope_loadgen::Error> {
    let mut warmup = plan.clone();
    warmup.warmup = Duration::ZERO;
    warmup.stop = Stop::Duration(CAP);
    let phase = RunControl::new();
    let mut judge = Judge::default();
    let started = Instant::now();
    tailscope_loadgen::run(&warmup, &phase, |snap| {
        if control.is_stopped() || (snap.phase == Phase::Running && judge.on_snapshot(snap)) {
            phase.stop();
        }
        progress(snap);
    })?;
    Ok(WarmupAuto {
        settled: judge.settled_after.is_some(),
        settled_after_s: judge.settled_after.map(|s| s as f64),
        judged_seconds: judge.seconds,
        lasted_s: started.elapsed().as_secs_f64(),
        cap_s: CAP.as_secs_f64(),
    })
}

/// `--warmup auto` for the session: says it is warming up (rewriting one line on a live
/// stderr), runs [`run_warmup`] and says how it went.
pub fn warm_up(
    plan: &Plan,
    control: &RunControl,
    live: bool,
) -> Result<WarmupAuto, tailscope_loadgen::Error> {
    say!("tailscope: warming up until the per-second throughput and p99 settle (at least 10 s, at most {} s)", CAP.as_secs());
    let mut shown = 0;
    let w = run_warmup(plan, control, |snap| {
        let second = snap.elapsed.as_secs();
        if live && second != shown {
            shown = second;
            say_part!("\r\x1b[2Kwarming up (auto): {second} s");
        }
    })?;
    if live {
        say!();
    }
    say!("tailscope: {}", w.describe());
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_loadgen::aggregate::Aggregator;
    use tailscope_loadgen::TimePoint;

    fn snap_of(seconds: &[(u64, u64)]) -> Snapshot {
        let agg = Aggregator::new(1, Duration::from_secs(60), Duration::from_millis(100), 3);
        let mut snap = agg.new_snapshot();
        snap.recent_seconds = seconds
            .iter()
            .enumerate()
            .map(|(i, &(requests, p99_us))| TimePoint {
                t_s: (i + 1) as f64,
                requests,
                p99_us,
                ..TimePoint::default()
            })
            .collect();
        snap
    }

    /// A server that is slow for its first 4 s and steady after settles, with the warm-up
    /// ending at the 4th second; under 10 s nothing is judged.
    #[test]
    fn a_warm_up_ends_when_the_seconds_settle() {
        let noise = |i: usize| [0, 7, 3, 9, 1, 5, 8, 2, 6, 4][i % 10];
        let series: Vec<(u64, u64)> = (0..16)
            .map(|i| {
                if i < 4 {
                    (300 + 50 * i as u64, 9_000 - 1_500 * i as u64)
                } else {
                    (1_000 + noise(i), 2_000 + 10 * noise(i))
                }
            })
            .collect();
        let mut judge = Judge::default();
        for n in 1..10 {
            assert!(!judge.on_snapshot(&snap_of(&series[..n])), "{n} s");
        }
        let settled = (10..=16).find(|&n| judge.on_snapshot(&snap_of(&series[..n])));
        assert!(settled.is_some(), "never settled");
        assert_eq!(judge.settled_after, Some(4));
    }
}
