//! `tailscope serve`: the reference server in the foreground until SIGINT or SIGTERM.

use std::io::Write;

use anyhow::{Context, Result};
use tailscope_cli::args::ServeArgs;
use tailscope_server::{Config, Error, Stall};

use crate::exit::{Outcome, UsageError};

/// Starts the server, prints `listening on http://ADDR`, and serves until a signal asks it
/// to stop; then in-flight responses are finished and it exits 0.
pub fn serve(args: ServeArgs) -> Result<Outcome> {
    let mut config = Config {
        addr: args.addr,
        static_dir: args.static_dir,
        backlog: args.backlog,
        max_conns: args.max_conns,
        idle_timeout: args.idle_timeout,
        header_timeout: args.header_timeout,
        ..Config::default()
    };
    if let Some(cpus) = args.cpus {
        // One worker per CPU it may use: two workers pinned to one CPU take turns on it, and a
        // stall example on `--cpus 0` read as the server waiting for a CPU.
        config.threads = cpus.0.len().max(1);
        config.cpus = cpus.0;
    }
    if let Some(t) = args.threads {
        config.threads = t;
    }
    if let (Some(every), Some(duration)) = (args.stall_every, args.stall_for) {
        if every.is_zero() || duration.is_zero() {
            return Err(
                UsageError("--stall-every and --stall-for must be more than 0".into()).into(),
            );
        }
        config.stall = Some(Stall { every, duration });
    }
    if let (Some(every), Some(duration)) = (args.burn_every, args.burn_for) {
        if every.is_zero() || duration.is_zero() {
            return Err(
                UsageError("--burn-every and --burn-for must be more than 0".into()).into(),
            );
        }
        config.burn = Some(Stall { every, duration });
    }
    let server = match tailscope_server::start(config) {
        Ok(s) => s,
        // The library names the setting; the message names the flag that set it.
        Err(e @ Error::StaticDir { .. }) => return Err(UsageError(format!("--static: {e}")).into()),
        Err(e @ Error::Invalid(_)) => {
            return Err(UsageError(format!("{e} (--threads, --backlog)")).into())
        }
        Err(e) => return Err(e).context("the reference server could not start"),
    };
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, server.shutdown_flag())
            .context("cannot install the signal handler")?;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}{}",
        tailscope_targets::READY_LINE_PREFIX,
        server.local_addr()
    );
    let _ = out.flush();
    drop(out);
    server.join().context("the reference server failed")?;
    Ok(Outcome::Success)
}
