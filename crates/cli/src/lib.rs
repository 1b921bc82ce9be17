//! tailscope's command line, as ripgrep splits it: [`args`] is what clap reads (the low
//! arguments: clap derive, doc comments as the help text, each number checked against its
//! range at parse time), [`run::run_config`] turns `run`'s flags into a validated
//! [`tailscope_session::RunConfig`] (the high arguments: flags checked against each other,
//! files read, the open-file limit fitted in `process`) before anything starts. Every
//! refusal is a [`tailscope_session::UsageError`] (exit 2) whose message names the flag to
//! change. The binary (`src/`) parses, dispatches each subcommand to the crate that does the
//! work and maps the outcome to an exit code.
//!
//! Why a crate of its own: the flags and their validation are one concept, the only code
//! that knows the command line; apart from the binary they are unit-tested without it
//! (`cargo test -p tailscope-cli`), and the libraries below know nothing of flags.

pub mod args;
pub mod find_max;
mod process;
pub mod run;
mod shape;
