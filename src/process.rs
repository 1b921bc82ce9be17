//! The open-file limit a run needs (its message names the flags that set the connections).

use tailscope_loadgen::report::fmt_count;
use tailscope_loadgen::Plan;

use crate::exit::UsageError;

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
    // Held connections (--idle-conns, --slow-conns) are sockets too.
    let need = plan.all_connections() as u64 + fd_overhead(plan.effective_threads());
    if need <= limit {
        return Ok(());
    }
    let fits = limit.saturating_sub(fd_overhead(plan.effective_threads()));
    let asked = if plan.all_connections() > plan.connections {
        format!(
            "-c {} with {} held connections (--idle-conns, --slow-conns)",
            plan.connections,
            plan.all_connections() - plan.connections
        )
    } else {
        format!("-c {}", plan.connections)
    };
    Err(UsageError(format!(
        "{asked} needs about {} open files, but this process may open only {} (RLIMIT_NOFILE; hard limit {}): \
         lower the connections to {} or less in all, or raise the limit first (`ulimit -n {need}`, as root or where the hard limit allows; LimitNOFILE= for a systemd service)",
        fmt_count(need),
        fmt_count(limit),
        fmt_count(hard),
        fits
    )))
}
