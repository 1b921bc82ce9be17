//! `tailscope compare BASE.json NEW.json` (or `--base A1.json A2.json --new B1.json B2.json`):
//! what changed between reports, each change judged against the noise, and a CI gate.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tailscope_cli::args::CompareArgs;
use tailscope_report::compare::{self, judged, Mode, Row};
use tailscope_report::document::Report;
use tailscope_report::stats::BootstrapOptions;
use tailscope_report::AnyReport;
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{load_report, print_stdout, write_page};

use crate::exit::{Outcome, UsageError};

/// Compares reports.
pub fn compare(args: CompareArgs) -> Result<Outcome> {
    let (base_files, new_files) = args.sides().map_err(UsageError)?;
    let inputs: Vec<&Path> = base_files
        .iter()
        .chain(&new_files)
        .map(|p| p.as_path())
        .collect();
    let outputs: Vec<Output> = [
        Output::of("--html", "HTML report", args.html.as_deref()),
        Output::of("--json", "JSON comparison", args.json.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    check_files(&inputs, &outputs)?;
    let base = load_all(&base_files)?;
    let new = load_all(&new_files)?;
    let kinds_differ = base.iter().chain(&new).find(|r| r.kind() != base[0].kind());
    let Some(mut rows) = kinds_differ
        .is_none()
        .then(|| compare::rows(&base[0], &new[0]))
        .flatten()
    else {
        let other = kinds_differ.unwrap_or(&new[0]);
        return Err(UsageError(format!(
            "cannot compare a {} report with a {} report",
            base[0].kind(),
            other.kind()
        ))
        .into());
    };
    let unlike = unlike_settings(&base, &new);
    // A gate on unlike runs judges their settings, not the server: refused before any output,
    // as a bad flag is, unless asked for.
    if args.fail_if_regression.is_some() && !unlike.is_empty() && !args.allow_unlike {
        return Err(UsageError(format!(
            "--fail-if-regression refused: the reports were run with unlike settings ({}), so a change measures those as much as the server; compare like runs, or add --allow-unlike to gate anyway",
            unlike.join("; ")
        ))
        .into());
    }
    let options = BootstrapOptions {
        seed: args
            .seed
            .unwrap_or(tailscope_report::stats::bootstrap::DEFAULT_SEED),
        ..BootstrapOptions::default()
    };
    let mode = judge(&mut rows, &base, &new, args.point, &options)?;
    let generator_warnings = compare::generator::generator_warnings(
        &named(&base_files, &base),
        &named(&new_files, &new),
    );
    let text = format!(
        "{}{}{}\n{}",
        compare::generator::note(&generator_warnings),
        compare::unlike::note(&unlike),
        compare::markdown(&rows),
        mode.describe()
    );
    let regressions: Vec<String> = match args.fail_if_regression {
        None => Vec::new(),
        Some(limit) if args.point => rows.iter().filter_map(|r| r.regression(limit)).collect(),
        Some(limit) => rows.iter().filter_map(|r| r.gate(limit)).collect(),
    };
    let json_to_stdout = args.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if json_to_stdout {
        say_part!("{text}\n");
    } else {
        print_stdout(&(text + "\n"))?;
    }
    if let Some(path) = &args.html {
        let name = |p: &PathBuf| p.display().to_string();
        let names = (name(&base_files[0]), name(&new_files[0]));
        if let Some(page) = compare::page(
            &base[0],
            &new[0],
            (&names.0, &names.1),
            &rows,
            mode,
            &generator_warnings,
        ) {
            write_page(&page, path)?;
        }
    }
    if let Some(path) = &args.json {
        let doc = judged::CompareJson {
            kind: "compare".into(),
            base: base_files.iter().map(|p| p.display().to_string()).collect(),
            new: new_files.iter().map(|p| p.display().to_string()).collect(),
            mode,
            method: mode.describe().into(),
            correction: judged::correction_note(&rows),
            unlike: unlike.clone(),
            generator_warnings: generator_warnings.clone(),
            rows: rows.iter().map(judged::RowJson::of).collect(),
            fail_if_regression: args.fail_if_regression,
            regressions: regressions.clone(),
        };
        let json = doc.to_json();
        if json_to_stdout {
            print_stdout(&json)?;
        } else {
            std::fs::write(path, json)
                .with_context(|| format!("cannot write {}", path.display()))?;
            say!("tailscope: wrote {}", path.display());
        }
    }
    if args.fail_if_regression.is_none() {
        return Ok(Outcome::Success);
    }
    for r in &regressions {
        say!("regression: {r}");
    }
    Ok(if regressions.is_empty() {
        Outcome::Success
    } else {
        Outcome::ThresholdFailed
    })
}

/// How every other report's settings differ from the first base's, each difference once.
fn unlike_settings(base: &[AnyReport], new: &[AnyReport]) -> Vec<String> {
    let mut unlike: Vec<String> = Vec::new();
    for other in base.iter().skip(1).chain(new) {
        for d in compare::unlike(&base[0], other) {
            if !unlike.contains(&d) {
                unlike.push(d);
            }
        }
    }
    unlike
}

/// Each report of one side with its file's name.
fn named<'a>(files: &[PathBuf], reports: &'a [AnyReport]) -> Vec<(String, &'a AnyReport)> {
    files
        .iter()
        .map(|p| p.display().to_string())
        .zip(reports.iter())
        .collect()
}

/// Reads each report of one side.
fn load_all(files: &[PathBuf]) -> Result<Vec<AnyReport>, UsageError> {
    files.iter().map(|f| load_report(f)).collect()
}

/// The runs of one side.
fn runs(side: &[AnyReport]) -> Vec<&Report> {
    side.iter()
        .filter_map(|r| match r {
            AnyReport::Run(r) => Some(r.as_ref()),
            AnyReport::Suite(_) => None,
        })
        .collect()
}

/// Judges the rows' changes against the noise (unless `point`), and says how.
fn judge(
    rows: &mut [Row],
    base: &[AnyReport],
    new: &[AnyReport],
    point: bool,
    options: &BootstrapOptions,
) -> Result<Mode, UsageError> {
    match (&base[0], &new[0]) {
        (AnyReport::Run(_), AnyReport::Run(_)) => {
            let mode = Mode::of(base.len(), new.len(), point);
            judged::judge_runs(rows, &runs(base), &runs(new), mode, options);
            Ok(mode)
        }
        (AnyReport::Suite(b), AnyReport::Suite(n)) => {
            if base.len() > 1 || new.len() > 1 {
                return Err(UsageError(
                    "several reports per side are for runs: a suite's own runs are already its units, so give one suite report per side".into(),
                ));
            }
            if point {
                return Ok(Mode::Point);
            }
            judged::judge_suites(rows, b, n, options.confidence);
            Ok(Mode::Runs)
        }
        _ => Ok(Mode::Point),
    }
}
