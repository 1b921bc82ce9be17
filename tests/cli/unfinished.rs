//! The slowest requests are the ones still waiting at the end: every request that began in
//! the measured window (every open-loop slot that fell due in it) is in the latency figures,
//! an unfinished one at its wait so far, marked as a lower bound.

use crate::common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{engine_tests, n, ok, serve, Engine, Reply};

/// A server that answers at once, except from `freeze_at` after its first request, for
/// `freeze_for`: every request that arrives then is answered when the freeze ends.
fn freezing_server(freeze_at: Duration, freeze_for: Duration) -> common::TestServer {
    let first: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    serve(move |_| {
        let t0 = *first.get_or_init(Instant::now);
        let since = t0.elapsed();
        if since >= freeze_at && since < freeze_at + freeze_for {
            Reply::Delay(freeze_at + freeze_for - since, ok("late"))
        } else {
            Reply::Send(ok("Hello, World!"))
        }
    })
}

fn summary_adds_up(r: &serde_json::Value) {
    let s = &r["summary"];
    assert_eq!(
        n(&s["requests"]),
        n(&s["successes"]) + n(&s["errors"]) + n(&s["unfinished"]),
        "requests = successes + errors + unfinished: {s}"
    );
}

fn lower_bounds(r: &serde_json::Value) -> Vec<String> {
    r["latency_lower_bound"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn a_freeze_at_the_end_is_the_tail_and_is_named(e: Engine) {
    // The server freezes for 3 s from 1 s before the end of a 5 s run: every connection waits
    // past the 1 s grace period.
    let server = freezing_server(Duration::from_secs(4), Duration::from_secs(3));
    let (code, r, stderr) = e.run_json(&server.url("/"), &["-c", "16", "-z", "5s"]);
    assert_eq!(code, 0, "{stderr}");
    summary_adds_up(&r);
    let s = &r["summary"];
    assert_eq!(n(&s["unfinished"]), 16, "{s}");
    assert_eq!(n(&s["aborted"]), 0, "{s}");
    assert!(n(&s["unfinished_min_us"]) >= 1_500_000, "{s}");
    let max = n(&r["latency_us"]["max"]);
    assert!(max >= 1_900_000, "max {max} µs: the frozen requests count");
    let bounds = lower_bounds(&r);
    assert!(
        bounds.contains(&"max".to_string()) && !bounds.contains(&"p50".to_string()),
        "{bounds:?}"
    );
    let slowest = r["slowest"].as_array().unwrap();
    assert!(slowest[0]["unfinished"] == true, "{}", slowest[0]);
    assert_eq!(slowest[0]["stage"], "response");
    let causes: Vec<&str> = r["diagnosis"]
        .as_array()
        .map(|d| d.iter().filter_map(|c| c["cause"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        causes.contains(&"server_stall"),
        "the stall that runs past the end is named: {}",
        r["diagnosis"]
    );
    let stall = r["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cause"] == "server_stall")
        .unwrap();
    assert_eq!(stall["window"]["open_ended"], true, "{stall}");
}

fn a_third_never_answered_are_unfinished_not_dropped(e: Engine) {
    let server = serve(|i| {
        if i % 3 == 2 {
            Reply::Hang
        } else {
            Reply::Send(ok("x"))
        }
    });
    let (code, r, stderr) = e.run_json(&server.url("/"), &["-c", "6", "-z", "3s", "-t", "60s"]);
    assert_eq!(code, 0, "{stderr}");
    summary_adds_up(&r);
    let s = &r["summary"];
    // Each connection gets stuck on its first unanswered request and stays stuck.
    assert_eq!(n(&s["unfinished"]), 6, "{s}");
    assert_eq!(n(&s["timeouts"]), 0, "{s}");
    assert!(
        n(&r["latency_us"]["max"]) >= 2_000_000,
        "{}",
        r["latency_us"]
    );
    assert!(lower_bounds(&r).contains(&"max".to_string()));
}

fn open_loop_counts_the_slots_that_fell_due_while_the_server_was_stuck(e: Engine) {
    // 200 req/s for 2 s; from 1 s on the server answers nothing.
    let server = freezing_server(Duration::from_secs(1), Duration::from_secs(3600));
    let (code, r, stderr) = e.run_json(
        &server.url("/"),
        &["-q", "200", "-c", "4", "-z", "2s", "-t", "60s"],
    );
    assert_eq!(code, 0, "{stderr}");
    summary_adds_up(&r);
    let s = &r["summary"];
    let requests = n(&s["requests"]);
    assert!(
        (360..=440).contains(&requests),
        "every slot that fell due is counted (~400): {s}"
    );
    let unfinished = n(&s["unfinished"]);
    assert!(
        (150..=250).contains(&unfinished),
        "about half the slots fell due while the server was stuck: {s}"
    );
    let not_sent = r["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["stage"] == "not_sent")
        .count();
    assert!(not_sent > 0, "{}", r["slowest"]);
    assert!(lower_bounds(&r).contains(&"p99".to_string()));
}

fn a_healthy_run_has_nothing_unfinished_and_keeps_littles_law(e: Engine) {
    // Every response takes 5 ms, so the connections spend their time waiting on the server,
    // and the check measures the generator's bookkeeping rather than this machine's load.
    let server = serve(|_| Reply::Delay(Duration::from_millis(5), ok("x")));
    let (code, r, stderr) = e.run_json(&server.url("/"), &["-c", "4", "-z", "2s"]);
    assert_eq!(code, 0, "{stderr}");
    summary_adds_up(&r);
    assert_eq!(n(&r["summary"]["unfinished"]), 0);
    assert!(r["summary"]["unfinished_max_us"].is_null());
    assert!(r.get("latency_lower_bound").is_none(), "{r}");
    let l = &r["littles_law"];
    let pct = l["unaccounted_pct"].as_f64().unwrap();
    assert!(pct < 5.0, "{l}");
    let connection_s = l["connection_s"].as_f64().unwrap();
    assert!(
        (7.0..=9.0).contains(&connection_s),
        "4 connections × ~2 s: {l}"
    );
}

fn a_server_that_closes_after_each_response_keeps_littles_law_when_pipelined(e: Engine) {
    // gunicorn's sync workers: one response with `Connection: close`, then a close. Three of every four pipelined
    // requests go back to the queue and are sent again on the next connection; their first
    // trip and the reconnect are theirs (75 % of the connections' time was "lost" when they
    // were not). The 5 ms per response keeps the machine's load out of the check.
    let server = serve(|_| {
        std::thread::sleep(Duration::from_millis(5));
        Reply::SendThenClose(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx".to_vec(),
        )
    });
    let (code, r, stderr) = e.run_json(
        &server.url("/"),
        &["-c", "4", "--pipeline", "4", "-z", "2s"],
    );
    assert_eq!(code, 0, "{stderr}");
    summary_adds_up(&r);
    assert!(n(&r["summary"]["reconnects"]) >= 100, "{}", r["summary"]);
    let l = &r["littles_law"];
    let pct = l["unaccounted_pct"].as_f64().unwrap();
    assert!(pct < 5.0, "{l}");
    let warnings = r["warnings"].to_string();
    assert!(!warnings.contains("in no request"), "{warnings}");
}

fn a_request_the_server_never_reads_is_still_sending(e: Engine) {
    // The server accepts and never reads: a 16 MiB request fills both socket buffers, so
    // its send never ends.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().collect();
        drop(held);
    });
    let body = std::env::temp_dir().join(format!(
        "tailscope-unread-{}-{}",
        std::process::id(),
        e.name()
    ));
    std::fs::write(&body, vec![b'x'; 16 << 20]).unwrap();
    let (code, r, stderr) = e.run_json(
        &url,
        &[
            "-c",
            "1",
            "-z",
            "1s",
            "-t",
            "60s",
            "-m",
            "POST",
            "-D",
            body.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_file(&body);
    assert_eq!(code, 1, "no request got a response: {stderr}");
    summary_adds_up(&r);
    let s = &r["summary"];
    assert_eq!(n(&s["unfinished"]), 1, "{s}");
    assert_eq!(n(&s["timeouts"]), 0, "{s}");
    let slowest = &r["slowest"][0];
    assert_eq!(slowest["unfinished"], true, "{slowest}");
    assert_eq!(slowest["stage"], "sending", "{slowest}");
    // It began with the run (its connect) and waited through the 1 s window and the 1 s
    // grace period.
    assert!(n(&s["unfinished_min_us"]) >= 1_500_000, "{s}");
}

engine_tests!(
    a_request_the_server_never_reads_is_still_sending,
    a_freeze_at_the_end_is_the_tail_and_is_named,
    a_third_never_answered_are_unfinished_not_dropped,
    open_loop_counts_the_slots_that_fell_due_while_the_server_was_stuck,
    a_healthy_run_has_nothing_unfinished_and_keeps_littles_law,
    a_server_that_closes_after_each_response_keeps_littles_law_when_pipelined,
);
