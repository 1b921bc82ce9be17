//! Exit codes, as documented in README.md.

use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: the run finished and every threshold held.
    Success,
    /// 1: something failed at run time (could not start, could not write the report), or
    /// no request got any response (the run measured nothing).
    Failure,
    /// 2: bad flags, URL, threshold expression or input file, a number out of its range, an
    /// unwritable output path or one that is an input or another output, `-c` beyond the
    /// open-file limit; nothing was run.
    Usage,
    /// 99: the run finished but a `--fail-if` threshold did not hold.
    ThresholdFailed,
    /// 130: stopped early by Ctrl-C or SIGTERM; the summary was still printed.
    Interrupted,
}

impl Outcome {
    /// The process exit code.
    pub fn code(self) -> ExitCode {
        ExitCode::from(match self {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::Usage => 2,
            Outcome::ThresholdFailed => 99,
            Outcome::Interrupted => 130,
        })
    }
}

/// An error in what the user asked for (exit code 2), with a message that says what to do.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
