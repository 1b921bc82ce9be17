//! The server's stacks following one run (beside [`crate::profiler::RunProfiler`]): the
//! samplers of `tailscope_targets::stacks` fed the target's process tree every tick; at the
//! end the `stacks` section of the report, the [`Inside`] the diagnosis is joined to
//! ([`tailscope_forensics::Findings::look_inside`]), the text and the flame graphs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use tailscope_loadgen::{Phase, Snapshot, TimePoint};
use tailscope_report::sections::StacksSection;
use tailscope_targets::stacks::{self, Inside, LiveInside, SamplerError, Session};

/// When to sample the server's stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StacksMode {
    /// When perf sampling is allowed (root, CAP_PERFMON or perf_event_paranoid <= 0); off-CPU
    /// time from /proc thread states.
    Auto,
    /// Always, off-CPU stacks from sched_switch included; the run fails if perf sampling is
    /// not allowed.
    On,
    /// Never.
    Off,
}

impl std::str::FromStr for StacksMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(StacksMode::Auto),
            "on" => Ok(StacksMode::On),
            "off" => Ok(StacksMode::Off),
            _ => Err(format!("{s:?} is not one of auto, on, off")),
        }
    }
}

/// What a run asks of the sampler.
#[derive(Debug, Clone)]
pub struct StacksOptions {
    /// When to sample.
    pub mode: StacksMode,
    /// Where to write a flame graph of the whole run.
    pub flamegraph: Option<PathBuf>,
    /// Where to write a flame graph of the slow seconds.
    pub flamegraph_slow: Option<PathBuf>,
}

/// Why [`RunStacks::start`] refused.
#[derive(Debug, thiserror::Error)]
pub enum StacksError {
    /// The options contradict each other or the run (the command line's fault).
    #[error("{0}")]
    Usage(&'static str),
    /// Sampling was asked for explicitly and cannot be had here.
    #[error("cannot sample the server's stacks (--stacks on, --flamegraph, --flamegraph-slow)")]
    Unavailable(#[source] SamplerError),
}

/// The samplers of one run, or why there are none.
pub struct RunStacks {
    session: Option<Session>,
    root: Option<u32>,
    options: StacksOptions,
    /// Why nothing is sampled (`None` when off on purpose or sampling).
    not_sampled: Option<String>,
    begun: bool,
    /// The run's complete seconds so far, `second → (outliers, max_us)`, for the live slow
    /// seconds.
    seconds: BTreeMap<u32, (u64, u64)>,
    /// The dashboard was told that nothing is sampled.
    told_unavailable: bool,
    /// A `tailscope agent` samples the server's stacks on its host and sends them at the end.
    remote: bool,
}

impl RunStacks {
    /// Opens the samplers for the target `root` (the launched server or `--pid`) and its
    /// descendants; the /proc fallback, if needed, looks from the first of `client_cpus`.
    /// Fails only when sampling was asked for explicitly and cannot be had.
    pub fn start(
        options: StacksOptions,
        root: Option<u32>,
        client_cpus: &[usize],
    ) -> Result<RunStacks, StacksError> {
        let mut run = RunStacks {
            session: None,
            root,
            options: options.clone(),
            not_sampled: None,
            begun: false,
            seconds: BTreeMap::new(),
            told_unavailable: false,
            remote: false,
        };
        let pictures = options.flamegraph.is_some() || options.flamegraph_slow.is_some();
        let explicit = options.mode == StacksMode::On || pictures;
        match (options.mode, root) {
            (StacksMode::Off, _) if pictures => {
                return Err(StacksError::Usage(
                    "--flamegraph and --flamegraph-slow need the stacks: drop --stacks off",
                ))
            }
            (StacksMode::Off, _) => return Ok(run),
            (_, None) if explicit => {
                return Err(StacksError::Usage(
                    "--stacks on, --flamegraph and --flamegraph-slow need a server to sample: give --target or --pid",
                ))
            }
            (_, None) => return Ok(run),
            _ => {}
        }
        // The sched_switch tracer costs per context switch of the server: only when asked.
        let trace_switches = options.mode == StacksMode::On;
        match Session::open(stacks::DEFAULT_FREQUENCY_HZ, client_cpus, trace_switches) {
            Ok(s) => run.session = Some(s),
            Err(e) if explicit => return Err(StacksError::Unavailable(e)),
            Err(e) => run.not_sampled = Some(e.to_string()),
        }
        Ok(run)
    }

    /// The stacks of a server that a `tailscope agent` samples on its host (`run --agent`):
    /// nothing is sampled here; `not_sampled` is why the agent samples nothing, when it said.
    pub fn through_agent(
        options: StacksOptions,
        not_sampled: Option<String>,
    ) -> Result<RunStacks, StacksError> {
        let pictures = options.flamegraph.is_some() || options.flamegraph_slow.is_some();
        if options.mode == StacksMode::Off && pictures {
            return Err(StacksError::Usage(
                "--flamegraph and --flamegraph-slow need the stacks: drop --stacks off",
            ));
        }
        let remote = options.mode != StacksMode::Off;
        Ok(RunStacks {
            session: None,
            root: None,
            options,
            not_sampled,
            begun: false,
            seconds: BTreeMap::new(),
            told_unavailable: false,
            remote,
        })
    }

    /// Feeds the samplers the target's processes and reads their buffers; called every tick.
    /// `tree` is the target's live processes as the profiler's tree follower saw them this
    /// tick (the root and every descendant, re-parented ones included).
    pub fn on_snapshot(&mut self, snap: &Snapshot, tree: &[u32]) {
        let (Some(session), Some(root)) = (self.session.as_mut(), self.root) else {
            return;
        };
        if !self.begun && snap.phase != Phase::WarmingUp {
            // Second 0 of the generator's time series began `elapsed` ago.
            let elapsed = u64::try_from(snap.elapsed.as_nanos()).unwrap_or(u64::MAX);
            session.begin(stacks::monotonic_ns().saturating_sub(elapsed));
            self.begun = true;
        }
        // Before the profiler's first tick the tree is not known yet: the root alone.
        let root_only = [root];
        session.tick(if tree.is_empty() { &root_only } else { tree });
    }

    /// For the dashboard, after [`Self::on_snapshot`]: what the server did in the last second
    /// and in the last slow second, when a second is newly over; or, once, why nothing is
    /// sampled.
    pub fn live(&mut self, snap: &Snapshot) -> Option<LiveInside> {
        let Some(session) = self.session.as_mut() else {
            if self.told_unavailable {
                return None;
            }
            self.told_unavailable = true;
            let why = match (&self.not_sampled, self.options.mode, self.root) {
                (Some(why), _, _) => why.clone(),
                (None, _, _) if self.remote => {
                    "sampled by the agent on the server's host: the stacks come with the report at the end of the run".into()
                }
                (None, StacksMode::Off, _) => "--stacks off".into(),
                (None, _, None) => "no server to sample: give --target or --pid".into(),
                (None, _, Some(_)) => "not sampled".into(),
            };
            return Some(LiveInside::Unavailable(why));
        };
        for p in snap.recent_seconds.iter().filter(|p| !p.partial) {
            let second = (p.t_s.ceil() as u32).saturating_sub(1);
            self.seconds.insert(second, (p.outliers, p.max_us));
        }
        if !session.live_due() {
            return None;
        }
        // Once a second: the slow seconds so far, found as at the end of the run.
        let seconds: Vec<(u32, u64, u64)> =
            self.seconds.iter().map(|(&s, &(o, m))| (s, o, m)).collect();
        session.live(&stacks::slow_seconds(&seconds))
    }

    /// Names the frames (call it before the target is stopped: its binaries are read through
    /// /proc) over the report's `timeseries`, writes the flame graphs, and returns what the
    /// threads did over the run (for [`tailscope_forensics::Findings::look_inside`]; `None` when not
    /// sampled), the text section and the report's `stacks` section. `from_agent`: the stacks
    /// an agent sampled and named on the server's host ([`RunStacks::through_agent`]).
    ///
    /// The stacks are compared in the time series' slow seconds. Comparing them in the seconds
    /// a named `server_stall` held its requests in (`Verdict::stalled_seconds`,
    /// `Inside::compared_in`) was tried and taken back: with the seconds before the hold and
    /// those a wait for a CPU explained, a 600 ms sleep through an agent was no longer told
    /// from the other seconds (issue 36, still open).
    pub fn finish(
        self,
        timeseries: &[TimePoint],
        from_agent: Option<Inside>,
    ) -> (Option<Inside>, String, Option<StacksSection>) {
        let inside = match (self.session, from_agent) {
            (Some(session), _) => session.finish(&seconds_of(timeseries)),
            (None, Some(inside)) if self.remote => inside,
            (None, _) => {
                let why = self.not_sampled.or_else(|| {
                    self.remote.then(|| {
                        "the agent sent none: it was lost before the end of the run".to_string()
                    })
                });
                if let Some(why) = why {
                    let text = format!("\nServer inside: not sampled ({why})\n");
                    return (None, text, Some(StacksSection::not_sampled(why)));
                }
                return (None, String::new(), None);
            }
        };
        let mut out = String::new();
        for (path, slow_only) in [
            (&self.options.flamegraph, false),
            (&self.options.flamegraph_slow, true),
        ] {
            if let Some(path) = path {
                // The report is worth more than the picture: a failed write is said, not fatal.
                if let Err(e) = inside.write_flamegraph(path, slow_only) {
                    let _ = writeln!(out, "  flame graph: cannot write {}: {e}", path.display());
                }
            }
        }
        let section = StacksSection::Sampled(Box::new(inside.report.clone()));
        out += &inside.text();
        (Some(inside), out, Some(section))
    }
}

/// The run's seconds from its time series, `(second, outliers, max_us)` each, from which the
/// slow seconds are found (a point's t_s is the end of its second; the last, partial one may
/// repeat it).
pub fn seconds_of(timeseries: &[TimePoint]) -> Vec<(u32, u64, u64)> {
    let mut seconds: Vec<(u32, u64, u64)> = Vec::new();
    for p in timeseries {
        let second = (p.t_s.ceil() as u32).saturating_sub(1);
        match seconds.last_mut() {
            Some(last) if last.0 == second => {
                last.1 += p.outliers;
                last.2 = last.2.max(p.max_us);
            }
            _ => seconds.push((second, p.outliers, p.max_us)),
        }
    }
    seconds
}
