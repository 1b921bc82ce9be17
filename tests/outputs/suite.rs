//! End-to-end tests of `tailscope suite` and `tailscope compare`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::tailscope;

fn temp(name: &str, text: &str) -> PathBuf {
    // Under cargo's target/tmp, rewritten by every run: nothing is left in /tmp.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("suite");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const QUICK: &str = r#"
[suite]
baseline = "python"
[load]
connections = 4
duration = "400ms"
warmup = "100ms"
runs = 2
[[target]]
name = "python"
kind = "command"
command = "python3 -m http.server {port} --bind 127.0.0.1"
[[target]]
name = "reference"
kind = "embedded"
threads = 1
[[endpoint]]
path = "/"
"#;

#[test]
fn a_suite_runs_every_target_and_reports_medians_and_ratios() {
    if Command::new("python3").arg("--version").output().is_err() {
        common::skip("python3 not installed (apt-get install python3)");
        return;
    }
    let file = temp("quick.toml", QUICK);
    let json = file.with_extension("json");
    let md = file.with_extension("md");
    let out = tailscope(&[
        "suite",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("io_uring is not available") {
        common::skip("io_uring unavailable");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.starts_with("| target | endpoint | req/s (median, 95 % CI) |"),
        "{table}"
    );
    assert!(
        table.contains("| python | / |") && table.contains("| 1.00× |"),
        "{table}"
    );
    assert_eq!(std::fs::read_to_string(&md).unwrap(), table);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["kind"], "suite");
    assert!(r["host"]["kernel"].is_string() && r["host"]["cpus"].as_u64().unwrap() >= 1);
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for res in results {
        let runs = res["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{res}");
        // Each run's warnings and diagnosed causes, empty or not, are kept.
        assert!(
            runs.iter()
                .all(|x| x["warnings"].is_array() && x["causes"].is_array()),
            "{res}"
        );
        let rps: Vec<f64> = runs.iter().map(|x| x["rps"].as_f64().unwrap()).collect();
        assert_eq!(
            res["rps_min"].as_f64().unwrap(),
            rps.iter().copied().fold(f64::MAX, f64::min)
        );
        assert!((res["rps_median"].as_f64().unwrap() - (rps[0] + rps[1]) / 2.0).abs() < 1e-6);
    }
    assert_eq!(results[0]["vs_baseline"], 1.0);
    // The ratio pairs the runs by round: the geometric mean of the rounds' ratios, with its
    // interval.
    let ratio = results[1]["vs_baseline"].as_f64().unwrap();
    let rps = |r: usize, i: usize| results[r]["runs"][i]["rps"].as_f64().unwrap();
    let paired = ((rps(1, 0) / rps(0, 0)).ln() + (rps(1, 1) / rps(0, 1)).ln()) / 2.0;
    assert!(
        (ratio - paired.exp()).abs() < 1e-9,
        "{ratio} {}",
        paired.exp()
    );
    let ci = &results[1]["vs_baseline_ci95"];
    assert!(
        ci[0].as_f64().unwrap() <= ratio && ratio <= ci[1].as_f64().unwrap(),
        "{ci}"
    );
    assert_eq!(
        r["rounds"]["order"][0],
        serde_json::json!([0, 1]),
        "file order first"
    );
    assert!(stderr.contains("suite: reference / run 2/2"), "{stderr}");
    let demand = results[1]["server_us_per_request_median"]
        .as_f64()
        .expect("the profiler measured the server");
    assert!(demand > 0.0, "server CPU per request {demand} µs");
}

#[test]
fn a_bad_suite_file_fails_before_anything_starts() {
    let bad = QUICK.replace("duration = \"400ms\"", "duration = \"fast\"");
    let out = tailscope(&["suite", temp("bad.toml", &bad).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.toml:6:") && stderr.contains("fast"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("starting"),
        "nothing was started: {stderr}"
    );
    let out = tailscope(&["suite", "/nonexistent/suite.toml"]);
    assert_eq!(out.status.code(), Some(2));
    // Counted runs: a bad count, or a count beside a duration, is refused the same way.
    for (bad, message) in [
        (
            "runs = 2\nrequests = 0",
            "bad.toml:9: requests = 0 is out of range",
        ),
        (
            "runs = 2\nwarmup_requests = -3",
            "bad.toml:9: warmup_requests = -3 is out of range",
        ),
        (
            "runs = 2\nrequests = 2500",
            "bad.toml:9: requests and duration both given",
        ),
    ] {
        let text = QUICK.replace("runs = 2", bad);
        let out = tailscope(&["suite", temp("bad.toml", &text).to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains(message) && !stderr.contains("starting"),
            "{stderr}"
        );
    }
}

#[test]
fn sigint_to_a_running_suite_leaves_no_process() {
    let long = QUICK
        .replace("duration = \"400ms\"", "duration = \"30s\"")
        .replace("baseline = \"python\"", "baseline = \"reference\"");
    let long = long.replace(
        "[[target]]\nname = \"python\"\nkind = \"command\"\ncommand = \"python3 -m http.server {port} --bind 127.0.0.1\"\n",
        "",
    );
    let file = temp("long.toml", &long);
    let (mut child, seen) = common::spawn_until(&["suite", file.to_str().unwrap()], "/ warm-up");
    if seen.contains("io_uring is not available") {
        common::skip("io_uring unavailable");
        let _ = child.wait();
        return;
    }
    let servers = common::children(child.id());
    assert!(
        !servers.is_empty(),
        "the embedded server runs as a child: {seen}"
    );
    std::thread::sleep(Duration::from_millis(500));
    common::interrupt(child.id());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        servers.iter().all(|&p| common::gone(p)),
        "no server outlives the suite: {servers:?}"
    );
}

/// A real run's JSON report (a short run against a test server), with its throughput and
/// latency set to these figures: compare reads reports as their types, so a fixture must be
/// a whole report, not a few fields of one.
fn run_report(rps: f64, p99: u64) -> String {
    static REAL: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    let real = REAL.get_or_init(|| {
        let server = common::serve(|_| common::Reply::Send(common::ok("x")));
        let (code, report, stderr) = common::run_json(&server.url("/"), &["-n", "20", "-c", "2"]);
        assert_eq!(code, 0, "{stderr}");
        report
    });
    let mut r = real.clone();
    r["summary"]["rps"] = rps.into();
    r["summary"]["error_rate"] = 0.0.into();
    for (key, v) in [
        ("p50", p99 / 2),
        ("p90", p99),
        ("p99", p99),
        ("p999", p99),
        ("max", p99),
    ] {
        r["latency_us"][key] = v.into();
    }
    r["latency_us"]["mean"] = ((p99 / 2) as f64).into();
    r.to_string()
}

/// A suite report with one result, whole as `suite --json` writes it.
fn suite_report(results: serde_json::Value) -> String {
    serde_json::json!({
        "schema_version": 1,
        "kind": "suite",
        "tool": {"name": "tailscope", "version": "0.1.0"},
        "host": {"cpus": 2, "date": "2026-11-22T00:00:00Z"},
        "baseline": null,
        "load": {},
        "results": results,
        "interrupted": false,
    })
    .to_string()
}

#[test]
fn compare_gates_on_regressions() {
    let base = temp("base.json", &run_report(100_000.0, 1_000));
    let same = temp("same.json", &run_report(98_000.0, 1_020));
    let slower = temp("slower.json", &run_report(90_000.0, 1_000));
    let spikier = temp("spikier.json", &run_report(100_000.0, 1_200));
    let b = base.to_str().unwrap();
    let out = tailscope(&[
        "compare",
        b,
        same.to_str().unwrap(),
        "--fail-if-regression",
        "5",
        // These reports have no per-second histograms: the plain gate is what is tested.
        "--point",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| req/s | 100000 | 98000 | -2.0 % |"),
        "{table}"
    );
    let out = tailscope(&[
        "compare",
        b,
        slower.to_str().unwrap(),
        "--fail-if-regression",
        "5",
        // These reports have no per-second histograms: the plain gate is what is tested.
        "--point",
    ]);
    assert_eq!(out.status.code(), Some(99));
    assert!(String::from_utf8_lossy(&out.stderr).contains("regression: req/s: -10.0 %"));
    let out = tailscope(&[
        "compare",
        b,
        spikier.to_str().unwrap(),
        "--fail-if-regression",
        "5",
        // These reports have no per-second histograms: the plain gate is what is tested.
        "--point",
    ]);
    assert_eq!(out.status.code(), Some(99));
    assert!(String::from_utf8_lossy(&out.stderr).contains("regression: p99: +20.0 %"));
    let out = tailscope(&["compare", b, slower.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "without a gate it only reports");
    let suite = temp("suite.json", &suite_report(serde_json::json!([])));
    let out = tailscope(&["compare", b, suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let junk = temp("junk.json", "not json");
    let out = tailscope(&["compare", b, junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    // A report missing fields (renamed, or cut by hand) is refused, not shown as "n/a".
    let partial = temp(
        "partial.json",
        r#"{"schema_version": 1, "summary": {"rps": 1}, "latency_us": {"p50": 1}}"#,
    );
    let out = tailscope(&["compare", b, partial.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a tailscope JSON report of its kind")
    );
}

#[test]
fn compare_names_unlike_settings_and_refuses_to_gate_on_them() {
    let closed = temp("closed.json", &run_report(84_000.0, 1_000));
    let mut open: serde_json::Value = serde_json::from_str(&run_report(20_000.0, 900)).unwrap();
    open["config"]["mode"] = "open".into();
    open["config"]["rate"] = 20000.0.into();
    open["config"]["connections"] = 64.into();
    let open = temp("open.json", &open.to_string());
    let (a, b) = (open.to_str().unwrap(), closed.to_str().unwrap());
    let out = tailscope(&["compare", a, b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with(
            "**Unlike settings:** loop open at 20000 req/s vs closed; connections 64 vs 2."
        ),
        "{stdout}"
    );
    // A gate on them is refused (exit 2, before any output) unless asked for.
    let out = tailscope(&["compare", a, b, "--fail-if-regression", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("--fail-if-regression refused: the reports were run with unlike settings (loop open at 20000 req/s vs closed; connections 64 vs 2)")
            && stderr.contains("--allow-unlike"),
        "{stderr}"
    );
    let out = tailscope(&[
        "compare",
        b,
        a,
        "--fail-if-regression",
        "5",
        "--allow-unlike",
        "--point",
    ]);
    assert_eq!(
        out.status.code(),
        Some(99),
        "req/s fell: the forced gate judges"
    );
    // Suites of another pipelining depth alike.
    let suite = |pipeline: u64| {
        let mut s: serde_json::Value = serde_json::from_str(&suite_report(serde_json::json!([
            {"target": "ref", "endpoint": "/", "runs": [], "rps_median": 1000.0},
        ])))
        .unwrap();
        s["load"] = serde_json::json!({"connections": 50, "pipeline": pipeline, "rate": null, "duration_s": 10.0});
        s.to_string()
    };
    let (p1, p16) = (temp("p1.json", &suite(1)), temp("p16.json", &suite(16)));
    let out = tailscope(&[
        "compare",
        p1.to_str().unwrap(),
        p16.to_str().unwrap(),
        "--fail-if-regression",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("(pipeline 1 vs 16)"), "{stderr}");
}

#[test]
fn compare_suites_matches_target_and_endpoint() {
    let suite = |rps: f64| {
        suite_report(serde_json::json!([
            {"target": "ref", "endpoint": "/", "runs": [], "rps_median": rps, "p50_us_median": 50.0, "p99_us_median": 100.0},
        ]))
    };
    let a = temp("sa.json", &suite(1000.0));
    let b = temp("sb.json", &suite(800.0));
    let out = tailscope(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-if-regression",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(99));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| ref / req/s | 1000 | 800 | -20.0 % |"));
    // The page: both suites' req/s as bars, and the same change table.
    let html = a.with_file_name("suites.html");
    let out = tailscope(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("tailscope: wrote {}", html.display())),
        "compare --html says what it wrote, as report does"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("data-chart=\"compare-rps\" data-points=\"2\""),
        "a bar for base and new"
    );
    assert!(page.contains("<title>ref / in the base suite: 1000 req/s (median)</title>"));
    assert!(page.contains("<title>ref / in the new suite: 800 req/s (median)</title>"));
    // These suites hold no runs, so the change cannot be judged, and the page says so.
    assert!(page.contains(
        "<tr><td>ref / req/s</td><td class=\"num\">1000</td><td class=\"num\">800</td><td class=\"num\">-20.0 %</td><td>insufficient: 0 base and 0 new runs: comparing runs needs at least 2 per side</td></tr>"
    ), "{page}");
}

/// `tailscope ARGS`: exit 2, with `message` on stderr, and nothing run.
fn refused(args: &[&str], message: &str) {
    let out = tailscope(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
    assert!(!stderr.contains("suite: "), "{args:?} ran: {stderr}");
}

#[test]
fn an_output_that_would_destroy_an_input_or_another_output_is_refused_before_anything_runs() {
    let report = run_report(1000.0, 100);
    let a = temp("self.json", &report);
    let b = temp("b2.json", &report);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let suite = temp("tiny.toml", QUICK);
    let suite = suite.to_str().unwrap();
    refused(
        &["report", a, "--html", a],
        "--html is the same file as the input",
    );
    refused(
        &["compare", a, b, "--html", b],
        "--html is the same file as the input",
    );
    let same = temp("same.out", "");
    std::fs::remove_file(&same).unwrap();
    let same = same.to_str().unwrap();
    refused(
        &[
            "run", "--target", "embedded", "-z", "1s", "-c", "4", "--no-tui", "--json", same,
            "--html", same,
        ],
        "--html is the same file as --json",
    );
    refused(
        &["suite", suite, "--json", same, "--html", same],
        "--html is the same file as --json",
    );
    refused(
        &["merge", a, b, "--json", b],
        "--json is the same file as the input",
    );
    assert_eq!(
        std::fs::read_to_string(a).unwrap(),
        report,
        "the input is untouched"
    );
    assert!(!std::path::Path::new(same).exists());
    // `-` is stdout, not a file: two outputs may both go there. (--force: this plain run is
    // not a segment, which merge otherwise refuses.)
    let out = tailscope(&["merge", a, "--json", "-", "--force"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn an_unwritable_output_is_refused_before_anything_runs_with_one_message() {
    let suite = temp("tiny2.toml", QUICK);
    let suite = suite.to_str().unwrap();
    let hint = "pick a writable path";
    refused(&["suite", suite, "--json", "/nonexistent/x.json"], hint);
    refused(&["suite", suite, "--markdown", "/nonexistent/x.md"], hint);
    let a = temp("w.json", &run_report(1000.0, 100));
    let a = a.to_str().unwrap();
    refused(&["report", a, "--html", "/nonexistent/x.html"], hint);
    refused(&["compare", a, a, "--html", "/nonexistent/x.html"], hint);
    refused(&["merge", a, "--json", "/nonexistent/x.json"], hint);
}

/// SIGINT in the middle of a suite's second run: the first run is kept, the one cut short is
/// left out of the runs (and so of the median and range), and the suite says it was
/// interrupted.
#[test]
fn an_interrupted_suite_leaves_the_run_it_cut_short_out() {
    let file = temp(
        "interrupted.toml",
        "[load]\nconnections = 2\nduration = \"2s\"\nwarmup = \"200ms\"\nruns = 3\n[[target]]\nname = \"reference\"\nkind = \"embedded\"\nthreads = 1\n[[endpoint]]\npath = \"/plaintext\"\n",
    );
    let json = file.with_extension("json");
    let _ = std::fs::remove_file(&json);
    let child = crate::common::tailscope_command()
        .args([
            "suite",
            file.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Past the first 2 s run, in the middle of the second.
    std::thread::sleep(std::time::Duration::from_millis(3200));
    common::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("io_uring is not available") {
        common::skip("io_uring unavailable");
        return;
    }
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["interrupted"], true);
    let runs = r["results"][0]["runs"].as_array().unwrap();
    assert!(
        runs.len() <= 1 && stderr.contains("cut short by the interruption, left out"),
        "{runs:?}\n{stderr}"
    );
    for run in runs {
        let d = run["duration_s"].as_f64().unwrap();
        assert!((1.9..2.5).contains(&d), "only whole runs are kept: {d} s");
    }
}

/// The example of the framework benchmark protocol (examples/interleaved.toml: two targets,
/// a counted warm-up, six counted runs each in interleaved rounds): its markdown and HTML give
/// each median with its interval and the ratio to the baseline with its interval, and its JSON
/// the rounds' seed and orders (every target once a round).
#[test]
fn the_interleaved_example_shows_medians_and_ratios_with_intervals() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/interleaved.toml");
    let dir = common::scratch_dir("interleaved");
    let (json, md, html) = (
        dir.path().join("s.json"),
        dir.path().join("s.md"),
        dir.path().join("s.html"),
    );
    let Some(_) = common::ok_unless_no_uring(&[
        "suite",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]) else {
        return;
    };
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(
        table.starts_with("| target | endpoint | req/s (median, 95 % CI) | min – max | p50 | p95 | p99 | server CPU/req | ratio (vs stalling, 95 % CI) |"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("| reference | / |"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split(" | ").collect();
    // The median with its interval: `9998 (6609–11896)`; the ratio: `2.10× (1.90–2.30)` or
    // `no clear difference (1.02×, 0.95–1.10)`.
    assert!(cells[2].contains(" (") && cells[2].contains('–'), "{row}");
    assert!(cells[8].contains('×') && cells[8].contains('–'), "{row}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(cells[8]) && page.contains("req/s (median, 95 % CI)"),
        "{row}"
    );
    let r = common::read_json(&json);
    let rounds = r["rounds"]["order"].as_array().unwrap();
    assert_eq!(rounds.len(), 6);
    assert!(r["rounds"]["seed"].is_u64());
    for order in rounds {
        let mut o: Vec<u64> = order
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        o.sort_unstable();
        assert_eq!(o, [0, 1]);
    }
    assert_eq!(r["load"]["requests"], 4000);
    for res in r["results"].as_array().unwrap() {
        assert_eq!(res["runs"].as_array().unwrap().len(), 6);
        assert!(res["median_ci95"]["rps"].is_array(), "{res}");
    }
}

/// Several runs a side: the figures are the sides' geometric means, plain (`--point`) or
/// judged; a clear regression beyond the runs' spread fails the gate, one within it does not.
#[test]
fn several_runs_a_side_are_compared_as_wholes() {
    let file = |name: &str, rps: f64, p99: u64| {
        temp(name, &run_report(rps, p99))
            .to_str()
            .unwrap()
            .to_string()
    };
    let base = [
        file("m-b1.json", 100_000.0, 1_000),
        file("m-b2.json", 90_000.0, 1_100),
        file("m-b3.json", 95_000.0, 1_050),
    ];
    let same = [
        file("m-s1.json", 98_000.0, 1_020),
        file("m-s2.json", 92_000.0, 1_080),
        file("m-s3.json", 96_000.0, 1_000),
    ];
    let slower = [
        file("m-w1.json", 70_000.0, 1_500),
        file("m-w2.json", 66_000.0, 1_600),
        file("m-w3.json", 68_000.0, 1_550),
    ];
    let compare = |new: &[String], extra: &[&str]| {
        let mut args = vec!["compare", "--base"];
        args.extend(base.iter().map(String::as_str));
        args.push("--new");
        args.extend(new.iter().map(String::as_str));
        args.extend(extra);
        tailscope(&args)
    };
    // The plain figures are the geometric means: (100 000·90 000·95 000)^⅓ = 94 912.
    let out = compare(&same, &["--point"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| req/s | 94912 | 95300 | +0.4 % |"),
        "{table}"
    );
    let out = compare(&same, &["--fail-if-regression", "5%"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("- req/s +0.4 % ("), "{stdout}");
    assert!(stdout.contains("within noise"), "{stdout}");
    let out = compare(&slower, &["--fail-if-regression", "5%"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("regression: req/s −28.")
            && stderr.contains("significant, beyond the 5 % limit")
            && stderr.contains("regression: p99 +"),
        "{stderr}"
    );
    // One run against several cannot be judged by runs: the gate fails closed.
    let out = tailscope(&[
        "compare",
        "--base",
        &base[0],
        "--new",
        &same[0],
        &same[1],
        "--fail-if-regression",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("cannot judge (1 base and 2 new runs")
            && stderr.contains("give at least 2 runs per side"),
        "{stderr}"
    );
}
