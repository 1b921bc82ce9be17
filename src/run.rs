//! `tailscope run`: flags → a validated `RunConfig` → the generator → report and exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use tailscope_loadgen::report::{fmt_count, fmt_rate, fmt_us, Report};
use tailscope_loadgen::threshold::Threshold;
use tailscope_loadgen::{Pace, Phase, Plan, RunControl, Snapshot, Stop};

use crate::args::RunArgs;
use crate::exit::{Outcome, UsageError};

/// Everything `run` needs, checked before any load starts.
pub struct RunConfig {
    /// The generator's plan.
    pub plan: Plan,
    /// Where the JSON report goes.
    pub json: Option<PathBuf>,
    /// CI gates.
    pub thresholds: Vec<Threshold>,
}

impl RunConfig {
    /// Validates the flags; every problem is a [`UsageError`] (exit code 2).
    pub fn from_args(args: RunArgs) -> Result<RunConfig> {
        let usage = |e: String| anyhow::Error::new(UsageError(e));
        let mut plan = Plan::new(&args.url).map_err(|e| usage(e.to_string()))?;
        let load = args.load;
        plan.connections = load.connections;
        if let Some(t) = load.threads {
            plan.threads = t;
        }
        if let Some(cpus) = load.cpus {
            plan.cpus = cpus.0;
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
        let thresholds = args
            .output
            .fail_if
            .iter()
            .map(|e| Threshold::parse(e).map_err(|e| usage(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        Ok(RunConfig {
            plan,
            json: args.output.json,
            thresholds,
        })
    }
}

/// Runs the load and reports. Returns how the process should exit.
pub fn run(args: RunArgs) -> Result<Outcome> {
    let config = RunConfig::from_args(args)?;
    let control = RunControl::new();
    // A first Ctrl-C or SIGTERM stops gracefully and still reports; a second one exits at once.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, control.flag())
            .context("cannot install the signal handler")?;
        signal_hook::flag::register(signal, control.flag())
            .context("cannot install the signal handler")?;
    }
    let plan = &config.plan;
    let json_to_stdout = config.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let live = std::io::stderr().is_terminal();
    eprintln!(
        "tailscope: {} {} — {} connections, {} threads, {}{}",
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
    let mut progress = Progress::default();
    let totals = tailscope_loadgen::run(plan, &control, |snap| {
        if live {
            progress.show(snap);
        }
    })
    .context("the load generator could not run")?;
    if live {
        eprintln!();
    }
    let report = Report::new(plan, &totals);
    let text = report.to_text();
    if json_to_stdout {
        eprint!("{text}");
        print_stdout(&report.to_json())?;
    } else {
        print_stdout(&text)?;
        if let Some(path) = &config.json {
            std::fs::write(path, report.to_json() + "\n")
                .with_context(|| format!("cannot write the JSON report to {}", path.display()))?;
        }
    }
    let mut failed = 0;
    for t in &config.thresholds {
        let verdict = t.check(&report);
        if !verdict.passed {
            failed += 1;
        }
        eprintln!("{verdict}");
    }
    if failed > 0 {
        return Ok(Outcome::ThresholdFailed);
    }
    if control.is_stopped() {
        return Ok(Outcome::Interrupted);
    }
    Ok(Outcome::Success)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
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
        let tick_s = snap.tick.as_secs_f64().max(1e-3);
        let line = match snap.phase {
            Phase::WarmingUp => format!("warming up, {:.1} s left", snap.warmup_left.as_secs_f64()),
            _ => format!(
                "{:>6.1} s  {:>12} req/s  p50 {:>8}  p99 {:>8}  max {:>8}  errors {}",
                snap.elapsed.as_secs_f64(),
                fmt_rate(snap.last_tick.requests() as f64 / tick_s),
                fmt_us(snap.latency.p50),
                fmt_us(snap.latency.p99),
                fmt_us(snap.latency.max),
                fmt_count(snap.totals.error_total()),
            ),
        };
        eprint!("\r\x1b[2K{line}");
    }
}
