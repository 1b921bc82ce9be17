//! `tailscope run`: flags → a validated `RunConfig` → the generator → report and exit code.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use tailscope_loadgen::report::{fmt_count, fmt_rate, fmt_us, Report, TargetInfo};
use tailscope_loadgen::threshold::Threshold;
use tailscope_loadgen::{Pace, Phase, Plan, RunControl, Snapshot, Stop};
use tailscope_targets::cpus::{self, format_list};
use tailscope_targets::{Target, TargetSpec};
use tailscope_tui::app::{Action, RunInfo};
use tailscope_tui::Feed;

use crate::args::RunArgs;
use crate::exit::{Outcome, UsageError};
use crate::process::{print_stdout, signal_name, watch_signals, SIGNALLED};
use crate::profile::RunProfiler;

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
    /// CI gates.
    pub thresholds: Vec<Threshold>,
    /// A server to launch on these CPUs, loaded at `path`.
    pub launch: Option<Launch>,
    /// The process id of an external server (`--pid`).
    pub pid: Option<u32>,
    /// Show the live dashboard (stdout is a terminal and `--no-tui` was not given).
    pub tui: bool,
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

impl RunConfig {
    /// Validates the flags; every problem is a [`UsageError`] (exit code 2).
    pub fn from_args(args: RunArgs) -> Result<RunConfig> {
        let usage = |e: String| anyhow::Error::new(UsageError(e));
        let target = args.target;
        let load = args.load;
        let (url, launch) = match (args.url, target.target) {
            (Some(url), _) => (url, None),
            (None, Some(kind)) => {
                let spec = TargetSpec::parse(&kind).map_err(|e| usage(e.to_string()))?;
                // embedded and nginx serve the benchmark's /plaintext; a command: server is
                // anyone's, and `/` is the one path it surely has.
                let path = target.path.unwrap_or_else(|| {
                    match spec {
                        TargetSpec::Command { .. } => "/",
                        _ => "/plaintext",
                    }
                    .to_string()
                });
                if !path.starts_with('/') {
                    return Err(usage(format!("--path {path:?} must start with '/'")));
                }
                let available = cpus::available();
                let (default_server, default_client) = cpus::default_split(&available);
                let server_cpus = target.server_cpus.map_or(default_server, |c| c.0);
                if let Some(&cpu) = server_cpus.iter().find(|c| !available.contains(c)) {
                    return Err(usage(format!(
                        "CPU {cpu} is not available to this process (available: {}) (--server-cpus)",
                        format_list(&available)
                    )));
                }
                let client_default = match available.iter().copied().filter(|c| !server_cpus.contains(c)).collect::<Vec<_>>() {
                    rest if rest.is_empty() => default_client,
                    rest => rest,
                };
                let client = load.cpus.as_ref().map_or(client_default, |c| c.0.clone());
                // The port is not known until the server is up; the URL is set then.
                let placeholder = format!("http://127.0.0.1:1{path}");
                let launch = Launch {
                    spec,
                    server_cpus,
                    path,
                };
                let mut cfg_cpus = client;
                cfg_cpus.dedup();
                (placeholder, Some((launch, cfg_cpus)))
            }
            (None, None) => {
                return Err(usage(
                    "give a URL to load (tailscope run http://127.0.0.1:8080/), or --target embedded|nginx|'command:CMD {port}' to launch a server".into(),
                ))
            }
        };
        let mut plan = Plan::new(&url).map_err(|e| usage(e.to_string()))?;
        plan.connections = load.connections;
        if let Some(cpus) = load.cpus {
            plan.cpus = cpus.0;
        }
        let launch = launch.map(|(launch, client_cpus)| {
            plan.cpus = client_cpus;
            launch
        });
        match load.threads {
            Some(t) => plan.threads = t,
            None if launch.is_some() => plan.threads = plan.cpus.len().max(1),
            None => {}
        }
        if let Some(pid) = target.pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(usage(format!("no process with pid {pid} (--pid)")));
            }
        }
        plan.stop = match (load.requests, load.duration) {
            (Some(_), Some(_)) => {
                return Err(usage(
                    "give -n (requests) or -z (duration), not both".into(),
                ))
            }
            (Some(n), None) => Stop::Requests(n),
            (None, Some(d)) => Stop::Duration(d),
            (None, None) => Stop::Duration(Duration::from_secs(10)),
        };
        if let Some(r) = load.rate {
            plan.pace = Pace::Rate(r);
        }
        plan.pipeline = load.pipeline;
        plan.keepalive = !load.no_keepalive;
        plan.warmup = load.warmup.unwrap_or_default();
        plan.timeout = load.timeout;
        plan.connect_timeout = load.connect_timeout;
        plan.grace = plan.timeout.min(Duration::from_secs(1));
        let req = args.request;
        plan.method = req.method.to_ascii_uppercase();
        for h in &req.headers {
            let (k, v) = h
                .split_once(':')
                .ok_or_else(|| usage(format!("header {h:?} has no ':': write -H 'Name: value'")))?;
            plan.headers
                .push((k.trim().to_string(), v.trim().to_string()));
        }
        if let Some(body) = req.body {
            plan.body = body.into_bytes();
        }
        if let Some(path) = req.body_file {
            plan.body = std::fs::read(&path).map_err(|e| {
                usage(format!(
                    "cannot read body file {}: {e} (-D)",
                    path.display()
                ))
            })?;
        }
        plan.validate().map_err(|e| usage(e.to_string()))?;
        if let Some(path) = &args.output.json {
            check_writable(path, "JSON report", "--json").map_err(usage)?;
        }
        if let Some(path) = &args.output.html {
            if path.as_os_str() == "-" {
                return Err(usage(
                    "--html takes a file path, not '-': the page is a file to open in a browser"
                        .into(),
                ));
            }
            check_writable(path, "HTML report", "--html").map_err(usage)?;
        }
        if let Some(path) = &args.output.flamegraph {
            check_writable(path, "flame graph", "--flamegraph").map_err(usage)?;
        }
        if let Some(path) = &args.output.flamegraph_slow {
            check_writable(path, "flame graph", "--flamegraph-slow").map_err(usage)?;
        }
        if let Some(path) = &args.output.hdr_log {
            check_writable(path, "HdrHistogram log", "--hdr-log").map_err(usage)?;
        }
        let thresholds = args
            .output
            .fail_if
            .iter()
            .map(|e| Threshold::parse(e).map_err(|e| usage(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        Ok(RunConfig {
            plan,
            json: args.output.json,
            html: args.output.html,
            hdr_log: args.output.hdr_log,
            thresholds,
            launch,
            pid: target.pid,
            tui: !args.output.no_tui && std::io::stdout().is_terminal(),
        })
    }
}

/// Checks that a report (`what`, written for `flag`) can be written to `path` before the run,
/// so a long run does not end with its report lost. `-` (stdout) always can. A file that did
/// not exist is created and removed again.
fn check_writable(path: &std::path::Path, what: &str, flag: &str) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot write the {what} to {}: {e}; pick a writable path ({flag})",
            path.display()
        )),
    }
}

/// File descriptors a run needs besides one per connection: stdio, each generator thread's
/// runtime (epoll, eventfd, timers), the profiler's perf counters (several per CPU) and
/// /proc files, the signal pipe, a launched server's pipes.
fn fd_overhead(threads: usize) -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    64 + 8 * threads as u64 + 16 * cpus
}

/// Raises RLIMIT_NOFILE's soft limit to the hard limit, then checks that `-c` fits. A run that
/// does not fit would spend itself on EMFILE; it is refused (exit 2) before anything starts,
/// naming the limit and how to raise it.
fn fit_open_files(plan: &Plan) -> Result<(), UsageError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        // Unreadable: the run goes on and EMFILE, if it comes, is counted by its own kind.
        return Ok(());
    };
    let mut limit = soft;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        limit = hard;
    }
    let need = plan.connections as u64 + fd_overhead(plan.effective_threads());
    if need <= limit {
        return Ok(());
    }
    let fits = limit.saturating_sub(fd_overhead(plan.effective_threads()));
    Err(UsageError(format!(
        "-c {} needs about {} open files, but this process may open only {} (RLIMIT_NOFILE; hard limit {}): \
         lower -c to {} or less, or raise the limit first (`ulimit -n {need}`, as root or where the hard limit allows; LimitNOFILE= for a systemd service)",
        plan.connections,
        fmt_count(need),
        fmt_count(limit),
        fmt_count(hard),
        fits
    )))
}

/// Runs the load and reports. Returns how the process should exit.
pub fn run(args: RunArgs) -> Result<Outcome> {
    let stacks_options = crate::stacks::StacksOptions {
        mode: args.output.stacks,
        flamegraph: args.output.flamegraph.clone(),
        flamegraph_slow: args.output.flamegraph_slow.clone(),
    };
    let mut config = RunConfig::from_args(args)?;
    fit_open_files(&config.plan)?;
    let control = RunControl::new();
    watch_signals(&control)?;
    let mut target = match &config.launch {
        Some(launch) => {
            say!(
                "tailscope: starting {} on CPU {}",
                launch.spec.kind(),
                format_list(&launch.server_cpus)
            );
            let t = Target::launch(&launch.spec, &launch.server_cpus)
                .with_context(|| format!("the {} target could not start", launch.spec.kind()))?;
            config
                .plan
                .set_url(&format!("{}{}", t.base_url(), launch.path))
                .context("the launched target's URL")?;
            say!(
                "tailscope: {} ready at {} (pid {}); generator on CPU {}",
                t.name(),
                t.base_url(),
                t.pid(),
                format_list(&config.plan.cpus)
            );
            Some(t)
        }
        None => None,
    };
    let plan = &config.plan;
    let json_to_stdout = config.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let live = std::io::stderr().is_terminal();
    say!(
        "tailscope: {} {} — {} connections, {} generator thread(s), {}{}",
        plan.method,
        plan.url,
        plan.connections,
        plan.effective_threads(),
        match plan.pace {
            Pace::Max => "closed loop".to_string(),
            Pace::Rate(r) => format!("open loop at {r} req/s"),
        },
        match plan.stop {
            Stop::Duration(d) => format!(", {}", humantime::format_duration(d)),
            Stop::Requests(n) => format!(", {n} requests"),
        }
    );
    let dashboard = if config.tui {
        start_dashboard(&config, target.as_ref(), &control)
    } else {
        None
    };
    let live = live && dashboard.is_none();
    let mut progress = Progress::default();
    let server_cpus = target
        .as_ref()
        .map(|t| t.server_cpus().to_vec())
        .unwrap_or_default();
    let target_pid = target.as_ref().map(|t| t.pid()).or(config.pid);
    let mut profiler = RunProfiler::new(
        target_pid,
        server_cpus,
        plan.cpus.clone(),
        !plan.warmup.is_zero(),
    )
    .watching_listeners(plan.addr);
    let mut stacks = crate::stacks::RunStacks::start(stacks_options, target_pid, &plan.cpus)?;
    let in_flight = (plan.connections * plan.pipeline) as u64;
    let mut diagnosed_at = None;
    let totals = tailscope_loadgen::run(plan, &control, |snap| {
        let (cpus, counters) = profiler.on_snapshot(snap);
        stacks.on_snapshot(snap, &profiler.tree_pids());
        if let Some((feed, _)) = &dashboard {
            let _ = feed.send(Action::Snapshot(Box::new(snap.clone()), cpus));
            let _ = feed.send(Action::Counters(counters));
            let _ = feed.send(Action::ListenQueue(profiler.listen_now()));
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
    }
    let totals = totals.context("the load generator could not run")?;
    if live {
        say!();
    }
    let mut report = Report::new(plan, &totals);
    if report.interrupted {
        report.signal = signal_name();
    }
    report.target = match (&mut target, config.pid) {
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
    let server_exited = target.as_mut().and_then(|t| t.exited());
    let sections = profiler.finish(plan, &totals, &mut report);
    // Before the target stops: its binaries are read through /proc/PID to name the frames.
    let inside = stacks.finish(&mut report);
    if let Some(t) = target.take() {
        if let Some(status) = server_exited {
            say!(
                "tailscope: the {} server exited during the run ({status})",
                t.name()
            );
        }
        t.stop();
    }
    let text = report.to_text() + &sections + &inside;
    if json_to_stdout {
        say_part!("{text}");
        print_stdout(&report.to_json())?;
    } else {
        print_stdout(&text)?;
        if let Some(path) = &config.json {
            std::fs::write(path, report.to_json() + "\n")
                .with_context(|| format!("cannot write the JSON report to {}", path.display()))?;
        }
    }
    if let Some(path) = &config.html {
        crate::report::write_html(&report, path)?;
    }
    if let Some(path) = &config.hdr_log {
        // Measurement began the load window and its grace period ago (to the clock's
        // resolution: the generator keeps monotonic time, the log wants wall-clock time).
        let started = std::time::SystemTime::now() - (totals.duration + totals.grace);
        let mut file = std::fs::File::create(path)
            .with_context(|| format!("cannot write the HdrHistogram log to {}", path.display()))?;
        tailscope_loadgen::report::write_hdr_log(&totals, started, &mut file)
            .with_context(|| format!("cannot write the HdrHistogram log to {}", path.display()))?;
    }
    let signalled = SIGNALLED.load(std::sync::atomic::Ordering::SeqCst);
    let no_response = report.no_response_reason();
    if let Some(reason) = &no_response {
        say!("tailscope: {reason}");
    }
    let mut failed = 0;
    for t in &config.thresholds {
        let verdict = t.check(&report);
        if !verdict.passed {
            failed += 1;
        }
        say!("{verdict}");
    }
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
    // Stopped from the dashboard (q, Esc, Ctrl-C as a key) is a normal end: exit 0.
    Ok(Outcome::Success)
}

/// Starts the dashboard for this run; `None` (after saying why) if the terminal cannot be used,
/// and the run goes on headless.
fn start_dashboard(
    config: &RunConfig,
    target: Option<&Target>,
    control: &RunControl,
) -> Option<(Feed, std::thread::JoinHandle<std::io::Result<()>>)> {
    let plan = &config.plan;
    let info = RunInfo {
        target: format!("{} {}", plan.method, plan.url),
        server: target.map(|t| format!("{} (pid {})", t.name(), t.pid())),
        rate: match plan.pace {
            Pace::Rate(r) => Some(r),
            Pace::Max => None,
        },
        pipeline: plan.pipeline,
        connections: plan.connections,
        threads: plan.effective_threads(),
        duration: match plan.stop {
            Stop::Duration(d) => Some(d),
            Stop::Requests(_) => None,
        },
        requests: match plan.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration(_) => None,
        },
        server_cpus: target.map(|t| t.server_cpus().to_vec()).unwrap_or_default(),
        client_cpus: plan.cpus.clone(),
    };
    match tailscope_tui::spawn(info, control.clone()) {
        Ok(d) => Some(d),
        Err(e) => {
            say!("tailscope: cannot start the dashboard ({e}); running headless");
            None
        }
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
        // The last finished second, not a tick ×10: a tick may carry two intervals of a
        // worker, or none (see tailscope_tui::ui::ThroughputPanel).
        let rate = snap
            .recent_seconds
            .last()
            .map_or("n/a".to_string(), |p| fmt_rate(p.requests as f64));
        let line = match snap.phase {
            Phase::WarmingUp => format!("warming up, {:.1} s left", snap.warmup_left.as_secs_f64()),
            _ => format!(
                "{:>6.1} s  {:>12} req/s  p50 {:>8}  p99 {:>8}  max {:>8}  errors {}",
                snap.elapsed.as_secs_f64(),
                rate,
                fmt_us(snap.latency.p50),
                fmt_us(snap.latency.p99),
                fmt_us(snap.latency.max),
                fmt_count(snap.totals.error_total()),
            ),
        };
        say_part!("\r\x1b[2K{line}");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use crate::args::{Cli, Command};

    /// Parses and validates `run URL FLAG VALUE` the way `main` does, without running
    /// anything: Ok(true) when it would run, Ok(false) when it is refused.
    fn parse_and_validate(flag: &str, value: &str) -> bool {
        let argv = ["tailscope", "run", "http://127.0.0.1:9/", flag, value];
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Some(Command::Run(args)),
            }) => super::RunConfig::from_args(args).is_ok(),
            Ok(_) => unreachable!("run parses as run"),
            Err(_) => false,
        }
    }

    const COUNT_FLAGS: [&str; 5] = ["-c", "-n", "--pipeline", "--threads", "--pid"];
    const DURATION_FLAGS: [&str; 4] = ["-z", "-t", "--connect-timeout", "--warmup"];
    const UNITS: [&str; 10] = ["ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y"];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn no_count_panics(flag in prop::sample::select(&COUNT_FLAGS[..]), v in any::<i128>()) {
            parse_and_validate(flag, &v.to_string());
        }

        #[test]
        fn no_rate_panics(v in any::<f64>()) {
            let ok = parse_and_validate("-q", &v.to_string());
            prop_assert_eq!(ok, (0.01..=1e8).contains(&v));
        }

        #[test]
        fn no_duration_panics(
            flag in prop::sample::select(&DURATION_FLAGS[..]),
            n in any::<u64>(),
            unit in prop::sample::select(&UNITS[..]),
        ) {
            parse_and_validate(flag, &format!("{n}{unit}"));
        }

        #[test]
        fn no_text_panics(
            flag in prop::sample::select(&["-c", "-n", "-q", "-z", "-t", "--warmup", "--pipeline"][..]),
            v in "[-+0-9.eEa-z ]{0,24}",
        ) {
            parse_and_validate(flag, &v);
        }
    }

    #[test]
    fn the_issue_s_values_are_refused() {
        assert!(!parse_and_validate("-q", "1e-20"));
        assert!(!parse_and_validate("-z", "500000000000y"));
        assert!(!parse_and_validate("-c", "0"));
        assert!(parse_and_validate("-q", "1000"));
        assert!(parse_and_validate("-z", "3s"));
    }
}
