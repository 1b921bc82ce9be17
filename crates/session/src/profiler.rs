//! The profiler and the rules following one run: sampled with every snapshot, diagnosed live
//! and at the end, where they leave [`Findings`], the report's typed sections. The rules are
//! `tailscope_forensics`'; driving the profiler tick by tick is the session's.

use std::collections::BTreeMap;
use std::time::Duration;

use tailscope_agent::sampler::ServerSampler;
use tailscope_agent::wire::Tick;
use tailscope_loadgen::{Phase, Plan, RunTotals, Snapshot};
use tailscope_report::sections::CpuBusy;
use tailscope_targets::listen::{ListenReport, ListenSample, ListenWatch};
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::{Profile, TickCounters};
use tailscope_targets::stacks::Inside;

use crate::agent::AgentSide;

use tailscope_forensics::{
    diagnose, judge, slow_by_request, CpuWaits, Diagnosis, Evidence, Findings, Load, Roles,
};

/// Where the server side is read: on this host, or by an agent on the server's.
// One per run: boxing the sampler would buy nothing.
#[allow(clippy::large_enum_variant)]
enum ServerSide {
    Local(ServerSampler),
    Agent(AgentSide),
}

/// A profiler following one run.
pub struct RunProfiler {
    side: ServerSide,
    begun: bool,
    /// Per second of the measured run: summed busy % of each CPU and the ticks summed.
    per_second: BTreeMap<u64, (Vec<f64>, u32)>,
    /// Over the measured run: how long the server's threads waited for a CPU, and ran.
    cpu_waits: CpuWaits,
    server_cpus: Vec<usize>,
    client_cpus: Vec<usize>,
    /// The last tick's view of the accept queues, for the dashboard.
    listen_now: Option<ListenSample>,
}

impl RunProfiler {
    /// Starts profiling; `target_pid` is the server's process when known; `warmup`: the
    /// run begins with a warm-up, left out of the profile.
    pub fn new(
        target_pid: Option<u32>,
        server_cpus: Vec<usize>,
        client_cpus: Vec<usize>,
        warmup: bool,
    ) -> Self {
        RunProfiler {
            side: ServerSide::Local(ServerSampler::new(target_pid, None, warmup)),
            begun: !warmup,
            per_second: BTreeMap::new(),
            cpu_waits: CpuWaits::default(),
            server_cpus,
            client_cpus,
            listen_now: None,
        }
    }

    /// Reads the server side through an agent on the server's host instead (`run
    /// --agent`): its ticks stand where the local profiler's would.
    pub fn through_agent(mut self, agent: AgentSide) -> Self {
        self.side = ServerSide::Agent(agent);
        self
    }

    /// Also watches the accept queues of the listeners behind `addr` (the address the run
    /// loads), every tick (an agent watches its host's own).
    pub fn watching_listeners(mut self, addr: std::net::SocketAddr) -> Self {
        if let ServerSide::Local(sampler) = self.side {
            self.side = ServerSide::Local(sampler.watching(ListenWatch::new(addr)));
        }
        self
    }

    /// The live processes of the server's tree as of the last tick, for the stack sampler
    /// (none when an agent reads them on another host).
    pub fn tree_pids(&self) -> Vec<u32> {
        match &self.side {
            ServerSide::Local(s) => s.tree_pids(),
            ServerSide::Agent(_) => Vec::new(),
        }
    }

    /// The listeners' accept queues at the last tick, when watched and found.
    pub fn listen_now(&self) -> Option<ListenSample> {
        self.listen_now
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            server: &self.server_cpus,
            client: &self.client_cpus,
        }
    }

    /// The causes the run so far supports, for the live view: from the snapshot and the TCP
    /// counters read now (the CPU-based rules need the whole run and wait for the end).
    pub fn live_diagnosis(&self, snap: &Snapshot, in_flight: u64) -> Vec<Diagnosis> {
        let (tcp, listen) = match &self.side {
            ServerSide::Local(s) => (s.tcp_so_far(), s.listen_so_far()),
            ServerSide::Agent(a) => (a.last().and_then(|t| t.tcp.clone()), None),
        };
        diagnose(
            &Evidence::new(
                Load::of_snapshot(snap, in_flight),
                tcp,
                listen,
                None,
                self.roles(),
            )
            .with_cpu_waits(&self.cpu_waits),
        )
    }

    /// Samples with a snapshot; returns this tick's per-CPU usage and counters.
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> (Option<Vec<CpuUsage>>, TickCounters) {
        if snap.phase != Phase::WarmingUp {
            // The warm-up is over: the profile covers the measured window only. The agent is
            // told in any case, when its second 0 began, for the stacks it samples.
            match &mut self.side {
                ServerSide::Local(s) if !self.begun => s.begin(),
                ServerSide::Local(_) => {}
                ServerSide::Agent(a) => a.begin(snap.elapsed),
            }
            self.begun = true;
        }
        let ticks = match &mut self.side {
            ServerSide::Local(s) => vec![(Duration::ZERO, s.tick(Some(snap.elapsed)))],
            ServerSide::Agent(a) => {
                let ticks = a.ticks();
                if a.is_lost() {
                    // Judge nothing the run cannot see: waits of part of the run would
                    // be read as the whole run's.
                    self.cpu_waits = CpuWaits::default();
                    self.listen_now = None;
                }
                ticks
            }
        };
        for (age, tick) in &ticks {
            self.record(snap, snap.elapsed.saturating_sub(*age), tick);
        }
        match ticks.into_iter().last() {
            Some((_, t)) => {
                self.listen_now = t.listen;
                (t.cpus, t.counters)
            }
            None => (None, TickCounters::default()),
        }
    }

    /// One tick's readings, read at `at` into the run, into the run's per-second CPU and
    /// CPU waits.
    fn record(&mut self, snap: &Snapshot, at: Duration, tick: &Tick) {
        let lost = matches!(&self.side, ServerSide::Agent(a) if a.is_lost());
        if let (Some(waited), Phase::Running, false) = (&tick.run_queue_wait_s, snap.phase, lost) {
            self.cpu_waits.record(at, waited, &tick.run_time_s);
        }
        if let (Some(cpus), Phase::Running) = (&tick.cpus, snap.phase) {
            let entry = self
                .per_second
                .entry(at.as_secs())
                .or_insert_with(|| (vec![0.0; cpus.len()], 0));
            for (sum, c) in entry.0.iter_mut().zip(cpus) {
                *sum += c.busy_pct();
            }
            entry.1 += 1;
        }
    }

    /// Each measured second's mean busy % per CPU so far (to 0.1 %), by second of the run:
    /// what [`CpuBusy::fill`] puts into a report's time series (the page saved from the
    /// dashboard takes it mid-run; [`RunProfiler::finish`] at the end).
    pub fn cpu_busy(&self) -> CpuBusy {
        self.cpu_busy_from(0)
    }

    /// [`Self::cpu_busy`] of the seconds from `second` on: the journal takes the seconds
    /// just closed each second, and the whole run's map made anew every second cost a run
    /// of an hour 3,600 allocations a second (86,400 a day), growing with its length.
    pub fn cpu_busy_from(&self, second: u64) -> CpuBusy {
        CpuBusy(
            self.per_second
                .range(second..)
                .filter(|(_, (_, n))| *n > 0)
                .map(|(&second, (sums, n))| {
                    let mean = sums
                        .iter()
                        .map(|s| (s / f64::from(*n) * 10.0).round() / 10.0)
                        .collect();
                    (second, mean)
                })
                .collect(),
        )
    }

    /// The server side's profile and accept queues as of now, over the run's `requests` so
    /// far: the journal keeps it once a minute for the report of a run that is killed. None
    /// before the measured window begins, or through an agent (its profile comes at the end).
    pub fn profile_so_far(
        &mut self,
        requests: u64,
        interval: Duration,
    ) -> Option<(Profile, Option<ListenReport>)> {
        match &mut self.side {
            ServerSide::Local(s) if self.begun => Some(s.so_far(requests, interval)),
            _ => None,
        }
    }

    /// Ends the profile (over the run's `requests`, as its report counts them) and diagnoses
    /// the run. Each second's CPU busy of the time series is [`RunProfiler::cpu_busy`].
    pub fn finish(self, plan: &Plan, totals: &RunTotals, requests: u64) -> Findings {
        self.finish_with_stacks(plan, totals, requests).0
    }

    /// [`RunProfiler::finish`], with the server's stacks when an agent sampled them (for
    /// [`crate::stacks::RunStacks::finish`]).
    pub fn finish_with_stacks(
        self,
        plan: &Plan,
        totals: &RunTotals,
        requests: u64,
    ) -> (Findings, Option<Inside>) {
        let (profile, listen_queue, inside) = match self.side {
            ServerSide::Local(s) => {
                let (profile, listen) = s.finish(requests, plan.tick);
                (profile, listen, None)
            }
            ServerSide::Agent(a) => a.finish(
                requests,
                plan.tick,
                crate::stacks::seconds_of(&totals.timeseries),
            ),
        };
        let roles = Roles {
            server: &self.server_cpus,
            client: &self.client_cpus,
        };
        let evidence = Evidence::new(
            Load::of_totals(plan, totals),
            profile.tcp.clone(),
            listen_queue.clone(),
            Some(&profile),
            roles,
        )
        .with_cpu_waits(&self.cpu_waits);
        let verdict = judge(&evidence);
        let findings = Findings {
            diagnosis: verdict.named,
            diagnosis_held_back: verdict.held_back,
            profile,
            listen_queue,
            slowest_by_request: slow_by_request(&totals.slowest),
        };
        (findings, inside)
    }
}
