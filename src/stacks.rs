//! On-CPU stacks and off-CPU thread states of the server wired into a run (`--stacks`,
//! `--flamegraph`): the samplers of `tailscope_targets::stacks` fed the target's process tree
//! every tick, then a `stacks` section in the JSON report, a "Server inside" section in the
//! text summary and, if asked, a flame graph.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use tailscope_loadgen::report::{fmt_count, Report};
use tailscope_loadgen::{Phase, Snapshot};
use tailscope_targets::stacks::threads::{self, ThreadStateSampler};
use tailscope_targets::stacks::{self, OnCpu, StackSampler, StacksReport};

use crate::exit::UsageError;

/// When to sample the server's stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StacksMode {
    /// When perf sampling is allowed (root, CAP_PERFMON or perf_event_paranoid <= 0).
    Auto,
    /// Always; the run fails if perf sampling is not allowed.
    On,
    /// Never.
    Off,
}

/// What the command line asked of the sampler.
#[derive(Debug, Clone)]
pub struct StacksOptions {
    /// `--stacks`.
    pub mode: StacksMode,
    /// `--flamegraph`.
    pub flamegraph: Option<PathBuf>,
}

/// The sampler of one run, or why there is none.
pub struct RunStacks {
    sampler: Option<StackSampler>,
    /// Off-CPU time from /proc thread states (beside the stacks; needs no perf).
    threads: Option<ThreadStateSampler>,
    root: Option<u32>,
    flamegraph: Option<PathBuf>,
    /// Why nothing is sampled (`None` when off on purpose or sampling).
    not_sampled: Option<String>,
    begun: bool,
}

impl RunStacks {
    /// Opens the sampler for the target `root` (the launched server or `--pid`) and its
    /// descendants; the thread-state looks run on the first of `client_cpus` (the
    /// generator's). Fails only when sampling was asked for explicitly and cannot be had.
    pub fn start(
        options: StacksOptions,
        root: Option<u32>,
        client_cpus: &[usize],
    ) -> Result<RunStacks> {
        let mut stacks = RunStacks {
            sampler: None,
            threads: None,
            root,
            flamegraph: options.flamegraph.clone(),
            not_sampled: None,
            begun: false,
        };
        let explicit = options.mode == StacksMode::On || options.flamegraph.is_some();
        match (options.mode, root) {
            (StacksMode::Off, _) if options.flamegraph.is_some() => {
                return Err(
                    UsageError("--flamegraph needs the stacks: drop --stacks off".into()).into(),
                )
            }
            (StacksMode::Off, _) => return Ok(stacks),
            (_, None) if explicit => {
                return Err(UsageError(
                    "--stacks on and --flamegraph need a server to sample: give --target or --pid"
                        .into(),
                )
                .into())
            }
            (_, None) => return Ok(stacks),
            _ => {}
        }
        match StackSampler::open(stacks::DEFAULT_FREQUENCY_HZ) {
            Ok(s) => stacks.sampler = Some(s),
            Err(e) if explicit => {
                return Err(e)
                    .context("cannot sample the server's stacks (--stacks on, --flamegraph)")
            }
            Err(e) => stacks.not_sampled = Some(e.to_string()),
        }
        if stacks.sampler.is_some() {
            // A thread of its own: ~200 looks a second do not fit in the 100 ms tick.
            stacks.threads = ThreadStateSampler::start(threads::DEFAULT_INTERVAL, client_cpus).ok();
        }
        Ok(stacks)
    }

    /// Feeds the sampler the target's processes and reads its buffers; called every tick.
    /// `tree` is the target's live processes as the profiler's tree follower saw them this
    /// tick (the root and every descendant, re-parented ones included).
    pub fn on_snapshot(&mut self, snap: &Snapshot, tree: &[u32]) {
        let (Some(sampler), Some(root)) = (self.sampler.as_mut(), self.root) else {
            return;
        };
        if !self.begun && snap.phase != Phase::WarmingUp {
            // Second 0 of the generator's time series began `elapsed` ago.
            let elapsed = u64::try_from(snap.elapsed.as_nanos()).unwrap_or(u64::MAX);
            let origin = stacks::monotonic_ns().saturating_sub(elapsed);
            sampler.begin(origin);
            if let Some(t) = &self.threads {
                t.begin(origin);
            }
            self.begun = true;
        }
        // Before the profiler's first tick the tree is not known yet: the root alone.
        let root_only = [root];
        let pids = if tree.is_empty() {
            &root_only[..]
        } else {
            tree
        };
        sampler.set_pids(pids);
        if let Some(t) = &self.threads {
            t.set_pids(pids);
        }
        sampler.drain();
    }

    /// Names the frames (call it before the target is stopped: its binaries are read through
    /// /proc), adds `stacks` to the report, writes the flame graph, and returns the text
    /// section.
    pub fn finish(self, report: &mut Report) -> String {
        let Some(sampler) = self.sampler else {
            if let Some(why) = self.not_sampled {
                report.extra.insert(
                    "stacks".into(),
                    serde_json::json!({
                        "sampler": "cpu-clock",
                        "frequency_hz": null,
                        "samples": null,
                        "missing": [why],
                    }),
                );
                return format!("\nServer inside: not sampled ({why})\n");
            }
            return String::new();
        };
        let on_cpu = sampler.finish();
        // A point's t_s is the end of its second; the last, partial one may repeat it.
        let mut seconds: Vec<(u32, u64, u64)> = Vec::new();
        for p in &report.timeseries {
            let second = (p.t_s.ceil() as u32).saturating_sub(1);
            match seconds.last_mut() {
                Some(last) if last.0 == second => {
                    last.1 += p.outliers;
                    last.2 = last.2.max(p.max_us);
                }
                _ => seconds.push((second, p.outliers, p.max_us)),
            }
        }
        let slow = stacks::slow_seconds(&seconds);
        let stacks_report = on_cpu.differential(&slow);
        let off_cpu = self.threads.map(|t| t.finish().differential(&slow));
        let mut flamegraph_failed = None;
        if let Some(path) = &self.flamegraph {
            // The report is worth more than the picture: a failed write is said, not fatal.
            if let Err(e) = write_flamegraph(&on_cpu, path) {
                flamegraph_failed = Some(format!("  flame graph: {e:#}\n"));
            }
        }
        let mut json = serde_json::to_value(&stacks_report).unwrap_or_default();
        if let (Some(obj), Some((times, over))) = (json.as_object_mut(), &off_cpu) {
            obj.insert(
                "off_cpu_sampler".into(),
                format!(
                    "/proc thread states every {} ms",
                    threads::DEFAULT_INTERVAL.as_millis()
                )
                .into(),
            );
            obj.insert(
                "off_cpu".into(),
                serde_json::to_value(times).unwrap_or_default(),
            );
            obj.insert(
                "off_cpu_over_represented".into(),
                serde_json::to_value(over).unwrap_or_default(),
            );
        }
        report.extra.insert("stacks".into(), json);
        text(&stacks_report)
            + &off_cpu.map_or(String::new(), |(_, over)| blocked_text(&over))
            + &flamegraph_failed.unwrap_or_default()
    }
}

fn write_flamegraph(on_cpu: &OnCpu, path: &PathBuf) -> Result<()> {
    let lines = on_cpu.folded(|_| true);
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write the flame graph to {}", path.display()))?;
    let mut options = inferno::flamegraph::Options::default();
    options.title = "tailscope: the server's on-CPU stacks over the run".into();
    options.count_name = "samples".into();
    if lines.is_empty() {
        // inferno refuses an empty input; say so in the picture rather than fail the run.
        options.title += " (no samples)";
        let empty = ["no-samples 1"];
        return inferno::flamegraph::from_lines(&mut options, empty, std::io::BufWriter::new(file))
            .with_context(|| format!("cannot write the flame graph to {}", path.display()));
    }
    inferno::flamegraph::from_lines(
        &mut options,
        lines.iter().map(String::as_str),
        std::io::BufWriter::new(file),
    )
    .with_context(|| format!("cannot write the flame graph to {}", path.display()))
}

fn blocked_text(over: &[threads::BlockedOverRepresented]) -> String {
    let mut out = String::new();
    for o in over.iter().take(3) {
        let b = &o.blocked;
        let _ = writeln!(
            out,
            "  blocked in the slow seconds: thread {} {} in {} ({}) — {:.1} % of its time vs {:.1} % in the others",
            b.thread,
            b.state,
            b.syscall,
            b.wchan,
            o.slow_share * 100.0,
            o.normal_share * 100.0
        );
    }
    out
}

/// A stack on one line: its innermost frames, leaf first.
fn short(stack: &[String]) -> String {
    let mut s = stack
        .iter()
        .take(4)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ← ");
    if stack.len() > 4 {
        s += " ← …";
    }
    s
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "n/a".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

fn text(r: &StacksReport) -> String {
    let mut out = String::new();
    let normal_total = r.samples - r.slow_samples;
    let _ = writeln!(
        out,
        "\nServer inside (on-CPU stacks, {} at {} Hz per CPU: {} samples, {} in {} slow second(s)):",
        r.sampler,
        r.frequency_hz,
        fmt_count(r.samples),
        fmt_count(r.slow_samples),
        r.slow_seconds.len()
    );
    for o in r.over_represented.iter().take(3) {
        let _ = writeln!(
            out,
            "  over-represented in the slow seconds: {}{} — {:.1} % of their samples vs {:.1} % of the others",
            o.frame,
            o.location.as_ref().map_or(String::new(), |l| format!(" ({l})")),
            o.slow_share * 100.0,
            o.normal_share * 100.0
        );
    }
    if r.over_represented.is_empty() && !r.slow_seconds.is_empty() {
        let _ = writeln!(
            out,
            "  no frame is clearly over-represented in the slow seconds"
        );
    }
    let mut slow: Vec<_> = r.on_cpu.iter().filter(|s| s.slow_samples > 0).collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.slow_samples));
    if !slow.is_empty() {
        let _ = writeln!(out, "  top stacks in the slow seconds:");
        for s in slow.iter().take(3) {
            let _ = writeln!(
                out,
                "    {:>7}  {}",
                pct(s.slow_samples, r.slow_samples),
                short(&s.stack)
            );
        }
    }
    let mut normal: Vec<_> = r
        .on_cpu
        .iter()
        .filter(|s| s.samples > s.slow_samples)
        .collect();
    normal.sort_by_key(|s| std::cmp::Reverse(s.samples - s.slow_samples));
    if !normal.is_empty() {
        let _ = writeln!(
            out,
            "  top stacks in the {}:",
            if r.slow_seconds.is_empty() {
                "run"
            } else {
                "other seconds"
            }
        );
        for s in normal.iter().take(3) {
            let _ = writeln!(
                out,
                "    {:>7}  {}",
                pct(s.samples - s.slow_samples, normal_total),
                short(&s.stack)
            );
        }
    }
    for m in &r.missing {
        let _ = writeln!(out, "  missing: {m}");
    }
    out
}
