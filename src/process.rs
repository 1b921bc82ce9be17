//! Process plumbing the subcommands share: the signal watcher (a first Ctrl-C or SIGTERM
//! stops gracefully, a second kills launched targets and exits), stdout that tolerates a
//! closed pipe, and the open-file limit a run needs.

use std::io::Write as _;

use anyhow::{Context, Result};
use tailscope_loadgen::report::fmt_count;
use tailscope_loadgen::{Plan, RunControl};

use crate::exit::UsageError;

/// Set when SIGINT or SIGTERM arrived (as opposed to a stop asked from the dashboard).
pub(crate) static SIGNALLED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The first signal that stopped the run (0: none), for the report.
static FIRST_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// `SIGINT` or `SIGTERM`, when one of them stopped the run.
pub(crate) fn signal_name() -> Option<String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    match FIRST_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
        SIGINT => Some("SIGINT".into()),
        SIGTERM => Some("SIGTERM".into()),
        0 => None,
        other => Some(format!("signal {other}")),
    }
}

/// A first Ctrl-C or SIGTERM stops the run gracefully (it still reports and stops the
/// target); a second one kills any launched target's process group and exits at once.
pub(crate) fn watch_signals(control: &RunControl) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("cannot install the signal handler")?;
    let flag = control.flag();
    std::thread::Builder::new()
        .name("tailscope-signals".into())
        .spawn(move || {
            for (n, signal) in signals.forever().enumerate() {
                let _ = FIRST_SIGNAL.compare_exchange(
                    0,
                    signal,
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                );
                SIGNALLED.store(true, std::sync::atomic::Ordering::SeqCst);
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                if n >= 1 {
                    tailscope_targets::kill_all_launched();
                    std::process::exit(130);
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}

/// File descriptors a run needs besides one per connection: stdio, each generator thread's
/// runtime (epoll, eventfd, timers), the profiler's perf counters (several per CPU) and
/// /proc files, the signal pipe, a launched server's pipes.
fn fd_overhead(threads: usize) -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    64 + 8 * threads as u64 + 16 * cpus
}

/// Raises RLIMIT_NOFILE's soft limit to the hard limit, then checks that `-c` fits. A run that
/// does not fit would spend itself on EMFILE; it is refused (exit 2) before anything starts,
/// naming the limit and how to raise it. On io_uring direct descriptors the sockets live in
/// each generator thread's registered file table, which may hold that many each: then the
/// threads are raised until each thread's share fits (unless `--threads` was given).
pub(crate) fn fit_open_files(plan: &mut Plan, threads_given: bool) -> Result<(), UsageError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        // Unreadable: the run goes on and EMFILE, if it comes, is counted by its own kind.
        return Ok(());
    };
    let mut limit = soft;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        limit = hard;
    }
    if tailscope_loadgen::direct_descriptors_for(plan) {
        return fit_rings(plan, limit, threads_given);
    }
    // Held connections (--idle-conns, --slow-conns) are sockets too.
    let need = plan.all_connections() as u64 + fd_overhead(plan.effective_threads());
    if need <= limit {
        return Ok(());
    }
    let fits = limit.saturating_sub(fd_overhead(plan.effective_threads()));
    Err(UsageError(format!(
        "{} needs about {} open files, but this process may open only {} (RLIMIT_NOFILE; hard limit {}): \
         lower the connections to {} or less in all, or raise the limit first (`ulimit -n {need}`, as root or where the hard limit allows; LimitNOFILE= for a systemd service)",
        asked(plan),
        fmt_count(need),
        fmt_count(limit),
        fmt_count(hard),
        fits
    )))
}

/// `-c N`, with the held connections when there are any.
fn asked(plan: &Plan) -> String {
    if plan.all_connections() > plan.connections {
        format!(
            "-c {} with {} held connections (--idle-conns, --slow-conns)",
            plan.connections,
            plan.all_connections() - plan.connections
        )
    } else {
        format!("-c {}", plan.connections)
    }
}

/// Slots a generator thread's file table keeps besides its sockets (reconnects whose old
/// slot is still closing).
const RING_SLACK: u64 = 64;

/// The io_uring engine on direct descriptors: each thread's share of the sockets must fit its
/// table (`limit` slots at most); slow held connections keep a plain descriptor each.
fn fit_rings(plan: &mut Plan, limit: u64, threads_given: bool) -> Result<(), UsageError> {
    let room = limit.saturating_sub(RING_SLACK).max(1);
    let fits =
        |plan: &Plan, threads: usize| tailscope_loadgen::sockets_per_thread(plan, threads) <= room;
    if !fits(plan, plan.threads) {
        let most = tailscope_loadgen::plan::MAX_THREADS.min(plan.connections.max(1));
        let needed = (plan.threads..=most).find(|&t| fits(plan, t));
        match needed {
            Some(t) if !threads_given => plan.threads = t,
            _ => return Err(UsageError(format!(
                "{} holds up to {} sockets per generator thread, but each thread's io_uring file table may hold only {} (RLIMIT_NOFILE {} less {RING_SLACK}): {}",
                asked(plan),
                fmt_count(tailscope_loadgen::sockets_per_thread(plan, plan.threads)),
                fmt_count(room),
                fmt_count(limit),
                match needed {
                    Some(t) => format!("give --threads {t} or more (or leave --threads out: it is raised as needed), or raise the limit first"),
                    None => format!("lower the connections (at most {} per thread, -c shared among at most -c threads) or raise the limit first (`ulimit -n`)", fmt_count(room)),
                }
            ))),
        }
    }
    let plain = plan.slow_conns as u64 + fd_overhead(plan.effective_threads());
    if plain > limit {
        return Err(UsageError(format!(
            "--slow-conns {} needs about {} open files (each keeps a plain descriptor), but this process may open only {} (RLIMIT_NOFILE): \
             lower --slow-conns or raise the limit first (`ulimit -n {plain}`)",
            plan.slow_conns,
            fmt_count(plain),
            fmt_count(limit)
        )));
    }
    Ok(())
}

/// Checks that a report (`what`, written for `flag`) can be written to `path` before the run,
/// so a long run does not end with its report lost. `-` (stdout) always can. A file that did
/// not exist is created and removed again.
pub(crate) fn check_writable(path: &std::path::Path, what: &str, flag: &str) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot write the {what} to {}: {e}; pick a writable path ({flag})",
            path.display()
        )),
    }
}

/// A file a command writes, named by the flag that asked for it.
pub(crate) struct Output<'a> {
    /// The flag (`--json`).
    pub flag: &'static str,
    /// What goes there, for the message (`JSON report`).
    pub what: &'static str,
    /// Where.
    pub path: &'a std::path::Path,
}

impl<'a> Output<'a> {
    /// An output, when its flag was given.
    pub fn of(
        flag: &'static str,
        what: &'static str,
        path: Option<&'a std::path::Path>,
    ) -> Option<Output<'a>> {
        path.map(|path| Output { flag, what, path })
    }
}

/// Checks the files a command reads and writes before anything runs, so that no run ends
/// with its report lost or a report destroyed: every output can be written (only `--json`
/// may be `-`, stdout; the others would make a file named `-`), and none is an input or
/// another output (writing it would truncate the other).
pub(crate) fn check_files(
    inputs: &[&std::path::Path],
    outputs: &[Output<'_>],
) -> Result<(), UsageError> {
    for (i, out) in outputs.iter().enumerate() {
        if out.path.as_os_str() == "-" {
            if out.flag != "--json" {
                return Err(UsageError(format!(
                    "{} takes a file path, not '-': only --json writes to stdout",
                    out.flag
                )));
            }
            continue;
        }
        let id = FileId::of(out.path);
        if let Some(input) = inputs.iter().find(|p| FileId::of(p) == id) {
            return Err(UsageError(format!(
                "{} is the same file as the input {}: writing it would destroy what is read; give {} a path of its own",
                out.flag,
                input.display(),
                out.flag
            )));
        }
        if let Some(other) = outputs[..i]
            .iter()
            .find(|o| o.path.as_os_str() != "-" && FileId::of(o.path) == id)
        {
            return Err(UsageError(format!(
                "{} is the same file as {} ({}): give each output a path of its own",
                out.flag,
                other.flag,
                out.path.display()
            )));
        }
    }
    for out in outputs {
        check_writable(out.path, out.what, out.flag).map_err(UsageError)?;
    }
    Ok(())
}

/// What makes two paths the same file: the device and inode of a file that exists, else the
/// path made absolute and normalised (its directory resolved through symlinks when it exists).
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(std::path::PathBuf),
}

impl FileId {
    fn of(path: &std::path::Path) -> FileId {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(m) = std::fs::metadata(path) {
            return FileId::Inode(m.dev(), m.ino());
        }
        let absolute =
            std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path));
        let mut normal = std::path::PathBuf::new();
        for part in absolute.components() {
            match part {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    normal.pop();
                }
                other => normal.push(other),
            }
        }
        if let (Some(dir), Some(name)) = (normal.parent(), normal.file_name()) {
            if let Ok(dir) = dir.canonicalize() {
                return FileId::Path(dir.join(name));
            }
        }
        FileId::Path(normal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn out<'a>(flag: &'static str, path: &'a Path) -> Output<'a> {
        Output {
            flag,
            what: "report",
            path,
        }
    }

    #[test]
    fn an_output_that_is_an_input_or_another_output_is_refused() {
        let dir = std::env::temp_dir().join(format!("tailscope-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let input = dir.join("in.json");
        std::fs::write(&input, "{}").unwrap();
        let err =
            check_files(&[&input], &[out("--html", &dir.join("sub/../in.json"))]).unwrap_err();
        assert!(
            err.0.contains("--html is the same file as the input"),
            "{err}"
        );
        std::fs::hard_link(&input, dir.join("link.json")).unwrap();
        assert!(check_files(&[&input], &[out("--html", &dir.join("link.json"))]).is_err());
        let fresh = dir.join("fresh.out");
        let err = check_files(
            &[],
            &[
                out("--json", &fresh),
                out("--html", &dir.join("./sub/../fresh.out")),
            ],
        )
        .unwrap_err();
        assert!(err.0.contains("--html is the same file as --json"), "{err}");
        assert!(!fresh.exists(), "a refused check leaves no file behind");
        check_files(&[&input], &[out("--json", Path::new("-"))]).expect("stdout is not a file");
        for flag in ["--markdown", "--html", "--hdr-log", "--flamegraph"] {
            let err = check_files(&[], &[out(flag, Path::new("-"))]).unwrap_err();
            assert!(
                err.0.contains("only --json writes to stdout"),
                "{flag}: {err}"
            );
        }
        check_files(
            &[&input],
            &[out("--json", &fresh), out("--html", &dir.join("b.html"))],
        )
        .expect("distinct paths");
        assert!(!fresh.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
