//! The signal watcher the commands share: a first Ctrl-C or SIGTERM stops gracefully, a
//! second kills launched targets and exits.

use anyhow::{Context, Result};
use tailscope_loadgen::RunControl;

/// Set when SIGINT or SIGTERM arrived (as opposed to a stop asked from the dashboard).
static SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The first signal that stopped the run (0: none), for the report.
static FIRST_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// `SIGINT` or `SIGTERM`, when one of them stopped the run.
pub fn signal_name() -> Option<String> {
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
pub fn watch_signals(control: &RunControl) -> Result<()> {
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

/// Whether SIGINT or SIGTERM arrived (as opposed to a stop asked from the dashboard).
pub fn signalled() -> bool {
    SIGNALLED.load(std::sync::atomic::Ordering::SeqCst)
}
