//! The generator end to end: load shapes and modes, request mixes, TLS, segments and their
//! merge, the reference server, and the figures' confidence.
//!
//! One test binary with a module per topic (as ripgrep's tests/integration), so the workspace
//! is linked once for the group rather than once per file. Tests that need the machine quiet
//! take [`common::quiet_machine`]: tests of different modules run concurrently here.

#[path = "../common/mod.rs"]
mod common;

mod merge;
mod mix;
mod run;
mod segment;
mod serve;
mod shapes;
mod tls;
mod trust;
