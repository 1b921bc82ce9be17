//! `run --segment I/N --start-at T` on loopback, and `tailscope merge` of what they wrote:
//! shares that add up to the whole, mismatched reports refused, an interrupted wait that sends
//! nothing, bad values refused.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{n, ok, read_json, serve, tailscope, unix_now, wait_bounded, Reply};

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
            let child = crate::common::tailscope_command()
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
    let merged_json = dir.join("merged.json");
    let (code, _, stderr) = merge_cli(
        &[a, b, b2, c],
        &["--force", "--json", merged_json.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    // The JSON written is announced, as an HTML page is.
    assert!(
        stderr.contains(&format!("tailscope: wrote {}", merged_json.display())),
        "{stderr}"
    );
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
        let out = crate::common::tailscope_command()
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
