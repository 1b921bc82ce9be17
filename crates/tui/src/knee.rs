//! The dashboard of `tailscope find-max` while it searches (issue 34): the curve so far, the
//! step running, each step's verdict, the best passing and the lowest failing rate.
//!
//! Built as the run's dashboard is: [`KneeApp`] holds the state and changes only in
//! [`KneeApp::update`]; [`view::render`] draws it and mutates nothing; [`spawn`] runs it on
//! its own thread with one `select!` loop, and [`crate::terminal::TerminalGuard`] gives the
//! terminal back on every exit path (SIGKILL included, through its watcher). The search
//! feeds it [`KneeAction`]s; q or Ctrl-C stop the search through its [`RunControl`], which
//! then ends with what it found.

pub mod view;

use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tailscope_loadgen::RunControl;
use tailscope_report::knee::{Call, KneeStep, HOLD};
use tokio::sync::mpsc::UnboundedSender;

use crate::ui::theme::Theme;

/// What the search is, for the header. Fixed for the search.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchInfo {
    /// Method and URL.
    pub target: String,
    /// The SLOs as given (`p99<50ms`).
    pub slos: Vec<String>,
    /// The latency SLOs' limits (µs), drawn across the curve, by SLO.
    pub latency_limits: Vec<(String, f64)>,
    /// Connections.
    pub connections: usize,
    /// Each step's length (a repeated step runs twice as long).
    pub step: Duration,
    /// The lowest and highest rates the search may try.
    pub rates: (f64, f64),
    /// The launched server, e.g. `nginx (pid 1234)`.
    pub server: Option<String>,
}

/// The step running now.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// Its place in the order the steps ran (0-based).
    pub index: usize,
    /// The rate offered.
    pub rate: f64,
    /// "climb", "bisect", "repeat", "confirm" or "hold" (the confirmation).
    pub phase: String,
    /// How long it measures.
    pub length: Duration,
    /// Measured so far (zero during its warm-up).
    pub elapsed: Duration,
    /// Warm-up left before it measures.
    pub warmup_left: Duration,
    /// Responses per second in the last tick; none before the first.
    pub answered_rps: Option<f64>,
    /// p99 of the step's responses so far (µs); none before any.
    pub p99_us: Option<u64>,
}

/// A rate the confirmation held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    /// The rate.
    pub rate: f64,
    /// How long it held.
    pub length: Duration,
}

/// What changes the knee dashboard.
#[derive(Debug, Clone, PartialEq)]
pub enum KneeAction {
    /// A step starts.
    StepStarted {
        /// Its place in the order the steps ran (0-based).
        index: usize,
        /// The rate offered.
        rate: f64,
        /// "climb", "bisect", "repeat", "confirm" or "hold" (the confirmation).
        phase: String,
        /// How long it measures.
        length: Duration,
    },
    /// A tick of the running step.
    Progress {
        /// Measured so far.
        elapsed: Duration,
        /// Warm-up left.
        warmup_left: Duration,
        /// Responses per second in the last tick.
        answered_rps: Option<f64>,
        /// p99 so far (µs).
        p99_us: Option<u64>,
    },
    /// A step ended, judged.
    StepDone(Box<KneeStep>),
    /// Where the search stands once a rate's verdict is believed (confirmed).
    Bounds {
        /// The highest rate shown to meet every SLO.
        pass: Option<f64>,
        /// The lowest rate believed to miss one.
        fail: Option<f64>,
    },
    /// A line to show (what the search says between steps).
    Note(String),
    /// q or Ctrl-C: end the search with what it found.
    Quit,
}

/// What an action asks of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KneeEffect {
    /// Stop the search (the running step is cut short and not counted).
    Stop,
}

/// The knee dashboard's state.
#[derive(Debug, Clone, Default)]
pub struct KneeApp {
    /// The search, for the header.
    pub info: SearchInfo,
    /// Every step judged so far, in the order they ran.
    pub steps: Vec<KneeStep>,
    /// The step running, if one is.
    pub running: Option<Running>,
    /// The highest rate shown to meet every SLO so far.
    pub best_pass: Option<f64>,
    /// The lowest rate believed to miss one so far.
    pub lowest_fail: Option<f64>,
    /// The confirmation's run that held, once one has.
    pub held: Option<Held>,
    /// The last thing the search said.
    pub note: Option<String>,
    /// q was pressed: the search is ending.
    pub stopping: bool,
    /// Colour or not.
    pub theme: Theme,
}

impl KneeApp {
    /// A search about to start.
    pub fn new(info: SearchInfo) -> KneeApp {
        KneeApp {
            info,
            ..KneeApp::default()
        }
    }

    /// The one place the state changes.
    pub fn update(&mut self, action: KneeAction) -> Option<KneeEffect> {
        match action {
            KneeAction::StepStarted {
                index,
                rate,
                phase,
                length,
            } => {
                self.running = Some(Running {
                    index,
                    rate,
                    phase,
                    length,
                    elapsed: Duration::ZERO,
                    warmup_left: Duration::ZERO,
                    answered_rps: None,
                    p99_us: None,
                });
            }
            KneeAction::Progress {
                elapsed,
                warmup_left,
                answered_rps,
                p99_us,
            } => {
                if let Some(r) = self.running.as_mut() {
                    r.elapsed = elapsed;
                    r.warmup_left = warmup_left;
                    r.answered_rps = answered_rps;
                    r.p99_us = p99_us;
                }
            }
            KneeAction::StepDone(step) => {
                let running = self.running.take();
                if step.phase == HOLD && step.call == Call::Pass {
                    self.held = Some(Held {
                        rate: step.offered_rps,
                        length: running.map_or(Duration::ZERO, |r| r.length),
                    });
                }
                self.steps.push(*step);
            }
            KneeAction::Bounds { pass, fail } => {
                self.best_pass = pass;
                self.lowest_fail = fail;
            }
            KneeAction::Note(note) => self.note = Some(note),
            KneeAction::Quit => {
                if !self.stopping {
                    self.stopping = true;
                    self.note = Some(
                        "Stopping: the search ends with what it found (the step running is not counted)."
                            .into(),
                    );
                    return Some(KneeEffect::Stop);
                }
            }
        }
        None
    }

    /// Whether step `i` is being run again now (a fail being confirmed, an unsure step
    /// repeated): the last step judged, at the rate running.
    pub fn being_rerun(&self, i: usize) -> bool {
        i + 1 == self.steps.len()
            && self
                .running
                .as_ref()
                .is_some_and(|r| r.phase == "confirm" || r.phase == "repeat")
            && self.running.as_ref().map(|r| r.rate) == self.steps.get(i).map(|s| s.offered_rps)
    }
}

/// The keys of the knee dashboard: q and Ctrl-C end the search.
pub fn key_action(key: KeyEvent) -> Option<KneeAction> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('c') if ctrl => Some(KneeAction::Quit),
        KeyCode::Char('q') => Some(KneeAction::Quit),
        _ => None,
    }
}

/// Feeds the knee dashboard; dropping it ends the dashboard (the search is over).
pub type KneeFeed = UnboundedSender<KneeAction>;

/// Starts the knee dashboard on its own thread; q and Ctrl-C stop `control`. The thread
/// returns once the feed is dropped, with the terminal restored.
pub fn spawn(
    info: SearchInfo,
    control: RunControl,
) -> io::Result<(KneeFeed, JoinHandle<io::Result<()>>)> {
    crate::event_loop::spawn("tailscope-knee-tui", move || {
        let mut app = KneeApp::new(info);
        app.theme = Theme::from_env();
        KneeDashboard { app, control }
    })
}

/// The knee dashboard as the loop drives it.
struct KneeDashboard {
    app: KneeApp,
    control: RunControl,
}

impl crate::event_loop::Dashboard for KneeDashboard {
    type Action = KneeAction;
    const DRAW_LAST: bool = false;

    fn key(&self, key: KeyEvent) -> Option<KneeAction> {
        key_action(key)
    }

    fn apply(&mut self, action: KneeAction) {
        if self.app.update(action) == Some(KneeEffect::Stop) {
            self.control.stop();
        }
    }

    fn terminal_gone(&mut self) {
        // Stop the search as q does; the feed is still drained.
        self.apply(KneeAction::Quit);
    }

    fn render(&self, frame: &mut ratatui::Frame) {
        view::render(&self.app, frame);
    }
}
