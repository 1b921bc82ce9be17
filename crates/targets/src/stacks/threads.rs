//! Off-CPU time, the fallback way (no tracefs for `sched:sched_switch`): every few
//! milliseconds, each thread of the target's processes is looked at in /proc (state, the
//! system call it is in, its kernel wait channel), and each look that finds it off CPU counts
//! an interval of off-CPU time for (thread name, state, syscall, wchan). It sees where a thread
//! waits, not the user stack that led there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::monotonic_ns;
use super::off_cpu::{Blocked, OffCpu};

/// The default interval between two looks: 5 ms, ~200 Hz.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(5);

/// The seconds the looking thread has finished: (second, (label, µs) off CPU, µs watched),
/// the last few.
#[derive(Default)]
struct Seconds(std::collections::VecDeque<DoneSecond>);

/// A finished second: (second, (label, µs) off CPU, µs watched).
type DoneSecond = (u32, Vec<(String, u64)>, u64);

impl Seconds {
    /// Enough for the live view to catch up after a late tick.
    const KEEP: usize = 10;

    fn push(&mut self, second: DoneSecond) {
        self.0.push_back(second);
        while self.0.len() > Self::KEEP {
            self.0.pop_front();
        }
    }
}

/// Samples the state of the target's threads from a thread of its own.
pub struct ThreadStateSampler {
    pids: Arc<Mutex<Vec<u32>>>,
    seconds: Arc<Mutex<Seconds>>,
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
        let seconds = Arc::new(Mutex::new(Seconds::default()));
        let (p, o, s, l) = (
            pids.clone(),
            origin_ns.clone(),
            stop.clone(),
            seconds.clone(),
        );
        let cpu = cpus.first().copied();
        let handle = std::thread::Builder::new()
            .name("tailscope-threads".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                look_until_stopped(&p, &o, &s, &l, interval)
            })?;
        Ok(ThreadStateSampler {
            pids,
            seconds,
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

    /// The waits of `second` (label, µs) and the µs its threads were watched, once the
    /// looking thread has finished it; `None` before, or when it is too old to be kept.
    pub(crate) fn second(&self, second: u32) -> Option<(Vec<(String, u64)>, u64)> {
        let done = self.seconds.lock().ok()?;
        done.0
            .iter()
            .find(|s| s.0 == second)
            .map(|s| (s.1.clone(), s.2))
    }

    /// The last second the looking thread has finished, if any.
    pub(crate) fn finished_through(&self) -> Option<u32> {
        self.seconds.lock().ok()?.0.back().map(|s| s.0)
    }

    /// Stops looking and returns the counts.
    pub fn finish(self) -> OffCpu {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| {
            // Nothing measured is not "nothing waited": the report says n/a and why.
            let mut off = OffCpu::new("/proc thread states");
            off.missing
                .push("the thread-state sampler panicked: off-CPU time n/a".into());
            off
        })
    }
}

fn look_until_stopped(
    pids: &Mutex<Vec<u32>>,
    origin_ns: &AtomicU64,
    stop: &AtomicBool,
    done: &Mutex<Seconds>,
    interval: Duration,
) -> OffCpu {
    let mut off = OffCpu::new(format!(
        "/proc thread states every {} ms",
        interval.as_millis()
    ));
    let interval_us = interval.as_micros() as u64;
    // The threads of each process, re-listed every TASKS_EVERY looks: listing a directory
    // costs three system calls, and threads come and go far less often than every 5 ms.
    const TASKS_EVERY: u32 = 20;
    let mut tasks: Vec<std::path::PathBuf> = Vec::new();
    let mut looks_since_listing = TASKS_EVERY;
    // Per thread: the wait channel and system call of its last look.
    let mut last_call: HashMap<std::path::PathBuf, (String, String)> = HashMap::new();
    // The second being looked at: (second, label → µs off CPU, µs watched).
    let mut current: (u32, HashMap<String, u64>, u64) = (0, HashMap::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(interval);
        let origin = origin_ns.load(Ordering::Relaxed);
        let now = monotonic_ns();
        if origin == 0 || now < origin {
            continue;
        }
        let second = ((now - origin) / 1_000_000_000) as u32;
        if second != current.0 {
            // The second is over: handed to the live view whole (one lock a second).
            let (s, waits, watched) = std::mem::replace(&mut current, (second, HashMap::new(), 0));
            if let Ok(mut d) = done.lock() {
                d.push((s, waits.into_iter().collect(), watched));
            }
        }
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
            let (Some((thread, state)), Some(tid)) = (
                parse_stat(&stat),
                dir.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.parse::<u32>().ok()),
            ) else {
                continue;
            };
            off.watch(second, tid, interval_us);
            current.2 += interval_us;
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
                stack: if wchan == "n/a" {
                    Vec::new()
                } else {
                    vec![format!("{wchan}_[k]")]
                },
            };
            let label = super::live::wait_label(
                &blocked.syscall,
                &blocked.state,
                blocked.stack.first().map(String::as_str),
            );
            *current.1.entry(label).or_insert(0) += interval_us;
            off.add(second, &blocked, tid, interval_us);
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
            19 => "readv",
            20 => "writev",
            23 => "select",
            24 => "sched_yield",
            34 => "pause",
            35 => "nanosleep",
            40 => "sendfile",
            42 => "connect",
            43 => "accept",
            44 => "sendto",
            45 => "recvfrom",
            46 => "sendmsg",
            47 => "recvmsg",
            61 => "wait4",
            72 => "fcntl",
            73 => "flock",
            74 => "fsync",
            75 => "fdatasync",
            128 => "rt_sigtimedwait",
            130 => "rt_sigsuspend",
            162 => "sync",
            202 => "futex",
            247 => "waitid",
            277 => "sync_file_range",
            285 => "fallocate",
            299 => "recvmmsg",
            307 => "sendmmsg",
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
            // nginx's master waits in it.
            assert_eq!(syscall_name("130 0x7ffd 0x8"), "rt_sigsuspend");
        }
        assert_eq!(syscall_name("9999 0x0"), "syscall 9999");
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
        let (times, _) = off.differential(&std::collections::BTreeSet::new());
        assert!(
            times.iter().any(|t| t.blocked.thread == "sleep"
                && t.blocked.state == "S"
                && (t.blocked.syscall == "clock_nanosleep" || t.blocked.syscall == "nanosleep")),
            "{times:?}"
        );
    }
}
