//! `tailscope compare BASE.json NEW.json`: what changed between two reports, and a CI gate.

use anyhow::Result;
use tailscope_cli::args::CompareArgs;
use tailscope_report::compare;
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{load_report, print_stdout, write_page};

use crate::exit::{Outcome, UsageError};

/// Compares two reports.
pub fn compare(args: CompareArgs) -> Result<Outcome> {
    check_files(
        &[&args.base, &args.new],
        Output::of("--html", "HTML report", args.html.as_deref()).as_slice(),
    )?;
    let base = load_report(&args.base)?;
    let new = load_report(&args.new)?;
    let Some(rows) = compare::rows(&base, &new) else {
        return Err(UsageError(format!(
            "cannot compare a {} report with a {} report",
            base.kind(),
            new.kind()
        ))
        .into());
    };
    let unlike = compare::unlike(&base, &new);
    // A gate on unlike runs judges their settings, not the server: refused before any output,
    // as a bad flag is, unless asked for.
    if args.fail_if_regression.is_some() && !unlike.is_empty() && !args.allow_unlike {
        return Err(UsageError(format!(
            "--fail-if-regression refused: the reports were run with unlike settings ({}), so a change measures those as much as the server; compare like runs, or add --allow-unlike to gate anyway",
            unlike.join("; ")
        ))
        .into());
    }
    print_stdout(&(compare::unlike::note(&unlike) + &compare::markdown(&rows)))?;
    if let Some(path) = &args.html {
        let name = |p: &std::path::Path| p.display().to_string();
        if let Some(page) = compare::page(&base, &new, (&name(&args.base), &name(&args.new))) {
            write_page(&page, path)?;
        }
    }
    let Some(limit) = args.fail_if_regression else {
        return Ok(Outcome::Success);
    };
    let regressions: Vec<String> = rows.iter().filter_map(|r| r.regression(limit)).collect();
    for r in &regressions {
        say!("regression: {r}");
    }
    Ok(if regressions.is_empty() {
        Outcome::Success
    } else {
        Outcome::ThresholdFailed
    })
}
