//! End-to-end tests of launched targets: the bare default, `run --target`, and that no
//! server outlives tailscope.

use crate::common;

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{gone, n, tailscope};

fn io_uring_missing(stderr: &str) -> bool {
    if stderr.contains("io_uring is not available") {
        common::skip("io_uring unavailable here");
        return true;
    }
    false
}

#[test]
fn bare_tailscope_runs_the_embedded_server_headless_and_cleans_up() {
    let started = Instant::now();
    let out = tailscope(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if io_uring_missing(&stderr) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(10), "a 10 s run");
    assert!(stdout.contains("Requests/sec"), "{stdout}");
    let server_line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Server:"))
        .expect("the summary names the server");
    assert!(server_line.contains("embedded"), "{server_line}");
    let pid: u64 = server_line
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(gone(pid), "the embedded server (pid {pid}) was stopped");
}

#[test]
fn run_target_embedded_reports_the_server_and_stops_it() {
    let out = crate::common::tailscope_command()
        .args([
            "run", "--target", "embedded", "-n", "2000", "-c", "8", "--path", "/json", "--json",
            "-",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if io_uring_missing(&stderr) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(n(&r["summary"]["successes"]), 2000);
    assert_eq!(r["target"]["kind"], "embedded");
    assert!(r["config"]["url"].as_str().unwrap().ends_with("/json"));
    let server_cpus = r["target"]["server_cpus"].as_array().unwrap();
    let client_cpus = r["config"]["cpus"].as_array().unwrap();
    assert!(!server_cpus.is_empty() && !client_cpus.is_empty());
    if std::thread::available_parallelism().map_or(1, |p| p.get()) > 1 {
        assert!(
            server_cpus.iter().all(|c| !client_cpus.contains(c)),
            "disjoint CPUs: {server_cpus:?} vs {client_cpus:?}"
        );
    }
    assert!(stderr.contains("ready at"), "{stderr}");
    assert!(gone(n(&r["target"]["pid"])));
}

#[test]
fn sigint_during_a_launched_run_reports_and_leaves_no_server() {
    // Wait until the server is up (the 'ready' line), then interrupt.
    let (mut child, seen) = common::spawn_until(
        &[
            "run", "--target", "embedded", "-z", "60s", "-c", "4", "--json", "-",
        ],
        "ready at",
    );
    if io_uring_missing(&seen) {
        let _ = child.wait();
        return;
    }
    std::thread::sleep(Duration::from_millis(800));
    common::interrupt(child.id());
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let r: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(n(&r["summary"]["requests"]) > 0);
    assert!(
        gone(n(&r["target"]["pid"])),
        "the server was stopped after Ctrl-C"
    );
}

#[test]
fn a_target_that_crashes_at_start_fails_with_its_stderr() {
    let out = tailscope(&[
        "run",
        "--target",
        "command:echo cannot bind {port} >&2; exit 7",
        "-z",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("exit status: 7") && stderr.contains("cannot bind"),
        "{stderr}"
    );
    // Named after its program, read with the shell's quotes: not `exit` (of `exit 3"`, cut
    // at the `;` inside them).
    let out = tailscope(&[
        "run",
        "--target",
        "command:sh -c \"echo starting >&2; exit 3\" {port}",
        "-z",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("sh exited before it was ready (exit status: 3)"),
        "{stderr}"
    );
}

#[test]
fn command_target_with_python() {
    if Command::new("python3").arg("--version").output().is_err() {
        common::skip("python3 not installed (apt-get install python3)");
        return;
    }
    let out = tailscope(&[
        "run",
        "--target",
        "command:python3 -m http.server {port} --bind 127.0.0.1",
        "--path",
        "/",
        "-n",
        "50",
        "-c",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(n(&r["summary"]["successes"]), 50);
    assert_eq!(r["target"]["name"], "python3");
    assert!(gone(n(&r["target"]["pid"])));
}

#[test]
fn nginx_target() {
    let has_nginx = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
        || Command::new("nginx").arg("-v").output().is_ok();
    let (code, r, stderr) = {
        let out = tailscope(&[
            "run", "--target", "nginx", "-n", "3000", "-c", "8", "--json", "-",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !has_nginx {
            assert_eq!(out.status.code(), Some(1));
            assert!(stderr.contains("apt-get install nginx-light"), "{stderr}");
            common::skip("nginx not installed (apt-get install nginx-light)");
            return;
        }
        (
            out.status.code(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_default(),
            stderr,
        )
    };
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 3000);
    assert_eq!(n(&r["summary"]["errors"]), 0);
    assert_eq!(r["target"]["kind"], "nginx");
    assert!(gone(n(&r["target"]["pid"])));
}

#[test]
fn run_needs_a_url_or_a_target() {
    let out = tailscope(&["run", "-z", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target"));
    let out = tailscope(&["run", "--target", "apache"]);
    assert_eq!(out.status.code(), Some(2));
    let out = tailscope(&["run", "http://127.0.0.1:9/", "--pid", "999999999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process"));
}

/// A `--pid` that names another process than the server answering the URL (here a `sleep`)
/// is said before the run and in the report; the server is named by that process's comm, and
/// its CPU per request is n/a, not a made-up 0.00 µs. (The healthy `--pid` run of
/// verdicts::forensics is the case where it must not be said.)
#[test]
fn a_pid_that_does_not_serve_the_port_is_warned_of() {
    let server = common::serve(|_| common::Reply::Send(common::ok("x")));
    let mut sleep = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleep.id().to_string();
    let (code, r, stderr) = common::run_json(
        &server.url("/"),
        &["-z", "1s", "-c", "2", "--threads", "1", "--pid", &pid],
    );
    let _ = sleep.kill();
    let _ = sleep.wait();
    assert_eq!(code, 0, "{stderr}");
    let said =
        format!("--pid {pid}: pid {pid} (sleep) and its children hold no socket listening on port");
    assert!(stderr.contains(&said), "{stderr}");
    assert!(
        r["warnings"].to_string().contains(&said),
        "{}",
        r["warnings"]
    );
    assert!(n(&r["summary"]["successes"]) > 0);
    assert_eq!(r["target"]["name"], "sleep", "{}", r["target"]);
    let target = &r["profile"]["target"];
    assert_eq!(target["cpu_time_s"].as_f64(), Some(0.0), "{target}");
    assert!(target["service_demand_us"].is_null(), "{target}");
}

/// A launched server that dies mid-run is a warning with its exit status (in the JSON and the
/// text), and the summary's server line says it exited instead of "0 threads".
#[test]
fn a_target_that_exits_mid_run_is_warned_about() {
    if !common::has_tool("python3", "--version") {
        common::skip("python3 not installed (apt-get install python3)");
        return;
    }
    // The server serves for 2 s of a 4 s run, then `timeout` stops it (exit status 124).
    let out = tailscope(&[
        "run",
        "--target",
        "command:timeout 2 python3 -m http.server {port} --bind 127.0.0.1",
        "-z",
        "4s",
        "-c",
        "2",
        "--no-tui",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = r["warnings"].to_string();
    assert!(
        // The status is the command's (`timeout`'s), not the python it named the server after
        // (a review finding).
        warnings.contains(
            "python3 server exited during the run (the launched command's exit status: 124)"
        ),
        "{warnings}\n{stderr}"
    );
    assert!(
        stderr.contains("warning: the ") && stderr.contains("exit status: 124"),
        "{stderr}"
    );
    assert!(stderr.contains("it exited during the run"), "{stderr}");
    assert!(!stderr.contains("0 threads"), "{stderr}");
}
