//! `tailscope report FILE --html OUT.html [--json OUT.json] [--text]`: a saved JSON report (a
//! run's or a suite's) as a self-contained page, or a run's journal rebuilt into its report
//! (docs/journal.md), written in any of those forms.

use std::path::Path;

use anyhow::Result;
use clap::Parser as _;
use tailscope_cli::args::{Cli, Command, ReportArgs, RunArgs};
use tailscope_report::document::Report;
use tailscope_report::knee::{knee_page, knee_text, KneeReport};
use tailscope_report::{journal, AnyReport};
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{emit, load_report, write_page};

use crate::exit::{Outcome, UsageError};

/// Runs `tailscope report`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    check_files(
        &[&args.file],
        &[
            Output::of("--html", "HTML report", args.html.as_deref()),
            Output::of("--json", "JSON report", args.json.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
    )?;
    if args.html.is_none() && args.json.is_none() && !args.text {
        return Err(UsageError(
            "say what to write: --html OUT.html, --json OUT.json or --text".into(),
        )
        .into());
    }
    let bytes = std::fs::read(&args.file)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", args.file.display())))?;
    if journal::is_journal(&bytes) {
        let report = from_journal(&bytes, &args.file)?;
        let text = if args.text {
            report.to_text()
        } else {
            String::new()
        };
        emit(&report, &text, args.json.as_deref(), args.html.as_deref())?;
        return Ok(Outcome::Success);
    }
    if let Some(knee) = KneeReport::from_json(&bytes) {
        let knee = knee.map_err(|e| UsageError(format!("{} is {e}", args.file.display())))?;
        return find_max_outputs(&knee, &args);
    }
    let any = load_report(&args.file)?;
    if let (AnyReport::Run(report), true) = (&any, args.json.is_some() || args.text) {
        let text = if args.text {
            report.to_text()
        } else {
            String::new()
        };
        emit(report, &text, args.json.as_deref(), args.html.as_deref())?;
        return Ok(Outcome::Success);
    }
    let page = match any {
        AnyReport::Run(report) => tailscope_report::run_page(&report),
        AnyReport::Suite(suite) => tailscope_report::suite::page(&suite),
    };
    match &args.html {
        Some(html) => write_page(&page, html)?,
        None => return Err(UsageError("a suite's report is written as --html only".into()).into()),
    }
    Ok(Outcome::Success)
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
/// recorded, then its seconds (or its end record, when the run ended normally).
fn from_journal(bytes: &[u8], path: &Path) -> Result<Report> {
    let journal =
        journal::read(bytes).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    if let journal::Tail::Damaged { offset, bytes } = journal.tail {
        tailscope_session::say!(
            "tailscope: {}: its last {bytes} bytes (from offset {offset}) are not a whole record (the run stopped mid-write): read up to them",
            path.display()
        );
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
    Ok(tailscope_session::journal::rebuild(&journal, &config.plan))
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
