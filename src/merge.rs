//! `tailscope merge A.json B.json ...`: the generators' reports → one report (the work is
//! `tailscope_report::document::merge`) → JSON, text, thresholds and the exit code.

use anyhow::Result;
use tailscope_cli::args::MergeArgs;
use tailscope_report::document::{self as report, Report};
use tailscope_report::threshold::Threshold;
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{emit, judge, load_report};

use crate::exit::{Outcome, UsageError};

/// Runs `tailscope merge`.
pub fn merge(args: MergeArgs) -> Result<Outcome> {
    let usage = |e: String| anyhow::Error::new(UsageError(e));
    let thresholds = args
        .fail_if
        .iter()
        .map(|e| Threshold::parse(e).map_err(|e| usage(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    check_files(
        &args.files.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &[
            Output::of("--json", "merged JSON report", args.json.as_deref()),
            Output::of("--html", "HTML report", args.html.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
    )?;
    let mut reports = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let r: Report = match load_report(path)? {
            tailscope_report::AnyReport::Run(r) => *r,
            tailscope_report::AnyReport::Suite(_) => {
                return Err(usage(format!(
                    "{} is a suite report: merge the reports of `tailscope run --json` (one per generator)",
                    path.display()
                )))
            }
        };
        reports.push((path.display().to_string(), r));
    }
    let merged = report::merge(&reports, args.force).map_err(|e| usage(e.to_string()))?;
    // A threshold on a name the reports do not hold is a typo (exit 2, as for run), not a
    // failed threshold.
    let names: Vec<String> = merged.by_request.keys().cloned().collect();
    for t in &thresholds {
        t.check_names(&names).map_err(|e| usage(e.to_string()))?;
    }
    let info = merged.merged.as_ref().expect("a merged report says so");
    let mut text = format!(
        "Merged {} report(s){}:\n",
        info.runs.len(),
        info.segments
            .map_or(String::new(), |n| format!(" of {n} segment(s)"))
    );
    for run in &info.runs {
        text += &format!(
            "  {}  host {}  segment {}  started +{:.3} s  {} requests\n",
            run.file,
            run.host.as_deref().unwrap_or("n/a"),
            run.segment.map_or("-".to_string(), |s| s.to_string()),
            run.offset_s,
            report::fmt_count(run.requests)
        );
    }
    text += "\n";
    text += &merged.to_text();
    emit(&merged, &text, args.json.as_deref(), args.html.as_deref())?;
    let failed = judge(&merged, &thresholds);
    if let Some(reason) = merged.no_response_reason() {
        say!("tailscope: {reason}");
        return Ok(Outcome::Failure);
    }
    Ok(if failed > 0 {
        Outcome::ThresholdFailed
    } else {
        Outcome::Success
    })
}
