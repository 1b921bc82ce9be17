//! The loop both dashboards run (the run's, [`crate::spawn`], and find-max's,
//! [`crate::knee::spawn`]): on its own thread, one `select!` over the frame interval, the
//! terminal's key events, the feed of actions and its closing, the screen redrawn at most
//! once a frame and only when something changed. [`crate::terminal::TerminalGuard`] gives
//! the terminal back on every exit path.

use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEvent};
use futures_util::StreamExt;
use ratatui::Frame;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// How often the screen is redrawn (when something changed).
const FRAME: Duration = Duration::from_millis(100);

/// The dashboard's thread: it returns once its feed is dropped, with the terminal restored.
pub(crate) type Running = JoinHandle<io::Result<()>>;

/// A dashboard as the loop drives it: its state, and what its actions do outside it.
pub(crate) trait Dashboard {
    /// What feeds it (and what its keys ask for).
    type Action: Send + 'static;
    /// Whether the last state is drawn once more when the feed closes.
    const DRAW_LAST: bool;
    /// The action a key asks for, if any.
    fn key(&self, key: KeyEvent) -> Option<Self::Action>;
    /// Applies an action: the state's one change, and its effect on what is running.
    fn apply(&mut self, action: Self::Action);
    /// The terminal went away: stop what is running (the feed is still drained).
    fn terminal_gone(&mut self);
    /// Draws the whole screen.
    fn render(&self, frame: &mut Frame);
}

/// Runs the dashboard `make` builds (once the terminal is taken) on a thread named `name`;
/// it returns once the feed is dropped, with the terminal restored.
pub(crate) fn spawn<D, F>(name: &str, make: F) -> io::Result<(UnboundedSender<D::Action>, Running)>
where
    D: Dashboard,
    F: FnOnce() -> D + Send + 'static,
{
    let (tx, mut rx) = unbounded_channel::<D::Action>();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let mut guard = crate::terminal::TerminalGuard::enter()?;
                let mut dashboard = make();
                let mut events = EventStream::new();
                let mut frame = tokio::time::interval(FRAME);
                frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut dirty = true;
                let mut keys_open = true;
                loop {
                    tokio::select! {
                        _ = frame.tick() => {
                            if dirty {
                                guard.terminal.draw(|f| dashboard.render(f))?;
                                dirty = false;
                            }
                        }
                        event = events.next(), if keys_open => match event {
                            Some(Ok(Event::Key(key))) => {
                                if let Some(action) = dashboard.key(key) {
                                    dashboard.apply(action);
                                    dirty = true;
                                }
                            }
                            Some(Ok(Event::Resize(..))) => {
                                guard.terminal.autoresize()?;
                                dirty = true;
                            }
                            Some(Ok(_)) => {}
                            // The terminal went away: stop, keep draining the feed.
                            Some(Err(_)) | None => {
                                keys_open = false;
                                dashboard.terminal_gone();
                            }
                        },
                        action = rx.recv() => match action {
                            Some(action) => {
                                dashboard.apply(action);
                                dirty = true;
                            }
                            None => break,
                        }
                    }
                }
                if D::DRAW_LAST {
                    guard.terminal.draw(|f| dashboard.render(f))?;
                }
                Ok(())
            })
        })?;
    Ok((tx, handle))
}
