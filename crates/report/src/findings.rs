//! The profiler's and the rules' sections of a run's text summary ("Server", "Diagnosis").

use std::fmt::Write as _;

use crate::document::{fmt_count, fmt_us, Report};
use tailscope_forensics::{Findings, Roles};
use tailscope_targets::profile::{Profile, TargetProfile};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

/// Whose figures the "Server" section's first line gives: the serving process `name` with its
/// own pid, and the root of the profiled tree when that is another process (the `sh -c`
/// around a python server; the name of one process beside the pid of another read as one).
fn tree_heading(name: &str, serving: Option<u32>, root: u32, root_comm: Option<&str>) -> String {
    match serving {
        Some(pid) if pid != root => {
            let root = root_comm.map_or(format!("pid {root}"), |c| format!("{c} (pid {root})"));
            format!("{name} (pid {pid}), tree from {root}")
        }
        _ => format!("{name} (pid {root})"),
    }
}

/// A service demand as the summaries write it: `4.40 µs`, or n/a with why when a tree (or a
/// process) used not one clock tick of CPU.
pub(crate) fn service_demand(us: Option<f64>, cpu_time_s: f64) -> String {
    match us {
        Some(u) => format!("{u:.2} µs"),
        None if cpu_time_s == 0.0 => "n/a (not one clock tick of CPU)".into(),
        None => "n/a".into(),
    }
}

/// The generator's CPU as the summaries write it: `3.71 s CPU = 5.20 µs per request`.
pub(crate) fn generator_cpu(g: &tailscope_targets::profile::GeneratorProfile) -> String {
    format!(
        "{:.2} s CPU = {} per request",
        g.cpu_time_s,
        g.cpu_us_per_request
            .map_or("n/a".into(), |u| format!("{u:.2} µs"))
    )
}

/// A run's whole text summary, as the run printed it: the report's, then the findings'
/// ("Server", "Diagnosis"), then `inside` (the stacks' "Server inside").
pub fn summary_text(report: &Report, roles: Roles<'_>, inside: &str) -> String {
    let sections = report
        .sections
        .findings
        .as_ref()
        .map_or_else(String::new, |f| findings_text(f, roles, report));
    report.to_text() + &sections + inside
}

/// [`summary_text`] of a saved report (`tailscope report FILE --text`): the CPUs' roles and the
/// "Server inside" section read from the report itself. A newcomer found the saved report's
/// text stopped after the slowest requests, the diagnosis left out.
pub fn saved_summary_text(report: &Report) -> String {
    let server = report
        .target
        .as_ref()
        .map_or(&[][..], |t| t.server_cpus.as_slice());
    let roles = Roles {
        server,
        client: &report.config.cpus,
    };
    let inside = match &report.sections.stacks {
        Some(crate::sections::StacksSection::Sampled(r)) => {
            tailscope_targets::stacks::inside_text(r)
        }
        Some(crate::sections::StacksSection::NotSampled(n)) => {
            format!("\nServer inside: not sampled ({})\n", n.missing.join("; "))
        }
        None => String::new(),
    };
    summary_text(report, roles, &inside)
}

/// The "Server" and "Diagnosis" sections of a run's text summary, from its findings; `roles`
/// marks the server's and the generator's CPUs in the per-CPU table.
pub fn findings_text(findings: &Findings, roles: Roles<'_>, report: &Report) -> String {
    let profile = &findings.profile;
    let mut out = String::new();
    // The profile covers the load and the grace for responses in flight, not the warm-up.
    let _ = writeln!(
        out,
        "\nServer (profiled over {:.1} s: the load and the wait for responses in flight):",
        profile.duration_s
    );
    if let Some(a) = &profile.agent {
        let _ = writeln!(
            out,
            "  read by the agent on {} at {} (clock offset {:+.3} ms ± {:.3} ms; certificate {}){}",
            a.host,
            a.address,
            a.clock_offset_ms,
            a.clock_uncertainty_ms,
            if a.pinned { "pinned" } else { "not pinned" },
            a.lost_at_s
                .map_or_else(String::new, |at| format!("; lost {at:.1} s into the run"))
        );
    }
    match &profile.target {
        Some(t) => write_target_tree(&mut out, t, report),
        // A URL alone names no process: say so, rather than a heading over the generator's
        // line alone (a newcomer read it as the server's profile gone missing).
        None if profile.agent.is_none() => {
            let _ = writeln!(
                out,
                "  the server's processes: not profiled (a URL alone names none: --pid PID or --target to have their CPU and service demand)"
            );
        }
        None => {}
    }
    if let Some(g) = &profile.generator {
        let _ = writeln!(out, "  generator: {}", generator_cpu(g));
    }
    if !profile.cpus.is_empty() {
        write_cpu_table(&mut out, profile, roles);
    }
    write_network(&mut out, findings, report);
    for note in &profile.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    write_diagnosis(&mut out, findings, report);
    out
}

/// The profiled process tree: its CPU time, the busiest processes, context switches.
fn write_target_tree(out: &mut String, t: &TargetProfile, report: &Report) {
    let name = report.target.as_ref().map_or("target", |t| t.name.as_str());
    let serving = report.target.as_ref().and_then(|t| t.pid);
    let root_comm = t.processes.iter().find(|p| p.pid == t.root());
    let heading = tree_heading(name, serving, t.root(), root_comm.map(|p| p.comm.as_str()));
    let _ = writeln!(
        out,
        "  {heading}: {} process{} ({}): {:.2} s CPU (user {:.2} s, system {:.2} s) = {} per request; {}, largest peak {} KiB",
        t.processes_seen,
        if t.processes_seen == 1 { "" } else { "es" },
        match t.processes_alive_at_end {
            0 => "it exited during the run".to_string(),
            alive => format!("{alive} alive at the end"),
        },
        t.cpu_time_s,
        t.user_s,
        t.system_s,
        service_demand(t.service_demand_us, t.cpu_time_s),
        // Threads and RSS are read from the processes alive at the end: none is left
        // to read once the server exited ("0 threads" would read as a count).
        match t.processes_alive_at_end {
            0 => "no threads or RSS left to read".to_string(),
            _ => format!(
                "{} thread{}; RSS {} KiB in all",
                t.threads,
                if t.threads == 1 { "" } else { "s" },
                opt(t.rss_sum_kb.map(fmt_count))
            ),
        },
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

/// The per-CPU table, each CPU marked S (the server's) and G (the generator's).
fn write_cpu_table(out: &mut String, profile: &Profile, roles: Roles<'_>) {
    let (server_cpus, client_cpus) = (roles.server, roles.client);
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

/// Our connections' retransmits, the listen queue and the machine's TCP counters.
fn write_network(out: &mut String, findings: &Findings, report: &Report) {
    let (profile, listen) = (&findings.profile, findings.listen_queue.as_ref());
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
            let _ = writeln!(
                out,
                "  our connections (TCP_INFO): n/a (no connection's TCP_INFO was read into the report: it is read when a request or a handshake is slow and when a connection closes)"
            );
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
}

/// The "Diagnosis" section: the causes found, those held back, or why there is none.
fn write_diagnosis(out: &mut String, findings: &Findings, report: &Report) {
    let diagnosis = &findings.diagnosis;
    let _ = writeln!(out, "\nDiagnosis:");
    if tailscope_forensics::errors_unexplained(report.summary.errors, diagnosis) {
        // Requests failed and no rule said why: that, not "no spike", is the news (a latency
        // cause beside them explains no failure).
        let _ = writeln!(
            out,
            "  {}",
            tailscope_forensics::unexplained(report.summary.errors)
        );
    } else if diagnosis.is_empty() {
        let _ = writeln!(out, "  no spike cause found");
    }
    for d in diagnosis {
        let window = d
            .window
            .map_or(String::new(), |w| format!(", {}", w.describe()));
        let _ = writeln!(
            out,
            "  {} ({} request{}{window}): {}",
            d.cause,
            fmt_count(d.requests_affected),
            if d.requests_affected == 1 { "" } else { "s" },
            d.evidence
        );
        if let Some(requests) = d.requests_line() {
            let _ = writeln!(out, "    requests: {requests}");
        }
        if let Some(inside) = &d.inside {
            let _ = writeln!(out, "    inside: {inside}");
        }
    }
    // A cause a veto dropped is said with the veto, not left to read as "no signature".
    for h in &findings.diagnosis_held_back {
        let _ = writeln!(out, "  held back: {}: {}", h.cause, h.why);
    }
    let slowest = report.slowest.first().map(|s| fmt_us(s.latency_us));
    if let (Some(s), true) = (slowest, diagnosis.is_empty()) {
        let why = if findings.diagnosis_held_back.is_empty() {
            "no rule's signature and evidence were both there"
        } else {
            "a signature was there, and what held its cause back is said above"
        };
        let _ = writeln!(out, "  (the slowest request took {s}; {why})");
    }
}

#[cfg(test)]
mod tests {
    use super::tree_heading;

    #[test]
    fn the_tree_is_named_by_the_serving_process_with_its_own_pid() {
        // python3 forked by `sh -c`: the name and the pid are python's, the root is the shell.
        assert_eq!(
            tree_heading("python3", Some(4216), 4215, Some("sh")),
            "python3 (pid 4216), tree from sh (pid 4215)"
        );
        assert_eq!(
            tree_heading("python3", Some(4216), 4215, None),
            "python3 (pid 4216), tree from pid 4215"
        );
        // nginx's master is both the serving process and the root.
        assert_eq!(
            tree_heading("nginx", Some(10), 10, Some("nginx")),
            "nginx (pid 10)"
        );
        assert_eq!(
            tree_heading("external", None, 77, Some("python3")),
            "external (pid 77)"
        );
    }
}
