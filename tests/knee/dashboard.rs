//! The find-max dashboard in a real terminal (tmux, 80x24): the curve, the step running and
//! the verdicts show while it searches; q ends the search with what it found (exit 130, the
//! report says it was cut short) and gives the terminal back; nothing is written to stderr
//! while the dashboard holds the terminal; SIGKILL leaves the terminal usable. Skips, visibly,
//! without tmux.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::tmux::{tmux, wait_for, Session};
use common::{ok, serve, Reply};

/// `tailscope find-max URL …` as the pane runs it, from 200 req/s up to far more than the
/// steps take to climb to: the search is still going when the test acts.
fn find_max_command(url: &str, json: &std::path::Path, stderr: &std::path::Path) -> String {
    format!(
        "TAILSCOPE_JOURNAL_DIR={} {} find-max {url} --slo 'p90<500ms' --start-rate 200 --max-rate 100000 --step 2s -c 4 --threads 1 --json {} 2>{}",
        common::JOURNAL_DIR,
        env!("CARGO_BIN_EXE_tailscope"),
        json.display(),
        stderr.display(),
    )
}

#[test]
fn the_search_shows_in_a_dashboard_and_q_ends_it_with_what_it_found() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let _alone = common::quiet_machine();
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let dir = common::scratch_dir("find-max-tui");
    let json = dir.path().join("knee.json");
    let stderr = dir.path().join("stderr.txt");
    let session = Session::shell(
        "tailscope-knee",
        "80",
        "24",
        &format!(
            "{}; echo EXIT=$?; sleep 60",
            find_max_command(&server.url("/plaintext"), &json, &stderr)
        ),
    );
    // A step passed: the table has its verdict, the header the best pass as a rate ("none
    // yet" before).
    let live = wait_for(
        &session.0,
        "req/s   lowest fail",
        false,
        Duration::from_secs(40),
    )
    .expect("the dashboard shows a passing step and the best pass");
    for needed in [
        "find-max",
        "SLO p90<500ms",
        "best pass",
        "lowest fail",
        "Latency by offered rate",
        "Answered by offered rate",
        "Steps",
        "q stop the search",
        "  pass",
    ] {
        assert!(
            live.contains(needed),
            "{needed:?} missing at 80x24:\n{live}"
        );
    }
    assert!(
        !live.contains("find-max step"),
        "a progress line on the screen:\n{live}"
    );
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true, Duration::from_secs(30))
        .expect("find-max exits after q");
    assert!(
        after.contains("EXIT=130"),
        "q cuts the search short: 130\n{after}"
    );
    assert!(
        after.contains("Stopped because: cut short"),
        "the report says it was cut short:\n{after}"
    );
    assert!(after.contains("Highest rate meeting the SLO"), "{after}");
    let visible = tmux(&["capture-pane", "-p", "-t", &session.0]);
    assert!(
        !visible.contains("Answered by offered rate"),
        "the dashboard is gone, the terminal restored:\n{visible}"
    );
    let doc = common::read_json(&json);
    let why = doc["stopped_because"].as_str().unwrap_or_default();
    assert!(why.starts_with("cut short"), "{doc:#}");
    assert!(doc["highest_pass_rps"].as_f64().is_some(), "{doc:#}");
    // Every step in the document ran whole: the one q cut is not counted.
    for step in doc["steps"].as_array().unwrap() {
        assert!(step["seconds"].as_u64().unwrap() >= 2, "{step:#}");
    }
    // While the dashboard held the terminal nothing went to stderr: no progress line, no
    // note; what stderr has was said after the terminal was given back.
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        !said.contains("find-max step"),
        "progress on stderr under the dashboard:\n{said}"
    );
    assert!(!said.contains("answered"), "{said}");
}

#[test]
fn sigkill_during_the_search_still_gives_the_terminal_back() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let _alone = common::quiet_machine();
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let dir = common::scratch_dir("find-max-kill9");
    let session = Session::shell(
        "tailscope-knee-kill9",
        "80",
        "24",
        &format!(
            "{}; sleep 1; stty -a; echo SETTINGS-END; sleep 60",
            find_max_command(
                &server.url("/plaintext"),
                &dir.path().join("knee.json"),
                &dir.path().join("stderr.txt")
            )
        ),
    );
    wait_for(
        &session.0,
        "Answered by offered rate",
        false,
        Duration::from_secs(30),
    )
    .expect("the dashboard is up");
    let shell = tmux(&["display-message", "-p", "-t", &session.0, "#{pane_pid}"]);
    let children = Command::new("pgrep")
        .args(["-P", shell.trim(), "-x", "tailscope"])
        .output()
        .expect("pgrep runs");
    let pid = String::from_utf8_lossy(&children.stdout).trim().to_string();
    assert!(
        !pid.is_empty(),
        "tailscope runs under the pane's shell {shell}"
    );
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    let after = wait_for(&session.0, "SETTINGS-END", true, Duration::from_secs(15))
        .expect("the shell goes on");
    let words: Vec<&str> = after.split_whitespace().collect();
    for setting in ["icanon", "echo", "isig"] {
        assert!(
            words.contains(&setting),
            "{setting} is back on after SIGKILL:\n{after}"
        );
    }
    assert!(
        !after.contains("Answered by offered rate"),
        "the alternate screen is gone:\n{after}"
    );
}
