//! A real terminal for the dashboards' tests: tmux runs the binary in a detached session, the
//! test reads the pane and presses keys. Shared by tests/outputs/tui.rs (the run's dashboard)
//! and tests/knee/dashboard.rs (find-max's).

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `tmux ARGS…`; its stdout.
pub fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls the pane (with 400 lines of scrollback when `history`) until `needle` shows up, for
/// at most `limit`.
pub fn wait_for(session: &str, needle: &str, history: bool, limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let screen = if history {
            tmux(&["capture-pane", "-p", "-S", "-400", "-t", session])
        } else {
            tmux(&["capture-pane", "-p", "-t", session])
        };
        if screen.contains(needle) {
            return Some(screen);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// A detached tmux session, killed on drop.
pub struct Session(pub String);

impl Session {
    /// A session `name`-PID of `width`×`height` running the shell `command`.
    pub fn shell(name: &str, width: &str, height: &str, command: &str) -> Session {
        let session = Session(format!("{name}-{}", std::process::id()));
        let started = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session.0,
                "-x",
                width,
                "-y",
                height,
                command,
            ])
            .status()
            .unwrap();
        assert!(started.success());
        session
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}
