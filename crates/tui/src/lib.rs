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

use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use tailscope_loadgen::RunControl;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use crate::app::{key_action, Action, App, Effect, RunInfo};

/// How often the screen is redrawn (when something changed).
const FRAME: Duration = Duration::from_millis(100);

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
    let (tx, mut rx) = unbounded_channel::<Action>();
    let handle = std::thread::Builder::new()
        .name("tailscope-tui".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let mut guard = terminal::TerminalGuard::enter()?;
                let mut app = App::new(info);
                app.theme = ui::theme::Theme::from_env();
                let mut events = EventStream::new();
                let mut frame = tokio::time::interval(FRAME);
                frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut dirty = true;
                let mut keys_open = true;
                loop {
                    tokio::select! {
                        _ = frame.tick() => {
                            if dirty {
                                guard.terminal.draw(|f| ui::render(&app, f))?;
                                dirty = false;
                            }
                        }
                        event = events.next(), if keys_open => {
                            match event {
                                Some(Ok(Event::Key(key))) => {
                                    if let Some(action) = key_action(key) {
                                        apply(&mut app, action, &control, &saves);
                                        dirty = true;
                                    }
                                }
                                Some(Ok(Event::Resize(..))) => {
                                    guard.terminal.autoresize()?;
                                    dirty = true;
                                }
                                Some(Ok(_)) => {}
                                // The terminal went away: stop the run, keep draining snapshots.
                                Some(Err(_)) | None => {
                                    keys_open = false;
                                    control.stop();
                                }
                            }
                        }
                        action = rx.recv() => match action {
                            Some(action) => {
                                apply(&mut app, action, &control, &saves);
                                dirty = true;
                            }
                            None => break,
                        }
                    }
                }
                guard.terminal.draw(|f| ui::render(&app, f))?;
                Ok(())
            })
        })?;
    Ok((tx, handle))
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
