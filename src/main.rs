//! The `tailscope` binary: parse → validate → run → map the outcome to an exit code.
//! The work is done by the crates under `crates/`; this is CLI and wiring only.

#[macro_use]
extern crate tailscope_session;

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
        Ok(outcome) => exit::code(outcome),
        Err(err) => {
            if let Some(usage) = err.downcast_ref::<UsageError>() {
                say!("tailscope: {usage}");
                return exit::code(Outcome::Usage);
            }
            say!("tailscope: {err:#}");
            exit::code(Outcome::Failure)
        }
    }
}
