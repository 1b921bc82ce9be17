//! What the target's threads were doing, joined to the run's slow seconds: on-CPU stacks
//! sampled with perf `cpu-clock`, off-CPU time with the stack each thread blocked in from the
//! `sched:sched_switch` tracepoint (or, where tracefs cannot be had, from /proc thread states).
//!
//! [`Session`] is the one a run drives: [`Session::open`] starts the samplers on every online
//! CPU (system-wide per CPU: root, CAP_PERFMON or `perf_event_paranoid` ≤ 0), every tick the
//! caller hands it the target's pids ([`Session::tick`], the process tree as someone else
//! follows it) and it drains the ring buffers; [`Session::finish`] names the frames once, with
//! blazesym (`symbols`), and returns an [`Inside`]: the differential profile of the slow
//! seconds against the others ([`slow_seconds`]), what a diagnosis' window looked like from
//! inside, the text section and the flame graphs.
//!
//! Parts: [`on_cpu`] (cpu-clock samples), [`switches`] (sched_switch), [`threads`] (the /proc
//! fallback), [`off_cpu`] (what either off-CPU sampler saw), [`live`] (the dashboard's
//! per-second summary), `per_second` (the samplers' counts per second, the old seconds
//! packed), `symbols` (callchains and their
//! names), `unwind` (user stacks unwound from the samples' stack copies and the binaries'
//! .eh_frame, where frame pointers are missing), [`slow_seconds`] (slow seconds and the test of a
//! share), [`samplers`] (the samplers of one run, driven together), `text` (the summary's section). perf-event2 parses the ring buffers; the one
//! ioctl it lacks (a tracepoint filter) is in the crate's `sys` module.

mod jit;
pub mod live;
pub mod off_cpu;
pub mod on_cpu;
mod per_second;
mod runtimes;
pub mod samplers;
pub mod slow_seconds;
pub mod switches;
pub(crate) mod symbols;
mod text;
pub mod threads;
mod tracepoint;
mod unwind;

pub use live::{LiveInside, SecondInside, Share};
pub use off_cpu::{Blocked, BlockedOverRepresented, BlockedTime, OffCpu};
pub use on_cpu::{OnCpu, OverRepresented, StackCount, StackSampler, StacksReport};
pub use samplers::{Inside, InsideReport, Session, Standout};
pub use slow_seconds::{slow_seconds, TOP_STACKS};
pub use switches::SwitchSampler;
pub use symbols::{parse_maps, syscall_of, unresolved_frame, Mapping};
pub use text::section as inside_text;

/// The default sampling frequency per CPU: 99 Hz, not 100, so the sampler does not tick in
/// lock-step with 10 ms timers in the target.
pub const DEFAULT_FREQUENCY_HZ: u64 = 99;

/// Why a sampler could not start.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// This process may not sample every process on a CPU.
    #[error("on-CPU stacks need root, CAP_PERFMON or kernel.perf_event_paranoid <= 0 (it is {paranoid}): run as root or `sysctl kernel.perf_event_paranoid=0`")]
    NotAllowed {
        /// The value of /proc/sys/kernel/perf_event_paranoid ("n/a" if unreadable).
        paranoid: String,
    },
    /// The kernel refused the event on a CPU.
    #[error("cannot sample {event} on CPU {cpu}: {error}")]
    Open {
        /// The event.
        event: &'static str,
        /// The CPU.
        cpu: usize,
        /// The error.
        error: std::io::Error,
    },
    /// The sched_switch tracepoint cannot be found or read.
    #[error("sched:sched_switch is not available: {0}")]
    Tracepoint(String),
}

/// Whether this process may sample every process system-wide: `Err` says why not.
pub fn sampling_allowed() -> Result<(), SamplerError> {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    if has_admin_caps(true) || paranoid.is_some_and(|p| p <= 0) {
        Ok(())
    } else {
        Err(SamplerError::NotAllowed {
            paranoid: paranoid.map_or("n/a".into(), |p| p.to_string()),
        })
    }
}

/// Whether this process has CAP_SYS_ADMIN (21) or, when `perfmon` is accepted, CAP_PERFMON
/// (38) in its effective set.
pub(crate) fn has_admin_caps(perfmon: bool) -> bool {
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("CapEff:")
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
        })
        .unwrap_or(0);
    caps & (1 << 21) != 0 || (perfmon && caps & (1 << 38) != 0)
}

/// Now on CLOCK_MONOTONIC, the clock the samples are stamped with.
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The online CPUs (all of them up to the parallelism if /sys cannot say).
pub(crate) fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::cpus::parse_list(&s).ok())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// Calls `each(second, ns)` for the part of `[start, end)` (CLOCK_MONOTONIC ns) in each second
/// of the run that began at `origin`; time before `origin` is not counted.
pub(crate) fn split_by_second(origin: u64, start: u64, end: u64, mut each: impl FnMut(u32, u64)) {
    let mut at = start.max(origin);
    while at < end {
        let second = (at - origin) / 1_000_000_000;
        let second_end = origin + (second + 1) * 1_000_000_000;
        let to = end.min(second_end);
        each(second as u32, to - at);
        at = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_split_at_the_seconds_of_the_run() {
        let mut parts = Vec::new();
        split_by_second(1_000, 500, 2_500_001_000, |s, ns| parts.push((s, ns)));
        assert_eq!(
            parts,
            vec![(0, 1_000_000_000), (1, 1_000_000_000), (2, 500_000_000)]
        );
        parts.clear();
        split_by_second(1_000, 10, 900, |s, ns| parts.push((s, ns)));
        assert!(parts.is_empty(), "before the origin: {parts:?}");
    }
}
