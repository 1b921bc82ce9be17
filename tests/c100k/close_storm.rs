//! Issue 32: closing a connection costs the reference server the same whatever else is armed
//! on its ring. Every close used to be preceded by a cancel keyed by descriptor, which the
//! kernel matches against every armed request: 19,000 connections closing together held a
//! one-worker server for 2.5 s (`server_stall`, 90 % of its CPU in `io_try_cancel`).

use std::process::Stdio;
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
    crate::common::tailscope_command()
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
/// loaded machine left a few unopened by the end of the warm-up. What went wrong, if anything.
fn storm_ended(mut storm: std::process::Child) -> Result<(), String> {
    let code = common::wait_bounded(&mut storm, Duration::from_secs(60));
    let out = storm.wait_with_output().unwrap();
    if code != 0 {
        return Err(format!(
            "the storm exited {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let idle = &report["connections"]["idle"];
    if n(&idle["opened"]) < STORM * 9 / 10 {
        return Err(format!("the storm's connections: {idle}"));
    }
    Ok(())
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
    let busy_before = common::machine_busy_before();
    if let Err(storm) = storm_ended(storm(&addr, "1s")) {
        let _ = server.kill();
        let _ = server.wait();
        // A generator starved of CPU (here, 7,167 of 19,000 connections opened in 4 s at a
        // load average of 24) is not what this test is about: said so when shown.
        assert!(busy_before > 0.15, "{storm}");
        common::inconclusive(format!(
            "other work kept {:.0} % of the CPUs busy before the run, and the storm did not \
             hold its connections: {}",
            busy_before * 100.0,
            storm
                .lines()
                .find(|l| l.contains("Idle conns"))
                .unwrap_or(&storm)
        ));
        return;
    }
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
/// the machine is shown to have starved the server (its own wait for a CPU, measured, as
/// long as the miss: then a miss is inconclusive and says so), the goal holds: the
/// probe's p99.9 under 20 ms and no `server_stall` named. Before the fix, here: p99.9 of
/// 3.9 s, 97 % of the server's samples in the slow seconds in `io_poll_cancel`.
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
    let storm_health = storm_ended(storm);
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
    let stall = causes.contains(&"server_stall");
    let missed = p999_us >= 20_000 || stall || storm_health.is_err();
    // A miss is the machine's only where the server (or the probe) demonstrably waited for a
    // CPU: the server's threads' run-queue wait over the probe (schedstat,
    // `profile.target.run_queue_wait_s`) at least as long as the probe's p99.9 and over
    // 100 ms in all (1 % of the run; the server alone on CPU 0 of a quiet machine waits a
    // few ms). Names alone do not decide: `cpu_contention` was named beside `server_stall`
    // in a quiet sitting (session 15), and a starved server can be named `server_stall`.
    let server_wait_us = probe["profile"]["target"]["run_queue_wait_s"]
        .as_f64()
        .map(|s| (s * 1e6) as u64);
    // Or the probe's own thread did, with other work on the machine (the storm shares the
    // probe's CPU by design: that alone is no excuse): at least 0.1 % of its sends (the
    // p99.9's share) left late while it waited for a CPU, which the corrected latency counts.
    let probe_waits = probe["summary"]["late_sends_by_cause"]["waited_for_cpu"]
        .as_u64()
        .unwrap_or(0);
    let probe_starved =
        busy_before > 0.15 && probe_waits * 1000 >= n(&probe["summary"]["requests"]).max(1);
    let starved = probe_starved || server_wait_us.is_some_and(|w| w >= p999_us.max(100_000));
    if missed && (starved || (storm_health.is_err() && busy_before > 0.15)) {
        common::inconclusive(format!(
            "the server waited {server_wait_us:?} µs for a CPU during the probe, {probe_waits} \
             of the probe's sends left late while it waited for one, and other work kept \
             {:.0} % of the CPUs busy before the run: the probe's p99.9 ({p999_us} µs, causes \
             {causes:?}) and the storm ({storm_health:?}) are not the server's own",
            busy_before * 100.0
        ));
        return;
    }
    storm_health.unwrap();
    // Issue 32's goal: under 20 ms, and no server_stall named. Before closes stopped
    // scanning (3e4e641): p99.9 1.9–3.9 s inside io_poll_cancel; with 128 closes a pass
    // (session 11), 24–38 ms on a quiet machine, a stall in __fput; the closes are now paced
    // by measured time (crates/server/src/closing.rs).
    assert!(
        !stall,
        "server_stall named: {} {}",
        probe["latency_us"], probe["diagnosis"]
    );
    assert!(
        p999_us < 20_000,
        "p99.9 {p999_us} µs: {} {}",
        probe["latency_us"],
        probe["diagnosis"]
    );
}

/// How long the threads of live process `pid` have waited for a CPU while runnable so far
/// (ns; the 2nd field of each `/proc/PID/task/TID/schedstat`), kept per thread in `seen` so that
/// a thread that has exited still counts. `None` once the process is gone or where the kernel
/// keeps no schedstat.
fn run_queue_wait_ns(pid: u32, seen: &mut std::collections::HashMap<String, u64>) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(wait) = stat.split_whitespace().nth(1).and_then(|w| w.parse().ok()) {
            seen.insert(task.file_name().to_string_lossy().into_owned(), wait);
        }
    }
    (!seen.is_empty()).then(|| seen.values().sum())
}

/// The most the threads of process `pid` waited for a CPU within any one second of its life
/// (sampled every 50 ms until it exits): the part of a second's generator lag that other work
/// on its CPU may explain. `None` where it cannot be read.
fn most_run_queue_wait_in_a_second(pid: u32) -> Option<Duration> {
    let mut seen = std::collections::HashMap::new();
    let mut samples: Vec<(Instant, u64)> = Vec::new();
    while let Some(wait) = run_queue_wait_ns(pid, &mut seen) {
        samples.push((Instant::now(), wait));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut most = None;
    for (j, &(tj, wj)) in samples.iter().enumerate() {
        for &(ti, wi) in &samples[..j] {
            // Windows a sample period wider than a second: an upper bound, never less.
            if tj - ti <= Duration::from_millis(1_050) {
                most = most.max(Some(wj.saturating_sub(wi)));
            }
        }
    }
    most.map(Duration::from_nanos)
}

/// The generator's own teardown and event loop at scale: `run -c 16000 --threads 1 -z 3s`
/// against the reference server (server on CPU 0, generator on CPU 1) ends within 0.3 s of
/// run and grace (issue 32: 2.4 s past them when every close matched a cancel against every
/// armed op), and no second of it has generator lag above 20 ms. Before the generator's sockets searched the
/// whole port range (crates/loadgen/src/sys.rs `use_whole_port_range`), the debug generator's
/// loop lagged 370–1,220 ms a second here: past ~14,100 connections from one address to one
/// server, every connect scanned all the even ports in the kernel, inside the ring's submit.
/// The machine's share of a lag is bounded by how long the generator waited for a CPU in a
/// second (its threads' schedstat): a miss that this share explains is inconclusive, and says so;
/// one it does not explain fails. A machine kept busy by other work before the run makes
/// the teardown bound inconclusive too.
#[test]
fn sixteen_thousand_connections_end_within_run_and_grace_without_lag() {
    const CONNS: u64 = 16_000;
    const MOST_LAG: Duration = Duration::from_millis(20);
    let _turn = heavy();
    let _alone = common::quiet_machine();
    if !Engine::Uring.available() {
        return;
    }
    let Some(room) = raise_open_file_limit(CONNS) else {
        return;
    };
    if room < CONNS {
        common::skip(format!(
            "RLIMIT_NOFILE leaves room for {room} connections, not {CONNS}"
        ));
        return;
    }
    let Some((mut server, addr)) =
        common::spawn_serve_as(&["--threads", "1", "--cpus", "0", "--max-conns", "40000"])
    else {
        return;
    };
    let busy_before = common::machine_busy_before();
    let started = Instant::now();
    let generator = common::tailscope_command()
        .args(["run", &format!("http://{addr}/"), "--json", "-"])
        .args(["-c", "16000", "--threads", "1", "-z", "3s", "--cpus", "1"])
        .env("TAILSCOPE_JOURNAL_DIR", env!("CARGO_TARGET_TMPDIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = generator.id();
    let waits = std::thread::spawn(move || most_run_queue_wait_in_a_second(pid));
    let out = generator.wait_with_output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let machine_wait = waits.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &r["summary"];
    let run = s["duration_s"].as_f64().expect("duration_s");
    let grace = s["grace_s"].as_f64().unwrap_or(0.0);
    let over = wall - run - grace;
    let lags: Vec<Duration> = r["timeseries"]
        .as_array()
        .expect("timeseries")
        .iter()
        .map(|t| Duration::from_micros(n(&t["generator_lag_us"])))
        .collect();
    let worst_lag = lags.iter().copied().max().unwrap_or_default();
    let opened = n(&s["connections_opened"]);
    eprintln!(
        "-c {CONNS}: wall {wall:.2} s = run {run:.2} + grace {grace:.2} + {over:.2} s; \
         generator lag per second {lags:?}; the generator waited for a CPU up to \
         {machine_wait:?} in a second; opened {opened}; machine busy before {:.0} %",
        busy_before * 100.0
    );
    let missed = over > 0.3 || opened < CONNS * 9 / 10;
    if missed && busy_before > 0.15 {
        common::inconclusive(format!(
            "other work kept {:.0} % of the CPUs busy before the run: {over:.2} s past run + \
             grace, worst generator lag {worst_lag:?}, {opened} opened are not the \
             generator's own",
            busy_before * 100.0
        ));
        return;
    }
    assert!(opened >= CONNS * 9 / 10, "opened {opened}");
    assert!(
        over <= 0.3,
        "{over:.2} s past run + grace ({wall:.2} s in all)"
    );
    // Issue 32: no second with generator lag above 20 ms. What the generator's wait for a
    // CPU cannot explain is its own.
    if worst_lag <= MOST_LAG {
        return;
    }
    let Some(machine_wait) = machine_wait else {
        common::inconclusive(format!(
            "a second's generator lag reached {worst_lag:?} and the generator's wait for a CPU \
             cannot be read here (no schedstat)"
        ));
        return;
    };
    assert!(
        worst_lag.saturating_sub(machine_wait) <= MOST_LAG,
        "a second's generator lag reached {worst_lag:?} ({lags:?}), of which at most \
         {machine_wait:?} was a wait for a CPU"
    );
    common::inconclusive(format!(
        "a second's generator lag reached {worst_lag:?}, but the generator waited for a CPU up \
         to {machine_wait:?} in a second: other work on its CPU, not its own loop"
    ));
}
