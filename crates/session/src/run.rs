//! A run end to end: the target launched (or named by pid), the profiler and the stack
//! sampler following it, the generator driven, the dashboard or the progress line fed every
//! tick, and at the end the report (text, JSON, HTML, HdrHistogram log) and the thresholds.

use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use tailscope_forensics::Roles;

use crate::profiler::RunProfiler;
use crate::stacks::{RunStacks, StacksOptions};
use crate::until::UntilWatch;
use tailscope_loadgen::segment::{self, Segment};
use tailscope_loadgen::{Pace, Phase, Plan, RunControl, RunTotals, Snapshot, Stop};
use tailscope_report::document::{fmt_count, Report, TargetInfo};
use tailscope_report::threshold::Threshold;
use tailscope_report::{GeneratorClock, RunParts};
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::TickCounters;
use tailscope_targets::{Target, TargetSpec};
use tailscope_tui::app::Action;
use tailscope_tui::Feed;

use crate::journal::JournalWriter;
use crate::live::{save_so_far, start_dashboard, Progress, SharedSnapshots};
use crate::output::{emit, judge, write_csv, write_hdr_log};
use crate::server_side::{follow_server, launch_target, server_at_end, target_info};
use crate::signals::{signal_name, signalled, watch_signals};
use crate::Outcome;

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

/// Runs the load and reports. Returns how the process should exit.
///
/// The run's phases: the target launched (or named) and the agent asked, the dashboard
/// started, the profiler and the sampler set to follow the server, the load run with every
/// snapshot fed to what follows it, and the outputs written from the report.
pub fn run(mut config: RunConfig) -> Result<Outcome> {
    let control = RunControl::new();
    watch_signals(&control)?;
    let mut target = match prepare_target(&mut config, &control)? {
        ControlFlow::Continue(target) => target,
        ControlFlow::Break(outcome) => return Ok(outcome),
    };
    let agent = connect_agent(&mut config)?;
    let plan = &config.plan;
    let live = std::io::stderr().is_terminal();
    announce(plan);
    // `s` on the dashboard asks for the HTML report of the run so far.
    let (saves, save_requests) = std::sync::mpsc::channel();
    // Declared before the dashboard, so that on an early return it is dropped (and what it
    // kept written) after the dashboard is.
    let mut stderr_held = crate::stderr::Held::default();
    let dashboard = take_terminal(&config, target.as_ref(), agent.as_ref(), &control, saves)
        .inspect(|_| stderr_held.hold());
    let live = live && dashboard.is_none();
    let warmup_auto = config
        .warmup_auto
        .then(|| crate::warmup::warm_up(plan, &control, live))
        .transpose()
        .context("the load generator could not run the warm-up")?;
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
    let (profiler, stacks) = follow_server(&config, agent, target_pid, &server_cpus)?;
    // Known before the run, so that a page saved from the dashboard names the server too.
    let target_info = target_info(target.as_ref(), config.pid, agent_launched);
    // Wall-clock time for the report (merging aligns on it); the generator keeps its own
    // monotonic clock from here.
    let measure_started = SystemTime::now() + plan.warmup;
    let journal = open_journal(&config, measure_started, target_info.clone());
    let mut followers = Followers {
        plan,
        html: config.html.as_deref(),
        target_info: target_info.as_ref(),
        in_flight: plan.max_in_flight() as u64,
        profiler,
        stacks,
        until: until_watch(&config, &control),
        journal,
        journal_failure_shown: false,
        dashboard: dashboard.as_ref().map(|(feed, _)| feed),
        save_requests,
        diagnosed_at: None,
        shared: SharedSnapshots::default(),
        live,
        progress: Progress::default(),
    };
    let totals = tailscope_loadgen::run(plan, &control, |snap| followers.on_snapshot(snap));
    let Followers {
        profiler,
        stacks,
        until,
        journal,
        ..
    } = followers;
    if let Some((feed, handle)) = dashboard {
        end_dashboard(feed, handle);
        // What was said meanwhile: the terminal is back.
        stderr_held.release();
    }
    let until = until.map(UntilWatch::finish);
    let mut totals = totals.context("the load generator could not run")?;
    say_notes(&totals);
    // Met goals end the run as planned: not an interruption.
    if until.as_ref().is_some_and(|u| u.stopped_the_run) {
        totals.stopped_early = false;
    }
    if live {
        say!();
    }
    // Before the target stops: its binaries are read through /proc/PID to name the frames.
    let server = server_at_end(profiler, stacks, plan, &totals, target.as_mut());
    let report = Report::assemble(RunParts {
        plan,
        totals: &totals,
        warnings: server.warnings,
        generator: GeneratorClock {
            measure_started,
            segment: config.segment,
            start_at: config.start_at,
        },
        signal: signal_name(),
        target: target_info,
        cpu_busy: server.cpu_busy,
        findings: Some(server.findings),
        stacks: server.stacks,
        until: until.map(|u| u.outcome),
        warmup_auto,
    });
    let roles = Roles {
        server: &server_cpus,
        client: &plan.cpus,
    };
    let text = tailscope_report::findings::summary_text(&report, roles, &server.inside_text);
    if let Some(t) = target.take() {
        t.stop();
    }
    let incomplete = write_outputs(&config, &report, &text, &totals, measure_started, journal);
    Ok(outcome(&report, &config.thresholds, incomplete))
}

/// Says what the generator had to say of its own bookkeeping (a spill file of the seconds'
/// histograms that failed): once, after the run (held while a dashboard has the terminal).
pub(crate) fn say_notes(totals: &RunTotals) {
    for note in &totals.notes {
        say!("tailscope: {note}");
    }
}

/// The target launched (if any) and `--start-at` waited for; breaks with the outcome when a
/// signal came first (nothing was sent).
fn prepare_target(
    config: &mut RunConfig,
    control: &RunControl,
) -> Result<ControlFlow<Outcome, Option<Target>>> {
    let mut target = match launch_target(config, control)? {
        ControlFlow::Continue(target) => target,
        interrupted => return Ok(interrupted),
    };
    if let Some(at) = config.start_at {
        if !wait_for_start(at, control) {
            if let Some(t) = target.take() {
                t.stop();
            }
            say!("tailscope: interrupted while waiting for --start-at: nothing was sent");
            return Ok(ControlFlow::Break(Outcome::Interrupted));
        }
    }
    if let Some(seg) = config.segment {
        say!("tailscope: segment {seg}: this generator's share of -c, -n, -q and the held connections follows");
    }
    // Said before anything is sent, so that a wrong pid can be stopped at once; the report
    // says it again.
    if let (Some(pid), None, None) = (config.pid, &target, &config.agent) {
        if let Some(w) = crate::server_side::pid_warning(pid, config.plan.addr.port()) {
            say!("tailscope: warning: {w}");
        }
    }
    Ok(ControlFlow::Continue(target))
}

/// The agent that reads the server side on its host (`--agent`), asked before the dashboard
/// and the load: a refused agent stops the run with nothing sent.
fn connect_agent(config: &mut RunConfig) -> Result<Option<crate::agent::AgentSide>> {
    // Of a load split into segments, segment 1 alone reads the server through the agent
    // (one profile of the one server; `merge` keeps it in that run's sections), so that
    // every generator may be given the same command line.
    Ok(match (&config.agent, config.segment) {
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
            config.stacks.mode,
        )?),
        (None, _) => None,
    })
}

/// The line that says what is about to be sent, how, and for how long.
fn announce(plan: &Plan) {
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
}

/// The run's journal (`--journal`); one that cannot be written is said on stderr.
fn open_journal(
    config: &RunConfig,
    measure_started: SystemTime,
    target: Option<TargetInfo>,
) -> Option<JournalWriter> {
    config.journal.as_deref().map(|path| {
        let header = tailscope_report::journal::Header {
            tailscope_version: env!("CARGO_PKG_VERSION").to_string(),
            args: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            url: config.plan.url.clone(),
            measure_started_unix_ms: measure_started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            target,
            cwd: std::env::current_dir().ok(),
        };
        JournalWriter::create(path, &header)
    })
}

/// What follows the run snapshot by snapshot: the journal, `--until`'s watch, the profiler
/// and the stack sampler, then the dashboard (or the progress line of a headless run).
struct Followers<'a> {
    plan: &'a Plan,
    html: Option<&'a Path>,
    target_info: Option<&'a TargetInfo>,
    in_flight: u64,
    profiler: RunProfiler,
    stacks: RunStacks,
    until: Option<UntilWatch>,
    journal: Option<JournalWriter>,
    journal_failure_shown: bool,
    dashboard: Option<&'a Feed>,
    save_requests: std::sync::mpsc::Receiver<()>,
    /// The second the live diagnosis was last sent for.
    diagnosed_at: Option<u64>,
    shared: SharedSnapshots,
    live: bool,
    progress: Progress,
}

impl Followers<'_> {
    /// One snapshot of the run so far, handed to each follower.
    fn on_snapshot(&mut self, snap: &Snapshot) {
        if let Some(j) = self.journal.as_mut() {
            if !snap.new_second_histograms.is_empty() {
                let first_new = snap
                    .seconds_closed
                    .saturating_sub(snap.new_second_histograms.len());
                let cpu_busy = self.profiler.cpu_busy_from(first_new as u64);
                j.on_snapshot(snap, &cpu_busy, self.profiler.listen_now());
            }
            if snap.checkpoint.is_some() {
                let requests = snap.totals.requests();
                if let Some((profile, listen_queue)) =
                    self.profiler.profile_so_far(requests, self.plan.tick)
                {
                    j.on_profile(tailscope_report::journal::ProfileRecord {
                        seconds: snap.seconds_closed as u64,
                        profile,
                        listen_queue,
                    });
                }
            }
        }
        if let Some(u) = self.until.as_mut() {
            u.watch(snap);
        }
        let (cpus, counters) = self.profiler.on_snapshot(snap);
        self.stacks.on_snapshot(snap, &self.profiler.tree_pids());
        if let Some(feed) = self.dashboard {
            self.feed_dashboard(feed, snap, cpus, counters);
        } else if self.live {
            self.progress.show(snap);
        }
    }

    /// The dashboard's share of a snapshot: the figures, what the server did, the notes, the
    /// page asked for with `s`, and once a second the rules re-run on the run so far.
    fn feed_dashboard(
        &mut self,
        feed: &Feed,
        snap: &Snapshot,
        cpus: Option<Vec<CpuUsage>>,
        counters: TickCounters,
    ) {
        if !self.journal_failure_shown && self.journal.as_ref().is_some_and(JournalWriter::failed) {
            self.journal_failure_shown = true;
            let _ = feed.send(Action::Note(
                "The journal is no longer being written. Why is said at the end; the run goes on."
                    .into(),
            ));
        }
        let _ = feed.send(Action::Snapshot(self.shared.share(snap), cpus));
        let _ = feed.send(Action::Counters(counters));
        let _ = feed.send(Action::ListenQueue(self.profiler.listen_now()));
        if let Some(inside) = self.stacks.live(snap) {
            let _ = feed.send(Action::Inside(Box::new(inside)));
        }
        if self.save_requests.try_recv().is_ok() {
            save_so_far(
                self.plan,
                snap,
                self.profiler.cpu_busy(),
                self.target_info,
                self.html,
                feed,
            );
        }
        // The spikes view: the rules re-run on the run so far once a second.
        let second = snap.elapsed.as_secs();
        if self.diagnosed_at != Some(second) || snap.phase == Phase::Done {
            self.diagnosed_at = Some(second);
            let _ = feed.send(Action::Diagnosis(
                self.profiler.live_diagnosis(snap, self.in_flight),
            ));
        }
    }
}

/// The dashboard, when asked for and the terminal can be had; the journal's path is said
/// before it takes the terminal, so that a run killed under it still leaves the path on the
/// screen (a newcomer's `kill -9` left none). Until it ends, stderr is to be held.
fn take_terminal(
    config: &RunConfig,
    target: Option<&Target>,
    agent: Option<&crate::agent::AgentSide>,
    control: &RunControl,
    saves: tailscope_tui::SaveRequests,
) -> Option<(Feed, std::thread::JoinHandle<std::io::Result<()>>)> {
    if let Some(path) = &config.journal {
        say!("{}", journal_note(path));
    }
    if config.tui {
        start_dashboard(config, target, agent, control, saves)
    } else {
        None
    }
}

/// Ends the dashboard (dropping its feed).
fn end_dashboard(feed: Feed, handle: std::thread::JoinHandle<std::io::Result<()>>) {
    // Dropping the feed ends the dashboard; it gives the terminal back before returning.
    drop(feed);
    match handle.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => say!("tailscope: the dashboard failed: {e}"),
        Err(_) => say!("tailscope: the dashboard panicked (terminal restored)"),
    }
}

/// Writes every output (journal's end, text, JSON, HTML, CSV, HdrHistogram log), each
/// whatever became of the others; true when one could not be (a full disk), after saying so.
fn write_outputs(
    config: &RunConfig,
    report: &Report,
    text: &str,
    totals: &RunTotals,
    measure_started: SystemTime,
    journal: Option<JournalWriter>,
) -> bool {
    let mut incomplete = journal.is_some_and(|j| !j.finish(Some(report), Some(&totals.histograms)));
    let mut loud = |written: Result<()>| {
        if let Err(e) = written {
            say!("tailscope: {e:#}");
            incomplete = true;
        }
    };
    loud(emit(
        report,
        text,
        config.json.as_deref(),
        config.html.as_deref(),
    ));
    loud(write_csv(
        report,
        config.csv.as_deref(),
        config.csv_slowest.as_deref(),
    ));
    if let Some(path) = &config.hdr_log {
        loud(write_hdr_log(path, |file| {
            tailscope_report::document::write_hdr_log(totals, measure_started, file)
        }));
    }
    incomplete
}

/// How the process exits: a run that measured nothing fails whatever the thresholds say
/// (unless a signal cut it short, which says more); then the thresholds, the signal, an
/// output left incomplete.
fn outcome(report: &Report, thresholds: &[Threshold], incomplete: bool) -> Outcome {
    let signalled = signalled();
    let no_response = report.no_response_reason();
    if let Some(reason) = &no_response {
        say!("tailscope: {reason}");
    }
    let failed = judge(report, thresholds);
    if no_response.is_some() && !signalled {
        return Outcome::Failure;
    }
    if failed > 0 {
        return Outcome::ThresholdFailed;
    }
    if signalled {
        return Outcome::Interrupted;
    }
    if incomplete {
        return Outcome::OutputIncomplete;
    }
    // Stopped from the dashboard (q, Esc, Ctrl-C as a key) is a normal end: exit 0.
    Outcome::Success
}

/// The watch of `--until`'s goals, when there are any (the plan's duration is their cap).
fn until_watch(config: &RunConfig, control: &RunControl) -> Option<UntilWatch> {
    let Stop::Duration(cap) = config.plan.stop else {
        return None;
    };
    (!config.until.is_empty()).then(|| UntilWatch::new(config.until.clone(), cap, control))
}

/// Where the run's journal will be, said once on stderr before the run.
fn journal_note(path: &Path) -> String {
    format!(
        "tailscope: journal {} (each second as it ends; `tailscope report` rebuilds the report from it; --no-journal leaves it out)",
        path.display()
    )
}
