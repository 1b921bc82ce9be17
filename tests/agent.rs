//! `tailscope agent` and `run --agent` over loopback, with the reference server as the
//! target: the server side read through the agent is the one read locally; an agent killed
//! mid-run leaves the run finishing normally and saying when it was lost; a wrong token or
//! fingerprint is refused with a clear message and the agent serves on.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{run_json, spawn_serve, tailscope};

const TOKEN: &str = "agent-test-token-0123456789";

/// One test at a time: they compare CPU figures, and each loads the machine.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running agent, its address, its fingerprint and what it logged.
struct AgentProcess {
    child: Child,
    addr: String,
    fingerprint: String,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
    token_file: String,
}

impl AgentProcess {
    fn start() -> AgentProcess {
        let dir = common::scratch_dir("agent");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let token_file = token_file.to_str().unwrap().to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tailscope"))
            .args([
                "agent",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &token_file,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the tailscope binary runs");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut first, mut second) = (String::new(), String::new());
        out.read_line(&mut first).unwrap();
        out.read_line(&mut second).unwrap();
        let addr = first
            .trim()
            .strip_prefix("tailscope agent listening on ")
            .unwrap_or_else(|| panic!("no address: {first}"))
            .to_string();
        let fingerprint = second
            .trim()
            .strip_prefix("fingerprint ")
            .unwrap_or_else(|| panic!("no fingerprint: {second}"))
            .to_string();
        let log = Arc::new(Mutex::new(String::new()));
        let (mut stderr, into) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        AgentProcess {
            child,
            addr,
            fingerprint,
            log,
            _dir: dir,
            token_file,
        }
    }

    fn flags(&self) -> Vec<String> {
        [
            "--agent",
            &self.addr,
            "--agent-token",
            &self.token_file,
            "--agent-fingerprint",
            &self.fingerprint,
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// Whether the agent logged `needle` within 5 s.
    fn logged(&self, needle: &str) -> bool {
        (0..100).any(|_| {
            let found = self.log.lock().unwrap().contains(needle);
            if !found {
                std::thread::sleep(Duration::from_millis(50));
            }
            found
        })
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server() -> Option<Server> {
    spawn_serve(&[]).map(|(child, addr)| Server(child, addr))
}

fn run_with(url: &str, flags: &[String]) -> (i32, serde_json::Value, String) {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    run_json(url, &flags)
}

fn service_demand(report: &serde_json::Value) -> f64 {
    report["profile"]["target"]["service_demand_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("no service demand: {}", report["profile"]))
}

#[test]
fn through_an_agent_the_server_side_is_the_local_one() {
    let _one = serial();
    let Some(server) = server() else { return };
    let agent = AgentProcess::start();
    let url = format!("http://{}/plaintext", server.1);
    let pid = server.0.id().to_string();
    // A warm-up: the agent's window begins at its end, as the local profiler's does.
    let load = ["-c", "4", "-z", "3s", "--warmup", "500ms", "--no-tui"].map(str::to_string);
    let local_flags = [&load[..], &["--pid".to_string(), pid]].concat();
    let (code, before, stderr) = run_with(&url, &local_flags);
    assert_eq!(code, 0, "{stderr}");
    // The agent finds the server by the URL's port.
    let (code, remote, stderr) = run_with(&url, &[&load[..], &agent.flags()].concat());
    assert_eq!(code, 0, "{stderr}");
    // Local runs on both sides of it: the machine's drift over the three is not the agent's.
    let (code, after, stderr) = run_with(&url, &local_flags);
    assert_eq!(code, 0, "{stderr}");
    let profile = &remote["profile"];
    assert_eq!(
        profile["source"].as_str().unwrap(),
        "agent ".to_string() + profile["agent"]["host"].as_str().unwrap()
    );
    assert_eq!(
        profile["target"]["pid"].as_u64(),
        Some(u64::from(server.0.id()))
    );
    assert!(profile["target"]["cpu_time_s"].as_f64().unwrap() > 0.0);
    assert!(profile["agent"]["pinned"].as_bool().unwrap());
    assert!(profile["agent"]["clock_uncertainty_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        profile["agent"]["clock_offset_ms"].as_f64().unwrap().abs() < 100.0,
        "one host, one clock"
    );
    assert!(profile["agent"].get("lost_at_s").is_none());
    assert!(profile["cpus"].as_array().unwrap().len() >= 1);
    let here = (service_demand(&before) + service_demand(&after)) / 2.0;
    let there = service_demand(&remote);
    assert!(
        (there - here).abs() <= 0.10 * here,
        "service demand through the agent {there:.2} µs against {here:.2} µs locally: more than 10 % apart"
    );
    assert!(agent.logged("profile sent"));
}

#[test]
fn an_agent_killed_mid_run_leaves_the_run_going() {
    let _one = serial();
    let Some(server) = server() else { return };
    let mut agent = AgentProcess::start();
    let url = format!("http://{}/plaintext", server.1);
    let mut args = vec![
        "run".to_string(),
        url,
        "-c".into(),
        "2".into(),
        "-z".into(),
        "4s".into(),
    ];
    args.extend(["--no-tui", "--json", "-"].map(str::to_string));
    args.extend(agent.flags());
    let mut run = Command::new(env!("CARGO_BIN_EXE_tailscope"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(agent.logged("profiling process"), "the profile started");
    std::thread::sleep(Duration::from_millis(1500));
    // SIGKILL: no goodbye on the link.
    agent.child.kill().unwrap();
    let _ = agent.child.wait();
    let mut stdout = String::new();
    run.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let code = common::wait_bounded(&mut run, Duration::from_secs(30));
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(code, 0, "the run ends as it would have: {stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let link = &report["profile"]["agent"];
    let lost = link["lost_at_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no loss said: {link}"));
    assert!((0.5..4.0).contains(&lost), "lost at {lost} s");
    assert!(
        link["lost_because"].as_str().unwrap().contains("closed"),
        "{link}"
    );
    assert!(
        report["profile"]["target"].is_null(),
        "nothing is made up for the missing side"
    );
    let warned = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("was lost"));
    assert!(warned, "{}", report["warnings"]);
    assert!(
        report["summary"]["requests"].as_u64().unwrap_or(0) > 0 || stdout.contains("\"requests\"")
    );
}

#[test]
fn a_wrong_token_or_fingerprint_is_refused_and_the_agent_serves_on() {
    let _one = serial();
    let Some(server) = server() else { return };
    let agent = AgentProcess::start();
    let url = format!("http://{}/plaintext", server.1);
    let dir = common::scratch_dir("agent-wrong");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-agent-s-token-at-all\n").unwrap();
    let mut flags = agent.flags();
    flags[3] = wrong.to_str().unwrap().to_string();
    let out = tailscope(
        &[
            &["run", &url, "-z", "1s", "--no-tui"][..],
            &flags.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("wrong token") && stderr.contains("nothing was sent"),
        "{stderr}"
    );
    assert!(agent.logged("refused: wrong token"));

    let mut flags = agent.flags();
    flags[5] = format!("SHA256:{}", "ab".repeat(32));
    let out = tailscope(
        &[
            &["run", &url, "-z", "1s", "--no-tui"][..],
            &flags.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not the pinned"), "{stderr}");
    assert!(agent.logged("handshake failed"));

    let (code, report, stderr) = run_with(
        &url,
        &[
            &["-z", "1s", "--no-tui"].map(str::to_string)[..],
            &agent.flags(),
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(report["profile"]["source"]
        .as_str()
        .unwrap()
        .starts_with("agent "));
}

#[test]
fn bad_agent_flags_exit_2_before_anything_is_sent() {
    let dir = common::scratch_dir("agent-flags");
    let short = dir.path().join("short");
    std::fs::write(&short, "short\n").unwrap();
    let short = short.to_str().unwrap();
    let url = "http://127.0.0.1:9/";
    for (args, says) in [
        (vec!["--agent", "127.0.0.1:7070"], "--agent-token"),
        (
            vec!["--agent", "nohost", "--agent-token", short],
            "HOST:PORT",
        ),
        (
            vec!["--agent", "127.0.0.1:7070", "--agent-token", short],
            "at least 16",
        ),
        (vec!["--agent-token", short], "is for --agent"),
        (
            vec![
                "--agent",
                "127.0.0.1:7070",
                "--agent-token",
                "/nonexistent/t",
            ],
            "cannot read",
        ),
    ] {
        let out = tailscope(&[&["run", url, "--no-tui"][..], &args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let out = tailscope(&[
        "run",
        url,
        "--no-tui",
        "--agent",
        "127.0.0.1:7070",
        "--agent-token",
        token.to_str().unwrap(),
        "--agent-fingerprint",
        "abc",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a SHA-256 fingerprint"));
    let out = tailscope(&["agent", "--token-file", short]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));
}
