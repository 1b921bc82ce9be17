//! `tailscope report FILE.json --html OUT.html`: a saved JSON report (a run's or a suite's) as a
//! self-contained page.

use anyhow::Result;
use tailscope_cli::args::ReportArgs;
use tailscope_report::AnyReport;
use tailscope_session::files::{check_files, Output};
use tailscope_session::output::{load_report, write_page};

use crate::exit::Outcome;

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
