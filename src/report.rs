//! `tailscope report FILE --html OUT.html [--json OUT.json] [--text]`: a saved JSON report (a
//! run's or a suite's) as a self-contained page, or a run's journal rebuilt into its report
//! (docs/journal.md), written in any of those forms.

use std::path::Path;

use anyhow::Result;
use clap::Parser as _;
use tailscope_cli::args::{Cli, Command, ReportArgs};
use tailscope_report::document::Report;
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
    let mut config = tailscope_cli::run::run_config(run).map_err(|e| cannot(e.to_string()))?;
    let _ = config.plan.set_url(&journal.header.url);
    Ok(tailscope_session::journal::rebuild(&journal, &config.plan))
}
