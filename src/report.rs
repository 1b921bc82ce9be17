//! `tailscope report FILE.json --html OUT.html`: a saved JSON report as a self-contained page.

use anyhow::{Context, Result};
use tailscope_loadgen::report::Report;

use crate::args::ReportArgs;
use crate::exit::{Outcome, UsageError};

/// Reads a run's JSON report, failing with a usage error that says what the file is instead.
pub fn load_run_report(path: &std::path::Path) -> Result<Report> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "{} is not JSON ({e}): give a report written by `tailscope run --json`",
            path.display()
        ))
    })?;
    if value.get("kind").and_then(|k| k.as_str()) == Some("suite") {
        return Err(UsageError(format!(
            "{} is a suite report: its HTML page is not built yet; `tailscope suite --markdown` writes its table",
            path.display()
        ))
        .into());
    }
    serde_json::from_value(value).map_err(|e| {
        UsageError(format!(
            "{} is not a report written by `tailscope run --json` ({e})",
            path.display()
        ))
        .into()
    })
}

/// Writes `report` as an HTML page to `path`.
pub fn write_html(report: &Report, path: &std::path::Path) -> Result<()> {
    std::fs::write(path, tailscope_report::run_page(report))
        .with_context(|| format!("cannot write the HTML report to {}", path.display()))
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
        write_html(report, path)?;
    }
    Ok(())
}

/// Runs `tailscope report`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    let report = load_run_report(&args.file)?;
    write_html(&report, &args.html)?;
    say!("tailscope: wrote {}", args.html.display());
    Ok(Outcome::Success)
}
