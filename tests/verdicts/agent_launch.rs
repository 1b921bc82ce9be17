//! `tailscope agent --allow-launch` and `run --agent … --target 'command:…'`: the agent
//! launches the run's server on its host (the netns layout of `agent.rs`: the server and the
//! agent in one namespace, the generator in another), the run loads and profiles it there,
//! and the agent stops its whole tree when the run ends, when the run dies, or when the
//! agent itself is killed. An agent without `--allow-launch` refuses, said on both sides,
//! and the run exits 2 with nothing sent.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::agent::{self as remote, AgentProcess, Netns, Server, TOKEN};

/// The reference server as a command the agent runs, listening where the generator's
/// namespace reaches it.
fn served_command() -> String {
    format!(
        "command:{} serve --threads 1 --addr 0.0.0.0:{{port}}",
        env!("CARGO_BIN_EXE_tailscope")
    )
}

/// An agent with `--allow-launch` in the server's namespace: the process, its address and
/// its fingerprint, and the token file.
struct LaunchingAgent {
    process: Server,
    fingerprint: String,
    token: String,
    _dir: tempfile::TempDir,
}

impl LaunchingAgent {
    fn start(ns: &Netns) -> LaunchingAgent {
        let dir = common::scratch_dir("agent-launch");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let token = token.to_str().unwrap().to_string();
        let listen = format!("{}:0", ns.server_ip);
        let mut child = Netns::tailscope(
            &ns.server,
            &[
                "agent",
                "--listen",
                &listen,
                "--token-file",
                &token,
                "--allow-launch",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut addr, mut fingerprint) = (None, None);
        for _ in 0..4 {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let line = line.trim();
            if let Some(a) = line.strip_prefix("tailscope agent listening on ") {
                addr = Some(a.to_string());
            }
            if let Some(f) = line.strip_prefix("fingerprint ") {
                fingerprint = Some(f.to_string());
            }
            if line.starts_with("launching allowed") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        LaunchingAgent {
            process: Server(child, addr.expect("the agent says where it listens")),
            fingerprint: fingerprint.expect("the agent prints its fingerprint"),
            token,
            _dir: dir,
        }
    }

    /// `run --target … --agent …` in the generator's namespace, for `duration`.
    fn run(&self, ns: &Netns, duration: &str) -> Command {
        let target = served_command();
        let mut c = Netns::tailscope(
            &ns.generator,
            &[
                "run",
                "--target",
                &target,
                "--path",
                "/plaintext",
                "-c",
                "4",
                "-z",
                duration,
                "--no-tui",
                "--json",
                "-",
                "--agent",
                &self.process.1,
                "--agent-token",
                &self.token,
                "--agent-fingerprint",
                &self.fingerprint,
            ],
        );
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }
}

/// A spawned run: the pid the agent launched its server as (from the run's own line), and
/// the rest of its stderr.
fn launched_pid(run: &mut Child) -> (u32, mpsc::Receiver<String>) {
    let stderr = BufReader::new(run.stderr.take().unwrap());
    let (pid_tx, pid_rx) = mpsc::channel();
    let (rest_tx, rest) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(pid) = line
                .split_once("(pid ")
                .filter(|_| line.contains("the agent launched"))
                .and_then(|(_, r)| r.split_whitespace().next()?.parse::<u32>().ok())
            {
                let _ = pid_tx.send(pid);
            }
            all.push_str(&line);
            all.push('\n');
        }
        let _ = rest_tx.send(all);
    });
    let pid = pid_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the run says which process the agent launched");
    (pid, rest)
}

/// Whether `pid` runs (exists and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// Whether `pid` is gone within `limit`.
fn gone_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The network namespace `pid` is in.
fn netns_of(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The run's stdout read to its end, its exit code (bounded) and its stderr.
fn finish(mut run: Child, rest: &mpsc::Receiver<String>) -> (i32, String, String) {
    let mut stdout = String::new();
    run.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let code = common::wait_bounded(&mut run, Duration::from_secs(60));
    let stderr = rest
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_default();
    (code, stdout, stderr)
}

/// The agent launches the run's server in its namespace; the run loads it across the veth
/// pair and profiles it through the agent; the report names it as a launched server, with
/// its tree's CPU and service demand; once the run is over the agent has stopped it.
#[test]
fn across_network_namespaces_the_agent_launches_the_target_and_stops_it_after_the_run() {
    let _one = remote::serial();
    let Some(ns) = Netns::new() else { return };
    let agent = LaunchingAgent::start(&ns);
    let mut run = agent.run(&ns, "3s").spawn().unwrap();
    let (pid, rest) = launched_pid(&mut run);
    assert!(alive(pid), "the launched server runs during the run");
    assert_eq!(
        netns_of(pid),
        netns_of(agent.process.0.id()),
        "in the agent's network namespace"
    );
    let (code, stdout, stderr) = finish(run, &rest);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["target"]["kind"], "command", "{}", report["target"]);
    assert_eq!(report["target"]["pid"].as_u64(), Some(u64::from(pid)));
    assert!(
        report["config"]["url"]
            .as_str()
            .is_some_and(|u| u.contains(&ns.server_ip)),
        "{}",
        report["config"]["url"]
    );
    assert!(report["profile"]["source"]
        .as_str()
        .unwrap()
        .starts_with("agent "));
    assert!(report["summary"]["requests"].as_u64().unwrap() > 100);
    assert!(remote::service_demand(&report) > 0.0);
    assert!(
        report["profile"]["target"]["cpu_time_s"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "{}",
        report["profile"]["target"]
    );
    assert!(
        gone_within(pid, Duration::from_secs(10)),
        "the agent stopped the launched server after the run"
    );
}

/// The launched server does not outlive its run: a run killed mid-way (its connection to
/// the agent drops) and, with another run, an agent killed mid-way (`kill -9`: its guardian
/// process stops the tree) each leave nothing running.
#[test]
fn a_launched_target_dies_with_its_run_or_its_agent() {
    let _one = remote::serial();
    let Some(ns) = Netns::new() else { return };
    let mut agent = LaunchingAgent::start(&ns);
    let mut run = agent.run(&ns, "30s").spawn().unwrap();
    let (pid, _rest) = launched_pid(&mut run);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(alive(pid));
    // `ip netns exec` execs tailscope: the child is the run.
    run.kill().unwrap();
    let _ = run.wait();
    assert!(
        gone_within(pid, Duration::from_secs(15)),
        "the agent stopped the server of a run that died"
    );
    // The agent serves on, and its own death takes the next run's server with it.
    let mut run = agent.run(&ns, "4s").spawn().unwrap();
    let (pid, rest) = launched_pid(&mut run);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(alive(pid));
    agent.process.0.kill().unwrap();
    let _ = agent.process.0.wait();
    assert!(
        gone_within(pid, Duration::from_secs(10)),
        "the launched server did not outlive the agent"
    );
    let (_, stdout, stderr) = finish(run, &rest);
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    assert!(
        report["profile"]["agent"]["lost_at_s"].as_f64().is_some(),
        "the run says when the agent was lost: {}",
        report["profile"]["agent"]
    );
}

/// An agent started without `--allow-launch` runs nothing: the run exits 2 before any load
/// with the agent's reason (and how to allow it), and the agent logs the refusal.
#[test]
fn an_agent_without_allow_launch_refuses_the_target_and_the_run_exits_2() {
    let _one = remote::serial();
    let agent = AgentProcess::start();
    let dir = common::scratch_dir("agent-launch-refused");
    let marker = dir.path().join("ran");
    let target = format!("command:touch {} && sleep 30 # {{port}}", marker.display());
    let flags = agent.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = common::tailscope(
        &[
            &["run", "--target", &target, "-z", "2s", "--no-tui"][..],
            &flags,
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--allow-launch"), "{stderr}");
    assert!(stderr.contains("nothing was sent"), "{stderr}");
    assert!(agent.logged("--allow-launch"), "the agent says it refused");
    assert!(!marker.exists(), "the command was not run");
}
