//! `tailscope run`: flags → a validated `RunConfig` → the generator → report and exit code.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use tailscope_forensics::{Roles, RunProfiler, RunStacks, StacksError};
use tailscope_loadgen::mix::files::{self, RequestFile};
use tailscope_loadgen::report::{progress_line, Generator, Report, TargetInfo};
use tailscope_loadgen::segment::{self, Segment};
use tailscope_loadgen::threshold::Threshold;
use tailscope_loadgen::{Pace, Phase, Plan, RunControl, Snapshot, Stop};
use tailscope_targets::cpus::{self, format_list};
use tailscope_targets::{Target, TargetSpec};
use tailscope_tui::app::{Action, RunInfo};
use tailscope_tui::Feed;

use crate::args::RunArgs;
use crate::exit::{Outcome, UsageError};
use crate::process::{check_files, fit_open_files, signal_name, watch_signals, Output, SIGNALLED};

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
    /// This generator's share of a load spread over several (`--segment`).
    pub segment: Option<Segment>,
    /// The wall-clock time to start at (`--start-at`).
    pub start_at: Option<SystemTime>,
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
        // clap's `requires = "target"` on these is satisfied by their own group (the flattened
        // `target: TargetArgs` shares the id): checked here instead.
        if target.target.is_none() {
            if target.path.is_some() {
                return Err(usage(
                    "--path is for a server tailscope launches (--target); with a URL, put the path in the URL".into(),
                ));
            }
            if target.server_cpus.is_some() {
                return Err(usage(
                    "--server-cpus is for a server tailscope launches (--target); a server at a URL runs where it was started (pin it with taskset)".into(),
                ));
            }
        }
        let mix = read_mix(&args.request).map_err(usage)?;
        let file_url = mix.as_ref().and_then(|f| f.url.clone());
        if let (Some(f), Some(_)) = (mix.as_ref().filter(|f| f.url.is_some()), &target.target) {
            return Err(usage(format!(
                "{}: its requests name a host, and --target launches a server of its own: give paths (/json) instead",
                f.path
            )));
        }
        let (url, launch) = match (args.url.or(file_url), target.target) {
            (Some(url), _) => (url, None),
            (None, Some(kind)) => {
                let mut spec = TargetSpec::parse(&kind).map_err(|e| usage(e.to_string()))?;
                if args.tls.tls || args.tls.http2 {
                    spec = spec
                        .serving(args.tls.tls, args.tls.http2)
                        .map_err(|e| usage(e.to_string()))?;
                }
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
                let scheme = if args.tls.tls { "https" } else { "http" };
                let placeholder = format!("{scheme}://127.0.0.1:1{path}");
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
        apply_tls(&mut plan, &args.tls).map_err(usage)?;
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
        plan.engine = load.engine.into();
        if let Some(s) = load.source_addrs.clone() {
            plan.source_addrs = s;
        }
        plan.connect_rate = load.connect_rate;
        plan.idle_conns = load.idle_conns;
        plan.slow_conns = load.slow_conns;
        plan.slow_interval = load.slow_interval;
        tailscope_loadgen::resolve_engine_for(&plan).map_err(|e| usage(e.to_string()))?;
        let req = args.request;
        plan.method = req.method.to_ascii_uppercase();
        for h in &req.headers {
            let (k, v) = h
                .split_once(':')
                .ok_or_else(|| usage(format!("header {h:?} has no ':': write -H 'Name: value'")))?;
            plan.headers
                .push((k.trim().to_string(), v.trim().to_string()));
        }
        if let Some(file) = mix {
            file.check_origin(&plan.url)
                .map_err(|e| usage(e.to_string()))?;
            plan.order = req.url_order.or(file.order).unwrap_or_default();
            plan.requests = file.requests;
            // -H adds to every request of the mix (a request's own header of that name wins).
            for r in &mut plan.requests {
                for (k, v) in &plan.headers {
                    if !r.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)) {
                        r.headers.push((k.clone(), v.clone()));
                    }
                }
            }
        } else if req.url_order.is_some() {
            return Err(usage(
                "--url-order orders a mix: give --load or --urls-from-file too".into(),
            ));
        }
        if let Some(body) = req.body {
            plan.body = body.into_bytes();
        }
        let body_file = req.body_file;
        if let Some(path) = &body_file {
            plan.body = std::fs::read(path).map_err(|e| {
                usage(format!(
                    "cannot read body file {}: {e} (-D)",
                    path.display()
                ))
            })?;
        }
        let segment = segment_of(&args.segment).map_err(usage)?;
        if let Some(seg) = segment {
            seg.apply(&mut plan)
                .map_err(|e| usage(format!("--segment {seg}: {e}")))?;
        }
        let start_at = args.segment.start_at;
        if let Some(at) = start_at {
            segment::check_start_time(at, SystemTime::now()).map_err(usage)?;
        }
        plan.validate().map_err(|e| usage(e.to_string()))?;
        let out = &args.output;
        let outputs: Vec<Output> = [
            Output::of("--json", "JSON report", out.json.as_deref()),
            Output::of("--html", "HTML report", out.html.as_deref()),
            Output::of("--flamegraph", "flame graph", out.flamegraph.as_deref()),
            Output::of(
                "--flamegraph-slow",
                "flame graph",
                out.flamegraph_slow.as_deref(),
            ),
            Output::of("--hdr-log", "HdrHistogram log", out.hdr_log.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect();
        check_files(body_file.as_deref().as_slice(), &outputs)?;
        let thresholds = args
            .output
            .fail_if
            .iter()
            .map(|e| Threshold::parse(e).map_err(|e| usage(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        let names = plan.request_names();
        for t in &thresholds {
            t.check_names(&names).map_err(|e| usage(e.to_string()))?;
        }
        Ok(RunConfig {
            plan,
            json: args.output.json,
            html: args.output.html,
            hdr_log: args.output.hdr_log,
            thresholds,
            launch,
            pid: target.pid,
            tui: !args.output.no_tui && std::io::stdout().is_terminal(),
            segment,
            start_at,
        })
    }
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

/// Sets the plan's TLS options from the flags; an error for a TLS flag without https.
fn apply_tls(plan: &mut Plan, args: &crate::args::TlsArgs) -> Result<(), String> {
    plan.http2 = args.http2;
    plan.streams = args.streams;
    let Some(tls) = plan.tls.as_mut() else {
        return match args.any_tls_flag() {
            Some(flag) => Err(format!(
                "{flag} is for https:// URLs; {} is plain http",
                plan.url
            )),
            None => Ok(()),
        };
    };
    tls.insecure = args.insecure;
    tls.cacert.clone_from(&args.cacert);
    tls.cert.clone_from(&args.cert);
    tls.key.clone_from(&args.key);
    tls.resume = !args.no_tls_resume;
    Ok(())
}

/// The segment `--segment` or `--segment-from-env` names, if any.
/// The mix named by --load or --urls-from-file, read and checked.
fn read_mix(req: &crate::args::RequestArgs) -> Result<Option<RequestFile>, String> {
    let read = match (&req.load, &req.urls_from_file) {
        (Some(path), _) => files::read_load_file(path),
        (None, Some(path)) => files::read_url_file(path),
        (None, None) => return Ok(None),
    };
    read.map(Some).map_err(|e| e.to_string())
}

fn segment_of(args: &crate::args::SegmentArgs) -> Result<Option<Segment>, String> {
    match (&args.segment_from_env, args.segments) {
        (Some(var), Some(count)) => {
            let value = std::env::var(var).ok();
            Segment::from_index(var, value.as_deref(), 0, count).map(Some)
        }
        _ => Ok(args.segment),
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
pub fn run(args: RunArgs) -> Result<Outcome> {
    let stacks_options = tailscope_forensics::StacksOptions {
        mode: args.output.stacks,
        flamegraph: args.output.flamegraph.clone(),
        flamegraph_slow: args.output.flamegraph_slow.clone(),
    };
    let threads_given = args.load.threads.is_some();
    let mut config = RunConfig::from_args(args)?;
    fit_open_files(&mut config.plan, threads_given)?;
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
    let plan = &config.plan;
    let live = std::io::stderr().is_terminal();
    say!(
        "tailscope: {} {} — {} connections, {} generator thread(s), {}{}",
        if plan.has_mix() {
            format!("a mix of {} requests on", plan.requests.len())
        } else {
            plan.method.clone()
        },
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
    // `s` on the dashboard asks for the HTML report of the run so far.
    let (saves, save_requests) = std::sync::mpsc::channel();
    let dashboard = if config.tui {
        start_dashboard(&config, target.as_ref(), &control, saves)
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
        server_cpus.clone(),
        plan.cpus.clone(),
        !plan.warmup.is_zero(),
    )
    .watching_listeners(plan.addr);
    let mut stacks = match RunStacks::start(stacks_options, target_pid, &plan.cpus) {
        Err(StacksError::Usage(e)) => return Err(UsageError(e.into()).into()),
        started => started?,
    };
    let in_flight = (plan.connections * plan.pipeline) as u64;
    // Known before the run, so that a page saved from the dashboard names the server too.
    let target_info = match (&target, config.pid) {
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
    let totals = tailscope_loadgen::run(plan, &control, |snap| {
        let (cpus, counters) = profiler.on_snapshot(snap);
        stacks.on_snapshot(snap, &profiler.tree_pids());
        if let Some((feed, _)) = &dashboard {
            let _ = feed.send(Action::Snapshot(Box::new(snap.clone()), cpus));
            let _ = feed.send(Action::Counters(counters));
            let _ = feed.send(Action::ListenQueue(profiler.listen_now()));
            if let Some(inside) = stacks.live(snap) {
                let _ = feed.send(Action::Inside(Box::new(inside)));
            }
            if save_requests.try_recv().is_ok() {
                crate::report::save_so_far(
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
    }
    let totals = totals.context("the load generator could not run")?;
    if live {
        say!();
    }
    let mut report = Report::new(plan, &totals);
    if let Some(w) = target
        .as_ref()
        .and_then(|t| shared_cpus_warning(t.server_cpus(), &plan.cpus))
    {
        report.warnings.push(w);
    }
    report.generator = Some(Generator::here(
        &report,
        measure_started,
        config.segment,
        config.start_at,
    ));
    if report.interrupted {
        report.signal = signal_name();
    }
    report.target = target_info;
    let server_exited = target.as_mut().and_then(|t| t.exited());
    let mut findings = profiler.finish(plan, &totals, &mut report);
    // Before the target stops: its binaries are read through /proc/PID to name the frames.
    let (inside, inside_text) = stacks.finish(&mut report);
    if let Some(inside) = &inside {
        findings.look_inside(inside);
    }
    findings.add_to(&mut report);
    let roles = Roles {
        server: &server_cpus,
        client: &plan.cpus,
    };
    let sections = tailscope_report::findings::findings_text(&findings, roles, &report);
    if let Some(t) = target.take() {
        if let Some(status) = server_exited {
            say!(
                "tailscope: the {} server exited during the run ({status})",
                t.name()
            );
        }
        t.stop();
    }
    let text = report.to_text() + &sections + &inside_text;
    crate::report::emit(
        &report,
        &text,
        config.json.as_deref(),
        config.html.as_deref(),
    )?;
    if let Some(path) = &config.hdr_log {
        let started = measure_started;
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
    saves: tailscope_tui::SaveRequests,
) -> Option<(Feed, std::thread::JoinHandle<std::io::Result<()>>)> {
    let info = RunInfo::new(&config.plan, target);
    match tailscope_tui::spawn(info, control.clone(), saves) {
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
        let line = progress_line(snap);
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
