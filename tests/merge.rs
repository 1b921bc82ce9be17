//! More than one generator: `run --segment I/N --start-at T` on N hosts, then `tailscope merge`.
//!
//! The main test runs three generator processes, each in a network namespace of its own joined
//! by a veth pair to the server's namespace (all created here, torn down by a guard: no traffic
//! leaves the machine), and checks the merged report against what the three reports hold: the
//! sum of the counts, the percentiles of the union of their histograms, the per-second sums, and
//! a threshold that fails on the union failing on the merge. The others run on loopback.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::{n, ok, serve, tailscope, Reply};
use hdrhistogram::Histogram;

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

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

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Waits for `child` at most `limit`, killing it past that: a test never hangs.
fn wait_bounded(child: &mut Child, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a process ran past {limit:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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

/// `-n` runs of one loopback server, segments 1..3 of 3 and a second run of 2/3, started
/// together (runs whose load windows never overlapped are not merged): 100 requests each at
/// 50 req/s, 2 s windows.
fn loopback_segment_reports(dir: &Path, url: &str) -> Vec<PathBuf> {
    // Far enough ahead for three processes to start on a loaded machine.
    let start_at = format!("{:.3}", unix_now() + 3.0);
    let runs: Vec<(PathBuf, Child)> = [1, 2, 3, 2]
        .into_iter()
        .enumerate()
        .map(|(run, i)| {
            let file = dir.join(format!("{run}-{i}.json"));
            let segment = format!("{i}/3");
            let child = Command::new(env!("CARGO_BIN_EXE_tailscope"))
                .args(["run", url, "-n", "300", "-q", "150", "-c", "3"])
                .args(["--threads", "1", "--segment", &segment])
                .args(["--start-at", &start_at, "--json"])
                .arg(&file)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (file, child)
        })
        .collect();
    runs.into_iter()
        .map(|(file, mut child)| {
            let code = wait_bounded(&mut child, Duration::from_secs(40));
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert_eq!(code, 0, "{err}");
            file
        })
        .collect()
}

/// `tailscope run URL -n 30 -c 3 EXTRA --json FILE`, which must succeed.
fn one_small_run(url: &str, file: &Path, extra: &[&str]) {
    let file = file.display().to_string();
    let mut args = vec!["run", url, "-n", "30", "-c", "3", "--json", &file];
    args.extend(extra);
    let out = tailscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn merge_cli(files: &[&Path], extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = tailscope(&args.iter().map(String::as_str).collect::<Vec<_>>());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn segments_split_n_exactly_and_mismatched_reports_are_refused() {
    let server = serve(|_| Reply::Send(ok("hi")));
    let scratch = common::scratch_dir("merge-loopback");
    let dir = scratch.path();
    let files = loopback_segment_reports(dir, &server.url("/a"));
    let requests: Vec<u64> = files[..3]
        .iter()
        .map(|f| n(&read_json(f)["summary"]["requests"]))
        .collect();
    assert_eq!(
        requests,
        vec![100, 100, 100],
        "-n 300 in three exact shares"
    );
    let [a, b, c, b2] = [&files[0], &files[1], &files[2], &files[3]].map(|p| p.as_path());

    let (code, stdout, stderr) = merge_cli(&[a, b, c], &["--json", "-"]);
    assert_eq!(code, 0, "{stderr}");
    let merged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(n(&merged["summary"]["requests"]), 300);
    assert_eq!(merged["config"]["requests"], 300);
    assert!(
        stderr.contains("Merged 3 report(s) of 3 segment(s)"),
        "{stderr}"
    );

    // A segment run twice overlaps: refused, exit 2, unless --force.
    let (code, _, stderr) = merge_cli(&[a, b, b2, c], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("segment 2/3 overlaps"), "{stderr}");
    let (code, _, stderr) = merge_cli(&[a, b, b2, c], &["--force"]);
    assert_eq!(code, 0, "{stderr}");
    // One report given twice (here under two names) is refused even with --force.
    let b_again = dir.join(".").join(b.file_name().unwrap());
    let (code, _, stderr) = merge_cli(&[a, b, &b_again, c], &["--force"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the same report given twice"), "{stderr}");

    // Another URL is another load.
    let other = dir.join("other.json");
    one_small_run(&server.url("/b"), &other, &["--segment", "3/3"]);
    let (code, _, stderr) = merge_cli(&[a, b, &other], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not parts of one load: url"), "{stderr}");

    // A run without --segment is a load of its own, not a share of this one.
    let plain = dir.join("plain.json");
    one_small_run(&server.url("/a"), &plain, &[]);
    let (code, _, stderr) = merge_cli(&[a, b, &plain], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("plain.json is not a segment: it was run without --segment I/N"),
        "{stderr}"
    );

    // A missing segment is named, and the merge goes on.
    let (code, stdout, stderr) = merge_cli(&[a, c], &["--json", "-"]);
    assert_eq!(code, 0, "{stderr}");
    let merged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(merged["merged"]["missing_segments"], serde_json::json!([2]));
    assert!(stderr.contains("segment 2/3 is missing"), "{stderr}");

    // Not a report: exit 2 saying so.
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let (code, _, stderr) = merge_cli(&[a, &junk], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is not a tailscope JSON report"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_while_waiting_for_start_at_sends_nothing() {
    let server = serve(|_| Reply::Send(ok("hi")));
    let scratch = common::scratch_dir("merge-wait");
    let dir = scratch.path();
    let file = dir.join("r.json");
    let at = format!("{:.0}", unix_now() + 120.0);
    let (mut child, seen) = common::spawn_until(
        &[
            "run",
            &server.url("/"),
            "--start-at",
            &at,
            "-z",
            "1s",
            "--json",
            &file.display().to_string(),
        ],
        "waiting",
    );
    assert!(seen.contains("waiting"), "{seen}");
    common::interrupt(child.id());
    let code = wait_bounded(&mut child, Duration::from_secs(10));
    assert_eq!(code, 130);
    assert_eq!(
        server
            .stats
            .connections
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert!(!file.exists(), "no report of a run that never began");
}

#[test]
fn segment_and_start_at_flags_refuse_bad_values() {
    for (args, says) in [
        (&["--segment", "4/3"][..], "is not a segment"),
        (
            &["--segment", "3/3", "-c", "2"][..],
            "-c 2 cannot be split into 3 segments",
        ),
        (&["--start-at", "yesterday"][..], "RFC 3339"),
        (
            &["--start-at", "2001-01-01T00:00:00Z"][..],
            "ago: give a time to come",
        ),
        (
            &["--segment-from-env", "--segments", "3"][..],
            "JOB_COMPLETION_INDEX is not set",
        ),
        (
            &["--segment", "1/2", "--target", "embedded"][..],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["run", "http://127.0.0.1:9/"];
        all.extend(args);
        let out = Command::new(env!("CARGO_BIN_EXE_tailscope"))
            .args(&all)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // A segment is a share of one server's load, not a server per generator.
    let out = tailscope(&["run", "--segment", "1/2", "--target", "embedded"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("'--segment <I/N>' cannot be used with '--target <KIND>'"),
        "{stderr}"
    );
}

fn yaml_docs(path: &str) -> Vec<yaml_rust2::Yaml> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    yaml_rust2::YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn strings(v: &yaml_rust2::Yaml) -> Vec<String> {
    v.as_vec()
        .unwrap_or_else(|| panic!("not a list: {v:?}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// The Indexed Job (no cluster here): its fields that matter, and its arguments accepted by
/// the binary, with the index the Job controller would set.
#[test]
fn the_kubernetes_example_is_an_indexed_job_of_n_segments_and_a_merge() {
    let docs = yaml_docs("examples/kubernetes/generators.yaml");
    let job = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("Job"))
        .expect("a Job");
    let claim = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("PersistentVolumeClaim"))
        .expect("the reports' volume");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().unwrap();
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(completions),
        "all run at once"
    );
    assert_eq!(
        spec["backoffLimit"].as_i64(),
        Some(0),
        "no late re-run of a segment"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let container = &pod["containers"][0];
    let args = strings(&container["args"]);
    let after = |flag: &str| {
        let i = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} in {args:?}"));
        args[i + 1].clone()
    };
    assert_eq!(args[0], "run");
    assert!(args.contains(&"--segment-from-env".to_string()));
    assert_eq!(
        after("--segments"),
        completions.to_string(),
        "N agrees with completions"
    );
    assert_eq!(after("--start-at"), "$(START_AT)");
    let json = after("--json");
    assert!(json.contains("$(JOB_COMPLETION_INDEX)"), "{json}");
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert!(
        json.starts_with(&format!("{mount}/")),
        "{json} on the volume at {mount}"
    );
    let claim_name = claim["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str(),
        Some(claim_name)
    );
    assert_eq!(
        claim["spec"]["accessModes"][0].as_str(),
        Some("ReadWriteMany")
    );
    let env: Vec<(String, String)> = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    let var = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };

    // The merge step reads the same volume and merges what the generators wrote there.
    let merge = &yaml_docs("examples/kubernetes/merge-job.yaml")[0];
    let m = &merge["spec"]["template"]["spec"];
    assert_eq!(
        m["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str(),
        Some(claim_name)
    );
    let line = strings(&m["containers"][0]["args"]).join(" ");
    assert!(
        line.starts_with("tailscope merge /out/[0-9]*.json"),
        "{line}"
    );
    assert_eq!(
        m["containers"][0]["volumeMounts"][0]["mountPath"].as_str(),
        Some(mount)
    );
    assert_eq!(m["containers"][0]["image"], container["image"]);

    // The binary takes the arguments as Kubernetes expands them. A start time two hours past
    // is refused after every other flag was accepted and the segment read from the index:
    // nothing is sent.
    let expand = |a: &String| {
        a.replace("$(TARGET_URL)", "http://127.0.0.1:9/")
            .replace("$(START_AT)", "2001-01-01T00:00:00Z")
            .replace("$(JOB_COMPLETION_INDEX)", "2")
            .replace("/out/", &format!("{}/", std::env::temp_dir().display()))
    };
    assert!(var("TARGET_URL").starts_with("http://"));
    assert!(tailscope_loadgen::segment::parse_start_time(&var("START_AT")).is_ok());
    let out = Command::new(env!("CARGO_BIN_EXE_tailscope"))
        .args(args.iter().map(expand))
        .env("JOB_COMPLETION_INDEX", (completions - 1).to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--start-at was"),
        "only the past start time is refused: {stderr}"
    );
}

/// The ssh recipe, with `ssh` and `scp` that run on this machine: three segments against a
/// loopback server, merged by the script.
#[test]
fn the_ssh_example_runs_three_segments_and_merges_them() {
    let server = serve(|_| Reply::Send(ok("hi")));
    let scratch = common::scratch_dir("merge-ssh");
    let dir = scratch.path();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // ssh HOST CMD...: the remote shell runs the joined command; scp HOST:PATH DEST copies.
    for (name, body) in [
        ("ssh", "shift; exec sh -c \"$*\""),
        ("scp", "shift; cp \"${1#*:}\" \"$2\""),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        Command::new("chmod")
            .arg("755")
            .arg(&path)
            .status()
            .unwrap();
    }
    let tailscope_dir = Path::new(env!("CARGO_BIN_EXE_tailscope")).parent().unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        tailscope_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out_dir = dir.join("reports");
    let mut child = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ssh/run-segments.sh"))
        .args(["gen1", "gen2", "gen3"])
        .env("PATH", path)
        .env("URL", server.url("/"))
        .env("LOAD", "-c 3 -q 300 --threads 1")
        .env("DURATION", "1s")
        .env("AHEAD", "2")
        // The recipe's mechanics, not this loaded machine's latency: a threshold that holds.
        .env("FAIL_IF", "error_rate < 1%")
        .env("OUT", &out_dir)
        .env("REMOTE_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = wait_bounded(&mut child, Duration::from_secs(40));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code, 0, "{stderr}{}", String::from_utf8_lossy(&out.stdout));
    let merged = read_json(&out_dir.join("merged.json"));
    assert_eq!(merged["merged"]["segments"], 3);
    assert_eq!(merged["merged"]["missing_segments"], serde_json::json!([]));
    let sum: u64 = (1..=3)
        .map(|i| n(&read_json(&out_dir.join(format!("{i}.json")))["summary"]["requests"]))
        .sum();
    assert_eq!(n(&merged["summary"]["requests"]), sum);
    assert!(sum > 0);
}
