//! The profiler and the spike forensics wired into a run: sampled with every snapshot, then
//! `profile` and `diagnosis` added to the report and a "Server" and "Diagnosis" section to
//! the text summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tailscope_forensics::{Diagnosis, Evidence, Second, Slow};
use tailscope_loadgen::report::{fmt_count, fmt_us, Report};
use tailscope_loadgen::{Phase, Plan, RunTotals, SlowRequest, Snapshot, SpikeCounts, TimePoint};
use tailscope_targets::listen::{ListenReport, ListenSample, ListenWatch};
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::{Profile, Profiler, TickCounters};

/// A profiler following one run.
pub struct RunProfiler {
    profiler: Profiler,
    begun: bool,
    /// Per second of the measured run: summed busy % of each CPU and the ticks summed.
    per_second: BTreeMap<u64, (Vec<f64>, u32)>,
    server_cpus: Vec<usize>,
    client_cpus: Vec<usize>,
    /// The accept queues of the listeners the run loads.
    listen: Option<ListenWatch>,
    /// The last tick's view of them, for the dashboard.
    listen_now: Option<ListenSample>,
}

impl RunProfiler {
    /// Starts profiling; `target_pid` is the server's process when known.
    pub fn new(
        target_pid: Option<u32>,
        server_cpus: Vec<usize>,
        client_cpus: Vec<usize>,
        warmup: bool,
    ) -> Self {
        RunProfiler {
            profiler: Profiler::new(target_pid),
            begun: !warmup,
            per_second: BTreeMap::new(),
            server_cpus,
            client_cpus,
            listen: None,
            listen_now: None,
        }
    }

    /// Also watches the accept queues of the listeners behind `addr` (the address the run
    /// loads), every tick.
    pub fn watching_listeners(mut self, addr: std::net::SocketAddr) -> Self {
        self.listen = Some(ListenWatch::new(addr));
        self
    }

    /// The live processes of the server's tree as of the last tick, for the stack sampler.
    pub fn tree_pids(&self) -> Vec<u32> {
        self.profiler.tree_pids()
    }

    /// The listeners' accept queues at the last tick, when watched and found.
    pub fn listen_now(&self) -> Option<ListenSample> {
        self.listen_now
    }

    /// The causes the run so far supports, for the live view: from the snapshot and the TCP
    /// counters read now (the CPU-based rules need the whole run and wait for the end).
    pub fn live_diagnosis(&self, snap: &Snapshot, in_flight: u64) -> Vec<Diagnosis> {
        let inputs = Inputs {
            requests: snap.totals.requests(),
            in_flight,
            p50_us: (snap.totals.successes > 0).then_some(snap.latency.p50),
            seconds: &snap.recent_seconds,
            slowest: &snap.slowest,
            counts: snap.spike_counts,
            tcp: self.profiler.tcp_so_far(),
            own: own_tcp(&snap.totals),
            listen: self.listen.as_ref().map(ListenWatch::so_far),
        };
        tailscope_forensics::diagnose(&evidence(
            inputs,
            None,
            &self.server_cpus,
            &self.client_cpus,
        ))
    }

    /// Samples with a snapshot; returns this tick's per-CPU usage and counters.
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> (Option<Vec<CpuUsage>>, TickCounters) {
        if !self.begun && snap.phase != Phase::WarmingUp {
            // The warm-up is over: the profile covers the measured window only.
            self.profiler.begin();
            if let Some(l) = self.listen.as_mut() {
                l.restart();
            }
            self.begun = true;
        }
        if let (Some(l), true) = (self.listen.as_mut(), self.begun) {
            self.listen_now = l.sample(snap.elapsed);
        }
        let (cpus, counters) = self.profiler.tick();
        if let (Some(cpus), Phase::Running) = (&cpus, snap.phase) {
            let entry = self
                .per_second
                .entry(snap.elapsed.as_secs())
                .or_insert_with(|| (vec![0.0; cpus.len()], 0));
            for (sum, c) in entry.0.iter_mut().zip(cpus) {
                *sum += c.busy_pct();
            }
            entry.1 += 1;
        }
        (cpus, counters)
    }

    /// Ends the profile, diagnoses the run, and adds both to the report. Returns the text
    /// sections for the summary.
    pub fn finish(self, plan: &Plan, totals: &RunTotals, report: &mut Report) -> String {
        let profile = self.profiler.finish(report.summary.requests, plan.tick);
        for point in report.timeseries.iter_mut() {
            // ceil: a partial last point (t_s 3.002) is second 3, not second 2 again.
            let second = (point.t_s.ceil() as u64).saturating_sub(1);
            if let Some((sums, n)) = self.per_second.get(&second).filter(|(_, n)| *n > 0) {
                point.cpu_busy_pct = sums
                    .iter()
                    .map(|s| (s / f64::from(*n) * 10.0).round() / 10.0)
                    .collect();
            }
        }
        let inputs = Inputs {
            requests: totals.counters.requests(),
            in_flight: (plan.connections * plan.pipeline) as u64,
            p50_us: (!totals.latency.is_empty()).then(|| totals.latency.value_at_quantile(0.5)),
            seconds: &totals.timeseries,
            slowest: &totals.slowest,
            counts: totals.spike_counts(),
            tcp: profile.tcp.clone(),
            own: own_tcp(&totals.counters),
            listen: self.listen.map(ListenWatch::finish),
        };
        let listen = inputs.listen.clone();
        let evidence = evidence(inputs, Some(&profile), &self.server_cpus, &self.client_cpus);
        let diagnosis = tailscope_forensics::diagnose(&evidence);
        report.extra.insert(
            "profile".into(),
            serde_json::to_value(&profile).unwrap_or_default(),
        );
        report.extra.insert(
            "diagnosis".into(),
            serde_json::to_value(&diagnosis).unwrap_or_default(),
        );
        if let Some(l) = &listen {
            report.extra.insert(
                "listen_queue".into(),
                serde_json::to_value(l).unwrap_or_default(),
            );
        }
        text(
            &profile,
            &diagnosis,
            &self.server_cpus,
            &self.client_cpus,
            report,
            listen.as_ref(),
        )
    }
}

/// How much of the server's CPUs' capacity went to something other than the server: their
/// busy time less the server's own CPU time. Only where the server's CPUs are known (pinned at
/// launch, or its `Cpus_allowed_list`) and apart from the generator's.
fn foreign_pct(profile: &Profile, server_cpus: &[usize], client_cpus: &[usize]) -> Option<f64> {
    let target = profile.target.as_ref()?;
    let cpus: Vec<usize> = if server_cpus.is_empty() {
        target.cpus_allowed.clone()
    } else {
        server_cpus.to_vec()
    };
    if cpus.is_empty() || cpus.iter().any(|c| client_cpus.contains(c)) || profile.duration_s <= 0.0
    {
        return None;
    }
    let busy_s: f64 = profile
        .cpus
        .iter()
        .filter(|c| cpus.contains(&c.cpu))
        .map(|c| (100.0 - c.idle_pct) / 100.0 * profile.duration_s)
        .sum();
    let capacity_s = cpus.len() as f64 * profile.duration_s;
    Some(((busy_s - target.cpu_time_s) / capacity_s * 100.0).max(0.0))
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

/// What the forensics read, from the generator's data (run totals or a live snapshot) and the
/// profiler's; the same for the live view and the final report.
struct Inputs<'a> {
    requests: u64,
    in_flight: u64,
    p50_us: Option<u64>,
    seconds: &'a [TimePoint],
    slowest: &'a [SlowRequest],
    counts: SpikeCounts,
    tcp: Option<BTreeMap<String, i64>>,
    /// Our own connections' (data, SYN) retransmits, when TCP_INFO could be read.
    own: Option<(u64, u64)>,
    listen: Option<ListenReport>,
}

fn own_tcp(c: &tailscope_loadgen::recorder::Counters) -> Option<(u64, u64)> {
    (c.tcp_info_reads > 0).then_some((c.retransmits, c.syn_retransmits))
}

fn evidence(
    i: Inputs<'_>,
    profile: Option<&Profile>,
    server_cpus: &[usize],
    client_cpus: &[usize],
) -> Evidence {
    let steal: Vec<f64> = profile
        .map(|p| p.cpus.iter().map(|c| c.steal_pct).collect())
        .unwrap_or_default();
    Evidence {
        requests: i.requests,
        in_flight: i.in_flight,
        p50_us: i.p50_us,
        seconds: i
            .seconds
            .iter()
            .map(|p| Second {
                t_s: p.t_s,
                requests: p.requests,
                outliers: p.outliers,
                max_us: p.max_us,
                generator_lag_us: p.generator_lag_us,
            })
            .collect(),
        slowest: i
            .slowest
            .iter()
            .map(|s| Slow {
                at_s: s.at_s,
                latency_us: s.latency_us,
                first_on_connection: s.first_on_connection,
                unfinished: s.unfinished,
            })
            .collect(),
        new_connection_syn_steps: i.counts.new_connection_syn_steps,
        split_body_40ms: i.counts.split_body_40ms,
        rto_steps: i.counts.rto_steps,
        below_rto: i.counts.below_rto,
        tcp: i.tcp,
        own_retransmits: i.own.map(|o| o.0),
        own_syn_retransmits: i.own.map(|o| o.1),
        listen: i.listen,
        server_cpus_busy_pct: profile.and_then(|p| mean_busy(p, server_cpus)),
        client_cpus_busy_pct: profile.and_then(|p| mean_busy(p, client_cpus)),
        steal_pct: (!steal.is_empty()).then(|| steal.iter().sum::<f64>() / steal.len() as f64),
        server_foreign_pct: profile.and_then(|p| foreign_pct(p, server_cpus, client_cpus)),
        target_involuntary_per_s: profile.and_then(|p| {
            Some(p.target.as_ref()?.involuntary_ctx_switches? as f64 / p.duration_s.max(1e-3))
        }),
        duration_s: profile.map_or(0.0, |p| p.duration_s),
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

fn text(
    profile: &Profile,
    diagnosis: &[Diagnosis],
    server_cpus: &[usize],
    client_cpus: &[usize],
    report: &Report,
    listen: Option<&ListenReport>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nServer (profiled over {:.1} s):", profile.duration_s);
    if let Some(t) = &profile.target {
        let name = report.target.as_ref().map_or("target", |t| t.name.as_str());
        let _ = writeln!(
            out,
            "  {name} (pid {}): {} process{} ({} alive at the end): {:.2} s CPU (user {:.2} s, system {:.2} s) = {} per request; {} threads; RSS {} KiB in all, largest peak {} KiB",
            t.pid,
            t.processes_seen,
            if t.processes_seen == 1 { "" } else { "es" },
            t.processes_alive_at_end,
            t.cpu_time_s,
            t.user_s,
            t.system_s,
            t.service_demand_us.map_or("n/a".into(), |u| format!("{u:.2} µs")),
            t.threads,
            opt(t.rss_sum_kb.map(fmt_count)),
            opt(t.max_rss_kb.map(fmt_count)),
        );
        // The busiest processes by name; a prefork server's many exited workers go on one line.
        const SHOWN: usize = 8;
        for p in t.processes.iter().take(SHOWN) {
            let what = if p.command.is_empty() {
                &p.comm
            } else {
                &p.command
            };
            let what: String = if what.chars().count() > 40 {
                what.chars().take(39).chain(['…']).collect()
            } else {
                what.clone()
            };
            let _ = writeln!(
                out,
                "    pid {:<7} {:<40} {:>7.2} s (user {:.2} s, system {:.2} s) = {}{}",
                p.pid,
                what,
                p.cpu_time_s,
                p.user_s,
                p.system_s,
                p.service_demand_us
                    .map_or("n/a".into(), |u| format!("{u:.2} µs/req")),
                if p.alive_at_end { "" } else { "  exited" },
            );
        }
        if t.processes.len() > SHOWN {
            let rest = &t.processes[SHOWN..];
            let _ = writeln!(
                out,
                "    … and {} more process{} ({} exited): {:.2} s",
                rest.len(),
                if rest.len() == 1 { "" } else { "es" },
                rest.iter().filter(|p| !p.alive_at_end).count(),
                rest.iter().map(|p| p.cpu_time_s).sum::<f64>(),
            );
        }
        if t.exited_cpu_s > 0.0 {
            let _ = writeln!(
                out,
                "    of which {:.2} s by processes that exited during the run",
                t.exited_cpu_s
            );
        }
        let _ = writeln!(
            out,
            "  context switches: {} voluntary, {} involuntary",
            opt(t.voluntary_ctx_switches.map(fmt_count)),
            opt(t.involuntary_ctx_switches.map(fmt_count))
        );
    }
    if let Some(g) = &profile.generator {
        let _ = writeln!(
            out,
            "  generator: {:.2} s CPU = {} per request",
            g.cpu_time_s,
            g.cpu_us_per_request
                .map_or("n/a".into(), |u| format!("{u:.2} µs"))
        );
    }
    if !profile.cpus.is_empty() {
        let _ = writeln!(
            out,
            "  CPU      user   sys   irq  sirq  idle steal   ctx-sw/s  migr/s   IPC"
        );
        for c in &profile.cpus {
            let role = match (server_cpus.contains(&c.cpu), client_cpus.contains(&c.cpu)) {
                (true, true) => "SG",
                (true, false) => "S ",
                (false, true) => " G",
                _ => "  ",
            };
            let per_s = |v: Option<u64>| {
                v.map_or("n/a".into(), |n| {
                    fmt_count((n as f64 / profile.duration_s.max(1e-3)).round() as u64)
                })
            };
            let _ = writeln!(
                out,
                "  cpu{:<2} {role} {:>5.1} {:>5.1} {:>5.1} {:>5.1} {:>5.1} {:>5.1} {:>10} {:>7} {:>5}",
                c.cpu,
                c.user_pct,
                c.system_pct,
                c.irq_pct,
                c.softirq_pct,
                c.idle_pct,
                c.steal_pct,
                per_s(c.context_switches),
                per_s(c.cpu_migrations),
                c.ipc.map_or("n/a".into(), |i| format!("{i:.2}")),
            );
        }
    }
    let s = &report.summary;
    match (s.retransmits, s.syn_retransmits) {
        (Some(data), Some(syn)) => {
            let _ = writeln!(
                out,
                "  our connections (TCP_INFO): {} segments retransmitted, {} SYNs retransmitted",
                fmt_count(data),
                fmt_count(syn)
            );
        }
        _ => {
            let _ = writeln!(out, "  our connections (TCP_INFO): n/a");
        }
    }
    match listen {
        Some(l) if l.samples > 0 => {
            let _ = writeln!(
                out,
                "  listen queue (port {}, {} socket{}, backlog {}): longest {}, at its limit in {} of {} samples",
                l.port,
                l.sockets,
                if l.sockets == 1 { "" } else { "s" },
                opt(l.backlog),
                fmt_count(u64::from(l.max_queue)),
                fmt_count(l.full_samples),
                fmt_count(l.samples)
            );
        }
        Some(l) => {
            let _ = writeln!(
                out,
                "  listen queue: n/a ({})",
                l.unavailable.as_deref().unwrap_or("not found")
            );
        }
        None => {}
    }
    match &profile.tcp {
        Some(tcp) => {
            let moved: Vec<String> = tcp.iter().map(|(k, v)| format!("{k} {v:+}")).collect();
            let _ = writeln!(
                out,
                "  TCP, machine-wide (every socket on the machine): {}",
                moved.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, "  TCP, machine-wide: n/a");
        }
    }
    for note in &profile.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "\nDiagnosis:");
    if diagnosis.is_empty() {
        let _ = writeln!(out, "  no spike cause found");
    }
    for d in diagnosis {
        let window = d.window.map_or(String::new(), |w| {
            if w.open_ended {
                format!(", from {:.2} s, still going at the end", w.start_s)
            } else {
                format!(", {:.2}–{:.2} s", w.start_s, w.end_s)
            }
        });
        let _ = writeln!(
            out,
            "  {} ({} requests{window}): {}",
            d.cause,
            fmt_count(d.requests_affected),
            d.evidence
        );
    }
    let slowest = report.slowest.first().map(|s| fmt_us(s.latency_us));
    if let (Some(s), true) = (slowest, diagnosis.is_empty()) {
        let _ = writeln!(
            out,
            "  (the slowest request took {s}; no rule's signature and evidence were both there)"
        );
    }
    out
}
