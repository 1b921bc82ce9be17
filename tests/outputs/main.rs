//! The run's outputs end to end: HTML pages, the terminal dashboard, suites, the journal.
//!
//! One test binary with a module per topic (as ripgrep's tests/integration), so the workspace
//! is linked once for the group rather than once per file. Tests that need the machine quiet
//! take [`common::quiet_machine`]: tests of different modules run concurrently here.

#[path = "../common/mod.rs"]
mod common;

mod html;
mod journal;
mod suite;
mod tui;
