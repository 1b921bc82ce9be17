//! What a command-line tool ships around its flags (issue 40): shell completions loaded by a
//! real bash, man pages rendered by `man`, the help's examples and exit codes, `--version`'s
//! commit and features, and `run --csv`'s rows read back by Python's csv module and compared
//! with the JSON report of the same run. Tests needing bash, man or python3 skip visibly
//! without them (`.ci/run` installs them).

use crate::common;

use std::process::Command;

use common::{ok, scratch_dir, serve, tailscope, Reply};

/// The build script, for its fallback outside a git checkout (its `main` is not run here).
#[allow(dead_code)]
#[path = "../../build.rs"]
mod build_script;

const SHELLS: [&str; 5] = ["bash", "zsh", "fish", "elvish", "powershell"];

/// The subcommands a user reads about, each with its own help and man page.
const SUBCOMMANDS: [&str; 10] = [
    "run",
    "serve",
    "agent",
    "suite",
    "compare",
    "report",
    "merge",
    "find-max",
    "completions",
    "man",
];

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn completions_are_generated_for_every_shell() {
    for shell in SHELLS {
        let out = tailscope(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        // Generated from the clap definition: subcommands and run's flags are in it.
        for word in ["tailscope", "run", "serve", "csv-slowest", "fail-if"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    let out = tailscope(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
    assert!(stderr(&out).contains("possible values: bash, elvish, fish, powershell, zsh"));
}

#[test]
fn bash_loads_the_completions_and_completes_subcommands_and_flags() {
    if !common::has_tool("bash", "--version") {
        common::skip("bash not installed (apt-get install bash)");
        return;
    }
    let dir = scratch_dir("completions");
    let script = dir.path().join("tailscope.bash");
    let out = tailscope(&["completions", "bash"]);
    std::fs::write(&script, &out.stdout).unwrap();
    // A non-interactive bash, as a completion loader sources the file; then the completion
    // function is asked what it offers, as bash does on Tab.
    let probe = format!(
        "source {}\n\
         complete -p tailscope\n\
         COMP_WORDS=(tailscope ru); COMP_CWORD=1; COMP_LINE='tailscope ru'; COMP_POINT=12\n\
         _tailscope tailscope ru tailscope; echo \"SUB: ${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(tailscope run --csv-s); COMP_CWORD=2; COMP_LINE='tailscope run --csv-s'; COMP_POINT=21\n\
         _tailscope tailscope --csv-s run; echo \"FLAG: ${{COMPREPLY[*]}}\"",
        script.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .expect("bash runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.lines()
            .any(|l| l.starts_with("complete ") && l.ends_with(" tailscope")),
        "complete -p lists tailscope:\n{text}"
    );
    assert!(text.contains("SUB: run"), "ru<Tab> completes run:\n{text}");
    assert!(
        text.contains("FLAG: --csv-slowest"),
        "--csv-s<Tab> completes --csv-slowest:\n{text}"
    );
}

#[test]
fn man_writes_a_page_per_subcommand_that_man_renders() {
    let dir = scratch_dir("man");
    let pages = dir.path().join("man1");
    let out = tailscope(&["man", pages.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let names: Vec<String> = std::iter::once("tailscope".to_string())
        .chain(SUBCOMMANDS.iter().map(|s| format!("tailscope-{s}")))
        .collect();
    let mut written: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut expected: Vec<String> = names.iter().map(|n| format!("{n}.1")).collect();
    expected.sort();
    assert_eq!(written, expected, "one page each, no help page");
    for page in &expected {
        assert!(
            stderr(&out).contains(&format!("wrote {}", pages.join(page).display())),
            "{}",
            stderr(&out)
        );
    }
    if !common::has_tool("man", "--version") {
        common::skip("man not installed (apt-get install man-db)");
        return;
    }
    for name in &names {
        let path = pages.join(format!("{name}.1"));
        let out = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "")
            .output()
            .expect("man runs");
        let text = stdout(&out);
        assert!(out.status.success(), "man -l {name}.1: {}", stderr(&out));
        // Rendered, not the roff source: the section headings and the name line.
        assert!(!text.contains(".TH"), "{name}: {text}");
        assert!(text.contains("NAME"), "{name}: {text}");
        let name_line = text.lines().skip_while(|l| l.trim() != "NAME").nth(1);
        assert!(
            name_line.is_some_and(|l| l.trim().starts_with(&format!("{name} "))),
            "{name}: {text}"
        );
        assert!(text.contains("SYNOPSIS"), "{name}: {text}");
        assert!(
            stderr(&out).trim().is_empty(),
            "{name}: man warned: {}",
            stderr(&out)
        );
    }
    let run = Command::new("man")
        .arg("-l")
        .arg(pages.join("tailscope-run.1"))
        .output()
        .unwrap();
    let run = stdout(&run);
    assert!(run.contains("--csv-slowest"), "{run}");
    let top = Command::new("man")
        .arg("-l")
        .arg(pages.join("tailscope.1"))
        .output()
        .unwrap();
    let top = stdout(&top);
    assert!(top.contains("Exit codes:"), "{top}");
}

#[test]
fn man_into_a_path_that_cannot_be_a_directory_is_a_usage_error() {
    let dir = scratch_dir("man-bad");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = tailscope(&["man", file.join("man1").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot write the man pages into"),
        "{}",
        stderr(&out)
    );
}

/// The codes of the README's exit-code table, in order.
fn readme_exit_codes() -> Vec<String> {
    let readme = include_str!("../../README.md");
    let table = &readme[readme
        .find("### Exit codes")
        .expect("the README's exit codes")..];
    table
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap().trim().to_string())
        .collect()
}

#[test]
fn the_top_level_help_has_examples_the_bare_command_and_the_exit_codes() {
    let out = tailscope(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    assert!(help.contains("Examples:\n  tailscope "), "{help}");
    assert!(
        help.contains(
            "Without a subcommand, tailscope starts the embedded io_uring reference server"
        ),
        "{help}"
    );
    let at = help.find("Exit codes:\n").expect("an exit-code table") + "Exit codes:\n".len();
    let codes: Vec<String> = help[at..]
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    let readme = readme_exit_codes();
    assert_eq!(readme, ["0", "1", "2", "3", "99", "130"]);
    assert_eq!(codes, readme, "the help's codes are the README's:\n{help}");
    for sub in ["completions", "man"] {
        assert!(
            help.contains(&format!("\n  {sub} ")),
            "{sub} listed: {help}"
        );
    }
}

#[test]
fn every_subcommand_help_ends_with_an_example_of_it() {
    for sub in SUBCOMMANDS {
        for flag in ["-h", "--help"] {
            let out = tailscope(&[sub, flag]);
            assert_eq!(out.status.code(), Some(0));
            let help = stdout(&out);
            let lines: Vec<&str> = help.trim_end().lines().collect();
            let heading = lines
                .iter()
                .rposition(|l| l.starts_with("Example"))
                .unwrap_or_else(|| panic!("{sub} {flag}: no example:\n{help}"));
            let examples = &lines[heading + 1..];
            assert!(!examples.is_empty(), "{sub} {flag}:\n{help}");
            for example in examples {
                assert!(
                    example.starts_with(&format!("  tailscope {sub} ")),
                    "{sub} {flag}: {example:?} is not an example of {sub}"
                );
            }
        }
    }
}

#[test]
fn version_names_the_commit_and_what_is_compiled_in() {
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    // As build.rs reads it (unknown outside a checkout), and as git itself does.
    let commit = build_script::commit_of(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    if let Some(git) = git.ok().filter(|g| g.status.success()) {
        assert_eq!(commit, stdout(&git).trim());
    }
    let short = tailscope(&["-V"]);
    assert_eq!(
        stdout(&short),
        format!(
            "tailscope {} (commit {commit})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let long = tailscope(&["--version"]);
    let text = stdout(&long);
    assert!(
        text.starts_with(&format!(
            "tailscope {} (commit {commit})\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    for feature in [
        "engines: io_uring",
        "tokio",
        "TLS: rustls",
        "HTTP/1.1",
        "HTTP/2",
        "h2c",
    ] {
        assert!(text.contains(feature), "{feature} missing:\n{text}");
    }
}

#[test]
fn the_build_script_says_unknown_outside_a_git_checkout() {
    // A directory under target/tmp is inside this checkout but not its top: a tarball
    // unpacked inside some other repository must not take that repository's commit.
    let dir = scratch_dir("not-a-checkout");
    assert_eq!(build_script::commit_of(dir.path()), "unknown");
    assert_eq!(
        build_script::commit_of(std::path::Path::new("/nonexistent/tailscope")),
        "unknown"
    );
}

/// Checks, with Python's csv module, that each CSV file's rows are the report's series and
/// slowest requests: prints "ok SERIES SLOWEST" or what differs.
const COMPARE_PY: &str = r#"
import csv, json, sys
report = json.load(open(sys.argv[1]))
# Absent in the JSON: what the report skips when it is its default (a series' unfinished
# count of 0, a slow request that finished); anything else absent is null (an empty cell).
ABSENT = {"timeseries": {"unfinished": 0}, "slowest": {"unfinished": False}}

def value(obj, path, absent):
    for part in path.split("."):
        if isinstance(obj, list):
            i = int(part)
            obj = obj[i] if i < len(obj) else None
        elif isinstance(obj, dict):
            obj = obj.get(part, absent.get(part))
        else:
            return None
    return obj

def same(cell, v):
    if v is None:
        return cell == ""
    if isinstance(v, bool):
        return cell == ("true" if v else "false")
    if isinstance(v, (int, float)):
        return cell != "" and float(cell) == float(v)
    return cell == str(v)

def check(path, field):
    rows_json = report[field]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(rows_json):
        sys.exit(f"{path}: {len(rows)} rows, the JSON has {len(rows_json)}")
    for i, (row, obj) in enumerate(zip(rows, rows_json)):
        for column, cell in row.items():
            v = value(obj, column, ABSENT[field])
            if not same(cell, v):
                sys.exit(f"{path} row {i} {column}: {cell!r} but the JSON has {v!r}")
    return rows

series = check(sys.argv[2], "timeseries")
slowest = check(sys.argv[3], "slowest")
cpus = [c for c in series[0] if c.startswith("cpu_busy_pct.")] if series else []
print("ok", len(series), len(slowest), len(cpus), ",".join(series[0].keys()) if series else "")
"#;

#[test]
fn the_csv_rows_are_the_json_series_and_slowest_requests() {
    if !common::has_tool("python3", "--version") {
        common::skip("python3 not installed (apt-get install python3)");
        return;
    }
    // One request in 50 answered 30 ms late, so that the slowest are not all alike.
    let server = serve(|n| {
        if n % 50 == 7 {
            Reply::Delay(std::time::Duration::from_millis(30), ok("slow"))
        } else {
            Reply::Send(ok("Hello, World!"))
        }
    });
    let dir = scratch_dir("csv");
    let (json, series, slowest) = (
        dir.path().join("run.json"),
        dir.path().join("seconds.csv"),
        dir.path().join("slowest.csv"),
    );
    let out = tailscope(&[
        "run",
        &server.url("/"),
        "-z",
        "2500ms",
        "-c",
        "4",
        "--threads",
        "1",
        "--no-tui",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        series.to_str().unwrap(),
        "--csv-slowest",
        slowest.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let check = Command::new("python3")
        .args(["-c", COMPARE_PY])
        .args([&json, &series, &slowest])
        .output()
        .expect("python3 runs");
    let said = stdout(&check);
    assert!(check.status.success(), "{said}{}", stderr(&check));
    let words: Vec<&str> = said.split_whitespace().collect();
    assert_eq!(words[0], "ok", "{said}");
    let rows: usize = words[1].parse().unwrap();
    let slow: usize = words[2].parse().unwrap();
    assert!(rows >= 2, "a row a second of a 2.5 s run: {said}");
    assert!(slow >= 1, "the slowest requests: {said}");
    let report = common::read_json(&json);
    assert_eq!(rows, report["timeseries"].as_array().unwrap().len());
    // The header names the JSON's fields, the profiler's CPUs among them where it read them.
    let header = words.get(4).copied().unwrap_or_default();
    assert!(
        header.starts_with(
            "t_s,partial,requests,errors,timeouts,unfinished,retransmits,p50_us,p99_us,max_us"
        ),
        "{header}"
    );
    let cpus_in_json = report["timeseries"][0]["cpu_busy_pct"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(words[3], cpus_in_json.to_string(), "{said}");
}

#[test]
fn csv_outputs_are_checked_before_the_run_like_every_output() {
    let dir = scratch_dir("csv-refused");
    let same = dir.path().join("same.csv");
    for (args, message) in [
        (
            vec!["--csv", "-"],
            "--csv takes a file path, not '-': only --json writes to stdout",
        ),
        (
            vec![
                "--csv",
                same.to_str().unwrap(),
                "--csv-slowest",
                same.to_str().unwrap(),
            ],
            "--csv-slowest is the same file as --csv",
        ),
    ] {
        let mut all = vec!["run", "http://127.0.0.1:9/", "-z", "1s"];
        all.extend(args);
        let out = tailscope(&all);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(message), "{}", stderr(&out));
    }
}
