//! The `sched:sched_switch` tracepoint itself: where tracefs is (mounted when it is not and this
//! process may), where the fields of a raw record are (from the tracepoint's format file), the
//! filter that keeps other threads' switches out of the kernel's ring buffers, and one ring per
//! CPU and role. [`super::switches`] reads what these rings give.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::AsRawFd;

use perf_event::events::Tracepoint;
use perf_event::{Builder, Clock, SampleFlag, Sampler};

use super::symbols::MAX_STACK;
use super::{has_admin_caps, online_cpus, SamplerError};

/// Ring buffer per CPU: a switch record with its callchain is ~0.3–1 KiB, and a busy server
/// switches thousands of times a second between two 100 ms drains.
const RING_BYTES: usize = 1024 * 1024;

/// The kernel copies at most a page of filter text.
const MAX_FILTER: usize = 4000;

/// Where the fields of a sched_switch record are, from the tracepoint's format file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Layout {
    pub(super) common_type: usize,
    pub(super) prev_comm: usize,
    pub(super) prev_pid: usize,
    pub(super) prev_state: (usize, usize),
    pub(super) next_pid: usize,
}

impl Layout {
    pub(super) fn parse(format: &str) -> Option<Layout> {
        let field = |name: &str| -> Option<(usize, usize)> {
            format.lines().find_map(|l| {
                let decl = l.trim().strip_prefix("field:")?;
                let (decl, rest) = decl.split_once(';')?;
                let ident = decl.split_whitespace().last()?;
                let ident = ident.split('[').next()?;
                if ident != name {
                    return None;
                }
                let num = |key: &str| -> Option<usize> {
                    rest.split(';')
                        .find_map(|p| p.trim().strip_prefix(key))?
                        .trim()
                        .parse()
                        .ok()
                };
                Some((num("offset:")?, num("size:")?))
            })
        };
        Some(Layout {
            common_type: field("common_type")?.0,
            prev_comm: field("prev_comm")?.0,
            prev_pid: field("prev_pid")?.0,
            prev_state: field("prev_state")?,
            next_pid: field("next_pid")?.0,
        })
    }
}

pub(super) fn read_u32(raw: &[u8], at: usize) -> Option<u32> {
    raw.get(at..at + 4)
        .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
}

/// The letter of a `prev_state` (the kernel's TASK_REPORT bits; none set: runnable).
pub(super) fn state_letter(state: u64) -> char {
    const LETTERS: [char; 8] = ['S', 'D', 'T', 't', 'X', 'Z', 'P', 'I'];
    LETTERS
        .iter()
        .enumerate()
        .find(|(bit, _)| state & (1 << bit) != 0)
        .map_or('R', |(_, &c)| c)
}

/// Finds the tracepoint's directory, mounting tracefs at /sys/kernel/tracing when it is not
/// mounted and this process may.
pub(super) fn sched_switch_dir() -> Result<std::path::PathBuf, SamplerError> {
    let candidates = [
        "/sys/kernel/tracing/events/sched/sched_switch",
        "/sys/kernel/debug/tracing/events/sched/sched_switch",
    ];
    let found = || {
        candidates
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.join("id").exists())
    };
    if let Some(dir) = found() {
        return Ok(dir);
    }
    if !has_admin_caps(false) {
        return Err(SamplerError::Tracepoint(
            "tracefs is not mounted and mounting it needs root (`mount -t tracefs nodev /sys/kernel/tracing`)".into(),
        ));
    }
    nix::mount::mount(
        Some("nodev"),
        "/sys/kernel/tracing",
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| {
        SamplerError::Tracepoint(format!(
            "tracefs is not mounted and mounting it at /sys/kernel/tracing failed: {e}"
        ))
    })?;
    found().ok_or_else(|| {
        SamplerError::Tracepoint("tracefs mounted, but it has no sched/sched_switch".into())
    })
}

/// `sched:sched_switch` (tracepoint `id`) on every online CPU, its filter set before it is
/// enabled: per CPU, one event for the switches of `tids` out of the CPU, with callchains, and
/// one for their switches back in, without (a callchain there would be the stack of whatever
/// thread leaves the CPU for them: unwound for nothing). `None`: no filter, one event with
/// callchains for every switch of the machine.
pub(super) fn open_rings(
    id: u64,
    tids: Option<&BTreeSet<u32>>,
) -> Result<Vec<Sampler>, SamplerError> {
    let mut samplers = Vec::new();
    for cpu in online_cpus() {
        let failed = |error| SamplerError::Open {
            event: "sched:sched_switch",
            cpu,
            error,
        };
        let roles: &[(bool, Option<&str>)] = if tids.is_some() {
            &[(true, Some("prev_pid")), (false, Some("next_pid"))]
        } else {
            &[(true, None)]
        };
        for &(stacks, field) in roles {
            let mut flags = SampleFlag::TID | SampleFlag::TIME | SampleFlag::RAW;
            if stacks {
                flags |= SampleFlag::CALLCHAIN;
            }
            let mut builder = Builder::new(Tracepoint::with_id(id));
            builder
                .one_cpu(cpu)
                .any_pid()
                .sample_period(1)
                .sample(flags)
                .clockid(Clock::MONOTONIC)
                .exclude_kernel(false)
                .exclude_hv(true)
                .enabled(false);
            if stacks {
                builder.sample_max_stack(MAX_STACK);
            }
            let mut sampler = builder
                .build()
                .and_then(|c| c.sampled(if stacks { RING_BYTES } else { RING_BYTES / 4 }))
                .map_err(failed)?;
            if let (Some(field), Some(tids)) = (field, tids) {
                let c = CString::new(filter_for(field, tids))
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                crate::sys::set_perf_filter(sampler.as_raw_fd(), &c).map_err(failed)?;
            }
            sampler.enable().map_err(failed)?;
            samplers.push(sampler);
        }
    }
    Ok(samplers)
}

/// The tracepoint filter that passes the switches whose `field` (`prev_pid`, `next_pid`) is
/// one of `tids` and no other (or, when the list is too long for the kernel, those of the
/// range they span; the rest is dropped here).
pub(super) fn filter_for(field: &str, tids: &BTreeSet<u32>) -> String {
    if tids.is_empty() {
        return "prev_pid == 0 && next_pid == 0".into();
    }
    let each: Vec<String> = tids.iter().map(|t| format!("{field} == {t}")).collect();
    let filter = each.join(" || ");
    if filter.len() <= MAX_FILTER {
        return filter;
    }
    let (lo, hi) = (tids.first().unwrap_or(&0), tids.last().unwrap_or(&0));
    format!("{field} >= {lo} && {field} <= {hi}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_file_gives_the_offsets() {
        let format = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";
        assert_eq!(
            Layout::parse(format),
            Some(Layout {
                common_type: 0,
                prev_comm: 8,
                prev_pid: 24,
                prev_state: (32, 8),
                next_pid: 56,
            })
        );
        assert_eq!(Layout::parse("format:\n"), None);
    }

    #[test]
    fn states_and_filters() {
        assert_eq!(state_letter(0), 'R');
        assert_eq!(state_letter(1), 'S');
        assert_eq!(state_letter(2), 'D');
        assert_eq!(state_letter(0x100), 'R');
        assert_eq!(
            filter_for("next_pid", &BTreeSet::from([7, 9])),
            "next_pid == 7 || next_pid == 9"
        );
        let many: BTreeSet<u32> = (100_000..100_500).collect();
        let f = filter_for("prev_pid", &many);
        assert!(f.len() <= MAX_FILTER, "{f}");
        assert_eq!(f, "prev_pid >= 100000 && prev_pid <= 100499");
    }
}
