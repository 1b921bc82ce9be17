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
/// naming the limit and how to raise it.
pub(crate) fn fit_open_files(plan: &Plan) -> Result<(), UsageError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        // Unreadable: the run goes on and EMFILE, if it comes, is counted by its own kind.
        return Ok(());
    };
    let mut limit = soft;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        limit = hard;
    }
    let need = plan.connections as u64 + fd_overhead(plan.effective_threads());
    if need <= limit {
        return Ok(());
    }
    let fits = limit.saturating_sub(fd_overhead(plan.effective_threads()));
    Err(UsageError(format!(
        "-c {} needs about {} open files, but this process may open only {} (RLIMIT_NOFILE; hard limit {}): \
         lower -c to {} or less, or raise the limit first (`ulimit -n {need}`, as root or where the hard limit allows; LimitNOFILE= for a systemd service)",
        plan.connections,
        fmt_count(need),
        fmt_count(limit),
        fmt_count(hard),
        fits
    )))
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

/// Checks an `--html` path before anything runs: a file (not `-`: the page is opened in a
/// browser) that can be written.
pub(crate) fn check_html_path(path: &std::path::Path) -> Result<(), UsageError> {
    if path.as_os_str() == "-" {
        return Err(UsageError(
            "--html takes a file path, not '-': the page is a file to open in a browser".into(),
        ));
    }
    check_writable(path, "HTML report", "--html").map_err(UsageError)
}
