//! The command line's interface, pinned: every subcommand's `--help` and the refusal (exit
//! code and message) of a list of bad inputs. The flags and their validation moved between
//! files and crates (issue 10): what a user reads must not change with them. Nothing here
//! sends a request: every refusal comes before anything starts.

use crate::common;

use common::tailscope;

/// `tailscope ARGS…` as exit code, stdout and stderr, for a snapshot. The CPUs this process
/// may use are the machine's, not the interface's: they read `[CPUS]`.
fn outcome(args: &[&str]) -> String {
    let out = tailscope(args);
    let text = format!(
        "$ tailscope {}\nexit {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let here = tailscope_targets::cpus::format_list(&tailscope_targets::cpus::available());
    without_commit(&text.replace(&format!("(available: {here})"), "(available: [CPUS])"))
}

/// `text` with the commit `--version` names (`(commit 3e4e641)`) as `(commit [COMMIT])`: it
/// changes with every commit (tests/cli_conventions.rs checks it is the checkout's).
fn without_commit(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("(commit ") {
        let start = at + "(commit ".len();
        let Some(end) = rest[start..].find(')') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str("[COMMIT]");
        rest = &rest[start + end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_help_text_is_kept() {
    let helps: Vec<String> = [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["serve", "--help"],
        &["suite", "--help"],
        &["compare", "--help"],
        &["report", "--help"],
        &["merge", "--help"],
        &["help", "run"],
    ]
    .iter()
    .map(|args| outcome(args))
    .collect();
    insta::assert_snapshot!(helps.join("\n"));
}

#[test]
fn the_help_says_what_bare_tailscope_does() {
    let out = tailscope(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains(
            "Without a subcommand, tailscope starts the embedded io_uring reference server"
        ),
        "{help}"
    );
}

#[test]
fn every_refusal_is_kept() {
    const URL: &str = "http://127.0.0.1:9/";
    let refusals: Vec<String> = [
        &["run"][..],
        &["run", URL, "-c", "0"],
        &["run", URL, "-c", "-5"],
        &["run", URL, "--idle-conns", "-1"],
        // Past any integer type: the range named as for 2000000, not "number too large".
        &["run", URL, "-c", "99999999999999999999"],
        &["run", URL, "-n", "99999999999999999999"],
        &["run", URL, "--threads", "-99999999999999999999"],
        &["run", URL, "--pipeline", "1x"],
        &["run", URL, "-n", "5", "-z", "1s"],
        &["run", URL, "-q", "1e-20"],
        &["run", URL, "-z", "-1s"],
        &["run", URL, "-z", "--json", "x.json"],
        &["run", URL, "--path", "/x"],
        &["run", URL, "--tls"],
        &["run", URL, "--server-cpus", "0"],
        &["run", URL, "--insecure"],
        &["run", URL, "-H", "no colon"],
        &["run", URL, "--url-order", "random"],
        &["run", URL, "-D", "does/not/exist"],
        &["run", URL, "--pid", "0"],
        &["run", URL, "--pid", "4194303"],
        &["run", URL, "--fail-if", "p99 <"],
        &["run", URL, "--load", "does/not/exist.toml"],
        &["run", URL, "--segment", "3/2"],
        &[
            "run",
            URL,
            "--segment-from-env=NOT_SET_ANYWHERE",
            "--segments",
            "2",
        ],
        &["run", URL, "--streams", "2"],
        &["run", "ftp://127.0.0.1/"],
        &["run", "http://127.0.0.1:0/"],
        &["run", URL, "/other"],
        &["run", "--target", "nonsense"],
        &["run", "--target", "embedded", "--path", "x"],
        &["run", "--target", "embedded", "--server-cpus", "100000"],
        // Both flags name the CPUs this process may use the same way (once `0,1` and `0-1`).
        &["run", "--target", "embedded", "--cpus", "100000"],
        &["run", URL, "--cpus", "100000"],
        &["serve", "--stall-every", "0s", "--stall-for", "1s"],
        &["serve", "--burn-every", "1s", "--burn-for", "0s"],
        &["serve", "--backlog", "0"],
        &["compare", "a.json", "b.json", "--fail-if-regression", "-5"],
        &["compare", "does/not/a.json", "does/not/b.json"],
        &["compare", "a.json"],
        &[
            "compare", "a.json", "b.json", "--base", "c.json", "--new", "d.json",
        ],
        &["compare", "--base", "a.json"],
        &["compare", "a.json", "b.json", "--fail-if-regression", "5%%"],
        &["report", "does/not/a.json", "--html", "out.html"],
        &["merge"],
        &["merge", "does/not/a.json"],
        &["merge", "does/not/a.json", "--fail-if", "nonsense"],
        &["suite", "does/not/suite.toml"],
        &["nonsense"],
    ]
    .iter()
    .map(|args| outcome(args))
    .collect();
    insta::assert_snapshot!(refusals.join("\n"));
}

#[test]
fn two_urls_are_refused_with_the_ways_to_load_several_and_nothing_is_sent() {
    // Two servers that would accept: the refusal must come before any connection.
    let listeners: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let urls: Vec<String> = listeners
        .iter()
        .map(|l| format!("http://{}/", l.local_addr().unwrap()))
        .collect();
    let out = tailscope(&["run", &urls[0], &urls[1], "-z", "1s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "one URL per run: '{}' is a second URL (after '{}')",
            urls[1], urls[0]
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("--urls-from-file FILE") && stderr.contains("--load FILE.toml"),
        "{stderr}"
    );
    assert!(
        stderr.contains("then 'tailscope compare A.json B.json'"),
        "{stderr}"
    );
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    assert!(out.stdout.is_empty());
    for l in &listeners {
        l.set_nonblocking(true).unwrap();
        let err = l.accept().expect_err("no connection was made");
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    }
}
