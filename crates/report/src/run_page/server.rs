//! The server's processes on the run's page: the tree's CPU and service demand, its busiest
//! processes and the generator's own CPU, as the text summary's "Server" section has them
//! (a newcomer found the page without them).

use std::fmt::Write as _;

use crate::document::{fmt_count, Report};
use crate::findings::{generator_cpu, service_demand};
use crate::page::{escape, table};

/// How many of the tree's processes the table lists (the busiest first), as the text does.
const SHOWN: usize = 8;

/// The "Server processes" section; empty for a report without a profile.
pub(super) fn section(report: &Report) -> String {
    let Some(findings) = report.sections.findings.as_ref() else {
        return String::new();
    };
    let profile = &findings.profile;
    let mut out = String::from("<h2>Server processes</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"sub\">Profiled over {:.1} s: the load and the wait for responses in flight.</p>",
        profile.duration_s
    );
    match &profile.target {
        Some(t) => {
            let name = report.target.as_ref().map_or("target", |t| t.name.as_str());
            let _ = writeln!(
                out,
                "<p>{} (pid {}): {} process{}, {} alive at the end: {:.2} s CPU (user {:.2} s, system {:.2} s) = <b>{} per request</b>; {} thread{}; RSS {} KiB in all.</p>",
                escape(name),
                t.root(),
                t.processes_seen,
                if t.processes_seen == 1 { "" } else { "es" },
                t.processes_alive_at_end,
                t.cpu_time_s,
                t.user_s,
                t.system_s,
                escape(&service_demand(t.service_demand_us, t.cpu_time_s)),
                t.threads,
                if t.threads == 1 { "" } else { "s" },
                t.rss_sum_kb.map_or("n/a".into(), fmt_count),
            );
            let rows: Vec<Vec<String>> = t
                .processes
                .iter()
                .take(SHOWN)
                .map(|p| {
                    let what = if p.command.is_empty() {
                        &p.comm
                    } else {
                        &p.command
                    };
                    vec![
                        p.pid.to_string(),
                        what.clone(),
                        format!("{:.2} s", p.cpu_time_s),
                        format!("{:.2} s", p.user_s),
                        format!("{:.2} s", p.system_s),
                        service_demand(p.service_demand_us, p.cpu_time_s),
                        if p.alive_at_end { "running" } else { "exited" }.into(),
                    ]
                })
                .collect();
            out.push_str(&table(
                &["pid", "command", "CPU", "user", "system", "per request", "at the end"],
                &rows,
            ));
            if t.processes.len() > SHOWN {
                let rest = &t.processes[SHOWN..];
                let _ = writeln!(
                    out,
                    "<p class=\"sub\">… and {} more process{}: {:.2} s of CPU.</p>",
                    rest.len(),
                    if rest.len() == 1 { "" } else { "es" },
                    rest.iter().map(|p| p.cpu_time_s).sum::<f64>()
                );
            }
        }
        // A server named (--pid, --target) whose processes the report lacks: a killed run's
        // rebuild, before the journal's first profile record. The notes say why (a newcomer
        // found such a page telling them to name the process they had named).
        None if report.target.is_some() => {
            let why = if profile.notes.is_empty() {
                "its processes were not recorded".to_string()
            } else {
                profile.notes.join("; ")
            };
            let _ = writeln!(
                out,
                "<p>The server's processes are not in this report: {}.</p>",
                escape(&why)
            );
        }
        None if profile.agent.is_none() => out.push_str(
            "<p>Not profiled: a URL alone names no process (<code>--pid PID</code> or <code>--target</code> to have their CPU and service demand).</p>\n",
        ),
        None => {}
    }
    if let Some(g) = &profile.generator {
        let _ = writeln!(out, "<p>Generator: {}.</p>", escape(&generator_cpu(g)));
    }
    out
}
