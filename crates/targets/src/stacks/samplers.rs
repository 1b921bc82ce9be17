//! The samplers of one run, driven together: on-CPU stacks always, off-CPU time from
//! sched_switch (or the /proc fallback), and at the end one naming pass for both and the
//! [`Inside`] of the run: the report section, what a window of the run looked like from
//! inside the server, and the flame graphs.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::live::{top_shares, Live, LiveInside, SecondInside, SETTLE_NS};
use super::off_cpu::{BlockedOverRepresented, BlockedTime, OffCpu};
use super::on_cpu::{OverRepresented, StacksReport};
use super::switches::unavailable_note;
use super::symbols::Names;
use super::threads::{ThreadStateSampler, DEFAULT_INTERVAL};
use super::{slow_seconds, OnCpu, SamplerError, StackSampler, SwitchSampler};

/// Where off-CPU time comes from in this run.
enum OffSource {
    Switches(Box<SwitchSampler>),
    Threads(ThreadStateSampler),
    Nothing,
}

/// The stack samplers of one run.
pub struct Session {
    on: StackSampler,
    off: OffSource,
    /// Why off-CPU time has no stacks or is not seen at all.
    off_notes: Vec<String>,
    /// CLOCK_MONOTONIC at second 0 of the run.
    origin_ns: Option<u64>,
    /// The dashboard's view, summed up a second at a time when asked.
    live: Live,
}

impl Session {
    /// Starts the on-CPU sampler at `frequency_hz` per CPU and, with `trace_switches`, the
    /// off-CPU tracer; without it, or where sched_switch cannot be had, the /proc thread-state
    /// sampler on the first of `looker_cpus` (the generator's). The tracer writes a record per
    /// context switch of the server: against nginx at a fixed 20,000 req/s it cost the server
    /// ~30 % more CPU per request (BENCHMARKS.md), so it is for runs that ask for it. Fails
    /// only when on-CPU sampling cannot start.
    pub fn open(
        frequency_hz: u64,
        looker_cpus: &[usize],
        trace_switches: bool,
    ) -> Result<Session, SamplerError> {
        let on = StackSampler::open(frequency_hz)?;
        let mut off_notes = Vec::new();
        let switches = if trace_switches {
            SwitchSampler::open().map_err(|e| unavailable_note(&e))
        } else {
            Err("off-CPU stacks: not traced (--stacks on traces sched_switch, which costs the server CPU per context switch); off-CPU time comes from /proc thread states (no stacks, only the wait channel)".to_string())
        };
        let off = match switches {
            Ok(s) => OffSource::Switches(Box::new(s)),
            Err(note) => {
                off_notes.push(note);
                match ThreadStateSampler::start(DEFAULT_INTERVAL, looker_cpus) {
                    Ok(t) => OffSource::Threads(t),
                    Err(e) => {
                        off_notes.push(format!(
                            "off-CPU time: n/a (the /proc sampler's thread did not start: {e})"
                        ));
                        OffSource::Nothing
                    }
                }
            }
        };
        Ok(Session {
            on,
            off,
            off_notes,
            origin_ns: None,
            live: Live::new(),
        })
    }

    /// The on-CPU sampling frequency per CPU.
    pub fn frequency_hz(&self) -> u64 {
        self.on.frequency_hz()
    }

    /// Second 0 of the run began at `origin_ns` (CLOCK_MONOTONIC, see [`super::monotonic_ns`]).
    pub fn begin(&mut self, origin_ns: u64) {
        self.origin_ns = Some(origin_ns);
        self.on.begin(origin_ns);
        match &mut self.off {
            OffSource::Switches(s) => s.begin(origin_ns),
            OffSource::Threads(t) => t.begin(origin_ns),
            OffSource::Nothing => {}
        }
    }

    /// The target's processes now (the whole tree): follows them and reads the buffers.
    pub fn tick(&mut self, pids: &[u32]) {
        self.on.set_pids(pids);
        self.on.drain();
        match &mut self.off {
            OffSource::Switches(s) => {
                s.set_pids(pids);
                s.drain();
            }
            OffSource::Threads(t) => t.set_pids(pids),
            OffSource::Nothing => {}
        }
    }

    /// For the dashboard: sums up the seconds that are over since the last call (their last
    /// samples read, [`SETTLE_NS`] after their end) and, when there were any, returns the
    /// last second and the last of `slow` (the run's slow seconds so far) summed up. Call it
    /// after [`Self::tick`]; a run without a dashboard never pays for it.
    pub fn live(&mut self, slow: &BTreeSet<u32>) -> Option<LiveInside> {
        let first = self.live.next;
        while self.live_due() {
            let second = self.live.next;
            let counts = self.on.second(second);
            let samples = counts.iter().map(|c| c.1).sum();
            let on_cpu = self
                .live
                .on_cpu(&counts, &self.on.table.stacks, &self.on.table.maps);
            let off_cpu = match &self.off {
                OffSource::Switches(s) => {
                    let (wall, watched) = s.second(second);
                    Some(self.live.off_cpu_switches(
                        &wall,
                        watched,
                        |w| s.way(w),
                        &s.table.stacks,
                        &s.table.maps,
                    ))
                }
                OffSource::Threads(t) => match t.second(second) {
                    Some((waits, watched)) => Some(top_shares(waits, watched)),
                    // Its thread is behind (a loaded machine): the next call sums it up.
                    None if t.finished_through().is_none_or(|done| done < second) => break,
                    None => None,
                },
                OffSource::Nothing => None,
            };
            self.live.keep(SecondInside {
                second,
                samples,
                on_cpu,
                off_cpu,
            });
            self.live.next += 1;
        }
        (self.live.next != first).then(|| self.live.view(self.off_source(), slow))
    }

    /// Whether a second is over that [`Self::live`] has not summed up yet.
    pub fn live_due(&self) -> bool {
        self.origin_ns.is_some_and(|origin| {
            origin + (u64::from(self.live.next) + 1) * 1_000_000_000 + SETTLE_NS
                <= super::monotonic_ns()
        })
    }

    /// Where off-CPU time comes from, `None` when it is not seen.
    fn off_source(&self) -> Option<String> {
        match &self.off {
            OffSource::Switches(_) => Some("sched:sched_switch".into()),
            OffSource::Threads(_) => Some("/proc thread states".into()),
            OffSource::Nothing => None,
        }
    }

    /// Stops sampling and names every frame (call it while the target still runs: its
    /// binaries are read through /proc/PID). `seconds` is the run's time series, `(second,
    /// outliers, max_us)` each, from which the slow seconds are found.
    pub fn finish(mut self, seconds: &[(u32, u64, u64)]) -> Inside {
        self.on.stop();
        let (mut switches, threads) = match self.off {
            OffSource::Switches(s) => (Some(*s), None),
            OffSource::Threads(t) => (None, Some(t)),
            OffSource::Nothing => (None, None),
        };
        if let Some(s) = &mut switches {
            s.stop();
        }
        let mut maps = self.on.table.maps.clone();
        let mut off_stacks = &[][..];
        if let Some(s) = &switches {
            for (pid, m) in &s.table.maps {
                maps.entry(*pid).or_insert_with(|| m.clone());
            }
            off_stacks = &s.table.stacks;
        }
        // Before naming: a JVM writes its perf map now; a runtime that lacks what names its
        // functions says how to turn it on, once for all its processes.
        let mut missing = Vec::new();
        let mut pids: Vec<u32> = maps.keys().copied().collect();
        pids.sort_unstable();
        for note in pids.into_iter().filter_map(super::runtimes::prepare) {
            if !missing.contains(&note) {
                missing.push(note);
            }
        }
        let names = Names::resolve(
            self.on.table.stacks.iter().chain(off_stacks),
            &maps,
            &mut missing,
        );
        let mut on_cpu = self.on.named(&names);
        on_cpu.missing.extend(missing);
        let off_cpu = match (switches, threads) {
            (Some(s), _) => Some(s.named(&names)),
            (None, Some(t)) => Some(t.finish()),
            (None, None) => None,
        };
        Inside::new(on_cpu, off_cpu, self.off_notes, slow_seconds(seconds))
    }
}

/// The `stacks` section of the report: on-CPU stacks and off-CPU time, split into the slow
/// seconds and the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InsideReport {
    /// The on-CPU part.
    #[serde(flatten)]
    pub on_cpu: StacksReport,
    /// Where off-CPU time came from; `None` when it was not seen.
    pub off_cpu_sampler: Option<String>,
    /// The ways the target's threads were off CPU, most time first.
    pub off_cpu: Vec<BlockedTime>,
    /// Those that took a clearly larger share of their threads' time in the slow seconds.
    pub off_cpu_over_represented: Vec<BlockedOverRepresented>,
}

/// What the target's threads did over a run, joined to its slow seconds. Serializable: a
/// `tailscope agent` samples and names on the server's host and sends it to the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inside {
    on_cpu: OnCpu,
    off_cpu: Option<OffCpu>,
    /// Why off-CPU time was not seen, kept to say it again when compared in other seconds
    /// ([`Inside::compared_in`]); absent from what an older agent sent.
    #[serde(default)]
    off_notes: Vec<String>,
    slow: BTreeSet<u32>,
    /// The report section.
    pub report: InsideReport,
}

/// What stood out in the slow seconds, on CPU or off it: the one judgement that both the
/// "Server inside" lists and every diagnosis' inside line read (they once judged apart, a
/// diagnosis' window against the other seconds, the lists the slow seconds against the rest,
/// and a Python burn read "no stack stands out" above a list that named one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Standout<'a> {
    /// A frame on CPU.
    Running(&'a OverRepresented),
    /// A way of being off CPU.
    Waiting(&'a BlockedOverRepresented),
}

impl Standout<'_> {
    /// How much larger its share is in the slow seconds than in the others.
    pub fn lift(&self) -> f64 {
        match self {
            Standout::Running(o) => o.slow_share - o.normal_share,
            Standout::Waiting(o) => o.slow_share - o.normal_share,
        }
    }
}

impl InsideReport {
    /// The frame or wait that stands out most in the slow seconds: the first of the on-CPU
    /// list or of the off-CPU list, whichever grew more; `None` when neither list has one.
    pub fn standout(&self) -> Option<Standout<'_>> {
        [
            self.on_cpu.over_represented.first().map(Standout::Running),
            self.off_cpu_over_represented.first().map(Standout::Waiting),
        ]
        .into_iter()
        .flatten()
        .max_by(|a, b| a.lift().total_cmp(&b.lift()))
    }
}

impl Inside {
    fn new(
        on_cpu: OnCpu,
        off_cpu: Option<OffCpu>,
        off_notes: Vec<String>,
        slow: BTreeSet<u32>,
    ) -> Inside {
        let mut on_report = on_cpu.differential(&slow);
        on_report.missing.extend(off_notes.iter().cloned());
        let (off_times, off_over) = off_cpu
            .as_ref()
            .map(|o| o.differential(&slow))
            .unwrap_or_default();
        if let Some(o) = &off_cpu {
            on_report.missing.extend(o.missing.iter().cloned());
        }
        let report = InsideReport {
            on_cpu: on_report,
            off_cpu_sampler: off_cpu.as_ref().map(|o| o.source.clone()),
            off_cpu: off_times,
            off_cpu_over_represented: off_over,
        };
        Inside {
            on_cpu,
            off_cpu,
            off_notes,
            slow,
            report,
        }
    }

    /// The same stacks compared in `slow` against the other seconds: the lists, every
    /// diagnosis' inside line and the rules that refine a stall then all read those seconds.
    /// A named `server_stall` passes its own: the run's slow seconds, found from the time
    /// series alone, can hold others (a Node server's warm-up second, its JIT compiling
    /// through `Builtin_HandleApiCall`, was read as a `cpu_burn` of the stall).
    pub fn compared_in(self, slow: BTreeSet<u32>) -> Inside {
        if slow == self.slow {
            return self;
        }
        Inside::new(self.on_cpu, self.off_cpu, self.off_notes, slow)
    }

    /// `self` if its on-CPU samples name only stacks it holds: what a peer sent is
    /// checked before it is read, as an index past the stacks would stop the run.
    pub fn checked(self) -> Result<Inside, String> {
        let stacks = self.on_cpu.stacks.len();
        match self.on_cpu.per_second.iter().find(|p| p.1 >= stacks) {
            Some(p) => Err(format!(
                "on-CPU samples of stack {} where {stacks} stacks were sent",
                p.1
            )),
            None => Ok(self),
        }
    }

    /// The seconds of the run found slow.
    pub fn slow_seconds(&self) -> &BTreeSet<u32> {
        &self.slow
    }

    /// The on-CPU samples of the slow seconds with a frame that `matches` on their stack
    /// (a runtime's collector, say), where they are clearly more of them than of the other
    /// seconds' samples ([`OnCpu::share_of`]).
    pub fn on_cpu_share(&self, matches: impl Fn(&str) -> bool) -> Option<OverRepresented> {
        self.on_cpu.share_of(&self.slow, matches)
    }

    /// The frames that `matches` on the server's stacks in the slow seconds, on CPU or off
    /// it, most time first (a sample on CPU counts as its period): what was there at all,
    /// however briefly, where a short phase (a runtime stopping its threads) is the point.
    pub fn seen_in_slow(&self, matches: impl Fn(&str) -> bool) -> Vec<String> {
        let us_per_sample = 1_000_000 / self.on_cpu.frequency_hz.max(1);
        let mut frames: std::collections::HashMap<String, u64> = self
            .off_cpu
            .as_ref()
            .map(|o| o.frames_in(&self.slow, &matches))
            .unwrap_or_default();
        for &(second, id, n) in &self.on_cpu.per_second {
            if !self.slow.contains(&second) {
                continue;
            }
            let Some(stack) = self.on_cpu.stacks.get(id) else {
                continue;
            };
            for f in stack.iter().filter(|f| matches(f)).collect::<BTreeSet<_>>() {
                *frames.entry(f.clone()).or_insert(0) += n * us_per_sample;
            }
        }
        let mut frames: Vec<(String, u64)> = frames.into_iter().collect();
        frames.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        frames.into_iter().map(|(f, _)| f).collect()
    }

    /// What the server was doing in the slow seconds, said for a diagnosis whose window is
    /// `[start_s, end_s]` (`None`: the slow seconds): [`InsideReport::standout`], the frame on
    /// CPU or the wait that the lists of the report name first, or a sentence saying that none
    /// stands out. A window that holds none of the slow seconds says so.
    pub fn explain(&self, window: Option<(f64, f64)>) -> String {
        if self.slow.is_empty() {
            return "no slow second to look inside".into();
        }
        let listed = crate::seconds::seconds_list(self.slow.iter().map(|&s| u64::from(s)));
        let mut when = format!("the slow seconds ({listed})");
        if let Some((start, end)) = window {
            let first = start.max(0.0).floor() as u32;
            let last = (end.max(start).ceil() as u32).max(first + 1);
            if !(first..last).any(|s| self.slow.contains(&s)) {
                when += &format!(", none of them in {start:.2}–{end:.2} s,");
            }
        }
        match self.report.standout() {
            Some(Standout::Running(o)) => format!(
                "{:.0} % of the server's on-CPU samples in {when} were in {}{} (vs {:.1} % in the other seconds){}",
                o.slow_share * 100.0,
                o.frame,
                o.location.as_ref().map_or(String::new(), |l| format!(" at {l}")),
                o.normal_share * 100.0,
                super::text::lock_wait_note(o)
            ),
            Some(Standout::Waiting(o)) => format!(
                "{:.0} % of thread {}'s time in {when} was off-CPU ({}) {} (vs {:.1} % in the other seconds)",
                o.slow_share * 100.0,
                o.blocked.thread,
                o.blocked.state,
                o.blocked.place(),
                o.normal_share * 100.0
            ),
            None => format!(
                "no stack or wait of the server stands out in {when} against the other seconds"
            ),
        }
    }

    /// Writes a flame graph (SVG, inferno): of the on-CPU samples over the whole run, or,
    /// with `slow_only`, of the slow seconds' wall time, on-CPU samples (as CPU time) beside
    /// off-CPU waits, so a stall shows as wide as a burn.
    pub fn write_flamegraph(&self, path: &Path, slow_only: bool) -> std::io::Result<()> {
        let mut options = inferno::flamegraph::Options::default();
        let lines = if slow_only {
            options.title = format!(
                "tailscope: the server in the slow seconds ({}), on and off CPU",
                if self.slow.is_empty() {
                    "none".to_string()
                } else {
                    self.slow
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            );
            options.count_name = "µs".into();
            let us_per_sample = 1_000_000 / self.on_cpu.frequency_hz.max(1);
            let keep = |s: u32| self.slow.contains(&s);
            let mut lines: Vec<String> = self
                .on_cpu
                .folded(keep)
                .into_iter()
                .filter_map(|l| {
                    let (stack, n) = l.rsplit_once(' ')?;
                    let n: u64 = n.parse().ok()?;
                    Some(format!("on-CPU;{stack} {}", n * us_per_sample))
                })
                .collect();
            if let Some(off) = &self.off_cpu {
                lines.extend(off.folded(keep).into_iter().map(|l| format!("off-CPU;{l}")));
            }
            lines
        } else {
            options.title = "tailscope: the server's on-CPU stacks over the run".into();
            options.count_name = "samples".into();
            self.on_cpu.folded(|_| true)
        };
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let result = if lines.is_empty() {
            // inferno refuses an empty input; say so in the picture rather than fail the run.
            options.title += " (nothing sampled)";
            inferno::flamegraph::from_lines(&mut options, ["nothing-sampled 1"], file)
        } else {
            inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), file)
        };
        result.map_err(std::io::Error::other)
    }

    /// The "Server inside" section of the text summary.
    pub fn text(&self) -> String {
        super::text::section(&self.report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::LiveInside;

    fn inside() -> Inside {
        let mut on = OnCpu {
            frequency_hz: 100,
            stacks: vec![
                vec!["handle".into(), "main".into()],
                vec!["burn".into(), "main".into()],
            ],
            ..OnCpu::default()
        };
        let mut off = OffCpu::new("test");
        let lock = super::super::Blocked {
            thread: "srv".into(),
            state: "S".into(),
            syscall: "futex".into(),
            stack: vec![
                "__x64_sys_futex_[k]".into(),
                "lock_wait".into(),
                "main".into(),
            ],
        };
        for s in 0..10u32 {
            on.per_second.push((s, 0, 90));
            off.watch(s, 1, 1_000_000);
            if s == 3 {
                on.per_second.push((s, 1, 60));
            }
            if s == 7 || s == 9 {
                off.add(s, &lock, 1, 600_000);
            }
        }
        on.samples = on.per_second.iter().map(|p| p.2).sum();
        Inside::new(on, Some(off), Vec::new(), BTreeSet::from([3, 7, 9]))
    }

    #[test]
    fn every_window_reads_the_one_judgement_of_the_lists() {
        let inside = inside();
        // The lock of 7 and 9 grew most (40 % of the thread's time vs 0 %); the burn of second
        // 3 is listed too (18 % of the slow seconds' samples).
        let standout = inside.report.standout().expect("something stands out");
        let Standout::Waiting(top) = standout else {
            panic!("{standout:?}")
        };
        assert_eq!(top.blocked.syscall, "futex");
        assert_eq!(inside.report.on_cpu.over_represented[0].frame, "burn");
        for window in [Some((3.1, 3.4)), Some((7.2, 7.9)), Some((0.0, 10.0)), None] {
            let line = inside.explain(window);
            assert!(
                line.contains("off-CPU (S) in futex") && line.contains("lock_wait"),
                "{window:?}: {line}"
            );
            assert!(line.contains("slow seconds (3, 7, 9)"), "{line}");
        }
        // A window that holds none of them says so.
        let quiet = inside.explain(Some((5.0, 5.5)));
        assert!(quiet.contains("none of them in 5.00–5.50 s"), "{quiet}");
        // The section lists what the line names.
        let text = inside.text();
        assert!(
            text.contains("blocked in the slow seconds: thread srv (S) in futex"),
            "{text}"
        );
    }

    #[test]
    fn compared_in_a_stalls_seconds_the_lists_and_the_line_read_them() {
        // A warm-up second 0 (the JIT through Builtin_HandleApiCall) and a collection in
        // second 3: the time series found both slow, the stall held only second 3.
        let mut on = OnCpu {
            frequency_hz: 100,
            stacks: vec![
                vec!["handle".into(), "main".into()],
                vec!["Builtin_HandleApiCall".into(), "main".into()],
                vec!["v8::internal::Heap::CollectGarbage".into(), "main".into()],
            ],
            ..OnCpu::default()
        };
        for s in 0..10u32 {
            on.per_second.push((s, 0, 90));
        }
        on.per_second.push((0, 1, 80));
        on.per_second.push((3, 2, 40));
        on.samples = on.per_second.iter().map(|p| p.2).sum();
        let note = vec!["off-CPU not seen: test".to_string()];
        let run = Inside::new(on, None, note, BTreeSet::from([0, 3]));
        assert_eq!(
            run.report.on_cpu.over_represented[0].frame,
            "Builtin_HandleApiCall"
        );
        let stall = run.compared_in(BTreeSet::from([3]));
        let listed: Vec<&str> = stall
            .report
            .on_cpu
            .over_represented
            .iter()
            .map(|o| o.frame.as_str())
            .collect();
        assert_eq!(listed, ["v8::internal::Heap::CollectGarbage"]);
        assert_eq!(stall.report.on_cpu.slow_seconds, [3]);
        let line = stall.explain(None);
        assert!(
            line.contains("slow seconds (3)") && line.contains("Heap::CollectGarbage"),
            "{line}"
        );
        let gc = stall
            .on_cpu_share(|f| f.contains("CollectGarbage"))
            .unwrap();
        assert!(gc.slow_share > 0.3 && gc.normal_share == 0.0, "{gc:?}");
        // What could not be seen is said again, once.
        let notes = &stall.report.on_cpu.missing;
        assert_eq!(notes.iter().filter(|m| m.contains("test")).count(), 1);
    }

    #[test]
    fn what_was_in_the_slow_seconds_is_seen_on_cpu_and_off() {
        let inside = inside();
        // burn (on CPU, second 3) and lock_wait (off CPU, 7 and 9); handle ran in every
        // second, main is under all. The lock's 1.2 s off CPU before the burn's 60 samples
        // (0.6 s at 100 Hz); its two frames, equal, by name.
        let seen = inside.seen_in_slow(|f| f != "main" && f != "handle");
        assert_eq!(
            seen,
            ["__x64_sys_futex_[k]", "lock_wait", "burn"].map(String::from)
        );
        let later = inside.compared_in(BTreeSet::from([5]));
        assert!(later
            .seen_in_slow(|f| f == "burn" || f == "lock_wait")
            .is_empty());
    }

    #[test]
    fn nothing_listed_and_nothing_named_go_together() {
        let mut inside = inside();
        inside.report.on_cpu.over_represented.clear();
        inside.report.off_cpu_over_represented.clear();
        assert!(inside.explain(None).starts_with("no stack or wait"));
        assert!(inside
            .text()
            .contains("no stack or wait is clearly over-represented"));
        let mut inside = self::inside();
        inside.report.off_cpu_over_represented.clear();
        let line = inside.explain(Some((7.2, 7.9)));
        assert!(line.contains("were in burn"), "{line}");
    }

    #[test]
    fn the_slow_flame_graph_has_both_sides() {
        let inside = inside();
        let path = std::env::temp_dir().join(format!("tailscope-slow-{}.svg", std::process::id()));
        inside.write_flamegraph(&path, true).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("burn") && svg.contains("lock_wait"));
        assert!(svg.contains("on-CPU") && svg.contains("off-CPU"));
    }

    /// Drives a session over `pids` for `seconds` whole seconds (ticks of 100 ms) and
    /// returns what the dashboard would show; `None` where perf sampling is not allowed.
    fn live_over(pids: &[u32], seconds: u32, trace: bool) -> Option<LiveInside> {
        let mut session = match Session::open(super::super::DEFAULT_FREQUENCY_HZ, &[0], trace) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        session.begin(super::super::monotonic_ns());
        let mut shown = None;
        // Past the last second's end and its settling time.
        for _ in 0..seconds * 10 + 5 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            session.tick(pids);
            if let Some(view) = session.live(&BTreeSet::from([0])) {
                shown = Some(view);
            }
        }
        Some(shown.expect("a second was summed up"))
    }

    #[test]
    fn the_live_view_shows_a_busy_loop_on_cpu_and_a_sleeper_off_cpu() {
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let view = live_over(&[busy.id(), sleeper.id()], 2, false);
        let _ = busy.kill();
        let _ = sleeper.kill();
        let _ = busy.wait();
        let _ = sleeper.wait();
        let Some(view) = view else { return };
        let LiveInside::Sampling {
            off_cpu_source,
            last: Some(last),
            last_slow: Some(slow),
        } = view
        else {
            panic!("{view:?}")
        };
        assert_eq!(off_cpu_source.as_deref(), Some("/proc thread states"));
        // Ticks come late on a loaded machine: the last second is 1 or later.
        assert!(last.second >= 1 && slow.second == 0, "{last:?} {slow:?}");
        // The shell spins (on a loaded machine it may get a tenth of a CPU): its frames
        // (dash, libc, the kernel), shares of its samples.
        assert!(last.samples > 0 && !last.on_cpu.is_empty(), "{last:?}");
        let total: f64 = last.on_cpu.iter().map(|s| s.share).sum();
        assert!(total > 0.0 && total <= 1.0 + 1e-9, "{last:?}");
        // The sleeper is half of the threads' time, asleep in clock_nanosleep.
        let off = last.off_cpu.expect("the /proc sampler's second");
        let sleep = off
            .iter()
            .find(|s| s.what == "clock_nanosleep (S)")
            .unwrap_or_else(|| panic!("{off:?}"));
        assert!(sleep.share > 0.4 && sleep.share <= 0.55, "{off:?}");
    }

    #[test]
    fn the_live_view_counts_a_sleep_still_going_when_switches_are_traced() {
        // The tracer sees a thread leave the CPU: the shell becomes `sleep` (same pid) once
        // the tracing has begun, and sleeps from then on.
        let mut sleeper = std::process::Command::new("sh")
            .args(["-c", "sleep 0.3; exec sleep 30"])
            .spawn()
            .unwrap();
        let view = live_over(&[sleeper.id()], 2, true);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let Some(LiveInside::Sampling {
            off_cpu_source,
            last: Some(last),
            ..
        }) = view
        else {
            return;
        };
        if off_cpu_source.as_deref() != Some("sched:sched_switch") {
            eprintln!("skipped: sched_switch not traced here ({off_cpu_source:?})");
            return;
        }
        // It left the CPU once and never came back: all of its time, still going.
        let off = last.off_cpu.expect("sched_switch's second");
        assert!(
            off.iter()
                .any(|s| s.what == "clock_nanosleep (S)" && s.share > 0.9),
            "{off:?}"
        );
    }
}
