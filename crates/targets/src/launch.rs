//! The lifecycle of a launched server: spawn, ready, stop, and never leave one behind.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::tree::ProcessTree;
use crate::{sys, Error, TargetSpec};

mod command;

pub use command::embedded_args;
use command::{command_line, prepare, Prepared};

/// Process groups launched and not yet stopped, for [`kill_all_launched`].
static LAUNCHED: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// How much of a target's stderr is kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;
/// How long a target gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Kills (SIGKILL) every launched target's process group. For a signal handler's last
/// resort, when tailscope must exit at once and guards will not run (each target's guardian
/// then kills what is left of its tree when tailscope's process ends).
pub fn kill_all_launched() {
    if let Ok(groups) = LAUNCHED.lock() {
        for &pgid in groups.iter() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// What the embedded server prints on stdout once it listens: `listening on http://ADDR`.
/// `tailscope serve` prints it and the launcher reads it: one definition for both.
pub const READY_LINE_PREFIX: &str = "listening on http://";

/// A launched, ready server. Stopping it (or dropping it) stops its whole process tree.
pub struct Target {
    name: String,
    kind: &'static str,
    command_line: String,
    child: Option<Child>,
    pgid: i32,
    /// The process that serves (see [`serving_pid`]), once the target is ready.
    server_pid: Option<i32>,
    port: u16,
    server_cpus: Vec<usize>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// The thread that keeps `stderr`; finished once the pipe closed.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    temp_dir: Option<PathBuf>,
    /// Kills the tree if tailscope dies without stopping it (`None`: it could not be forked;
    /// the target's PID namespace, or where there is none the root's PR_SET_PDEATHSIG, is
    /// then the only safety net; see [`sys::contain_and_pin`]).
    guardian: Option<sys::Guardian>,
    /// Served over TLS: its throw-away certificate's files (in `temp_dir`).
    tls: Option<crate::cert::TlsFiles>,
}

/// The process that serves a launched target: of its process group, the oldest process that
/// holds a socket listening on `port` (nginx's master rather than a worker, python rather
/// than the `sh -c` around it; tailscope's `ts-init` pair holds none). `None` when no member
/// holds one (a server reached through a proxy outside the group) or it cannot be read.
fn serving_pid(pgid: i32, port: u16) -> Option<i32> {
    let sockets: Vec<String> = crate::listen::listeners(port)
        .ok()?
        .iter()
        .map(|l| format!("socket:[{}]", l.inode))
        .collect();
    ProcessTree::for_killing(pgid as u32, Some(pgid as u32))
        .members()
        .filter(|m| m.alive && !m.stat.zombie && crate::listen::holds(m.stat.pid, &sockets))
        .min_by_key(|m| (m.stat.starttime, m.stat.pid))
        .map(|m| m.stat.pid)
}

/// The reader ends at end of file: when every process holding the pipe has exited.
fn keep_tail(
    mut from: impl Read + Send + 'static,
    into: Arc<Mutex<VecDeque<u8>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let Ok(mut tail) = into.lock() else { break };
            tail.extend(&chunk[..n]);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
    })
}

impl Target {
    /// Launches `spec` on `server_cpus` (empty: anywhere) and waits until it answers HTTP.
    pub fn launch(spec: &TargetSpec, server_cpus: &[usize]) -> Result<Target, Error> {
        Self::launch_unless_stopped(spec, server_cpus, &AtomicBool::new(false))
    }

    /// As [`launch`](Self::launch), but the wait for readiness gives up as soon as `stop` is
    /// set (a Ctrl-C while a slow server starts): the target is stopped and the error is
    /// [`Error::Interrupted`], instead of the whole ready timeout running out first.
    pub fn launch_unless_stopped(
        spec: &TargetSpec,
        server_cpus: &[usize],
        stop: &AtomicBool,
    ) -> Result<Target, Error> {
        let Prepared {
            name,
            mut cmd,
            port,
            temp_dir,
            tls: tls_files,
        } = prepare(spec, server_cpus)?;
        let command_line = command_line(&cmd);
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(if port.is_none() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped());
        sys::contain_and_pin(&mut cmd, server_cpus);
        let mut child = cmd.spawn().map_err(|error| Error::Spawn {
            name: name.clone(),
            error,
        })?;
        let pgid = child.id() as i32;
        if let Ok(mut groups) = LAUNCHED.lock() {
            groups.push(pgid);
        }
        // A failed fork leaves the PID namespace (or PDEATHSIG) safety net: the run goes on.
        let guardian = sys::Guardian::spawn(child.id(), temp_dir.clone()).ok();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_reader = child
            .stderr
            .take()
            .map(|err| keep_tail(err, stderr.clone()));
        let announced = child.stdout.take().map(|out| {
            // The embedded server prints `listening on http://ADDR` once ready; the rest of
            // its stdout is drained so it never blocks on a full pipe.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut lines = BufReader::new(out).lines();
                if let Some(Ok(first)) = lines.next() {
                    let _ = tx.send(first);
                }
                for _ in lines {}
            });
            rx
        });
        let mut target = Target {
            name,
            kind: spec.kind(),
            command_line,
            child: Some(child),
            pgid,
            server_pid: None,
            port: port.unwrap_or(0),
            server_cpus: server_cpus.to_vec(),
            stderr,
            stderr_reader,
            temp_dir,
            guardian,
            tls: tls_files,
        };
        let deadline = Instant::now() + spec.ready_timeout();
        if let Some(rx) = announced {
            target.port = target.wait_announced(&rx, deadline, stop)?;
        }
        target.wait_ready(spec.ready_path(), deadline, stop)?;
        target.server_pid = serving_pid(target.pgid, target.port);
        if let (Some(pid), "command") = (target.server_pid, target.kind) {
            // `sh -c 'python3 -m http.server {port}'` is named after what serves, as its pid is.
            if let Ok(stat) = procfs::process::Process::new(pid).and_then(|p| p.stat()) {
                target.name = stat.comm;
            }
        }
        Ok(target)
    }

    fn stderr_tail(&self) -> String {
        let bytes: Vec<u8> = self
            .stderr
            .lock()
            .map(|t| t.iter().copied().collect())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn exit_error(&mut self) -> Option<Error> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        // Let the stderr reader catch the last words: it ends when the pipe closes, which a
        // loaded machine may take well over a few milliseconds to show it. Bounded, since a
        // daemonised grandchild can hold the pipe open for ever.
        let waited = Instant::now();
        while let Some(reader) = &self.stderr_reader {
            if reader.is_finished() || waited.elapsed() > Duration::from_secs(1) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(Error::Exited {
            name: self.name.clone(),
            status,
            stderr: self.stderr_tail(),
        })
    }

    fn not_ready(&self, url: String, waited: Duration) -> Error {
        Error::NotReady {
            name: self.name.clone(),
            waited,
            url,
            stderr: self.stderr_tail(),
        }
    }

    /// [`Error::Interrupted`] once `stop` is set: the caller drops (and so stops) the target.
    fn interrupted(&self, stop: &AtomicBool) -> Result<(), Error> {
        match stop.load(Ordering::SeqCst) {
            true => Err(Error::Interrupted {
                name: self.name.clone(),
            }),
            false => Ok(()),
        }
    }

    fn wait_announced(
        &mut self,
        rx: &std::sync::mpsc::Receiver<String>,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<u16, Error> {
        let started = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    let port = line
                        .trim()
                        .strip_prefix(READY_LINE_PREFIX)
                        .and_then(|addr| addr.rsplit(':').next())
                        .and_then(|p| p.trim().parse().ok());
                    return port.ok_or_else(|| {
                        self.not_ready(format!("(it printed {line:?})"), started.elapsed())
                    });
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let deadline = Instant::now() + Duration::from_secs(2);
                    while Instant::now() < deadline {
                        if let Some(e) = self.exit_error() {
                            return Err(e);
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    return Err(self.not_ready("(stdout closed)".into(), started.elapsed()));
                }
            }
            if let Some(e) = self.exit_error() {
                return Err(e);
            }
            self.interrupted(stop)?;
            if Instant::now() >= deadline {
                return Err(self.not_ready("(no 'listening on' line)".into(), started.elapsed()));
            }
        }
    }

    /// Waits until a TCP connect succeeds and an HTTP GET of `path` gets any HTTP answer.
    fn wait_ready(
        &mut self,
        path: &str,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<(), Error> {
        let started = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if let Some(e) = self.exit_error() {
                return Err(e);
            }
            self.interrupted(stop)?;
            if http_answers(addr, path) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready(format!("http://{addr}{path}"), started.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, or `https://` for a target served over TLS.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The CA that signed a TLS target's throw-away certificate: what the generator trusts.
    pub fn tls_ca(&self) -> Option<&Path> {
        self.tls.as_ref().map(|f| f.ca.as_path())
    }

    /// The process id of the process that serves (see [`serving_pid`]: nginx's master, the
    /// python under a `sh -c`), or where none was found the launched process (the group
    /// leader: the outer `ts-init` of the target's PID namespace, or the command itself where
    /// there is none), in tailscope's namespace: the pid a person looks for.
    pub fn pid(&self) -> u32 {
        self.server_pid.unwrap_or(self.pgid) as u32
    }

    /// The root of what is profiled: the command tailscope ran (the `sh -c` around a python
    /// server included, tailscope's `ts-init` pair above it not), or the launched process
    /// where the serving one was not found.
    pub fn root_pid(&self) -> u32 {
        let Some(mut pid) = self.server_pid else {
            return self.pgid as u32;
        };
        let stat = |pid: i32| {
            procfs::process::Process::new(pid)
                .and_then(|p| p.stat())
                .ok()
        };
        // Up from the server while its parent is of the command's: not one of the init pair,
        // nor tailscope (the parent of a command launched without a namespace).
        while let Some(parent) = stat(pid).map(|s| s.ppid) {
            let own = parent as u32 == std::process::id();
            if own || parent <= 1 || stat(parent).is_none_or(|s| s.comm == sys::INIT_COMM) {
                break;
            }
            pid = parent;
        }
        pid as u32
    }

    /// `embedded`, `nginx`, or the command's program.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `embedded`, `nginx` or `command`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// How the server exited, if it already has (a crash during the run).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// The command that was run, for reports.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// The CPUs it was pinned to (empty: not pinned).
    pub fn server_cpus(&self) -> &[usize] {
        &self.server_cpus
    }

    /// Stops the process tree: SIGTERM to the group and every descendant, up to 3 s of grace
    /// for the leader, then SIGKILL to whatever is left of the tree; reaps the leader.
    /// Returns how the leader exited.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.terminate(STOP_GRACE)
    }

    fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // Read before the first signal, while every process is still connected to the root.
        let mut tree = ProcessTree::for_killing(self.pgid as u32, Some(self.pgid as u32));
        let mut status = child.try_wait().ok().flatten();
        if status.is_none() {
            tree.signal(Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            let mut refreshed = Instant::now();
            while Instant::now() < deadline {
                status = child.try_wait().ok().flatten();
                if status.is_some() {
                    break;
                }
                if refreshed.elapsed() >= Duration::from_millis(100) {
                    // Keep up with processes forked during the shutdown.
                    tree.refresh();
                    refreshed = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Whatever is left of the tree (workers of a dead master, a shell's children, a
        // process that left the group).
        let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
        if status.is_none() {
            status = child.wait().ok();
        }
        tree.kill_all(Duration::from_secs(1));
        if let Ok(mut groups) = LAUNCHED.lock() {
            groups.retain(|&g| g != self.pgid);
        }
        if let Some(dir) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(guardian) = self.guardian.take() {
            guardian.release();
        }
        status
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.terminate(Duration::from_millis(500));
    }
}

fn http_answers(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match s.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    // An h2c-only listener (nginx's `listen ... http2` without ssl, before 1.25) answers an
    // HTTP/1.1 request with its SETTINGS frame (type 4) and a GOAWAY: it is up all the same.
    head[..got].starts_with(b"HTTP/1.") || (got >= 4 && head[3] == 0x04)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(template: &str, ready_timeout: Duration) -> TargetSpec {
        TargetSpec::Command {
            template: template.into(),
            env: vec![("TS_TEST".into(), "1".into())],
            cwd: None,
            ready_path: "/".into(),
            ready_timeout,
        }
    }

    /// Live (not zombie) processes whose process group is `pgid`, from /proc.
    fn live_in_group(pgid: i32) -> Vec<i32> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the ')'.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let pid: i32 = head
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
                pids.push(pid);
            }
        }
        pids
    }

    /// Nothing is left of the process group in `pid_file` (which is then removed).
    fn assert_group_gone(pid_file: &Path, what: &str) {
        let pgid: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = std::fs::remove_file(pid_file);
        assert_eq!(live_in_group(pgid), Vec::<i32>::new(), "{what}");
    }

    #[test]
    fn crash_at_start_reports_status_and_stderr() {
        let err = Target::launch(
            &command("echo boom {port} >&2; exit 3", Duration::from_secs(5)),
            &[],
        )
        .err()
        .unwrap();
        let text = err.to_string();
        assert!(matches!(err, Error::Exited { .. }), "{text}");
        assert!(
            text.contains("exit status: 3") && text.contains("boom"),
            "{text}"
        );
    }

    #[test]
    fn not_ready_times_out_with_stderr_and_leaves_nothing() {
        let pid_file = std::env::temp_dir().join(format!("ts-not-ready-{}", std::process::id()));
        // The shell's process group as tailscope's /proc names it (`$$` is a pid of the
        // target's own PID namespace).
        let template = format!(
            "read -r pid comm state ppid pgrp rest < /proc/self/stat; echo $pgrp > {}; echo waiting on {{port}} >&2; exec sleep 30",
            pid_file.display()
        );
        let err = Target::launch(&command(&template, Duration::from_millis(400)), &[])
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(matches!(err, Error::NotReady { .. }), "{text}");
        assert!(text.contains("waiting on"), "{text}");
        assert_group_gone(&pid_file, "the server that never got ready was stopped");
    }

    #[test]
    fn a_stop_during_the_ready_wait_ends_it_and_stops_the_target() {
        let pid_file = std::env::temp_dir().join(format!("ts-stop-ready-{}", std::process::id()));
        let _ = std::fs::remove_file(&pid_file);
        // Written whole (renamed into place), so the file exists only with the pid in it: the
        // shell's process group as tailscope's /proc names it (`$$` is a pid of the target's
        // own PID namespace).
        let template = format!(
            "read -r pid comm state ppid pgrp rest < /proc/self/stat; echo $pgrp > {0}.tmp; mv {0}.tmp {0}; exec sleep 60 # {{port}}",
            pid_file.display()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let stop = stop.clone();
            let pid_file = pid_file.clone();
            std::thread::spawn(move || {
                // Set the stop once the server runs (its pid is written), well inside the
                // hour it is given to get ready; after a minute without it, set it anyway
                // (the launch failed, and its error is what the test then shows).
                let deadline = Instant::now() + Duration::from_secs(60);
                while !pid_file.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                stop.store(true, Ordering::SeqCst);
            })
        };
        let err = Target::launch_unless_stopped(
            &command(&template, Duration::from_secs(3600)),
            &[],
            &stop,
        )
        .err()
        .unwrap();
        setter.join().unwrap();
        let text = err.to_string();
        assert!(matches!(err, Error::Interrupted { .. }), "{text}");
        assert_group_gone(&pid_file, "the interrupted server was stopped");
    }

    #[test]
    fn stop_kills_the_whole_group() {
        let py = "python3 -c \"import http.server as h, os, sys; os.system('sleep 60 &'); h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()\"";
        let t = match Target::launch(&command(py, Duration::from_secs(10)), &[]) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        let pgid = t.pgid;
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            live_in_group(pgid).len() >= 2,
            "the server and its background child run"
        );
        t.stop();
        // SIGKILL is delivered asynchronously: give the kernel a moment to finish the orphans.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while !live_in_group(pgid).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            live_in_group(pgid),
            Vec::<i32>::new(),
            "no live process left in the group"
        );
    }
}
