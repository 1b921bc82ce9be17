//! Poll briefly before sleeping (`--spin-before-sleep`): the tokio engine's haltpoll.
//!
//! On loopback a response's receive path runs in the server's context: when a generator
//! thread sleeps in `epoll_wait`, the server's `write` pays for waking it
//! (`sock_def_readable` → `ep_poll_callback` → a reschedule IPI; in a VM, an exit), which
//! costs a server whose one worker is the bound a few % of its requests (BENCHMARKS.md,
//! session 7). So before a worker thread parks (tokio's `on_thread_park`), it watches its
//! runtime's epoll fd for up to a window: a response that arrives within it leaves epoll's
//! ready list non-empty, `epoll_wait` returns without sleeping and nobody is woken. The
//! window adapts as the kernel's haltpoll governor's does: it grows when the thread slept
//! and was woken shortly after the window ended, shrinks when it slept long, so a slow
//! open-loop run spends next to nothing on it.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a generator thread polls for work before it sleeps (`--spin-before-sleep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpinBeforeSleep {
    /// A window that adapts between 0 and [`MAX_WINDOW`] (the default).
    #[default]
    Adaptive,
    /// This window every time; zero turns polling off.
    Fixed(Duration),
}

impl SpinBeforeSleep {
    /// Parses `--spin-before-sleep`: `auto`, or a duration up to 1 ms (0: off).
    pub fn parse(s: &str) -> Result<SpinBeforeSleep, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(SpinBeforeSleep::Adaptive);
        }
        crate::plan::parse_duration_within(s, Duration::ZERO, Duration::from_millis(1))
            .map(SpinBeforeSleep::Fixed)
            .map_err(|e| format!("{e} (or auto)"))
    }
}

impl std::fmt::Display for SpinBeforeSleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpinBeforeSleep::Adaptive => f.write_str("auto"),
            SpinBeforeSleep::Fixed(d) if d.is_zero() => f.write_str("off"),
            SpinBeforeSleep::Fixed(d) => write!(f, "{}µs", d.as_micros()),
        }
    }
}

/// The adaptive window's bound: a wake-up shortly after it is not worth polling for.
pub const MAX_WINDOW: Duration = Duration::from_micros(50);
/// Where a window grows from when it was zero (haltpoll's `guest_halt_poll_grow_start`).
const GROW_START_NS: u64 = 4_000;

/// One runtime's poller: called on its own thread only (a current-thread runtime parks on
/// the thread that runs it), so the atomics are uncontended cells that are `Sync`.
struct Governor {
    /// The runtime's epoll fd, once found; -1: not found, never poll.
    epoll_fd: AtomicI32,
    adaptive: bool,
    window_ns: AtomicU64,
    /// When the last park's poll ran out with nothing ready (ns since `base`); 0: it did not
    /// (something was ready, or there was no window to adapt).
    ran_out_at: AtomicU64,
    base: Instant,
}

impl Governor {
    fn before_park(&self) {
        let epoll_fd = self.epoll_fd.load(Ordering::Relaxed);
        if epoll_fd < 0 {
            return;
        }
        let window = self.window_ns.load(Ordering::Relaxed);
        let start = Instant::now();
        let mut now = start;
        loop {
            if crate::sys::has_events(epoll_fd) {
                self.ran_out_at.store(0, Ordering::Relaxed);
                return;
            }
            if now.duration_since(start).as_nanos() as u64 >= window {
                break;
            }
            std::hint::spin_loop();
            now = Instant::now();
        }
        let at = now.duration_since(self.base).as_nanos() as u64;
        self.ran_out_at.store(at.max(1), Ordering::Relaxed);
    }

    fn after_unpark(&self) {
        let ran_out_at = self.ran_out_at.swap(0, Ordering::Relaxed);
        if !self.adaptive || ran_out_at == 0 {
            return;
        }
        let now = Instant::now().duration_since(self.base).as_nanos() as u64;
        let window = self.window_ns.load(Ordering::Relaxed);
        let idle = window + now.saturating_sub(ran_out_at);
        self.window_ns
            .store(next_window(window, idle), Ordering::Relaxed);
    }
}

/// haltpoll's rule: a thread that slept but was idle no longer than the bound would have
/// been caught by a longer window (grow ×2); one idle longer than the bound would not
/// (shrink ÷2, to zero below the start).
fn next_window(window_ns: u64, idle_ns: u64) -> u64 {
    let max = MAX_WINDOW.as_nanos() as u64;
    if idle_ns <= max {
        (window_ns * 2).clamp(GROW_START_NS, max)
    } else if window_ns / 2 < GROW_START_NS {
        0
    } else {
        window_ns / 2
    }
}

/// Builds a current-thread runtime whose thread polls its epoll fd for `spin` before it
/// sleeps. Without a window, or where the runtime's epoll fd cannot be told apart (no
/// /proc), the runtime sleeps as tokio's does.
pub(crate) fn runtime(spin: SpinBeforeSleep) -> std::io::Result<tokio::runtime::Runtime> {
    build(spin).map(|(runtime, _)| runtime)
}

/// [`runtime`], and the epoll fd its thread polls (none: it sleeps as tokio's does).
fn build(spin: SpinBeforeSleep) -> std::io::Result<(tokio::runtime::Runtime, Option<RawFd>)> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    // tokio parks only with no task ready: if the thread then slept, the loop had been out
    // of work until it woke (what an open-loop send claimed late is judged by). A park that
    // returns at once (events already in) is a busy loop's.
    let parked = super::worker::parking;
    let unparked = super::worker::unparking;
    let window = match spin {
        SpinBeforeSleep::Fixed(d) if d.is_zero() => {
            return Ok((
                builder
                    .on_thread_park(parked)
                    .on_thread_unpark(unparked)
                    .build()?,
                None,
            ));
        }
        SpinBeforeSleep::Fixed(d) => d.as_nanos() as u64,
        SpinBeforeSleep::Adaptive => 0,
    };
    let governor = Arc::new(Governor {
        epoll_fd: AtomicI32::new(-1),
        adaptive: spin == SpinBeforeSleep::Adaptive,
        window_ns: AtomicU64::new(window),
        ran_out_at: AtomicU64::new(0),
        base: Instant::now(),
    });
    let (park, unpark) = (governor.clone(), governor.clone());
    builder
        .on_thread_park(move || {
            parked();
            park.before_park();
        })
        .on_thread_unpark(move || {
            unparked();
            unpark.after_unpark();
        });
    // tokio does not hand out its epoll fd: the eventpoll fd that building the runtime adds
    // is it. Builds are serialised so that two workers' cannot be confused; another thread's
    // epoll fd appearing meanwhile watches other fds, and then none is used.
    static BUILDING: Mutex<()> = Mutex::new(());
    let guard = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let before = epoll_fds();
    let runtime = builder.build()?;
    let after = epoll_fds();
    drop(guard);
    let new: Vec<RawFd> = after
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect();
    // mio keeps a dup of its epoll fd (the registry's): the fds that watch the same fds (its
    // waker's eventfd, so far) are one epoll; another runtime's would watch its own waker.
    let watched: Vec<Option<String>> = new.iter().map(|&fd| watched_fds(fd)).collect();
    let (Some(&epoll_fd), Some(Some(first))) = (new.first(), watched.first()) else {
        return Ok((runtime, None));
    };
    if watched.iter().any(|w| w.as_ref() != Some(first)) {
        return Ok((runtime, None));
    }
    governor.epoll_fd.store(epoll_fd, Ordering::Relaxed);
    Ok((runtime, Some(epoll_fd)))
}

/// What the epoll fd `fd` watches: the `tfd:` lines of its fdinfo; none if it watches
/// nothing or cannot be read.
fn watched_fds(fd: RawFd) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    let tfd: String = info
        .lines()
        .filter(|l| l.starts_with("tfd:"))
        .map(|l| format!("{l}\n"))
        .collect();
    (!tfd.is_empty()).then_some(tfd)
}

/// The process's epoll fds now.
fn epoll_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        (target.as_os_str() == "anon_inode:[eventpoll]")
            .then(|| e.file_name().to_str()?.parse().ok())
            .flatten()
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_grows_on_a_short_sleep_and_shrinks_on_a_long_one() {
        let max = MAX_WINDOW.as_nanos() as u64;
        assert_eq!(next_window(0, 10_000), GROW_START_NS);
        assert_eq!(next_window(8_000, 30_000), 16_000);
        assert_eq!(next_window(40_000, 45_000), max, "bounded");
        assert_eq!(next_window(40_000, 1_000_000), 20_000);
        assert_eq!(next_window(6_000, 1_000_000), 0, "below the start: off");
        assert_eq!(next_window(0, 1_000_000), 0);
    }

    #[test]
    fn the_flag_takes_auto_a_duration_or_zero() {
        assert_eq!(
            SpinBeforeSleep::parse("auto"),
            Ok(SpinBeforeSleep::Adaptive)
        );
        let fixed = SpinBeforeSleep::parse("20us").unwrap();
        assert_eq!(fixed, SpinBeforeSleep::Fixed(Duration::from_micros(20)));
        assert_eq!(fixed.to_string(), "20µs");
        assert_eq!(SpinBeforeSleep::parse("0").unwrap().to_string(), "off");
        assert_eq!(SpinBeforeSleep::Adaptive.to_string(), "auto");
        for bad in ["2ms", "fast", "-1us", ""] {
            assert!(SpinBeforeSleep::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_fd_polled_is_the_one_the_runtime_waits_on() {
        // Other tests build runtimes in parallel: a build beside another's may not tell its
        // epoll fd apart (and then polls nothing); one of a few tries does.
        let (runtime, fd) = (0..20)
            .find_map(|_| match build(SpinBeforeSleep::Adaptive).unwrap() {
                (r, Some(fd)) => Some((r, fd)),
                _ => None,
            })
            .expect("the runtime's epoll fd is found");
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        runtime.block_on(async {
            let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            // A new socket is writable at once: let the runtime take that event first.
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(!crate::sys::has_events(fd), "nothing has arrived");
            sender.send_to(b"x", socket.local_addr().unwrap()).unwrap();
            // Not awaited: the datagram waits on the epoll fd's ready list.
            assert!(crate::sys::has_events(fd), "a datagram arrived");
            let mut buf = [0; 1];
            assert_eq!(socket.recv(&mut buf).await.unwrap(), 1);
        });
        assert!(build(SpinBeforeSleep::Fixed(Duration::ZERO))
            .unwrap()
            .1
            .is_none());
    }
}
