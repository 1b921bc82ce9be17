//! The crate's only `unsafe`: what a child does between fork and exec.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// Makes the child die with its parent and run only on `cpus` (empty: anywhere).
///
/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so
/// targets must be launched from a thread that lives as long as they do (the main thread).
pub fn die_with_parent_and_pin(cmd: &mut Command, cpus: &[usize]) {
    let mut set = CpuSet::new();
    let mut pin = false;
    for &cpu in cpus {
        pin |= set.set(cpu).is_ok();
    }
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, sched_setaffinity), both async-signal-safe; it allocates nothing and
    // touches no lock (`set` was built before the fork and is copied in).
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if pin {
                sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
}
