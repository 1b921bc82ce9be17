//! Why a send left late (open loop): each late send is put in exactly one [`LateCause`], in
//! the order they are tried: the generator's thread waited for a CPU, else no connection
//! was free, else the generator's own loop or timer was too slow. The thread's wait for a
//! CPU comes from [`RunQueueWait`], sampled as batches are sent.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::LATE_SLACK;

/// Why one send left more than [`LATE_SLACK`] after its intended time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateCause {
    /// The generator's thread waited in the run queue (another thread had its CPU) at least
    /// as long as the send was late beyond the slack: had it run, it would have been on time.
    WaitedForCpu,
    /// The slot was claimed only after its intended time + the slack while the generator's
    /// loop ran out of work in between (every connection was waiting on a response: the
    /// server did not keep up over `-c` connections), or it waited for its connection to be
    /// opened.
    NoFreeConnection,
    /// The rest: the generator's loop or timer was too slow while it had a CPU; among them a
    /// loop busy throughout, which did not get to a connection whose response had come.
    Generator,
}

/// Puts a send intended at `intended` that left at `sent` in its cause. `cpu_wait` is the
/// thread's run-queue wait over [intended, sent] (`None`: not measurable here), and
/// `claimed_late` whether its slot was claimed after `intended` + the slack.
pub fn classify(
    intended: Instant,
    sent: Instant,
    cpu_wait: Option<Duration>,
    claimed_late: bool,
) -> LateCause {
    let beyond_slack = sent
        .saturating_duration_since(intended)
        .saturating_sub(LATE_SLACK);
    if cpu_wait.is_some_and(|w| w >= beyond_slack) {
        LateCause::WaitedForCpu
    } else if claimed_late {
        LateCause::NoFreeConnection
    } else {
        LateCause::Generator
    }
}

/// How often the run-queue wait is read at most: a `pread` of schedstat costs ~1-2 µs, so
/// at most ~4,000 a second (well under 1 % of a thread), while a busy sender's wait is known
/// to within this (far below the 1 ms slack; see [`RunQueueWait::since`] for sparse sends).
const SAMPLE_EVERY: Duration = Duration::from_micros(250);

/// Samples kept: at least 16 ms of them. A send later than that is judged on the wait since
/// the oldest sample (after its intended time): less than its whole wait.
const SAMPLES: usize = 64;

/// The generator thread's run-queue wait (the 2nd field of `/proc/thread-self/schedstat`,
/// ns: time runnable but not running, another thread having its CPU), read at most every
/// [`SAMPLE_EVERY`] into a small ring of (time, wait) samples, so that the wait over a late
/// send's [intended, sent] can be estimated from the sample at or before its intended time.
/// The file is opened at the first sample, on the thread it describes, and kept open.
#[derive(Debug)]
pub struct RunQueueWait {
    /// Not opened yet (`None`), opened (`Some(Some)`), or unreadable here (`Some(None)`:
    /// no such file, no permission, or a kernel without run-queue accounting).
    file: Option<Option<File>>,
    samples: [(Instant, u64); SAMPLES],
    /// The newest sample's index, and how many there are.
    newest: usize,
    len: usize,
}

impl RunQueueWait {
    /// A sampler of the calling thread's wait (opened lazily: the thread that samples).
    pub fn new() -> Self {
        RunQueueWait {
            file: None,
            samples: [(Instant::now(), 0); SAMPLES],
            newest: 0,
            len: 0,
        }
    }

    /// A sampler that reads `path` (a thread's schedstat) instead.
    #[cfg(test)]
    fn reading(path: &Path) -> Self {
        let mut w = RunQueueWait::new();
        w.file = Some(File::open(path).ok());
        w
    }

    /// Whether the wait can be read here: `None` until the first sample tried.
    pub fn readable(&self) -> Option<bool> {
        self.file.as_ref().map(Option::is_some)
    }

    /// Reads the wait at `now` if the newest sample is [`SAMPLE_EVERY`] old (or there is none).
    #[inline]
    pub fn sample(&mut self, now: Instant) {
        if self.len > 0 && now.saturating_duration_since(self.samples[self.newest].0) < SAMPLE_EVERY
        {
            return;
        }
        self.read(now);
    }

    #[cold]
    fn read(&mut self, now: Instant) {
        let file = self
            .file
            .get_or_insert_with(|| File::open(Path::new("/proc/thread-self/schedstat")).ok());
        let Some(f) = file else {
            return;
        };
        let mut buf = [0u8; 96];
        match f
            .read_at(&mut buf, 0)
            .ok()
            .and_then(|n| parse_schedstat(&buf[..n]))
        {
            Some(wait_ns) => self.push(now, wait_ns),
            // Unreadable after all: the cause is n/a from now on, not a wait of 0.
            None => *file = None,
        }
    }

    fn push(&mut self, at: Instant, wait_ns: u64) {
        self.newest = (self.newest + 1) % SAMPLES;
        self.samples[self.newest] = (at, wait_ns);
        self.len = (self.len + 1).min(SAMPLES);
    }

    /// The run-queue wait from `intended` to the newest sample (taken at or just before the
    /// send): from the newest sample at or before `intended`, or from the oldest kept when
    /// all are after it (a lower bound). Samples are taken only as batches leave, so the one
    /// before may be well before `intended` when sends are sparse or the thread was off its
    /// CPU: then a wait just before the intended time counts too. That is the price of
    /// seeing a preemption at all (its first sample after is taken only once the thread
    /// runs again); tried the other way, from the first sample after `intended`, three busy
    /// loops on the generator's CPU at `-q 2000` read 2–8 % of the late sends as CPU waits
    /// instead of most. `None` where the wait cannot be read.
    pub fn since(&self, intended: Instant) -> Option<Duration> {
        if self.readable() != Some(true) || self.len == 0 {
            return None;
        }
        let newest = self.samples[self.newest].1;
        let mut base = newest;
        for k in 0..self.len {
            let (at, wait) = self.samples[(self.newest + SAMPLES - k) % SAMPLES];
            base = wait;
            if at <= intended {
                break;
            }
        }
        Some(Duration::from_nanos(newest.saturating_sub(base)))
    }
}

impl Default for RunQueueWait {
    fn default() -> Self {
        RunQueueWait::new()
    }
}

/// The run-queue wait (ns) of a schedstat line "runtime wait timeslices"; `None` when it is
/// not one, or when the kernel does not account (it writes "0 0 0" without sched_info: the
/// thread reading it has run at least once; its runtime may still read 0 before a tick).
fn parse_schedstat(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_ascii_whitespace().map(str::parse::<u64>);
    let _runtime = fields.next()?.ok()?;
    let wait = fields.next()?.ok()?;
    let timeslices = fields.next()?.ok()?;
    (timeslices > 0).then_some(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_send_gets_the_first_cause_that_explains_it() {
        let t = Instant::now();
        // 5 ms late: a 4 ms run-queue wait covers the 4 ms beyond the slack, even when the
        // slot was also claimed late.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(4)), true),
            LateCause::WaitedForCpu
        );
        // A 3 ms wait does not: the slot waited for a connection.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(3)), true),
            LateCause::NoFreeConnection
        );
        // Claimed in time, not explained by a wait: the generator's own.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(3)), false),
            LateCause::Generator
        );
        assert_eq!(
            classify(t, t + ms(5), Some(Duration::ZERO), false),
            LateCause::Generator
        );
    }

    #[test]
    fn without_the_run_queue_wait_sends_fall_to_the_next_causes() {
        let t = Instant::now();
        assert_eq!(
            classify(t, t + ms(5), None, true),
            LateCause::NoFreeConnection
        );
        assert_eq!(classify(t, t + ms(5), None, false), LateCause::Generator);
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn the_wait_over_a_late_send_counts_from_the_sample_at_or_before_its_time() {
        let t = Instant::now();
        let mut w = RunQueueWait::new();
        w.file = Some(Some(File::open("/dev/null").unwrap()));
        assert_eq!(w.since(t), None, "no sample yet");
        // Samples every 250 µs; the thread waited 4 ms between 500 and 750 µs.
        for (at, wait_us) in [(0, 10), (250, 20), (500, 30), (750, 4_030), (1_000, 4_040)] {
            w.push(t + us(at), wait_us * 1_000);
        }
        // Intended at 600 µs: from the 500 µs sample to the newest.
        assert_eq!(w.since(t + us(600)), Some(us(4_010)));
        // Intended at 800 µs: after the wait.
        assert_eq!(w.since(t + us(800)), Some(us(10)));
        // Intended before every sample: from the oldest (a lower bound).
        let mut old = RunQueueWait::new();
        old.file = Some(Some(File::open("/dev/null").unwrap()));
        for k in 0..(SAMPLES as u64 + 10) {
            old.push(t + us(1_000 + 250 * k), 1_000 * k);
        }
        assert_eq!(old.since(t), Some(us(SAMPLES as u64 - 1)));
    }

    #[test]
    fn sampling_is_rate_limited() {
        let Ok(this_thread) = File::open("/proc/thread-self/schedstat") else {
            eprintln!("skipped: no /proc/thread-self/schedstat here");
            return;
        };
        drop(this_thread);
        let t = Instant::now();
        let mut w = RunQueueWait::new();
        w.sample(t);
        if w.readable() != Some(true) {
            eprintln!("skipped: this kernel's schedstat has no run-queue wait");
            return;
        }
        w.sample(t + us(100));
        assert_eq!(w.len, 1, "a sample 100 µs after the last is not taken");
        w.sample(t + us(250));
        assert_eq!(w.len, 2);
        assert!(w.since(t).is_some());
    }

    #[test]
    fn without_schedstat_the_wait_is_unknown_not_zero() {
        let mut w = RunQueueWait::reading(Path::new("/nonexistent/schedstat"));
        w.sample(Instant::now());
        assert_eq!(w.readable(), Some(false));
        assert_eq!(w.since(Instant::now()), None);
        // A kernel without run-queue accounting writes zeros: unknown too.
        assert_eq!(parse_schedstat(b"0 0 0\n"), None);
        assert_eq!(parse_schedstat(b"520217 76207 2\n"), Some(76_207));
        assert_eq!(parse_schedstat(b"garbage"), None);
        assert_eq!(parse_schedstat(b"0 0 1\n"), Some(0));
    }
}
