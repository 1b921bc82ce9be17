//! Off-CPU time of the target's threads, whichever sampler saw it: the `sched:sched_switch`
//! tracer ([`super::switches`], with the stack each thread blocked in) or the /proc
//! thread-state sampler ([`super::threads`], the wait channel alone). [`OffCpu`] holds wall
//! time per (second, way of being blocked) and the time each thread was watched, so a way of
//! being blocked is a share of its threads' time, compared between the slow seconds and the
//! rest like the on-CPU samples.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::per_second::PerSecond;
use super::slow_seconds::{clearly_more, round3, TOP_STACKS};

/// Where a thread was off CPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Blocked {
    /// The thread's name (`comm`).
    pub thread: String,
    /// Its state when it left the CPU: `S` (asleep, interruptible), `D` (uninterruptible,
    /// often disk I/O), `R` (preempted while runnable: waiting for a CPU, not blocked), ...
    pub state: String,
    /// The system call it was in (`futex`, `fsync`, `clock_nanosleep`), `none` outside one.
    pub syscall: String,
    /// Its stack, leaf first (kernel frames end in `_[k]`); from the /proc sampler, the
    /// kernel function it waited in alone.
    pub stack: Vec<String>,
}

impl Blocked {
    /// Where it waited, for a sentence: `in futex: lock ← handle ← …`, or `outside a system
    /// call: …` (preempted, a page fault), and `no stack` when none was sampled.
    pub fn place(&self) -> String {
        self.place_at(&super::text::call_site(&self.stack))
    }

    /// [`Blocked::place`] with its call site said as `site` (told apart from another's).
    pub(crate) fn place_at(&self, site: &str) -> String {
        let site = match site {
            "no frame" => "no stack",
            s => s,
        };
        match self.syscall.as_str() {
            "none" | "n/a" | "" => format!("outside a system call: {site}"),
            call => format!("in {call}: {site}"),
        }
    }
}

/// A way of being blocked, over the run and in slow seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockedTime {
    /// Where.
    #[serde(flatten)]
    pub blocked: Blocked,
    /// Thread-time spent so over the run.
    pub wall_us: u64,
    /// Of which in slow seconds.
    pub slow_wall_us: u64,
}

/// A way of being blocked that took a clearly larger share of its threads' time in the slow
/// seconds than in the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockedOverRepresented {
    /// Where.
    #[serde(flatten)]
    pub blocked: Blocked,
    /// Share of the wall time, in slow seconds, of the threads seen blocked so.
    pub slow_share: f64,
    /// The same share in the other seconds.
    pub normal_share: f64,
    /// Thread-time blocked so in the slow seconds.
    pub slow_wall_us: u64,
    /// Threads seen blocked so over the run.
    #[serde(default)]
    pub threads: usize,
}

/// Off-CPU wall time of the target's threads, per second of the run. Serialized (for a
/// `tailscope agent`, which samples on the server's host) as [`OffCpuWire`]: its maps keyed by
/// pairs are lists in JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "OffCpuWire", from = "OffCpuWire")]
pub struct OffCpu {
    /// Where it came from (`sched:sched_switch`, `/proc thread states every 5 ms`).
    pub source: String,
    keys: Vec<Blocked>,
    index: HashMap<Blocked, usize>,
    /// (second, key) → µs.
    wall: PerSecond<usize>,
    /// Threads seen blocked in each key.
    tids_of: Vec<BTreeSet<u32>>,
    /// (second, tid) → µs the thread was watched.
    watched: PerSecond<u32>,
    /// What was not seen, and why.
    pub missing: Vec<String>,
}

/// [`OffCpu`] as it travels: the pair-keyed maps as lists, the index rebuilt on arrival.
#[derive(Serialize, Deserialize)]
struct OffCpuWire {
    source: String,
    keys: Vec<Blocked>,
    wall: Vec<(u32, usize, u64)>,
    tids_of: Vec<BTreeSet<u32>>,
    watched: Vec<(u32, u32, u64)>,
    missing: Vec<String>,
}

impl From<OffCpu> for OffCpuWire {
    fn from(o: OffCpu) -> Self {
        OffCpuWire {
            source: o.source,
            keys: o.keys,
            wall: o.wall.summed(),
            tids_of: o.tids_of,
            watched: o.watched.summed(),
            missing: o.missing,
        }
    }
}

impl From<OffCpuWire> for OffCpu {
    fn from(w: OffCpuWire) -> Self {
        // A key past the list (a malformed peer) is dropped rather than trusted.
        let n = w.keys.len().min(w.tids_of.len());
        OffCpu {
            source: w.source,
            index: w.keys.iter().take(n).cloned().zip(0..).collect(),
            wall: w.wall.into_iter().filter(|&(_, k, _)| k < n).collect(),
            keys: w.keys.into_iter().take(n).collect(),
            tids_of: w.tids_of.into_iter().take(n).collect(),
            watched: w.watched.into_iter().collect(),
            missing: w.missing,
        }
    }
}

impl OffCpu {
    /// An empty record of `source`.
    pub fn new(source: impl Into<String>) -> OffCpu {
        OffCpu {
            source: source.into(),
            ..OffCpu::default()
        }
    }

    /// Thread `tid` spent `us` blocked so in `second`.
    pub fn add(&mut self, second: u32, blocked: &Blocked, tid: u32, us: u64) {
        let key = match self.index.get(blocked) {
            Some(&k) => k,
            None => {
                self.keys.push(blocked.clone());
                self.tids_of.push(BTreeSet::new());
                self.index.insert(blocked.clone(), self.keys.len() - 1);
                self.keys.len() - 1
            }
        };
        self.wall.add(second, key, us);
        self.tids_of[key].insert(tid);
    }

    /// Thread `tid` was watched for `us` of `second`.
    pub fn watch(&mut self, second: u32, tid: u32, us: u64) {
        self.watched.add(second, tid, us);
    }

    /// The frames that `matches` on the stacks of the waits in `seconds`, with the wall time
    /// (µs) spent in waits with each on their stack.
    pub(crate) fn frames_in(
        &self,
        seconds: &BTreeSet<u32>,
        matches: &impl Fn(&str) -> bool,
    ) -> HashMap<String, u64> {
        let mut frames: HashMap<String, u64> = HashMap::new();
        for (second, key, us) in self.wall.iter() {
            if !seconds.contains(&second) {
                continue;
            }
            let stack = &self.keys[key].stack;
            for f in stack.iter().filter(|f| matches(f)).collect::<BTreeSet<_>>() {
                *frames.entry(f.clone()).or_insert(0) += us;
            }
        }
        frames
    }

    /// Splits the time into `slow_seconds` and the rest: the ways of being blocked, most time
    /// first, and those that took a clearly larger share of their threads' time in the slow
    /// seconds (the bars of [`clearly_more`], in milliseconds). Preemption (`R`) is waiting
    /// for a CPU, not a place in the code: listed, never claimed.
    pub fn differential(
        &self,
        slow_seconds: &BTreeSet<u32>,
    ) -> (Vec<BlockedTime>, Vec<BlockedOverRepresented>) {
        let mut per_key = vec![(0u64, 0u64); self.keys.len()];
        for (second, key, us) in self.wall.iter() {
            if slow_seconds.contains(&second) {
                per_key[key].0 += us;
            } else {
                per_key[key].1 += us;
            }
        }
        let mut watched: HashMap<u32, (u64, u64)> = HashMap::new();
        for (second, tid, us) in self.watched.iter() {
            let e = watched.entry(tid).or_insert((0, 0));
            if slow_seconds.contains(&second) {
                e.0 += us;
            } else {
                e.1 += us;
            }
        }
        let mut times = Vec::new();
        let mut over = Vec::new();
        for (key, blocked) in self.keys.iter().enumerate() {
            let (slow, normal) = per_key[key];
            times.push(BlockedTime {
                blocked: blocked.clone(),
                wall_us: slow + normal,
                slow_wall_us: slow,
            });
            if blocked.state == "R" {
                continue;
            }
            let (slow_total, normal_total) = self.tids_of[key]
                .iter()
                .filter_map(|t| watched.get(t))
                .fold((0, 0), |a, w| (a.0 + w.0, a.1 + w.1));
            // A thread watched less than it was blocked (it came and went between ticks):
            // its blocked time is the least it lived.
            let slow_total = slow_total.max(slow);
            let normal_total = normal_total.max(normal);
            let ms = |us: u64| us / 1000;
            if let Some((ps, pn)) =
                clearly_more(ms(slow), ms(slow_total), ms(normal), ms(normal_total))
            {
                over.push(BlockedOverRepresented {
                    blocked: blocked.clone(),
                    slow_share: round3(ps),
                    normal_share: round3(pn),
                    slow_wall_us: slow,
                    threads: self.tids_of[key].len(),
                });
            }
        }
        times.sort_by(|a, b| {
            b.wall_us
                .cmp(&a.wall_us)
                .then_with(|| a.blocked.cmp(&b.blocked))
        });
        times.truncate(TOP_STACKS);
        over.sort_by(|a, b| {
            (b.slow_share - b.normal_share)
                .total_cmp(&(a.slow_share - a.normal_share))
                .then_with(|| a.blocked.cmp(&b.blocked))
        });
        (times, over)
    }

    /// The same record without the time of `seconds`.
    pub fn without(&self, seconds: &BTreeSet<u32>) -> OffCpu {
        let mut out = self.clone();
        out.wall.retain(|s, _| !seconds.contains(&s));
        out.watched.retain(|s, _| !seconds.contains(&s));
        out
    }

    /// The off-CPU stacks in the folded format of flame graphs (`root;...;leaf µs`), thread
    /// name at the root, of the seconds `keep` accepts.
    pub fn folded(&self, keep: impl Fn(u32) -> bool) -> Vec<String> {
        let mut per_key = vec![0u64; self.keys.len()];
        for (second, key, us) in self.wall.iter() {
            if keep(second) {
                per_key[key] += us;
            }
        }
        let mut lines: Vec<String> = self
            .keys
            .iter()
            .zip(per_key)
            .filter(|(_, us)| *us > 0)
            .map(|(b, us)| {
                let frames: Vec<String> = std::iter::once(b.thread.clone())
                    .chain(b.stack.iter().rev().cloned())
                    .map(|f| f.replace(';', ":"))
                    .collect();
                format!("{} {us}", frames.join(";"))
            })
            .collect();
        lines.sort();
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(thread: &str, state: &str, syscall: &str) -> Blocked {
        Blocked {
            thread: thread.into(),
            state: state.into(),
            syscall: syscall.into(),
            stack: vec![format!("__x64_sys_{syscall}_[k]"), "main".into()],
        }
    }

    #[test]
    fn a_wait_that_grows_in_the_slow_seconds_is_claimed_and_preemption_is_not() {
        let idle = blocked("srv", "S", "io_uring_enter");
        let lock = blocked("srv", "S", "futex");
        let preempted = blocked("srv", "R", "none");
        let mut off = OffCpu::new("test");
        for s in 0..10u32 {
            off.watch(s, 1, 1_000_000);
            off.add(s, &idle, 1, 300_000);
            if s == 4 || s == 8 {
                off.add(s, &lock, 1, 400_000);
                off.add(s, &preempted, 1, 400_000);
            }
        }
        let (times, over) = off.differential(&BTreeSet::from([4, 8]));
        assert_eq!(times[0].blocked, idle);
        assert_eq!(times[0].wall_us, 3_000_000);
        assert_eq!(over.len(), 1, "{over:?}");
        assert_eq!(over[0].blocked, lock);
        assert_eq!((over[0].slow_share, over[0].normal_share), (0.4, 0.0));
        assert_eq!(over[0].slow_wall_us, 800_000);
        let folded = off.folded(|s| s == 4);
        assert!(
            folded.contains(&"srv;main;__x64_sys_futex_[k] 400000".to_string()),
            "{folded:?}"
        );
    }
}
