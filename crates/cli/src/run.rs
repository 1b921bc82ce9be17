//! `tailscope run`: flags → a validated `RunConfig` (here) → `tailscope_session::run` (the
//! target, the profiler, the generator, the report, called by the binary) → the exit code.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use tailscope_loadgen::segment::{self, Segment};
use tailscope_loadgen::{Pace, Plan, Stop};
use tailscope_report::mix_files::{self as files, RequestFile};
use tailscope_report::threshold::Threshold;
use tailscope_session::files::{check_files, Output};
use tailscope_session::stacks::StacksOptions;
use tailscope_session::{Launch, RunConfig, UsageError};
use tailscope_targets::cpus::{self, format_list};
use tailscope_targets::TargetSpec;

use crate::args::RunArgs;
use crate::process::fit_open_files;

/// Validates the flags; every problem is a [`UsageError`] (exit code 2).
fn config(args: RunArgs) -> Result<RunConfig> {
    let target = args.target;
    let mut load = args.load;
    let agent =
        agent_options(&args.agent_link, &target, &args.tls, &args.segment).map_err(usage)?;
    let launched_by_agent = agent.as_ref().is_some_and(|a| a.launch.is_some());
    refuse_launch_flags_without_target(&target, &args.tls, launched_by_agent)?;
    let mix = read_mix(&args.request).map_err(usage)?;
    // A load file's stages, unless --stages gives others (the command line wins, as for
    // its url): checked below as --stages is.
    if load.shape.stages.is_none() {
        if let Some(stages) = mix.as_ref().and_then(|f| f.stages.clone()) {
            load.shape.stages = Some(crate::args::StagesArg(stages));
        }
    }
    // A load file's `url` is a default: a URL on the command line wins, and --target loads
    // the server it launches. A URL list's whole URLs are its requests' own: the run must
    // go where they say.
    let own_urls = args.request.load.is_none();
    let file_url = mix.as_ref().and_then(|f| f.url.clone());
    if let (Some(f), Some(_), true) = (
        mix.as_ref().filter(|f| f.url.is_some()),
        &target.target,
        own_urls,
    ) {
        return Err(usage(format!(
                "{}: its requests name a host, and --target launches a server of its own: give paths (/json) instead",
                f.path
            )));
    }
    // The file's URL when there is neither a URL nor a server to launch.
    let file_url = file_url.filter(|_| target.target.is_none());
    let (url, launch) = match (args.url.or(file_url), &target.target) {
        (Some(url), _) => (url, None),
        // The agent launches it; the URL is set once it says on which port.
        (None, Some(_)) if launched_by_agent => ("http://127.0.0.1:1/".to_string(), None),
        (None, Some(kind)) => {
            let (url, launch) = local_launch(kind, &target, &args.tls, &load)?;
            (url, Some(launch))
        }
        (None, None) => {
            return Err(usage(
                    "give a URL to load (tailscope run http://127.0.0.1:8080/), or --target embedded|nginx|'command:CMD {port}' to launch a server".into(),
                ))
        }
    };
    let mut plan = Plan::new(&url).map_err(|e| usage(e.to_string()))?;
    apply_tls(&mut plan, &args.tls).map_err(usage)?;
    let launch = launch.map(|(launch, client_cpus)| {
        plan.cpus = client_cpus;
        launch
    });
    if let (Some(pid), None) = (target.pid, &agent) {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(usage(format!("no process with pid {pid} (--pid)")));
        }
    }
    let warmup_auto = apply_load(&mut plan, &load, launch.is_some())?;
    let body_file = apply_request(&mut plan, args.request, mix, own_urls)?;
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
    let out = args.output;
    check_outputs(&out, body_file.as_deref())?;
    let journal = journal_path(&out);
    let stacks = StacksOptions {
        mode: out.stacks,
        flamegraph: out.flamegraph.clone(),
        flamegraph_slow: out.flamegraph_slow.clone(),
    };
    let thresholds = out
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
        json: out.json,
        html: out.html,
        hdr_log: out.hdr_log,
        csv: out.csv,
        csv_slowest: out.csv_slowest,
        thresholds,
        launch,
        pid: target.pid,
        tui: !out.no_tui && std::io::stdout().is_terminal(),
        segment,
        start_at,
        stacks,
        agent,
        until: load.until,
        warmup_auto,
        journal,
    })
}

/// Refuses the flags that shape a server tailscope launches when none is launched here.
/// clap's `requires = "target"` on these is satisfied by their own group (the flattened
/// `target: TargetArgs` shares the id): checked here instead.
fn refuse_launch_flags_without_target(
    target: &crate::args::TargetArgs,
    tls: &crate::args::TlsArgs,
    launched_by_agent: bool,
) -> Result<()> {
    if target.target.is_some() && !launched_by_agent {
        return Ok(());
    }
    if target.path.is_some() && target.target.is_none() {
        return Err(usage(
            "--path is for a server tailscope launches (--target); with a URL, put the path in the URL".into(),
        ));
    }
    if tls.tls {
        return Err(usage(
            "--tls is for a server tailscope launches (--target nginx --tls); for a server at a URL, write https://".into(),
        ));
    }
    if target.server_cpus.is_some() {
        return Err(usage(
            "--server-cpus is for a server tailscope launches (--target); a server at a URL runs where it was started (pin it with taskset)".into(),
        ));
    }
    Ok(())
}

/// `--target KIND` launched on this host: the URL (a placeholder until the server says its
/// port), the launch, and the generator's CPUs (those the server was not given).
fn local_launch(
    kind: &str,
    target: &crate::args::TargetArgs,
    tls: &crate::args::TlsArgs,
    load: &crate::args::LoadArgs,
) -> Result<(String, (Launch, Vec<usize>))> {
    let mut spec = TargetSpec::parse(kind).map_err(|e| usage(e.to_string()))?;
    if tls.tls || tls.http2 {
        spec = spec
            .serving(tls.tls, tls.http2)
            .map_err(|e| usage(e.to_string()))?;
    }
    let path = launch_path(&spec, target.path.clone())?;
    let available = cpus::available();
    let (default_server, default_client) = cpus::default_split(&available);
    let server_cpus = target.server_cpus.clone().map_or(default_server, |c| c.0);
    all_available(&server_cpus, &available, "--server-cpus")?;
    let rest: Vec<usize> = available
        .iter()
        .copied()
        .filter(|c| !server_cpus.contains(c))
        .collect();
    let client_default = if rest.is_empty() {
        default_client
    } else {
        rest
    };
    if let Some(c) = &load.cpus {
        all_available(&c.0, &available, "--cpus")?;
    }
    let mut client = load.cpus.as_ref().map_or(client_default, |c| c.0.clone());
    client.dedup();
    // The port is not known until the server is up; the URL is set then.
    let scheme = if tls.tls { "https" } else { "http" };
    let placeholder = format!("{scheme}://127.0.0.1:1{path}");
    let launch = Launch {
        spec,
        server_cpus,
        path,
    };
    Ok((placeholder, (launch, client)))
}

/// A usage error naming the first CPU of `cpus` this process may not run on, and the CPUs it
/// may, written as the command line writes them (`0-1`), whichever flag it is.
fn all_available(cpus: &[usize], available: &[usize], flag: &str) -> Result<()> {
    match cpus.iter().find(|c| !available.contains(c)) {
        Some(cpu) => Err(usage(format!(
            "CPU {cpu} is not available to this process (available: {}): pick from those ({flag})",
            format_list(available)
        ))),
        None => Ok(()),
    }
}

/// The path a launched server is loaded at: `--path`, or what it surely serves.
fn launch_path(spec: &TargetSpec, path: Option<String>) -> Result<String> {
    // embedded and nginx serve the benchmark's /plaintext; a command: server is anyone's,
    // and `/` is the one path it surely has.
    let path = path.unwrap_or_else(|| {
        match spec {
            TargetSpec::Command { .. } => "/",
            _ => "/plaintext",
        }
        .to_string()
    });
    if !path.starts_with('/') {
        return Err(usage(format!("--path {path:?} must start with '/'")));
    }
    Ok(path)
}

/// The load's flags into the plan: threads, stop, pace, warm-up, shape, timeouts and
/// connections; whether the warm-up is `auto`.
fn apply_load(plan: &mut Plan, load: &crate::args::LoadArgs, launched: bool) -> Result<bool> {
    plan.connections = load.connections;
    if let (Some(cpus), false) = (&load.cpus, launched) {
        all_available(&cpus.0, &cpus::available(), "--cpus")?;
        plan.cpus = cpus.0.clone();
    }
    match load.threads {
        Some(t) => plan.threads = t,
        None if launched => plan.threads = plan.cpus.len().max(1),
        None => {}
    }
    let (requests, duration) = (load.requests, load.duration);
    plan.stop = match until_stop(
        &load.until,
        load.max_duration,
        requests.is_some() || duration.is_some(),
    )? {
        Some(cap) => cap,
        None => duration_or_count(requests, duration)?,
    };
    if let Some(r) = load.rate {
        plan.pace = Pace::Rate(r);
    }
    plan.pipeline = load.pipeline;
    plan.keepalive = !load.no_keepalive;
    let warmup_auto = load.warmup == Some(crate::args::WarmupArg::Auto);
    plan.warmup = match load.warmup {
        Some(crate::args::WarmupArg::Fixed(d)) => d,
        _ => Duration::ZERO,
    };
    crate::shape::apply(
        &load.shape,
        plan,
        load.requests.is_some() || load.duration.is_some(),
    )
    .map_err(usage)?;
    if load.shape.stages.is_some() && warmup_auto {
        return Err(usage(
            "--stages begin at the start: drop --warmup auto (make the first stage the warm-up)"
                .into(),
        ));
    }
    if load.shape.stages.is_some() && !load.until.is_empty() {
        return Err(usage(
            "--stages set the run's length and --until ends it when sure: give one of them".into(),
        ));
    }
    plan.timeout = load.timeout;
    plan.connect_timeout = load.connect_timeout;
    plan.grace = plan.timeout.min(Duration::from_secs(1));
    plan.engine = load.engine.into();
    plan.spin_before_sleep = load.spin_before_sleep;
    if let Some(s) = load.source_addrs.clone() {
        plan.source_addrs = s;
    }
    plan.connect_rate = load.connect_rate;
    plan.idle_conns = load.idle_conns;
    plan.slow_conns = load.slow_conns;
    plan.slow_interval = load.slow_interval;
    tailscope_loadgen::resolve_engine_for(plan).map_err(|e| usage(e.to_string()))?;
    Ok(warmup_auto)
}

/// The request's flags into the plan: method, headers, the mix, the body; the body file's
/// path, when one was read.
fn apply_request(
    plan: &mut Plan,
    req: crate::args::RequestArgs,
    mix: Option<RequestFile>,
    own_urls: bool,
) -> Result<Option<PathBuf>> {
    plan.method = req.method.to_ascii_uppercase();
    for h in &req.headers {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| usage(format!("header {h:?} has no ':': write -H 'Name: value'")))?;
        plan.headers
            .push((k.trim().to_string(), v.trim().to_string()));
    }
    if let Some(file) = mix {
        if own_urls {
            file.check_origin(&plan.url)
                .map_err(|e| usage(e.to_string()))?;
            file.check_credentials(plan.url_authorization())
                .map_err(|e| usage(e.to_string()))?;
        }
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
    if let Some(path) = &req.body_file {
        plan.body = std::fs::read(path).map_err(|e| {
            usage(format!(
                "cannot read body file {}: {e} (-D)",
                path.display()
            ))
        })?;
    }
    Ok(req.body_file)
}

/// Checks that the output files can be written and do not overwrite the body file.
fn check_outputs(out: &crate::args::OutputArgs, body_file: Option<&std::path::Path>) -> Result<()> {
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
        Output::of("--journal", "journal", out.journal.as_deref()),
        Output::of("--csv", "CSV series", out.csv.as_deref()),
        Output::of(
            "--csv-slowest",
            "CSV of the slowest requests",
            out.csv_slowest.as_deref(),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    check_files(body_file.as_slice(), &outputs)?;
    Ok(())
}

/// Where the journal goes: `--journal`, or beside the first report file, or in
/// `$TAILSCOPE_JOURNAL_DIR` or the working directory; none with `--no-journal`.
fn journal_path(out: &crate::args::OutputArgs) -> Option<PathBuf> {
    if out.no_journal {
        return None;
    }
    if let Some(p) = &out.journal {
        return Some(p.clone());
    }
    let first = [&out.json, &out.html, &out.hdr_log, &out.csv]
        .into_iter()
        .flatten()
        .find(|p| p.as_os_str() != "-");
    let now = SystemTime::now();
    match (first, std::env::var_os("TAILSCOPE_JOURNAL_DIR")) {
        (None, Some(dir)) => Some(tailscope_session::journal::default_path(
            Some(&PathBuf::from(dir).join("x")),
            now,
            std::process::id(),
        )),
        (first, _) => Some(tailscope_session::journal::default_path(
            first.map(PathBuf::as_path),
            now,
            std::process::id(),
        )),
    }
}

/// `--agent` and its flags, checked: the token file read, the fingerprint parsed, a
/// `--target` for the agent to launch taken (a `command:` one), and what an agent cannot do
/// refused.
fn agent_options(
    args: &crate::args::AgentLinkArgs,
    target: &crate::args::TargetArgs,
    tls: &crate::args::TlsArgs,
    segment: &crate::args::SegmentArgs,
) -> Result<Option<tailscope_agent::client::AgentOptions>, String> {
    let Some(address) = &args.agent else {
        return match (&args.agent_token, &args.agent_fingerprint) {
            (Some(_), _) => Err("--agent-token is for --agent HOST:PORT".into()),
            (_, Some(_)) => Err("--agent-fingerprint is for --agent HOST:PORT".into()),
            _ => Ok(None),
        };
    };
    match address.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
        _ => {
            return Err(format!(
                "--agent {address:?}: give the agent's HOST:PORT (tailscope agent prints where it listens)"
            ))
        }
    }
    let launch = agent_launch(target, tls, segment)?;
    let Some(token_file) = &args.agent_token else {
        return Err("--agent needs --agent-token FILE (the agent's token)".into());
    };
    let token =
        tailscope_agent::read_token(token_file, "--agent-token").map_err(|e| e.to_string())?;
    let fingerprint = args
        .agent_fingerprint
        .as_deref()
        .map(|f| {
            tailscope_agent::tls::parse_fingerprint(f)
                .map_err(|e| format!("--agent-fingerprint: {e}"))
        })
        .transpose()?;
    Ok(Some(tailscope_agent::client::AgentOptions {
        address: address.clone(),
        token,
        fingerprint,
        launch,
    }))
}

/// `--target 'command:CMD {port}'` with `--agent`: the server the agent launches on its
/// host (one started with `--allow-launch`). Only a command: the embedded server and nginx
/// listen on loopback, out of the run's reach; the command binds where the run can reach it.
fn agent_launch(
    target: &crate::args::TargetArgs,
    tls: &crate::args::TlsArgs,
    segment: &crate::args::SegmentArgs,
) -> Result<Option<tailscope_agent::client::LaunchRequest>, String> {
    let Some(kind) = &target.target else {
        return Ok(None);
    };
    let spec = TargetSpec::parse(kind).map_err(|e| e.to_string())?;
    let TargetSpec::Command { template, .. } = &spec else {
        return Err(format!(
            "--target {kind} with --agent: the agent launches a command ('command:CMD {{port}}', listening where this host can reach it, e.g. 'command:tailscope serve --addr 0.0.0.0:{{port}}'), not {}",
            spec.kind()
        ));
    };
    if tls.http2 {
        return Err("--http2 is for a server tailscope launches here (--target nginx); through an agent, give the command's own flags".into());
    }
    if segment.segment.is_some() || segment.segments.is_some() {
        return Err("--target with --agent launches one server for one run: for --segment runs, have it started once on the agent's host and give every segment its URL".into());
    }
    let path = launch_path(&spec, target.path.clone()).map_err(|e| e.to_string())?;
    Ok(Some(tailscope_agent::client::LaunchRequest {
        command: template.clone(),
        path,
    }))
}

/// A refusal of the flags: exit code 2.
fn usage(e: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(e))
}

/// How a run without --until stops: -n, -z, or 10 s.
fn duration_or_count(requests: Option<u64>, duration: Option<Duration>) -> Result<Stop> {
    Ok(match (requests, duration) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "give -n (requests) or -z (duration), not both".into(),
            ))
        }
        (Some(n), None) => Stop::Requests(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    })
}

/// `--until` with its cap: the run's stop is the cap (`--max-duration`), the goals end it
/// sooner; None without --until. Refuses --until without a cap, beside -z or -n, and a cap
/// without --until. `fixed`: -z or -n was given.
fn until_stop(
    until: &[tailscope_session::until::Goal],
    max_duration: Option<Duration>,
    fixed: bool,
) -> Result<Option<Stop>> {
    match (until.is_empty(), max_duration) {
        (true, None) => Ok(None),
        (true, Some(_)) => Err(usage(
            "--max-duration caps a run with --until 'p99±2%'; for a fixed length give -z".into(),
        )),
        (false, None) => Err(usage(
            "--until needs --max-duration, the longest the run may last (--max-duration 5m)".into(),
        )),
        (false, Some(_)) if fixed => Err(usage(
            "--until ends the run itself: give --max-duration as its cap, not -z or -n".into(),
        )),
        (false, Some(cap)) => Ok(Some(Stop::Duration(cap))),
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

/// The mix named by --load or --urls-from-file, read and checked.
fn read_mix(req: &crate::args::RequestArgs) -> Result<Option<RequestFile>, String> {
    let read = match (&req.load, &req.urls_from_file) {
        (Some(path), _) => files::read_load_file(path),
        (None, Some(path)) => files::read_url_file(path),
        (None, None) => return Ok(None),
    };
    read.map(Some).map_err(|e| e.to_string())
}

/// The segment `--segment` or `--segment-from-env` names, if any.
fn segment_of(args: &crate::args::SegmentArgs) -> Result<Option<Segment>, String> {
    match (&args.segment_from_env, args.segments) {
        (Some(var), Some(count)) => {
            let value = std::env::var(var).ok();
            Segment::from_index(var, value.as_deref(), 0, count).map(Some)
        }
        _ => Ok(args.segment),
    }
}

/// The run's flags validated into a [`RunConfig`], the open-file limit raised and checked
/// against its connections: what `tailscope_session::run::run` takes.
pub fn run_config(args: RunArgs) -> Result<RunConfig> {
    let threads_given = args.load.threads.is_some();
    let mut config = config(args)?;
    fit_open_files(&mut config.plan, threads_given)?;
    Ok(config)
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
            }) => super::config(args).is_ok(),
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

    /// `run ARGS…` parsed and validated as `main` does: the plan's URL (and whether a
    /// target is launched), or the refusal.
    fn config_of(argv: &[&str]) -> Result<String, String> {
        let argv = ["tailscope", "run"].iter().chain(argv);
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Some(Command::Run(args)),
            }) => super::config(args)
                .map(|c| match c.launch {
                    Some(_) => format!("launch {}", c.plan.url),
                    None => c.plan.url,
                })
                .map_err(|e| e.to_string()),
            _ => unreachable!("run parses as run"),
        }
    }

    #[test]
    fn a_load_file_s_url_is_a_default_and_a_url_list_s_urls_are_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let load = dir.path().join("mix.toml");
        std::fs::write(
            &load,
            "url = \"http://127.0.0.1:8080\"\n[[request]]\npath = \"/json\"\n",
        )
        .unwrap();
        let load = load.to_str().unwrap();
        assert_eq!(
            config_of(&["--load", load]).unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            config_of(&["http://127.0.0.1:18080/", "--load", load]).unwrap(),
            "http://127.0.0.1:18080/",
            "the command line's URL wins"
        );
        let launched = config_of(&["--target", "embedded", "--load", load]).unwrap();
        assert!(launched.starts_with("launch "), "{launched}");
        assert!(!launched.contains(":8080"), "{launched}");

        let list = dir.path().join("urls.txt");
        std::fs::write(&list, "http://127.0.0.1:8080/a\n/b\n").unwrap();
        let list = list.to_str().unwrap();
        let err = config_of(&["http://127.0.0.1:18080/", "--urls-from-file", list]).unwrap_err();
        assert!(err.contains("one run loads one host and port"), "{err}");
        let err = config_of(&["--target", "embedded", "--urls-from-file", list]).unwrap_err();
        assert!(
            err.contains("--target launches a server of its own"),
            "{err}"
        );
    }

    /// `run ARGS…` validated: the plan's stages (duration s each), or the refusal.
    fn stages_of(argv: &[&str]) -> Result<Vec<u64>, String> {
        let argv = ["tailscope", "run"].iter().chain(argv);
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Some(Command::Run(args)),
            }) => super::config(args)
                .map(|c| c.plan.stages.iter().map(|s| s.duration.as_secs()).collect())
                .map_err(|e| e.to_string()),
            _ => unreachable!("run parses as run"),
        }
    }

    #[test]
    fn a_load_file_s_stages_shape_the_run_unless_stages_are_given() {
        let dir = tempfile::tempdir().unwrap();
        let load = dir.path().join("mix.toml");
        std::fs::write(
            &load,
            "stages = \"2s:100,3s:400\"\n[[request]]\npath = \"/json\"\n",
        )
        .unwrap();
        let load = load.to_str().unwrap();
        let url = "http://127.0.0.1:18080/";
        assert_eq!(stages_of(&[url, "--load", load]).unwrap(), [2, 3]);
        assert_eq!(
            stages_of(&[url, "--load", load, "--stages", "4s:50"]).unwrap(),
            [4],
            "--stages wins"
        );
        // Checked as --stages is: they set the run's length.
        let err = stages_of(&[url, "--load", load, "-z", "5s"]).unwrap_err();
        assert!(err.contains("drop -z"), "{err}");
    }

    #[test]
    fn tls_with_a_url_is_refused_rather_than_ignored() {
        let err = config_of(&["http://127.0.0.1:9/", "--tls"]).unwrap_err();
        assert!(err.contains("write https://"), "{err}");
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
