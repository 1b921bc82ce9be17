//! On-CPU stacks: the software `cpu-clock` event on every online CPU for every process,
//! sampling TID, TIME (CLOCK_MONOTONIC) and the user and kernel CALLCHAIN, and the user
//! registers and a copy of the user stack, from which the target's user stacks are unwound
//! again where the kernel's frame-pointer walk comes back short ([`super::unwind`]); only the
//! target's samples are counted, per (second of the run, interned stack), so memory grows
//! with distinct stacks, never with samples. [`OnCpu::differential`] splits them into slow seconds and the
//! rest and names the frames over-represented in the slow ones.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use perf_event::data::{Record as PerfRecord, Sample};
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};
use serde::{Deserialize, Serialize};

use super::per_second::PerSecond;
use super::slow_seconds::{clearly_more, round3, TOP_STACKS};
use super::symbols::{Names, RawStack, StackTable, MAX_STACK};
use super::unwind::{Unwound, UserUnwinder, REGS_MASK, RING_BYTES_WITH_STACK, STACK_COPY_BYTES};
use super::{online_cpus, sampling_allowed, SamplerError};

/// Ring buffer per CPU without stack copies. At 99 Hz a sample is at most ~1 KiB (128
/// frames), and the buffer is drained every ~100 ms: 128 KiB leaves room for a tick that
/// comes late.
const RING_BYTES: usize = 128 * 1024;

/// Samples on-CPU stacks of a set of processes on every CPU.
pub struct StackSampler {
    samplers: Vec<Sampler>,
    frequency_hz: u64,
    pids: HashSet<u32>,
    /// CLOCK_MONOTONIC at second 0 of the run; samples before it (warm-up) are not counted.
    origin_ns: Option<u64>,
    pub(crate) table: StackTable,
    /// Samples per (second of the run, interned stack).
    counts: PerSecond<u32>,
    samples_seen: u64,
    samples_kept: u64,
    lost: u64,
    /// Unwinds the target's user stacks from the samples' stack copies; `None` when the
    /// samples carry none (the ring buffers could not be had, see [`Self::open`]).
    unwinder: Option<UserUnwinder>,
    /// Why the samples carry no stack copy.
    no_stack_copy: Option<String>,
}

impl StackSampler {
    /// Opens `cpu-clock` at `frequency_hz` on every online CPU, for all processes, and
    /// starts sampling, each sample with a copy of the user stack. Where that cannot be had
    /// (its larger ring buffers are over a non-root user's locked-memory allowance), samples
    /// carry the frame-pointer walk only, and the report says so. Needs [`sampling_allowed`].
    pub fn open(frequency_hz: u64) -> Result<StackSampler, SamplerError> {
        sampling_allowed()?;
        let (samplers, no_stack_copy) = match open_samplers(frequency_hz, true) {
            Ok(s) => (s, None),
            Err(e) => (
                open_samplers(frequency_hz, false)?,
                Some(format!(
                    "user stacks: frame-pointer walk only, no stack copies to unwind ({e})"
                )),
            ),
        };
        Ok(StackSampler {
            samplers,
            unwinder: no_stack_copy.is_none().then(UserUnwinder::default),
            no_stack_copy,
            frequency_hz,
            pids: HashSet::new(),
            origin_ns: None,
            table: StackTable::default(),
            counts: PerSecond::default(),
            samples_seen: 0,
            samples_kept: 0,
            lost: 0,
        })
    }

    /// The sampling frequency per CPU.
    pub fn frequency_hz(&self) -> u64 {
        self.frequency_hz
    }

    /// Second 0 of the run began at `origin_ns` (CLOCK_MONOTONIC, see [`monotonic_ns`]):
    /// earlier samples are dropped, later ones are counted in their second.
    pub fn begin(&mut self, origin_ns: u64) {
        self.origin_ns = Some(origin_ns);
    }

    /// The target's processes from now on (the whole tree, every tick). A process seen for
    /// the first time has its mappings read, so its frames can still be named as
    /// `module+offset` if it is gone by the end.
    pub fn set_pids(&mut self, pids: &[u32]) {
        self.pids.clear();
        self.pids.extend(pids.iter().copied());
        for &pid in pids {
            self.table.note_process(pid);
        }
        if let Some(unwinder) = &mut self.unwinder {
            unwinder.retain(&self.pids);
        }
    }

    /// Reads what the kernel wrote since the last call and counts the target's samples.
    pub fn drain(&mut self) {
        let StackSampler {
            samplers,
            pids,
            origin_ns,
            table,
            counts,
            samples_seen,
            samples_kept,
            lost,
            unwinder,
            ..
        } = self;
        for sampler in samplers.iter_mut() {
            while let Some(record) = sampler.next_record() {
                let sample = match record.parse_record() {
                    Ok(PerfRecord::Sample(sample)) => sample,
                    Ok(PerfRecord::Lost(l)) => {
                        *lost += l.lost;
                        continue;
                    }
                    _ => continue,
                };
                *samples_seen += 1;
                let (Some(pid), Some(time), Some(chain)) =
                    (sample.pid(), sample.time(), sample.callchain())
                else {
                    continue;
                };
                if !pids.contains(&pid) {
                    continue;
                }
                let Some(second) = origin_ns
                    .and_then(|o| time.checked_sub(o))
                    .map(|ns| (ns / 1_000_000_000) as u32)
                else {
                    continue;
                };
                let mut raw = RawStack::from_callchain(pid, chain);
                if let Some(user) = unwinder
                    .as_mut()
                    .and_then(|u| unwind_sample(u, pid, &sample))
                    .and_then(|cfi| better_than(&raw.user, cfi))
                {
                    raw.user = user.into();
                }
                let id = table.intern_raw(raw);
                counts.add(second, id, 1);
                *samples_kept += 1;
            }
        }
    }

    /// The target's samples of `second` so far, per raw stack id in [`Self::table`].
    pub(crate) fn second(&self, second: u32) -> Vec<(u32, u64)> {
        let mut per_id: HashMap<u32, u64> = HashMap::new();
        for (id, n) in self.counts.of_second(second) {
            *per_id.entry(id).or_insert(0) += n;
        }
        per_id.into_iter().collect()
    }

    /// Stops sampling and names every frame. Call it while the target still runs: its
    /// binaries are found through /proc/PID.
    pub fn finish(mut self) -> OnCpu {
        self.stop();
        let mut missing = Vec::new();
        let names = Names::resolve(&self.table.stacks, &self.table.maps, &mut missing);
        let mut on_cpu = self.named(&names);
        on_cpu.missing.extend(missing);
        on_cpu
    }

    /// Reads the last samples and stops sampling.
    pub(crate) fn stop(&mut self) {
        self.drain();
        for sampler in &mut self.samplers {
            let _ = sampler.disable();
        }
    }

    /// The samples with the frames named by `names` (which covers [`Self::table`]).
    pub(crate) fn named(self, names: &Names) -> OnCpu {
        let mut missing: Vec<String> = self.no_stack_copy.iter().cloned().collect();
        if self.lost > 0 {
            missing.push(format!(
                "{} samples lost: the ring buffers filled before they were read",
                self.lost
            ));
        }
        // Stacks of several processes (nginx workers) that name the same frames are one.
        let mut by_frames: HashMap<Vec<String>, usize> = HashMap::new();
        let mut frames_of: Vec<Vec<String>> = Vec::new();
        let mut merged_id = Vec::with_capacity(self.table.stacks.len());
        let mut short_user = 0usize;
        for raw in &self.table.stacks {
            let frames = names.frames(raw);
            if !raw.user.is_empty() && raw.user.len() <= 2 {
                short_user += 1;
            }
            let next = frames_of.len();
            let id = *by_frames.entry(frames.clone()).or_insert(next);
            if id == next {
                frames_of.push(frames);
            }
            merged_id.push(id);
        }
        if !self.table.stacks.is_empty()
            && short_user * 2 > self.table.stacks.len()
            && self.unwinder.is_some()
        {
            missing.push(format!(
                "{short_user} of {} stacks have at most two user-space frames, even unwound from the binaries' .eh_frame: the code on CPU has neither frame pointers nor unwind information the unwinder can read (JIT code, a stripped .eh_frame, a stack deeper than the {} KiB copied), so only the function on CPU is known, not its callers",
                self.table.stacks.len(),
                STACK_COPY_BYTES / 1024
            ));
        } else if !self.table.stacks.is_empty() && short_user * 2 > self.table.stacks.len() {
            missing.push(format!(
                "{short_user} of {} stacks have at most two user-space frames: the target was built without frame pointers (the kernel walks user stacks by frame pointer), so only the function on CPU is known, not its callers; rebuild with -C force-frame-pointers=yes or -fno-omit-frame-pointer",
                self.table.stacks.len()
            ));
        }
        let mut per_second: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        for (second, id, n) in self.counts.iter() {
            *per_second
                .entry((second, merged_id[id as usize]))
                .or_insert(0) += n;
        }
        if self.samples_kept == 0 {
            missing.push(format!(
                "no sample of the target's processes ({} samples of other processes): it was not on a CPU while sampled",
                self.samples_seen
            ));
        }
        OnCpu {
            frequency_hz: self.frequency_hz,
            samples: self.samples_kept,
            stacks: frames_of,
            per_second: per_second
                .into_iter()
                .map(|((s, id), n)| (s, id, n))
                .collect(),
            locations: names.locations.clone(),
            missing,
        }
    }
}

/// Opens the `cpu-clock` samplers, with user registers and stack copies when `stack_copy`.
fn open_samplers(frequency_hz: u64, stack_copy: bool) -> Result<Vec<Sampler>, SamplerError> {
    let cpus = online_cpus();
    let mut samplers = Vec::with_capacity(cpus.len());
    for cpu in cpus {
        let mut builder = Builder::new(Software::CPU_CLOCK);
        let mut flags = SampleFlag::TID | SampleFlag::TIME | SampleFlag::CALLCHAIN;
        if stack_copy {
            flags |= SampleFlag::REGS_USER | SampleFlag::STACK_USER;
            builder
                .sample_regs_user(REGS_MASK)
                .sample_stack_user(STACK_COPY_BYTES);
        }
        builder
            .one_cpu(cpu)
            .any_pid()
            .sample_frequency(frequency_hz)
            .sample(flags)
            .sample_max_stack(MAX_STACK)
            .clockid(Clock::MONOTONIC)
            .exclude_kernel(false)
            .exclude_hv(true)
            .enabled(true);
        let ring = if stack_copy {
            RING_BYTES_WITH_STACK
        } else {
            RING_BYTES
        };
        let sampler = builder
            .build()
            .and_then(|c| c.sampled(ring))
            .map_err(|error| SamplerError::Open {
                event: "cpu-clock",
                cpu,
                error,
            })?;
        samplers.push(sampler);
    }
    Ok(samplers)
}

/// The user stack of a sample unwound from its registers and stack copy, if it has them.
fn unwind_sample(unwinder: &mut UserUnwinder, pid: u32, sample: &Sample<'_>) -> Option<Unwound> {
    let regs = sample.regs_user()?;
    // ABI_NONE: no user context (a kernel thread); 32-bit code is not unwound.
    if regs.abi != perf_event::data::SampleRegsAbi::ABI_64 {
        return None;
    }
    unwinder.unwind(pid, &regs.regs, sample.stack_user()?)
}

/// The unwound user frames, where they are the better stack: the unwind reached the
/// outermost frame (`_start`, a thread's start), or went further than the frame-pointer
/// walk (`fp`). Otherwise the walk is kept: in code built with frame pointers it is whole,
/// and it reaches past the end of the stack copy and through JIT code without unwind
/// information.
fn better_than(fp: &[u64], cfi: Unwound) -> Option<Vec<u64>> {
    let better = !cfi.frames.is_empty() && (cfi.complete || cfi.frames.len() > fp.len());
    better.then_some(cfi.frames)
}

/// The target's on-CPU samples of a run, named, per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OnCpu {
    /// Sampling frequency per CPU.
    pub frequency_hz: u64,
    /// Samples of the target counted.
    pub samples: u64,
    /// Distinct stacks, each leaf first.
    pub stacks: Vec<Vec<String>>,
    /// (second of the run, index into `stacks`, samples).
    pub per_second: Vec<(u32, usize, u64)>,
    /// file:line of the functions that had debug info.
    pub locations: BTreeMap<String, String>,
    /// What could not be sampled or named, and why.
    pub missing: Vec<String>,
}

/// One stack of the report: how often it was on CPU over the run and in slow seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackCount {
    /// Frames, leaf first; kernel frames end in `_[k]`; unnamed ones are `module+0xoffset`.
    pub stack: Vec<String>,
    /// Samples over the run.
    pub samples: u64,
    /// Of which in slow seconds.
    pub slow_samples: u64,
}

/// A frame seen on CPU more often in the slow seconds than in the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverRepresented {
    /// The function (or `module+0xoffset`).
    pub frame: String,
    /// Where it is, when debug info says.
    pub location: Option<String>,
    /// Share of the slow seconds' samples with this frame on the stack.
    pub slow_share: f64,
    /// Share of the other seconds' samples with this frame on the stack.
    pub normal_share: f64,
    /// Samples in slow seconds with this frame.
    pub slow_samples: u64,
    /// Where the frame's excess is a kernel spin lock's wait (without the samples spinning in
    /// a lock's slow path it would not stand out): the kernel function that took the lock
    /// (`lock_sock_nested_[k]`). The CPU was the server's, but it waited for another CPU to
    /// let the lock go, not for its own work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_wait: Option<String>,
}

/// Whether a frame is a kernel spin lock's slow path: a CPU spinning until another lets the
/// lock go (`native_queued_spin_lock_slowpath`, the paravirtual `__pv_…` one a VM runs,
/// the reader–writer locks' `queued_read_lock_slowpath`/`queued_write_lock_slowpath`).
pub fn is_lock_spin(frame: &str) -> bool {
    let f = frame.trim_end_matches("_[k]");
    f.ends_with("spin_lock_slowpath")
        || f.ends_with("queued_read_lock_slowpath")
        || f.ends_with("queued_write_lock_slowpath")
}

/// The kernel function that took the lock a stack spins for, when it spins: a lock's slow
/// path at or near its leaf (a paravirtual wait may sit below it: `kvm_wait`, `pv_wait`), and
/// the first frame above it that is not a spin-lock function (`_raw_spin_lock_bh` and kin).
fn lock_taker(stack: &[String]) -> Option<&str> {
    let spin = stack.iter().take(4).position(|f| is_lock_spin(f))?;
    stack
        .iter()
        .skip(spin + 1)
        .find(|f| !(f.contains("spin_lock") || f.contains("_raw_")))
        .map(String::as_str)
}

/// The `stacks` section of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StacksReport {
    /// The perf event sampled.
    pub sampler: String,
    /// Its frequency per CPU.
    pub frequency_hz: u64,
    /// Samples of the target.
    pub samples: u64,
    /// Of which in slow seconds.
    pub slow_samples: u64,
    /// The most sampled stacks (at most [`TOP_STACKS`]).
    pub on_cpu: Vec<StackCount>,
    /// The seconds of the run (0-based) counted as slow.
    pub slow_seconds: Vec<u32>,
    /// Frames over-represented in the slow seconds, most first; empty when none is clearly.
    pub over_represented: Vec<OverRepresented>,
    /// What was not sampled or named, and why.
    pub missing: Vec<String>,
}

impl OnCpu {
    /// Splits the samples into `slow_seconds` and the rest and names the frames that are on
    /// CPU clearly more often in the slow ones: a share at least 10 points and twice the
    /// normal one, at least [`MIN_SLOW_SAMPLES`] samples, and a two-proportion z above 4, so
    /// that the noise of a healthy run (a few hundred samples a second) claims nothing.
    pub fn differential(&self, slow_seconds: &BTreeSet<u32>) -> StacksReport {
        let mut per_stack = vec![(0u64, 0u64); self.stacks.len()];
        for &(second, id, n) in &self.per_second {
            per_stack[id].0 += n;
            if slow_seconds.contains(&second) {
                per_stack[id].1 += n;
            }
        }
        let slow_total: u64 = per_stack.iter().map(|s| s.1).sum();
        let normal_total = self.samples.saturating_sub(slow_total);
        // Samples with each frame anywhere on the stack (once per stack, for recursion).
        let mut frames: HashMap<&str, (u64, u64)> = HashMap::new();
        for (stack, &(all, slow)) in self.stacks.iter().zip(&per_stack) {
            let mut seen = HashSet::new();
            for f in stack {
                if seen.insert(f.as_str()) {
                    let e = frames.entry(f.as_str()).or_insert((0, 0));
                    e.0 += slow;
                    e.1 += all - slow;
                }
            }
        }
        // The same counts without the samples spinning in a kernel lock's slow path, and
        // which lock-taking function those slow seconds' spins went through most.
        let mut apart: HashMap<&str, (u64, u64)> = HashMap::new();
        let mut takers: HashMap<&str, HashMap<&str, u64>> = HashMap::new();
        for (stack, &(all, slow)) in self.stacks.iter().zip(&per_stack) {
            let taker = lock_taker(stack);
            let mut seen = HashSet::new();
            for f in stack {
                if !seen.insert(f.as_str()) {
                    continue;
                }
                match taker {
                    None => {
                        let e = apart.entry(f.as_str()).or_insert((0, 0));
                        e.0 += slow;
                        e.1 += all - slow;
                    }
                    Some(t) => {
                        *takers.entry(f.as_str()).or_default().entry(t).or_insert(0) += slow;
                    }
                }
            }
        }
        let mut over: Vec<OverRepresented> = Vec::new();
        if slow_total > 0 && normal_total > 0 {
            for (frame, &(slow, normal)) in &frames {
                if let Some((ps, pn)) = clearly_more(slow, slow_total, normal, normal_total) {
                    // Standing out only with the spins counted: the excess is the lock's wait.
                    let (slow_apart, normal_apart) = apart.get(frame).copied().unwrap_or((0, 0));
                    let lock_wait =
                        clearly_more(slow_apart, slow_total, normal_apart, normal_total)
                            .is_none()
                            .then(|| takers.get(frame))
                            .flatten()
                            .and_then(|t| {
                                t.iter()
                                    .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                            })
                            .map(|(t, _)| t.to_string());
                    over.push(OverRepresented {
                        frame: frame.to_string(),
                        location: self.locations.get(*frame).cloned(),
                        slow_share: round3(ps),
                        normal_share: round3(pn),
                        slow_samples: slow,
                        lock_wait,
                    });
                }
            }
        }
        // Most over-represented first; among equals the deeper (leafier) frame is the
        // more specific answer, and stack order puts it first below.
        let depth = |frame: &str| {
            self.stacks
                .iter()
                .filter_map(|s| s.iter().position(|f| f == frame))
                .min()
                .unwrap_or(usize::MAX)
        };
        over.sort_by(|a, b| {
            (b.slow_share - b.normal_share)
                .total_cmp(&(a.slow_share - a.normal_share))
                .then_with(|| depth(&a.frame).cmp(&depth(&b.frame)))
                .then_with(|| a.frame.cmp(&b.frame))
        });
        let mut on_cpu: Vec<StackCount> = self
            .stacks
            .iter()
            .zip(&per_stack)
            .map(|(stack, &(samples, slow_samples))| StackCount {
                stack: stack.clone(),
                samples,
                slow_samples,
            })
            .collect();
        on_cpu.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.stack.cmp(&b.stack))
        });
        on_cpu.truncate(TOP_STACKS);
        let mut missing = self.missing.clone();
        if slow_seconds.is_empty() {
            missing.push("no slow second in the run: nothing to compare".into());
        } else if normal_total == 0 {
            missing.push("every sampled second was slow: nothing to compare with".into());
        }
        StacksReport {
            sampler: "cpu-clock".into(),
            frequency_hz: self.frequency_hz,
            samples: self.samples,
            slow_samples: slow_total,
            on_cpu,
            slow_seconds: slow_seconds.iter().copied().collect(),
            over_represented: over,
            missing,
        }
    }

    /// The samples with any frame that `matches` on their stack, in `slow_seconds` against
    /// the rest, where that share is clearly larger in the slow ones (the bars of
    /// [`OnCpu::differential`]): a family of frames (a garbage collector's) stands out even
    /// where no single one of its frames does. `frame` is the matching frame on most of the
    /// slow seconds' samples.
    pub fn share_of(
        &self,
        slow_seconds: &BTreeSet<u32>,
        matches: impl Fn(&str) -> bool,
    ) -> Option<OverRepresented> {
        let (mut slow, mut normal, mut slow_total, mut normal_total) = (0, 0, 0, 0);
        let mut by_frame: HashMap<&str, u64> = HashMap::new();
        for &(second, id, n) in &self.per_second {
            let in_slow = slow_seconds.contains(&second);
            let matching: Vec<&str> = self.stacks[id]
                .iter()
                .map(String::as_str)
                .filter(|f| matches(f))
                .collect();
            if in_slow {
                slow_total += n;
            } else {
                normal_total += n;
            }
            if matching.is_empty() {
                continue;
            }
            if in_slow {
                slow += n;
                for f in matching.into_iter().collect::<BTreeSet<_>>() {
                    *by_frame.entry(f).or_insert(0) += n;
                }
            } else {
                normal += n;
            }
        }
        let (ps, pn) = clearly_more(slow, slow_total, normal, normal_total)?;
        let frame = by_frame
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))?
            .0
            .to_string();
        Some(OverRepresented {
            location: self.locations.get(&frame).cloned(),
            frame,
            slow_share: round3(ps),
            normal_share: round3(pn),
            slow_samples: slow,
            lock_wait: None,
        })
    }

    /// The same samples without those of `seconds`.
    pub fn without(&self, seconds: &BTreeSet<u32>) -> OnCpu {
        let per_second: Vec<(u32, usize, u64)> = self
            .per_second
            .iter()
            .filter(|p| !seconds.contains(&p.0))
            .copied()
            .collect();
        OnCpu {
            samples: per_second.iter().map(|p| p.2).sum(),
            per_second,
            ..self.clone()
        }
    }

    /// The stacks in the folded format flame graphs are drawn from (`root;...;leaf count`),
    /// of the seconds `keep` accepts.
    pub fn folded(&self, keep: impl Fn(u32) -> bool) -> Vec<String> {
        let mut per_stack = vec![0u64; self.stacks.len()];
        for &(second, id, n) in &self.per_second {
            if keep(second) {
                per_stack[id] += n;
            }
        }
        self.stacks
            .iter()
            .zip(per_stack)
            .filter(|(_, n)| *n > 0)
            .map(|(stack, n)| {
                // ';' separates frames in the folded format; a C++ name may hold one.
                let frames: Vec<String> = stack.iter().rev().map(|f| f.replace(';', ":")).collect();
                format!("{} {n}", frames.join(";"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_cpu(per_second: Vec<(u32, usize, u64)>, stacks: &[&[&str]]) -> OnCpu {
        OnCpu {
            frequency_hz: 99,
            samples: per_second.iter().map(|s| s.2).sum(),
            stacks: stacks
                .iter()
                .map(|s| s.iter().map(|f| f.to_string()).collect())
                .collect(),
            per_second,
            locations: BTreeMap::new(),
            missing: Vec::new(),
        }
    }

    #[test]
    fn the_frame_of_the_slow_seconds_is_over_represented() {
        let stacks: &[&[&str]] = &[
            &["handle", "event_loop", "main"],
            &["burn", "event_loop", "main"],
        ];
        let mut per_second = Vec::new();
        for s in 0..10 {
            per_second.push((s, 0, 90));
            if s == 3 || s == 7 {
                per_second.push((s, 1, 60));
            }
        }
        let report = on_cpu(per_second, stacks).differential(&BTreeSet::from([3, 7]));
        assert_eq!(report.slow_samples, 300);
        let top = &report.over_represented[0];
        assert_eq!(top.frame, "burn");
        assert_eq!((top.slow_share, top.normal_share), (0.4, 0.0));
        // main and the loop are on every stack: not claimed.
        assert_eq!(report.over_represented.len(), 1);
        assert_eq!(report.on_cpu[0].stack[0], "handle");
    }

    /// A healthy server's receive spinning for the socket lock in the slow seconds (a
    /// rehearsal on a busy VM: `io_recv` under `lock_sock_nested` in 39 % of their samples):
    /// every frame it lifts is said to be the lock's wait, naming the function that took it;
    /// a frame that stands out by its own work beside it (the near miss) is not.
    #[test]
    fn frames_standing_out_only_by_spinning_for_a_kernel_lock_say_so() {
        let stacks: &[&[&str]] = &[
            &["tcp_recvmsg_[k]", "io_recv_[k]", "event_loop", "main"],
            &[
                "__pv_queued_spin_lock_slowpath_[k]",
                "_raw_spin_lock_bh_[k]",
                "lock_sock_nested_[k]",
                "tcp_recvmsg_[k]",
                "io_recv_[k]",
                "event_loop",
                "main",
            ],
            &["parse_headers", "event_loop", "main"],
            &["burn", "event_loop", "main"],
        ];
        let mut per_second = Vec::new();
        for s in 0..10 {
            per_second.extend([(s, 0, 5), (s, 2, 70), (s, 1, 3)]);
            if s == 3 || s == 7 {
                per_second.extend([(s, 1, 60), (s, 3, 50)]);
            }
        }
        let report = on_cpu(per_second, stacks).differential(&BTreeSet::from([3, 7]));
        let over: BTreeMap<&str, Option<&str>> = report
            .over_represented
            .iter()
            .map(|o| (o.frame.as_str(), o.lock_wait.as_deref()))
            .collect();
        let lock = Some("lock_sock_nested_[k]");
        assert_eq!(over.get("__pv_queued_spin_lock_slowpath_[k]"), Some(&lock));
        assert_eq!(over.get("lock_sock_nested_[k]"), Some(&lock));
        assert_eq!(over.get("io_recv_[k]"), Some(&lock));
        assert_eq!(over.get("burn"), Some(&None), "{over:?}");
        assert!(is_lock_spin("native_queued_spin_lock_slowpath_[k]"));
        assert!(is_lock_spin("queued_write_lock_slowpath_[k]"));
        assert!(!is_lock_spin("_raw_spin_lock_bh_[k]"));
        assert!(!is_lock_spin("spin_lock_slowpath_helper_of_mine"));
    }

    #[test]
    fn a_family_of_frames_stands_out_where_none_of_its_frames_does() {
        // The collector's work spread over three frames, each a sixth of the slow seconds'
        // samples; together half of them, against none in the others.
        let stacks: &[&[&str]] = &[
            &["handle", "main"],
            &["gc_mark", "gc_run", "main"],
            &["gc_sweep", "gc_run", "main"],
            &["gc_compact", "main"],
        ];
        let mut per_second = Vec::new();
        for s in 0..10 {
            per_second.push((s, 0, 90));
            if s == 4 {
                per_second.extend([(s, 1, 30), (s, 2, 30), (s, 3, 30)]);
            }
        }
        let oc = on_cpu(per_second, stacks);
        let gc = oc
            .share_of(&BTreeSet::from([4]), |f| f.starts_with("gc_"))
            .expect("the collector stands out");
        assert_eq!(gc.frame, "gc_run");
        assert_eq!(
            (gc.slow_share, gc.normal_share, gc.slow_samples),
            (0.5, 0.0, 90)
        );
        // Not in a second that has none of it.
        assert!(oc
            .share_of(&BTreeSet::from([2]), |f| f.starts_with("gc_"))
            .is_none());
    }

    #[test]
    fn noise_claims_nothing() {
        // Near miss: the same two stacks in every second, shares moving by a few points.
        let stacks: &[&[&str]] = &[&["a", "main"], &["b", "main"]];
        let mut per_second = Vec::new();
        for s in 0..10u32 {
            per_second.push((s, 0, 80 + u64::from(s % 3) * 4));
            per_second.push((s, 1, 20 - u64::from(s % 3) * 3));
        }
        let report = on_cpu(per_second, stacks).differential(&BTreeSet::from([2, 5]));
        assert!(
            report.over_represented.is_empty(),
            "{:?}",
            report.over_represented
        );
        let none = on_cpu(vec![(0, 0, 5)], stacks).differential(&BTreeSet::new());
        assert!(none.missing.iter().any(|m| m.contains("no slow second")));
    }

    #[test]
    fn the_unwound_stack_replaces_the_walk_where_it_is_whole_or_longer() {
        let cfi = |frames: &[u64], complete| Unwound {
            frames: frames.to_vec(),
            complete,
        };
        // No frame pointers: the walk stops at the leaf, the unwind reaches _start.
        assert_eq!(
            better_than(&[1], cfi(&[1, 2, 3, 4], true)),
            Some(vec![1, 2, 3, 4])
        );
        // Cut at the end of the stack copy, still further than the walk.
        assert_eq!(better_than(&[1], cfi(&[1, 2], false)), Some(vec![1, 2]));
        // Whole, though shorter than a walk that wandered into stale frame-pointer values.
        assert_eq!(
            better_than(&[1, 9, 9, 9, 9], cfi(&[1, 2, 3], true)),
            Some(vec![1, 2, 3])
        );
        // Cut short where the walk went further (JIT code, a deep stack): the walk stays.
        assert_eq!(better_than(&[1, 2, 3, 4], cfi(&[1, 2], false)), None);
        assert_eq!(better_than(&[1], cfi(&[], true)), None);
    }

    #[test]
    fn folded_stacks_are_root_first() {
        let stacks: &[&[&str]] = &[&["leaf;x", "main"]];
        let oc = on_cpu(vec![(0, 0, 3), (1, 0, 2)], stacks);
        assert_eq!(oc.folded(|_| true), vec!["main;leaf:x 5".to_string()]);
        assert_eq!(oc.folded(|s| s == 1), vec!["main;leaf:x 2".to_string()]);
    }
}
