//! End-to-end tests of request mixes (issue 21): `--load FILE.toml`, `--urls-from-file`,
//! `--url-order`, figures per request name and thresholds on one of them, on both engines.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::{engine_tests, n, spawn_serve, tailscope, Engine};

/// A file in a directory of the test's own.
fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mix-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// What a [`Recorder`] saw: each request's line (`GET /a`) and body, in order.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A server that answers every request `200 ok` and keeps each one's request line and
/// body: what was sent, in the order it arrived (pipelined requests are parsed in turn).
struct Recorder {
    url: String,
    seen: Seen,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || Recorder::serve(conn, &s));
            }
        });
        Recorder { url, seen }
    }

    fn serve(mut conn: TcpStream, seen: &Mutex<Vec<(String, Vec<u8>)>>) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let got = match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(k) => k,
            };
            buf.extend_from_slice(&chunk[..got]);
            let mut out = Vec::new();
            while let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let body_len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                let end = head_end + 4 + body_len;
                if buf.len() < end {
                    break;
                }
                let line = head.lines().next().unwrap_or("").to_string();
                let body = buf[head_end + 4..end].to_vec();
                let line = line.trim_end_matches(" HTTP/1.1").to_string();
                seen.lock().unwrap().push((line, body));
                buf.drain(..end);
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
            if !out.is_empty() && conn.write_all(&out).is_err() {
                return;
            }
        }
    }

    /// The request lines seen (`GET /a`), in order.
    fn lines(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(l, _)| l.clone())
            .collect()
    }
}

const MIX: &str = r#"
[[request]]
name = "plaintext"
path = "/plaintext"
weight = 7

[[request]]
name = "json"
path = "/json"
weight = 2

[[request]]
name = "delay"
path = "/delay/5"
weight = 1
"#;

/// The done-when test: 7:2:1 of /plaintext, /json and /delay/5 against the reference
/// server sends each its weight's share (within 2 %), and each one's p50 in the mix is the
/// p50 it has alone. "The same" is loose enough for a loaded 2-core machine: within a
/// factor of two plus a millisecond, which still tells 5 ms from tens of microseconds.
fn a_weighted_mix_keeps_its_weights_and_each_endpoint_its_latency(e: Engine) {
    let Some((mut server, addr)) = spawn_serve(&[]) else {
        return;
    };
    let base = format!("http://{addr}");
    let load = file(e.name(), "mix.toml", MIX);
    let common = ["-c", "8", "--threads", "1", "--no-tui"];
    let mut args = vec!["--load", load.to_str().unwrap(), "-n", "6000"];
    args.extend_from_slice(&common);
    let (code, r, stderr) = e.run_json(&base, &args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["requests"]), 6000);
    let by = &r["by_request"];
    let total: u64 = ["plaintext", "json", "delay"]
        .iter()
        .map(|k| n(&by[k]["requests"]))
        .sum();
    assert_eq!(total, 6000, "every request is filed under its name: {by}");
    for (name, path, weight) in [
        ("plaintext", "/plaintext", 0.7),
        ("json", "/json", 0.2),
        ("delay", "/delay/5", 0.1),
    ] {
        let got = n(&by[name]["requests"]) as f64 / total as f64;
        assert!(
            (got - weight).abs() <= 0.02 * weight,
            "{name}: {got:.4} of the requests, weight {weight}"
        );
        assert_eq!(
            n(&by[name]["status_codes"]["200"]),
            n(&by[name]["requests"])
        );
        assert_eq!(by[name]["target"], path);
        // Its seconds add up to its requests, each dated as one of the run's seconds.
        let seconds = by[name]["timeseries"].as_array().unwrap();
        assert!(!seconds.is_empty(), "{name}: no time series");
        let per_second: u64 = seconds.iter().map(|p| n(&p["requests"])).sum();
        assert_eq!(per_second, n(&by[name]["requests"]), "{name}: {seconds:?}");
        let run_seconds: Vec<&serde_json::Value> = r["timeseries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["t_s"])
            .collect();
        for p in seconds {
            assert!(
                run_seconds.contains(&&p["t_s"]),
                "{name}: {p} not a second of the run"
            );
        }
        let mut alone_args = vec!["-n", "1500"];
        alone_args.extend_from_slice(&common);
        let (code, alone, stderr) = e.run_json(&format!("{base}{path}"), &alone_args);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            alone.get("by_request").is_none(),
            "a single URL has no by_request"
        );
        let mixed = n(&by[name]["latency_us"]["p50"]) as f64;
        let single = n(&alone["latency_us"]["p50"]) as f64;
        assert!(
            mixed <= 2.0 * single + 1_000.0 && single <= 2.0 * mixed + 1_000.0,
            "{name}: p50 {mixed} µs in the mix, {single} µs alone"
        );
    }
    assert!(n(&by["delay"]["latency_us"]["p50"]) >= 5_000);
    // The slowest requests carry their name (which ones they are depends on the machine:
    // the first requests, which waited for their connects, may be among them).
    let slowest = r["slowest"].as_array().unwrap();
    assert!(!slowest.is_empty());
    for s in slowest {
        let name = s["request"].as_str().unwrap_or_else(|| panic!("{s}"));
        assert!(by.get(name).is_some(), "{name}");
    }
    assert!(stderr.contains("% of the 10 slowest were "), "{stderr}");
    // The same as data: which requests the slowest were, the commonest first.
    let shares = r["slowest_by_request"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(!shares.is_empty());
    let named: u64 = shares.iter().map(|s| n(&s["slow"])).sum();
    assert_eq!(named, slowest.len() as u64, "{shares:?}");
    assert!(shares
        .windows(2)
        .all(|w| n(&w[0]["slow"]) >= n(&w[1]["slow"])));
    for s in shares {
        assert!(by.get(s["name"].as_str().unwrap()).is_some(), "{s}");
        assert_eq!(n(&s["of"]), slowest.len() as u64);
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A list of 1,000 URLs is cycled: -n 3000 sends each line three times, in the file's
/// order, pipelined; in random order the counts are the same and the order is not the
/// file's.
fn a_url_file_of_a_thousand_lines_is_cycled(e: Engine) {
    let server = Recorder::start();
    let text: String = (0..1000)
        .map(|i| format!("{}/item?id={i}\n", server.url))
        .collect();
    let urls = file(e.name(), "urls.txt", &text);
    let urls = urls.to_str().unwrap();
    let args = [
        "run",
        "--urls-from-file",
        urls,
        "-n",
        "3000",
        "-c",
        "1",
        "--threads",
        "1",
        "--pipeline",
        "4",
        "--no-tui",
        "--json",
        "-",
    ];
    let out = e.tailscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by = r["by_request"].as_object().unwrap();
    assert_eq!(by.len(), 1000);
    assert!(
        by.values().all(|v| n(&v["requests"]) == 3),
        "each line thrice"
    );
    let lines = server.lines();
    assert_eq!(lines.len(), 3000);
    for i in [0, 1, 500, 999] {
        let line = format!("GET /item?id={i}");
        assert_eq!(lines.iter().filter(|l| **l == line).count(), 3, "{line}");
    }
    // One connection: they arrive in the order sent, the file's, cycled.
    let ids: Vec<usize> = lines
        .iter()
        .map(|l| l.rsplit('=').next().unwrap().parse().unwrap())
        .collect();
    let in_file_order = ids.windows(2).filter(|w| w[1] == (w[0] + 1) % 1000).count();
    assert_eq!(in_file_order, 2999, "every step follows the file");

    let random = Recorder::start();
    let text: String = (0..1000)
        .map(|i| format!("{}/item?id={i}\n", random.url))
        .collect();
    let urls = file(e.name(), "urls-random.txt", &text);
    let mut args = args.to_vec();
    args[2] = urls.to_str().unwrap();
    args.extend_from_slice(&["--url-order", "random"]);
    let out = e.tailscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = random.lines();
    assert_eq!(lines.len(), 3000);
    let mut counts = std::collections::HashMap::new();
    for l in &lines {
        *counts.entry(l.clone()).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 1000);
    assert!(counts.values().all(|&k| k == 3));
    let ids: Vec<usize> = lines
        .iter()
        .map(|l| l.rsplit('=').next().unwrap().parse().unwrap())
        .collect();
    let in_file_order = ids.windows(2).filter(|w| w[1] == (w[0] + 1) % 1000).count();
    assert!(
        in_file_order < 100,
        "{in_file_order} steps follow the file: not shuffled"
    );
}

/// A threshold on one endpoint fails on its own figures: p50[delay] fails while
/// p50[plaintext] holds, and the run exits 99.
fn a_threshold_on_one_endpoint_fails_alone(e: Engine) {
    let Some((mut server, addr)) = spawn_serve(&[]) else {
        return;
    };
    let load = file(e.name(), "mix.toml", MIX);
    let html = load.with_file_name("threshold.html");
    let (code, r, stderr) = e.run_json(
        &format!("http://{addr}"),
        &[
            "--html",
            html.to_str().unwrap(),
            "--load",
            load.to_str().unwrap(),
            "-n",
            "1000",
            "-c",
            "4",
            "--threads",
            "1",
            "--fail-if",
            "p50[delay] < 3ms",
            "--fail-if",
            "p50[plaintext] < 3ms",
            "--fail-if",
            "error_rate[json] < 1%",
        ],
    );
    assert_eq!(code, 99, "{stderr}");
    assert!(
        stderr.contains("threshold FAILED: p50[delay] < 3ms"),
        "{stderr}"
    );
    assert!(
        stderr.contains("threshold ok: p50[plaintext] < 3ms"),
        "{stderr}"
    );
    assert!(
        stderr.contains("threshold ok: error_rate[json] < 1%"),
        "{stderr}"
    );
    assert!(n(&r["by_request"]["delay"]["latency_us"]["p50"]) >= 3_000);
    // The HTML report has the table per request too.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>By request</h2>"), "no table by request");
    assert!(page.contains("GET /delay/5"));
    server.kill().unwrap();
    server.wait().unwrap();
}

engine_tests!(
    a_weighted_mix_keeps_its_weights_and_each_endpoint_its_latency,
    a_url_file_of_a_thousand_lines_is_cycled,
    a_threshold_on_one_endpoint_fails_alone,
    placeholders_produce_distinct_values,
);

/// Bad inputs exit 2 before anything is sent, naming the file and line, or the name.
#[test]
fn bad_files_and_unknown_names_exit_2_before_anything_is_sent() {
    let server = Recorder::start();
    let ok = file(
        "bad",
        "ok.toml",
        "[[request]]\nname = \"a\"\npath = \"/a\"\n",
    );
    let ok = ok.to_str().unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec![
                "--load".into(),
                file(
                    "bad",
                    "w.toml",
                    "[[request]]\npath = \"/a\"\n\n[[request]]\npath = \"/b\"\nweight = 0\n",
                )
                .display()
                .to_string(),
            ],
            "w.toml:6: weight must be 1..=".into(),
        ),
        (
            vec![
                "--urls-from-file".into(),
                file("bad", "u.txt", "/a\n\nnot a request line\n")
                    .display()
                    .to_string(),
            ],
            "u.txt:3: \"not a request line\" is not a request".into(),
        ),
        (
            vec![
                "--urls-from-file".into(),
                file("bad", "h.txt", "/a\nno colon here\n")
                    .display()
                    .to_string(),
            ],
            "h.txt:2: header \"no colon here\" has no ':'".into(),
        ),
        (
            vec![
                "--load".into(),
                ok.into(),
                "--fail-if".into(),
                "p99[b] < 1ms".into(),
            ],
            "no request is named \"b\": the mix's requests are a".into(),
        ),
        (
            vec!["--fail-if".into(), "p99[a] < 1ms".into()],
            "the run sends a single request".into(),
        ),
        (
            vec!["--url-order".into(), "random".into()],
            "--url-order orders a mix".into(),
        ),
        // A list's credentials the run's URL does not carry would be dropped.
        (
            vec![
                "--urls-from-file".into(),
                file(
                    "bad",
                    "creds.txt",
                    &format!("{}/a\n", server.url.replace("://", "://u:s3cret@")),
                )
                .display()
                .to_string(),
            ],
            "creds.txt:1: its URLs carry credentials (user:password@) other than the run's URL's"
                .into(),
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", server.url.as_str(), "-n", "10", "--no-tui"];
        args.extend(extra.iter().map(String::as_str));
        let out = tailscope(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{args:?}: {stderr}");
    }
    assert!(server.lines().is_empty(), "nothing was sent");
}

/// Placeholders get a new value in every request: `{seq}` unique over threads and
/// connections, `{rand:A..B}` within its range, `{uuid}` unique, in the path, a header and
/// a body (whose Content-Length stays right), pipelined.
fn placeholders_produce_distinct_values(e: Engine) {
    let server = Recorder::start();
    let load = file(
        e.name(),
        "placeholders.toml",
        r#"
[[request]]
name = "item"
path = "/item/{seq}?r={rand:1..1000}"
headers = ["X-Id: {uuid}"]

[[request]]
name = "post"
method = "POST"
path = "/post"
body = '{"n": "{seq}", "id": "{uuid}"}'
"#,
    );
    let out = e.tailscope(&[
        "run",
        &server.url,
        "--load",
        load.to_str().unwrap(),
        "-n",
        "2000",
        "-c",
        "4",
        "--threads",
        "2",
        "--pipeline",
        "4",
        "--no-tui",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2000);
    let mut seqs = std::collections::HashSet::new();
    let mut uuids = std::collections::HashSet::new();
    let mut rands = std::collections::HashSet::new();
    for (line, body) in &seen {
        if let Some(rest) = line.strip_prefix("GET /item/") {
            let (seq, r) = rest.split_once("?r=").unwrap();
            assert_eq!(seq.len(), 10, "{line}");
            assert!(
                seqs.insert(seq.parse::<u64>().unwrap()),
                "{line}: seq repeated"
            );
            assert_eq!(r.len(), 4, "{line}");
            let r: u64 = r.parse().unwrap();
            assert!((1..=1000).contains(&r), "{line}");
            rands.insert(r);
        } else {
            assert_eq!(line, "POST /post");
            let body: serde_json::Value = serde_json::from_slice(body)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
            // Zero-padded to its width: a JSON number may not be, so it is quoted.
            let n = body["n"].as_str().unwrap().parse::<u64>().unwrap();
            assert!(seqs.insert(n), "{body}: seq repeated");
            let id = body["id"].as_str().unwrap().to_string();
            assert_eq!(id.len(), 36);
            assert!(uuids.insert(id), "uuid repeated");
        }
    }
    assert_eq!(seqs.len(), 2000, "every {{seq}} distinct");
    assert_eq!(uuids.len(), 1000, "every body {{uuid}} distinct");
    assert!(
        rands.len() > 500,
        "{} distinct {{rand}} of 1000 draws",
        rands.len()
    );
}

/// The README's examples are files that parse.
#[test]
fn the_examples_parse() {
    use tailscope_report::mix_files as files;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mix = files::read_load_file(&root.join("examples/mix.toml")).unwrap();
    let names: Vec<&str> = mix.requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["plaintext", "json", "delay"]);
    let urls = files::read_url_file(&root.join("examples/urls.txt")).unwrap();
    assert_eq!(urls.requests.len(), 3);
    assert_eq!(
        urls.requests[2].headers,
        [("X-Request-Id".to_string(), "42".to_string())]
    );
}

/// A suite's endpoint that is a mix has its figures per name: in each run, as medians over
/// the runs, and in a markdown table of its own.
#[test]
fn a_suite_endpoint_that_is_a_mix_has_figures_per_name() {
    let mix = file("suite", "mix.toml", MIX);
    let suite = file(
        "suite",
        "suite.toml",
        r#"
[load]
connections = 4
duration = "1s"
warmup = "0s"
runs = 2
[[target]]
name = "reference"
kind = "embedded"
threads = 1
[[endpoint]]
load = "mix.toml"
"#,
    );
    let dir = mix.parent().unwrap();
    let markdown = dir.join("suite.md");
    let out = tailscope(&[
        "suite",
        suite.to_str().unwrap(),
        "--json",
        dir.join("suite.json").to_str().unwrap(),
        "--markdown",
        markdown.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("suite.json")).unwrap()).unwrap();
    let result = &r["results"][0];
    let runs = result["runs"].as_array().unwrap();
    // Every name is in every run (a loaded machine may send few requests in a second, so a
    // name's count may be 0 in one run), and the result adds the runs up.
    for name in ["plaintext", "json", "delay"] {
        let per_run: u64 = runs
            .iter()
            .map(|run| n(&run["by_request"][name]["requests"]))
            .sum();
        assert_eq!(
            n(&result["by_request"][name]["requests"]),
            per_run,
            "{name}: {result}"
        );
    }
    for run in runs {
        let named: u64 = ["plaintext", "json", "delay"]
            .iter()
            .map(|k| n(&run["by_request"][k]["requests"]))
            .sum();
        assert!(named > 0 && named <= n(&run["requests"]), "{run}");
    }
    let plaintext = &result["by_request"]["plaintext"];
    assert!(n(&plaintext["requests"]) > 0, "{result}");
    assert!(
        plaintext["p99_us_median"].as_f64().unwrap() > 0.0,
        "{result}"
    );
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("per request:"), "{md}");
    assert!(md.contains("| delay | "), "{md}");
}
