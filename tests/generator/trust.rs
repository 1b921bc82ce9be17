//! Numbers you can trust (issue 33): a run's percentiles with their intervals, warnings of a
//! run that did not hold still, and runs that last until their figures are sure.

use crate::common;

use std::time::Duration;

use common::{ok, run_json, serve, spawn_serve, Reply};

/// The warnings of a report that speak of the run's stationarity.
fn stationarity_warnings(r: &serde_json::Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains(" stepped from ") || w.contains(" drifted from "))
        .map(str::to_string)
        .collect()
}

/// A server whose answers slow down threefold partway through the run: the report says the
/// p99 and the throughput stepped, and when. The same server kept steady gets no such
/// warning. Each serves a 20 ms sleep (60 ms after the step), so that a loaded machine's
/// scheduling delays stay far below the 10 % a warning needs.
#[test]
fn a_run_that_steps_is_warned_of_and_a_steady_one_is_not() {
    let body = ok("step");
    let stepping = serve(move |n| {
        let delay = if n < 800 { 20 } else { 60 };
        Reply::Delay(Duration::from_millis(delay), body.clone())
    });
    let body = ok("steady");
    let steady = serve(move |_| Reply::Delay(Duration::from_millis(20), body.clone()));
    let args = ["-c", "4", "--threads", "1", "-z", "11s"];
    let (code, stepped, stderr) = run_json(&stepping.url("/"), &args);
    assert_eq!(code, 0, "{stderr}");
    let w = stationarity_warnings(&stepped);
    let p99 = w
        .iter()
        .find(|w| w.starts_with("p99 per second stepped from "))
        .unwrap_or_else(|| panic!("no p99 step in {w:?}"));
    // 800 requests at 4 × 50/s: the step comes about 4 s in.
    assert!(p99.contains(" at "), "{p99}");
    assert!(
        w.iter().any(|w| w.starts_with("throughput stepped from ")),
        "{w:?}"
    );

    let (code, r, stderr) = run_json(&steady.url("/"), &args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stationarity_warnings(&r), Vec::<String>::new());
}

/// A run against the reference server reports each percentile with its interval, or null
/// with the reason beside it; the text prints them.
#[test]
fn a_runs_percentiles_have_their_intervals() {
    let Some((mut server, addr)) = spawn_serve(&[]) else {
        return;
    };
    let url = format!("http://{addr}/");
    let (code, r, stderr) = run_json(&url, &["-c", "4", "--threads", "1", "-z", "2s"]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}");
    let p = &r["latency_us"];
    let unbounded: Vec<&str> = r["latency_ci95"]["unbounded"]
        .as_array()
        .map(|u| u.iter().filter_map(|u| u["percentile"].as_str()).collect())
        .unwrap_or_default();
    for name in ["p50", "p90", "p99", "p999", "p9999"] {
        let ci = &p["ci95"][name];
        if unbounded.contains(&name) {
            assert!(ci.is_null(), "{name}: {ci}");
            continue;
        }
        let (low, high) = (ci[0].as_u64().unwrap(), ci[1].as_u64().unwrap());
        let v = p[name].as_u64().unwrap();
        assert!(low <= v && v <= high, "{name}: {v} not in [{low}, {high}]");
    }
    // Two seconds of a fast server: p50 is bounded whatever the machine.
    assert!(p["ci95"]["p50"].is_array(), "{p}");
    assert_eq!(r["latency_ci95"]["method"]["name"], "order_statistics");
}

/// `--until` stops the run once the percentile's interval is narrow enough (not before the
/// 8 s the bootstrap over seconds needs), and says when; the run was not interrupted.
#[test]
fn until_stops_the_run_when_the_interval_is_narrow_enough() {
    // A 5 ms sleep a request: a median steady to well within ±10 % on any machine.
    let body = ok("sure");
    let server = serve(move |_| Reply::Delay(Duration::from_millis(5), body.clone()));
    let (code, r, stderr) = run_json(
        &server.url("/"),
        &[
            "-c",
            "4",
            "--threads",
            "1",
            "--until",
            "p50±10%",
            "--max-duration",
            "40s",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let until = &r["until"];
    assert_eq!(until["reached"], true, "{until}");
    let at = until["reached_at_s"].as_f64().unwrap();
    assert!((8.0..40.0).contains(&at), "{until}");
    let goal = &until["goals"][0];
    assert_eq!(goal["percentile"], "p50");
    assert!(
        goal["last"]["half_width_pct"].as_f64().unwrap() <= 10.0,
        "{goal}"
    );
    assert!(
        r["summary"]["duration_s"].as_f64().unwrap() < 40.0,
        "{}",
        r["summary"]
    );
    assert_eq!(r["interrupted"], false);
    assert!(
        stderr.contains("Until:         every goal met at "),
        "{stderr}"
    );
}

/// When the cap comes first, the report says so and how far each goal got.
#[test]
fn until_says_when_the_cap_came_first() {
    let Some((mut server, addr)) = spawn_serve(&[]) else {
        return;
    };
    let url = format!("http://{addr}/");
    let (code, r, stderr) = run_json(
        &url,
        &[
            "-c",
            "4",
            "--threads",
            "1",
            "--until",
            "p99±5%",
            "--until",
            "p99.99+-1%",
            "--max-duration",
            "2s",
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}");
    let until = &r["until"];
    assert_eq!(until["reached"], false, "{until}");
    assert!(until["reached_at_s"].is_null(), "{until}");
    assert_eq!(until["max_duration_s"], 2.0);
    assert_eq!(until["goals"].as_array().unwrap().len(), 2);
    // 2 s is short of the 8 s a goal needs: neither is reached.
    for g in until["goals"].as_array().unwrap() {
        assert!(g["reached_at_s"].is_null(), "{g}");
    }
    assert!(
        stderr.contains("--max-duration 2 s came first")
            && stderr.contains("p99.99 ±1 %: not reached"),
        "{stderr}"
    );
}

/// Bad --until values and flags that do not go with it exit 2 with a clear message before
/// anything is sent.
#[test]
fn bad_until_values_are_refused_before_anything_is_sent() {
    let server = serve(|_| Reply::Send(ok("never")));
    let url = server.url("/");
    for (args, says) in [
        (&["--until", "p99", "--max-duration", "5s"][..], "has no ±"),
        (
            &["--until", "p101±2%", "--max-duration", "5s"][..],
            "p101 is not a percentile",
        ),
        (
            &["--until", "p99±0%", "--max-duration", "5s"][..],
            "±0% can never be met",
        ),
        (&["--until", "p99±2%"][..], "--until needs --max-duration"),
        (
            &["--max-duration", "5s"][..],
            "--max-duration caps a run with --until",
        ),
        (
            &["--until", "p99±2%", "--max-duration", "5s", "-z", "1s"][..],
            "not -z or -n",
        ),
    ] {
        let mut all = vec!["run", url.as_str(), "--no-tui"];
        all.extend_from_slice(args);
        let out = common::tailscope(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(
        server
            .stats
            .connections
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing was sent"
    );
}

/// `--warmup auto` loads a server that is slow at first until its per-second figures have
/// settled, then measures: the report says how long the warm-up took, and the measured run
/// is the settled one.
#[test]
fn an_automatic_warm_up_ends_once_the_figures_settle() {
    let body = ok("warm");
    // Slow (20 ms) for the first 400 requests, about 2 s at 4 × 50/s, then 2 ms.
    let server = serve(move |n| {
        let delay = if n < 400 { 20 } else { 2 };
        Reply::Delay(Duration::from_millis(delay), body.clone())
    });
    let (code, r, stderr) = run_json(
        &server.url("/"),
        &["-c", "4", "--threads", "1", "--warmup", "auto", "-z", "2s"],
    );
    assert_eq!(code, 0, "{stderr}");
    let w = &r["warmup_auto"];
    assert_eq!(w["settled"], true, "{w}");
    let after = w["settled_after_s"].as_f64().unwrap();
    // The slow start lasts about 2 s; MSER truncates where the rest's standard error is
    // least, which on a quiet machine was 6 s (its noise in the seconds after the change).
    assert!((1.0..=8.0).contains(&after), "{w}");
    assert!(w["judged_seconds"].as_u64().unwrap() >= 10, "{w}");
    assert!(w["lasted_s"].as_f64().unwrap() >= 10.0, "{w}");
    // Measured after the slow start: the median is the fast regime's.
    let p50 = r["latency_us"]["p50"].as_u64().unwrap();
    assert!(p50 < 10_000, "p50 {p50} µs");
    assert!(
        stderr.contains("after an automatic warm-up of "),
        "{stderr}"
    );
}
