//! The `tailscope` binary: parse → validate → run → map the outcome to an exit code.
//! The flags and their validation are `tailscope_cli`'s; the work is done by the other
//! crates under `crates/`; this is wiring only.

#[macro_use]
extern crate tailscope_session;

mod agent;
mod compare;
mod completions;
mod exit;
mod help;
mod merge;
mod report;
mod serve;
mod suite;
mod version;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser};
use tailscope_cli::args::{real_refusal, Cli, Command, RunArgs};

use crate::exit::{Outcome, UsageError};

/// The command line as clap reads it, with this binary's description, version (and commit)
/// in its help (the derive in `tailscope_cli` would take its own crate's), the examples and
/// the exit codes; the completions and man pages are generated from it too.
fn command_line() -> clap::Command {
    Cli::command()
        .about(env!("CARGO_PKG_DESCRIPTION"))
        .version(version::SHORT)
        .long_version(version::LONG)
        .after_help(help::top_level())
}

/// `tailscope run`: the flags validated, then the session.
fn run(args: RunArgs) -> Result<Outcome> {
    tailscope_session::run::run(tailscope_cli::run::run_config(args)?)
}

/// `tailscope find-max`: the flags validated, then the search.
fn find_max(args: tailscope_cli::args::FindMaxArgs) -> Result<Outcome> {
    tailscope_session::find_max::find_max(tailscope_cli::find_max::find_max_config(args)?)
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = command_line()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| real_refusal(command_line(), &argv, e).exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Some(Command::Run(args)) => run(args),
        Some(Command::Serve(args)) => serve::serve(args),
        Some(Command::Agent(args)) => agent::agent(args),
        Some(Command::Suite(args)) => suite::suite(args),
        Some(Command::Compare(args)) => compare::compare(args),
        Some(Command::Report(args)) => report::report(args),
        Some(Command::Merge(args)) => merge::merge(args),
        Some(Command::FindMax(args)) => find_max(args),
        Some(Command::Completions(args)) => completions::completions(command_line(), args.shell),
        Some(Command::Man(args)) => completions::man(command_line(), &args.dir),
        // The main job: the embedded reference server under a 10 s load, on the live dashboard
        // when stdout is a terminal, headless (printing the summary) otherwise.
        None => match Cli::parse_from(["tailscope", "run", "--target", "embedded", "-z", "10s"])
            .command
        {
            Some(Command::Run(args)) => run(args),
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
