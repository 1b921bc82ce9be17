//! `tailscope report FILE.json --html OUT.html`: a saved JSON report (a run's or a suite's) as a
//! self-contained page; the pages' files for `run`, `suite` and `compare --html`, and the
//! dashboard's `s` (the page of the run so far).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tailscope_forensics::CpuBusy;
use tailscope_loadgen::report::{Report, TargetInfo};
use tailscope_loadgen::{Plan, RunTotals, Snapshot};
use tailscope_report::{AnyReport, ReadError};
use tailscope_tui::app::Action;
use tailscope_tui::Feed;

use crate::args::ReportArgs;
use crate::exit::{Outcome, UsageError};
use crate::process::{check_files, Output};

/// Reads a saved report of either kind, failing with a usage error that says what the file is
/// instead.
pub fn load_report(path: &Path) -> Result<AnyReport, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    AnyReport::from_json(&text).map_err(|e| {
        UsageError(match e {
            ReadError::UnknownKind => format!(
                "{} is not a tailscope JSON report: give one written by `tailscope run --json` or `tailscope suite --json`",
                path.display()
            ),
            e => format!("{} is {e}", path.display()),
        })
    })
}

/// Writes an HTML page to `path`.
pub fn write_page(page: &str, path: &Path) -> Result<()> {
    std::fs::write(path, page)
        .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    say!("tailscope: wrote {}", path.display());
    Ok(())
}

/// Writes a finished report where it was asked for: the text on stdout (on stderr when the
/// JSON goes to stdout, `--json -`), the JSON to its file, the HTML page to its file.
pub fn emit(
    report: &Report,
    text: &str,
    json: Option<&std::path::Path>,
    html: Option<&std::path::Path>,
) -> Result<()> {
    if json.is_some_and(|p| p.as_os_str() == "-") {
        say_part!("{text}");
        crate::process::print_stdout(&report.to_json())?;
    } else {
        crate::process::print_stdout(text)?;
        if let Some(path) = json {
            std::fs::write(path, report.to_json() + "\n")
                .with_context(|| format!("cannot write the JSON report to {}", path.display()))?;
        }
    }
    if let Some(path) = html {
        write_page(&tailscope_report::run_page(report), path)?;
    }
    Ok(())
}

/// Runs `tailscope report`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    check_files(
        &[&args.file],
        &[Output {
            flag: "--html",
            what: "HTML report",
            path: &args.html,
        }],
    )?;
    let page = match load_report(&args.file)? {
        AnyReport::Run(report) => tailscope_report::run_page(&report),
        AnyReport::Suite(suite) => tailscope_report::suite::page(&suite),
    };
    write_page(&page, &args.html)?;
    Ok(Outcome::Success)
}

/// Where the page of the run so far goes: beside the `--html` page when there is one
/// (`report-at-12s.html`), otherwise `tailscope-at-12s.html` in the working directory.
fn so_far_path(html: Option<&Path>, snap: &Snapshot) -> PathBuf {
    let at = format!("at-{}s.html", snap.elapsed.as_secs());
    match html {
        Some(p) => {
            let stem = p
                .file_stem()
                .map_or("tailscope".into(), |s| s.to_string_lossy());
            p.with_file_name(format!("{stem}-{at}"))
        }
        None => PathBuf::from(format!("tailscope-{at}")),
    }
}

/// Saves the HTML page of the run so far (the dashboard's `s`) on a thread of its own, so the
/// run's snapshots are not held up by the drawing, and tells the dashboard where it went.
pub fn save_so_far(
    plan: &Plan,
    snap: &Snapshot,
    cpu_busy: CpuBusy,
    target: Option<&TargetInfo>,
    html: Option<&Path>,
    feed: &Feed,
) {
    let path = so_far_path(html, snap);
    let (plan, snap, target, to_dashboard) =
        (plan.clone(), snap.clone(), target.cloned(), feed.clone());
    let saving = std::thread::Builder::new()
        .name("tailscope-save".into())
        .spawn(move || {
            let mut report = Report::new(&plan, &RunTotals::so_far(&snap));
            report.target = target;
            cpu_busy.fill(&mut report);
            report.warnings.insert(
                0,
                format!(
                    "Saved from the dashboard {:.1} s into the run while it went on: connect times and the uncorrected latency are not in this page, the time series holds the last two minutes, and the profile (but for per-CPU busy) and the diagnosis come at the end.",
                    snap.elapsed.as_secs_f64()
                ),
            );
            let note = match std::fs::write(&path, tailscope_report::run_page_so_far(&report)) {
                Ok(()) => format!("saved {}", path.display()),
                Err(e) => format!("cannot save {}: {e}", path.display()),
            };
            let _ = to_dashboard.send(Action::Note(note));
        });
    if let Err(e) = saving {
        let _ = feed.send(Action::Note(format!("cannot save the report: {e}")));
    }
}
