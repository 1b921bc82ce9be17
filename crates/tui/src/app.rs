//! The dashboard's state and the one place it changes: [`App::update`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tailscope_forensics::Diagnosis;
use tailscope_loadgen::{ErrorKind, Pace, Phase, Plan, Snapshot, Stop};
use tailscope_targets::listen::ListenSample;
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::TickCounters;
use tailscope_targets::stacks::LiveInside;
use tailscope_targets::Target;

/// Ticks of history kept for the charts (at 10 a second: one minute).
pub const HISTORY: usize = 600;
/// Ticks the CPUs panel averages: a second at the 100 ms tick.
pub const CPU_WINDOW: usize = 10;
/// How much `+` and `-` change the open-loop rate.
pub const RATE_STEP: f64 = 1.25;

/// What the run is, for the header. Fixed for the run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunInfo {
    /// Method and URL.
    pub target: String,
    /// The launched server, e.g. `embedded (pid 1234)`, or the agent it is read through
    /// ([`RunInfo::through_agent`]).
    pub server: Option<String>,
    /// Open-loop rate asked for at the start; none for closed loop.
    pub rate: Option<f64>,
    /// Pipelining depth.
    pub pipeline: usize,
    /// Connections.
    pub connections: usize,
    /// Generator threads.
    pub threads: usize,
    /// `-z`, when timed.
    pub duration: Option<Duration>,
    /// `-n`, when counted.
    pub requests: Option<u64>,
    /// The server's CPUs.
    pub server_cpus: Vec<usize>,
    /// The generator's CPUs.
    pub client_cpus: Vec<usize>,
    /// `--stages`: the planned rate (or connections) over the run; empty without.
    pub stages: Vec<tailscope_loadgen::plan::LoadStage>,
}

impl RunInfo {
    /// The server is read through the agent on `host` (`run --agent`): the header's server
    /// field names it there, with the server the agent launched for the run (its name and
    /// pid on the agent's host), when it did.
    pub fn through_agent(mut self, host: &str, launched: Option<(&str, u32)>) -> RunInfo {
        self.server = Some(match launched {
            Some((name, pid)) => format!("{name} (pid {pid}) via agent {host}"),
            None => format!("agent {host}"),
        });
        self
    }

    /// What the header shows of `plan`, and of `target` when tailscope launched it.
    pub fn new(plan: &Plan, target: Option<&Target>) -> RunInfo {
        // A mix is named as one (its method and path are the requests', view 5), not as the
        // run's default GET.
        let what = plan.what_is_sent();
        RunInfo {
            // HTTP/2 is named beside the URL (an https URL says TLS already).
            target: match plan.http2 {
                true => format!(
                    "{what} {} ({}, {} stream{} per connection)",
                    plan.url_shown(),
                    plan.protocol(),
                    plan.streams,
                    if plan.streams == 1 { "" } else { "s" }
                ),
                false => format!("{what} {}", plan.url_shown()),
            },
            server: target.map(|t| format!("{} (pid {})", t.name(), t.pid())),
            rate: match plan.pace {
                Pace::Rate(r) => Some(r),
                Pace::Max => None,
            },
            pipeline: plan.pipeline,
            connections: plan.connections,
            threads: plan.effective_threads(),
            duration: match plan.stop {
                Stop::Duration(d) => Some(d),
                Stop::Requests(_) => None,
            },
            requests: match plan.stop {
                Stop::Requests(n) => Some(n),
                Stop::Duration(_) => None,
            },
            server_cpus: target.map(|t| t.server_cpus().to_vec()).unwrap_or_default(),
            client_cpus: plan.cpus.clone(),
            stages: plan.stages.clone(),
        }
    }

    /// The planned open-loop rate `t_s` into the run: the stages', else the starting rate;
    /// none in closed loop.
    pub fn planned_rate_at(&self, t_s: f64) -> Option<f64> {
        let rate = self.rate?;
        Some(if self.stages.is_empty() {
            rate
        } else {
            tailscope_loadgen::plan::planned_at(&self.stages, 0.0, t_s)
        })
    }

    /// `--stages`: which stage runs `t_s` into the run (0-based), if one does.
    pub fn stage_at(&self, t_s: f64) -> Option<usize> {
        let mut end = 0.0;
        for (i, s) in self.stages.iter().enumerate() {
            end += s.duration.as_secs_f64();
            if t_s < end {
                return Some(i);
            }
        }
        None
    }
}

/// The five views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Everything at a glance.
    Overview,
    /// Latency over time and its distribution, large.
    Latency,
    /// Per-core usage and the slowest requests.
    Cores,
    /// What the server's threads did: top stacks and waits, live.
    Inside,
    /// A mix's figures per request name.
    Requests,
}

impl View {
    /// In Tab order.
    pub const ALL: [View; 5] = [
        View::Overview,
        View::Latency,
        View::Cores,
        View::Inside,
        View::Requests,
    ];

    /// Its tab title.
    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "1 Overview",
            View::Latency => "2 Latency",
            View::Cores => "3 Cores & spikes",
            View::Inside => "4 Server inside",
            View::Requests => "5 Requests",
        }
    }

    /// Its tab title where the footer runs short of room.
    pub fn short_title(self) -> &'static str {
        match self {
            View::Cores => "3 Cores",
            View::Inside => "4 Inside",
            View::Latency => "2 Lat",
            View::Requests => "5 Req",
            other => other.title(),
        }
    }
}

/// Something that changes the dashboard.
#[derive(Debug, Clone)]
pub enum Action {
    /// A new snapshot from the generator and, when readable, per-CPU usage.
    Snapshot(Arc<Snapshot>, Option<Vec<CpuUsage>>),
    /// The profiler's per-CPU counters of the same tick.
    Counters(TickCounters),
    /// The accept queues of the target's listeners at the same tick (`None`: not found).
    ListenQueue(Option<ListenSample>),
    /// The spike causes the run so far supports.
    Diagnosis(Vec<Diagnosis>),
    /// What the server did in the last second and the last slow one (or why it is not seen).
    Inside(Box<LiveInside>),
    /// Stop the load gracefully.
    Quit,
    /// Next view.
    NextView,
    /// A view by number.
    Show(View),
    /// Freeze or unfreeze the display (the load goes on).
    ToggleFreeze,
    /// Raise the open-loop rate.
    RateUp,
    /// Lower the open-loop rate.
    RateDown,
    /// Show or hide the keys.
    ToggleHelp,
    /// Esc: close the help when it is shown, otherwise stop as [`Action::Quit`].
    Back,
    /// Save the HTML report of the run so far.
    SaveReport,
    /// A line for the footer from the run (where the report was saved, or why it was not).
    Note(String),
}

/// What the dashboard asks of the run in response to an action.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Effect {
    /// Stop the load gracefully.
    Stop,
    /// Set the total open-loop rate.
    SetRate(f64),
    /// Save the HTML report of the run so far.
    SaveReport,
}

/// One tick of history.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TickPoint {
    /// Seconds since measurement started.
    pub t_s: f64,
    /// Complete responses per second in the tick.
    pub ok_rps: f64,
    /// Failed requests per second in the tick.
    pub err_rps: f64,
    /// The tick's p50, p99 and max (µs); zero when the tick had no response.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Slowest.
    pub max_us: u64,
}

/// The dashboard's state.
#[derive(Debug, Clone)]
pub struct App {
    /// What runs.
    pub info: RunInfo,
    /// The latest snapshot shown (held while frozen).
    pub snapshot: Option<Arc<Snapshot>>,
    /// The 95 % intervals of the latest snapshot's percentiles, computed once per snapshot
    /// rather than per frame (see [`crate::ui::live_intervals`]).
    pub latency_ci: Vec<crate::ui::LiveInterval>,
    /// Per-tick history shown in the charts.
    pub history: VecDeque<TickPoint>,
    /// Per-CPU usage over the last second (the mean of [`CPU_WINDOW`] ticks); none when
    /// unreadable.
    pub cpus: Option<Vec<CpuUsage>>,
    /// The last ticks' per-CPU usage that `cpus` averages.
    cpu_window: VecDeque<Vec<CpuUsage>>,
    /// Per-CPU perf counters of the last tick.
    pub counters: Option<TickCounters>,
    /// The target's listeners' accept queues at the last tick.
    pub listen: Option<ListenSample>,
    /// Spike causes named so far.
    pub diagnosis: Vec<Diagnosis>,
    /// The server's stacks and waits, live; `None` before the first second is over.
    pub inside: Option<LiveInside>,
    /// In colour, or without (`NO_COLOR`).
    pub theme: crate::ui::theme::Theme,
    /// The current view.
    pub view: View,
    /// The display is frozen.
    pub frozen: bool,
    /// The key help is shown.
    pub help: bool,
    /// Stop was asked for.
    pub quitting: bool,
    /// The open-loop rate now asked for.
    pub rate: Option<f64>,
    /// The live `+`/`-` presses: (seconds into the run, the rate set), in order. From the
    /// first, the stages no longer apply (the generator holds the rate set).
    pub rate_set: Vec<(f64, f64)>,
    /// When each error kind last went up (seconds since measurement started).
    pub error_seen: Vec<(ErrorKind, f64)>,
    /// A one-line note for the footer (e.g. why a key did nothing).
    pub note: Option<String>,
}

impl App {
    /// A dashboard for `info`, before the first snapshot.
    pub fn new(info: RunInfo) -> Self {
        App {
            rate: info.rate,
            rate_set: Vec::new(),
            info,
            snapshot: None,
            latency_ci: Vec::new(),
            history: VecDeque::with_capacity(HISTORY),
            cpus: None,
            cpu_window: VecDeque::with_capacity(CPU_WINDOW),
            counters: None,
            listen: None,
            diagnosis: Vec::new(),
            inside: None,
            theme: crate::ui::theme::Theme::default(),
            view: View::Overview,
            frozen: false,
            help: false,
            quitting: false,
            error_seen: Vec::new(),
            note: None,
        }
    }

    /// Applies an action; returns what the run should do, if anything.
    pub fn update(&mut self, action: Action) -> Option<Effect> {
        match action {
            Action::Snapshot(snap, cpus) => {
                if !self.frozen {
                    self.absorb(snap, cpus);
                }
                None
            }
            Action::Counters(c) => {
                if !self.frozen {
                    self.counters = Some(c);
                }
                None
            }
            Action::ListenQueue(l) => {
                if !self.frozen {
                    self.listen = l;
                }
                None
            }
            Action::Diagnosis(d) => {
                if !self.frozen {
                    self.diagnosis = d;
                }
                None
            }
            Action::Inside(inside) => {
                if !self.frozen {
                    self.inside = Some(*inside);
                }
                None
            }
            Action::Quit => {
                self.quitting = true;
                Some(Effect::Stop)
            }
            Action::NextView => {
                let i = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0);
                self.view = View::ALL[(i + 1) % View::ALL.len()];
                None
            }
            Action::Show(v) => {
                self.view = v;
                None
            }
            Action::ToggleFreeze => {
                self.frozen = !self.frozen;
                None
            }
            Action::ToggleHelp => {
                self.help = !self.help;
                None
            }
            Action::Back if self.help => {
                self.help = false;
                None
            }
            Action::Back => self.update(Action::Quit),
            Action::SaveReport => {
                if self.snapshot.is_none() {
                    self.note = Some("Nothing to save yet.".into());
                    return None;
                }
                self.note = Some("saving the HTML report…".into());
                Some(Effect::SaveReport)
            }
            Action::Note(note) => {
                self.note = Some(note);
                None
            }
            Action::RateUp | Action::RateDown => {
                // With stages, a press starts from the rate planned now, not the highest.
                let now = self
                    .snapshot
                    .as_deref()
                    .map_or(0.0, |s| s.elapsed.as_secs_f64());
                let planned = match self.rate_set.last() {
                    Some(&(_, r)) => Some(r),
                    None => self.info.planned_rate_at(now),
                };
                let Some(rate) = planned.or(self.rate) else {
                    // Two sentences, so a narrow footer can keep the first whole.
                    self.note = Some("+/- need open loop. Start the run with -q RATE.".into());
                    return None;
                };
                let new = if matches!(action, Action::RateUp) {
                    rate * RATE_STEP
                } else {
                    (rate / RATE_STEP).max(1.0)
                };
                self.rate = Some(new);
                self.rate_set.push((now, new));
                self.note = Some(format!("rate set to {new:.0} req/s"));
                Some(Effect::SetRate(new))
            }
        }
    }

    fn absorb(&mut self, snap: Arc<Snapshot>, cpus: Option<Vec<CpuUsage>>) {
        let elapsed = snap.elapsed.as_secs_f64();
        if let Some(prev) = &self.snapshot {
            for kind in ErrorKind::ALL {
                if snap.totals.errors[kind.index()] > prev.totals.errors[kind.index()] {
                    match self.error_seen.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, t)) => *t = elapsed,
                        None => self.error_seen.push((kind, elapsed)),
                    }
                }
            }
        }
        if snap.phase != Phase::WarmingUp && !snap.tick.is_zero() {
            let tick = snap.tick.as_secs_f64();
            let p = &snap.last_tick_latency;
            self.history.push_back(TickPoint {
                t_s: elapsed,
                ok_rps: snap.last_tick.successes as f64 / tick,
                err_rps: snap.last_tick.error_total() as f64 / tick,
                p50_us: p.p50,
                p99_us: p.p99,
                max_us: p.max,
            });
            while self.history.len() > HISTORY {
                self.history.pop_front();
            }
        }
        if let Some(cpus) = cpus {
            // One 100 ms tick holds ten 10 ms jiffies at most: shown alone, a busy core reads
            // 0 %, 10 %, 20 %. Averaged over a second it reads what it did.
            if self.cpu_window.len() == CPU_WINDOW {
                self.cpu_window.pop_front();
            }
            self.cpu_window.push_back(cpus);
            self.cpus = Some(CpuUsage::mean(self.cpu_window.make_contiguous()));
        }
        self.latency_ci = crate::ui::live_intervals(&snap);
        self.snapshot = Some(snap);
    }
}

/// The action a key asks for, if any.
pub fn key_action(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('c') if ctrl => Some(Action::Quit),
        KeyCode::Char('q') => Some(Action::Quit),
        KeyCode::Esc => Some(Action::Back),
        KeyCode::Tab => Some(Action::NextView),
        KeyCode::Char('1') => Some(Action::Show(View::Overview)),
        KeyCode::Char('2') => Some(Action::Show(View::Latency)),
        KeyCode::Char('3') => Some(Action::Show(View::Cores)),
        KeyCode::Char('4') => Some(Action::Show(View::Inside)),
        KeyCode::Char('5') => Some(Action::Show(View::Requests)),
        KeyCode::Char('p') => Some(Action::ToggleFreeze),
        KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::RateUp),
        KeyCode::Char('-') => Some(Action::RateDown),
        KeyCode::Char('?') | KeyCode::Char('h') => Some(Action::ToggleHelp),
        KeyCode::Char('s') => Some(Action::SaveReport),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use tailscope_loadgen::mix::RequestSpec;
    use tailscope_loadgen::Plan;

    use super::RunInfo;

    #[test]
    fn the_header_names_a_mix_as_one() {
        let mut plan = Plan::new("http://127.0.0.1:8080/").unwrap();
        assert_eq!(
            RunInfo::new(&plan, None).target,
            "GET http://127.0.0.1:8080/"
        );
        let spec = |name: &str| RequestSpec {
            name: name.into(),
            method: "POST".into(),
            target: format!("/{name}"),
            headers: Vec::new(),
            body: Vec::new(),
            weight: 1,
        };
        plan.requests = vec![spec("a"), spec("b")];
        assert_eq!(
            RunInfo::new(&plan, None).target,
            "a mix of 2 requests on http://127.0.0.1:8080"
        );
    }
}
