//! Where the search's progress goes while it runs: the knee dashboard when stdout is a
//! terminal (and not `--no-tui`), else a line per step on stderr.
//!
//! While the dashboard holds the terminal nothing is written to stderr (it would land in the
//! drawing): what the search says between steps goes to the dashboard as its note, and the
//! report (which has every step) is printed once the terminal is back.

use std::thread::JoinHandle;

use tailscope_loadgen::{RunControl, Snapshot};
use tailscope_report::knee::KneeStep;
use tailscope_report::threshold::Metric;
use tailscope_targets::Target;
use tailscope_tui::knee::{KneeAction, KneeFeed, SearchInfo};

use super::{FindMaxConfig, Step};

/// The dashboard, when it runs.
struct Dashboard {
    feed: KneeFeed,
    thread: JoinHandle<std::io::Result<()>>,
}

/// The search's voice: the dashboard, or stderr.
pub(super) struct Live {
    dashboard: Option<Dashboard>,
}

impl Live {
    /// Progress lines on stderr.
    pub(super) fn headless() -> Live {
        Live { dashboard: None }
    }

    /// The dashboard for this search when `c.run.tui` asks for it (stdout a terminal, no
    /// `--no-tui`); headless, after saying why, when the terminal cannot be used.
    pub(super) fn start(c: &FindMaxConfig, target: Option<&Target>, control: &RunControl) -> Live {
        if !c.run.tui {
            return Live::headless();
        }
        let plan = &c.run.plan;
        let info = SearchInfo {
            target: format!("{} {}", plan.what_is_sent(), plan.url_shown()),
            slos: c.slos.iter().map(|s| s.expr.clone()).collect(),
            latency_limits: c
                .slos
                .iter()
                .filter(|s| matches!(s.metric, Metric::Latency(_)))
                .map(|s| (s.expr.clone(), s.limit))
                .collect(),
            connections: plan.connections,
            step: c.step,
            rates: (c.start_rate, c.max_rate),
            server: target.map(|t| format!("{} (pid {})", t.name(), t.pid())),
        };
        match tailscope_tui::knee::spawn(info, control.clone()) {
            Ok((feed, thread)) => Live {
                dashboard: Some(Dashboard { feed, thread }),
            },
            Err(e) => {
                say!("tailscope: cannot start the dashboard ({e}); searching headless");
                Live::headless()
            }
        }
    }

    fn send(&self, action: KneeAction) {
        if let Some(d) = &self.dashboard {
            let _ = d.feed.send(action);
        }
    }

    /// A progress line: on stderr, or the dashboard's note.
    pub(super) fn progress(&self, line: String) {
        match &self.dashboard {
            // The dashboard names itself: the note is the line without the program's name.
            Some(_) => self.send(KneeAction::Note(
                line.trim_start_matches("tailscope:").trim().to_string(),
            )),
            None => say!("{line}"),
        }
    }

    /// A step starts.
    pub(super) fn step_started(&self, s: &Step) {
        self.send(KneeAction::StepStarted {
            index: s.index,
            rate: s.rate,
            phase: s.phase.into(),
            length: s.length,
        });
    }

    /// A tick of the running step (only the dashboard shows them).
    pub(super) fn tick(&self, snap: &Snapshot) {
        if self.dashboard.is_none() {
            return;
        }
        let tick_s = snap.tick.as_secs_f64();
        let measuring = snap.elapsed > std::time::Duration::ZERO;
        let answered = snap.last_tick.successes;
        self.send(KneeAction::Progress {
            elapsed: snap.elapsed,
            warmup_left: snap.warmup_left,
            answered_rps: (measuring && tick_s > 0.0).then(|| answered as f64 / tick_s),
            p99_us: (snap.totals.successes > 0).then_some(snap.latency.p99),
        });
    }

    /// A step ended, judged.
    pub(super) fn step_done(&self, step: &KneeStep) {
        self.send(KneeAction::StepDone(Box::new(step.clone())));
    }

    /// The believed bounds after a rate's verdict.
    pub(super) fn bounds(&self, pass: Option<f64>, fail: Option<f64>) {
        self.send(KneeAction::Bounds { pass, fail });
    }

    /// Gives the terminal back, waiting for the dashboard to restore it.
    pub(super) fn finish(self) {
        if let Some(Dashboard { feed, thread }) = self.dashboard {
            drop(feed);
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => say!("tailscope: the dashboard failed: {e}"),
                Err(_) => say!("tailscope: the dashboard panicked"),
            }
        }
    }
}
