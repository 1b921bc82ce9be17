//! Numbers you can trust (issue 33): a run's percentiles with their intervals, warnings of a
//! run that did not hold still, and runs that last until their figures are sure.

mod common;

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
