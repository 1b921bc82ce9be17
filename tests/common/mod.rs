//! Test servers that behave, and misbehave, on purpose; and a runner for the binary.
//!
//! Each server binds 127.0.0.1:0, runs a thread per connection, answers every complete
//! request found in one read with one write (so pipelining is exercised), and asks a
//! behaviour closure what to do with each request.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod engine;
pub mod tmux;
pub mod tree;
#[allow(unused_imports)]
pub(crate) use engine::{engine_tests, Engine};

/// What a test server does with one request.
pub enum Reply {
    /// Send these bytes.
    Send(Vec<u8>),
    /// Send these bytes, then close the connection gracefully.
    SendThenClose(Vec<u8>),
    /// Wait, then send these bytes.
    Delay(Duration, Vec<u8>),
    /// Close gracefully without answering.
    Close,
    /// Close with a TCP reset (SO_LINGER 0).
    Reset,
    /// Never answer; keep the connection open.
    Hang,
}

/// A plain 200 with a body, keep-alive.
pub fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Counters a test server keeps.
#[derive(Default)]
pub struct Stats {
    /// Requests received (complete heads).
    pub received: AtomicU64,
    /// Requests answered with a full response.
    pub answered: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// The most requests found complete in one read (pipelining depth seen).
    pub max_batch: AtomicU64,
    /// The head of the first request received, as sent.
    pub first_head: std::sync::OnceLock<String>,
}

/// A running test server.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub stats: Arc<Stats>,
}

impl TestServer {
    /// `http://ADDR/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// Starts a server; `behaviour(n)` decides the reply to the n-th request it received
/// (0-based, over all connections).
pub fn serve(behaviour: impl Fn(u64) -> Reply + Send + Sync + 'static) -> TestServer {
    // A backlog of 4,096, not std's default: the open-file-limit test opens 1,000 connections
    // at once (the io_uring engine issues them together), more than a small accept queue
    // holds, and in one CI rehearsal one of them was reset.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    socket.listen(4096).unwrap();
    let listener: TcpListener = socket.into();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    let behaviour = Arc::new(behaviour);
    let s = stats.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            s.connections.fetch_add(1, Ordering::SeqCst);
            let s = s.clone();
            let behaviour = behaviour.clone();
            std::thread::spawn(move || handle(conn, &s, &*behaviour));
        }
    });
    TestServer { addr, stats }
}

fn handle(mut conn: TcpStream, stats: &Stats, behaviour: &dyn Fn(u64) -> Reply) {
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut batch = 0;
        while let Some(len) = request_len(&buf) {
            stats
                .first_head
                .get_or_init(|| String::from_utf8_lossy(&buf[..len]).into_owned());
            buf.drain(..len);
            batch += 1;
            let index = stats.received.fetch_add(1, Ordering::SeqCst);
            match behaviour(index) {
                Reply::Send(bytes) => {
                    out.extend_from_slice(&bytes);
                    stats.answered.fetch_add(1, Ordering::SeqCst);
                }
                Reply::SendThenClose(bytes) => {
                    out.extend_from_slice(&bytes);
                    stats.answered.fetch_add(1, Ordering::SeqCst);
                    let _ = conn.write_all(&out);
                    return;
                }
                Reply::Delay(d, bytes) => {
                    let _ = conn.write_all(&out);
                    out.clear();
                    std::thread::sleep(d);
                    out.extend_from_slice(&bytes);
                    stats.answered.fetch_add(1, Ordering::SeqCst);
                }
                Reply::Close => {
                    let _ = conn.write_all(&out);
                    return;
                }
                Reply::Reset => {
                    let _ = conn.write_all(&out);
                    let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
                    return;
                }
                Reply::Hang => {
                    let _ = conn.write_all(&out);
                    while matches!(conn.read(&mut chunk), Ok(n) if n > 0) {}
                    return;
                }
            }
        }
        stats.max_batch.fetch_max(batch, Ordering::SeqCst);
        if !out.is_empty() && conn.write_all(&out).is_err() {
            return;
        }
    }
}

/// Length of the first complete request in `buf` (head plus Content-Length body).
fn request_len(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let body = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= head_end + body).then_some(head_end + body)
}

/// Held by the tests that need the machine quiet: those that read system-wide kernel counters
/// (TCP retransmits, listen overflows), pin busy loops to a CPU, or compare CPU figures. A test
/// binary holds several former test files whose tests now run concurrently (cargo ran the
/// files' binaries one after another); one lock for all of them keeps two such tests apart
/// across files as each file's own lock did within it.
pub fn quiet_machine() -> std::sync::MutexGuard<'static, ()> {
    static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());
    QUIET.lock().unwrap_or_else(|e| e.into_inner())
}

/// `tailscope ARGS` for a command that starts the reference server (a suite with an embedded
/// target), which must exit 0: its output, or `None` with the test skipped visibly where
/// io_uring is unavailable (the caller returns).
pub fn ok_unless_no_uring(args: &[&str]) -> Option<Output> {
    let out = tailscope(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("io_uring is not available") {
        skip("io_uring unavailable");
        return None;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    Some(out)
}

/// Where skipped tests are recorded, one line each: `target/tmp/test-skips.txt`. `.ci/run`
/// deletes it before the tests and fails, listing it, if any test wrote to it.
pub fn skips_file() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-skips.txt")
}

/// Where tests that ran but could not reproduce what they look for on this machine are
/// recorded (`target/tmp/test-inconclusive.txt`); `.ci/run` lists them without failing.
pub fn inconclusive_file() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-inconclusive.txt")
}

/// The running test, as `binary::test_name` (libtest names each test's thread after it).
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_string())
        })
        .unwrap_or_default();
    let thread = std::thread::current();
    format!("{binary}::{}", thread.name().unwrap_or("?"))
}

/// Says, visibly, that the calling test is skipped and why (`skipped: binary::test: reason`),
/// and records it in [`skips_file`]. Call it, then `return`, when the test needs something
/// the machine does not have: `common::skip("tmux not installed (apt-get install tmux)")`.
///
/// The line goes to the process's stderr directly, not through `eprintln!`, which the test
/// harness captures and shows only for failed tests: a skip is seen in every `cargo test`.
pub fn skip(reason: impl std::fmt::Display) {
    record(&skips_file(), "skipped", &reason.to_string());
}

/// Like [`skip`], for a test that ran but whose effect did not happen on this machine (a
/// kernel that acknowledged at once): said and recorded in [`inconclusive_file`], which CI
/// lists but does not fail on.
pub fn inconclusive(reason: impl std::fmt::Display) {
    record(&inconclusive_file(), "inconclusive", &reason.to_string());
}

fn record(file: &std::path::Path, what: &str, reason: &str) {
    let line = format!("{what}: {}: {reason}", test_name());
    // Written with write_all on the handle: print!/eprint! output is captured per test.
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// Whether `program` can be run (`program ARG` starts at all), for tests that need a tool.
pub fn has_tool(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Starts `tailscope serve --addr 127.0.0.1:0 --threads 1 FLAGS` and reads the address it
/// prints. `None`, after saying so, where the reference server cannot start because io_uring
/// is unavailable; any other failure to start fails the test.
pub fn spawn_serve(flags: &[&str]) -> Option<(std::process::Child, String)> {
    spawn_serve_as(&[&["--threads", "1"], flags].concat())
}

/// [`spawn_serve`] with only the flags given (its own number of worker threads).
pub fn spawn_serve_as(flags: &[&str]) -> Option<(std::process::Child, String)> {
    use std::io::BufRead;
    let mut child = tailscope_command()
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(flags)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the tailscope binary runs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if let Some(addr) = line.trim().strip_prefix("listening on http://") {
        return Some((child, addr.to_string()));
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(err.contains("io_uring"), "serve failed ({status}): {err}");
    skip(format!("io_uring unavailable here: {}", err.trim()));
    None
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Waits up to 3 s for `pid` to be gone (SIGKILL and the reaping of orphans take a moment).
pub fn gone(pid: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Live (not zombie) children of `ppid`, from /proc.
pub fn children(ppid: u32) -> Vec<u64> {
    tree::all_parents()
        .into_iter()
        .filter(|&(_, parent, zombie)| parent == u64::from(ppid) && !zombie)
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Starts tailscope with `args` (stdout and stderr piped) and reads its stderr until `marker`
/// shows up (or it ends, or 20 s pass); returns the child and what was read.
pub fn spawn_until(args: &[&str], marker: &str) -> (std::process::Child, String) {
    let mut child = tailscope_command()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the tailscope binary runs");
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 512];
    let started = std::time::Instant::now();
    while !seen.contains(marker) && started.elapsed() < Duration::from_secs(20) {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => seen.push_str(&String::from_utf8_lossy(&buf[..k])),
        }
    }
    // Kept open: tailscope still writes to stderr (its summary, progress).
    child.stderr = Some(stderr);
    (child, seen)
}

/// Sends SIGINT to `pid`, as Ctrl-C would.
pub fn interrupt(pid: u32) {
    let ok = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success());
}

/// The tailscope binary as a command, its journals (of runs that name no report file) sent
/// to the target's temp dir, not into the source tree: every test that starts tailscope
/// starts it with this.
pub fn tailscope_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tailscope"));
    c.env("TAILSCOPE_JOURNAL_DIR", JOURNAL_DIR);
    c
}

/// Where the tests' runs that name no report file put their journals (set as
/// `TAILSCOPE_JOURNAL_DIR` by [`tailscope_command`]; a test that starts tailscope through a
/// shell, tmux or `ip netns exec` sets it likewise).
pub const JOURNAL_DIR: &str = env!("CARGO_TARGET_TMPDIR");

/// Runs the tailscope binary with these arguments (stdin closed, not a terminal).
pub fn tailscope(args: &[&str]) -> Output {
    tailscope_command()
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the tailscope binary runs")
}

/// Runs `tailscope suite FILE --json JSON`, checks that it exited 0, and returns the
/// suite's report.
pub fn run_suite(file: &std::path::Path, json: &std::path::Path) -> serde_json::Value {
    let out = tailscope(&[
        "suite",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

/// Runs `tailscope run URL ARGS --json -` and returns the exit code, the parsed report
/// and stderr.
pub fn run_json(url: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = vec!["run", url, "--json", "-"];
    all.extend_from_slice(args);
    let out = tailscope(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// A counter of the report, as a number.
pub fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A loopback listener with a backlog of 1 that never accepts: once its queue is full the
/// kernel drops further SYNs. Keep the socket alive as long as the listener should be.
pub fn never_accepting_listener() -> (socket2::Socket, SocketAddr) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    socket.listen(1).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    (socket, addr)
}

/// [`never_accepting_listener`] with its queue filled, so no further handshake finishes;
/// the connections that filled it come back too, to be kept open.
pub fn full_listener() -> (socket2::Socket, SocketAddr, Vec<TcpStream>) {
    let (socket, addr) = never_accepting_listener();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => fillers.push(s),
            Err(_) => break,
        }
    }
    (socket, addr, fillers)
}

/// The hypervisor's steal over a run (%), the mean of the CPUs its report profiled, as the
/// cpu_contention rule reads it (it names contention from 5 %).
pub fn mean_steal_pct(report: &serde_json::Value) -> f64 {
    let cpus = report["profile"]["cpus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    cpus.iter()
        .map(|c| c["steal_pct"].as_f64().unwrap_or(0.0))
        .sum::<f64>()
        / cpus.len().max(1) as f64
}

/// Share of all CPUs (0..=1) that something else kept busy over 300 ms, read from /proc/stat
/// before a test starts its own load.
pub fn machine_busy_before() -> f64 {
    fn sample() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|t| t.parse().ok())
            .collect();
        let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
        Some((ticks.iter().take(8).sum(), idle))
    }
    let Some((total0, idle0)) = sample() else {
        return 0.0;
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let Some((total1, idle1)) = sample() else {
        return 0.0;
    };
    let total = total1.saturating_sub(total0).max(1);
    1.0 - idle1.saturating_sub(idle0) as f64 / total as f64
}

/// A directory of the test's own under cargo's `target/tmp`, removed with everything in it
/// when the returned guard drops (a failing assertion unwinds through it too): tests leave
/// nothing behind in /tmp or anywhere else.
pub fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a scratch directory under target/tmp")
}

/// A JSON file, parsed (a test fails saying which file it could not read).
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Now, in seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Waits for `child` at most `limit`, killing it past that: a test never hangs.
pub fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> i32 {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a process ran past {limit:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether this machine lets the stack sampler run (perf sampling allowed); where it does not,
/// the test is skipped visibly and the caller returns.
pub fn may_sample() -> bool {
    match tailscope_targets::stacks::sampling_allowed() {
        Ok(()) => true,
        Err(e) => {
            skip(format!("perf sampling not allowed here: {e}"));
            false
        }
    }
}
