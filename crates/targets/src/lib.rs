//! What is under test: launch it, wait until it is ready, pin it, and tear it down.
//!
//! A [`TargetSpec`] names a server (the embedded reference server, nginx from a generated
//! config, or any command). [`Target::launch`] starts it in its own process group, on the
//! server's CPUs ([`cpus`]), waits until it answers HTTP, and returns a guard: [`Target::stop`]
//! sends SIGTERM to its whole process tree ([`tree`]), waits a grace period, then SIGKILL, and
//! reaps; dropping the guard does the same, so a panic leaves nothing behind. If tailscope
//! itself is killed, a guardian process forked at launch kills the tree and removes its
//! temporary directory ([`sys`], the crate's only `unsafe`). The profiler ([`profile`]) follows
//! the same tree; the `tailscope-forensics` crate reads what it measured.

pub mod cert;
pub mod cpus;
mod launch;
pub mod listen;
mod nginx;
pub mod procstat;
pub mod profile;
pub mod seconds;
mod spec;
pub mod stacks;
mod sys;
pub mod tree;

pub use launch::{embedded_args, kill_all_launched, Target, READY_LINE_PREFIX};
pub use spec::{check_nginx_workers, TargetSpec, MAX_NGINX_WORKERS};

use std::path::PathBuf;
use std::process::ExitStatus;

/// The end of a target's stderr for an error message, or a word that it wrote nothing.
fn stderr_part(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        "; it wrote nothing on stderr".into()
    } else {
        format!("; the end of its stderr:\n{stderr}")
    }
}

/// Why a target could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A target description is malformed.
    #[error("{0}")]
    BadSpec(String),
    /// The program to run is not installed.
    #[error("{program} not found on PATH: {hint}")]
    NotInstalled {
        /// The program.
        program: String,
        /// How to get it, or what to use instead.
        hint: String,
    },
    /// The process could not be started.
    #[error("cannot start {name}: {error}")]
    Spawn {
        /// The target's name.
        name: String,
        /// The error.
        error: std::io::Error,
    },
    /// The process exited before it was ready.
    #[error("{name} exited before it was ready ({status}){}", stderr_part(stderr))]
    Exited {
        /// The target's name.
        name: String,
        /// How it exited.
        status: ExitStatus,
        /// The last lines it wrote on stderr.
        stderr: String,
    },
    /// The process did not answer HTTP in time.
    #[error("{name} was not ready after {:.1} s (no HTTP answer at {url}){}", waited.as_secs_f64(), stderr_part(stderr))]
    NotReady {
        /// The target's name.
        name: String,
        /// How long it was given.
        waited: std::time::Duration,
        /// Where readiness was checked.
        url: String,
        /// The last lines it wrote on stderr.
        stderr: String,
    },
    /// A stop (Ctrl-C, SIGTERM) came while it was starting; it was stopped.
    #[error("interrupted while {name} was starting (it was stopped)")]
    Interrupted {
        /// The target's name.
        name: String,
    },
    /// A file the target needs could not be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}
