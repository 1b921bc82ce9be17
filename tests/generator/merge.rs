//! More than one generator: `run --segment I/N --start-at T` on N hosts, then `tailscope merge`.
//!
//! The main test runs three generator processes, each in a network namespace of its own joined
//! by a veth pair to the server's namespace (all created here, torn down by a guard: no traffic
//! leaves the machine), and checks the merged report against what the three reports hold: the
//! sum of the counts, the percentiles of the union of their histograms, the per-second sums, and
//! a threshold that fails on the union failing on the merge. The loopback merges are in
//! tests/segment.rs, the documented examples in tests/examples.rs.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use common::{n, read_json, tailscope, unix_now, wait_bounded};
use hdrhistogram::Histogram;

fn decode(data: &serde_json::Value) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_str().expect("base64 text"))
        .unwrap();
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap()
}

/// The histogram of every sample of all `reports`, built value by value from each report's
/// own full histogram (not by the merge code).
fn union_of_samples(reports: &[serde_json::Value]) -> Histogram<u64> {
    let mut union = Histogram::<u64>::new(3).unwrap();
    for r in reports {
        let h = decode(&r["histogram"]["data"]);
        for v in h.iter_recorded() {
            union
                .record_n(v.value_iterated_to(), v.count_at_value())
                .unwrap();
        }
    }
    union
}

/// The checks every merge of three segment reports must pass.
fn check_merged(files: &[PathBuf], merged: &serde_json::Value) {
    let reports: Vec<serde_json::Value> = files.iter().map(|f| read_json(f)).collect();
    // Counters are summed.
    for key in ["requests", "successes", "errors", "bytes_read"] {
        let sum: u64 = reports.iter().map(|r| n(&r["summary"][key])).sum();
        assert_eq!(n(&merged["summary"][key]), sum, "summary.{key}");
    }
    let connections: u64 = reports.iter().map(|r| n(&r["config"]["connections"])).sum();
    assert_eq!(n(&merged["config"]["connections"]), connections);
    // The merged percentiles are the union's (HDR precision: the same buckets).
    let union = union_of_samples(&reports);
    assert_eq!(union.len(), n(&merged["summary"]["successes"]));
    for (key, q) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)] {
        let want = union.value_at_quantile(q);
        let got = n(&merged["latency_us"][key]);
        assert!(
            union.equivalent(got, want),
            "{key}: merged {got} µs, union of samples {want} µs"
        );
    }
    assert!(union.equivalent(n(&merged["latency_us"]["max"]), union.max()));
    // They started together (--start-at): second k of the merge is second k of each run.
    let offsets: Vec<f64> = merged["merged"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset_s"].as_f64().unwrap())
        .collect();
    assert!(
        offsets.iter().all(|o| *o < 0.5),
        "the generators did not start together: {offsets:?}"
    );
    let points = merged["timeseries"].as_array().unwrap();
    for (k, point) in points.iter().enumerate() {
        let sum: u64 = reports
            .iter()
            .filter_map(|r| r["timeseries"].get(k))
            .map(|p| n(&p["requests"]))
            .sum();
        assert_eq!(n(&point["requests"]), sum, "second {}", k + 1);
    }
    let most = reports
        .iter()
        .map(|r| r["timeseries"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert_eq!(points.len(), most);
    // A threshold that fails on the union of samples fails on the merge (exit 99), and one
    // that holds there holds.
    let p99 = union.value_at_quantile(0.99);
    let args = |expr: String| {
        let mut a: Vec<String> = vec!["merge".into()];
        a.extend(files.iter().map(|f| f.display().to_string()));
        a.extend(["--fail-if".into(), expr]);
        a
    };
    let strict = args(format!("p99 < {}us", union.lowest_equivalent(p99)));
    let out = tailscope(&strict.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        out.status.code(),
        Some(99),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lenient = args(format!("p99 <= {}us", union.highest_equivalent(p99)));
    let out = tailscope(&lenient.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A name the reports do not hold is a typo: exit 2, as for run, not a failed threshold.
    let typo = args("p99[nosuch] < 1s".into());
    let out = tailscope(&typo.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Network namespaces and the processes in them, removed on drop (also when the test fails).
struct Namespaces {
    names: Vec<String>,
    children: Vec<Child>,
}

impl Namespaces {
    fn ip(&self, args: &[&str]) -> Result<(), String> {
        let out = Command::new("ip")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn add(&mut self, name: &str) -> Result<(), String> {
        self.ip(&["netns", "add", name])?;
        self.names.push(name.to_string());
        self.ip(&["-n", name, "link", "set", "lo", "up"])
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deleting a namespace deletes the veth ends in it.
        for name in &self.names {
            let _ = self.ip(&["netns", "del", name]);
        }
    }
}

const SERVER_IP: &str = "10.77.0.1";

/// Three generator namespaces, each joined to a server namespace by a veth pair; the server's
/// address is on its loopback, routed to from every generator.
fn build_namespaces(tag: &str) -> Result<Namespaces, String> {
    let mut ns = Namespaces {
        names: Vec::new(),
        children: Vec::new(),
    };
    let server = format!("{tag}-srv");
    ns.add(&server)?;
    ns.ip(&[
        "-n",
        &server,
        "addr",
        "add",
        &format!("{SERVER_IP}/32"),
        "dev",
        "lo",
    ])?;
    for i in 1..=3 {
        let gen = format!("{tag}-g{i}");
        ns.add(&gen)?;
        // Created inside the namespaces: the names only need to be unique there.
        ns.ip(&[
            "link",
            "add",
            "gen",
            "netns",
            &gen,
            "type",
            "veth",
            "peer",
            "name",
            &format!("to-g{i}"),
            "netns",
            &server,
        ])?;
        let (srv_side, gen_side) = (format!("10.77.{i}.1"), format!("10.77.{i}.2"));
        ns.ip(&[
            "-n",
            &server,
            "addr",
            "add",
            &format!("{srv_side}/30"),
            "dev",
            &format!("to-g{i}"),
        ])?;
        ns.ip(&["-n", &server, "link", "set", &format!("to-g{i}"), "up"])?;
        ns.ip(&[
            "-n",
            &gen,
            "addr",
            "add",
            &format!("{gen_side}/30"),
            "dev",
            "gen",
        ])?;
        ns.ip(&["-n", &gen, "link", "set", "gen", "up"])?;
        ns.ip(&["-n", &gen, "route", "add", "default", "via", &srv_side])?;
    }
    Ok(ns)
}

fn in_netns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_tailscope")])
        .args(args)
        .env("TAILSCOPE_JOURNAL_DIR", crate::common::JOURNAL_DIR)
        .stdin(Stdio::null());
    c
}

#[test]
fn three_generators_in_their_own_namespaces_merge_losslessly() {
    if !common::has_tool("ip", "-V") {
        common::skip("ip not installed (apt-get install iproute2)");
        return;
    }
    let tag = format!("tsm{}", std::process::id());
    let mut ns = match build_namespaces(&tag) {
        Ok(ns) => ns,
        Err(e) if e.contains("Operation not permitted") || e.contains("Permission denied") => {
            common::skip(format!("network namespaces need root: {e}"));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let server_ns = format!("{tag}-srv");
    let server = in_netns(
        &server_ns,
        &[
            "serve",
            "--addr",
            &format!("{SERVER_IP}:8080"),
            "--threads",
            "1",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Owned by the guard from here: killed and waited for whatever happens.
    ns.children.push(server);
    let server = ns.children.last_mut().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    if !line.contains("listening on") {
        let mut err = String::new();
        std::io::Read::read_to_string(&mut server.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains("io_uring"), "serve failed: {err}");
        common::skip(format!("io_uring unavailable here: {}", err.trim()));
        return;
    }
    let url = format!("http://{SERVER_IP}:8080/plaintext");
    let scratch = common::scratch_dir("merge-netns");
    let dir = scratch.path();
    let load = [
        "-c",
        "6",
        "-q",
        "3000",
        "-z",
        "3s",
        "--threads",
        "1",
        "--no-tui",
    ];
    // Far enough ahead for three processes to start on a loaded machine.
    let start_at = format!("{:.3}", unix_now() + 5.0);
    let mut files = Vec::new();
    let mut generators = Vec::new();
    for i in 1..=3 {
        let file = dir.join(format!("{i}.json"));
        let segment = format!("{i}/3");
        let mut args = vec!["run", &url];
        args.extend(load);
        let file_arg = file.display().to_string();
        args.extend([
            "--segment",
            &segment,
            "--start-at",
            &start_at,
            "--json",
            &file_arg,
        ]);
        let child = in_netns(&format!("{tag}-g{i}"), &args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        generators.push(child);
        files.push(file);
    }
    for mut g in generators {
        let code = wait_bounded(&mut g, Duration::from_secs(40));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut g.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("waiting"), "it waited for --start-at: {err}");
    }
    let merged_file = dir.join("merged.json");
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--json".into(), merged_file.display().to_string()]);
    let out = tailscope(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = read_json(&merged_file);
    check_merged(&files, &merged);
    // Each report was a third of the load and came from its own namespace's address.
    for (i, f) in files.iter().enumerate() {
        let r = read_json(f);
        assert_eq!(n(&r["config"]["connections"]), 2);
        assert_eq!(r["config"]["rate"], 1000.0);
        assert_eq!(r["generator"]["segment"]["index"], i as u64 + 1);
    }

    // The same load from one process: throughput within 10 % (open loop: the rate is the
    // load's, not the machine's speed). Its latency is compared in BENCHMARKS.md.
    let single = dir.join("single.json");
    let mut args = vec!["run", &url];
    args.extend(load);
    let single_arg = single.display().to_string();
    args.extend(["--json", &single_arg]);
    let mut child = in_netns(&format!("{tag}-g1"), &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)), 0);
    let one = read_json(&single)["summary"]["rps"].as_f64().unwrap();
    let three = merged["summary"]["rps"].as_f64().unwrap();
    assert!(
        (three - one).abs() <= 0.1 * one,
        "one process {one:.0} req/s, three merged {three:.0} req/s"
    );
    drop(ns);
}
