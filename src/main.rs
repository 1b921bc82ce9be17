//! The `tailscope` binary: parse → validate → run → map the outcome to an exit code.
//! The work is done by the crates under `crates/`; this is CLI and wiring only.

/// Writes a line to stderr. A closed stderr (`2>&-`, a pipe whose reader left) is not an
/// error: the run goes on and the exit code stays what the run decides (`eprintln!` panics).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the newline.
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod compare;
mod exit;
mod merge;
mod process;
mod report;
mod run;
mod serve;
mod suite;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::exit::{Outcome, UsageError};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Serve(args)) => serve::serve(args),
        Some(Command::Suite(args)) => suite::suite(args),
        Some(Command::Compare(args)) => compare::compare(args),
        Some(Command::Report(args)) => report::report(args),
        Some(Command::Merge(args)) => merge::merge(args),
        // The main job: the embedded reference server under a 10 s load, on the live dashboard
        // when stdout is a terminal, headless (printing the summary) otherwise.
        None => match Cli::parse_from(["tailscope", "run", "--target", "embedded", "-z", "10s"])
            .command
        {
            Some(Command::Run(args)) => run::run(args),
            _ => unreachable!("the default command line parses as run"),
        },
    };
    match result {
        Ok(outcome) => outcome.code(),
        Err(err) => {
            if let Some(usage) = err.downcast_ref::<UsageError>() {
                say!("tailscope: {usage}");
                return Outcome::Usage.code();
            }
            say!("tailscope: {err:#}");
            Outcome::Failure.code()
        }
    }
}
