//! Where a finished report goes: stdout (a closed pipe is not an error) and the report files.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use tailscope_report::document::Report;
use tailscope_report::threshold::Threshold;
use tailscope_report::{AnyReport, ReadError};

use crate::UsageError;

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}

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

/// Writes an HdrHistogram interval log (`--hdr-log`) to `path` with `write`: the run's own
/// at its end, or `report JOURNAL --hdr-log`'s from the journal.
pub fn write_hdr_log(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let what = || format!("cannot write the HdrHistogram log to {}", path.display());
    let mut file = std::fs::File::create(path).with_context(what)?;
    write(&mut file).with_context(what)?;
    file.flush().with_context(what)?;
    say!("tailscope: wrote {}", path.display());
    Ok(())
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
pub fn emit(report: &Report, text: &str, json: Option<&Path>, html: Option<&Path>) -> Result<()> {
    // The same bytes on stdout as in a file, ending in a newline (a shell prompt after
    // `--json -` otherwise starts on the closing brace's line).
    let json_text = || report.to_json() + "\n";
    if json.is_some_and(|p| p.as_os_str() == "-") {
        say_part!("{text}");
        print_stdout(&json_text())?;
    } else {
        print_stdout(text)?;
        if let Some(path) = json {
            std::fs::write(path, json_text())
                .with_context(|| format!("cannot write the JSON report to {}", path.display()))?;
            // Every file written is announced, as the HTML page is (and suite's files are).
            say!("tailscope: wrote {}", path.display());
        }
    }
    if let Some(path) = html {
        write_page(&tailscope_report::run_page(report), path)?;
    }
    Ok(())
}

/// Writes the per-second series (`--csv`) and the slowest requests (`--csv-slowest`) as CSV,
/// each where it was asked for.
pub fn write_csv(report: &Report, series: Option<&Path>, slowest: Option<&Path>) -> Result<()> {
    use tailscope_report::csv::{write_series, write_slowest};
    let create = |path: &Path, what: &str| {
        std::fs::File::create(path)
            .map(std::io::BufWriter::new)
            .with_context(|| format!("cannot write the {what} to {}", path.display()))
    };
    if let Some(path) = series {
        let what = "CSV series";
        write_series(&report.timeseries, create(path, what)?)
            .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    }
    if let Some(path) = slowest {
        let what = "CSV of the slowest requests";
        write_slowest(&report.slowest, create(path, what)?)
            .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    }
    Ok(())
}

/// Checks each threshold (`--fail-if`) against the report, saying each verdict on stderr;
/// returns how many failed.
pub fn judge(report: &Report, thresholds: &[Threshold]) -> usize {
    let mut failed = 0;
    for t in thresholds {
        let verdict = t.check(report);
        failed += usize::from(!verdict.passed);
        say!("{verdict}");
    }
    failed
}
