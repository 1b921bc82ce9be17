//! `tailscope find-max` end to end: searches that read a server's limit.
//!
//! A test binary of its own (a `[[test]]` target in the root Cargo.toml) because a search's
//! verdicts are timing: cargo runs test binaries one after another, so here no other test
//! binary's tests run beside them and take the CPU (in tests/generator they were recorded
//! inconclusive in a full `cargo test --workspace`, and decided when run alone). Within this
//! binary the searches take [`common::quiet_machine`] and so run one at a time.

#[path = "../common/mod.rs"]
mod common;

mod dashboard;
mod find_max;
