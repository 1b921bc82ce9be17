//! Connections held open and silent beside the load (`--idle-conns`, `--slow-conns`): opened,
//! counted apart, reopened when the server closes them, through the load's connect path.

use std::time::{Duration, Instant};

use super::common::{self, engine_tests, n, Engine};
use super::{light, peer_counting_server, per_peer, raise_open_file_limit};

/// The most a time series' points give for one figure of their `connections`.
fn most(r: &serde_json::Value, field: &str) -> u64 {
    r["timeseries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["connections"][field].as_u64())
        .max()
        .unwrap_or_else(|| panic!("no point has connections.{field}: {}", r["timeseries"]))
}

/// Idle connections the open-file limit leaves room for beside the load and the server.
const IDLE: u64 = 2_000;

fn idle_connections_are_held_open_beside_the_load(e: Engine) {
    let _turn = light();
    let Some(idle) = raise_open_file_limit(IDLE) else {
        return;
    };
    let Some((mut server, addr)) = common::spawn_serve(&[]) else {
        return;
    };
    let count = idle.to_string();
    let (code, r, stderr) = e.run_json(
        &format!("http://{addr}/"),
        // The warm-up opens them all: connects measured beside 2,000 others would be the
        // run's set-up (and warned of as such).
        &[
            "-c",
            "8",
            "--warmup",
            "1s",
            "-z",
            "2s",
            "--idle-conns",
            &count,
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["config"]["idle_conns"]), idle);
    assert_eq!(n(&r["config"]["slow_conns"]), 0);
    // Both populations: the load's 8 and the idle ones, counted apart.
    let c = &r["connections"];
    assert_eq!(n(&c["peak_open"]), 8, "{c}");
    assert_eq!(
        n(&r["summary"]["connections_opened"]),
        8,
        "{}",
        r["summary"]
    );
    assert!(n(&r["summary"]["successes"]) > 0, "{}", r["summary"]);
    assert_eq!(n(&r["summary"]["errors"]), 0, "{}", r["errors"]);
    let i = &c["idle"];
    assert_eq!(n(&i["asked"]), idle, "{i}");
    assert_eq!(n(&i["opened"]), idle, "{i}");
    assert_eq!(n(&i["peak_open"]), idle, "{i}");
    // Every one held to the end: none closed by the server, none failed.
    assert_eq!(n(&i["open_at_end"]), idle, "{i}");
    assert_eq!(n(&i["closed_by_server"]), 0, "{i}");
    assert_eq!(n(&i["connect_failures"]) + n(&i["failed"]), 0, "{i}");
    assert!(c["slow"].is_null(), "{c}");
    // A busy machine may hold the generator's loop up (warned as "the generator fell
    // behind"): that is the machine's, not the held connections'.
    let warnings: Vec<&serde_json::Value> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| !w.as_str().unwrap().starts_with("the generator fell behind"))
        .collect();
    assert!(
        warnings.is_empty(),
        "all held: nothing to warn of: {warnings:?}"
    );
    // Over time: the load's 8 and the idle ones open in the per-second points.
    assert_eq!(most(&r, "open"), 8);
    assert_eq!(most(&r, "idle_open"), idle);
    assert!(r["timeseries"][0]["connections"]["slow_open"].is_null());
    // Held through the last second too: its point is taken before they are let go.
    let points = r["timeseries"].as_array().unwrap();
    let last = &points[points.len() - 1]["connections"];
    assert_eq!(n(&last["idle_open"]), idle, "{last}");
}

fn held_connections_closed_by_the_server_are_counted_and_reopened(e: Engine) {
    let _turn = light();
    // A server that closes a head unfinished after 300 ms and a silent connection after
    // 300 ms: every slow and idle connection is closed, again and again.
    let Some((mut server, addr)) =
        common::spawn_serve(&["--header-timeout", "300ms", "--idle-timeout", "300ms"])
    else {
        return;
    };
    let url = format!("http://{addr}/");
    let flags = [
        "-c",
        "2",
        "-z",
        "3s",
        "--idle-conns",
        "10",
        "--slow-conns",
        "10",
        "--slow-interval",
        "100ms",
    ];
    let (code, r, stderr) = e.run_json(&url, &flags);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(r["config"]["slow_interval_s"].as_f64(), Some(0.1));
    for kind in ["idle", "slow"] {
        let h = &r["connections"][kind];
        assert_eq!(n(&h["asked"]), 10, "{kind}: {h}");
        assert!(n(&h["closed_by_server"]) >= 10, "{kind}: {h}");
        // Each close is followed by a new connection while the run lasts.
        assert!(n(&h["opened"]) >= n(&h["closed_by_server"]), "{kind}: {h}");
        assert_eq!(
            n(&h["connect_failures"]) + n(&h["failed"]),
            0,
            "{kind}: {h}"
        );
    }
    assert!(most(&r, "held_lost") > 0, "{}", r["timeseries"]);
    let warnings = r["warnings"].to_string();
    for kind in [
        "idle connections (--idle-conns)",
        "slow connections (--slow-conns)",
    ] {
        assert!(warnings.contains(kind), "{kind}: {warnings}");
    }
    // The load itself is not held up by them.
    assert_eq!(n(&r["summary"]["errors"]), 0, "{}", r["errors"]);
    // The summary says so.
    let mut all = vec!["run", url.as_str(), "--no-tui"];
    all.extend_from_slice(&flags);
    let out = e.tailscope(&all);
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Idle conns:    10 asked: ",
        "Slow conns:    10 asked (a header byte every 0.1 s): ",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert!(!text.contains(" 0 closed by the server"), "{text}");
}

fn held_connections_open_through_the_loads_connect_path(e: Engine) {
    let _turn = light();
    // Source addresses in turn and --connect-rate turns, shared with the load's connects.
    let (url, accepted) = peer_counting_server();
    let (code, r, stderr) = e.run_json(
        &url,
        &[
            "-c",
            "2",
            "-z",
            "1s",
            "--threads",
            "1",
            "--idle-conns",
            "3",
            "--slow-conns",
            "3",
            "--source-addrs",
            "127.0.0.2,127.0.0.3",
            "--connect-rate",
            "50/s",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        r["config"]["source_addrs"],
        serde_json::json!(["127.0.0.2", "127.0.0.3"])
    );
    for kind in ["idle", "slow"] {
        let h = &r["connections"][kind];
        assert_eq!(n(&h["opened"]), 3, "{kind}: {h}");
        assert_eq!(n(&h["open_at_end"]), 3, "{kind}: {h}");
    }
    let peers = per_peer(&accepted);
    assert_eq!(
        peers.values().copied().collect::<Vec<_>>(),
        vec![4, 4],
        "8 connections, 2 addresses in turn: {peers:?}"
    );
    // 8 connects at 50/s: the last leaves 7 × 20 ms after the first.
    let times: Vec<Instant> = accepted.lock().unwrap().iter().map(|(_, t)| *t).collect();
    let spread = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    assert!(
        spread >= Duration::from_millis(120),
        "connects spread over {spread:?}"
    );
}

fn held_connections_open_when_a_thread_has_no_share_of_n(e: Engine) {
    let _turn = light();
    // -n 1 over 2 threads: the second has no request and ends at once; its share of the
    // held connections went with it (5 of 10 opened).
    let (url, _) = peer_counting_server();
    let (code, r, stderr) = e.run_json(
        &url,
        &["-n", "1", "-c", "2", "--threads", "2", "--idle-conns", "10"],
    );
    assert_eq!(code, 0, "{stderr}");
    let idle = &r["connections"]["idle"];
    assert_eq!(n(&idle["opened"]), 10, "{idle}");
    assert_eq!(n(&idle["open_at_end"]), 10, "{idle}");
}

engine_tests!(
    held_connections_open_when_a_thread_has_no_share_of_n,
    held_connections_open_through_the_loads_connect_path,
    idle_connections_are_held_open_beside_the_load,
    held_connections_closed_by_the_server_are_counted_and_reopened,
);
