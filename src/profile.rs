//! The profiler and the spike forensics wired into a run: sampled with every snapshot, then
//! `profile` and `diagnosis` added to the report and a "Server" and "Diagnosis" section to
//! the text summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tailscope_loadgen::report::{fmt_count, fmt_us, Report};
use tailscope_loadgen::{Phase, Plan, RunTotals, Snapshot};
use tailscope_targets::forensics::{self, Diagnosis, Evidence, Second, Slow};
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
        }
    }

    /// Samples with a snapshot; returns this tick's per-CPU usage and counters.
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> (Option<Vec<CpuUsage>>, TickCounters) {
        if !self.begun && snap.phase != Phase::WarmingUp {
            // The warm-up is over: the profile covers the measured window only.
            self.profiler.begin();
            self.begun = true;
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
        let profile = self.profiler.finish(report.summary.requests);
        for point in report.timeseries.iter_mut() {
            let second = (point.t_s.round() as u64).saturating_sub(1);
            if let Some((sums, n)) = self.per_second.get(&second).filter(|(_, n)| *n > 0) {
                point.cpu_busy_pct = sums
                    .iter()
                    .map(|s| (s / f64::from(*n) * 10.0).round() / 10.0)
                    .collect();
            }
        }
        let evidence = evidence(plan, totals, &profile, &self.server_cpus, &self.client_cpus);
        let diagnosis = forensics::diagnose(&evidence);
        report.extra.insert(
            "profile".into(),
            serde_json::to_value(&profile).unwrap_or_default(),
        );
        report.extra.insert(
            "diagnosis".into(),
            serde_json::to_value(&diagnosis).unwrap_or_default(),
        );
        text(
            &profile,
            &diagnosis,
            &self.server_cpus,
            &self.client_cpus,
            report,
        )
    }
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

fn evidence(
    plan: &Plan,
    totals: &RunTotals,
    profile: &Profile,
    server_cpus: &[usize],
    client_cpus: &[usize],
) -> Evidence {
    let count = |h: &hdrhistogram::Histogram<u64>, lo: u64, hi: u64| {
        if h.is_empty() || h.max() < lo {
            0
        } else {
            h.count_between(lo, hi)
        }
    };
    let steal: Vec<f64> = profile.cpus.iter().map(|c| c.steal_pct).collect();
    Evidence {
        requests: totals.counters.requests(),
        in_flight: (plan.connections * plan.pipeline) as u64,
        p50_us: (!totals.latency.is_empty()).then(|| totals.latency.value_at_quantile(0.5)),
        seconds: totals
            .timeseries
            .iter()
            .map(|p| Second {
                t_s: p.t_s,
                requests: p.requests,
                outliers: p.outliers,
                max_us: p.max_us,
                generator_lag_us: p.generator_lag_us,
            })
            .collect(),
        slowest: totals
            .slowest
            .iter()
            .map(|s| Slow {
                at_s: s.at_s,
                latency_us: s.latency_us,
                first_on_connection: s.first_on_connection,
            })
            .collect(),
        new_connection_syn_steps: [
            count(&totals.first_request, 900_000, 1_600_000),
            count(&totals.first_request, 2_800_000, 3_800_000),
            count(&totals.first_request, 6_800_000, 8_000_000),
        ],
        split_body_40ms: count(&totals.body, 38_000, 60_000),
        rto_steps: [
            count(&totals.latency, 195_000, 260_000),
            count(&totals.latency, 390_000, 500_000),
            count(&totals.latency, 790_000, 950_000),
        ],
        below_rto: count(&totals.latency, 100_000, 190_000),
        tcp: profile.tcp.clone(),
        server_cpus_busy_pct: mean_busy(profile, server_cpus),
        client_cpus_busy_pct: mean_busy(profile, client_cpus),
        steal_pct: (!steal.is_empty()).then(|| steal.iter().sum::<f64>() / steal.len() as f64),
        target_involuntary_per_s: profile
            .target
            .as_ref()
            .and_then(|t| t.involuntary_ctx_switches)
            .map(|n| n as f64 / profile.duration_s.max(1e-3)),
        duration_s: profile.duration_s,
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
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nServer (profiled over {:.1} s):", profile.duration_s);
    if let Some(t) = &profile.target {
        let name = report.target.as_ref().map_or("target", |t| t.name.as_str());
        let _ = writeln!(
            out,
            "  {name} pid {}: {:.2} s CPU (user {:.2} s, system {:.2} s) = {} per request; {} threads; max RSS {} KiB",
            t.pid,
            t.cpu_time_s,
            t.user_s,
            t.system_s,
            t.service_demand_us.map_or("n/a".into(), |u| format!("{u:.2} µs")),
            t.threads,
            opt(t.max_rss_kb.map(fmt_count)),
        );
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
    match &profile.tcp {
        Some(tcp) => {
            let moved: Vec<String> = tcp.iter().map(|(k, v)| format!("{k} {v:+}")).collect();
            let _ = writeln!(out, "  TCP: {}", moved.join(", "));
        }
        None => {
            let _ = writeln!(out, "  TCP: n/a");
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
            format!(", {:.2}–{:.2} s", w.start_s, w.end_s)
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
