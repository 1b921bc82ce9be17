//! The guardian that tailscope forks beside a launched target (crates/targets/src/sys.rs):
//! it is titled so that what a person types to stop a run (`pkill tailscope`, `pgrep -f
//! 'tailscope run'`) does not name it, and when it is killed together with tailscope
//! (`pkill -9 -f tailscope`), the target's PID namespace still ends its whole tree: its
//! init dies with tailscope (PR_SET_PDEATHSIG) and the kernel kills every process in it, a
//! server forked by a shell that does not exec it included. The SIGKILL of tailscope alone,
//! which the guardian handles, is in tests/tree.rs.
//!
//! Where the namespace cannot be made (unshare(2) refused: no CAP_SYS_ADMIN), the last net
//! is the root's PR_SET_PDEATHSIG (SIGTERM), which reaches the root only: a server that
//! handles SIGTERM by ending its own children (nginx's master) goes with its tree, a shell's
//! children do not (`sh -c 'server; true'` loses the shell and leaves the server); the test
//! of the shell's server is then skipped, saying so.

use crate::common;

use std::time::{Duration, Instant};

use common::tree::{has_python, launch_and_read_pid, nginx_bin, tree_of, SH_TEMPLATE};
use std::path::PathBuf;

/// The guardian of a run: the child of tailscope that is not the target's root. Forked at
/// launch, before the ready line the root's pid was read from.
fn guardian_of(tailscope: u32, root: u64) -> u64 {
    let others: Vec<u64> = common::children(tailscope)
        .into_iter()
        .filter(|&p| p != root)
        .collect();
    assert_eq!(
        others.len(),
        1,
        "tailscope {tailscope} has one child besides the target's root {root}: {others:?}"
    );
    others[0]
}

/// A 60 s run of one connection against [`SH_TEMPLATE`] (a server forked by `sh -c`), with
/// the target's root pid; none (said) without python3.
fn launch_sh_target() -> Option<(std::process::Child, u64)> {
    if !has_python() {
        common::skip("python3 not installed (apt-get install python3)");
        return None;
    }
    Some(launch_and_read_pid(&[
        "run",
        "--target",
        SH_TEMPLATE,
        "--path",
        "/",
        "-z",
        "60s",
        "-c",
        "1",
    ]))
}

/// `/proc/PID/cmdline` with its NULs as spaces and trailing ones dropped.
fn cmdline(pid: u64) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .replace('\0', " ")
}

fn comm(pid: u64) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

fn sigkill(pid: u64) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[test]
fn the_guardian_is_titled_apart_from_tailscope_run() {
    let Some((mut child, root)) = launch_sh_target() else {
        return;
    };
    let guardian = guardian_of(child.id(), root);
    // It retitles itself first thing after the fork; give it a moment on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(3);
    while cmdline(guardian) != "tailscope-guardian" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (line, name) = (cmdline(guardian), comm(guardian));
    let tailscope_line = cmdline(u64::from(child.id()));
    common::interrupt(child.id());
    let _ = child.wait();
    assert_eq!(line, "tailscope-guardian", "the guardian's command line");
    // `pkill tailscope` matches the name (comm): the guardian's does not contain it.
    assert_eq!(name, "ts-guardian", "the guardian's name");
    assert!(
        tailscope_line.contains(" run ") && !line.contains("run"),
        "`pgrep -f 'tailscope run'` names tailscope ({tailscope_line:?}), not the guardian"
    );
    assert!(
        common::gone(guardian),
        "the guardian exits with a stopped run"
    );
}

#[test]
fn killing_tailscope_and_its_guardian_still_ends_nginx_and_its_workers() {
    let Some(_) = nginx_bin() else {
        common::skip("nginx not installed (apt-get install nginx-light)");
        return;
    };
    let (mut child, root) = launch_and_read_pid(&[
        "run", "--target", "nginx:2", "-z", "60s", "-c", "2", "--json", "-",
    ]);
    let tailscope = child.id();
    let guardian = guardian_of(tailscope, root);
    // nginx forks its workers after the master is ready; they are the tree to end.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut tree = tree_of(root);
    while tree.len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        tree = tree_of(root);
    }
    assert!(tree.len() >= 3, "nginx's master and two workers: {tree:?}");
    // The guardian first: its death alone ends nothing (it kills only once tailscope is
    // gone), so what ends the tree after tailscope's SIGKILL is the last net, not it.
    sigkill(guardian);
    assert!(common::gone(guardian), "the guardian was killed");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        tree.iter().all(|&p| common::alive(p)),
        "the guardian's death alone ended nothing: {tree:?}"
    );
    child.kill().unwrap();
    let _ = child.wait();
    // The namespace's init dies with tailscope and the kernel kills the namespace (or,
    // without one, SIGTERM to the master: it stops its workers and exits).
    let survivors = survivors_within(&tree, Duration::from_secs(10));
    // What the guardian would have removed: nginx's temporary directory of this run.
    let prefix = format!("tailscope-nginx-{tailscope}-");
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    assert_eq!(
        survivors,
        Vec::<u64>::new(),
        "nothing of nginx's tree {tree:?} outlives tailscope and its guardian by 10 s"
    );
}

/// What is still alive of `tree` after up to `within`; the survivors are then SIGKILLed, so
/// that a failed test leaves nothing behind.
fn survivors_within(tree: &[u64], within: Duration) -> Vec<u64> {
    let deadline = Instant::now() + within;
    let mut survivors = tree.to_vec();
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        survivors.retain(|&p| common::alive(p));
    }
    for &p in &survivors {
        sigkill(p);
    }
    survivors
}

fn pid_namespace(pid: u64) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

#[test]
fn killing_tailscope_and_its_guardian_ends_a_server_forked_by_a_shell() {
    // `sh -c 'python3 -m http.server …; true'`: the shell forks the server and waits.
    let Some((mut child, root)) = launch_sh_target() else {
        return;
    };
    let tailscope = child.id();
    let guardian = guardian_of(tailscope, root);
    let tree = tree_of(root);
    let server = tree
        .iter()
        .copied()
        .find(|&p| comm(p) == "python3")
        .unwrap_or_else(|| panic!("the server is in the target's tree {tree:?}"));
    let own = pid_namespace(u64::from(std::process::id()));
    if pid_namespace(server) == own {
        sigkill(tailscope.into());
        sigkill(guardian);
        let _ = child.wait();
        survivors_within(&tree, Duration::from_secs(5));
        common::skip("the target runs in no PID namespace of its own (unshare(2) refused: tailscope needs CAP_SYS_ADMIN for it)");
        return;
    }
    // Both at once, as `pkill -9 -f tailscope` does.
    sigkill(guardian);
    child.kill().unwrap();
    let _ = child.wait();
    let survivors = survivors_within(&tree, Duration::from_secs(5));
    assert_eq!(
        survivors,
        Vec::<u64>::new(),
        "nothing of the tree {tree:?} (the server {server}) outlives tailscope and its guardian by 5 s"
    );
}
