//! `tailscope report FILE.json --html OUT.html`: a saved JSON report as a self-contained page.

use std::path::Path;

use anyhow::{Context, Result};
use tailscope_report::{AnyReport, ReadError};

use crate::args::ReportArgs;
use crate::exit::{Outcome, UsageError};

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
        .with_context(|| format!("cannot write the HTML report to {}", path.display()))
}

/// Runs `tailscope report`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    let page = match load_report(&args.file)? {
        AnyReport::Run(report) => tailscope_report::run_page(&report),
        AnyReport::Suite(suite) => tailscope_report::suite::page(&suite),
    };
    write_page(&page, &args.html)?;
    say!("tailscope: wrote {}", args.html.display());
    Ok(Outcome::Success)
}
