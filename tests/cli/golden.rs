//! The golden JSON report: the schema of a fixed `-n` run, pinned.
//!
//! The report's JSON is an interface (suites, `compare`, scripts read it), so a refactor must
//! leave it identical. This runs a fixed closed-loop run against a deterministic test server
//! and compares the report with a stored snapshot: every key is kept, and so is every value
//! that does not depend on timing or on the machine (counts, status codes, errors by kind,
//! the configuration); the rest is redacted. `cargo insta review` (or `INSTA_UPDATE=always`)
//! updates the snapshot when the schema changes on purpose.

use crate::common;

use std::time::Duration;

use common::{n, ok, run_json, serve, Reply};

/// Requests in the run: 50 rounds of the 4 connections.
const REQUESTS: u64 = 200;

#[test]
fn the_report_of_a_fixed_run_keeps_its_shape() {
    // 10 ms a response makes the run last ~0.5 s: long enough for the profiler to sample the
    // measured second (so `cpu_busy_pct` is always there), short of a second point.
    let server = serve(|_| Reply::Delay(Duration::from_millis(10), ok("Hello, World!")));
    let (code, mut r, stderr) = run_json(
        &server.url("/golden"),
        &["-n", "200", "-c", "4", "--threads", "1"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["requests"]), REQUESTS, "{stderr}");

    // How many seconds the run spans depends on the machine's speed: every point adds up to
    // the run, and the first one shows the shape of a point.
    let points = r["timeseries"].as_array_mut().expect("a time series");
    let in_points: u64 = points.iter().map(|p| n(&p["requests"])).sum();
    let in_points_len = points.len() as u64;
    assert_eq!(in_points, REQUESTS, "every request is in one second");
    points.truncate(1);
    // One histogram per point, the same count as the points (checked before truncating).
    let seconds = r["second_histograms"]
        .as_array_mut()
        .expect("per-second histograms");
    assert_eq!(seconds.len() as u64, in_points_len, "a histogram per point");
    seconds.truncate(1);
    // As many per-CPU figures as the machine has CPUs: the first shows the shape.
    if let Some(cpus) = r["profile"]["cpus"].as_array_mut() {
        cpus.truncate(1);
    }

    for (pointer, placeholder) in [
        ("/config/url", "[url]"),
        // Which engine auto picks, and why, depends on the machine's kernel.
        ("/config/engine/name", "[engine]"),
        ("/config/engine/reason", "[engine reason]"),
        ("/summary/duration_s", "[duration]"),
        ("/summary/grace_s", "[duration]"),
        ("/summary/rps", "[rate]"),
        // Loopback rarely retransmits, but a loaded machine may.
        ("/summary/retransmits", "[tcp]"),
        ("/summary/syn_retransmits", "[tcp]"),
        ("/histogram/data", "[histogram]"),
        ("/connect_histogram/data", "[histogram]"),
        ("/second_histograms/0", "[histogram]"),
        // Rules over timings: which fire on a shared machine is not the schema's business.
        ("/diagnosis", "[diagnosis]"),
        ("/profile/duration_s", "[duration]"),
        ("/profile/notes", "[notes]"),
    ] {
        redact(&mut r, pointer, placeholder);
    }
    // The intervals' shape is pinned, and so is which percentiles 200 samples cannot bound
    // (p99 and beyond: a count, not a timing); the bounds themselves are timings.
    redact_fields(&mut r, "/latency_us", &["ci95"], "[µs]");
    redact_fields(
        &mut r,
        "/latency_us/ci95",
        &["p99", "p999", "p9999"],
        "[µs]",
    );
    let unbounded = r
        .pointer_mut("/latency_ci95/unbounded")
        .and_then(|v| v.as_array_mut());
    for item in unbounded.into_iter().flatten() {
        for field in ["beyond_estimate", "note"] {
            redact(item, &format!("/{field}"), "[varies]");
        }
    }
    for (pointer, placeholder) in [
        ("/connect_us", "[µs]"),
        ("/littles_law", "[littles law]"),
        ("/listen_queue", "[listen queue]"),
        ("/profile/generator", "[cpu]"),
        ("/profile/tcp", "[tcp]"),
    ] {
        redact_fields(&mut r, pointer, &[], placeholder);
    }
    // Where and when: the host's name and the wall clock; a plain run has no segment.
    redact_fields(&mut r, "/generator", &["segment"], "[host or time]");
    for (pointer, keep) in [
        ("/timeseries", &["errors", "timeouts", "unfinished"][..]),
        (
            "/slowest",
            &[
                "worker",
                "status",
                "error",
                "queued_us",
                "unfinished",
                "stage",
            ][..],
        ),
        ("/profile/cpus", &[][..]),
    ] {
        let items = r.pointer_mut(pointer).and_then(|v| v.as_array_mut());
        for item in items.into_iter().flatten() {
            redact_fields(item, "", keep, "[varies]");
        }
    }
    insta::assert_json_snapshot!(r);
}

/// Replaces the value at `pointer` (a JSON pointer) by `placeholder`; a missing value stays
/// missing, so the snapshot still shows it gone.
fn redact(r: &mut serde_json::Value, pointer: &str, placeholder: &str) {
    if let Some(v) = r.pointer_mut(pointer) {
        *v = placeholder.into();
    }
}

/// Replaces the value of every field of the object at `pointer` but those in `keep`, keeping
/// the keys: the object's shape stays pinned.
fn redact_fields(r: &mut serde_json::Value, pointer: &str, keep: &[&str], placeholder: &str) {
    let fields = r.pointer_mut(pointer).and_then(|v| v.as_object_mut());
    for (key, v) in fields.into_iter().flatten() {
        if !keep.contains(&key.as_str()) {
            *v = placeholder.into();
        }
    }
}
