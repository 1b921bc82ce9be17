//! "A container's process found by its listener port": the server in a network namespace
//! of its own (a container's, joined to the host by a veth pair), the agent and the run in
//! the host's. Asked for the run's port, the agent finds the server among the processes of
//! the other namespaces (their /proc/PID/net/tcp and fds) and reads its listener's accept
//! queue there.

use crate::common;

use std::process::{Command, Stdio};

use super::agent::{self as remote, AgentProcess, Server};
use super::netns;

/// A network namespace joined to this one by a veth pair: the container's. Deleted on drop.
struct Container {
    name: String,
    ip: String,
}

impl Container {
    fn new() -> Option<Container> {
        if !netns::can_make() {
            return None;
        }
        let me = std::process::id();
        let subnet = format!("10.214.{}", me % 250);
        let c = Container {
            name: format!("ts-ctr-{me}"),
            ip: format!("{subnet}.1"),
        };
        let (inside, host) = (format!("tsc{me}"), format!("tsh{me}"));
        let n = c.name.as_str();
        let (inside_net, host_net) = (format!("{subnet}.1/24"), format!("{subnet}.2/24"));
        let steps = [
            vec!["netns", "add", n],
            vec![
                "link", "add", &host, "type", "veth", "peer", "name", &inside, "netns", n,
            ],
            vec!["-n", n, "addr", "add", &inside_net, "dev", &inside],
            vec!["addr", "add", &host_net, "dev", &host],
            vec!["-n", n, "link", "set", &inside, "up"],
            vec!["link", "set", &host, "up"],
            vec!["-n", n, "link", "set", "lo", "up"],
        ];
        // On a failed step, `c` is dropped: the namespace, if made, is deleted.
        netns::ip_steps(&steps, "a network namespace").then_some(c)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the veth pair, and with it the host's.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// The agent in the host's namespace, asked for the port of a server in another one:
/// the report's process tree is that server's (its pid, its CPU, its service demand), and
/// its listener's accept queue was sampled in its namespace.
#[test]
fn the_agent_finds_a_server_in_another_network_namespace_by_its_port() {
    let _one = remote::serial();
    let Some(ctr) = Container::new() else { return };
    let listen = format!("{}:0", ctr.ip);
    let mut serve = Command::new("ip")
        .args(["netns", "exec", &ctr.name, env!("CARGO_BIN_EXE_tailscope")])
        .args(["serve", "--threads", "1", "--addr", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = remote::line_after(&mut serve, "listening on http://");
    // `ip netns exec` execs tailscope: the child's pid is the server's.
    let serve = Server(serve, addr);
    let agent = AgentProcess::start();
    let url = format!("http://{}/plaintext", serve.1);
    let flags = agent.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (code, report, stderr) = common::run_json(
        &url,
        &[&["-c", "4", "-z", "3s", "--no-tui"][..], &flags].concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    let target = &report["profile"]["target"];
    assert_eq!(
        target["pid"].as_u64(),
        Some(u64::from(serve.0.id())),
        "the server in the other namespace: {target}"
    );
    assert!(remote::service_demand(&report) > 0.0);
    assert!(
        report["listen_queue"]["samples"].as_u64().unwrap_or(0) > 0,
        "read in the server's namespace: {}",
        report["listen_queue"]
    );
    assert!(agent.logged(&format!("profiling process {}", serve.0.id())));
}
