//! The profiler: what the machine, the server and the generator did during a run.
//!
//! Sampled every tick beside the generator's snapshots: per-CPU time from /proc/stat, NET_RX
//! and NET_TX softirqs from /proc/softirqs, per-CPU perf counters (software ones always where
//! perf is allowed; hardware ones only where the PMU has them, `None` otherwise, never 0),
//! the target's whole process tree ([`crate::tree`]: every process descended from its pid,
//! those that exit and are respawned during the run included), the generator's own CPU time,
//! and the kernel's TCP counters from /proc/net/netstat and /proc/net/snmp.
//! [`Profiler::finish`] turns the deltas into a [`Profile`] for the report.

mod perf;
mod proc;
mod run_queue;
mod types;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::procstat::{read_ticks, usage, CpuTicks, CpuUsage};
use crate::tree::{Member, ProcessTree};

use perf::{CpuCounters, PerfEvent, PerfReading};
use proc::{cpus_allowed, read_tcp, sample_process, ProcSample};
pub use proc::{parse_net_counters, parse_softirqs, TCP_COUNTERS};
use run_queue::RunQueue;
pub use types::{
    AgentLink, CpuProfile, GeneratorProfile, ProcessProfile, Profile, TargetProfile, TickCounters,
};

/// Samples the machine, the target and the generator while a run goes on.
pub struct Profiler {
    target_pid: Option<u32>,
    tree: Option<ProcessTree>,
    perf: Vec<CpuCounters>,
    started: Instant,
    cpu_start: Option<Vec<CpuTicks>>,
    cpu_last: Option<Vec<CpuTicks>>,
    perf_start: Vec<PerfReading>,
    perf_last: (Instant, Vec<PerfReading>),
    softirq_start: Option<Vec<(u64, u64)>>,
    tcp_start: Option<BTreeMap<String, i64>>,
    tree_start: Option<TreeStart>,
    self_start: Option<ProcSample>,
    /// The tree's threads' wait for a CPU.
    run_queue: RunQueue,
    /// What each of them waited in the last tick, in seconds, by tid.
    run_queue_last_s: Option<HashMap<u32, f64>>,
}

/// The tree at the start of the measured window.
struct TreeStart {
    /// Cumulative (user, system) ticks of the tree.
    ticks: (u64, u64),
    /// Each member's own figures then, by pid and start time.
    members: BTreeMap<(i32, u64), MemberStart>,
}

#[derive(Clone, Copy, Default)]
struct MemberStart {
    utime: u64,
    stime: u64,
    voluntary: Option<u64>,
    involuntary: Option<u64>,
    /// It had exited before the window began (during the warm-up).
    gone: bool,
}

impl TreeStart {
    fn of(tree: &ProcessTree) -> TreeStart {
        TreeStart {
            ticks: tree.cpu_ticks(),
            // Those already gone are kept too: their figures then are final, so they add
            // nothing to the window and are left out of its breakdown.
            members: tree
                .members()
                .map(|m| {
                    (
                        (m.stat.pid, m.stat.starttime),
                        MemberStart {
                            utime: m.stat.utime,
                            stime: m.stat.stime,
                            voluntary: m.voluntary,
                            involuntary: m.involuntary,
                            gone: !m.alive,
                        },
                    )
                })
                .collect(),
        }
    }

    /// A member's own figures at the start (zeros for one born during the window).
    fn member(&self, m: &Member) -> MemberStart {
        self.members
            .get(&(m.stat.pid, m.stat.starttime))
            .copied()
            .unwrap_or_default()
    }
}

/// The tree's profile over the window from `start` to now.
fn tree_profile(tree: &ProcessTree, start: &TreeStart, requests: u64) -> TargetProfile {
    let tps = procfs::ticks_per_second() as f64;
    let (user_end, system_end) = tree.cpu_ticks();
    let user_s = user_end.saturating_sub(start.ticks.0) as f64 / tps;
    let system_s = system_end.saturating_sub(start.ticks.1) as f64 / tps;
    let cpu_time_s = user_s + system_s;
    let sub = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b.unwrap_or(0)));
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    let mut processes = Vec::new();
    let (mut voluntary, mut involuntary) = (None, None);
    let (mut exited_ticks, mut threads, mut rss_pages) = (0u64, 0i64, None::<u64>);
    let mut max_rss_kb = None::<u64>;
    for m in tree.members() {
        let base = start.member(m);
        if base.gone {
            continue;
        }
        let user = m.stat.utime.saturating_sub(base.utime);
        let system = m.stat.stime.saturating_sub(base.stime);
        let v = sub(m.voluntary, base.voluntary);
        let i = sub(m.involuntary, base.involuntary);
        voluntary = sum(voluntary, v);
        involuntary = sum(involuntary, i);
        max_rss_kb = max_rss_kb.max(m.max_rss_kb);
        let alive = m.alive && !m.stat.zombie;
        if alive {
            threads += m.stat.threads;
            rss_pages = Some(rss_pages.unwrap_or(0) + m.stat.rss_pages);
        } else {
            exited_ticks += user + system;
        }
        processes.push(ProcessProfile {
            pid: m.stat.pid as u32,
            ppid: m.stat.ppid,
            comm: m.stat.comm.clone(),
            command: m.command.clone(),
            user_s: user as f64 / tps,
            system_s: system as f64 / tps,
            cpu_time_s: (user + system) as f64 / tps,
            // No tick of CPU is not a demand of zero: it is under the clock's resolution.
            service_demand_us: (requests > 0 && user + system > 0)
                .then(|| (user + system) as f64 / tps * 1e6 / requests as f64),
            voluntary_ctx_switches: v,
            involuntary_ctx_switches: i,
            threads: m.stat.threads,
            max_rss_kb: m.max_rss_kb,
            alive_at_end: alive,
        });
    }
    processes.sort_by(|a, b| {
        b.cpu_time_s
            .total_cmp(&a.cpu_time_s)
            .then(a.pid.cmp(&b.pid))
    });
    let page_kb = procfs::page_size() / 1024;
    TargetProfile {
        pid: tree.root(),
        root_pid: Some(tree.root()),
        cpu_time_s,
        user_s,
        system_s,
        service_demand_us: (requests > 0 && cpu_time_s > 0.0)
            .then(|| cpu_time_s * 1e6 / requests as f64),
        voluntary_ctx_switches: voluntary,
        involuntary_ctx_switches: involuntary,
        max_rss_kb,
        rss_sum_kb: rss_pages.map(|p| p * page_kb),
        threads,
        cpus_allowed: cpus_allowed(tree.root()),
        processes_seen: processes.len(),
        processes_alive_at_end: processes.iter().filter(|p| p.alive_at_end).count(),
        exited_cpu_s: exited_ticks as f64 / tps,
        run_queue_wait_s: None,
        processes,
    }
}

impl Profiler {
    /// Opens the counters. `target_pid` is the server's process, when known.
    pub fn new(target_pid: Option<u32>) -> Profiler {
        let cpus = read_ticks().map_or(0, |t| t.len());
        let perf: Vec<CpuCounters> = (0..cpus).map(CpuCounters::open).collect();
        // Descendants only, not the root's process group: a `--pid` server started from a
        // shell may share its group with unrelated processes (`server | tee log`).
        let tree = target_pid
            .filter(|pid| procfs::process::Process::new(*pid as i32).is_ok())
            .map(|pid| ProcessTree::new(pid, None));
        let mut p = Profiler {
            target_pid,
            tree,
            perf,
            started: Instant::now(),
            cpu_start: None,
            cpu_last: None,
            perf_start: Vec::new(),
            perf_last: (Instant::now(), Vec::new()),
            softirq_start: None,
            tcp_start: None,
            tree_start: None,
            self_start: None,
            run_queue: RunQueue::default(),
            run_queue_last_s: None,
        };
        p.begin();
        p
    }

    /// Starts (or restarts) the measured window: call it when the warm-up ends.
    pub fn begin(&mut self) {
        self.started = Instant::now();
        self.cpu_start = read_ticks();
        self.cpu_last = self.cpu_start.clone();
        self.perf_start = self.perf.iter_mut().map(CpuCounters::read).collect();
        self.perf_last = (self.started, self.perf_start.clone());
        self.softirq_start = std::fs::read_to_string("/proc/softirqs")
            .ok()
            .map(|t| parse_softirqs(&t));
        self.tcp_start = read_tcp();
        if let Some(tree) = self.tree.as_mut() {
            tree.refresh();
            self.tree_start = Some(TreeStart::of(tree));
            self.run_queue.restart(&tree.live_pids());
        }
        self.self_start = procfs::process::Process::myself()
            .ok()
            .and_then(|p| sample_process(&p));
    }

    /// The TCP counters' deltas since [`Profiler::begin`] (read now).
    pub fn tcp_so_far(&self) -> Option<BTreeMap<String, i64>> {
        let (start, now) = (self.tcp_start.as_ref()?, read_tcp()?);
        Some(
            TCP_COUNTERS
                .iter()
                .filter_map(|n| Some((n.to_string(), now.get(*n)? - start.get(*n)?)))
                .collect(),
        )
    }

    /// The live processes of the target's tree as of the last tick (empty without a target).
    pub fn tree_pids(&self) -> Vec<u32> {
        self.tree.as_ref().map_or_else(Vec::new, |t| {
            t.live_pids()
                .into_iter()
                .filter_map(|p| u32::try_from(p).ok())
                .collect()
        })
    }

    /// How long each of the server's threads waited for a CPU (runnable, not running) in the
    /// last tick, in seconds, by tid (those that waited); `None` without a server or
    /// schedstat.
    pub fn run_queue_wait_s(&self) -> Option<&HashMap<u32, f64>> {
        self.run_queue_last_s.as_ref()
    }

    /// How long each of the server's threads ran on a CPU in the last tick, in seconds, by
    /// tid (schedstat); empty without a server or schedstat.
    pub fn run_time_s(&self) -> HashMap<u32, f64> {
        self.run_queue
            .ran_ns()
            .iter()
            .map(|(tid, ns)| (*tid, *ns as f64 / 1e9))
            .collect()
    }

    /// Whether the PMU gave hardware counters on this machine.
    pub fn has_hardware_counters(&self) -> bool {
        self.perf.iter().any(|c| c.has(PerfEvent::Instructions))
    }

    /// One tick: per-CPU usage and counters since the previous tick.
    pub fn tick(&mut self) -> (Option<Vec<CpuUsage>>, TickCounters) {
        // Every tick, so that workers forked and gone between two ends of the run are seen.
        if let Some(tree) = self.tree.as_mut() {
            tree.refresh();
            self.run_queue_last_s = self.run_queue.sample(&tree.live_pids()).map(|by_tid| {
                by_tid
                    .into_iter()
                    .map(|(tid, ns)| (tid, ns as f64 / 1e9))
                    .collect()
            });
        }
        let now_ticks = read_ticks();
        let cpus = match (&self.cpu_last, &now_ticks) {
            (Some(before), Some(after)) => Some(
                before
                    .iter()
                    .zip(after)
                    .enumerate()
                    .map(|(i, (b, a))| usage(i, b, a))
                    .collect(),
            ),
            _ => None,
        };
        if now_ticks.is_some() {
            self.cpu_last = now_ticks;
        }
        let now = Instant::now();
        let reads: Vec<PerfReading> = self.perf.iter_mut().map(CpuCounters::read).collect();
        let secs = now.duration_since(self.perf_last.0).as_secs_f64().max(1e-6);
        let mut tick = TickCounters::default();
        for (after, before) in reads.iter().zip(&self.perf_last.1) {
            let delta = |e: PerfEvent| after.since(before, e);
            tick.context_switches_per_s
                .push(delta(PerfEvent::ContextSwitches).map(|d| d as f64 / secs));
            tick.migrations_per_s
                .push(delta(PerfEvent::CpuMigrations).map(|d| d as f64 / secs));
            tick.ipc.push(
                match (delta(PerfEvent::Instructions), delta(PerfEvent::Cycles)) {
                    (Some(i), Some(c)) if c > 0 => Some(i as f64 / c as f64),
                    _ => None,
                },
            );
        }
        self.perf_last = (now, reads);
        (cpus, tick)
    }

    /// The profile of the window since [`Profiler::begin`], for `requests` requests, sampled
    /// every `interval` (the caller's tick: the profiler samples when it is told to).
    pub fn finish(mut self, requests: u64, interval: std::time::Duration) -> Profile {
        self.so_far(requests, interval)
    }

    /// [`Profiler::finish`] as of now, the profiler going on: the run's journal keeps it once
    /// a minute, so that the report of a killed run has the profile as of its last minute.
    pub fn so_far(&mut self, requests: u64, interval: std::time::Duration) -> Profile {
        let duration_s = self.started.elapsed().as_secs_f64();
        let mut notes = Vec::new();
        let cpu_end = read_ticks();
        let perf_end: Vec<PerfReading> = self.perf.iter_mut().map(CpuCounters::read).collect();
        let softirq_end = std::fs::read_to_string("/proc/softirqs")
            .ok()
            .map(|t| parse_softirqs(&t));
        if self.perf.iter().all(|c| !c.has(PerfEvent::ContextSwitches)) {
            notes.push("perf counters unavailable (perf_event_paranoid or no permission): counters are null".into());
        } else if !self.has_hardware_counters() {
            notes.push("hardware counters (cycles, instructions, cache and branch misses) not supported here (no PMU): null".into());
        }
        let mut cpus = Vec::new();
        if let (Some(start), Some(end)) = (&self.cpu_start, &cpu_end) {
            for (i, (b, a)) in start.iter().zip(end).enumerate() {
                let u = usage(i, b, a);
                let p0 = self.perf_start.get(i).copied().unwrap_or_default();
                let p1 = perf_end.get(i).copied().unwrap_or_default();
                let d = |e: PerfEvent| p1.since(&p0, e);
                let soft = |f: fn(&(u64, u64)) -> u64| -> Option<u64> {
                    let s0 = self.softirq_start.as_ref()?.get(i)?;
                    let s1 = softirq_end.as_ref()?.get(i)?;
                    Some(f(s1).saturating_sub(f(s0)))
                };
                cpus.push(CpuProfile {
                    cpu: i,
                    user_pct: u.user_pct,
                    system_pct: u.system_pct,
                    irq_pct: u.irq_pct,
                    softirq_pct: u.softirq_pct,
                    idle_pct: u.idle_pct,
                    steal_pct: u.steal_pct,
                    net_rx_softirqs: soft(|s| s.0),
                    net_tx_softirqs: soft(|s| s.1),
                    context_switches: d(PerfEvent::ContextSwitches),
                    cpu_migrations: d(PerfEvent::CpuMigrations),
                    page_faults: d(PerfEvent::PageFaults),
                    cycles: d(PerfEvent::Cycles),
                    instructions: d(PerfEvent::Instructions),
                    ipc: match (d(PerfEvent::Instructions), d(PerfEvent::Cycles)) {
                        (Some(i), Some(c)) if c > 0 => Some(i as f64 / c as f64),
                        _ => None,
                    },
                    cache_misses: d(PerfEvent::CacheMisses),
                    branch_misses: d(PerfEvent::BranchMisses),
                });
            }
        } else {
            notes.push("/proc/stat unreadable: per-CPU usage is missing".into());
        }
        let per_request = |cpu_s: f64| (requests > 0).then(|| cpu_s * 1e6 / requests as f64);
        let target = match (self.tree.as_mut(), &self.tree_start) {
            (Some(tree), Some(start)) => {
                tree.refresh();
                if !tree
                    .members()
                    .any(|m| m.stat.pid as u32 == tree.root() && m.alive)
                {
                    notes.push(format!(
                        "the server's process {} exited during the run: its CPU time is counted up to its last sample",
                        tree.root()
                    ));
                }
                let mut profile = tree_profile(tree, start, requests);
                self.run_queue.sample(&tree.live_pids());
                profile.run_queue_wait_s = self.run_queue.total_s();
                Some(profile)
            }
            _ => {
                if let Some(pid) = self.target_pid {
                    notes.push(format!("target pid {pid} could not be read from /proc"));
                }
                None
            }
        };
        let generator = match (
            procfs::process::Process::myself()
                .ok()
                .and_then(|p| sample_process(&p)),
            self.self_start,
        ) {
            (Some(end), Some(start)) => {
                let cpu = (end.user_s - start.user_s) + (end.system_s - start.system_s);
                Some(GeneratorProfile {
                    cpu_time_s: cpu,
                    cpu_us_per_request: per_request(cpu),
                })
            }
            _ => None,
        };
        let tcp = self.tcp_so_far();
        if tcp.is_none() {
            notes.push(
                "/proc/net/netstat or /proc/net/snmp unreadable: TCP counters are null".into(),
            );
        }
        Profile {
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            duration_s,
            cpus,
            target,
            generator,
            tcp,
            notes,
            source: None,
            agent: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_counters_and_softirqs_parse() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 12 14\nIpExt: InNoRoutes\nIpExt: 3\n";
        let c = parse_net_counters(netstat);
        assert_eq!(c.get("ListenOverflows"), Some(&12));
        assert_eq!(c.get("ListenDrops"), Some(&14));
        assert!(!c.contains_key("InNoRoutes"));
        let snmp = "Tcp: RtoAlgorithm RetransSegs\nTcp: 1 7\n";
        assert_eq!(parse_net_counters(snmp).get("RetransSegs"), Some(&7));
        let soft = "                    CPU0       CPU1\n          HI:          1          0\n      NET_TX:         10         20\n      NET_RX:        300        400\n";
        assert_eq!(parse_softirqs(soft), vec![(300, 10), (400, 20)]);
        assert_eq!(crate::cpus::parse_list("\t0-2,5\n"), Ok(vec![0, 1, 2, 5]));
        assert_eq!(crate::cpus::parse_list("1"), Ok(vec![1]));
    }

    #[test]
    fn profiles_this_process_and_the_machine() {
        let me = std::process::id();
        let mut p = Profiler::new(Some(me));
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        let (cpus, counters) = p.tick();
        if let Some(cpus) = cpus {
            assert_eq!(cpus.len(), counters.ipc.len());
        }
        let profile = p.finish(1000, std::time::Duration::from_millis(100));
        let target = profile.target.expect("this process is readable");
        assert_eq!(target.pid, me);
        assert!(target.cpu_time_s >= 0.0);
        assert!(target.threads >= 1);
        assert!(profile.generator.is_some());
        // Hardware counters are null exactly where `perf stat` says "not supported".
        let perf = std::process::Command::new("perf")
            .args(["stat", "-e", "instructions", "true"])
            .output();
        if let Ok(out) = perf {
            let text = String::from_utf8_lossy(&out.stderr);
            let supported = !text.contains("not supported")
                && !text.contains("<not counted>")
                && out.status.success();
            let any_instructions = profile.cpus.iter().any(|c| c.instructions.is_some());
            if text.contains("not supported") {
                assert!(
                    !any_instructions,
                    "no PMU: instructions must be null, not 0"
                );
                assert!(profile.cpus.iter().all(|c| c.ipc.is_none()));
            } else if supported && profile.cpus.iter().any(|c| c.context_switches.is_some()) {
                assert!(
                    any_instructions,
                    "the PMU counts instructions here: they must be reported"
                );
            }
        } else {
            eprintln!("skipped the PMU cross-check: perf is not installed");
        }
    }
}
