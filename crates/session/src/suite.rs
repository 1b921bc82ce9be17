//! A suite: several servers × several endpoints, side by side.
//!
//! For each target in file order: start it, wait until ready, then for each endpoint: a
//! warm-up (not recorded) and `runs` measured runs; then stop it. Progress goes to stderr, a
//! markdown table to stdout, every run and the host to the JSON.

use std::path::PathBuf;

use crate::profiler::RunProfiler;
use anyhow::{Context, Result};
use tailscope_loadgen::RunControl;
use tailscope_report::document::{fmt_count, fmt_rate, fmt_us, Report, Tool};
use tailscope_report::suite::file::Suite;
use tailscope_report::suite::{markdown, summarize, Host, RunFigures, SuiteReport, SuiteResult};
use tailscope_targets::cpus::{self, format_list};
use tailscope_targets::Target;

use crate::output::{print_stdout, write_page};
use crate::run::trust_target;
use crate::signals::{signalled, watch_signals};
use crate::{Outcome, UsageError};

/// A suite read and checked, and where its results go.
pub struct SuiteConfig {
    /// The suite file, for messages.
    pub file: PathBuf,
    /// What it holds.
    pub suite: Suite,
    /// Where the JSON goes (`-`: stdout, the table then goes to stderr).
    pub json: Option<PathBuf>,
    /// Where the markdown table also goes.
    pub markdown: Option<PathBuf>,
    /// Where the HTML page goes.
    pub html: Option<PathBuf>,
}

/// Runs a suite: every target × endpoint, then the table, the JSON and the page.
pub fn run(config: SuiteConfig) -> Result<Outcome> {
    let SuiteConfig {
        file: path,
        suite,
        json: json_path,
        markdown: markdown_path,
        html,
    } = config;
    let load = &suite.load;
    let available = cpus::available();
    let (default_server, default_client) = cpus::default_split(&available);
    let server_cpus = load.server_cpus.clone().unwrap_or(default_server);
    let client_cpus = load.client_cpus.clone().unwrap_or(default_client);
    // Check the load settings once, before any server starts.
    load.plan("http://127.0.0.1:1/", &client_cpus, load.duration)
        .map_err(|e| UsageError(format!("{}: {e:#}", path.display())))?;
    let control = RunControl::new();
    watch_signals(&control)?;
    let host = Host::of_this_machine();
    say!(
        "suite: {} target(s) × {} endpoint(s) × {} run(s) of {}, warm-up {}; servers on CPU {}, generator on CPU {}",
        suite.targets.len(),
        suite.endpoints.len(),
        load.runs,
        humantime::format_duration(load.duration),
        humantime::format_duration(load.warmup),
        format_list(&server_cpus),
        format_list(&client_cpus)
    );
    let mut results = Vec::new();
    let mut failed = false;
    'targets: for (name, spec) in &suite.targets {
        let streams = suite.streams.get(name).copied().unwrap_or(1);
        if control.is_stopped() {
            break;
        }
        say!("suite: starting {name} ({})", spec.kind());
        let target = match Target::launch_unless_stopped(spec, &server_cpus, &control.flag()) {
            Ok(t) => t,
            Err(e @ tailscope_targets::Error::Interrupted { .. }) => {
                say!("suite: {e}");
                break;
            }
            Err(e) => {
                say!("suite: {name} could not start: {e}");
                failed = true;
                for endpoint in &suite.endpoints {
                    results.push(SuiteResult::new(
                        name,
                        endpoint,
                        Some(e.to_string()),
                        Vec::new(),
                    ));
                }
                continue;
            }
        };
        for endpoint in &suite.endpoints {
            let base = target.base_url();
            if !load.warmup.is_zero() {
                say!("suite: {name} {endpoint} warm-up");
                tailscope_loadgen::run(
                    &served(
                        suite.plan(endpoint, &base, &client_cpus, load.warmup)?,
                        &target,
                        spec,
                        streams,
                    ),
                    &control,
                    |_| {},
                )?;
            }
            let mut runs = Vec::new();
            for i in 1..=load.runs {
                if control.is_stopped() {
                    break;
                }
                let plan = served(
                    suite.plan(endpoint, &base, &client_cpus, load.duration)?,
                    &target,
                    spec,
                    streams,
                );
                let mut profiler = RunProfiler::new(
                    Some(target.root_pid()),
                    server_cpus.clone(),
                    client_cpus.clone(),
                    false,
                )
                .watching_listeners(plan.addr);
                let totals = tailscope_loadgen::run(&plan, &control, |snap| {
                    profiler.on_snapshot(snap);
                })?;
                let mut report = Report::new(&plan, &totals);
                profiler.cpu_busy().fill(&mut report.timeseries);
                let findings = profiler.finish(&plan, &totals, report.summary.requests);
                let server_us_per_request =
                    findings.profile.target.and_then(|t| t.service_demand_us);
                if report.interrupted {
                    // Shorter than the others and cut at an arbitrary moment: in the median and
                    // the range it would pass for a measurement of the same load.
                    say!("suite: {name} {endpoint} run {i}/{}: cut short by the interruption, left out", load.runs);
                    break;
                }
                let figures = RunFigures::of(&report, server_us_per_request)
                    .with_diagnosis(&findings.diagnosis);
                say!(
                    "suite: {name} {endpoint} run {i}/{}: {} req/s, p99 {}, errors {}, non-2xx {}, server {}/req",
                    load.runs,
                    fmt_rate(figures.rps),
                    figures.p99_us.map_or("n/a".into(), fmt_us),
                    fmt_count(figures.errors),
                    fmt_count(figures.non2xx),
                    figures.server_us_per_request.map_or("n/a".into(), |u| format!("{u:.2} µs"))
                );
                runs.push(figures);
            }
            results.push(SuiteResult::new(name, endpoint, None, runs));
            if control.is_stopped() {
                target.stop();
                break 'targets;
            }
        }
        target.stop();
    }
    summarize(&mut results, suite.baseline.as_deref());
    let table = markdown(&results, suite.baseline.as_deref());
    let report = SuiteReport {
        schema_version: tailscope_report::suite::SCHEMA_VERSION,
        kind: "suite".into(),
        tool: Tool {
            name: "tailscope".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        host,
        baseline: suite.baseline.clone(),
        load: load.to_json(&server_cpus, &client_cpus),
        results,
        interrupted: control.is_stopped(),
    };
    let json =
        serde_json::to_string_pretty(&report).context("serializing the suite report")? + "\n";
    match json_path.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            say_part!("{table}");
            print_stdout(&json)?;
        }
        other => {
            print_stdout(&table)?;
            if let Some(p) = other {
                std::fs::write(p, &json)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                say!("tailscope: wrote {}", p.display());
            }
        }
    }
    if let Some(p) = &html {
        write_page(&tailscope_report::suite::page(&report), p)?;
    }
    if let Some(p) = &markdown_path {
        std::fs::write(p, &table).with_context(|| format!("cannot write {}", p.display()))?;
        say!("tailscope: wrote {}", p.display());
    }
    if report.interrupted {
        say!(
            "tailscope: the suite was interrupted: the table holds the runs that finished; the run in progress was cut short and left out, and targets not reached are missing"
        );
    }
    Ok(if signalled() {
        Outcome::Interrupted
    } else if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// The plan as the target is served: trusting the CA of a target served over TLS, and in
/// HTTP/2 with the target's `streams` when it is served so.
fn served(
    mut plan: tailscope_loadgen::Plan,
    target: &Target,
    spec: &tailscope_targets::TargetSpec,
    streams: usize,
) -> tailscope_loadgen::Plan {
    trust_target(&mut plan, target);
    plan.http2 = spec.http2();
    plan.streams = streams;
    plan
}
