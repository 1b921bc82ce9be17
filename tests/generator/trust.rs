//! Numbers you can trust (issue 33): a run's percentiles with their intervals, warnings of a
//! run that did not hold still, runs that last until their figures are sure, and comparisons
//! that call a change only when it stands out of the noise (the A/A and A/B tests).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{ok, run_json, serve, spawn_serve, tailscope, Reply};

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
/// warning. Each serves a 100 ms sleep (300 ms after the step), so that a loaded machine's
/// scheduling delays stay far below the 10 % a warning needs: with a 20 ms sleep, a CI machine
/// busy with the other tests drifted a steady run's p99 from 22.4 to 25.3 ms (+12 %).
#[test]
fn a_run_that_steps_is_warned_of_and_a_steady_one_is_not() {
    let body = ok("step");
    let stepping = serve(move |n| {
        let delay = if n < 640 { 100 } else { 300 };
        Reply::Delay(Duration::from_millis(delay), body.clone())
    });
    let body = ok("steady");
    let steady = serve(move |_| Reply::Delay(Duration::from_millis(100), body.clone()));
    let args = ["-c", "16", "--threads", "1", "-z", "11s"];
    let (code, stepped, stderr) = run_json(&stepping.url("/"), &args);
    assert_eq!(code, 0, "{stderr}");
    let w = stationarity_warnings(&stepped);
    let p99 = w
        .iter()
        .find(|w| w.starts_with("p99 per second stepped from "))
        .unwrap_or_else(|| panic!("no p99 step in {w:?}"));
    // 640 requests at 16 × 10/s: the step comes about 4 s in.
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

/// `tailscope run http://ADDR/ -c 16 -z DUR --json PATH`, which must succeed.
fn short_run(addr: &str, duration: &str, json: &Path) {
    load_run(addr, duration, json, &[]);
}

/// The open loop the stall tests run at: in a closed loop a stalled worker holds back only
/// the one request of each of its connections while the other worker serves hundreds, so
/// the 25 ms stalls touch under 1 % of the requests and sit on the p99's edge (coordinated
/// omission: the faster the machine, the less they show). Paced sends charge each request the
/// time it waited from its planned send, so a quarter of them carry the stall, on any machine.
const OPEN_LOOP: [&str; 2] = ["-q", "2000"];

/// `tailscope run http://ADDR/ -c 16 -z DUR --json PATH EXTRA`, which must succeed.
fn load_run(addr: &str, duration: &str, json: &Path, extra: &[&str]) {
    let url = format!("http://{addr}/");
    let mut args = vec![
        "run",
        &url,
        "-c",
        "16",
        "-z",
        duration,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = tailscope(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `compare --base B... --new N... --fail-if-regression 5% EXTRA`: its exit code and stderr.
fn gate(base: &[PathBuf], new: &[PathBuf], extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["compare".to_string(), "--base".into()];
    args.extend(base.iter().map(|p| p.display().to_string()));
    args.push("--new".into());
    args.extend(new.iter().map(|p| p.display().to_string()));
    args.extend(["--fail-if-regression".into(), "5%".into()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tailscope(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs of `RUNS_PER_SIDE` per side, each `SHORT` long: a single run this short has one or two
/// seconds, too few for the bootstrap over seconds (it needs 8, and 20 pairs of 8 s runs would
/// load the machine for over five minutes), so each of the 20 comparisons is of several short
/// runs per side, interleaved (A B A B A B) so that a drift of the machine lands on both
/// sides: 20 × 2 × 3 × 0.3 s = 36 s of load.
const RUNS_PER_SIDE: usize = 3;
const SHORT: &str = "300ms";

/// The A/A test: the same server on both sides, 20 comparisons gated at 5 %; a gate
/// that judges against the noise flags at most 2 (the plain gate flagged 3 of 10 pairs of 2 s
/// runs). Then a lone pair of short runs: the gate cannot judge, says so and what is needed,
/// and fails closed. No way out as inconclusive: a flag here is what the test looks for.
#[test]
fn an_a_a_comparison_is_rarely_flagged() {
    // Alone among the tests that load the machine, so that two do not make each other's noise.
    let _alone = common::quiet_machine();
    let Some((mut server, addr)) = spawn_serve(&[]) else {
        return;
    };
    let dir = common::scratch_dir("compare-aa");
    let mut flagged = Vec::new();
    let mut point_flagged = 0;
    for pair in 0..20 {
        let (mut base, mut new) = (Vec::new(), Vec::new());
        for run in 0..RUNS_PER_SIDE {
            for (side, files) in [("a", &mut base), ("b", &mut new)] {
                let json = dir.path().join(format!("{pair}-{run}-{side}.json"));
                short_run(&addr, SHORT, &json);
                files.push(json);
            }
        }
        let (code, stderr) = gate(&base, &new, &[]);
        assert!(matches!(code, Some(0 | 99)), "{code:?}: {stderr}");
        if code == Some(99) {
            flagged.push(stderr);
        }
        // The plain gate on the same runs, for the record (what the issue measured).
        if gate(&base, &new, &["--point"]).0 == Some(99) {
            point_flagged += 1;
        }
    }
    let one = |name: &str| dir.path().join(name);
    let out = tailscope(&[
        "compare",
        one("0-0-a.json").to_str().unwrap(),
        one("0-0-b.json").to_str().unwrap(),
        "--fail-if-regression",
        "5",
    ]);
    server.kill().unwrap();
    server.wait().unwrap();
    eprintln!(
        "{} of 20 A/A comparisons flagged ({point_flagged} by the plain gate, --point)",
        flagged.len()
    );
    assert!(
        flagged.len() <= 2,
        "{} of 20 A/A comparisons flagged:\n{}",
        flagged.len(),
        flagged.join("\n")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("regression: req/s: cannot judge (base: ")
            && stderr.contains("the bootstrap needs at least 8 s")
            && stderr.contains("--point"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("| insufficient: base: "));
}

/// The p99 of each report, in µs.
fn p99s(files: &[PathBuf]) -> Vec<f64> {
    files
        .iter()
        .map(|f| common::read_json(f)["latency_us"]["p99"].as_f64().unwrap())
        .collect()
}

/// The A/B test: B is the reference server stalling each worker 25 ms every 50 ms,
/// compared with as many runs of A (open loop, see [`OPEN_LOOP`]), eight runs a side (a busy machine's hiccup in one of five
/// runs widened Welch's interval past a 2× change: measured with five, 4 of 4 were within
/// noise while other builds ran), five times: flagged every time.
///
/// A comparison not flagged fails the test, except where the machine demonstrably did not
/// produce the effect: some run of A was as slow at p99 as some run of B (the runs overlap, so
/// something else held the machine and the stall did not show in the figures; the gate then
/// rightly says within noise). That one is inconclusive, said and recorded with the figures.
#[test]
fn a_stalling_server_is_flagged_every_time() {
    // Alone among the tests that load the machine, so that two do not make each other's noise.
    let _alone = common::quiet_machine();
    let Some((mut a, a_addr)) = spawn_serve(&[]) else {
        return;
    };
    let Some((mut b, b_addr)) = spawn_serve(&["--stall-every", "50ms", "--stall-for", "25ms"])
    else {
        a.kill().unwrap();
        return;
    };
    let dir = common::scratch_dir("compare-ab");
    let mut verdicts = Vec::new();
    for pair in 0..5 {
        let (mut base, mut new) = (Vec::new(), Vec::new());
        for run in 0..8 {
            for (side, addr, files) in [("a", &a_addr, &mut base), ("b", &b_addr, &mut new)] {
                let json = dir.path().join(format!("{pair}-{run}-{side}.json"));
                load_run(addr, SHORT, &json, &OPEN_LOOP);
                files.push(json);
            }
        }
        // Another server is another target by design: the gate is told so.
        let verdict = gate(&base, &new, &["--allow-unlike"]);
        verdicts.push((verdict, p99s(&base), p99s(&new)));
    }
    for server in [&mut a, &mut b] {
        server.kill().unwrap();
        server.wait().unwrap();
    }
    for ((code, stderr), a_p99, b_p99) in &verdicts {
        let slowest_a = a_p99.iter().cloned().fold(0.0, f64::max);
        let fastest_b = b_p99.iter().cloned().fold(f64::INFINITY, f64::min);
        eprintln!("A/B: exit {code:?}, p99 A {a_p99:?} B {b_p99:?}: {stderr}");
        if *code != Some(99) && slowest_a >= fastest_b {
            common::inconclusive(format!(
                "an unstalled run's p99 ({slowest_a} µs) reached a stalled one's ({fastest_b} µs): the machine hid the stall"
            ));
            continue;
        }
        assert_eq!(
            *code,
            Some(99),
            "a stall not flagged (p99 A {a_p99:?}, B {b_p99:?}): {stderr}"
        );
        assert!(
            stderr.contains("significant, beyond the 5 % limit"),
            "{stderr}"
        );
    }
}

/// The judged rows of a compare's markdown: (metric, verdict cell).
fn verdicts(markdown: &str) -> Vec<(String, String)> {
    markdown
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| metric"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].to_string(), cells[5].to_string())
        })
        .collect()
}

/// A single run per side, compared by the block bootstrap over each run's seconds (9 s
/// each, the bootstrap needs 8): a run against itself is within noise in every judged row,
/// the stalling server's p99 a significant regression; the mean has its interval and verdict
/// like the percentiles, the maximum says it has none. The same words in the text,
/// the JSON and the HTML.
#[test]
fn a_single_run_compare_says_significant_or_within_noise_everywhere() {
    // Alone among the tests that load the machine, so that two do not make each other's noise.
    let _alone = common::quiet_machine();
    let Some((mut a, a_addr)) = spawn_serve(&[]) else {
        return;
    };
    let Some((mut b, b_addr)) = spawn_serve(&["--stall-every", "50ms", "--stall-for", "25ms"])
    else {
        a.kill().unwrap();
        return;
    };
    let dir = common::scratch_dir("compare-seconds");
    let (a_json, b_json) = (dir.path().join("a.json"), dir.path().join("b.json"));
    load_run(&a_addr, "9s", &a_json, &OPEN_LOOP);
    load_run(&b_addr, "9s", &b_json, &OPEN_LOOP);
    for server in [&mut a, &mut b] {
        server.kill().unwrap();
        server.wait().unwrap();
    }
    let compare = |base: &Path, new: &Path, name: &str| {
        let (json, html) = (
            dir.path().join(format!("{name}.json")),
            dir.path().join(format!("{name}.html")),
        );
        let out = tailscope(&[
            "compare",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = std::fs::read_to_string(&html).unwrap();
        (stdout, common::read_json(&json), html)
    };

    let (text, json, html) = compare(&a_json, &a_json, "same");
    let rows = verdicts(&text);
    for metric in ["req/s", "p50", "p90", "p99", "mean"] {
        let verdict = &rows.iter().find(|(m, _)| m == metric).unwrap().1;
        assert_eq!(verdict, "within noise", "{metric}: {text}");
    }
    let max = &rows.iter().find(|(m, _)| m == "max").unwrap().1;
    assert_eq!(max, "no interval: the largest single sample", "{text}");
    let json_rows = json["rows"].as_array().unwrap();
    let row = |metric: &str| {
        json_rows
            .iter()
            .find(|r| r["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} row in {json}"))
    };
    assert_eq!(json["mode"], "seconds", "{json}");
    assert!(row("p99")["sentence"]
        .as_str()
        .unwrap()
        .ends_with(", within noise"));
    assert_eq!(row("mean")["judged"]["verdict"], "within_noise", "{json}");
    assert!(row("max")["judged"].is_null());
    assert_eq!(
        row("max")["no_interval"],
        "no interval: the largest single sample"
    );
    assert!(html.contains("<li>p99 ") && html.contains(", within noise</li>"));
    assert!(html.contains("no interval: the largest single sample"));

    // The stalled server against the plain one. On a quiet machine the 25 ms stalls put the
    // stalled run's p99 some hundred times the plain one's. Where it is not even 3 times (a
    // loaded machine: seen at load 24 on 2 cores, the plain run's p99 13 ms with a 1.6 s
    // maximum against the stalled run's 4.6 ms, and 7.9 ms against 10.1 ms), the machine hid
    // the stall from the figures: inconclusive, said and recorded, not failed.
    let p99_of = |f: &Path| common::read_json(f)["latency_us"]["p99"].as_f64().unwrap();
    let (a_p99, b_p99) = (p99_of(&a_json), p99_of(&b_json));
    if b_p99 < 3.0 * a_p99 {
        common::inconclusive(format!(
            "the stalled run's p99 ({b_p99} µs) is not 3 times the unstalled one's ({a_p99} µs): the machine hid the stall"
        ));
        return;
    }
    let (text, json, html) = compare(&a_json, &b_json, "stalled");
    let rows = verdicts(&text);
    let p99 = &rows.iter().find(|(m, _)| m == "p99").unwrap().1;
    // A stalled p99 ten times the 25 ms stall is a hold of the machine's, not the stall's
    // (seen at load 9 on 2 cores: 2.47 s against 3.29 ms, a 2.5 s hold in one second): the
    // bootstrap's resamples with and without that second are worlds apart, and over six
    // figures (Holm) 9 s of seconds cannot call it. Inconclusive, with the figures.
    if p99 != "significant" && b_p99 > 10.0 * 25_000.0 {
        common::inconclusive(format!(
            "the stalled run's p99 ({b_p99} µs) is over ten times the 25 ms stall: a hold of the machine set it, and the comparison says {p99:?}"
        ));
        return;
    }
    assert_eq!(p99, "significant", "{text}");
    let mean = &rows.iter().find(|(m, _)| m == "mean").unwrap().1;
    assert!(
        mean == "significant" || mean == "within noise",
        "the mean is judged: {text}"
    );
    let p99 = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "p99")
        .unwrap();
    let sentence = p99["sentence"].as_str().unwrap();
    assert!(
        sentence.starts_with("p99 +") && sentence.ends_with(", significant"),
        "{sentence}"
    );
    assert_eq!(
        p99["judged"]["method"]["name"], "circular_block_bootstrap",
        "{p99}"
    );
    assert!(html.contains(&format!("<li>{sentence}</li>")), "{html}");
}
