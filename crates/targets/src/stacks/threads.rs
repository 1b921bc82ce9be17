//! Off-CPU time, the fallback way: every few milliseconds, each thread of the target's
//! processes is looked at in /proc (state, the system call it is in, its kernel wait channel),
//! and the threads found off CPU are counted per (second, thread name, state, syscall, wchan).
//! A thread asleep in `clock_nanosleep` for a quarter of a second is what a stall looks like
//! from inside; the same split into slow seconds and the rest as the on-CPU stacks names what
//! the threads were blocked in during the slow ones.
//!
//! This is the /proc fallback of issue 12 (no tracefs, no callchains): it sees where a thread
//! waits, not the user stack that led there; `sched:sched_switch` with callchains is the better
//! source and comes later.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use super::{monotonic_ns, round3};

/// The default interval between two looks: 5 ms, ~200 Hz.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(5);

/// Where a thread was found off CPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Blocked {
    /// The thread's name (`comm`).
    pub thread: String,
    /// Its state: `S` (sleeping, interruptible), `D` (uninterruptible, often disk I/O), ...
    pub state: String,
    /// The system call it is in, by name where known (x86-64), `syscall N` otherwise;
    /// `none` when it is not in one.
    pub syscall: String,
    /// The kernel function it waits in (`/proc/.../wchan`), `n/a` where hidden.
    pub wchan: String,
}

/// A way of being blocked, over the run and in slow seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockedTime {
    /// Where.
    #[serde(flatten)]
    pub blocked: Blocked,
    /// Thread-time found this way over the run (samples × interval).
    pub wall_us: u64,
    /// Of which in slow seconds.
    pub slow_wall_us: u64,
}

/// A way of being blocked more common in the slow seconds than in the others.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockedOverRepresented {
    /// Where.
    #[serde(flatten)]
    pub blocked: Blocked,
    /// Share of the thread's looks in slow seconds that found it blocked this way.
    pub slow_share: f64,
    /// The same share in the other seconds.
    pub normal_share: f64,
}

/// What the thread-state sampler found.
#[derive(Debug, Clone, Default)]
pub struct OffCpu {
    /// Interval between looks.
    pub interval: Duration,
    /// Looks at each thread name, per second: (second, thread) → looks.
    looks: HashMap<(u32, String), u64>,
    /// (second, blocked) → looks that found it so.
    blocked: HashMap<(u32, Blocked), u64>,
}

/// Samples the state of the target's threads from a thread of its own.
pub struct ThreadStateSampler {
    pids: Arc<Mutex<Vec<u32>>>,
    origin_ns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<OffCpu>,
}

impl ThreadStateSampler {
    /// Starts looking every `interval` (nothing is counted before [`Self::begin`]), from a
    /// thread pinned to the first of `cpus` (the generator's, so the looking is not counted as
    /// foreign load on the server's CPUs; empty: anywhere).
    pub fn start(interval: Duration, cpus: &[usize]) -> std::io::Result<ThreadStateSampler> {
        let pids = Arc::new(Mutex::new(Vec::new()));
        let origin_ns = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, o, s) = (pids.clone(), origin_ns.clone(), stop.clone());
        let cpu = cpus.first().copied();
        let handle = std::thread::Builder::new()
            .name("tailscope-threads".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                look_until_stopped(&p, &o, &s, interval)
            })?;
        Ok(ThreadStateSampler {
            pids,
            origin_ns,
            stop,
            handle,
        })
    }

    /// Second 0 of the run began at `origin_ns` (CLOCK_MONOTONIC).
    pub fn begin(&self, origin_ns: u64) {
        self.origin_ns.store(origin_ns.max(1), Ordering::Relaxed);
    }

    /// The target's processes from now on.
    pub fn set_pids(&self, pids: &[u32]) {
        if let Ok(mut p) = self.pids.lock() {
            p.clear();
            p.extend_from_slice(pids);
        }
    }

    /// Stops looking and returns the counts.
    pub fn finish(self) -> OffCpu {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

fn look_until_stopped(
    pids: &Mutex<Vec<u32>>,
    origin_ns: &AtomicU64,
    stop: &AtomicBool,
    interval: Duration,
) -> OffCpu {
    let mut off = OffCpu {
        interval,
        ..OffCpu::default()
    };
    // The threads of each process, re-listed every TASKS_EVERY looks: listing a directory
    // costs three system calls, and threads come and go far less often than every 5 ms.
    const TASKS_EVERY: u32 = 20;
    let mut tasks: Vec<std::path::PathBuf> = Vec::new();
    let mut looks_since_listing = TASKS_EVERY;
    // Per thread: the wait channel and system call of its last look.
    let mut last_call: HashMap<std::path::PathBuf, (String, String)> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(interval);
        let origin = origin_ns.load(Ordering::Relaxed);
        let now = monotonic_ns();
        if origin == 0 || now < origin {
            continue;
        }
        let second = ((now - origin) / 1_000_000_000) as u32;
        if looks_since_listing >= TASKS_EVERY {
            looks_since_listing = 0;
            tasks.clear();
            for pid in pids.lock().map(|p| p.clone()).unwrap_or_default() {
                if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                    tasks.extend(dir.flatten().map(|t| t.path()));
                }
            }
        }
        looks_since_listing += 1;
        for dir in &tasks {
            let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
                continue;
            };
            let Some((thread, state)) = parse_stat(&stat) else {
                continue;
            };
            *off.looks.entry((second, thread.clone())).or_insert(0) += 1;
            if state == "R" {
                continue;
            }
            let wchan = std::fs::read_to_string(dir.join("wchan"))
                .ok()
                .filter(|w| !w.is_empty() && w != "0")
                .unwrap_or_else(|| "n/a".into());
            // Reading `syscall` makes the kernel wait for the thread to be inactive: the
            // dearest of the three files. A thread still waiting where it waited at the last
            // look is in the same call; read it again only when the wait moved.
            let syscall = match last_call.get(dir) {
                Some((w, call)) if *w == wchan && wchan != "n/a" => call.clone(),
                _ => {
                    let call = std::fs::read_to_string(dir.join("syscall"))
                        .map_or_else(|_| "n/a".to_string(), |s| syscall_name(&s));
                    last_call.insert(dir.clone(), (wchan.clone(), call.clone()));
                    call
                }
            };
            let blocked = Blocked {
                thread,
                state,
                syscall,
                wchan,
            };
            *off.blocked.entry((second, blocked)).or_insert(0) += 1;
        }
    }
    off
}

/// The thread's name and state from its `stat` line.
fn parse_stat(stat: &str) -> Option<(String, String)> {
    let open = stat.find('(')?;
    let (name, rest) = stat[open + 1..].rsplit_once(')')?;
    let state = rest.split_whitespace().next()?;
    Some((name.to_string(), state.to_string()))
}

/// The system call of a `/proc/.../syscall` line, by name for the blocking calls a server
/// makes (x86-64 numbers; elsewhere the number).
fn syscall_name(line: &str) -> String {
    let first = line.split_whitespace().next().unwrap_or("");
    let Ok(nr) = first.parse::<i64>() else {
        // "running" or "-1 ...": not in a system call.
        return "none".into();
    };
    if nr < 0 {
        return "none".into();
    }
    if cfg!(target_arch = "x86_64") {
        let name = match nr {
            0 => "read",
            1 => "write",
            7 => "poll",
            17 => "pread64",
            18 => "pwrite64",
            23 => "select",
            35 => "nanosleep",
            43 => "accept",
            44 => "sendto",
            45 => "recvfrom",
            61 => "wait4",
            74 => "fsync",
            75 => "fdatasync",
            202 => "futex",
            230 => "clock_nanosleep",
            232 => "epoll_wait",
            270 => "pselect6",
            271 => "ppoll",
            281 => "epoll_pwait",
            288 => "accept4",
            426 => "io_uring_enter",
            441 => "epoll_pwait2",
            _ => "",
        };
        if !name.is_empty() {
            return name.into();
        }
    }
    format!("syscall {nr}")
}

impl OffCpu {
    /// Splits the looks into `slow_seconds` and the rest: the ways of being blocked, and those
    /// clearly more common in the slow seconds (per thread name: its share of looks, with the
    /// same bars as the on-CPU frames).
    pub fn differential(
        &self,
        slow_seconds: &BTreeSet<u32>,
    ) -> (Vec<BlockedTime>, Vec<BlockedOverRepresented>) {
        let interval_us = self.interval.as_micros() as u64;
        // Looks per thread name in slow and other seconds.
        let mut looks: HashMap<&str, (u64, u64)> = HashMap::new();
        for ((second, thread), &n) in &self.looks {
            let e = looks.entry(thread.as_str()).or_insert((0, 0));
            if slow_seconds.contains(second) {
                e.0 += n;
            } else {
                e.1 += n;
            }
        }
        let mut by_blocked: HashMap<&Blocked, (u64, u64)> = HashMap::new();
        for ((second, blocked), &n) in &self.blocked {
            let e = by_blocked.entry(blocked).or_insert((0, 0));
            if slow_seconds.contains(second) {
                e.0 += n;
            } else {
                e.1 += n;
            }
        }
        let mut times: Vec<BlockedTime> = by_blocked
            .iter()
            .map(|(b, &(slow, normal))| BlockedTime {
                blocked: (*b).clone(),
                wall_us: (slow + normal) * interval_us,
                slow_wall_us: slow * interval_us,
            })
            .collect();
        times.sort_by(|a, b| {
            b.wall_us
                .cmp(&a.wall_us)
                .then_with(|| a.blocked.cmp(&b.blocked))
        });
        times.truncate(super::TOP_STACKS);
        let mut over: Vec<BlockedOverRepresented> = Vec::new();
        for (b, &(slow, normal)) in &by_blocked {
            let Some(&(ns, nn)) = looks.get(b.thread.as_str()) else {
                continue;
            };
            if ns == 0 || nn == 0 {
                continue;
            }
            if let Some((ps, pn)) = super::clearly_more(slow, ns, normal, nn) {
                over.push(BlockedOverRepresented {
                    blocked: (*b).clone(),
                    slow_share: round3(ps),
                    normal_share: round3(pn),
                });
            }
        }
        over.sort_by(|a, b| {
            (b.slow_share - b.normal_share)
                .total_cmp(&(a.slow_share - a.normal_share))
                .then_with(|| a.blocked.cmp(&b.blocked))
        });
        (times, over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_and_syscall_lines_are_read() {
        assert_eq!(
            parse_stat("42 (my (odd) thread) S 1 42 42 0"),
            Some(("my (odd) thread".into(), "S".into()))
        );
        assert_eq!(syscall_name("running"), "none");
        assert_eq!(syscall_name("-1 0x7ffd 0x1"), "none");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(syscall_name("230 0x0 0x0 0x7ffc5"), "clock_nanosleep");
        }
        assert_eq!(syscall_name("9999 0x0"), "syscall 9999");
    }

    #[test]
    fn a_sleep_in_the_slow_seconds_is_over_represented() {
        let sleeping = Blocked {
            thread: "worker".into(),
            state: "S".into(),
            syscall: "clock_nanosleep".into(),
            wchan: "hrtimer_nanosleep".into(),
        };
        let waiting = Blocked {
            syscall: "io_uring_enter".into(),
            wchan: "io_cqring_wait".into(),
            ..sleeping.clone()
        };
        let mut off = OffCpu {
            interval: Duration::from_millis(5),
            ..OffCpu::default()
        };
        for s in 0..10u32 {
            off.looks.insert((s, "worker".into()), 200);
            off.blocked.insert((s, waiting.clone()), 60);
            if s == 4 {
                off.blocked.insert((s, sleeping.clone()), 50);
            }
        }
        let (times, over) = off.differential(&BTreeSet::from([4]));
        assert_eq!(times[0].blocked, waiting);
        assert_eq!(times[0].wall_us, 600 * 5_000);
        assert_eq!(over.len(), 1, "{over:?}");
        assert_eq!(over[0].blocked, sleeping);
        assert_eq!((over[0].slow_share, over[0].normal_share), (0.25, 0.0));
    }

    #[test]
    fn a_sleeping_child_is_seen_in_clock_nanosleep() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let sampler = ThreadStateSampler::start(Duration::from_millis(5), &[]).unwrap();
        sampler.set_pids(&[child.id()]);
        sampler.begin(monotonic_ns());
        std::thread::sleep(Duration::from_millis(200));
        let off = sampler.finish();
        let _ = child.kill();
        let _ = child.wait();
        let (times, _) = off.differential(&BTreeSet::new());
        assert!(
            times.iter().any(|t| t.blocked.thread == "sleep"
                && t.blocked.state == "S"
                && (t.blocked.syscall == "clock_nanosleep" || t.blocked.syscall == "nanosleep")),
            "{times:?}"
        );
    }
}
