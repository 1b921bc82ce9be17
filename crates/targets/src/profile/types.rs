//! The profile's published types: what the report's `profile` holds, and a tick's counters for
//! the dashboard.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Per-CPU figures of one tick, for the dashboard (and an agent's stream).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TickCounters {
    /// Context switches per second on each CPU (`None`: perf unavailable).
    pub context_switches_per_s: Vec<Option<f64>>,
    /// Migrations per second onto each CPU.
    pub migrations_per_s: Vec<Option<f64>>,
    /// Instructions per cycle (`None` without a PMU).
    pub ipc: Vec<Option<f64>>,
}

/// One CPU over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuProfile {
    /// CPU number.
    pub cpu: usize,
    /// Percent of the run in user mode.
    pub user_pct: f64,
    /// In the kernel.
    pub system_pct: f64,
    /// In hard interrupts.
    pub irq_pct: f64,
    /// In soft interrupts.
    pub softirq_pct: f64,
    /// Idle.
    pub idle_pct: f64,
    /// Taken by the hypervisor.
    pub steal_pct: f64,
    /// NET_RX softirqs run on this CPU.
    pub net_rx_softirqs: Option<u64>,
    /// NET_TX softirqs.
    pub net_tx_softirqs: Option<u64>,
    /// perf: context switches.
    pub context_switches: Option<u64>,
    /// perf: migrations.
    pub cpu_migrations: Option<u64>,
    /// perf: page faults.
    pub page_faults: Option<u64>,
    /// perf: cycles (`null` without a PMU).
    pub cycles: Option<u64>,
    /// perf: instructions.
    pub instructions: Option<u64>,
    /// instructions / cycles.
    pub ipc: Option<f64>,
    /// perf: cache misses.
    pub cache_misses: Option<u64>,
    /// perf: branch misses.
    pub branch_misses: Option<u64>,
}

/// The server over the run: its whole process tree (the root, every process descended from it,
/// and those that exited during the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetProfile {
    /// The serving process's pid, as the report's `target.pid` (the python a `sh -c` forked,
    /// nginx's master), or the root's where none was named (`--pid`).
    pub pid: u32,
    /// The tree's root (the launched command, or `--pid`): another process than `pid` when a
    /// shell runs the server. None in reports of an older tailscope, whose `pid` was the root.
    #[serde(default)]
    pub root_pid: Option<u32>,
    /// user + system over the tree, all threads, exited processes included.
    pub cpu_time_s: f64,
    /// User time of the tree.
    pub user_s: f64,
    /// System time of the tree.
    pub system_s: f64,
    /// The tree's CPU µs per request: the server's cost of one request.
    pub service_demand_us: Option<f64>,
    /// Voluntary context switches, summed over the tree's threads.
    pub voluntary_ctx_switches: Option<u64>,
    /// Involuntary context switches (preemptions), summed over the tree's threads.
    pub involuntary_ctx_switches: Option<u64>,
    /// The largest peak resident memory (VmHWM) of any one process of the tree.
    pub max_rss_kb: Option<u64>,
    /// Resident memory of the tree's live processes at the end, summed (shared pages count
    /// once per process, as `ps` does).
    pub rss_sum_kb: Option<u64>,
    /// Threads of the live processes at the end.
    pub threads: i64,
    /// The CPUs the root may run on (`Cpus_allowed_list`).
    pub cpus_allowed: Vec<usize>,
    /// Processes seen in the tree during the run.
    pub processes_seen: usize,
    /// Of those, alive at the end.
    pub processes_alive_at_end: usize,
    /// CPU time of the processes that exited during the run (respawned workers, a shell's
    /// children), included in `cpu_time_s`.
    pub exited_cpu_s: f64,
    /// How long the tree's threads were runnable but waited for a CPU, summed over threads
    /// (the scheduler's run_delay; `null` where schedstat is unreadable).
    #[serde(default)]
    pub run_queue_wait_s: Option<f64>,
    /// Each process of the tree, the busiest first.
    pub processes: Vec<ProcessProfile>,
}

impl TargetProfile {
    /// The root of the tree (see `root_pid`).
    pub fn root(&self) -> u32 {
        self.root_pid.unwrap_or(self.pid)
    }

    /// Names `server`, the process that serves, as the profile's `pid` when it is one of the
    /// tree's processes: the same pid as the report's `target.pid`, with the root kept in
    /// `root_pid`.
    pub fn serving(&mut self, server: u32) {
        if self.processes.iter().any(|p| p.pid == server) {
            self.pid = server;
        }
    }
}

/// One process of the server's tree over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessProfile {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid when last seen.
    pub ppid: i32,
    /// The kernel's short name.
    pub comm: String,
    /// Its command line, shortened (nginx's shows `nginx: worker process`).
    pub command: String,
    /// User time of its own threads over the run.
    pub user_s: f64,
    /// System time.
    pub system_s: f64,
    /// user + system.
    pub cpu_time_s: f64,
    /// Its own CPU µs per request of the run (its share of the tree's service demand).
    pub service_demand_us: Option<f64>,
    /// Voluntary context switches over the run.
    pub voluntary_ctx_switches: Option<u64>,
    /// Involuntary context switches over the run.
    pub involuntary_ctx_switches: Option<u64>,
    /// Threads when last seen.
    pub threads: i64,
    /// Peak resident memory, KiB.
    pub max_rss_kb: Option<u64>,
    /// Whether it was still running at the end of the run.
    pub alive_at_end: bool,
}

/// The generator (this process) over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorProfile {
    /// user + system of the whole tailscope process.
    pub cpu_time_s: f64,
    /// CPU µs per request.
    pub cpu_us_per_request: Option<f64>,
}

/// Everything the profiler measured, for the report's `profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// How often it sampled.
    pub interval_ms: u64,
    /// Seconds profiled.
    pub duration_s: f64,
    /// Per CPU.
    pub cpus: Vec<CpuProfile>,
    /// The server, when its pid is known.
    pub target: Option<TargetProfile>,
    /// The generator.
    pub generator: Option<GeneratorProfile>,
    /// Kernel TCP counters, as deltas over the run (`null` when unreadable).
    pub tcp: Option<BTreeMap<String, i64>>,
    /// What could not be measured here, and why.
    pub notes: Vec<String>,
    /// Where the server side was read: absent for this host, `agent HOST` for a
    /// `tailscope agent` on the server's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The agent's link over the run, when the server side was read by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentLink>,
}

/// How a run reached the agent that profiled its server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentLink {
    /// The agent's address, as the run named it.
    pub address: String,
    /// The agent's host name.
    pub host: String,
    /// The agent's clock minus the run's, measured at start (NTP-style: the round trip with
    /// the shortest time of several), in ms.
    pub clock_offset_ms: f64,
    /// How far off that offset may be: half that round trip, in ms.
    pub clock_uncertainty_ms: f64,
    /// Round trips the offset was measured over.
    pub clock_round_trips: u32,
    /// The agent's certificate fingerprint (SHA-256), pinned or, when not, as presented.
    pub fingerprint: String,
    /// Whether that fingerprint was pinned by the run (`--agent-fingerprint`).
    pub pinned: bool,
    /// Seconds into the measured run when the agent was lost: from then on the server side
    /// is missing, and nothing is judged from it. Absent when it stayed to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at_s: Option<f64>,
    /// Why it was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_because: Option<String>,
}
