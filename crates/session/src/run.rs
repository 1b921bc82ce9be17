//! A run end to end: the target launched (or named by pid), the profiler and the stack
//! sampler following it, the generator driven, the dashboard or the progress line fed every
//! tick, and at the end the report (text, JSON, HTML, HdrHistogram log) and the thresholds.

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use tailscope_forensics::Roles;

use crate::profiler::RunProfiler;
use crate::stacks::{RunStacks, StacksError, StacksOptions};
use crate::until::UntilWatch;
use tailscope_loadgen::segment::{self, Segment};
use tailscope_loadgen::{Pace, Phase, Plan, RunControl, RunTotals, Snapshot, Stop};
use tailscope_report::document::{fmt_count, progress_line, Report, TargetInfo};
use tailscope_report::sections::CpuBusy;
use tailscope_report::threshold::Threshold;
use tailscope_report::{GeneratorClock, RunParts};
use tailscope_targets::cpus::format_list;
use tailscope_targets::{Target, TargetSpec};
use tailscope_tui::app::{Action, RunInfo};
use tailscope_tui::Feed;

use crate::journal::JournalWriter;
use crate::output::{emit, judge, write_csv};
use crate::signals::{signal_name, signalled, watch_signals};
use crate::{Outcome, UsageError};

/// Everything `run` needs, checked before any load starts.
pub struct RunConfig {
    /// The generator's plan.
    pub plan: Plan,
    /// Where the JSON report goes.
    pub json: Option<PathBuf>,
    /// Where to write the HTML page.
    pub html: Option<PathBuf>,
    /// Where to write the HdrHistogram interval log.
    pub hdr_log: Option<PathBuf>,
    /// Where to write the per-second series as CSV (`--csv`).
    pub csv: Option<PathBuf>,
    /// Where to write the slowest requests as CSV (`--csv-slowest`).
    pub csv_slowest: Option<PathBuf>,
    /// CI gates.
    pub thresholds: Vec<Threshold>,
    /// A server to launch on these CPUs, loaded at `path`.
    pub launch: Option<Launch>,
    /// The process id of an external server (`--pid`).
    pub pid: Option<u32>,
    /// Show the live dashboard (stdout is a terminal and `--no-tui` was not given).
    pub tui: bool,
    /// This generator's share of a load spread over several (`--segment`).
    pub segment: Option<Segment>,
    /// The wall-clock time to start at (`--start-at`).
    pub start_at: Option<SystemTime>,
    /// The server's stacks: whether to sample them, and the flame graphs to write.
    pub stacks: StacksOptions,
    /// `--agent`: the server side is read by a `tailscope agent` on the server's host.
    pub agent: Option<tailscope_agent::client::AgentOptions>,
    /// `--until`: stop once these percentiles' intervals are narrow enough (the plan's
    /// duration is then `--max-duration`, the cap).
    pub until: Vec<crate::until::Goal>,
    /// `--warmup auto`: warm up until the per-second figures settle (the plan's own warm-up
    /// is then 0).
    pub warmup_auto: bool,
    /// Where the run's journal goes (`--journal`, on by default); none with `--no-journal`.
    pub journal: Option<PathBuf>,
}

/// A server tailscope starts itself.
pub struct Launch {
    /// What to start.
    pub spec: TargetSpec,
    /// Its CPUs.
    pub server_cpus: Vec<usize>,
    /// The path to load.
    pub path: String,
}

/// A target served over TLS by tailscope (`--tls`) is trusted through the CA it made,
/// unless `--insecure` or `--cacert` said otherwise.
pub fn trust_target(plan: &mut Plan, target: &Target) {
    if let (Some(tls), Some(ca)) = (plan.tls.as_mut(), target.tls_ca()) {
        if !tls.insecure && tls.cacert.is_none() {
            tls.cacert = Some(ca.to_path_buf());
        }
    }
}

/// Waits for `--start-at`; false when Ctrl-C (or SIGTERM) came first.
fn wait_for_start(at: SystemTime, control: &RunControl) -> bool {
    match at.duration_since(SystemTime::now()) {
        Ok(left) => say!(
            "tailscope: waiting {:.1} s for --start-at {}",
            left.as_secs_f64(),
            humantime::format_rfc3339_millis(at)
        ),
        Err(late) => say!(
            "tailscope: --start-at {} passed {:.1} s ago: starting now (the report records when)",
            humantime::format_rfc3339_millis(at),
            late.duration().as_secs_f64()
        ),
    }
    segment::wait_until(at, control)
}

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

/// Runs the load and reports. Returns how the process should exit.
pub fn run(mut config: RunConfig) -> Result<Outcome> {
    let stacks_options = config.stacks.clone();
    let control = RunControl::new();
    watch_signals(&control)?;
    let mut target = match &config.launch {
        Some(launch) => {
            say!(
                "tailscope: starting {} on CPU {}",
                launch.spec.kind(),
                format_list(&launch.server_cpus)
            );
            let t = match Target::launch_unless_stopped(
                &launch.spec,
                &launch.server_cpus,
                &control.flag(),
            ) {
                Err(e @ tailscope_targets::Error::Interrupted { .. }) => {
                    say!("tailscope: {e}: nothing was sent");
                    return Ok(Outcome::Interrupted);
                }
                started => started.with_context(|| {
                    format!("the {} target could not start", launch.spec.kind())
                })?,
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
            Some(t)
        }
        None => None,
    };
    if let Some(at) = config.start_at {
        if !wait_for_start(at, &control) {
            if let Some(t) = target.take() {
                t.stop();
            }
            say!("tailscope: interrupted while waiting for --start-at: nothing was sent");
            return Ok(Outcome::Interrupted);
        }
    }
    if let Some(seg) = config.segment {
        say!("tailscope: segment {seg}: this generator's share of -c, -n, -q and the held connections follows");
    }
    // Before the dashboard and the load: a refused agent stops the run with nothing sent.
    // Of a load split into segments, segment 1 alone reads the server through the agent
    // (one profile of the one server; `merge` keeps it in that run's sections), so that
    // every generator may be given the same command line.
    let agent = match (&config.agent, config.segment) {
        (Some(options), Some(seg)) if seg.index != 1 => {
            say!(
                "tailscope: segment {seg}: the server side is read through the agent at {} by segment 1/{} alone: this run does not connect to it",
                options.address,
                seg.count
            );
            None
        }
        (Some(options), _) => Some(crate::agent::start_for(
            options,
            config.pid,
            &mut config.plan,
            stacks_options.mode,
        )?),
        (None, _) => None,
    };
    let plan = &config.plan;
    let live = std::io::stderr().is_terminal();
    say!(
        "tailscope: {} {} — {} connections, {} generator thread(s), {}{}",
        plan.what_is_sent(),
        plan.url_shown(),
        fmt_count(plan.connections as u64),
        plan.effective_threads(),
        match plan.pace {
            Pace::Max => "closed loop".to_string(),
            Pace::Rate(r) if plan.stages.is_empty() => format!("open loop at {r} req/s"),
            Pace::Rate(r) => format!("open loop in {} stages up to {r} req/s", plan.stages.len()),
        },
        match plan.stop {
            Stop::Duration(d) => format!(", {}", humantime::format_duration(d)),
            Stop::Requests(n) => format!(", {} requests", fmt_count(n)),
        }
    );
    // `s` on the dashboard asks for the HTML report of the run so far.
    let (saves, save_requests) = std::sync::mpsc::channel();
    // Declared before the dashboard, so that on an early return it is dropped (and what it
    // kept written) after the dashboard is.
    let mut stderr_held = crate::stderr::Held::default();
    let dashboard = if config.tui {
        start_dashboard(&config, target.as_ref(), agent.as_ref(), &control, saves)
    } else {
        None
    };
    if dashboard.is_some() {
        // Until the dashboard gives the terminal back, stderr is kept (`crate::stderr`).
        stderr_held.hold();
    }
    let live = live && dashboard.is_none();
    let warmup_auto = if config.warmup_auto {
        Some(
            crate::warmup::warm_up(plan, &control, live)
                .context("the load generator could not run the warm-up")?,
        )
    } else {
        None
    };
    let mut progress = Progress::default();
    let server_cpus = target
        .as_ref()
        .map(|t| t.server_cpus().to_vec())
        .unwrap_or_default();
    let target_pid = target.as_ref().map(|t| t.root_pid()).or(config.pid);
    // The server the agent launched: named in the report as a launched one is.
    let agent_launched = agent.as_ref().and_then(|a| a.launched().cloned());
    if let Some(l) = &agent_launched {
        say!(
            "tailscope: the agent launched {} (pid {} there) at {}",
            l.name,
            l.server_pid,
            plan.url_shown()
        );
    }
    // The agent samples the server's stacks where it runs, and says when it cannot.
    let agent_stacks = agent
        .as_ref()
        .map(|a| a.stacks_not_sampled().map(str::to_string));
    let mut profiler = match agent {
        // The server is on the agent's host: nothing of it is read here.
        Some(agent) => {
            say!("tailscope: {}", agent.describe());
            RunProfiler::new(None, Vec::new(), plan.cpus.clone(), !plan.warmup.is_zero())
                .through_agent(agent)
        }
        None => RunProfiler::new(
            target_pid,
            server_cpus.clone(),
            plan.cpus.clone(),
            !plan.warmup.is_zero(),
        )
        .watching_listeners(plan.addr),
    };
    let local_pid = target_pid.filter(|_| config.agent.is_none());
    let stacks = match agent_stacks {
        Some(not_sampled) => RunStacks::through_agent(stacks_options, not_sampled),
        None => RunStacks::start(stacks_options, local_pid, &plan.cpus),
    };
    let mut stacks = match stacks {
        Err(StacksError::Usage(e)) => return Err(UsageError(e.into()).into()),
        started => started?,
    };
    let in_flight = plan.max_in_flight() as u64;
    // Known before the run, so that a page saved from the dashboard names the server too.
    let target_info = match (&target, config.pid) {
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
            name: "external".into(),
            pid: Some(pid),
            command: None,
            server_cpus: Vec::new(),
        }),
        (None, None) => None,
    };
    let mut diagnosed_at = None;
    // Wall-clock time for the report (merging aligns on it); the generator keeps its own
    // monotonic clock from here.
    let measure_started = SystemTime::now() + plan.warmup;
    let mut shared = SharedSnapshots::default();
    let mut until = until_watch(&config, &control);
    let mut journal = config.journal.as_deref().map(|path| {
        let header = tailscope_report::journal::Header {
            tailscope_version: env!("CARGO_PKG_VERSION").to_string(),
            args: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            url: plan.url.clone(),
            measure_started_unix_ms: measure_started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            target: target_info.clone(),
            cwd: std::env::current_dir().ok(),
        };
        let j = JournalWriter::create(path, &header);
        if !j.failed() {
            say!(
                "tailscope: journal {} (each second as it ends; `tailscope report` rebuilds the report from it; --no-journal leaves it out)",
                path.display()
            );
        }
        j
    });
    let mut journal_failure_shown = false;
    let totals = tailscope_loadgen::run(plan, &control, |snap| {
        if let Some(j) = journal.as_mut() {
            if !snap.new_second_histograms.is_empty() {
                j.on_snapshot(snap, &profiler.cpu_busy(), profiler.listen_now());
            }
            if snap.checkpoint.is_some() {
                let requests = snap.totals.requests();
                if let Some((profile, listen_queue)) = profiler.profile_so_far(requests, plan.tick)
                {
                    j.on_profile(tailscope_report::journal::ProfileRecord {
                        seconds: snap.seconds_closed as u64,
                        profile,
                        listen_queue,
                    });
                }
            }
        }
        if let Some(u) = until.as_mut() {
            u.watch(snap);
        }
        let (cpus, counters) = profiler.on_snapshot(snap);
        stacks.on_snapshot(snap, &profiler.tree_pids());
        if let Some((feed, _)) = &dashboard {
            if !journal_failure_shown && journal.as_ref().is_some_and(JournalWriter::failed) {
                journal_failure_shown = true;
                let _ = feed.send(Action::Note(
                    "The journal is no longer being written. Why is said at the end; the run goes on.".into(),
                ));
            }
            let _ = feed.send(Action::Snapshot(shared.share(snap), cpus));
            let _ = feed.send(Action::Counters(counters));
            let _ = feed.send(Action::ListenQueue(profiler.listen_now()));
            if let Some(inside) = stacks.live(snap) {
                let _ = feed.send(Action::Inside(Box::new(inside)));
            }
            if save_requests.try_recv().is_ok() {
                save_so_far(
                    plan,
                    snap,
                    profiler.cpu_busy(),
                    target_info.as_ref(),
                    config.html.as_deref(),
                    feed,
                );
            }
            // The spikes view: the rules re-run on the run so far once a second.
            let second = snap.elapsed.as_secs();
            if diagnosed_at != Some(second) || snap.phase == tailscope_loadgen::Phase::Done {
                diagnosed_at = Some(second);
                let _ = feed.send(Action::Diagnosis(profiler.live_diagnosis(snap, in_flight)));
            }
        } else if live {
            progress.show(snap);
        }
    });
    if let Some((feed, handle)) = dashboard {
        // Dropping the feed ends the dashboard; it gives the terminal back before returning.
        drop(feed);
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => say!("tailscope: the dashboard failed: {e}"),
            Err(_) => say!("tailscope: the dashboard panicked (terminal restored)"),
        }
        // What was said meanwhile: the terminal is back.
        stderr_held.release();
    }
    let until = until.map(UntilWatch::finish);
    let mut totals = totals.context("the load generator could not run")?;
    // Met goals end the run as planned: not an interruption.
    if until.as_ref().is_some_and(|u| u.stopped_the_run) {
        totals.stopped_early = false;
    }
    if live {
        say!();
    }
    let mut warnings: Vec<String> = target
        .as_ref()
        .and_then(|t| shared_cpus_warning(t.server_cpus(), &plan.cpus))
        .into_iter()
        .collect();
    if let Some(t) = target.as_mut() {
        if let Some(status) = t.exited() {
            warnings.push(format!(
                "the {} server exited during the run (the launched command's {status}): what was measured after that was no server",
                t.name()
            ));
        }
    }
    let cpu_busy = profiler.cpu_busy();
    let (mut findings, agent_inside) =
        profiler.finish_with_stacks(plan, &totals, totals.counters.requests());
    warnings.extend(crate::agent::warnings(&findings.profile));
    // The tree is profiled from its root (the `sh -c` around a command's server), but named
    // by the pid that serves, as the report's `target.pid` is.
    if let (Some(t), Some(profile)) = (&target, findings.profile.target.as_mut()) {
        profile.serving(t.pid());
    }
    // Before the target stops: its binaries are read through /proc/PID to name the frames.
    let (inside, inside_text, stacks_section) = stacks.finish(&totals.timeseries, agent_inside);
    if let Some(inside) = &inside {
        findings.look_inside(inside);
    }
    let report = Report::assemble(RunParts {
        plan,
        totals: &totals,
        warnings,
        generator: GeneratorClock {
            measure_started,
            segment: config.segment,
            start_at: config.start_at,
        },
        signal: signal_name(),
        target: target_info,
        cpu_busy,
        findings: Some(findings),
        stacks: stacks_section,
        until: until.map(|u| u.outcome),
        warmup_auto,
    });
    let roles = Roles {
        server: &server_cpus,
        client: &plan.cpus,
    };
    let sections = report
        .sections
        .findings
        .as_ref()
        .map_or_else(String::new, |f| {
            tailscope_report::findings::findings_text(f, roles, &report)
        });
    if let Some(t) = target.take() {
        t.stop();
    }
    let text = report.to_text() + &sections + &inside_text;
    // Each output is written whatever became of the others: one that cannot be (a full disk)
    // is said and makes the exit code say the output is incomplete.
    let mut incomplete =
        journal.is_some_and(|j| !j.finish(Some(&report), Some(&totals.histograms)));
    let mut loud = |written: Result<()>| {
        if let Err(e) = written {
            say!("tailscope: {e:#}");
            incomplete = true;
        }
    };
    loud(emit(
        &report,
        &text,
        config.json.as_deref(),
        config.html.as_deref(),
    ));
    loud(write_csv(
        &report,
        config.csv.as_deref(),
        config.csv_slowest.as_deref(),
    ));
    if let Some(path) = &config.hdr_log {
        loud(write_hdr_log(&totals, measure_started, path));
    }
    let signalled = signalled();
    let no_response = report.no_response_reason();
    if let Some(reason) = &no_response {
        say!("tailscope: {reason}");
    }
    let failed = judge(&report, &config.thresholds);
    // A run that measured nothing is a failure whatever the thresholds say (unless it was
    // cut short by a signal, which says more).
    if no_response.is_some() && !signalled {
        return Ok(Outcome::Failure);
    }
    if failed > 0 {
        return Ok(Outcome::ThresholdFailed);
    }
    if signalled {
        return Ok(Outcome::Interrupted);
    }
    if incomplete {
        return Ok(Outcome::OutputIncomplete);
    }
    // Stopped from the dashboard (q, Esc, Ctrl-C as a key) is a normal end: exit 0.
    Ok(Outcome::Success)
}

/// Writes the HdrHistogram interval log (`--hdr-log`).
fn write_hdr_log(totals: &RunTotals, started: SystemTime, path: &Path) -> Result<()> {
    let what = || format!("cannot write the HdrHistogram log to {}", path.display());
    let mut file = std::fs::File::create(path).with_context(what)?;
    tailscope_report::document::write_hdr_log(totals, started, &mut file).with_context(what)?;
    file.flush().with_context(what)?;
    say!("tailscope: wrote {}", path.display());
    Ok(())
}

/// The watch of `--until`'s goals, when there are any (the plan's duration is their cap).
fn until_watch(config: &RunConfig, control: &RunControl) -> Option<UntilWatch> {
    let Stop::Duration(cap) = config.plan.stop else {
        return None;
    };
    (!config.until.is_empty()).then(|| UntilWatch::new(config.until.clone(), cap, control))
}

/// Starts the dashboard for this run; `None` (after saying why) if the terminal cannot be used,
/// and the run goes on headless.
fn start_dashboard(
    config: &RunConfig,
    target: Option<&Target>,
    agent: Option<&crate::agent::AgentSide>,
    control: &RunControl,
    saves: tailscope_tui::SaveRequests,
) -> Option<(Feed, std::thread::JoinHandle<std::io::Result<()>>)> {
    let mut info = RunInfo::new(&config.plan, target);
    if let Some(agent) = agent {
        let launched = agent.launched().map(|l| (l.name.as_str(), l.server_pid));
        info = info.through_agent(agent.host(), launched);
    }
    match tailscope_tui::spawn(info, control.clone(), saves) {
        Ok(d) => Some(d),
        Err(e) => {
            say!("tailscope: cannot start the dashboard ({e}); running headless");
            None
        }
    }
}

/// The snapshots the dashboard is handed, each reused once the dashboard has let go of it
/// (it keeps the one it shows; others may wait in its channel): a copy into a used buffer
/// allocates nothing, a fresh one a histogram of some 100 KiB ten times a second.
#[derive(Default)]
struct SharedSnapshots(Vec<Arc<Snapshot>>);

/// How many shared snapshots are kept for reuse.
const SHARED_SNAPSHOTS: usize = 4;

impl SharedSnapshots {
    /// `snap`, in a buffer nobody else holds.
    fn share(&mut self, snap: &Snapshot) -> Arc<Snapshot> {
        for kept in &mut self.0 {
            if let Some(free) = Arc::get_mut(kept) {
                free.clone_from(snap);
                return kept.clone();
            }
        }
        let fresh = Arc::new(snap.clone());
        if self.0.len() < SHARED_SNAPSHOTS {
            self.0.push(fresh.clone());
        }
        fresh
    }
}

/// One line on stderr, rewritten in place, while a headless run goes on.
#[derive(Default)]
struct Progress {
    last_shown: Option<Duration>,
}

impl Progress {
    fn show(&mut self, snap: &Snapshot) {
        let shown_recently = self
            .last_shown
            .is_some_and(|t| snap.elapsed < t + Duration::from_millis(500));
        if shown_recently && snap.phase != Phase::Done {
            return;
        }
        self.last_shown = Some(snap.elapsed);
        let line = progress_line(snap);
        say_part!("\r\x1b[2K{line}");
    }
}

/// Where the page of the run so far goes: beside the `--html` page when there is one
/// (`report-at-12s.html`), otherwise `tailscope-at-12s.html` in the working directory.
fn so_far_path(html: Option<&Path>, snap: &Snapshot) -> PathBuf {
    let at = format!("at-{}s.html", snap.elapsed.as_secs());
    match html {
        Some(p) => {
            let stem = p
                .file_stem()
                .map_or("tailscope".into(), |s| s.to_string_lossy());
            p.with_file_name(format!("{stem}-{at}"))
        }
        None => PathBuf::from(format!("tailscope-{at}")),
    }
}

/// Saves the HTML page of the run so far (the dashboard's `s`) on a thread of its own, so the
/// run's snapshots are not held up by the drawing, and tells the dashboard where it went.
fn save_so_far(
    plan: &Plan,
    snap: &Snapshot,
    cpu_busy: CpuBusy,
    target: Option<&TargetInfo>,
    html: Option<&Path>,
    feed: &Feed,
) {
    let path = so_far_path(html, snap);
    let (plan, snap, target, to_dashboard) =
        (plan.clone(), snap.clone(), target.cloned(), feed.clone());
    let saving = std::thread::Builder::new()
        .name("tailscope-save".into())
        .spawn(move || {
            let mut report = Report::new(&plan, &RunTotals::so_far(&snap));
            report.target = target;
            cpu_busy.fill(&mut report.timeseries);
            report.warnings.insert(
                0,
                format!(
                    "Saved from the dashboard {:.1} s into the run while it went on: connect times and the uncorrected latency are not in this page, the time series holds the last two minutes, and the profile (but for per-CPU busy) and the diagnosis come at the end.",
                    snap.elapsed.as_secs_f64()
                ),
            );
            let note = match std::fs::write(&path, tailscope_report::run_page_so_far(&report)) {
                Ok(()) => format!("saved {}", path.display()),
                Err(e) => format!("cannot save {}: {e}", path.display()),
            };
            let _ = to_dashboard.send(Action::Note(note));
        });
    if let Err(e) = saving {
        let _ = feed.send(Action::Note(format!("cannot save the report: {e}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_loadgen::aggregate::Aggregator;

    #[test]
    fn the_dashboard_s_snapshots_are_reused_once_it_lets_go() {
        let agg = Aggregator::new(1, Duration::from_secs(60), Duration::from_millis(100), 3);
        let mut snap = agg.new_snapshot();
        let mut shared = SharedSnapshots::default();
        let at = |s| {
            move |snap: &mut Snapshot| {
                snap.elapsed = Duration::from_secs(s);
                snap.histogram.record(s * 1_000).unwrap();
            }
        };
        at(1)(&mut snap);
        let first = shared.share(&snap);
        at(2)(&mut snap);
        // The dashboard still holds the first: the second goes elsewhere.
        let second = shared.share(&snap);
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!((first.histogram.len(), second.histogram.len()), (1, 2));
        let first_buffer = Arc::as_ptr(&first);
        drop(first);
        at(3)(&mut snap);
        let third = shared.share(&snap);
        assert_eq!(
            Arc::as_ptr(&third),
            first_buffer,
            "the buffer let go of is reused"
        );
        assert_eq!(third.elapsed, Duration::from_secs(3));
        assert_eq!(
            third.histogram.len(),
            3,
            "with the run so far, not the old copy"
        );
        assert_eq!(
            second.elapsed,
            Duration::from_secs(2),
            "one still held is untouched"
        );
    }
}
