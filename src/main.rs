//! The `tailscope` binary: parse → validate → run → map the outcome to an exit code.
//! The work is done by the crates under `crates/`; this is CLI and wiring only.

mod args;
mod exit;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::args::{Cli, Command};
use crate::exit::{Outcome, UsageError};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Serve(args)) => serve::serve(args),
        None => {
            // The default job (the embedded reference server under the live dashboard) needs
            // the server, targets and TUI crates, which are not built yet.
            let _ = Cli::command().print_help();
            eprintln!(
                "\ntailscope: the default run (embedded reference server + live dashboard) is not \
                 built yet; load a server with `tailscope run http://127.0.0.1:PORT/`"
            );
            Ok(Outcome::Usage)
        }
    };
    match result {
        Ok(outcome) => outcome.code(),
        Err(err) => {
            if let Some(usage) = err.downcast_ref::<UsageError>() {
                eprintln!("tailscope: {usage}");
                return Outcome::Usage.code();
            }
            eprintln!("tailscope: {err:#}");
            Outcome::Failure.code()
        }
    }
}
