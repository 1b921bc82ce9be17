//! The dashboard in a real terminal: tmux runs the binary against a test server, the test
//! reads the screen, presses q, and checks the summary, the exit code and the restored
//! terminal, and that no field of any view is cut at 80×24 and 120×40. Skips with a message
//! where tmux is absent (`.ci/run` installs it).

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::tmux::{tmux, Session};
use common::{ok, serve, Reply};
use tailscope_tui::ui::fit::cut_fields;

/// Polls the pane until `needle` shows up, for at most 15 s.
fn wait_for(session: &str, needle: &str, history: bool) -> Option<String> {
    common::tmux::wait_for(session, needle, history, Duration::from_secs(15))
}

/// A detached tmux session `name` of `width`×`height` running `tailscope run URL -z 60s -c 4
/// --threads 1 EXTRA…`, then printing its exit code and waiting a minute to be read.
fn start_run(name: &str, width: &str, height: &str, url: &str, extra: &str) -> Session {
    Session::shell(
        name,
        width,
        height,
        &format!(
            "TAILSCOPE_JOURNAL_DIR={} {} run {url} -z 60s -c 4 --threads 1{extra}; echo EXIT=$?; sleep 60",
            crate::common::JOURNAL_DIR,
            env!("CARGO_BIN_EXE_tailscope"),
        ),
    )
}

#[test]
fn dashboard_shows_live_numbers_and_q_prints_the_summary() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let session = start_run("tailscope-test", "120", "40", &server.url("/plaintext"), "");
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
    let session = start_run(
        "tailscope-rate",
        "120",
        "40",
        &server.url("/plaintext"),
        " -q 400",
    );
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

#[test]
fn s_saves_the_html_report_of_the_run_so_far() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tui-save");
    std::fs::create_dir_all(&dir).unwrap();
    let final_page = dir.join("final.html");
    let json = dir.join("final.json");
    for old in std::fs::read_dir(&dir).unwrap().flatten() {
        let _ = std::fs::remove_file(old.path());
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let session = start_run(
        "tailscope-save",
        "120",
        "40",
        &server.url("/plaintext"),
        &format!(" --html {} --json {}", final_page.display(), json.display()),
    );
    wait_for(&session.0, "[200]", false).expect("the dashboard shows responses");
    tmux(&["send-keys", "-t", &session.0, "?"]);
    let help = wait_for(&session.0, "save the HTML report", false).expect("the help names s");
    assert!(
        help.contains("s               save the HTML report"),
        "{help}"
    );
    tmux(&["send-keys", "-t", &session.0, "?"]);
    // Two whole seconds in, so the page has per-CPU busy seconds to draw.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    tmux(&["send-keys", "-t", &session.0, "s"]);
    let screen = wait_for(&session.0, "saved ", false).expect("s says where the page went");
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
    assert!(after.contains("EXIT=0"), "q exits 0:\n{after}");
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("final-at-"))
        .collect();
    assert_eq!(
        saved.len(),
        1,
        "one page saved beside --html: {saved:?}\n{screen}"
    );
    let page = std::fs::read_to_string(&saved[0]).unwrap();
    assert!(
        page.contains("Saved from the dashboard"),
        "it says it is partial"
    );
    assert!(!page.contains("<script") && !page.contains("src=\"http"));
    // The per-CPU busy of the seconds so far, from the profiler (the rest of it comes at the
    // end): one point per CPU and second.
    let cpu = &page[page.find("data-chart=\"cpu-busy\"").expect("the CPU chart")..];
    let points: u64 = cpu["data-chart=\"cpu-busy\" data-points=\"".len()..]
        .split('"')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the CPU chart's point count");
    assert!(points >= 2, "per-CPU busy so far is drawn: {points} points");
    // Its request count is the run's so far: some, and no more than the whole run's.
    let marker = "data-kpi=\"requests\"><div class=\"v\">";
    let at = page.find(marker).expect("the requests figure") + marker.len();
    let figure = &page[at..at + page[at..].find('<').unwrap()];
    let so_far: u64 = figure
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {figure}"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let total = report["summary"]["requests"].as_u64().unwrap();
    assert!(so_far > 0 && so_far <= total, "{so_far} of {total}");
    assert!(
        final_page.exists(),
        "the final page is written at the end too"
    );
}

/// Polls the pane until it shows `present` and not `absent` (a view has been redrawn).
fn wait_for_view(session: &str, present: &str, absent: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let screen = tmux(&["capture-pane", "-p", "-t", session]);
        if screen.contains(present) && !screen.contains(absent) {
            return Some(screen);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// The labels, units and statuses a live run against a 200-answering server shows: the
/// numbers change from run to run, the words around them do not.
fn live_fields() -> Vec<String> {
    [
        "tailscope",
        "running",
        "closed loop",
        "4 conn",
        "1 thread",
        "Throughput",
        "last second",
        "req/s",
        "r/s",
        "Latency per tick",
        "(log scale)",
        "Latency histogram",
        "last tick",
        "p99.9",
        "p99",
        "p50",
        "requests",
        "errors",
        "timeouts",
        "Status & errors",
        "[200]",
        "no errors",
        "CPUs",
        "(S server · G generator)",
        "u user",
        "s system+irq",
        "si softirq",
        "ctx/s",
        "migr/s",
        "listen queue",
        "Spikes",
        "likely causes",
        "Slowest requests",
        "latency",
        "status",
        "worker",
        "split",
        "connect",
        "ttfb",
        "body",
        "1 Overview",
        "2 Latency",
        "3 Cores & spikes",
        "3 Cores",
        "4 Server inside",
        "4 Inside",
        "5 Requests",
        "5 Req",
        "2 Lat",
        "Server inside",
        // Without "n/a: ": its prefix "n/a" is also a whole value elsewhere (IPC n/a).
        "no server to sample: give --target or --pid",
        "q quit",
        "p freeze",
        "+/- rate",
        "Tab view",
        "? keys",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn no_field_is_cut_on_a_live_dashboard_at_80x24_and_120x40() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let fields = live_fields();
    for (width, height) in [("80", "24"), ("120", "40")] {
        let session = start_run(
            &format!("tailscope-fit-{width}"),
            width,
            height,
            &server.url("/plaintext"),
            "",
        );
        // Each view by its key, once it is drawn: (key, a title it has, one it has not).
        for (key, present, absent) in [
            ("1", "[200]", "Spikes"),
            ("2", "Latency histogram", "Status & errors"),
            ("3", "Spikes", "Throughput"),
            // No --target or --pid here: the view says why it has nothing.
            ("4", "no server to sample", "Spikes"),
            ("?", "Keys", "Spikes"),
        ] {
            tmux(&["send-keys", "-t", &session.0, key]);
            let screen = wait_for_view(&session.0, present, absent)
                .unwrap_or_else(|| panic!("view {key} at {width}×{height} is drawn"));
            let cuts = cut_fields(&screen, &fields);
            assert!(
                cuts.is_empty(),
                "view {key} at {width}×{height}: cut fields {cuts:#?}\n{screen}"
            );
        }
        tmux(&["send-keys", "-t", &session.0, "q"]);
        let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
        assert!(after.contains("EXIT=0"), "q exits 0:\n{after}");
    }
}

#[test]
fn sigkill_in_the_dashboard_still_gives_the_terminal_back() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    // The pane's shell outlives tailscope and then prints the terminal's settings.
    let session = Session::shell(
        "tailscope-kill9",
        "100",
        "30",
        &format!(
            "TAILSCOPE_JOURNAL_DIR={} {} run {} -z 60s -c 2 --threads 1; sleep 1; stty -a; echo SETTINGS-END; sleep 60",
            crate::common::JOURNAL_DIR,
            env!("CARGO_BIN_EXE_tailscope"),
            server.url("/plaintext"),
        ),
    );
    wait_for(&session.0, "[200]", false).expect("the dashboard shows responses");
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
    let killed = Command::new("kill").args(["-9", &pid]).status().unwrap();
    assert!(killed.success());
    let after = wait_for(&session.0, "SETTINGS-END", true).expect("the shell goes on");
    let words: Vec<&str> = after.split_whitespace().collect();
    for setting in ["icanon", "echo", "isig"] {
        assert!(
            words.contains(&setting),
            "{setting} is back on after SIGKILL:\n{after}"
        );
    }
    assert!(
        !after.contains("Throughput  last second"),
        "the alternate screen is gone:\n{after}"
    );
    // Where the journal of the killed run is was said before the dashboard took the terminal
    // (a newcomer's kill -9 left no path on the screen: it waited for the dashboard's end).
    assert!(after.contains("tailscope: journal "), "{after}");
}

/// The SGR parameters of `screen` (as `tmux capture-pane -e` writes it) that set a colour:
/// foreground or background, 8, 16, 256 or RGB (39 and 49, back to the default, are not).
fn colour_attributes(screen: &str) -> Vec<String> {
    let mut found = Vec::new();
    for sequence in screen.split("\x1b[").skip(1) {
        let Some(end) = sequence.find(|c: char| !(c.is_ascii_digit() || c == ';' || c == ':'))
        else {
            continue;
        };
        if !sequence[end..].starts_with('m') {
            continue;
        }
        for p in sequence[..end].split(';') {
            let code: u32 = p.split(':').next().unwrap_or("").parse().unwrap_or(0);
            match code {
                30..=37 | 40..=47 | 90..=97 | 100..=107 => found.push(p.to_string()),
                38 | 48 => {
                    found.push(sequence[..end].to_string());
                    // Its own parameters (5;N or 2;R;G;B) follow: not attributes.
                    break;
                }
                _ => {}
            }
        }
    }
    found
}

#[test]
fn colour_attributes_are_found_in_what_tmux_writes() {
    assert_eq!(
        colour_attributes("\x1b[1m\x1b[32mok\x1b[39m \x1b[2;4mx\x1b[0m"),
        ["32"]
    );
    assert_eq!(
        colour_attributes("\x1b[38;5;3my\x1b[1;48;2;1;2;3mz"),
        ["38;5;3", "1;48;2;1;2;3"]
    );
    assert!(colour_attributes("\x1b[1m\x1b[7mplain\x1b[22;27m\x1b[2K").is_empty());
}

#[test]
fn no_color_draws_every_view_without_a_colour_and_every_panel_reads() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let run = |name: &str, env: &str| {
        Session::shell(
            name,
            "120",
            "40",
            &format!(
                "TAILSCOPE_JOURNAL_DIR={} {env} {} run {} -z 60s -c 4 --threads 1; echo EXIT=$?; sleep 60",
                crate::common::JOURNAL_DIR,
                env!("CARGO_BIN_EXE_tailscope"),
                server.url("/plaintext"),
            ),
        )
    };
    let with_escapes = |session: &Session| tmux(&["capture-pane", "-p", "-e", "-t", &session.0]);
    // The same dashboard in colour: the capture does show colours, so their absence below
    // is NO_COLOR's doing.
    let coloured = run("tailscope-colour", "env -u NO_COLOR");
    wait_for(&coloured.0, "[200]", false).expect("the dashboard shows responses");
    assert!(
        !colour_attributes(&with_escapes(&coloured)).is_empty(),
        "in colour the capture has colours"
    );
    tmux(&["send-keys", "-t", &coloured.0, "q"]);
    drop(coloured);

    let session = run("tailscope-no-color", "NO_COLOR=1");
    let fields = live_fields();
    for (key, present, absent, words) in [
        (
            "1",
            "[200]",
            "Spikes",
            &[
                "Throughput",
                "last second",
                "Latency per tick",
                "p50 ⠒ · p99 • · max ▀",
                "Latency histogram",
                "Status & errors",
                "no errors",
                "CPUs",
                "(S server · G generator)",
                "Slowest requests",
            ][..],
        ),
        (
            "3",
            "Spikes",
            "Throughput",
            &[
                "cpu0",
                "█ u user",
                "▓ s system+irq",
                "▒ si softirq",
                "listen queue",
                "likely causes",
            ],
        ),
        (
            "2",
            "Latency histogram",
            "Status & errors",
            // The latency view's percentile panel is narrow: the run's figures with their 95 %
            // interval (issue 33) keep their place, and the last tick's column gives way.
            &["p99.9", "95 % CI"],
        ),
    ] {
        tmux(&["send-keys", "-t", &session.0, key]);
        let screen = wait_for_view(&session.0, present, absent)
            .unwrap_or_else(|| panic!("view {key} is drawn"));
        let escaped = with_escapes(&session);
        let colours = colour_attributes(&escaped);
        assert!(
            colours.is_empty(),
            "view {key} under NO_COLOR=1 has colours {colours:?}:\n{escaped}"
        );
        // What colour said is said by modifiers: bold and dim are there.
        assert!(
            escaped.contains("\x1b[1m"),
            "bold in view {key}:\n{escaped}"
        );
        for word in words {
            assert!(
                screen.contains(word),
                "view {key}: {word} missing:\n{screen}"
            );
        }
        let cuts = cut_fields(&screen, &fields);
        assert!(
            cuts.is_empty(),
            "view {key}: cut fields {cuts:#?}\n{screen}"
        );
    }
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
    assert!(after.contains("EXIT=0"), "q exits 0:\n{after}");

    // clap's help and refusals honour it too, on a terminal where they would colour.
    let refused = |name: &str, env: &str| {
        let session = Session::shell(
            name,
            "120",
            "20",
            &format!(
                "{env} {} run --no-such-flag; echo EXIT=$?; sleep 60",
                env!("CARGO_BIN_EXE_tailscope")
            ),
        );
        wait_for(&session.0, "EXIT=", false).expect("the refusal is printed");
        colour_attributes(&with_escapes(&session))
    };
    assert!(!refused("tailscope-refusal-colour", "env -u NO_COLOR").is_empty());
    assert_eq!(
        refused("tailscope-refusal-no-color", "NO_COLOR=1"),
        Vec::<String>::new()
    );
}

/// Nothing is written over the dashboard: a journal whose disk fills mid-run (a one-page
/// tmpfs) is said in the dashboard's footer while it runs, and why on stderr once it has given
/// the terminal back. (Before, the line went to stderr at once and stayed in the drawing: CI
/// saw the journal's start-up line cut the header.)
#[test]
fn a_journal_that_fails_under_the_dashboard_is_said_in_it_and_after_it() {
    if !common::has_tool("tmux", "-V") {
        common::skip("tmux not installed (apt-get install tmux)");
        return;
    }
    let dir = common::scratch_dir("tui-journal-full");
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4k", "tmpfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        common::skip("cannot mount a small tmpfs (not root): the full-disk case is not run");
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mnt);
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let session = start_run(
        "tailscope-journal-full",
        "120",
        "40",
        &server.url("/plaintext"),
        &format!(" -q 400 --journal {}", mnt.join("r.journal").display()),
    );
    let live = wait_for(&session.0, "[200]", false).expect("the dashboard shows responses");
    assert!(!live.contains("tailscope: journal"), "{live}");
    // A page at some 300 B a second fills within some 15 s.
    let deadline = Instant::now() + Duration::from_secs(40);
    let screen = loop {
        let screen = tmux(&["capture-pane", "-p", "-t", &session.0]);
        if screen.contains("The journal is no longer being written.") {
            break screen;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard never said the journal stopped:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        !screen.contains("tailscope: "),
        "a line of stderr is drawn over the dashboard:\n{screen}"
    );
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let after = wait_for(&session.0, "EXIT=", true).expect("tailscope exits after q");
    assert!(
        after.contains("EXIT=3"),
        "incomplete output exits 3:\n{after}"
    );
    assert!(
        after.contains("is no longer being written: "),
        "why is said once the terminal is back:\n{after}"
    );
}
