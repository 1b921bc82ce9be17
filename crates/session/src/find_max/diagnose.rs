//! What limited the server at a step that capped the search: the step's own counts first
//! (the generator's CPU, its connections, the server's backlog), then the forensics.

use tailscope_forensics::Roles;
use tailscope_report::document::Report;
use tailscope_report::knee::{fell_behind, fmt_rps, generator_bound, KneeStep};

use super::FindMaxConfig;

/// What limited the server at a failing step, one sentence each: the generator's CPU first
/// (when it waited for one, the step measured the generator too), its connections, the
/// answered rate, and what the forensics and the profile said.
pub(super) fn diagnose(step: &KneeStep, report: &Report, c: &FindMaxConfig) -> Vec<String> {
    let intended = (step.offered_rps * report.summary.duration_s).floor() as u64;
    let mut why = step_why(step, intended, c.run.plan.connections);
    if let Some(f) = report.sections.findings.as_ref() {
        why.extend(findings_why(f, report, c));
    }
    if why.is_empty() {
        why.push("nothing stood out: the latency grew with the rate".into());
    }
    why
}

/// What the step's own counts say: the generator's CPU waits, its connections, the server's
/// backlog (`intended`: the requests due by the step's end).
pub(super) fn step_why(step: &KneeStep, intended: u64, connections: usize) -> Vec<String> {
    let mut why = Vec::new();
    let sends = step.requests.max(1) as f64;
    let cpu_share = 100.0 * step.late_waited_for_cpu as f64 / sends;
    if generator_bound(step) {
        why.push(format!(
            "the generator itself waited for a CPU on {} sends ({cpu_share:.0} %): this step measured the generator, not the server, and its verdict is unsure; the rate found is bounded by the generator (give the generator and the server CPUs apart, or fewer --threads)",
            step.late_waited_for_cpu
        ));
    } else if step.late_waited_for_cpu as f64 > 0.01 * sends {
        why.push(format!(
            "the generator itself waited for a CPU on {} sends ({cpu_share:.0} %): the step measured the machine too (give the generator and the server CPUs apart)",
            step.late_waited_for_cpu
        ));
    }
    if step.late_no_free_connection as f64 > 0.01 * sends {
        why.push(format!(
            "no free connection: {} sends ({:.0} %) waited for one of the {} connections, all busy on the server (the requests queued in the generator: give more -c if the server has room, else this is its limit)",
            step.late_no_free_connection,
            100.0 * step.late_no_free_connection as f64 / sends,
            connections
        ));
    }
    if fell_behind(step, intended) {
        why.push(format!(
            "the server's queue: it answered {} req/s of the {} offered within the step, and {} requests due by its end were never sent, more than one in fifty (it fell behind; the backlog grew through the step)",
            fmt_rps(step.answered_rps),
            fmt_rps(step.offered_rps),
            step.unsent_end
        ));
    } else if step.answered_rps < 0.95 * step.offered_rps || step.unsent_end > 0 {
        why.push(format!(
            "it answered {} req/s of the {} offered within the step; {} of its {} requests due by its end were not yet sent, under the one in fifty that makes a step fall behind (a backlog at its end, not one shown to grow)",
            fmt_rps(step.answered_rps),
            fmt_rps(step.offered_rps),
            step.unsent_end,
            intended
        ));
    }
    why
}

/// The forensics' diagnosis of the step, its listen queue and the target's figures.
fn findings_why(
    f: &tailscope_forensics::Findings,
    report: &Report,
    c: &FindMaxConfig,
) -> Vec<String> {
    let roles = Roles {
        server: &[],
        client: &c.run.plan.cpus,
    };
    let text = tailscope_report::findings::findings_text(f, roles, report);
    let mut why = Vec::new();
    let mut in_diagnosis = false;
    for line in text.lines() {
        let l = line.trim();
        if line.starts_with("Diagnosis") {
            in_diagnosis = true;
            continue;
        }
        let keep = (in_diagnosis && !l.is_empty() && !l.starts_with("no spike cause"))
            || l.starts_with("listen queue")
            || l.starts_with("target ");
        if keep {
            why.push(l.to_string());
        }
    }
    why
}
