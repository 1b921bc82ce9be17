//! The open-file limit a run needs (its message names the flags that set the connections).

use tailscope_loadgen::fmt::fmt_count;
use tailscope_loadgen::Plan;

use tailscope_session::UsageError;

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
        fmt_count(fits)
    )))
}

/// `-c N`, with the held connections when there are any.
fn asked(plan: &Plan) -> String {
    if plan.all_connections() > plan.connections {
        format!(
            "-c {} with {} held connections (--idle-conns, --slow-conns)",
            plan.connections,
            fmt_count((plan.all_connections() - plan.connections) as u64)
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
