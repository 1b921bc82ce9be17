//! Exit codes, as documented in README.md and in `tailscope --help` (both from [`CODES`]).

use std::process::ExitCode;

pub use tailscope_session::{Outcome, UsageError};

/// Every outcome, its exit code and what it means in a line: the one table that [`code`]
/// maps by and the top-level help prints.
pub const CODES: [(Outcome, u8, &str); 6] = [
    (
        Outcome::Success,
        0,
        "finished and every --fail-if held (or stopped from the dashboard)",
    ),
    (
        Outcome::Failure,
        1,
        "a run-time failure: could not start, could not write a report, or no response at all",
    ),
    (
        Outcome::Usage,
        2,
        "bad flags, URL or input, or an output that cannot be written: nothing was sent",
    ),
    (
        Outcome::OutputIncomplete,
        3,
        "the run finished but an output (journal, JSON, HTML, HDR log, CSV) could not be written whole: stderr names it",
    ),
    (
        Outcome::ThresholdFailed,
        99,
        "the run finished but a --fail-if threshold did not hold",
    ),
    (
        Outcome::Interrupted,
        130,
        "stopped by SIGINT or SIGTERM (the summary and reports still written)",
    ),
];

/// The process exit code of how a command ended.
pub fn code(outcome: Outcome) -> ExitCode {
    let (_, code, _) = CODES
        .iter()
        .find(|(o, _, _)| *o == outcome)
        .expect("every outcome is in CODES");
    ExitCode::from(*code)
}

/// The exit codes as the help prints them: one a line, the code then what it means.
pub fn help_table() -> String {
    CODES
        .iter()
        .map(|(_, code, meaning)| format!("  {code:<4} {meaning}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_one_code() {
        for outcome in [
            Outcome::Success,
            Outcome::Failure,
            Outcome::Usage,
            Outcome::ThresholdFailed,
            Outcome::Interrupted,
            Outcome::OutputIncomplete,
        ] {
            assert_eq!(CODES.iter().filter(|(o, _, _)| *o == outcome).count(), 1);
        }
        let codes: std::collections::BTreeSet<u8> = CODES.iter().map(|(_, c, _)| *c).collect();
        assert_eq!(codes.len(), CODES.len(), "no two outcomes share a code");
    }
}
