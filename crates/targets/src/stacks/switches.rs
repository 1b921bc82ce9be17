//! Off-CPU time with the stack each thread blocked in: the `sched:sched_switch` tracepoint on
//! every online CPU, one record per context switch of a target thread (a tracepoint filter
//! keeps the rest of the machine's switches out of the ring buffers), with the callchain of
//! the thread that leaves the CPU. A thread leaving is stamped with its state and stack; when
//! it comes back on a CPU, the time in between is off-CPU time of that (thread name, state,
//! stack), split into the seconds of the run. A thread asleep in `clock_nanosleep`, `futex` or
//! `fsync` for a quarter of a second is what a stall looks like from inside.

use std::collections::{BTreeSet, HashMap};

use perf_event::data::Record as PerfRecord;
use perf_event::Sampler;

use super::off_cpu::{Blocked, OffCpu};
use super::per_second::PerSecond;
use super::symbols::{syscall_of, Names, StackTable};
use super::tracepoint::{filter_for, open_rings, read_u32, sched_switch_dir, state_letter, Layout};
use super::{monotonic_ns, split_by_second, SamplerError};

/// One context switch as a record gave it.
#[derive(Debug, Clone)]
struct Switch {
    time: u64,
    prev_tid: u32,
    prev_state: char,
    prev_comm: String,
    /// The leaving thread's stack, when it is a target thread.
    stack: Option<u32>,
    next_tid: u32,
}

/// Traces the context switches of a set of threads on every CPU.
pub struct SwitchSampler {
    samplers: Vec<Sampler>,
    layout: Layout,
    tracepoint_id: u64,
    /// CLOCK_MONOTONIC at second 0 of the run.
    origin_ns: Option<u64>,
    /// The target's threads (tid → its process), as last listed.
    tids: HashMap<u32, u32>,
    filter: String,
    /// Filtered in the kernel; when not, every switch of the machine is read and sorted here.
    kernel_filter: bool,
    /// Switches after the last drain's cut, kept for the next one.
    pending: Vec<Switch>,
    /// Threads off CPU: since when, in which (name, state, stack).
    away: HashMap<u32, (u64, u32)>,
    /// (name, state, stack) of each way of leaving the CPU.
    ways: Vec<(String, char, u32)>,
    way_index: HashMap<(String, char, u32), u32>,
    /// (second, (tid, way)) → ns off CPU.
    wall: PerSecond<(u32, u32)>,
    /// (second, tid) → ns watched.
    watched: PerSecond<u32>,
    last_watch: Option<u64>,
    pub(crate) table: StackTable,
    lost: u64,
    missing: Vec<String>,
}

impl SwitchSampler {
    /// Opens `sched:sched_switch` on every online CPU, for all processes, with callchains;
    /// it records nothing until [`Self::set_pids`] names the target.
    pub fn open() -> Result<SwitchSampler, SamplerError> {
        super::sampling_allowed()?;
        let dir = sched_switch_dir()?;
        let tracepoint_id = std::fs::read_to_string(dir.join("id"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| SamplerError::Tracepoint(format!("{}/id unreadable", dir.display())))?;
        let layout = std::fs::read_to_string(dir.join("format"))
            .ok()
            .and_then(|f| Layout::parse(&f))
            .ok_or_else(|| {
                SamplerError::Tracepoint(format!(
                    "{}/format unreadable or without prev_pid, prev_state, next_pid",
                    dir.display()
                ))
            })?;
        let filter = filter_for("prev_pid", &BTreeSet::new());
        let samplers = open_rings(tracepoint_id, Some(&BTreeSet::new()))?;
        Ok(SwitchSampler {
            samplers,
            layout,
            tracepoint_id,
            origin_ns: None,
            tids: HashMap::new(),
            filter,
            kernel_filter: true,
            pending: Vec::new(),
            away: HashMap::new(),
            ways: Vec::new(),
            way_index: HashMap::new(),
            wall: PerSecond::default(),
            watched: PerSecond::default(),
            last_watch: None,
            table: StackTable::default(),
            lost: 0,
            missing: Vec::new(),
        })
    }

    /// Second 0 of the run began at `origin_ns` (CLOCK_MONOTONIC).
    pub fn begin(&mut self, origin_ns: u64) {
        self.origin_ns = Some(origin_ns);
    }

    /// The target's processes from now on: their threads are listed, the filter follows
    /// them, and the time since the last call is counted as watched for each of them.
    pub fn set_pids(&mut self, pids: &[u32]) {
        let now = monotonic_ns();
        if let (Some(origin), Some(last)) = (self.origin_ns, self.last_watch) {
            for &tid in self.tids.keys() {
                split_by_second(origin, last, now, |second, ns| {
                    self.watched.add(second, tid, ns);
                });
            }
        }
        self.last_watch = Some(now);
        let mut tids = HashMap::new();
        for &pid in pids {
            self.table.note_process(pid);
            if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in dir.flatten() {
                    if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) {
                        tids.insert(tid, pid);
                    }
                }
            }
        }
        if tids != self.tids {
            self.follow(tids);
        }
    }

    /// Follows a new set of threads. The kernel takes a tracepoint's filter once per event
    /// (EEXIST after that), so the rings are read to the end and opened again with the new
    /// filter: the switches of the moment in between are not seen.
    fn follow(&mut self, tids: HashMap<u32, u32>) {
        self.drain();
        self.tids = tids;
        if !self.kernel_filter {
            return;
        }
        let tids: BTreeSet<u32> = self.tids.keys().copied().collect();
        let filter = filter_for("prev_pid", &tids);
        match open_rings(self.tracepoint_id, Some(&tids)) {
            Ok(samplers) => {
                self.samplers = samplers;
                self.filter = filter;
            }
            Err(e) => {
                // Every switch of the machine, filtered here: dearer, but seen.
                match open_rings(self.tracepoint_id, None) {
                    Ok(samplers) => {
                        self.samplers = samplers;
                        self.kernel_filter = false;
                        self.filter.clear();
                        self.missing.push(format!(
                            "the sched_switch filter could not be set again ({e}): every context switch of the machine was read from then on, which costs more"
                        ));
                    }
                    Err(e) => self.missing.push(format!(
                        "sched_switch could not be opened again for new threads ({e}): only the threads of the start are followed"
                    )),
                }
            }
        }
    }

    /// Reads what the kernel wrote since the last call and accounts every switch up to now.
    pub fn drain(&mut self) {
        self.drain_until(monotonic_ns());
    }

    fn drain_until(&mut self, cut: u64) {
        let layout = self.layout;
        for sampler in self.samplers.iter_mut() {
            while let Some(record) = sampler.next_record() {
                let sample = match record.parse_record() {
                    Ok(PerfRecord::Sample(sample)) => sample,
                    Ok(PerfRecord::Lost(l)) => {
                        self.lost += l.lost;
                        continue;
                    }
                    _ => continue,
                };
                let (Some(time), Some(raw)) = (sample.time(), sample.raw()) else {
                    continue;
                };
                let common_type = raw
                    .get(layout.common_type..layout.common_type + 2)
                    .map(|b| u16::from_ne_bytes([b[0], b[1]]));
                if common_type != Some(self.tracepoint_id as u16) {
                    continue;
                }
                let (Some(prev_tid), Some(next_tid)) = (
                    read_u32(raw, layout.prev_pid),
                    read_u32(raw, layout.next_pid),
                ) else {
                    continue;
                };
                let prev_ours = self.tids.get(&prev_tid).copied();
                if prev_ours.is_none() && !self.tids.contains_key(&next_tid) {
                    continue;
                }
                let (at, size) = layout.prev_state;
                let state = raw
                    .get(at..at + size.min(8))
                    .map(|b| {
                        let mut v = [0u8; 8];
                        v[..b.len()].copy_from_slice(b);
                        u64::from_ne_bytes(v)
                    })
                    .unwrap_or(0);
                let prev_comm = raw
                    .get(layout.prev_comm..layout.prev_comm + 16)
                    .map(|b| {
                        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                        String::from_utf8_lossy(&b[..end]).into_owned()
                    })
                    .unwrap_or_default();
                let stack = match (prev_ours, sample.callchain()) {
                    (Some(pid), Some(chain)) => Some(self.table.intern(pid, chain)),
                    _ => None,
                };
                self.pending.push(Switch {
                    time,
                    prev_tid,
                    prev_state: state_letter(state),
                    prev_comm,
                    stack,
                    next_tid,
                });
            }
        }
        // Records of different CPUs interleave; those after the cut may still have an
        // earlier partner in a ring read before it was written.
        self.pending.sort_by_key(|s| s.time);
        let later = self.pending.partition_point(|s| s.time <= cut);
        let ready: Vec<Switch> = self.pending.drain(..later).collect();
        for s in ready {
            self.account(s);
        }
    }

    fn account(&mut self, s: Switch) {
        // A thread that leaves the CPU dead (Z, X) never comes back: its exit is not a wait.
        if matches!(s.prev_state, 'Z' | 'X') {
            self.away.remove(&s.prev_tid);
        } else if let Some(stack) = s.stack {
            let way = (s.prev_comm, s.prev_state, stack);
            let id = match self.way_index.get(&way) {
                Some(&id) => id,
                None => {
                    let id = self.ways.len() as u32;
                    self.ways.push(way.clone());
                    self.way_index.insert(way, id);
                    id
                }
            };
            self.away.insert(s.prev_tid, (s.time, id));
        }
        if let Some((since, way)) = self.away.remove(&s.next_tid) {
            self.off_cpu(s.next_tid, since, s.time, way);
        }
    }

    fn off_cpu(&mut self, tid: u32, since: u64, until: u64, way: u32) {
        if let Some(origin) = self.origin_ns {
            split_by_second(origin, since, until, |second, ns| {
                self.wall.add(second, (tid, way), ns);
            });
        }
    }

    /// Off-CPU time of `second` so far, per way of leaving the CPU (way, µs), and the µs its
    /// threads were watched. Threads still off CPU count up to now: a long sleep shows while
    /// it lasts.
    pub(crate) fn second(&self, second: u32) -> (Vec<(u32, u64)>, u64) {
        let mut wall: Vec<(u32, u64)> = self
            .wall
            .of_second(second)
            .map(|((_, way), ns)| (way, ns / 1000))
            .collect();
        if let Some(origin) = self.origin_ns {
            let now = monotonic_ns();
            for &(since, way) in self.away.values() {
                split_by_second(origin, since, now, |s, ns| {
                    if s == second {
                        wall.push((way, ns / 1000));
                    }
                });
            }
        }
        let watched = self
            .watched
            .of_second(second)
            .map(|(_, ns)| ns / 1000)
            .sum();
        (wall, watched)
    }

    /// A way of leaving the CPU: the state and the stack id in [`Self::table`].
    pub(crate) fn way(&self, way: u32) -> (char, u32) {
        let (_, state, stack) = &self.ways[way as usize];
        (*state, *stack)
    }

    /// Reads the last switches and stops tracing; threads still off CPU count up to now.
    pub(crate) fn stop(&mut self) {
        let now = monotonic_ns();
        let pids: Vec<u32> = {
            let set: BTreeSet<u32> = self.tids.values().copied().collect();
            set.into_iter().collect()
        };
        // The last stretch of watching.
        self.set_pids(&pids);
        self.drain_until(u64::MAX);
        for s in &mut self.samplers {
            let _ = s.disable();
        }
        let away: Vec<(u32, (u64, u32))> = self.away.drain().collect();
        for (tid, (since, way)) in away {
            self.off_cpu(tid, since, now, way);
        }
    }

    /// Stops tracing and names every stack.
    pub fn finish(mut self) -> OffCpu {
        self.stop();
        let mut missing = Vec::new();
        let names = Names::resolve(&self.table.stacks, &self.table.maps, &mut missing);
        let mut off = self.named(&names);
        off.missing.extend(missing);
        off
    }

    /// The off-CPU time with the stacks named by `names` (which covers [`Self::table`]).
    pub(crate) fn named(self, names: &Names) -> OffCpu {
        let mut off = OffCpu::new("sched:sched_switch");
        off.missing = self.missing;
        if self.lost > 0 {
            off.missing.push(format!(
                "{} context switches lost: the ring buffers filled before they were read",
                self.lost
            ));
        }
        let blocked: Vec<Blocked> = self
            .ways
            .iter()
            .map(|(thread, state, stack)| {
                let frames = names.frames(&self.table.stacks[*stack as usize]);
                Blocked {
                    thread: thread.clone(),
                    state: state.to_string(),
                    syscall: syscall_of(&frames),
                    stack: frames,
                }
            })
            .collect();
        // A (second, key) held twice (a late addition) is summed by `add` and `watch`.
        for (second, (tid, way), ns) in self.wall.iter() {
            off.add(second, &blocked[way as usize], tid, ns / 1000);
        }
        for (second, tid, ns) in self.watched.iter() {
            off.watch(second, tid, ns / 1000);
        }
        off
    }
}

/// What [`SwitchSampler`] needs and did not get, said in one line: tracefs, the tracepoint.
pub fn unavailable_note(e: &SamplerError) -> String {
    format!("off-CPU stacks: {e}; off-CPU time comes from /proc thread states instead (no stacks, only the wait channel)")
}

impl std::fmt::Debug for SwitchSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchSampler")
            .field("cpus", &self.samplers.len())
            .field("threads", &self.tids.len())
            .field("filter", &self.filter)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_child_is_seen_off_cpu_in_its_sleep() {
        if super::super::sampling_allowed().is_err() {
            eprintln!("skipped: perf sampling not allowed here");
            return;
        }
        let mut sampler = match SwitchSampler::open() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        sampler.begin(monotonic_ns());
        // A shell that sleeps 50 ms at a time: each sleep leaves the CPU and comes back.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        for _ in 0..8 {
            sampler.set_pids(&[child.id()]);
            std::thread::sleep(std::time::Duration::from_millis(100));
            sampler.drain();
        }
        let off = sampler.finish();
        let _ = child.kill();
        let _ = child.wait();
        let (times, _) = off.differential(&BTreeSet::new());
        // The shell waits for its `sleep` children in wait4.
        assert!(
            times.iter().any(|t| t.blocked.state == "S"
                && t.blocked.syscall == "wait4"
                && t.wall_us > 100_000),
            "{times:#?}\n{:?}",
            off.missing
        );
    }
}
