//! The verdicts end to end: forensics' named causes, errors, runtimes, stacks, the
//! process tree, targets, the guardian and the remote agent.
//!
//! One test binary with a module per topic (as ripgrep's tests/integration), so the workspace
//! is linked once for the group rather than once per file. Tests that need the machine quiet
//! take [`common::quiet_machine`]: tests of different modules run concurrently here.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod agent_container;
mod agent_launch;
mod errors;
mod forensics;
mod guardian;
mod netns;
mod runtimes;
mod stacks;
mod targets;
mod tree;
