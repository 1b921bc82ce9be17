//! Suite files parsed: the documented example, mixes, and errors that name their line.

use super::*;
use tailscope_loadgen::Stop;

const GOOD: &str = r#"
[suite]
baseline = "nginx"
[load]
connections = 64
duration = "10s"
warmup = "3s"
runs = 3
[[target]]
name = "reference"
kind = "embedded"
threads = 1
[[target]]
name = "nginx"
kind = "nginx"
workers = 1
[[target]]
name = "mine"
kind = "command"
command = "./my-server --port {port}"
[[endpoint]]
path = "/plaintext"
"#;

#[test]
fn the_documented_example_parses() {
    let s = parse(Path::new("s.toml"), GOOD).unwrap();
    assert_eq!(s.baseline.as_deref(), Some("nginx"));
    assert_eq!(s.load.runs, 3);
    assert_eq!(s.load.duration, Duration::from_secs(10));
    assert_eq!(s.targets.len(), 3);
    assert_eq!(s.targets[2].1.kind(), "command");
    assert_eq!(s.endpoints, vec!["/plaintext"]);
    assert!(!s.targets[1].1.tls());
    let tls = parse(
        Path::new("s.toml"),
        &GOOD.replace("workers = 1", "workers = 1\ntls = true"),
    )
    .unwrap();
    assert!(tls.targets[1].1.tls(), "{:?}", tls.targets[1]);
    assert_eq!(s.streams["nginx"], 1);
    let h2 = parse(
        Path::new("s.toml"),
        &GOOD.replace("workers = 1", "workers = 1\nhttp2 = true\nstreams = 16"),
    )
    .unwrap();
    assert!(h2.targets[1].1.http2());
    assert_eq!(h2.streams["nginx"], 16);
    for (bad, why) in [
        ("streams = 16", "add http2 = true"),
        ("http2 = true\nstreams = 0", "out of range"),
    ] {
        let e = parse(
            Path::new("s.toml"),
            &GOOD.replace("workers = 1", &format!("workers = 1\n{bad}")),
        )
        .unwrap_err();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn an_endpoint_may_be_a_request_mix() {
    let dir = std::env::temp_dir().join(format!("ts-suite-mix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mix.toml"),
        "order = \"random\"\n[[request]]\npath = \"/json\"\nweight = 3\n[[request]]\npath = \"/plaintext\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("with-url.toml"),
        "url = \"http://u:s3cret@h:1\"\n[[request]]\npath = \"/a\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("with-stages.toml"),
        "stages = \"1s:100\"\n[[request]]\npath = \"/a\"\n",
    )
    .unwrap();
    let suite_file = dir.join("s.toml");
    let text = format!("{GOOD}[[endpoint]]\nload = \"mix.toml\"\n");
    let s = parse(&suite_file, &text).unwrap();
    assert_eq!(s.endpoints, vec!["/plaintext", "mix:mix.toml"]);
    let plan = s
        .plan(
            "mix:mix.toml",
            "http://127.0.0.1:9",
            &[0],
            Stop::Duration(Duration::from_secs(1)),
        )
        .unwrap();
    assert_eq!(plan.request_names(), ["GET /json", "GET /plaintext"]);
    assert_eq!(plan.order, Order::Random);
    assert!(!s
        .plan(
            "/plaintext",
            "http://127.0.0.1:9",
            &[0],
            Stop::Duration(Duration::from_secs(1))
        )
        .unwrap()
        .has_mix());
    for (endpoint, needle) in [
        ("load = \"missing.toml\"", "s.toml:24: "),
        ("load = \"with-url.toml\"", "leave the url out"),
        // Else silently ignored: the suite's stages are its [load]'s.
        ("load = \"with-stages.toml\"", "move them there"),
        ("path = \"/a\"\nload = \"mix.toml\"", "not both"),
    ] {
        let text = format!("{GOOD}[[endpoint]]\n{endpoint}\n");
        let err = parse(&suite_file, &text).unwrap_err();
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let cases = [
        (
            GOOD.replace("duration = \"10s\"", "duration = \"ten\""),
            "s.toml:6:",
            "ten",
        ),
        (
            GOOD.replace("baseline = \"nginx\"", "baseline = \"apache\""),
            "s.toml:3:",
            "not a target",
        ),
        (
            GOOD.replace("kind = \"nginx\"", "kind = \"apache\""),
            "s.toml:15:",
            "unknown kind",
        ),
        (
            GOOD.replace("--port {port}", "--port 80"),
            "s.toml:20:",
            "{port}",
        ),
        (
            GOOD.replace("runs = 3", "runs = 0"),
            "s.toml:8:",
            "runs = 0 is out of range: give 1..=1000",
        ),
        (
            GOOD.replace("connections = 64", "connections = 0"),
            "s.toml:5:",
            "1..=1000000",
        ),
        (
            GOOD.replace("connections = 64", "connections = -1"),
            "s.toml:5:",
            "connections = -1 is out of range: give 1..=1000000",
        ),
        (
            GOOD.replace("workers = 1", "workers = -2"),
            "s.toml:16:",
            "workers = -2 is out of range: give 1..=",
        ),
        (
            GOOD.replace("connections = 64", "connections = 64\nrate = 1e-20"),
            "s.toml:6:",
            "rate = 0.00000000000000000001 is out of range",
        ),
        (
            GOOD.replace("duration = \"10s\"", "duration = \"500000000000y\""),
            "s.toml:6:",
            "1ms..=30days",
        ),
        (
            GOOD.replace("workers = 1", "workers = 99999"),
            "s.toml:16:",
            "workers = 99999 is out of range: the number of nginx worker processes must be 1 to 64",
        ),
        (
            GOOD.replace("threads = 1", "threads = 1\ntls = true"),
            "s.toml:13:",
            "tls = true is for nginx targets",
        ),
        (
            GOOD.replace("workers = 1", "wrokers = 1"),
            "line 16",
            "wrokers",
        ),
        (
            GOOD.replace("path = \"/plaintext\"", "path = \"plaintext\""),
            "s.toml:22:",
            "must start",
        ),
    ];
    for (text, line, problem) in cases {
        let err = parse(Path::new("s.toml"), &text).unwrap_err();
        assert!(
            err.contains(line) && err.contains(problem),
            "want {line} {problem}, got: {err}"
        );
    }
    let err = parse(Path::new("s.toml"), "[load]\nruns = 1\n").unwrap_err();
    assert!(err.contains("no [[target]]"), "{err}");
}

#[test]
fn fixed_count_runs_parse_and_bad_counts_are_refused() {
    let counted = GOOD
        .replace("duration = ", "# duration = ")
        .replace("warmup = ", "# warmup = ")
        .replace(
            "runs = 3",
            "runs = 25\nrequests = 2500\nwarmup_requests = 300",
        );
    let s = parse(Path::new("s.toml"), &counted).unwrap();
    assert_eq!(s.load.requests, Some(2500));
    assert_eq!(s.load.runs, 25);
    assert_eq!(s.load.measured_stop(), Stop::Requests(2500));
    assert_eq!(s.load.warmup_stop(), Some(Stop::Requests(300)));
    assert_eq!(
        serde_json::to_value(s.load.report(&[0], &[1])).unwrap()["requests"],
        2500
    );
    for (bad, message) in [
        (
            "requests = 0",
            "requests = 0 is out of range: give 1..=1000000000",
        ),
        ("requests = -5", "requests = -5 is out of range"),
        (
            "warmup_requests = -1",
            "warmup_requests = -1 is out of range",
        ),
        ("requests = \"many\"", "invalid type"),
    ] {
        let text = counted
            .replace("requests = 2500", "")
            .replace("warmup_requests = 300", "")
            .replace("runs = 25", &format!("runs = 25\n{bad}"));
        let err = parse(Path::new("s.toml"), &text).unwrap_err();
        assert!(err.contains(message), "{bad}: {err}");
    }
    let seeded = counted.replace("[suite]", "[suite]\nseed = 42");
    assert_eq!(parse(Path::new("s.toml"), &seeded).unwrap().seed, Some(42));
    let err = parse(
        Path::new("s.toml"),
        &counted.replace("[suite]", "[suite]\nseed = -1"),
    )
    .unwrap_err();
    assert!(err.contains("seed = -1 is out of range"), "{err}");
    // A run is timed or counted, not both.
    let both = GOOD.replace("runs = 3", "runs = 3\nrequests = 2500");
    let err = parse(Path::new("s.toml"), &both).unwrap_err();
    assert!(
        err.contains("s.toml:") && err.contains("requests and duration both given"),
        "{err}"
    );
}

#[test]
fn a_suite_load_may_arrive_as_poisson() {
    let with = |extra: &str| GOOD.replace("runs = 3\n", &format!("runs = 3\n{extra}\n"));
    let s = parse(
        Path::new("s.toml"),
        &with("rate = 500\narrival = \"poisson\""),
    )
    .unwrap();
    assert_eq!(s.load.arrival, tailscope_loadgen::plan::Arrival::Poisson);
    let plan = s
        .load
        .plan(
            "http://127.0.0.1:9/",
            &[0],
            Stop::Duration(Duration::from_secs(1)),
        )
        .unwrap();
    assert_eq!(plan.arrival, tailscope_loadgen::plan::Arrival::Poisson);
    let e = parse(Path::new("s.toml"), &with("arrival = \"poisson\"")).unwrap_err();
    assert!(e.contains("add rate"), "{e}");
    let e = parse(Path::new("s.toml"), &with("rate = 5\narrival = \"foo\"")).unwrap_err();
    assert!(e.contains("uniform or poisson"), "{e}");
}

#[test]
fn a_suite_load_may_follow_stages() {
    let with = |extra: &str| {
        GOOD.replace("duration = \"10s\"\n", "")
            .replace("runs = 3\n", &format!("runs = 3\n{extra}\n"))
    };
    let s = parse(
        Path::new("s.toml"),
        &with("stages = \"2s:1000,3s:4000\"\narrival = \"poisson\""),
    )
    .unwrap();
    assert_eq!(s.load.stages.len(), 2);
    // The measured run follows the stages and lasts their sum, at the highest rate.
    let stop = s.load.measured_stop();
    assert_eq!(stop, Stop::Duration(Duration::from_secs(5)));
    let plan = s.load.plan("http://127.0.0.1:9/", &[0], stop).unwrap();
    assert_eq!(plan.stages, s.load.stages);
    assert_eq!(plan.pace, tailscope_loadgen::Pace::Rate(4000.0));
    assert_eq!(plan.arrival, tailscope_loadgen::plan::Arrival::Poisson);
    // The warm-up holds the first stage's rate, without the stages.
    let warm = s.load.warmup_stop().unwrap();
    let plan = s.load.plan("http://127.0.0.1:9/", &[0], warm).unwrap();
    assert!(plan.stages.is_empty());
    assert_eq!(plan.pace, tailscope_loadgen::Pace::Rate(1000.0));
    assert_eq!(
        serde_json::to_value(s.load.report(&[], &[])).unwrap()["stages"][1]["rate"],
        4000.0
    );
    // Connection stages: closed loop at the most connections.
    let s = parse(Path::new("s.toml"), &with("stages = \"1s:c=4,1s:c=32\"")).unwrap();
    let plan = s
        .load
        .plan("http://127.0.0.1:9/", &[0], s.load.measured_stop())
        .unwrap();
    assert_eq!(
        (plan.connections, plan.pace),
        (32, tailscope_loadgen::Pace::Max)
    );
    // Refused: with what they set, or unparsable; the file and line are named.
    for (extra, says) in [
        ("stages = \"1s:100\"\nrate = 5", "drop rate"),
        ("stages = \"1s:100\"\nrequests = 5", "drop requests"),
        ("stages = \"1s:c=3\"\narrival = \"poisson\"", "drop arrival"),
        ("stages = \"1s\"", "no target"),
    ] {
        let e = parse(Path::new("s.toml"), &with(extra)).unwrap_err();
        assert!(e.contains("s.toml:") && e.contains(says), "{extra}: {e}");
    }
    let e = parse(
        Path::new("s.toml"),
        &GOOD.replace("runs = 3\n", "runs = 3\nstages = \"1s:100\"\n"),
    )
    .unwrap_err();
    assert!(e.contains("drop duration"), "{e}");
}
