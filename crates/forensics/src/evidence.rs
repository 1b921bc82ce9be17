//! The evidence of a run, drawn from the generator's data and the profiler's: the same for the
//! live view (a snapshot, TCP counters so far) and the final report (the run's totals, the
//! whole profile).

use std::collections::{BTreeMap, HashMap};

use tailscope_loadgen::recorder::Counters;
use tailscope_loadgen::{
    ErrorKind, Pace, Plan, RunTotals, SlowRequest, Snapshot, SpikeCounts, TimePoint,
};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::profile::Profile;

use crate::{ErrorEvidence, Evidence};

/// The generator's side of the evidence: a run's totals, or a live snapshot of it.
#[derive(Debug, Clone)]
pub struct Load<'a> {
    requests: u64,
    in_flight: u64,
    p50_us: Option<u64>,
    seconds: &'a [TimePoint],
    slowest: &'a [SlowRequest],
    counts: SpikeCounts,
    /// Our own connections' (data, SYN) retransmits, when TCP_INFO could be read.
    own: Option<(u64, u64)>,
    /// The request time-out (-t), when known.
    timeout_us: Option<u64>,
    /// Connects that gave up after the connect time-out.
    connect_timeouts: u64,
    /// The connect time-out, when known.
    connect_timeout_us: Option<u64>,
    /// The failures, for the error rules.
    errors: ErrorEvidence,
}

impl<'a> Load<'a> {
    /// The run so far; `in_flight` is how many requests can be in flight at once.
    pub fn of_snapshot(snap: &'a Snapshot, in_flight: u64) -> Self {
        Load {
            requests: snap.totals.requests(),
            in_flight,
            p50_us: (snap.totals.successes > 0).then_some(snap.latency.p50),
            seconds: &snap.recent_seconds,
            slowest: &snap.slowest,
            counts: snap.spike_counts,
            own: own_tcp(&snap.totals),
            timeout_us: None,
            connect_timeouts: connect_timeouts(&snap.totals),
            connect_timeout_us: None,
            errors: ErrorEvidence::of_counters(&snap.totals),
        }
    }

    /// The whole run.
    pub fn of_totals(plan: &Plan, totals: &'a RunTotals) -> Self {
        Load {
            requests: totals.counters.requests(),
            in_flight: plan.max_in_flight() as u64,
            p50_us: (!totals.histograms.latency.is_empty())
                .then(|| totals.histograms.latency.value_at_quantile(0.5)),
            seconds: &totals.timeseries,
            slowest: &totals.slowest,
            counts: totals.spike_counts(),
            own: own_tcp(&totals.counters),
            timeout_us: Some(plan.timeout.as_micros() as u64),
            connect_timeouts: connect_timeouts(&totals.counters),
            connect_timeout_us: Some(plan.connect_timeout.as_micros() as u64),
            errors: of_run(plan, totals),
        }
    }
}

/// The failures of a whole run, with what the plan and the histograms add.
fn of_run(plan: &Plan, totals: &RunTotals) -> ErrorEvidence {
    let h = &totals.histograms;
    ErrorEvidence {
        connections: plan.connections as u64,
        rate: match plan.pace {
            Pace::Rate(r) => Some(r),
            Pace::Max => None,
        },
        serving_peak: Some(totals.conns_peak.serving),
        first_request_mean_us: (!h.first_request.is_empty()).then(|| h.first_request.mean()),
        latency_mean_us: (!h.latency.is_empty()).then(|| h.latency.mean()),
        ..ErrorEvidence::of_counters(&totals.counters)
    }
}

fn connect_timeouts(c: &Counters) -> u64 {
    c.errors[ErrorKind::ConnectTimeout.index()]
}

fn own_tcp(c: &Counters) -> Option<(u64, u64)> {
    (c.tcp_info_reads > 0).then_some((c.retransmits, c.syn_retransmits))
}

/// Where the server and the generator run (either may be empty: not known).
#[derive(Debug, Clone, Copy)]
pub struct Roles<'a> {
    /// The server's CPUs.
    pub server: &'a [usize],
    /// The generator's CPUs.
    pub client: &'a [usize],
}

impl Evidence {
    /// The evidence of `load`, with the machine-wide TCP counter deltas, the watched
    /// listeners and, at the end of a run, the profile (the CPU-based figures need it).
    pub fn new(
        load: Load<'_>,
        tcp: Option<BTreeMap<String, i64>>,
        listen: Option<ListenReport>,
        profile: Option<&Profile>,
        roles: Roles<'_>,
    ) -> Evidence {
        let shares = profile.map(|p| cpu_shares(p, roles));
        let steal: Vec<f64> = profile
            .map(|p| p.cpus.iter().map(|c| c.steal_pct).collect())
            .unwrap_or_default();
        Evidence {
            requests: load.requests,
            in_flight: load.in_flight,
            p50_us: load.p50_us,
            seconds: load.seconds.to_vec(),
            slowest: load.slowest.to_vec(),
            counts: load.counts,
            tcp,
            own_retransmits: load.own.map(|o| o.0),
            own_syn_retransmits: load.own.map(|o| o.1),
            timeout_us: load.timeout_us,
            listen,
            server_cpus_busy_pct: profile.and_then(|p| mean_busy(p, roles.server)),
            client_cpus_busy_pct: profile.and_then(|p| mean_busy(p, roles.client)),
            steal_pct: (!steal.is_empty()).then(|| steal.iter().sum::<f64>() / steal.len() as f64),
            server_foreign_pct: shares.and_then(|s| s.0),
            generator_on_server_cpus_pct: shares.and_then(|s| s.1),
            target_involuntary_per_s: profile.and_then(|p| {
                Some(p.target.as_ref()?.involuntary_ctx_switches? as f64 / p.duration_s.max(1e-3))
            }),
            duration_s: profile.map_or(0.0, |p| p.duration_s),
            server_run_queue_s: BTreeMap::new(),
            server_run_queue_total_s: None,
            server_waits: Vec::new(),
            machine_busy_pct: profile.and_then(|p| {
                let cpus: Vec<usize> = p.cpus.iter().map(|c| c.cpu).collect();
                mean_busy(p, &cpus)
            }),
            server_profiled: profile.is_some_and(|p| p.target.is_some()),
            connect_timeouts: load.connect_timeouts,
            connect_timeout_us: load.connect_timeout_us,
            errors: load.errors,
        }
    }

    /// With how long each of the server's threads waited for a CPU in each second of the
    /// run (second 0 first, by tid), as the profiler measured it tick by tick. The rules read
    /// the thread that waited most, not the sum: 8 workers waiting 40 ms each are no 320 ms
    /// wait of any one request.
    pub fn with_run_queue(mut self, per_second: &BTreeMap<u64, HashMap<u32, f64>>) -> Evidence {
        if per_second.is_empty() {
            return self;
        }
        let mut by_thread: HashMap<u32, f64> = HashMap::new();
        for threads in per_second.values() {
            for (tid, w) in threads {
                *by_thread.entry(*tid).or_default() += w;
            }
        }
        self.server_run_queue_total_s = Some(by_thread.values().copied().fold(0.0, f64::max));
        self.server_run_queue_s = per_second
            .iter()
            .map(|(s, threads)| (*s, threads.values().copied().fold(0.0, f64::max)))
            .collect();
        self
    }

    /// [`Evidence::with_run_queue`] for the server's threads that do its work (see
    /// [`is_worker`]). Without run times, every thread counts.
    pub(crate) fn with_run_queue_of_workers(
        self,
        per_second: &BTreeMap<u64, HashMap<u32, f64>>,
        run_time: &HashMap<u32, f64>,
    ) -> Evidence {
        let workers: BTreeMap<u64, HashMap<u32, f64>> = per_second
            .iter()
            .map(|(second, threads)| (*second, workers_only(threads, run_time)))
            .collect();
        self.with_run_queue(&workers)
    }

    /// With the server's waits for a CPU as the profiler followed them ([`CpuWaits`]): per
    /// second, and tick by tick for the stalls' own windows; its working threads' only.
    pub fn with_cpu_waits(self, waits: &CpuWaits) -> Evidence {
        let mut e = self.with_run_queue_of_workers(&waits.per_second, &waits.run_time);
        let mut start = 0;
        e.server_waits = waits
            .ticks
            .iter()
            .map(|&(from_s, to_s, end)| {
                let threads = waits.tick_waits.get(start..end).unwrap_or_default();
                start = end;
                Waited {
                    from_s,
                    to_s,
                    waited_s: threads
                        .iter()
                        .filter(|(tid, _)| is_worker(*tid, &waits.run_time))
                        .map(|(_, w)| *w)
                        .fold(0.0, f64::max),
                }
            })
            .collect();
        e
    }
}

/// Whether thread `tid` does the server's work: it ran on a CPU over the run (`run_time`) at
/// least a quarter as long as the server's busiest thread. A thread that mostly waits beside
/// them waits behind the server itself: a Node event loop spinning 300 ms on its CPU kept V8's
/// helper threads waiting 200 ms with nobody else there, and that wait vetoed the stall.
/// Without run times, every thread counts.
fn is_worker(tid: u32, run_time: &HashMap<u32, f64>) -> bool {
    let busiest = run_time.values().copied().fold(0.0, f64::max);
    busiest <= 0.0 || run_time.get(&tid).is_some_and(|r| *r * 4.0 >= busiest)
}

fn workers_only(threads: &HashMap<u32, f64>, run_time: &HashMap<u32, f64>) -> HashMap<u32, f64> {
    threads
        .iter()
        .filter(|(tid, _)| is_worker(**tid, run_time))
        .map(|(tid, w)| (*tid, *w))
        .collect()
}

/// How long the server's working thread that waited most waited for a CPU in one tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waited {
    /// The tick's start, in seconds from the start of measurement.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// The wait, in seconds.
    pub waited_s: f64,
}

/// The server's threads' waits for a CPU over a run, as the profiler reads them tick by tick
/// (schedstat), with how long each thread ran: what the rules read of the scheduler.
#[derive(Debug, Clone, Default)]
pub struct CpuWaits {
    /// Per second (from 0): each thread's wait, by tid.
    per_second: BTreeMap<u64, HashMap<u32, f64>>,
    /// Per tick in which a thread waited: its start and end, and where its threads' waits
    /// end in `tick_waits` (they begin where the previous tick's end). Flat rather than a
    /// map a tick: ten ticks a second, a map each (64 B in the `Vec` and ~80 B allocated)
    /// grew a profiled run by ~7 MB an hour on a busy machine; now 24 B a tick and 16 B a
    /// thread that waited.
    ticks: Vec<(f64, f64, usize)>,
    /// The waits of `ticks`' threads, by tid, tick after tick.
    tick_waits: Vec<(u32, f64)>,
    /// Over the run: how long each thread ran on a CPU, by tid.
    run_time: HashMap<u32, f64>,
    /// When the last tick ended.
    last_s: Option<f64>,
}

impl CpuWaits {
    /// Adds a tick of the measured run that ended `elapsed` after its start: how long each
    /// thread waited for a CPU (`waited`) and ran on one (`ran`) since the previous tick.
    pub fn record(
        &mut self,
        elapsed: std::time::Duration,
        waited: &HashMap<u32, f64>,
        ran: &HashMap<u32, f64>,
    ) {
        let to_s = elapsed.as_secs_f64();
        let from_s = self.last_s.unwrap_or(to_s).min(to_s);
        self.last_s = Some(to_s);
        let second = self.per_second.entry(elapsed.as_secs()).or_default();
        for (tid, w) in waited {
            *second.entry(*tid).or_default() += w;
        }
        for (tid, r) in ran {
            *self.run_time.entry(*tid).or_default() += r;
        }
        // Kept for a run's whole length: a tick's waits under 1 ms are left out (at most a
        // few ms against a stall of 20 ms or more), which keeps most ticks of a server that
        // hardly waits from being kept at all.
        let before = self.tick_waits.len();
        self.tick_waits.extend(
            waited
                .iter()
                .filter(|(_, w)| **w >= 0.001)
                .map(|(tid, w)| (*tid, *w)),
        );
        if self.tick_waits.len() > before {
            self.ticks.push((from_s, to_s, self.tick_waits.len()));
        }
    }
}

/// Of the server's CPUs' capacity (%): what went to work that was neither the server's nor
/// the generator's, and, where the generator may run on those CPUs, the generator's own
/// share. Only where the server's CPUs are known (pinned at launch, or its
/// `Cpus_allowed_list`). A generator not pinned (no `--cpus`) may run on any CPU, the
/// server's too: its whole CPU time over the run is taken as on them (at most that much was),
/// so what is left is others' for certain; without its CPU time, others' share is unknown.
pub(crate) fn cpu_shares(profile: &Profile, roles: Roles<'_>) -> (Option<f64>, Option<f64>) {
    let Some(target) = profile.target.as_ref() else {
        return (None, None);
    };
    let cpus: Vec<usize> = if roles.server.is_empty() {
        target.cpus_allowed.clone()
    } else {
        roles.server.to_vec()
    };
    if cpus.is_empty() || profile.duration_s <= 0.0 {
        return (None, None);
    }
    let capacity_s = cpus.len() as f64 * profile.duration_s;
    let shared = roles.client.is_empty() || cpus.iter().any(|c| roles.client.contains(c));
    let generator_s = match (shared, &profile.generator) {
        (false, _) => None,
        (true, Some(g)) => Some(g.cpu_time_s.min(capacity_s)),
        (true, None) => return (None, None),
    };
    let busy_s: f64 = profile
        .cpus
        .iter()
        .filter(|c| cpus.contains(&c.cpu))
        .map(|c| (100.0 - c.idle_pct) / 100.0 * profile.duration_s)
        .sum();
    let others_s = busy_s - target.cpu_time_s - generator_s.unwrap_or(0.0);
    (
        Some((others_s / capacity_s * 100.0).max(0.0)),
        generator_s.map(|g| g / capacity_s * 100.0),
    )
}

fn mean_busy(profile: &Profile, cpus: &[usize]) -> Option<f64> {
    let busy: Vec<f64> = profile
        .cpus
        .iter()
        .filter(|c| cpus.contains(&c.cpu))
        .map(|c| 100.0 - c.idle_pct)
        .collect();
    (!busy.is_empty()).then(|| busy.iter().sum::<f64>() / busy.len() as f64)
}
