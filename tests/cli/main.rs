//! The command line itself: flags and their help, refusals and exit codes, the shipped examples,
//! the golden report, runs cut short.
//!
//! One test binary with a module per topic (as ripgrep's tests/integration), so the workspace
//! is linked once for the group rather than once per file. Tests that need the machine quiet
//! take [`common::quiet_machine`]: tests of different modules run concurrently here.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_conventions;
mod examples;
mod exit;
mod golden;
mod unfinished;
