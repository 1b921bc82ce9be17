//! The process trees of real servers (nginx, gunicorn, a server forked by `sh -c`): finding
//! them, launching them through tailscope, and checking that nothing of them outlives it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub fn nginx_bin() -> Option<PathBuf> {
    [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

pub fn has_gunicorn() -> bool {
    Command::new("python3")
        .args(["-m", "gunicorn", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn has_python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A WSGI app for gunicorn, in `dir/app.py`.
pub fn write_wsgi_app(dir: &Path) {
    std::fs::write(
        dir.join("app.py"),
        "def app(environ, start_response):\n    body = b'Hello, World!'\n    start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', str(len(body)))])\n    return [body]\n",
    )
    .unwrap();
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server commands under test, as `--target` takes them (`{port}` filled by tailscope).
pub fn gunicorn_template(dir: &Path) -> String {
    format!(
        "command:python3 -m gunicorn --chdir {} --workers 2 --max-requests 300 --max-requests-jitter 30 -b 127.0.0.1:{{port}} app:app",
        dir.display()
    )
}

/// `sh -c` that forks the server (the `; true` keeps the shell from exec'ing it).
pub const SH_TEMPLATE: &str =
    "command:python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1; true";

/// (pid, ppid) of every process, from /proc.
pub fn all_parents() -> Vec<(u64, u64, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let pid = head.split_whitespace().next().and_then(|p| p.parse().ok());
        if let (Some(pid), Some(ppid)) = (pid, f.get(1).and_then(|p| p.parse().ok())) {
            out.push((pid, ppid, f[0] == "Z"));
        }
    }
    out
}

/// `root` and every live process descended from it.
pub fn tree_of(root: u64) -> Vec<u64> {
    let all = all_parents();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            all.iter()
                .filter(|(_, ppid, zombie)| *ppid == parent && !zombie)
                .map(|(pid, _, _)| *pid),
        );
        i += 1;
    }
    tree
}

/// Starts `tailscope ARGS` with a launched target and returns it with the pid of the target's
/// root: the process tailscope launched, found by walking up from the serving process whose
/// pid its `… ready at URL (pid N)` line (which may come in pieces) names (nginx's master,
/// the python under a `sh -c`, below tailscope's `ts-init` pair).
pub fn launch_and_read_pid(args: &[&str]) -> (std::process::Child, u64) {
    use std::io::Read;
    let (mut child, mut seen) = super::spawn_until(args, "ready at");
    let mut stderr = child.stderr.take().unwrap();
    let mut buf = [0u8; 256];
    while !seen
        .split("ready at")
        .nth(1)
        .is_some_and(|l| l.contains(')'))
    {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => seen.push_str(&String::from_utf8_lossy(&buf[..k])),
        }
    }
    child.stderr = Some(stderr);
    let server: u64 = seen
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no 'ready at … (pid N)' line: {seen}"));
    let tailscope = u64::from(child.id());
    let parents = all_parents();
    let parent_of = |pid: u64| parents.iter().find(|p| p.0 == pid).map(|p| p.1);
    let mut root = server;
    while let Some(parent) = parent_of(root).filter(|&p| p != tailscope) {
        assert!(
            parent > 1,
            "the server {server} is not below tailscope {tailscope}"
        );
        root = parent;
    }
    (child, root)
}

/// SIGKILLs tailscope in the middle of a launched run: after 2 s nothing of the target's tree
/// is alive and no temporary directory of it is left.
pub fn sigkill_leaves_nothing(target: &str, min_processes: usize) {
    let (mut child, root) = launch_and_read_pid(&[
        "run", "--target", target, "-z", "60s", "-c", "4", "--json", "-",
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    let tree = tree_of(root);
    assert!(
        tree.len() >= min_processes,
        "{target}: the tree runs: {tree:?}"
    );
    let tailscope_pid = child.id();
    child.kill().unwrap();
    let _ = child.wait();
    std::thread::sleep(Duration::from_secs(2));
    let survivors: Vec<u64> = tree.iter().copied().filter(|&p| super::alive(p)).collect();
    assert_eq!(
        survivors,
        Vec::<u64>::new(),
        "{target}: nothing of the tree {tree:?} outlives a SIGKILL of tailscope by 2 s"
    );
    let prefix = format!("tailscope-nginx-{tailscope_pid}-");
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "{target}: no temporary directory left"
    );
}
