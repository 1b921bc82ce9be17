//! Issue 32: closing a connection costs the reference server the same whatever else is armed
//! on its ring. Every close used to be preceded by a cancel keyed by descriptor, which the
//! kernel matches against every armed request: 19,000 connections closing together held a
//! one-worker server for 2.5 s (`server_stall`, 90 % of its CPU in `io_try_cancel`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{self, n, Engine};
use super::{heavy, raise_open_file_limit};

/// The connections the storm opens and then closes all at once (the figure: what
/// fits under an open-file limit of 20,000 with room for the rest).
const STORM: u64 = 19_000;

/// A generator that opens [`STORM`] connections (held idle beside a light load: 50 requests
/// a second) during a 3 s warm-up, keeps them through `load` and then closes them all and
/// exits.
fn storm(addr: &str, load: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_tailscope"))
        .args(["run", &format!("http://{addr}/"), "--json", "-"])
        .args(["-c", "1", "-q", "50", "--warmup", "3s", "-z", load])
        .args(["--idle-conns", &STORM.to_string(), "--source-addrs", "auto"])
        // Beside the probe, apart from the server: its own teardown is not the server's.
        .args(["--cpus", "1"])
        .args(["--connect-rate", "20000/s", "--connect-timeout", "20s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the storm to end and checks that it held its connections: all of them, unless a
/// loaded machine left a few unopened by the end of the warm-up.
fn storm_ended(mut storm: std::process::Child) {
    let code = common::wait_bounded(&mut storm, Duration::from_secs(60));
    let out = storm.wait_with_output().unwrap();
    assert_eq!(
        code,
        0,
        "the storm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let idle = &report["connections"]["idle"];
    assert!(
        n(&idle["opened"]) >= STORM * 9 / 10,
        "the storm's connections: {idle}"
    );
}

/// Room for the storm's connections (`None` after saying why not) and the reference server.
fn storm_ready() -> Option<(std::process::Child, String)> {
    if !Engine::Uring.available() {
        return None;
    }
    let storm = raise_open_file_limit(STORM)?;
    if storm < STORM {
        common::skip(format!(
            "RLIMIT_NOFILE leaves room for {storm} connections, not {STORM}"
        ));
        return None;
    }
    // One worker on CPU 0; the generators on CPU 1.
    common::spawn_serve_as(&["--cpus", "0", "--max-conns", "40000"])
}

/// Issue 39 item 17: `tailscope serve` exits promptly on SIGINT just after its clients have
/// gone. It took 1.2 s after 10,000 clients left (3.3 s with a faster client), idle as far
/// as its user could tell: each of their closes was still matching a cancel against every
/// armed request. The bound is generous (an idle server exits within ~0.1 s, its tick).
#[test]
fn serve_exits_promptly_on_sigint_right_after_many_clients_left() {
    let _turn = heavy();
    let Some((mut server, addr)) = storm_ready() else {
        return;
    };
    storm_ended(storm(&addr, "1s"));
    let interrupted = Instant::now();
    common::interrupt(server.id());
    let code = common::wait_bounded(&mut server, Duration::from_secs(60));
    let took = interrupted.elapsed();
    eprintln!("serve exited {took:?} after SIGINT, {STORM} clients having just left");
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(2), "serve took {took:?} to exit");
}

/// A probe (`-c 4 -q 200`, open loop, `--pid` the server) runs against `tailscope serve
/// --threads 1` while a second generator opens 19,000 connections (held idle beside a light
/// load) and then exits, closing them all: the server's time does not go to matching
/// cancels (the defect's signature, checked whatever else the machine does), and, unless
/// other work kept the machine's CPUs busy (then the run is inconclusive and says so), the
/// probe's p99.9 stays under 100 ms (the goal, 20 ms and no `server_stall`, is not yet
/// met: 24–38 ms on a quiet machine, a stall inside `__fput`). Before the fix, here:
/// p99.9 of 3.9 s, 97 % of the server's samples in the slow seconds in `io_poll_cancel`.
#[test]
fn nineteen_thousand_connections_closing_together_do_not_stall_the_server() {
    let _turn = heavy();
    let Some((mut server, addr)) = storm_ready() else {
        return;
    };
    let busy_before = common::machine_busy_before();
    let storm = storm(&addr, "2s");
    let pid = server.id().to_string();
    let (code, probe, stderr) = common::run_json(
        &format!("http://{addr}/plaintext"),
        &[
            "--pid", &pid, "-c", "4", "-q", "200", "-z", "10s", "--cpus", "1",
        ],
    );
    storm_ended(storm);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "the probe: {stderr}");
    let p999_us = n(&probe["latency_us"]["p999"]);
    let diagnosis = probe["diagnosis"].as_array().unwrap();
    let causes: Vec<&str> = diagnosis
        .iter()
        .filter_map(|d| d["cause"].as_str())
        .collect();
    eprintln!(
        "probe beside {STORM} closing connections: p99.9 {p999_us} µs, max {} µs: {}",
        n(&probe["latency_us"]["max"]),
        probe["diagnosis"]
    );
    // Where the server's CPU went in the slow seconds: never the kernel matching a cancel
    // against every armed request.
    for d in diagnosis {
        let inside = d["inside"].as_str().unwrap_or_default();
        assert!(
            !["io_poll_cancel", "io_try_cancel", "io_cancel_req_match"]
                .iter()
                .any(|f| inside.contains(f)),
            "closing scans the armed requests: {d}"
        );
    }
    let steal = common::mean_steal_pct(&probe);
    if causes.contains(&"cpu_contention") && (busy_before > 0.15 || steal >= 5.0) {
        common::inconclusive(format!(
            "other work kept {:.0} % of the CPUs busy before the run (steal {steal:.1} %), and the \
             probe rightly named cpu_contention: its p99.9 ({p999_us} µs) is not the server's",
            busy_before * 100.0
        ));
        return;
    }
    // What this test pins is that the quadratic cancel is gone: never a stall inside the
    // cancel frames (checked above), and a tail two orders of magnitude under the defect's.
    // Before closes stopped scanning (3e4e641) this probe's p99.9 was 1.9–3.9 s, with the
    // server's time inside io_poll_cancel. With 128 closes a pass (session 11) a quiet machine
    // still showed 24–38 ms and a stall in __fput_[k], the sockets' own teardown bunched; the
    // closes are now paced by measured time (crates/server/src/closing.rs). Issue 32 asks for
    // under 20 ms and no server_stall: not yet shown on a quiet machine (session 12 had none:
    // load average 12–16 from other builds), so the bound stays what was shown, 100 ms.
    assert!(
        p999_us < 100_000,
        "p99.9 {p999_us} µs: {} {}",
        probe["latency_us"],
        probe["diagnosis"]
    );
}
