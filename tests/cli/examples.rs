//! The documented ways to run several generators (a Kubernetes indexed job, ssh to N hosts):
//! the example files say what the docs say, and the ssh script runs end to end on loopback.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{n, ok, read_json, serve, wait_bounded, Reply};

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
    // It merges this run's reports only: the generators name theirs after the common start
    // (START_AT, which run.sh fills in in both manifests), and its glob takes that name.
    let line = strings(&m["containers"][0]["args"]).join(" ");
    assert_eq!(json, "/out/$(START_AT)-$(JOB_COMPLETION_INDEX).json");
    assert!(
        line.starts_with("tailscope merge /out/\"$START_AT\"-[0-9]*.json"),
        "{line}"
    );
    let merge_start = m["containers"][0]["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("START_AT"))
        .and_then(|e| e["value"].as_str())
        .expect("the merge's START_AT");
    assert_eq!(merge_start, var("START_AT"), "one placeholder for run.sh");
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
    let out = crate::common::tailscope_command()
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

/// The agent's two Kubernetes shapes (no cluster here): the DaemonSet sees the node's
/// processes and listens on the node's address, the sidecar shares its pod's processes;
/// neither lets runs launch anything; the binary takes each one's arguments as Kubernetes
/// expands them (refused only for the token file, which exists in the pod alone).
#[test]
fn the_kubernetes_agent_examples_are_a_daemonset_and_a_sidecar() {
    let daemonset = yaml_docs("examples/kubernetes/agent-daemonset.yaml");
    let ds = daemonset
        .iter()
        .find(|d| d["kind"].as_str() == Some("DaemonSet"))
        .expect("a DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["hostPID"].as_bool(),
        Some(true),
        "it sees every pod's processes"
    );
    assert_eq!(pod["hostNetwork"].as_bool(), Some(true));
    let sidecar = yaml_docs("examples/kubernetes/agent-sidecar.yaml");
    let deployment = sidecar
        .iter()
        .find(|d| d["kind"].as_str() == Some("Deployment"))
        .expect("a Deployment");
    let side_pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(side_pod["shareProcessNamespace"].as_bool(), Some(true));
    let agents = [
        &pod["containers"][0],
        side_pod["containers"]
            .as_vec()
            .unwrap()
            .iter()
            .find(|c| c["name"].as_str() == Some("tailscope-agent"))
            .expect("the agent's container"),
    ];
    for container in agents {
        let args = strings(&container["args"]);
        assert_eq!(args[0], "agent");
        assert!(!args.iter().any(|a| a == "--allow-launch"), "{args:?}");
        let out = Command::new(env!("CARGO_BIN_EXE_tailscope"))
            .args(args.iter().map(|a| a.replace("$(NODE_IP)", "127.0.0.1")))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("/etc/tailscope/agent.token"),
            "only the token file is missing: {stderr}"
        );
    }
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
        .env("TAILSCOPE_JOURNAL_DIR", crate::common::JOURNAL_DIR)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ssh/run-segments.sh"))
        .args(["gen1", "gen2", "gen3"])
        .env("PATH", path)
        // '&' and '?' reach the remote shell: every word is quoted for it.
        .env("URL", server.url("/?a=1&b=2"))
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
    assert_eq!(
        merged["config"]["url"].as_str(),
        Some(server.url("/?a=1&b=2").as_str())
    );
}
