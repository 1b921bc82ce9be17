//! A suite: several servers × several endpoints, side by side.
//!
//! Every target is started and waited for first; then for each endpoint: each target's
//! warm-up (not recorded), then `runs` rounds of one measured run per target, the first round
//! in file order and each later one shuffled (the seed and orders in the JSON), so that a drift
//! of the machine is shared by the targets rather than pinned on one; then every target stops. Progress goes to stderr, a
//! markdown table to stdout, every run and the host to the JSON.

use std::path::{Path, PathBuf};

use crate::profiler::RunProfiler;
use anyhow::{Context, Result};
use tailscope_loadgen::RunControl;
use tailscope_report::document::{fmt_count, fmt_rate, fmt_us, Report, Tool};
use tailscope_report::suite::file::Suite;
use tailscope_report::suite::{
    markdown, round_order, rounds, summarize, Host, RunFigures, SuiteReport, SuiteResult,
};
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
    load.plan("http://127.0.0.1:1/", &client_cpus, load.measured_stop())
        .map_err(|e| UsageError(format!("{}: {e:#}", path.display())))?;
    let control = RunControl::new();
    watch_signals(&control)?;
    let host = Host::of_this_machine();
    say!(
        "suite: {} target(s) × {} endpoint(s) × {} round(s) of one run each (interleaved), runs of {}, warm-up {}; servers on CPU {}, generator on CPU {}",
        suite.targets.len(),
        suite.endpoints.len(),
        load.runs,
        tailscope_report::suite::file::Load::describe(Some(load.measured_stop())),
        tailscope_report::suite::file::Load::describe(load.warmup_stop()),
        format_list(&server_cpus),
        format_list(&client_cpus)
    );
    // Every target is started first and kept up: the rounds go from one to the next.
    let (live, failures) = start_targets(&suite, &server_cpus, &control);
    let failed = failures.iter().any(Option::is_some);
    let rounds = round_order(
        live.len(),
        load.runs,
        suite.seed.unwrap_or(rounds::DEFAULT_SEED),
    );
    let bench = Bench {
        suite: &suite,
        server_cpus: &server_cpus,
        client_cpus: &client_cpus,
        control: &control,
    };
    let runs = bench.rounds(&live, &rounds.order)?;
    for target in live.into_iter().flatten() {
        target.stop();
    }
    let mut results = results_of(&suite, &failures, runs);
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
        load: load.report(&server_cpus, &client_cpus),
        results,
        interrupted: control.is_stopped(),
        rounds: Some(rounds),
    };
    write_outputs(
        &report,
        &table,
        json_path.as_deref(),
        markdown_path.as_deref(),
        html.as_deref(),
    )?;
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

/// Starts every target of the suite on the server's CPUs, in file order, until a signal: the
/// targets up (None for one that could not start), and why each that could not did not.
fn start_targets(
    suite: &Suite,
    server_cpus: &[usize],
    control: &RunControl,
) -> (Vec<Option<Target>>, Vec<Option<String>>) {
    let mut live: Vec<Option<Target>> = Vec::new();
    let mut failures: Vec<Option<String>> = Vec::new();
    for (name, spec) in &suite.targets {
        if control.is_stopped() {
            break;
        }
        say!("suite: starting {name} ({})", spec.kind());
        match Target::launch_unless_stopped(spec, server_cpus, &control.flag()) {
            Ok(t) => {
                live.push(Some(t));
                failures.push(None);
            }
            Err(e @ tailscope_targets::Error::Interrupted { .. }) => {
                say!("suite: {e}");
                break;
            }
            Err(e) => {
                say!("suite: {name} could not start: {e}");
                live.push(None);
                failures.push(Some(e.to_string()));
            }
        }
    }
    (live, failures)
}

/// One result per target (of those reached) × endpoint, with its runs in round order.
fn results_of(
    suite: &Suite,
    failures: &[Option<String>],
    mut runs: Vec<Vec<Vec<RunFigures>>>,
) -> Vec<SuiteResult> {
    let mut results = Vec::new();
    for (t, (name, _)) in suite.targets.iter().enumerate().take(failures.len()) {
        for (e, endpoint) in suite.endpoints.iter().enumerate() {
            results.push(SuiteResult::new(
                name,
                endpoint,
                failures[t].clone(),
                std::mem::take(&mut runs[t][e]),
            ));
        }
    }
    results
}

/// The table on stdout (on stderr when the JSON takes stdout), the JSON, the page and the
/// markdown file.
fn write_outputs(
    report: &SuiteReport,
    table: &str,
    json_path: Option<&Path>,
    markdown_path: Option<&Path>,
    html: Option<&Path>,
) -> Result<()> {
    let json = serde_json::to_string_pretty(report).context("serializing the suite report")? + "\n";
    match json_path {
        Some(p) if p.as_os_str() == "-" => {
            say_part!("{table}");
            print_stdout(&json)?;
        }
        other => {
            print_stdout(table)?;
            if let Some(p) = other {
                std::fs::write(p, &json)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                say!("tailscope: wrote {}", p.display());
            }
        }
    }
    if let Some(p) = html {
        write_page(&tailscope_report::suite::page(report), p)?;
    }
    if let Some(p) = markdown_path {
        std::fs::write(p, table).with_context(|| format!("cannot write {}", p.display()))?;
        say!("tailscope: wrote {}", p.display());
    }
    Ok(())
}

/// What every measured run of a suite shares: the suite, where the servers and the generator
/// run, and the stop flag.
#[derive(Clone, Copy)]
struct Bench<'a> {
    suite: &'a Suite,
    server_cpus: &'a [usize],
    client_cpus: &'a [usize],
    control: &'a RunControl,
}

impl Bench<'_> {
    /// Every endpoint in turn: each target's warm-up, then the rounds of one measured run per
    /// target in each round's order, until a signal. `runs[target][endpoint]`, each in round
    /// order.
    fn rounds(
        &self,
        live: &[Option<Target>],
        order: &[Vec<usize>],
    ) -> Result<Vec<Vec<Vec<RunFigures>>>> {
        let suite = self.suite;
        let mut runs: Vec<Vec<Vec<RunFigures>>> =
            vec![vec![Vec::new(); suite.endpoints.len()]; live.len()];
        'endpoints: for (e, endpoint) in suite.endpoints.iter().enumerate() {
            self.warm_up(endpoint, live)?;
            for (round, order) in order.iter().enumerate() {
                for &t in order {
                    if self.control.is_stopped() {
                        break 'endpoints;
                    }
                    let Some(target) = &live[t] else { continue };
                    let (name, spec) = &suite.targets[t];
                    let label = format!("{name} {endpoint} run {}/{}", round + 1, suite.load.runs);
                    match self.measure(t, endpoint, target, spec, &label)? {
                        Some(figures) => runs[t][e].push(figures),
                        None => break 'endpoints,
                    }
                }
            }
        }
        Ok(runs)
    }

    /// Each target's warm-up on `endpoint` (not recorded), when the suite has one.
    fn warm_up(&self, endpoint: &str, live: &[Option<Target>]) -> Result<()> {
        let suite = self.suite;
        let Some(stop) = suite.load.warmup_stop() else {
            return Ok(());
        };
        for (t, target) in live.iter().enumerate() {
            let Some(target) = target else { continue };
            let (name, spec) = &suite.targets[t];
            let streams = suite.streams.get(name).copied().unwrap_or(1);
            say!("suite: {name} {endpoint} warm-up");
            let plan = served(
                suite.plan(endpoint, &target.base_url(), self.client_cpus, stop)?,
                target,
                spec,
                streams,
            );
            tailscope_loadgen::run(&plan, self.control, |_| {})?;
        }
        Ok(())
    }

    /// One measured run of target `t` on `endpoint`: its figures, or None when the run was
    /// cut short by an interruption (left out: shorter than the others and cut at an arbitrary
    /// moment, in the median and the range it would pass for a measurement of the same load).
    fn measure(
        &self,
        t: usize,
        endpoint: &str,
        target: &Target,
        spec: &tailscope_targets::TargetSpec,
        label: &str,
    ) -> Result<Option<RunFigures>> {
        let Bench {
            suite,
            server_cpus,
            client_cpus,
            control,
        } = *self;
        let name = &suite.targets[t].0;
        let streams = suite.streams.get(name).copied().unwrap_or(1);
        let plan = served(
            suite.plan(
                endpoint,
                &target.base_url(),
                client_cpus,
                suite.load.measured_stop(),
            )?,
            target,
            spec,
            streams,
        );
        let mut profiler = RunProfiler::new(
            Some(target.root_pid()),
            server_cpus.to_vec(),
            client_cpus.to_vec(),
            false,
        )
        .watching_listeners(plan.addr);
        let totals = tailscope_loadgen::run(&plan, control, |snap| {
            profiler.on_snapshot(snap);
        })?;
        crate::run::say_notes(&totals);
        let mut report = Report::new(&plan, &totals);
        profiler.cpu_busy().fill(&mut report.timeseries);
        let findings = profiler.finish(&plan, &totals, report.summary.requests);
        let server_us_per_request = findings.profile.target.and_then(|t| t.service_demand_us);
        if report.interrupted {
            say!("suite: {label}: cut short by the interruption, left out");
            return Ok(None);
        }
        let figures =
            RunFigures::of(&report, server_us_per_request).with_diagnosis(&findings.diagnosis);
        say!(
            "suite: {label}: {} req/s, p99 {}, errors {}, non-2xx {}, server {}/req",
            fmt_rate(figures.rps),
            figures.p99_us.map_or("n/a".into(), fmt_us),
            fmt_count(figures.errors),
            fmt_count(figures.non2xx),
            figures
                .server_us_per_request
                .map_or("n/a".into(), |u| format!("{u:.2} µs"))
        );
        Ok(Some(figures))
    }
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
