//! The dashboard in a real terminal: tmux runs the binary against a test server, the test
//! reads the screen, presses q, and checks the summary, the exit code and the restored
//! terminal. Skips with a message where tmux is absent (`.ci/run` installs it).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{ok, serve, Reply};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls the pane (with `history` lines of scrollback) until `needle` shows up.
fn wait_for(session: &str, needle: &str, history: bool) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
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

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

#[test]
fn dashboard_shows_live_numbers_and_q_prints_the_summary() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let session = Session(format!("tailscope-test-{}", std::process::id()));
    let command = format!(
        "{} run {} -z 60s -c 4 --threads 1; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_tailscope"),
        server.url("/plaintext")
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session.0,
            "-x",
            "120",
            "-y",
            "40",
            &command,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let live = wait_for(&session.0, "[200]", false).expect("the dashboard shows responses");
    for panel in [
        "tailscope",
        "Throughput",
        "Latency",
        "Status & errors",
        "CPUs",
        "running",
    ] {
        assert!(live.contains(panel), "{panel} missing from:\n{live}");
    }
    tmux(&["send-keys", "-t", &session.0, "3"]);
    let cores = wait_for(&session.0, "Slowest requests", false).expect("view 3");
    assert!(cores.contains("cpu0"), "{cores}");
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
    assert!(after.contains("EXIT=0"), "q exits 0:\n{after}");
    assert!(
        after.contains("Requests/sec"),
        "the summary is printed:\n{after}"
    );
    let visible = tmux(&["capture-pane", "-p", "-t", &session.0]);
    assert!(
        !visible.contains("Throughput  last second"),
        "the dashboard is gone, the terminal restored:\n{visible}"
    );
}

#[test]
fn a_rate_changed_with_plus_is_in_the_summary() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let session = Session(format!("tailscope-rate-{}", std::process::id()));
    let command = format!(
        "{} run {} -z 60s -c 4 --threads 1 -q 400; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_tailscope"),
        server.url("/plaintext")
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session.0,
            "-x",
            "120",
            "-y",
            "40",
            &command,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    wait_for(&session.0, "[200]", false).expect("the dashboard shows responses");
    tmux(&["send-keys", "-t", &session.0, "+"]);
    wait_for(&session.0, "rate set to 500", false).expect("+ raises the rate by 25 %");
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
    assert!(after.contains("EXIT=0"), "q exits 0:\n{after}");
    assert!(after.contains("Rate changes:  500 req/s at"), "{after}");
    assert!(
        after.contains("Interrupted:   stopped from the dashboard"),
        "{after}"
    );
}
