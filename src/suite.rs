//! `tailscope suite FILE.toml`: the file read and the outputs checked here, the suite run by
//! `tailscope_session::suite`.

use anyhow::Result;
use tailscope_cli::args::SuiteArgs;
use tailscope_report::suite::file::{self, Suite};
use tailscope_session::files::{check_files, Output};
use tailscope_session::suite::SuiteConfig;

use crate::exit::{Outcome, UsageError};

/// Runs a suite file.
pub fn suite(args: SuiteArgs) -> Result<Outcome> {
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        UsageError(format!(
            "cannot read suite file {}: {e}",
            args.file.display()
        ))
    })?;
    let suite: Suite = file::parse(&args.file, &text).map_err(UsageError)?;
    check_files(
        &[&args.file],
        &[
            Output::of("--json", "suite report", args.json.as_deref()),
            Output::of("--markdown", "markdown table", args.markdown.as_deref()),
            Output::of("--html", "HTML report", args.html.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>(),
    )?;
    tailscope_session::suite::run(SuiteConfig {
        file: args.file,
        suite,
        json: args.json,
        markdown: args.markdown,
        html: args.html,
    })
}
