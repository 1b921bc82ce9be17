//! `tailscope report FILE --html OUT.html [--json OUT.json] [--text] [--hdr-log OUT.hlog]`: a
//! saved JSON report (a run's or a suite's) as a self-contained page, or a run's journal
//! rebuilt into its report (docs/journal.md), written in any of those forms, and into its
//! HdrHistogram interval log (the journal has every second's histogram).

use std::path::Path;

use anyhow::Result;
use clap::Parser as _;
use tailscope_cli::args::{Cli, Command, ReportArgs, RunArgs};
use tailscope_report::document::{write_report_hdr_log, Report};
use tailscope_report::knee::{knee_page, knee_text, KneeReport};
use tailscope_report::{journal, AnyReport};
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{emit, load_report, write_hdr_log, write_page};

use crate::exit::{Outcome, UsageError};

/// Runs `tailscope report`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    check_files(
        &[&args.file],
        &[
            Output::of("--html", "HTML report", args.html.as_deref()),
            Output::of("--json", "JSON report", args.json.as_deref()),
            Output::of("--hdr-log", "HdrHistogram log", args.hdr_log.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
    )?;
    if args.html.is_none() && args.json.is_none() && !args.text && args.hdr_log.is_none() {
        return Err(UsageError(
            "say what to write: --html OUT.html, --json OUT.json, --text or --hdr-log OUT.hlog"
                .into(),
        )
        .into());
    }
    let bytes = std::fs::read(&args.file)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", args.file.display())))?;
    if journal::is_journal(&bytes) {
        let (report, journal) = from_journal(&bytes, &args.file)?;
        let text = if args.text {
            tailscope_report::findings::saved_summary_text(&report)
        } else {
            String::new()
        };
        emit(&report, &text, args.json.as_deref(), args.html.as_deref())?;
        if let Some(path) = &args.hdr_log {
            let started = std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(journal.header.measure_started_unix_ms);
            write_hdr_log(path, |file| write_report_hdr_log(&report, started, file))?;
        }
        return Ok(Outcome::Success);
    }
    if let Some(knee) = KneeReport::from_json(&bytes) {
        let knee = knee.map_err(|e| UsageError(format!("{} is {e}", args.file.display())))?;
        if args.hdr_log.is_some() {
            return Err(no_seconds(&args.file, "a find-max report"));
        }
        return find_max_outputs(&knee, &args);
    }
    let report = match load_report(&args.file)? {
        AnyReport::Run(report) => report,
        AnyReport::Suite(suite) => {
            if args.hdr_log.is_some() {
                return Err(no_seconds(&args.file, "a suite's report"));
            }
            let Some(html) = &args.html else {
                return Err(UsageError("a suite's report is written as --html only".into()).into());
            };
            write_page(&tailscope_report::suite::page(&suite), html)?;
            return Ok(Outcome::Success);
        }
    };
    // Refused before anything is written.
    let started = match &args.hdr_log {
        Some(_) => Some(measure_started(&report, &args.file)?),
        None => None,
    };
    if args.json.is_some() || args.text {
        let text = if args.text {
            tailscope_report::findings::saved_summary_text(&report)
        } else {
            String::new()
        };
        emit(&report, &text, args.json.as_deref(), args.html.as_deref())?;
    } else if let Some(html) = &args.html {
        write_page(&tailscope_report::run_page(&report), html)?;
    }
    if let (Some(path), Some(started)) = (&args.hdr_log, started) {
        write_hdr_log(path, |file| write_report_hdr_log(&report, started, file))?;
    }
    Ok(Outcome::Success)
}

/// The refusal of `--hdr-log` for a file that is `what`, not one run's.
fn no_seconds(path: &Path, what: &str) -> anyhow::Error {
    UsageError(format!(
        "{} is {what}: --hdr-log is written from one run's JSON report or journal, which have its seconds' histograms",
        path.display()
    ))
    .into()
}

/// When a saved run's measurement began, for its HdrHistogram log; refused (exit 2) for a
/// report without it or without its seconds' histograms (a merged report, which has no one
/// generator's clock).
fn measure_started(report: &Report, path: &Path) -> Result<std::time::SystemTime> {
    let Some(g) = report
        .generator
        .as_ref()
        .filter(|_| !report.second_histograms.is_empty())
    else {
        return Err(no_seconds(
            path,
            "a report without one generator's start and seconds' histograms (a merged one)",
        ));
    };
    let since_epoch = std::time::Duration::try_from_secs_f64(g.started_unix_s)
        .map_err(|_| no_seconds(path, "a report whose start time is not a time"))?;
    Ok(std::time::UNIX_EPOCH + since_epoch)
}

/// A find-max search's report, written again in the forms asked for: its text, its JSON, its
/// page (the curve), as `find-max` itself wrote them.
fn find_max_outputs(knee: &KneeReport, args: &ReportArgs) -> Result<Outcome> {
    if args.text {
        tailscope_session::output::print_stdout(&knee_text(knee))?;
    }
    if let Some(path) = &args.json {
        let json = knee.to_json() + "\n";
        if path.as_os_str() == "-" {
            tailscope_session::output::print_stdout(&json)?;
        } else {
            std::fs::write(path, json)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            tailscope_session::say!("tailscope: wrote {}", path.display());
        }
    }
    if let Some(path) = &args.html {
        write_page(&knee_page(knee, &knee.latency_limits()), path)?;
    }
    Ok(Outcome::Success)
}

/// The run's report rebuilt from its journal: its plan re-read from the command line it
/// recorded, then its seconds (or its end record, when the run ended normally); and the
/// journal as read.
fn from_journal(bytes: &[u8], path: &Path) -> Result<(Report, journal::Journal)> {
    let journal =
        journal::read(bytes).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    if let journal::Tail::Damaged { offset, bytes } = journal.tail {
        tailscope_session::say!(
            "tailscope: {}: its last {bytes} bytes (from offset {offset}) are not a whole record (the run stopped mid-write): read up to them",
            path.display()
        );
    }
    // Killed before its first second ended: there is nothing measured to report, and a
    // report of it would read 0 requests in 0 µs where tens of thousands were sent (a
    // newcomer's finding).
    if journal.end.is_none() && journal.seconds.is_empty() {
        return Err(UsageError(format!(
            "{}: the run stopped before its first second ended: no second was recorded, so there is no report to rebuild",
            path.display()
        ))
        .into());
    }
    let cannot = |why: String| {
        UsageError(format!(
            "{}: the run's plan cannot be rebuilt from the command line it recorded ({why})",
            path.display()
        ))
    };
    let cli =
        Cli::try_parse_from(&journal.header.args).map_err(|e| cannot(e.kind().to_string()))?;
    let Some(Command::Run(run)) = cli.command else {
        return Err(cannot("not a `tailscope run`".into()).into());
    };
    let run = for_rebuild(run, journal.header.cwd.as_deref());
    let mut config = tailscope_cli::run::run_config(run).map_err(|e| cannot(e.to_string()))?;
    let _ = config.plan.set_url(&journal.header.url);
    let report = tailscope_session::journal::rebuild(&journal, &config.plan);
    Ok((report, journal))
}

/// The run's flags made independent of where and when `report` runs (a newcomer's rebuild
/// from another directory was refused: the run's relative `--journal` could not be written
/// from there). Only the plan is wanted: the outputs and the journal are not written again;
/// `--pid`, `--start-at` and the agent were checked at the run's own moment (the server may
/// be gone, the start time past); and the files the run read (`--load`, `-D`, the URL list,
/// TLS files) are found where it ran, when the journal says where that was.
fn for_rebuild(mut run: RunArgs, ran_in: Option<&Path>) -> RunArgs {
    let o = &mut run.output;
    for out in [
        &mut o.json,
        &mut o.html,
        &mut o.csv,
        &mut o.csv_slowest,
        &mut o.hdr_log,
        &mut o.journal,
        &mut o.flamegraph,
        &mut o.flamegraph_slow,
    ] {
        *out = None;
    }
    o.no_journal = true;
    run.target.pid = None;
    run.segment.start_at = None;
    run.agent_link.agent = None;
    run.agent_link.agent_token = None;
    run.agent_link.agent_fingerprint = None;
    if let Some(dir) = ran_in {
        let r = &mut run.request;
        let t = &mut run.tls;
        for input in [
            &mut r.body_file,
            &mut r.load,
            &mut r.urls_from_file,
            &mut t.cacert,
            &mut t.cert,
            &mut t.key,
        ] {
            if let Some(p) = input.as_mut().filter(|p| p.is_relative()) {
                *p = dir.join(&*p);
            }
        }
    }
    run
}
