//! On-CPU stacks of the target's processes, sampled with perf_event_open and joined to the
//! run's slow seconds.
//!
//! [`StackSampler::open`] opens the software `cpu-clock` event on every online CPU for every
//! process (system-wide per CPU: root, CAP_PERFMON or `perf_event_paranoid` ≤ 0), sampling
//! TID, TIME (CLOCK_MONOTONIC) and the user and kernel CALLCHAIN. Every tick the caller
//! hands it the target's pids ([`StackSampler::set_pids`], the process tree as someone else
//! follows it) and drains the ring buffers ([`StackSampler::drain`]): samples of other
//! processes are dropped, the rest are counted per (second of the run, interned stack), so
//! memory grows with distinct stacks, never with samples. [`StackSampler::finish`] resolves
//! the addresses once, at the end, with blazesym (the processes' ELF/DWARF via /proc/PID/maps,
//! the kernel via /proc/kallsyms); [`OnCpu::differential`] splits the samples into slow seconds
//! and the rest and names the frames over-represented in the slow ones.
//!
//! perf-event2 parses the ring buffer and the sample records itself, so this module needs no
//! `unsafe`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use perf_event::data::Record as PerfRecord;
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};
use serde::Serialize;

pub mod threads;

/// The default sampling frequency per CPU: 99 Hz, not 100, so the sampler does not tick in
/// lock-step with 10 ms timers in the target.
pub const DEFAULT_FREQUENCY_HZ: u64 = 99;

/// Ring buffer per CPU. At 99 Hz a sample is at most ~1 KiB (128 frames), and the buffer is
/// drained every ~100 ms: 128 KiB leaves room for a tick that comes late.
const RING_BYTES: usize = 128 * 1024;

/// Frames kept per callchain (the kernel's default `perf_event_max_stack` is 127).
const MAX_STACK: u16 = 127;

/// `PERF_CONTEXT_*` markers in a callchain are the values above this one (`(u64)-4095`).
const PERF_CONTEXT_MAX: u64 = -4095_i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128_i64 as u64;
const PERF_CONTEXT_USER: u64 = -512_i64 as u64;

/// Why the sampler could not start.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// This process may not sample every process on a CPU.
    #[error("on-CPU stacks need root, CAP_PERFMON or kernel.perf_event_paranoid <= 0 (it is {paranoid}): run as root or `sysctl kernel.perf_event_paranoid=0`")]
    NotAllowed {
        /// The value of /proc/sys/kernel/perf_event_paranoid ("n/a" if unreadable).
        paranoid: String,
    },
    /// The kernel refused the event on a CPU.
    #[error("cannot sample cpu-clock on CPU {cpu}: {error}")]
    Open {
        /// The CPU.
        cpu: usize,
        /// The error.
        error: std::io::Error,
    },
}

/// Whether this process may sample every process system-wide: `Err` says why not.
pub fn sampling_allowed() -> Result<(), SamplerError> {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    // CAP_SYS_ADMIN (21) or CAP_PERFMON (38) in the effective set bypass the paranoid level.
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("CapEff:")
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
        })
        .unwrap_or(0);
    if caps & (1 << 21 | 1 << 38) != 0 || paranoid.is_some_and(|p| p <= 0) {
        Ok(())
    } else {
        Err(SamplerError::NotAllowed {
            paranoid: paranoid.map_or("n/a".into(), |p| p.to_string()),
        })
    }
}

/// Now on CLOCK_MONOTONIC, the clock the samples are stamped with.
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// A callchain as the kernel gave it, split at its context markers; leaf first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RawStack {
    pid: u32,
    kernel: Box<[u64]>,
    user: Box<[u64]>,
}

impl RawStack {
    fn from_callchain(pid: u32, chain: &[u64]) -> RawStack {
        let (mut kernel, mut user) = (Vec::new(), Vec::new());
        let mut into_kernel = true;
        for &ip in chain {
            if ip >= PERF_CONTEXT_MAX {
                into_kernel = match ip {
                    PERF_CONTEXT_KERNEL => true,
                    PERF_CONTEXT_USER => false,
                    // Hypervisor or guest frames: not ours to name; kept with the kernel's.
                    _ => true,
                };
                continue;
            }
            if into_kernel {
                kernel.push(ip);
            } else {
                user.push(ip);
            }
        }
        RawStack {
            pid,
            kernel: kernel.into(),
            user: user.into(),
        }
    }
}

/// One mapping of /proc/PID/maps that has a file or a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub file_offset: u64,
    /// The file's path or the mapping's name (`[heap]`, `[vdso]`); empty for anonymous memory.
    pub path: String,
}

/// Parses /proc/PID/maps.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let _perms = fields.next()?;
            let offset = fields.next()?;
            let _dev = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.collect::<Vec<_>>().join(" ");
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                file_offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// How an address nobody could name is shown: `module+0xoffset` (the offset in the file for
/// a file mapping, from the mapping's start otherwise), `[unknown]+0xaddress` outside every
/// mapping. Returns the frame and the module it is in.
pub fn unresolved_frame(maps: &[Mapping], addr: u64) -> (String, String) {
    match maps.iter().find(|m| m.start <= addr && addr < m.end) {
        Some(m) if m.path.starts_with('/') => {
            let module = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
            let offset = addr - m.start + m.file_offset;
            (format!("{module}+{offset:#x}"), module)
        }
        Some(m) => {
            let module = if m.path.is_empty() {
                "[anon]".to_string()
            } else {
                m.path.clone()
            };
            (format!("{module}+{:#x}", addr - m.start), module)
        }
        None => (format!("[unknown]+{addr:#x}"), "[unknown]".into()),
    }
}

/// Samples on-CPU stacks of a set of processes on every CPU.
pub struct StackSampler {
    samplers: Vec<Sampler>,
    frequency_hz: u64,
    pids: HashSet<u32>,
    /// CLOCK_MONOTONIC at second 0 of the run; samples before it (warm-up) are not counted.
    origin_ns: Option<u64>,
    interned: HashMap<RawStack, u32>,
    stacks: Vec<RawStack>,
    /// Samples per (second of the run, interned stack).
    counts: HashMap<(u32, u32), u64>,
    /// Each target process's mappings when it was first seen, for the frames of a process
    /// that is gone by the end.
    maps: HashMap<u32, Vec<Mapping>>,
    samples_seen: u64,
    samples_kept: u64,
    lost: u64,
    missing: Vec<String>,
}

impl StackSampler {
    /// Opens `cpu-clock` at `frequency_hz` on every online CPU, for all processes, and
    /// starts sampling. Needs [`sampling_allowed`].
    pub fn open(frequency_hz: u64) -> Result<StackSampler, SamplerError> {
        sampling_allowed()?;
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| crate::cpus::parse_list(&s).ok())
            .unwrap_or_else(|| {
                (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
            });
        let mut samplers = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            let mut builder = Builder::new(Software::CPU_CLOCK);
            builder
                .one_cpu(cpu)
                .any_pid()
                .sample_frequency(frequency_hz)
                .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CALLCHAIN)
                .sample_max_stack(MAX_STACK)
                .clockid(Clock::MONOTONIC)
                .exclude_kernel(false)
                .exclude_hv(true)
                .enabled(true);
            let sampler = builder
                .build()
                .and_then(|c| c.sampled(RING_BYTES))
                .map_err(|error| SamplerError::Open { cpu, error })?;
            samplers.push(sampler);
        }
        Ok(StackSampler {
            samplers,
            frequency_hz,
            pids: HashSet::new(),
            origin_ns: None,
            interned: HashMap::new(),
            stacks: Vec::new(),
            counts: HashMap::new(),
            maps: HashMap::new(),
            samples_seen: 0,
            samples_kept: 0,
            lost: 0,
            missing: Vec::new(),
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
            self.maps.entry(pid).or_insert_with(|| {
                std::fs::read_to_string(format!("/proc/{pid}/maps"))
                    .map(|t| parse_maps(&t))
                    .unwrap_or_default()
            });
        }
    }

    /// Reads what the kernel wrote since the last call and counts the target's samples.
    pub fn drain(&mut self) {
        let StackSampler {
            samplers,
            pids,
            origin_ns,
            interned,
            stacks,
            counts,
            samples_seen,
            samples_kept,
            lost,
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
                let raw = RawStack::from_callchain(pid, chain);
                let id = match interned.get(&raw) {
                    Some(&id) => id,
                    None => {
                        let id = stacks.len() as u32;
                        stacks.push(raw.clone());
                        interned.insert(raw, id);
                        id
                    }
                };
                *counts.entry((second, id)).or_insert(0) += 1;
                *samples_kept += 1;
            }
        }
    }

    /// Stops sampling and names every frame. Call it while the target still runs: its
    /// binaries are found through /proc/PID.
    pub fn finish(mut self) -> OnCpu {
        self.drain();
        for sampler in &mut self.samplers {
            let _ = sampler.disable();
        }
        let mut missing = std::mem::take(&mut self.missing);
        if self.lost > 0 {
            missing.push(format!(
                "{} samples lost: the ring buffers filled before they were read",
                self.lost
            ));
        }
        let names = Names::resolve(&self.stacks, &self.maps, &mut missing);
        // Stacks of several processes (nginx workers) that name the same frames are one.
        let mut by_frames: HashMap<Vec<String>, usize> = HashMap::new();
        let mut frames_of: Vec<Vec<String>> = Vec::new();
        let mut merged_id = Vec::with_capacity(self.stacks.len());
        let mut short_user = 0usize;
        for raw in &self.stacks {
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
        if !self.stacks.is_empty() && short_user * 2 > self.stacks.len() {
            missing.push(format!(
                "{short_user} of {} stacks have at most two user-space frames: the target was built without frame pointers (the kernel walks user stacks by frame pointer), so only the function on CPU is known, not its callers; rebuild with -C force-frame-pointers=yes or -fno-omit-frame-pointer",
                self.stacks.len()
            ));
        }
        let mut per_second: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        for (&(second, id), &n) in &self.counts {
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
            locations: names.locations,
            missing,
        }
    }
}

/// Names of every address of the sampled stacks, resolved once.
struct Names {
    user: HashMap<(u32, u64), String>,
    kernel: HashMap<u64, String>,
    /// file:line of a function, where debug info had one.
    locations: BTreeMap<String, String>,
}

impl Names {
    fn resolve(
        stacks: &[RawStack],
        maps: &HashMap<u32, Vec<Mapping>>,
        missing: &mut Vec<String>,
    ) -> Names {
        use blazesym::symbolize::source::{Kernel, Process, Source};
        use blazesym::symbolize::{Input, Symbolized, Symbolizer};
        use blazesym::Pid;

        let mut user_addrs: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        let mut kernel_addrs = BTreeSet::new();
        for raw in stacks {
            user_addrs
                .entry(raw.pid)
                .or_default()
                .extend(raw.user.iter().copied());
            kernel_addrs.extend(raw.kernel.iter().copied());
        }
        let symbolizer = Symbolizer::new();
        let mut names = Names {
            user: HashMap::new(),
            kernel: HashMap::new(),
            locations: BTreeMap::new(),
        };
        let mut name_of = |sym: &blazesym::symbolize::Sym<'_>, suffix: &str| {
            let name = format!("{}{suffix}", sym.name);
            if let Some(code) = &sym.code_info {
                if let Some(line) = code.line {
                    names
                        .locations
                        .entry(name.clone())
                        .or_insert_with(|| format!("{}:{line}", code.to_path().display()));
                }
            }
            name
        };
        // Frames without a name, per module: what the `missing` notes say.
        let mut unnamed: BTreeMap<String, u64> = BTreeMap::new();
        let mut resolved_user = HashMap::new();
        for (pid, addrs) in &user_addrs {
            let addrs: Vec<u64> = addrs.iter().copied().collect();
            let live_maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .ok()
                .map(|t| parse_maps(&t));
            let maps = live_maps
                .as_deref()
                .or(maps.get(pid).map(Vec::as_slice))
                .unwrap_or(&[]);
            let src = Source::Process(Process::new(Pid::from(*pid)));
            let symbolized = if live_maps.is_some() {
                symbolizer.symbolize(&src, Input::AbsAddr(&addrs)).ok()
            } else {
                missing.push(format!(
                    "pid {pid} exited before the end: its frames are module+offset"
                ));
                None
            };
            for (i, &addr) in addrs.iter().enumerate() {
                let name = match symbolized.as_ref().map(|s| &s[i]) {
                    Some(Symbolized::Sym(sym)) => name_of(sym, ""),
                    _ => {
                        let (frame, module) = unresolved_frame(maps, addr);
                        *unnamed.entry(module).or_insert(0) += 1;
                        frame
                    }
                };
                resolved_user.insert((*pid, addr), name);
            }
        }
        let kernel_addrs: Vec<u64> = kernel_addrs.into_iter().collect();
        let kernel_src = Source::Kernel(Kernel {
            // /proc/kallsyms only: looking for a vmlinux image costs time and is rarely there.
            vmlinux: blazesym::MaybeDefault::None,
            ..Kernel::default()
        });
        let kernel_syms = if kernel_addrs.is_empty() {
            None
        } else {
            match symbolizer.symbolize(&kernel_src, Input::AbsAddr(&kernel_addrs)) {
                Ok(s) => Some(s),
                Err(e) => {
                    missing.push(format!("kernel frames without names (/proc/kallsyms: {e})"));
                    None
                }
            }
        };
        let mut resolved_kernel = HashMap::new();
        for (i, &addr) in kernel_addrs.iter().enumerate() {
            let name = match kernel_syms.as_ref().map(|s| &s[i]) {
                // perf's convention, which inferno colours as kernel code.
                Some(Symbolized::Sym(sym)) => name_of(sym, "_[k]"),
                _ => {
                    *unnamed.entry("[kernel]".into()).or_insert(0) += 1;
                    format!("[kernel]+{addr:#x}")
                }
            };
            resolved_kernel.insert(addr, name);
        }
        for (module, n) in unnamed {
            missing.push(format!(
                "{n} distinct addresses in {module} have no symbol (stripped, or not a file): shown as {module}+0xoffset"
            ));
        }
        names.user = resolved_user;
        names.kernel = resolved_kernel;
        names
    }

    /// The frames of a stack, leaf first: kernel frames, then user frames.
    fn frames(&self, raw: &RawStack) -> Vec<String> {
        let kernel = raw.kernel.iter().map(|a| {
            self.kernel
                .get(a)
                .cloned()
                .unwrap_or_else(|| format!("[kernel]+{a:#x}"))
        });
        let user = raw.user.iter().map(|a| {
            self.user
                .get(&(raw.pid, *a))
                .cloned()
                .unwrap_or_else(|| format!("[unknown]+{a:#x}"))
        });
        kernel.chain(user).collect()
    }
}

/// The target's on-CPU samples of a run, named, per second.
#[derive(Debug, Clone, Default)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackCount {
    /// Frames, leaf first; kernel frames end in `_[k]`; unnamed ones are `module+0xoffset`.
    pub stack: Vec<String>,
    /// Samples over the run.
    pub samples: u64,
    /// Of which in slow seconds.
    pub slow_samples: u64,
}

/// A frame seen on CPU more often in the slow seconds than in the others.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

/// The `stacks` section of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StacksReport {
    /// The perf event sampled.
    pub sampler: &'static str,
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

/// Stacks listed in the report.
pub const TOP_STACKS: usize = 20;

/// Least samples of a frame in the slow seconds before it can be claimed.
const MIN_SLOW_SAMPLES: u64 = 10;

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
        let mut over: Vec<OverRepresented> = Vec::new();
        if slow_total > 0 && normal_total > 0 {
            for (frame, &(slow, normal)) in &frames {
                if let Some((ps, pn)) = clearly_more(slow, slow_total, normal, normal_total) {
                    over.push(OverRepresented {
                        frame: frame.to_string(),
                        location: self.locations.get(*frame).cloned(),
                        slow_share: round3(ps),
                        normal_share: round3(pn),
                        slow_samples: slow,
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
            sampler: "cpu-clock",
            frequency_hz: self.frequency_hz,
            samples: self.samples,
            slow_samples: slow_total,
            on_cpu,
            slow_seconds: slow_seconds.iter().copied().collect(),
            over_represented: over,
            missing,
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

/// The slow seconds of a run from its time series, `(second, outliers, max_us)` each: the
/// seconds with outliers whose slowest response is at least 3× the median second's slowest,
/// or whose outliers are at least 3× the median second's. On a busy machine every second has
/// a few outliers; a spike stands out of them.
pub fn slow_seconds(seconds: &[(u32, u64, u64)]) -> BTreeSet<u32> {
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let max_median = median(seconds.iter().map(|s| s.2).collect());
    let outliers_median = median(seconds.iter().map(|s| s.1).collect());
    seconds
        .iter()
        .filter(|&&(_, outliers, max_us)| {
            outliers > 0
                && (max_us >= max_median.saturating_mul(3)
                    || (outliers_median > 0 && outliers >= outliers_median.saturating_mul(3)))
        })
        .map(|s| s.0)
        .collect()
}

/// Whether `slow` of `slow_total` is clearly a larger share than `normal` of `normal_total`:
/// at least 10 points and twice as large, at least [`MIN_SLOW_SAMPLES`], and a two-proportion
/// z above 4 (a healthy run's noise claims nothing). Returns the two shares.
fn clearly_more(slow: u64, slow_total: u64, normal: u64, normal_total: u64) -> Option<(f64, f64)> {
    if slow_total == 0 || normal_total == 0 {
        return None;
    }
    let (ns, nn) = (slow_total as f64, normal_total as f64);
    let (ps, pn) = (slow as f64 / ns, normal as f64 / nn);
    let pooled = (slow + normal) as f64 / (ns + nn);
    let se = (pooled * (1.0 - pooled) * (1.0 / ns + 1.0 / nn)).sqrt();
    let z = if se > 0.0 { (ps - pn) / se } else { 0.0 };
    (slow >= MIN_SLOW_SAMPLES && ps - pn >= 0.10 && ps >= 2.0 * pn && z > 4.0).then_some((ps, pn))
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callchains_split_at_their_context_markers() {
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_0001,
            0xffff_0002,
            PERF_CONTEXT_USER,
            0x10,
            0x20,
        ];
        let raw = RawStack::from_callchain(7, &chain);
        assert_eq!(&*raw.kernel, &[0xffff_0001, 0xffff_0002]);
        assert_eq!(&*raw.user, &[0x10, 0x20]);
        let user_only = RawStack::from_callchain(7, &[PERF_CONTEXT_USER, 0x30]);
        assert!(user_only.kernel.is_empty());
        assert_eq!(&*user_only.user, &[0x30]);
    }

    #[test]
    fn unnamed_addresses_are_module_plus_offset() {
        let maps = parse_maps(
            "55d0a0000000-55d0a0010000 r-xp 00002000 08:01 1234 /usr/bin/my server\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n",
        );
        assert_eq!(maps.len(), 3);
        assert_eq!(
            unresolved_frame(&maps, 0x55d0a0000010),
            ("my server+0x2010".to_string(), "my server".to_string())
        );
        assert_eq!(unresolved_frame(&maps, 0x7f0000000040).0, "[anon]+0x40");
        assert_eq!(unresolved_frame(&maps, 0x7ffd00000008).0, "[vdso]+0x8");
        assert_eq!(unresolved_frame(&maps, 0x42).0, "[unknown]+0x42");
    }

    #[test]
    fn an_address_in_no_mapping_is_kept_and_noted() {
        // This process's own pid, an address no mapping covers: blazesym cannot name it, the
        // frame stays (as [unknown]+0x...) and the notes say why.
        let pid = std::process::id();
        let raw = RawStack {
            pid,
            kernel: Box::new([]),
            user: Box::new([0x1000]),
        };
        let mut missing = Vec::new();
        let maps = HashMap::from([(pid, Vec::new())]);
        let names = Names::resolve(std::slice::from_ref(&raw), &maps, &mut missing);
        assert_eq!(names.frames(&raw), vec!["[unknown]+0x1000".to_string()]);
        assert!(
            missing.iter().any(|m| m.contains("[unknown]")),
            "{missing:?}"
        );
    }

    #[test]
    fn a_function_of_this_binary_is_named() {
        let pid = std::process::id();
        let addr = a_function_of_this_binary_is_named as *const () as usize as u64;
        let raw = RawStack {
            pid,
            kernel: Box::new([]),
            user: Box::new([addr]),
        };
        let mut missing = Vec::new();
        let names = Names::resolve(std::slice::from_ref(&raw), &HashMap::new(), &mut missing);
        let frame = &names.frames(&raw)[0];
        assert!(
            frame.contains("a_function_of_this_binary_is_named"),
            "{frame}"
        );
    }

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
    fn a_spike_stands_out_of_the_noise() {
        // Every second has outliers (a busy machine); second 3 has a 300 ms one.
        let seconds: Vec<(u32, u64, u64)> = (0..8)
            .map(|s| (s, 1500, if s == 3 { 320_000 } else { 40_000 }))
            .collect();
        assert_eq!(slow_seconds(&seconds), BTreeSet::from([3]));
        // A quiet run: the only second with outliers is slow.
        let quiet = [(0, 0, 900), (1, 4, 9_000), (2, 0, 1_000)];
        assert_eq!(slow_seconds(&quiet), BTreeSet::from([1]));
        assert!(slow_seconds(&[]).is_empty());
    }

    #[test]
    fn folded_stacks_are_root_first() {
        let stacks: &[&[&str]] = &[&["leaf;x", "main"]];
        let oc = on_cpu(vec![(0, 0, 3), (1, 0, 2)], stacks);
        assert_eq!(oc.folded(|_| true), vec!["main;leaf:x 5".to_string()]);
        assert_eq!(oc.folded(|s| s == 1), vec!["main;leaf:x 2".to_string()]);
    }
}
