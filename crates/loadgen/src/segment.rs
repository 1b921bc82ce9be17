//! One generator's share of a load spread over N hosts (`run --segment I/N`), and the common
//! wall-clock start they wait for (`run --start-at`).
//!
//! An orchestrator (a Kubernetes Indexed Job, a Slurm array, pdsh) starts N independent
//! `tailscope run`s; each takes segment I of N: its [`share`] of `-c`, `-n` and `-q`, so
//! that the N shares add up exactly to what was asked, and `report::merge` adds their
//! reports back into one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::plan::{Pace, Plan, Stop, MAX_DURATION};
use crate::RunControl;

/// Splits `total` into `parts` shares that differ by at most one and add up to `total`;
/// share `i` (0-based) of them.
pub fn share(total: u64, parts: usize, i: usize) -> u64 {
    let parts = parts.max(1) as u64;
    total / parts + u64::from((i as u64) < total % parts)
}

/// Segment `index` of `count` (1-based, as `--segment 2/3` writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Segment {
    /// Which share, 1..=count.
    pub index: usize,
    /// How many shares the load is split into.
    pub count: usize,
}

/// The most segments a load can be split into.
pub const MAX_SEGMENTS: usize = 100_000;

impl Segment {
    /// Parses `I/N` (1 <= I <= N).
    pub fn parse(s: &str) -> Result<Segment, String> {
        let help = "write I/N with 1 <= I <= N, e.g. 2/3 (the second of three)";
        let (i, n) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a segment: {help}"))?;
        let num = |v: &str| v.trim().parse::<usize>().ok();
        match (num(i), num(n)) {
            (Some(index), Some(count)) if (1..=count).contains(&index) && count <= MAX_SEGMENTS => {
                Ok(Segment { index, count })
            }
            _ => Err(format!(
                "{s:?} is not a segment: {help}, N at most {MAX_SEGMENTS}"
            )),
        }
    }

    /// The segment of a job whose index (`value`, read from the environment variable `var`)
    /// starts at `base` (Kubernetes' JOB_COMPLETION_INDEX starts at 0, a Slurm array's
    /// SLURM_ARRAY_TASK_ID wherever the array does), among `count`.
    pub fn from_index(
        var: &str,
        value: Option<&str>,
        base: usize,
        count: usize,
    ) -> Result<Segment, String> {
        let value = value.ok_or_else(|| {
            format!("--segment-from-env: {var} is not set; the orchestrator sets it (Kubernetes: an Indexed Job), or give --segment I/N")
        })?;
        let raw: usize = value.trim().parse().map_err(|_| {
            format!("--segment-from-env: {var}={value:?} is not a job index (a whole number)")
        })?;
        let index = raw
            .checked_sub(base)
            .map(|i| i + 1)
            .filter(|i| (1..=count).contains(i))
            .ok_or_else(|| {
                format!("--segment-from-env: {var}={raw} is outside {base}..={} (the index of one of {count} jobs)", base + count.saturating_sub(1))
            })?;
        Segment::parse(&format!("{index}/{count}"))
    }

    /// `share` of `total` for this segment.
    pub fn share_of(self, total: u64) -> u64 {
        share(total, self.count, self.index - 1)
    }

    /// Cuts `plan` down to this segment's share: connections and `-n` by [`share`] (so the N
    /// plans add up to the original exactly), the open-loop rate by 1/N. A share that would
    /// be zero (fewer connections or requests than segments) is refused.
    ///
    /// Open loop, each segment runs every N-th slot of the whole schedule: its first slot is
    /// (I−1)/rate after the start. Without that offset N segments started at one
    /// `--start-at` would all send at once, N requests every N/rate s instead of one every
    /// 1/rate.
    pub fn apply(self, plan: &mut Plan) -> Result<(), String> {
        let too_few = |what: &str, flag: &str, n: u64| {
            format!(
                "{flag} {n} cannot be split into {} segments: each needs at least one {what}; raise {flag} to {} or more, or use fewer segments",
                self.count, self.count
            )
        };
        // Judged on the whole, not on this segment's share: with -c 5 over 100 segments the
        // first five would run and the other 95 fail.
        if (plan.connections as u64) < self.count as u64 {
            return Err(too_few("connection", "-c", plan.connections as u64));
        }
        plan.connections = self.share_of(plan.connections as u64) as usize;
        // `{seq}` interleaved: segment I sends I−1, I−1+N, I−1+2N...
        plan.seq_offset = (self.index - 1) as u64;
        plan.seq_stride = self.count as u64;
        // Held connections are a load too: N generators hold the number asked between them
        // (a share may be 0: holding is not sending).
        plan.idle_conns = self.share_of(plan.idle_conns as u64) as usize;
        plan.slow_conns = self.share_of(plan.slow_conns as u64) as usize;
        if let Stop::Requests(n) = plan.stop {
            if n < self.count as u64 {
                return Err(too_few("request", "-n", n));
            }
            plan.stop = Stop::Requests(self.share_of(n));
        }
        for stage in &mut plan.stages {
            if let crate::plan::StageTarget::Rate(r) = &mut stage.target {
                *r /= self.count as f64;
            }
        }
        if let Pace::Rate(r) = plan.pace {
            plan.pace = Pace::Rate(r / self.count as f64);
            // A rate that is no rate (0, NaN) is refused by `Plan::validate`, not here.
            plan.first_slot_offset =
                Duration::try_from_secs_f64((self.index - 1) as f64 / r).unwrap_or_default();
        }
        Ok(())
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Parses `--start-at`: unix seconds (`1767225600`, `1767225600.5`) or RFC 3339
/// (`2026-01-01T00:00:00Z`, `2026-01-01T01:00:00+01:00`, fractions of a second allowed).
pub fn parse_start_time(s: &str) -> Result<SystemTime, String> {
    let s = s.trim();
    let help = "give RFC 3339 (2026-01-01T12:00:00Z, as `date -u +%FT%TZ` prints it) or unix seconds (`date +%s`)";
    if let Ok(secs) = s.parse::<f64>() {
        if secs > 4e9 {
            return Err(format!(
                "{s} is too far ahead (unix seconds up to 4000000000, the year 2096): {help}"
            ));
        }
        if secs.is_nan() || secs < 0.0 {
            return Err(format!("{s} is not a time in unix seconds: {help}"));
        }
        return Ok(UNIX_EPOCH + Duration::from_secs_f64(secs));
    }
    // humantime reads RFC 3339 in UTC only; an offset is taken off by hand.
    let i = s.len().saturating_sub(6);
    let (local, west, offset_s) = match (s.get(..i), s.get(i..)) {
        (Some(head), Some(tail))
            if tail.is_ascii()
                && (tail.starts_with('+') || tail.starts_with('-'))
                && tail.as_bytes()[3] == b':' =>
        {
            let bad = || format!("{s:?}: bad offset (+HH:MM): {help}");
            let h: u64 = tail[1..3].parse().map_err(|_| bad())?;
            let m: u64 = tail[4..6].parse().map_err(|_| bad())?;
            (format!("{head}Z"), tail.starts_with('-'), h * 3600 + m * 60)
        }
        _ => (s.to_string(), false, 0),
    };
    let local = humantime::parse_rfc3339(&local).map_err(|e| format!("{s:?}: {e}: {help}"))?;
    // 12:00+01:00 is 11:00Z.
    let t = if west {
        local.checked_add(Duration::from_secs(offset_s))
    } else {
        local.checked_sub(Duration::from_secs(offset_s))
    };
    t.ok_or_else(|| format!("{s:?} is out of range: {help}"))
}

/// Checks `--start-at` against the clock reading `now`: more than an hour past, or further
/// ahead than the longest run, is a typo (a wrong day or year), refused before anything
/// starts; a time just past is accepted (the generator starts at once and says so).
pub fn check_start_time(at: SystemTime, now: SystemTime) -> Result<(), String> {
    match at.duration_since(now) {
        Ok(ahead) if ahead > MAX_DURATION => Err(format!(
            "--start-at is {:.0} days from now: give a time within 30 days (is the date right?)",
            ahead.as_secs_f64() / 86_400.0
        )),
        Err(past) if past.duration() > Duration::from_secs(3600) => Err(format!(
            "--start-at was {} ago: give a time to come (the clock here reads {})",
            humantime::format_duration(Duration::from_secs(past.duration().as_secs())),
            humantime::format_rfc3339_seconds(now)
        )),
        _ => Ok(()),
    }
}

/// Unix seconds of `t` (negative before 1970).
pub fn unix_seconds(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Sleeps until the wall clock reads `at`, waking every 50 ms to see whether `control` was
/// stopped (Ctrl-C): true when `at` was reached, false when stopped first. Wall-clock time is
/// read again at every wake, so a clock stepped by NTP during the wait is followed.
pub fn wait_until(at: SystemTime, control: &RunControl) -> bool {
    loop {
        if control.is_stopped() {
            return false;
        }
        let Ok(left) = at.duration_since(SystemTime::now()) else {
            return true;
        };
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for (total, parts) in [(10u64, 3usize), (2, 4), (100, 1), (7, 7), (1_000_003, 16)] {
            let shares: Vec<u64> = (0..parts).map(|i| share(total, parts, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn segments_parse_and_refuse_nonsense() {
        assert_eq!(
            Segment::parse("2/3").unwrap(),
            Segment { index: 2, count: 3 }
        );
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/1000001", ""] {
            assert!(Segment::parse(bad).is_err(), "{bad}");
        }
        // Kubernetes counts from 0.
        let s = Segment::from_index("JOB_COMPLETION_INDEX", Some("2"), 0, 3).unwrap();
        assert_eq!(s, Segment { index: 3, count: 3 });
        let e = Segment::from_index("JOB_COMPLETION_INDEX", Some("3"), 0, 3).unwrap_err();
        assert!(e.contains("outside 0..=2"), "{e}");
        assert!(Segment::from_index("X", None, 0, 3)
            .unwrap_err()
            .contains("X is not set"));
        assert!(Segment::from_index("X", Some("x"), 0, 3).is_err());
        assert_eq!(Segment::from_index("X", Some("1"), 1, 2).unwrap().index, 1);
    }

    #[test]
    fn the_segments_of_a_plan_add_up_to_the_plan() {
        let mut whole = Plan::new("http://127.0.0.1:9/").unwrap();
        whole.connections = 50;
        whole.stop = Stop::Requests(1001);
        whole.pace = Pace::Rate(3000.0);
        let (mut c, mut n, mut q) = (0, 0, 0.0);
        for index in 1..=3 {
            let mut p = whole.clone();
            Segment { index, count: 3 }.apply(&mut p).unwrap();
            // Every third slot of 3000 req/s, from the index-th (to the nanosecond).
            let phase = p.first_slot_offset.as_secs_f64() * 3000.0;
            assert!(
                (phase - (index - 1) as f64).abs() < 1e-5,
                "{index}: {phase}"
            );
            c += p.connections;
            n += match p.stop {
                Stop::Requests(n) => n,
                Stop::Duration(_) => unreachable!(),
            };
            q += match p.pace {
                Pace::Rate(r) => r,
                Pace::Max => unreachable!(),
            };
        }
        assert_eq!((c, n), (50, 1001));
        let mut held = whole.clone();
        held.idle_conns = 10_000;
        held.slow_conns = 2;
        let (mut idle, mut slow) = (0, 0);
        for index in 1..=3 {
            let mut p = held.clone();
            Segment { index, count: 3 }.apply(&mut p).unwrap();
            idle += p.idle_conns;
            slow += p.slow_conns;
        }
        assert_eq!((idle, slow), (10_000, 2), "held connections are split too");
        assert!((q - 3000.0).abs() < 1e-9, "{q}");
        let mut p = whole.clone();
        p.connections = 2;
        // Every segment refuses, the first ones too (they would have had a connection).
        for index in 1..=3 {
            let e = Segment { index, count: 3 }
                .apply(&mut p.clone())
                .unwrap_err();
            assert!(e.contains("-c 2 cannot be split into 3 segments"), "{e}");
        }
        let mut p = whole.clone();
        p.stop = Stop::Requests(2);
        let e = Segment { index: 1, count: 3 }.apply(&mut p).unwrap_err();
        assert!(e.contains("-n 2 cannot be split into 3 segments"), "{e}");
    }

    #[test]
    fn start_times_parse_in_both_forms() {
        let t = parse_start_time("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(unix_seconds(t), 1_767_225_600.0);
        assert_eq!(parse_start_time("1767225600").unwrap(), t);
        assert_eq!(parse_start_time("2026-01-01T01:00:00+01:00").unwrap(), t);
        assert_eq!(parse_start_time("2025-12-31T23:30:00-00:30").unwrap(), t);
        let half = parse_start_time("2026-01-01T00:00:00.5Z").unwrap();
        assert_eq!(unix_seconds(half), 1_767_225_600.5);
        for bad in [
            "tomorrow",
            "-5",
            "1e300",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00+1x:00",
            "2026-01-01T00:00:00Zéé",
        ] {
            assert!(parse_start_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn start_times_far_off_are_typos() {
        let now = parse_start_time("2026-06-01T12:00:00Z").unwrap();
        let at = |s: &str| check_start_time(parse_start_time(s).unwrap(), now);
        assert!(at("2026-06-01T12:00:30Z").is_ok());
        assert!(at("2026-06-01T11:59:00Z").is_ok(), "just past: start now");
        let e = at("2025-06-01T12:00:00Z").unwrap_err();
        assert!(e.contains("ago: give a time to come"), "{e}");
        let e = at("2027-06-01T12:00:00Z").unwrap_err();
        assert!(e.contains("365 days from now"), "{e}");
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let control = RunControl::new();
        control.stop();
        let far = SystemTime::now() + Duration::from_secs(3600);
        assert!(
            !wait_until(far, &control),
            "a stopped control returns at once"
        );
        assert!(wait_until(SystemTime::now(), &RunControl::new()));
    }
}
