//! The run journal end to end: a run killed with SIGKILL is rebuilt from its journal, a
//! normal run's report equals the one rebuilt from its journal, and a disk that fills up
//! mid-run ends the run with the incomplete-output exit code, not a failure.

use crate::common;

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{ok, read_json, scratch_dir, serve, tailscope, Reply};

const RATE: u64 = 400;
const CONNECTIONS: u64 = 4;

fn run_command(url: &str, dir: &std::path::Path, duration: &str) -> Command {
    let mut c = crate::common::tailscope_command();
    c.args([
        "run",
        url,
        "--no-tui",
        "-c",
        "4",
        "--threads",
        "1",
        "-z",
        duration,
    ])
    .args(["-q", &RATE.to_string()])
    .arg("--json")
    .arg(dir.join("r.json"))
    .arg("--html")
    .arg(dir.join("r.html"))
    .arg("--hdr-log")
    .arg(dir.join("r.hlog"))
    .arg("--journal")
    .arg(dir.join("r.journal"))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

/// `tailscope report INPUT FLAG OUTPUT`: a report rebuilt from a journal (or a JSON report)
/// into one form.
fn report_from(
    input: &std::path::Path,
    flag: &str,
    output: &std::path::Path,
) -> std::process::Output {
    tailscope(&[
        "report",
        input.to_str().unwrap(),
        flag,
        output.to_str().unwrap(),
    ])
}

/// `kill -9` a few moments into a run asking for every output, then rebuild: every second
/// the journal had is in the report, numbered without a gap, and its requests are those the
/// server answered but for the second being recorded at the kill and those in flight.
#[test]
fn a_run_killed_with_sigkill_is_rebuilt_from_its_journal() {
    for kill_after_ms in [2_600u64, 4_150, 5_700] {
        let server = serve(|_| Reply::Send(ok("ok")));
        let dir = scratch_dir("journal-kill");
        let mut run = run_command(&server.url("/"), dir.path(), "60s")
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        run.kill().unwrap(); // SIGKILL
        run.wait().unwrap();
        // Responses already on the wire are counted by the server, not by a dead generator.
        std::thread::sleep(Duration::from_millis(200));
        let answered = server.stats.answered.load(Ordering::SeqCst);
        let rebuilt = dir.path().join("rebuilt.json");
        let out = report_from(&dir.path().join("r.journal"), "--json", &rebuilt);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let report = read_json(&rebuilt);
        assert_eq!(report["interrupted"], true);
        let seconds = report["timeseries"].as_array().unwrap();
        // The generator starts within a second or so of being spawned on a loaded machine;
        // a kill after 2.6 s leaves at least one whole second.
        assert!(
            !seconds.is_empty(),
            "killed after {kill_after_ms} ms: no second"
        );
        for (i, s) in seconds.iter().enumerate() {
            assert_eq!(s["t_s"].as_f64(), Some((i + 1) as f64), "{s}");
        }
        let counted: u64 = seconds
            .iter()
            .map(|s| s["requests"].as_u64().unwrap())
            .sum();
        assert!(
            counted <= answered,
            "the report counts {counted} responses, the server sent {answered}"
        );
        // Lost: the second being closed at the kill (a tick late at most) and what was in
        // flight.
        let lost_bound = RATE + RATE / 2 + CONNECTIONS;
        assert!(
            answered - counted <= lost_bound,
            "killed after {kill_after_ms} ms: {counted} of {answered} answered are in the rebuilt report ({} seconds), more than the last second and the in-flight ones lost",
            seconds.len()
        );
        // Its HdrHistogram log: one interval a second the journal had, ending where they do.
        let hlog = dir.path().join("rebuilt.hlog");
        let out = report_from(&dir.path().join("r.journal"), "--hdr-log", &hlog);
        assert_eq!(out.status.code(), Some(0));
        let log = std::fs::read_to_string(&hlog).unwrap();
        let ends: Vec<f64> = log
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let mut f = l.split(',').map(|f| f.parse::<f64>().unwrap_or(f64::NAN));
                f.next().unwrap() + f.next().unwrap()
            })
            .collect();
        let seconds_ends: Vec<f64> = seconds.iter().map(|s| s["t_s"].as_f64().unwrap()).collect();
        assert_eq!(ends, seconds_ends, "{log}");
        let warnings = report["warnings"].to_string();
        assert!(warnings.contains("Rebuilt from the journal"), "{warnings}");
        assert!(report["diagnosis"].is_array(), "the diagnosis is made anew");
    }
}

/// A run that ends normally: the report rebuilt from its journal is the report it wrote.
/// Nothing is excluded from the comparison: the end record holds the document itself.
#[test]
fn a_normal_runs_report_equals_the_one_rebuilt_from_its_journal() {
    let server = serve(|_| Reply::Send(ok("ok")));
    let dir = scratch_dir("journal-equal");
    let out = run_command(&server.url("/"), dir.path(), "3s")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rebuilt = dir.path().join("rebuilt.json");
    let out = report_from(&dir.path().join("r.journal"), "--json", &rebuilt);
    assert_eq!(out.status.code(), Some(0));
    let written = read_json(&dir.path().join("r.json"));
    let again = read_json(&rebuilt);
    assert_eq!(written["interrupted"], false);
    assert_eq!(written, again);
    // The HdrHistogram log too: the journal has every second's histogram and when
    // measurement began, so the log rebuilt from it is the run's, byte for byte.
    let hlog = dir.path().join("rebuilt.hlog");
    let out = report_from(&dir.path().join("r.journal"), "--hdr-log", &hlog);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_log = std::fs::read_to_string(dir.path().join("r.hlog")).unwrap();
    assert!(
        run_log.lines().filter(|l| !l.starts_with('#')).count() >= 3,
        "a header and a histogram a second: {run_log}"
    );
    assert_eq!(run_log, std::fs::read_to_string(&hlog).unwrap());
    // And from the run's JSON report, which has them too.
    let from_json = dir.path().join("from-json.hlog");
    let out = report_from(&dir.path().join("r.json"), "--hdr-log", &from_json);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(run_log, std::fs::read_to_string(&from_json).unwrap());
    // A report without one generator's start (as a merged one): refused, nothing written.
    let mut merged_like = written.clone();
    merged_like.as_object_mut().unwrap().remove("generator");
    let merged_path = dir.path().join("no-generator.json");
    std::fs::write(&merged_path, merged_like.to_string()).unwrap();
    let refused = dir.path().join("refused.hlog");
    let out = report_from(&merged_path, "--hdr-log", &refused);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--hdr-log is written from one run's"),
        "{stderr}"
    );
    assert!(!refused.exists());
    // Without its end record (as a run killed just before writing it would leave it), the
    // report rebuilt from the seconds and the histograms written at the end has the run's
    // connect and uncorrected figures, not n/a.
    let bytes = std::fs::read(dir.path().join("r.journal")).unwrap();
    let cut = dir.path().join("cut.journal");
    std::fs::write(&cut, &bytes[..end_record_offset(&bytes)]).unwrap();
    let from_seconds = dir.path().join("from-seconds.json");
    let out = report_from(&cut, "--json", &from_seconds);
    assert_eq!(out.status.code(), Some(0));
    let from_seconds = read_json(&from_seconds);
    assert_eq!(from_seconds["interrupted"], true);
    for key in [
        "connect_us",
        "connect_histogram",
        "latency_uncorrected_us",
        "latency_uncorrected_histogram",
    ] {
        assert!(!written[key].is_null(), "{key} is in the run's report");
        assert_eq!(written[key], from_seconds[key], "{key}");
    }
    // The profile too (written at the end as once a minute): per CPU, the generator's CPU
    // and the TCP counters are the run's, not n/a; its notes say as of which second.
    let (profile, rebuilt_profile) = (&written["profile"], &from_seconds["profile"]);
    for key in ["cpus", "generator", "tcp", "duration_s"] {
        assert!(
            !profile[key].is_null(),
            "profile.{key} is in the run's report"
        );
        assert_eq!(profile[key], rebuilt_profile[key], "profile.{key}");
    }
    assert!(
        rebuilt_profile["notes"]
            .to_string()
            .contains("the profile is as of second"),
        "{}",
        rebuilt_profile["notes"]
    );
    assert!(
        from_seconds["warnings"]
            .to_string()
            .contains("the profile (per-CPU, the server's processes, the generator's CPU, TCP counters) is as of second"),
        "{}",
        from_seconds["warnings"]
    );
}

/// Where a journal's end record (kind 3) begins, walking its frames (docs/journal.md).
fn end_record_offset(bytes: &[u8]) -> usize {
    let mut at = 18 + 2;
    while at + 8 < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if bytes[at + 8] == 3 {
            return at;
        }
        at += 8 + len;
    }
    panic!("no end record");
}

/// The journal and the reports on a filesystem that fills up mid-run: the load goes to its
/// end, stderr says what is no longer written, the exit code is 3 (output incomplete), and
/// the journal's whole records still read.
#[test]
fn a_full_disk_mid_run_is_loud_but_not_fatal() {
    let server = serve(|_| Reply::Send(ok("ok")));
    let dir = scratch_dir("journal-full");
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        // One page: a journal of some 300 B a second (format 2) fills it within some 10 s.
        .args(["-t", "tmpfs", "-o", "size=4k", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        common::skip("cannot mount a small tmpfs (not root): the full-disk case is not run");
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mnt);
    let out = run_command(&server.url("/"), &mnt, "12s").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("is no longer being written"), "{stderr}");
    assert!(stderr.contains("cannot write the JSON report"), "{stderr}");
    // The load went on to its end: the server saw the whole run's requests.
    let answered = server.stats.answered.load(Ordering::SeqCst);
    assert!(
        answered >= RATE * 10,
        "{answered} answered in a 12 s run at {RATE}/s"
    );
    let bytes = std::fs::read(mnt.join("r.journal")).unwrap();
    let rebuilt = dir.path().join("rebuilt.json");
    let copy = dir.path().join("copy.journal");
    std::fs::write(&copy, &bytes).unwrap();
    let out = report_from(&copy, "--json", &rebuilt);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!read_json(&rebuilt)["timeseries"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A killed run's journal is rebuilt from any directory: the run named its journal, its
/// outputs and its load file relative to where it ran (a newcomer's rebuild from another
/// directory was refused: "cannot write the journal to intr/x.journal"), and the rebuilt
/// report neither reads 0 connections open nor warns that they never opened (it did: a
/// journal kept no peak, and the rebuild took 0 for it).
#[test]
fn a_killed_runs_journal_is_rebuilt_from_another_directory() {
    let server = serve(|_| Reply::Send(ok("ok")));
    let dir = scratch_dir("journal-elsewhere");
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::fs::write(
        dir.path().join("mix.toml"),
        format!(
            "url = \"{}\"\n[[request]]\nname = \"a\"\npath = \"/a\"\n[[request]]\nname = \"b\"\npath = \"/b\"\n",
            server.url("")
        ),
    )
    .unwrap();
    let mut run = crate::common::tailscope_command();
    run.current_dir(dir.path())
        .args(["run", "--load", "mix.toml", "--no-tui", "-c", "4"])
        .args(["--threads", "1", "-z", "60s", "-q", &RATE.to_string()])
        .args(["--json", "out/r.json", "--journal", "out/r.journal"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut run = run.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(3_500));
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    let elsewhere = scratch_dir("journal-elsewhere-cwd");
    let rebuilt = elsewhere.path().join("rebuilt.json");
    let out = crate::common::tailscope_command()
        .current_dir(elsewhere.path())
        .arg("report")
        .arg(dir.path().join("out/r.journal"))
        .args(["--json", "rebuilt.json", "--text"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = read_json(&rebuilt);
    assert_eq!(report["interrupted"], true);
    assert!(!report["timeseries"].as_array().unwrap().is_empty());
    let open = report["connections"]["peak_open"].as_u64().unwrap();
    assert!((1..=CONNECTIONS).contains(&open), "peak_open {open}");
    assert!(
        !text.contains("connections were open at once"),
        "a false warning:\n{text}"
    );
    assert!(
        text.contains("Interrupted:   by a kill or a crash"),
        "{text}"
    );
    // Nothing of the run's own outputs was written from here.
    assert!(!elsewhere.path().join("out").exists());
}

/// `tailscope report FILE --text` writes the summary the run printed, its "Server",
/// "Diagnosis" and "Server inside" sections included, from the JSON and from the journal (a
/// newcomer found the saved report's text stopped after the slowest requests).
#[test]
fn a_saved_reports_text_is_the_runs_own() {
    let Some((mut server, addr)) = common::spawn_serve(&[]) else {
        return;
    };
    let dir = scratch_dir("saved-text");
    let pid = server.id().to_string();
    let run = common::tailscope_command()
        .current_dir(dir.path())
        .args(["run", &format!("http://{addr}/plaintext"), "--no-tui"])
        .args(["-c", "4", "--threads", "1", "-z", "2s", "--pid", &pid])
        .args(["--json", "r.json", "--journal", "r.journal"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let printed = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(printed.contains("\nDiagnosis"), "{printed}");
    assert!(printed.contains("\nServer"), "{printed}");
    for saved in ["r.json", "r.journal"] {
        let out = common::tailscope_command()
            .current_dir(dir.path())
            .args(["report", saved, "--text"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            printed,
            "report {saved} --text"
        );
    }
}

/// A run killed before its first second ended left a journal of its header alone: rebuilding
/// it says so and exits 2, rather than a report of 0 requests in 0 µs (a newcomer's finding:
/// "Requests: 0" and "none was sent" where tens of thousands had been).
#[test]
fn a_journal_without_a_whole_second_is_said_to_hold_no_report() {
    let server = serve(|_| Reply::Send(ok("ok")));
    let dir = scratch_dir("journal-header-only");
    let out = run_command(&server.url("/"), dir.path(), "2s")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // The journal cut after its header record: preamble, then length, CRC and payload.
    let bytes = std::fs::read(dir.path().join("r.journal")).unwrap();
    let start = tailscope_report::journal::preamble().len();
    let len = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap()) as usize;
    let cut = dir.path().join("cut.journal");
    std::fs::write(&cut, &bytes[..start + 8 + len]).unwrap();
    let rebuilt = dir.path().join("rebuilt.json");
    let out = tailscope(&[
        "report",
        cut.to_str().unwrap(),
        "--json",
        rebuilt.to_str().unwrap(),
        "--text",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no second was recorded"), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!rebuilt.exists());
}

/// A run whose per-second histograms leave memory for the spill file after one second
/// (`TAILSCOPE_SPILL_AFTER_SECONDS`, ten minutes otherwise) reports each second with its own
/// histogram, read back from the file, in the JSON and the HDR log (the aggregator's test
/// checks the bytes against a run held in memory); and where the spill file cannot be made,
/// it says so once and loses nothing.
#[test]
fn seconds_spilled_to_a_file_come_back_each_in_its_place() {
    let server = serve(|_| Reply::Send(ok("ok")));
    let dir = scratch_dir("journal-window");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = run_command(&server.url("/"), dir.path(), "4s")
        .env("TAILSCOPE_SPILL_AFTER_SECONDS", "1")
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("spill file"), "{stderr}");
    // Each second the spill file gave back is that second's: its histogram holds the
    // second's requests and its slowest, as the time series (made before it was spilled) says.
    let written = read_json(&dir.path().join("r.json"));
    let (seconds, points) = (
        written["second_histograms"].as_array().unwrap(),
        written["timeseries"].as_array().unwrap(),
    );
    assert!(seconds.len() >= 4, "{} seconds", seconds.len());
    assert_eq!(seconds.len(), points.len());
    for (i, (second, point)) in seconds.iter().zip(points).enumerate() {
        let bytes = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            second.as_str().unwrap(),
        )
        .unwrap();
        let h: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap_or_else(|e| panic!("second {i}: {e:?}"));
        assert_eq!(Some(h.len()), point["requests"].as_u64(), "second {i}");
        assert_eq!(Some(h.max()), point["max_us"].as_u64(), "second {i}");
    }
    // The HDR log has a line per second, read back from the spill file as well.
    let hlog = std::fs::read_to_string(dir.path().join("r.hlog")).unwrap();
    let lines = hlog
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"'));
    assert_eq!(lines.count(), seconds.len(), "{hlog}");

    // No directory to make the spill file in: said once, and every second is still there.
    let dir = scratch_dir("journal-no-tmp");
    let out = run_command(&server.url("/"), dir.path(), "3s")
        .env("TAILSCOPE_SPILL_AFTER_SECONDS", "1")
        .env("TMPDIR", dir.path().join("missing"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("spill file").count(), 1, "{stderr}");
    assert!(stderr.contains("nothing is lost"), "{stderr}");
    let written = read_json(&dir.path().join("r.json"));
    let seconds = written["second_histograms"].as_array().unwrap();
    assert!(seconds.len() >= 3, "{} seconds", seconds.len());
    assert_eq!(
        seconds.len(),
        written["timeseries"].as_array().unwrap().len()
    );
}
