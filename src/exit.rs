//! Exit codes, as documented in README.md.

use std::process::ExitCode;

pub use tailscope_session::{Outcome, UsageError};

/// The process exit code of how a command ended.
pub fn code(outcome: Outcome) -> ExitCode {
    ExitCode::from(match outcome {
        Outcome::Success => 0,
        Outcome::Failure => 1,
        Outcome::Usage => 2,
        Outcome::ThresholdFailed => 99,
        Outcome::Interrupted => 130,
    })
}
