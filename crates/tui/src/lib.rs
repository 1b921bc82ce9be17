//! The live dashboard.
//!
//! A pure function of the generator's snapshots: [`app::App`] holds the state and changes only
//! in [`app::App::update`]; [`ui::render`] draws it, one widget per panel, mutating nothing.
//! [`spawn`] runs the dashboard on its own thread (so drawing never blocks the generator)
//! with one `select!` loop over the frame interval, the terminal's key events, the snapshot
//! channel and its closing; [`terminal::TerminalGuard`] gives the terminal back on every exit
//! path, a panic included.

pub mod app;
pub mod knee;
pub mod terminal;
pub mod ui;

mod event_loop;

use std::io;
use std::thread::JoinHandle;

use tailscope_loadgen::RunControl;
use tokio::sync::mpsc::UnboundedSender;

use crate::app::{key_action, Action, App, Effect, RunInfo};

/// Feeds the dashboard; dropping it ends the dashboard (the run is over).
pub type Feed = UnboundedSender<Action>;

/// Where the dashboard asks for the HTML report of the run so far (`s`); the run answers with
/// an [`Action::Note`] saying where it went.
pub type SaveRequests = std::sync::mpsc::Sender<()>;

/// Starts the dashboard on its own thread. Keys act on `control` (q stops the run, +/- set
/// the rate) and `saves` (s). The thread returns once the feed is dropped, with the terminal
/// restored.
pub fn spawn(
    info: RunInfo,
    control: RunControl,
    saves: SaveRequests,
) -> io::Result<(Feed, JoinHandle<io::Result<()>>)> {
    event_loop::spawn("tailscope-tui", move || {
        let mut app = App::new(info);
        app.theme = ui::theme::Theme::from_env();
        RunDashboard {
            app,
            control,
            saves,
        }
    })
}

/// The run's dashboard as the loop drives it.
struct RunDashboard {
    app: App,
    control: RunControl,
    saves: SaveRequests,
}

impl event_loop::Dashboard for RunDashboard {
    type Action = Action;
    const DRAW_LAST: bool = true;

    fn key(&self, key: crossterm::event::KeyEvent) -> Option<Action> {
        key_action(key)
    }

    fn apply(&mut self, action: Action) {
        apply(&mut self.app, action, &self.control, &self.saves);
    }

    fn terminal_gone(&mut self) {
        // Stop the run; its snapshots are still drained.
        self.control.stop();
    }

    fn render(&self, frame: &mut ratatui::Frame) {
        ui::render(&self.app, frame);
    }
}

fn apply(app: &mut App, action: Action, control: &RunControl, saves: &SaveRequests) {
    match app.update(action) {
        Some(Effect::Stop) => control.stop(),
        Some(Effect::SetRate(r)) => control.set_rate(r),
        // The run has finished its snapshots: there is nothing left to save from here.
        Some(Effect::SaveReport) if saves.send(()).is_err() => {
            app.note = Some("The run can no longer save a report.".into());
        }
        Some(Effect::SaveReport) | None => {}
    }
}
