//! The HTML report: `run --html` and `report FILE.json --html`, opened in headless Chromium.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ok, serve, tailscope, Reply};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `tailscope run ARGS`, which must exit 0; its stderr.
fn run_ok(args: &[&str]) -> String {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    let out = tailscope(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    stderr
}

/// A 2 s run against a server that answers most requests at once and every 50th after 20 ms,
/// written as JSON and HTML.
fn a_run() -> (serde_json::Value, String, PathBuf) {
    let server = serve(|i| {
        if i % 50 == 0 {
            Reply::Delay(std::time::Duration::from_millis(20), ok("slow"))
        } else {
            Reply::Send(ok("Hello, World!"))
        }
    });
    let json = scratch("run.json");
    let html = scratch("run.html");
    run_ok(&[
        &server.url("/"),
        "-c",
        "4",
        "-z",
        "2s",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (report, std::fs::read_to_string(&html).unwrap(), json)
}

/// `tailscope report JSON --html NAME`, which must make `page` again from the saved JSON.
fn the_same_page_from(json: &Path, name: &str, page: &str) -> PathBuf {
    let again = scratch(name);
    let out = tailscope(&[
        "report",
        json.to_str().unwrap(),
        "--html",
        again.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page);
    again
}

fn points(page: &str, chart: &str) -> usize {
    let marker = format!("data-chart=\"{chart}\" data-points=\"");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no chart {chart}"));
    page[at + marker.len()..]
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn fetches_nothing(page: &str) {
    for needle in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "@import",
        "<script",
        "<link",
    ] {
        assert!(!page.contains(needle), "the page would fetch: {needle}");
    }
}

#[test]
fn a_run_report_is_a_self_contained_page_with_every_chart_drawn() {
    let (report, page, json) = a_run();
    fetches_nothing(&page);
    for chart in [
        "throughput",
        "latency-over-time",
        "percentile-spectrum",
        "histogram",
        "cpu-busy",
        "errors-over-time",
    ] {
        assert!(points(&page, chart) > 0, "{chart} has data points");
    }
    let requests = report["summary"]["requests"].as_u64().unwrap();
    let shown = tailscope_report::document::fmt_count(requests);
    assert!(
        page.contains(&format!(
            "<div class=\"v\">{shown}</div><div class=\"k\">requests</div>"
        )),
        "the header's request count is the JSON's ({shown})"
    );
    let again = the_same_page_from(&json, "again.html", &page);
    in_chromium(
        &again,
        "run",
        &[
            ("throughput", "<polyline"),
            ("latency-over-time", "<polyline"),
            ("percentile-spectrum", "<polyline"),
        ],
    );
}

/// Opens the page in headless Chromium: the DOM it built has each of `charts` as an SVG with
/// its drawing (`element`: `<polyline` for lines, `<rect` for bars), and a screenshot is kept
/// as an artefact.
fn in_chromium(page: &Path, name: &str, charts: &[(&str, &str)]) {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        common::skip("chromium not installed (apt-get install chromium)");
        return;
    };
    let profile = scratch(&format!("chromium-{name}"));
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let url = format!("file://{}", page.display());
    let dom = Command::new(chromium)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<figure"), "Chromium built the page: {dom}");
    for (chart, element) in charts {
        let at = dom.find(&format!("data-chart=\"{chart}\"")).unwrap();
        let figure = &dom[at..at + dom[at..].find("</figure>").unwrap()];
        assert!(figure.contains("<svg"), "{chart} is an SVG in the DOM");
        assert!(
            figure.contains(element),
            "{chart} has its drawing ({element}) in the DOM"
        );
    }
    let shot = scratch(&format!("{name}.png"));
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(chromium)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--window-size=1000,3200"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "screenshot written: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("screenshot of the {name} report: {}", shot.display());
}

/// The cells of the table row whose first cell is `first`.
fn row<'a>(page: &'a str, first: &str) -> Vec<&'a str> {
    let start = format!("<tr><td>{first}</td>");
    let at = page
        .find(&start)
        .unwrap_or_else(|| panic!("no row {first}"));
    let row = &page[at..at + page[at..].find("</tr>").unwrap()];
    row.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            &c[..c.find("</td>").unwrap()]
        })
        .collect()
}

const TWO_SERVERS: &str = r#"
[suite]
baseline = "one-thread"
[load]
connections = 4
duration = "300ms"
warmup = "0s"
runs = 3
[[target]]
name = "one-thread"
kind = "embedded"
threads = 1
[[target]]
name = "stalling"
kind = "embedded"
threads = 1
stall_every = "100ms"
stall_for = "20ms"
[[endpoint]]
path = "/plaintext"
"#;

#[test]
fn a_suite_page_shows_the_figures_of_its_json() {
    let file = scratch("two.toml");
    std::fs::write(&file, TWO_SERVERS).unwrap();
    let json = scratch("suite.json");
    let html = scratch("suite.html");
    let Some(_) = common::ok_unless_no_uring(&[
        "suite",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]) else {
        return;
    };
    let page = std::fs::read_to_string(&html).unwrap();
    fetches_nothing(&page);
    let suite: tailscope_report::suite::SuiteReport =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        points(&page, "suite-rps"),
        2,
        "a bar per target and endpoint"
    );
    assert_eq!(points(&page, "suite-p99"), 2);
    use tailscope_report::document::{fmt_rate, fmt_us};
    for r in &suite.results {
        let cells = row(&page, &r.target);
        assert_eq!(cells[1], r.endpoint);
        assert_eq!(cells[2], fmt_rate(r.rps_median.unwrap()), "{cells:?}");
        assert_eq!(
            cells[3],
            format!(
                "{} – {}",
                fmt_rate(r.rps_min.unwrap()),
                fmt_rate(r.rps_max.unwrap())
            )
        );
        // Three runs: the medians alone (an interval needs 6); the ratio with its interval
        // from the rounds' paired runs (the baseline's own is 1.00×, without one).
        assert_eq!(cells[5], fmt_us(r.p95_us_median.unwrap().round() as u64));
        assert_eq!(cells[6], fmt_us(r.p99_us_median.unwrap().round() as u64));
        assert_eq!(
            cells[8],
            tailscope_report::suite::rounds::ratio_text(
                r.vs_baseline,
                r.vs_baseline_ci95,
                r.vs_baseline_medians,
            )
        );
        assert_eq!(r.vs_baseline_ci95.is_none(), r.target == "one-thread");
        // Each run's own row, in its table.
        for (i, run) in r.runs.iter().enumerate() {
            assert!(
                page.contains(&format!(
                    "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                    i + 1,
                    fmt_rate(run.rps)
                )),
                "run {} of {}",
                i + 1,
                r.target
            );
        }
    }
    let again = the_same_page_from(&json, "suite-again.html", &page);
    in_chromium(
        &again,
        "suite",
        &[("suite-rps", "<rect"), ("suite-p99", "<rect")],
    );
}

#[test]
fn a_compare_page_draws_both_spectra_and_the_change_table() {
    let server = serve(|i| {
        if i % 30 == 0 {
            Reply::Delay(std::time::Duration::from_millis(10), ok("slow"))
        } else {
            Reply::Send(ok("Hello, World!"))
        }
    });
    let base = scratch("base.json");
    let new = scratch("new.json");
    for (json, c) in [(&base, "2"), (&new, "4")] {
        run_ok(&[
            &server.url("/"),
            "-c",
            c,
            "-z",
            "1s",
            "--json",
            json.to_str().unwrap(),
        ]);
    }
    let html = scratch("compare.html");
    let out = tailscope(&[
        "compare",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    fetches_nothing(&page);
    let read = |p: &Path| -> tailscope_report::document::Report {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (b, n) = (read(&base), read(&new));
    assert!(
        points(&page, "compare-spectrum") > 10,
        "both spectra have points"
    );
    assert!(page.contains(&format!("base: {}", base.display())));
    assert!(page.contains(&format!("new: {}", new.display())));
    use tailscope_report::document::fmt_us;
    let p99 = row(&page, "p99");
    assert_eq!(p99[1], fmt_us(b.latency_us.unwrap().p99));
    assert_eq!(p99[2], fmt_us(n.latency_us.unwrap().p99));
    let rps = row(&page, "req/s");
    assert_eq!(rps[1], format!("{:.0}", b.summary.rps));
    assert_eq!(rps[2], format!("{:.0}", n.summary.rps));
    assert_eq!(
        rps[3],
        format!(
            "{:+.1} %",
            (n.summary.rps - b.summary.rps) / b.summary.rps * 100.0
        )
    );
    // The same rows as the markdown table on stdout.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("| p99 | {} | {} |", p99[1], p99[2])),
        "{stdout}"
    );
    // Refused before anything is read: '-' is no page.
    let out = tailscope(&[
        "compare",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "--html",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(2));
    in_chromium(&html, "compare", &[("compare-spectrum", "<polyline")]);
}

#[test]
fn report_refuses_what_is_not_a_run_report() {
    let junk = scratch("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let out = tailscope(&["report", junk.to_str().unwrap(), "--html", "/tmp/x.html"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not JSON"));
    let suite = scratch("suite.json");
    std::fs::write(
        &suite,
        r#"{"schema_version":1,"kind":"suite","results":[]}"#,
    )
    .unwrap();
    let out = tailscope(&["report", suite.to_str().unwrap(), "--html", "/tmp/x.html"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("suite report"));
    let out = tailscope(&["report", "/nonexistent.json", "--html", "/tmp/x.html"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unfinished_requests_show_as_lower_bounds_on_the_page() {
    // Every third request is never answered: the connections end the run waiting.
    let server = serve(|i| {
        if i % 3 == 2 {
            Reply::Hang
        } else {
            Reply::Send(ok("x"))
        }
    });
    let html = scratch("unfinished.html");
    run_ok(&[
        &server.url("/"),
        "-c",
        "2",
        "-z",
        "1s",
        "-t",
        "60s",
        "--html",
        html.to_str().unwrap(),
    ]);
    let page = std::fs::read_to_string(&html).unwrap();
    fetches_nothing(&page);
    assert!(page.contains("data-kpi=\"unfinished\""), "the KPI is there");
    assert!(
        page.contains("<td>unfinished</td>"),
        "the slowest list says so"
    );
    assert!(
        page.contains("<div class=\"v\">≥ "),
        "a key figure is marked as a lower bound"
    );
}

#[test]
fn the_hdr_log_reads_back_with_the_same_counts_and_percentiles() {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    let server = serve(|i| {
        if i % 40 == 0 {
            Reply::Delay(std::time::Duration::from_millis(15), ok("slow"))
        } else {
            Reply::Send(ok("x"))
        }
    });
    let json = scratch("hdr.json");
    let log = scratch("run.hlog");
    let page = scratch("hdr.html");
    let stderr = run_ok(&[
        &server.url("/"),
        "-c",
        "4",
        "-z",
        "2s",
        "--json",
        json.to_str().unwrap(),
        "--hdr-log",
        log.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    // Every file written is announced, not the HTML page alone.
    for file in [&json, &log, &page] {
        let said = format!("tailscope: wrote {}", file.display());
        assert!(stderr.contains(&said), "{said:?} in {stderr}");
    }
    let report: tailscope_report::document::Report =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let whole = tailscope_report::document::decode_histogram(&report.histogram).unwrap();
    let text = std::fs::read(&log).unwrap();
    assert!(String::from_utf8_lossy(&text).contains("#[StartTime: "));
    let mut merged = hdrhistogram::Histogram::<u64>::new_from(&whole);
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(&text) {
        if let LogEntry::Interval(h) = entry.expect("a well-formed interval log") {
            let bytes = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                h.encoded_histogram(),
            )
            .unwrap();
            let interval: hdrhistogram::Histogram<u64> = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .unwrap();
            merged.add(&interval).unwrap();
            intervals += 1;
        }
    }
    assert!(intervals >= 2, "one histogram a second: {intervals}");
    assert_eq!(merged.len(), whole.len(), "the same count as the JSON");
    for q in [0.5, 0.99, 0.999, 1.0] {
        assert_eq!(
            merged.value_at_quantile(q),
            whole.value_at_quantile(q),
            "quantile {q}"
        );
    }
}

/// A compared run whose generator fell behind (its report's warning, as `run` writes it) is
/// named by side and file in the comparison's text, JSON and page: that side's figures, and
/// so the changes, are partly the generator's own delay. The other side's report is a real
/// run's; the lagged one is the same run with the warning a held-up loop gets (a real lag
/// needs busy loops on the generator's CPU: tests/late_cause.rs, alone in its binary).
#[test]
fn a_compare_names_the_side_whose_generator_fell_behind() {
    let server = serve(|_| Reply::Send(ok("Hello, World!")));
    let base = scratch("lag-base.json");
    let new = scratch("lag-new.json");
    run_ok(&[
        &server.url("/"),
        "-c",
        "2",
        "-z",
        "1s",
        "--json",
        base.to_str().unwrap(),
    ]);
    let warning = "the generator fell behind: a generator thread's event loop was held up to 867.76ms in one second (generator_lag_us); the latency then includes the generator's own delay (p50 236.00ms corrected, 7.50ms from the actual sends), not only the server's: check that nothing else busy runs on the generator's CPUs (top; --cpus apart from the server's), or give it fewer connections (-c) or more threads (--threads)";
    let mut lagged = common::read_json(&base);
    lagged["warnings"] = serde_json::json!([warning]);
    std::fs::write(&new, serde_json::to_string(&lagged).unwrap()).unwrap();
    let (html, json) = (scratch("lag-compare.html"), scratch("lag-compare.json"));
    let out = tailscope(&[
        "compare",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("**The generator could not keep up** in a compared run")
            && stdout.contains(&format!("- new ({}): {warning}\n", new.display())),
        "{stdout}"
    );
    let doc = common::read_json(&json);
    let carried = doc["generator_warnings"].as_array().unwrap();
    let of = |side: &str| -> Vec<&serde_json::Value> {
        carried.iter().filter(|w| w["side"] == side).collect()
    };
    assert_eq!(of("new").len(), 1, "{doc}");
    assert_eq!(of("new")[0]["warning"], warning);
    // The real base run may have a warning of its own generator (a loaded machine: time
    // lost between requests): carried as it is, never made up.
    let base_warnings = common::read_json(&base)["warnings"].clone();
    for w in of("base") {
        assert!(
            base_warnings.as_array().unwrap().contains(&w["warning"]),
            "{w} is not the base run's: {base_warnings}"
        );
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<li>new (")
            && page.contains("the generator fell behind: a generator thread&#39;s event loop"),
        "{page}"
    );
    // Both sides without a warning: nothing said.
    let clean = scratch("lag-clean.json");
    lagged["warnings"] = serde_json::json!([]);
    std::fs::write(&clean, serde_json::to_string(&lagged).unwrap()).unwrap();
    let out = tailscope(&["compare", clean.to_str().unwrap(), clean.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("could not keep up"));
}

/// A report whose histogram was overwritten is refused by `report`, `compare` and `merge`
/// alike (exit 2, naming the field), not drawn as empty charts.
#[test]
fn a_damaged_histogram_is_refused_naming_its_field() {
    let server = serve(|_| Reply::Send(ok("x")));
    let good = scratch("undamaged.json");
    run_ok(&[
        &server.url("/"),
        "-n",
        "200",
        "-c",
        "2",
        "--json",
        good.to_str().unwrap(),
    ]);
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    report["histogram"]["data"] = "AAAAAAAA".into();
    let bad = scratch("damaged.json");
    std::fs::write(&bad, report.to_string()).unwrap();
    let (bad, good) = (bad.to_str().unwrap(), good.to_str().unwrap());
    let page = scratch("damaged.html");
    let _ = std::fs::remove_file(&page);
    for args in [
        &["report", bad, "--html", page.to_str().unwrap()][..],
        &["compare", good, bad],
        &["compare", bad, good],
        &["merge", bad, "--force"],
    ] {
        let out = tailscope(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{bad} is a damaged run report: its histogram.data cannot be decoded"
            )),
            "{args:?}: {stderr}"
        );
    }
    assert!(!page.exists(), "no page of a damaged report");
}
