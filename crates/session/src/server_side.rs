//! The server side of a run: the target launched (or named by `--pid`, or launched by the
//! agent), the profiler and the stack sampler set to follow it, and what they found once the
//! load has ended.

use std::ops::ControlFlow;

use anyhow::{Context, Result};
use tailscope_forensics::Findings;
use tailscope_loadgen::{Plan, RunControl, RunTotals};
use tailscope_report::document::TargetInfo;
use tailscope_report::sections::{CpuBusy, StacksSection};
use tailscope_targets::cpus::format_list;
use tailscope_targets::listen::PidServes;
use tailscope_targets::tree::comm;
use tailscope_targets::Target;

use crate::profiler::RunProfiler;
use crate::run::{trust_target, RunConfig};
use crate::stacks::{RunStacks, StacksError};
use crate::{Outcome, UsageError};

/// What to say when the launched server and the generator were given CPUs in common.
fn shared_cpus_warning(server: &[usize], generator: &[usize]) -> Option<String> {
    let shared: Vec<usize> = server
        .iter()
        .copied()
        .filter(|c| generator.contains(c))
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "the server and the generator share CPU {}: each takes CPU time from the other, and the figures measure both (give --server-cpus and --cpus apart)",
            format_list(&shared)
        )
    })
}

/// Starts the server `--server`/`--command` asked for (if any) on its CPUs and points the
/// plan at it; breaks with the outcome when a signal came before it was ready.
pub(crate) fn launch_target(
    config: &mut RunConfig,
    control: &RunControl,
) -> Result<ControlFlow<Outcome, Option<Target>>> {
    let Some(launch) = &config.launch else {
        return Ok(ControlFlow::Continue(None));
    };
    say!(
        "tailscope: starting {} on CPU {}",
        launch.spec.kind(),
        format_list(&launch.server_cpus)
    );
    let t =
        match Target::launch_unless_stopped(&launch.spec, &launch.server_cpus, &control.flag()) {
            Err(e @ tailscope_targets::Error::Interrupted { .. }) => {
                say!("tailscope: {e}: nothing was sent");
                return Ok(ControlFlow::Break(Outcome::Interrupted));
            }
            started => started
                .with_context(|| format!("the {} target could not start", launch.spec.kind()))?,
        };
    config
        .plan
        .set_url(&format!("{}{}", t.base_url(), launch.path))
        .context("the launched target's URL")?;
    trust_target(&mut config.plan, &t);
    say!(
        "tailscope: {} ready at {} (pid {}); generator on CPU {}",
        t.name(),
        t.base_url(),
        t.pid(),
        format_list(&config.plan.cpus)
    );
    if let Some(w) = shared_cpus_warning(t.server_cpus(), &config.plan.cpus) {
        say!("tailscope: warning: {w}");
    }
    Ok(ControlFlow::Continue(Some(t)))
}

/// The profiler and the stack sampler set to follow the server: here, or through the agent
/// on the server's host.
pub(crate) fn follow_server(
    config: &RunConfig,
    agent: Option<crate::agent::AgentSide>,
    target_pid: Option<u32>,
    server_cpus: &[usize],
) -> Result<(RunProfiler, RunStacks)> {
    let plan = &config.plan;
    // The agent samples the server's stacks where it runs, and says when it cannot.
    let agent_stacks = agent
        .as_ref()
        .map(|a| a.stacks_not_sampled().map(str::to_string));
    let profiler = match agent {
        // The server is on the agent's host: nothing of it is read here.
        Some(agent) => {
            say!("tailscope: {}", agent.describe());
            RunProfiler::new(None, Vec::new(), plan.cpus.clone(), !plan.warmup.is_zero())
                .through_agent(agent)
        }
        None => RunProfiler::new(
            target_pid,
            server_cpus.to_vec(),
            plan.cpus.clone(),
            !plan.warmup.is_zero(),
        )
        .watching_listeners(plan.addr),
    };
    let local_pid = target_pid.filter(|_| config.agent.is_none());
    let stacks_options = config.stacks.clone();
    let stacks = match agent_stacks {
        Some(not_sampled) => RunStacks::through_agent(stacks_options, not_sampled),
        None => RunStacks::start(stacks_options, local_pid, &plan.cpus),
    };
    let stacks = match stacks {
        Err(StacksError::Usage(e)) => return Err(UsageError(e.into()).into()),
        started => started?,
    };
    Ok((profiler, stacks))
}

/// The server as the report names it: launched here, by the agent, or given by `--pid`.
pub(crate) fn target_info(
    target: Option<&Target>,
    pid: Option<u32>,
    agent_launched: Option<tailscope_agent::client::Launched>,
) -> Option<TargetInfo> {
    match (target, pid) {
        (None, _) if agent_launched.is_some() => agent_launched.map(|l| TargetInfo {
            kind: "command".into(),
            name: l.name,
            pid: Some(l.server_pid),
            command: Some(l.command),
            server_cpus: Vec::new(),
        }),
        (Some(t), _) => Some(TargetInfo {
            kind: t.kind().to_string(),
            name: t.name().to_string(),
            pid: Some(t.pid()),
            command: Some(t.command_line().to_string()),
            server_cpus: t.server_cpus().to_vec(),
        }),
        (None, Some(pid)) => Some(TargetInfo {
            kind: "external".into(),
            // Named by what it runs (`nginx`), as a launched server is.
            name: comm(pid).unwrap_or_else(|| "external".into()),
            pid: Some(pid),
            command: None,
            server_cpus: Vec::new(),
        }),
        (None, None) => None,
    }
}

/// What to say of a `--pid` whose process tree holds no socket listening on the URL's port:
/// its CPU figures are of another process than the one answering the load. `None` when it
/// serves the port, or when that cannot be told here (nothing listens on the port in this
/// network namespace: a forward to another host or namespace).
pub(crate) fn pid_warning(pid: u32, port: u16) -> Option<String> {
    let named = |pid: u32| comm(pid).map_or(format!("pid {pid}"), |c| format!("pid {pid} ({c})"));
    match tailscope_targets::listen::pid_serves(pid, port) {
        Ok(PidServes::No { owner }) => Some(format!(
            "--pid {pid}: {} and its children hold no socket listening on port {port}{}: the server's CPU figures are of {}, not of the server answering the load (expected only of a backend behind a proxy on that port)",
            named(pid),
            owner.map_or(String::new(), |o| format!(" ({} does)", named(o))),
            named(pid)
        )),
        _ => None,
    }
}

/// What the server side left at the end of the run: the report's warnings of it, its CPUs'
/// busy time, the rules' findings (with what the stacks show) and the stacks' section.
pub(crate) struct ServerEnd {
    pub(crate) warnings: Vec<String>,
    pub(crate) cpu_busy: CpuBusy,
    pub(crate) findings: Findings,
    pub(crate) stacks: Option<StacksSection>,
    /// The stacks' part of the text summary.
    pub(crate) inside_text: String,
}

/// Ends the profiler and the stack sampler (while the target still runs: its binaries are
/// read through /proc/PID to name the frames) and gathers what they found.
pub(crate) fn server_at_end(
    profiler: RunProfiler,
    stacks: RunStacks,
    plan: &Plan,
    totals: &RunTotals,
    mut target: Option<&mut Target>,
) -> ServerEnd {
    let mut warnings = server_warnings(target.as_deref_mut(), plan);
    let cpu_busy = profiler.cpu_busy();
    let (mut findings, agent_inside) =
        profiler.finish_with_stacks(plan, totals, totals.counters.requests());
    // The tree is profiled from its root (the `sh -c` around a command's server), but named
    // by the pid that serves, as the report's `target.pid` is.
    if let (Some(t), Some(profile)) = (&target, findings.profile.target.as_mut()) {
        profile.serving(t.pid());
    }
    warnings.extend(crate::agent::warnings(&findings.profile));
    // A tree named by `--pid` (not launched, not read by an agent) that turned out not to
    // serve the load's port.
    if let (None, None, Some(t)) = (&target, &findings.profile.agent, &findings.profile.target) {
        warnings.extend(pid_warning(t.pid, plan.addr.port()));
    }
    let (inside, inside_text, stacks) = stacks.finish(&totals.timeseries, agent_inside);
    if let Some(inside) = &inside {
        findings.look_inside(inside);
    }
    ServerEnd {
        warnings,
        cpu_busy,
        findings,
        stacks,
        inside_text,
    }
}

/// What the report warns of the launched server: CPUs shared with the generator, an exit
/// during the run.
fn server_warnings(target: Option<&mut Target>, plan: &Plan) -> Vec<String> {
    let Some(t) = target else {
        return Vec::new();
    };
    let mut warnings: Vec<String> = shared_cpus_warning(t.server_cpus(), &plan.cpus)
        .into_iter()
        .collect();
    if let Some(status) = t.exited() {
        warnings.push(format!(
            "the {} server exited during the run (the launched command's {status}): what was measured after that was no server",
            t.name()
        ));
    }
    warnings
}
