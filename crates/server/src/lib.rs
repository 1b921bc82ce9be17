//! The io_uring reference HTTP server that `tailscope serve` runs.
//!
//! tailscope's calibration target and spike laboratory. [`start`] binds one `SO_REUSEPORT`
//! listener per thread and starts the threads; each [`worker`] owns its ring
//! (`tailscope_uring::server`, where all of the server's `unsafe` lives), multishot accept, multishot recv into a registered
//! provided-buffer ring, and a slab of connections. Requests are parsed and answered by the
//! pure functions of [`http`]; `/static/` goes through [`static_files`]. Faults are injected
//! on purpose: `stall` blocks a worker's loop, a small `backlog` overflows the accept queue.

#![forbid(unsafe_code)]

mod closing;
pub mod http;
pub mod static_files;
mod worker;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// io_uring cannot be used in this process.
    #[error("io_uring is not available here ({cause}): io_uring_setup failed with {error}. {fix}")]
    IoUringUnavailable {
        /// What is known to block it.
        cause: String,
        /// What to do about it.
        fix: String,
        /// The setup error.
        error: std::io::Error,
    },
    /// The listening socket could not be set up.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        error: std::io::Error,
    },
    /// The static directory is not usable.
    #[error("static directory {dir}: {error}")]
    StaticDir {
        /// The directory given.
        dir: PathBuf,
        /// Why it cannot be used.
        error: std::io::Error,
    },
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A worker failed.
    #[error("worker {worker} failed: {error}")]
    Worker {
        /// Which worker thread.
        worker: usize,
        /// Its error.
        error: std::io::Error,
    },
}

/// A stall injected on purpose: every `every`, a worker's loop blocks for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// Time between stalls.
    pub every: Duration,
    /// How long each stall blocks the loop.
    pub duration: Duration,
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port (all threads share it).
    pub addr: SocketAddr,
    /// Worker threads.
    pub threads: usize,
    /// CPUs to pin worker threads to (thread i on `cpus[i % len]`).
    pub cpus: Vec<usize>,
    /// Directory served under `/static/` (canonicalized by [`start`]).
    pub static_dir: Option<PathBuf>,
    /// Listen backlog of each thread's listener.
    pub backlog: i32,
    /// Injected stalls.
    pub stall: Option<Stall>,
    /// CPU burned on purpose on each worker's loop: every `every`, for `duration`, in
    /// `burn_cpu_on_purpose` (a named function profilers can find).
    pub burn: Option<Stall>,
    /// Connections a worker keeps open at once; more are closed as they are accepted.
    pub max_conns: usize,
    /// A keep-alive connection with nothing to do is closed after this.
    pub idle_timeout: Duration,
    /// A request head not complete after this is closed (slowloris).
    pub header_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpus: Vec::new(),
            static_dir: None,
            backlog: 4096,
            stall: None,
            burn: None,
            max_conns: 100_000,
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// A running server.
pub struct Server {
    local_addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// The address it listens on, with the port resolved.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The flag that stops it gracefully: set it (from a signal handler, say) and the workers
    /// stop accepting, finish in-flight responses and return.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shutdown.clone()
    }

    /// Asks for a graceful stop.
    pub fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    /// Waits for every worker to return.
    pub fn join(self) -> Result<(), Error> {
        let mut first_error = None;
        for (worker, handle) in self.threads.into_iter().enumerate() {
            let result = handle
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("worker panicked")));
            if let Err(error) = result {
                first_error.get_or_insert(Error::Worker { worker, error });
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn io_uring_unavailable(error: std::io::Error) -> Error {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let (cause, fix) = match disabled {
        Some(n) if n > 0 => (
            format!("kernel.io_uring_disabled = {n}"),
            "Fix: sysctl -w kernel.io_uring_disabled=0 (as root).".to_string(),
        ),
        _ if error.raw_os_error() == Some(libc::ENOSYS) || error.raw_os_error() == Some(libc::EPERM) => (
            "blocked by a seccomp filter or an old kernel".to_string(),
            "Fix: a kernel of 6.0 or later, and in a container a seccomp profile that allows io_uring \
             (e.g. docker run --security-opt seccomp=unconfined)."
                .to_string(),
        ),
        _ => ("unknown cause".to_string(), "Check the kernel log.".to_string()),
    };
    Error::IoUringUnavailable { cause, fix, error }
}

fn listener(addr: SocketAddr, backlog: i32) -> Result<OwnedFd, Error> {
    let err = |error| Error::Listen { addr, error };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )
    .map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    socket.set_reuse_port(true).map_err(err)?;
    // Accepted sockets inherit it: direct ones (slots of a ring's file table) have no
    // descriptor to set it on.
    socket.set_nodelay(true).map_err(err)?;
    socket.bind(&addr.into()).map_err(err)?;
    socket.listen(backlog).map_err(err)?;
    Ok(socket.into())
}

/// Binds the listeners and starts the workers.
pub fn start(mut config: Config) -> Result<Server, Error> {
    if config.threads == 0 {
        return Err(Error::Invalid(
            "the server needs at least 1 worker thread".into(),
        ));
    }
    if config.backlog < 1 {
        return Err(Error::Invalid(
            "the listen backlog must be at least 1".into(),
        ));
    }
    if let Some(dir) = &config.static_dir {
        let canonical = dir.canonicalize().map_err(|error| Error::StaticDir {
            dir: dir.clone(),
            error,
        })?;
        if !canonical.is_dir() {
            return Err(Error::StaticDir {
                dir: dir.clone(),
                error: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        config.static_dir = Some(canonical);
    }
    tailscope_uring::server::probe().map_err(io_uring_unavailable)?;
    // SO_REUSEPORT would let this server join another one's listeners on the same port (a
    // second `tailscope serve` there, say) and split the load with it without a word: a plain
    // bind first refuses an address some other socket already listens on.
    if config.addr.port() != 0 {
        drop(
            std::net::TcpListener::bind(config.addr).map_err(|error| Error::Listen {
                addr: config.addr,
                error,
            })?,
        );
    }
    let first = listener(config.addr, config.backlog)?;
    let local_addr = socket2::SockRef::from(&first)
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or_else(|| Error::Invalid("the listener has no address".into()))?;
    let mut listeners = vec![first];
    for _ in 1..config.threads {
        listeners.push(listener(local_addr, config.backlog)?);
    }
    let config = Arc::new(config);
    let shutdown = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut threads = Vec::with_capacity(listeners.len());
    for (i, listener) in listeners.into_iter().enumerate() {
        let config = config.clone();
        let shutdown = shutdown.clone();
        let ready = ready_tx.clone();
        let cpu = (!config.cpus.is_empty()).then(|| config.cpus[i % config.cpus.len()]);
        let handle = std::thread::Builder::new()
            .name(format!("tailscope-srv-{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu {
                    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                }
                // The ring is made on the thread that uses it (SINGLE_ISSUER).
                let worker = match worker::Worker::new(listener, config, shutdown) {
                    Ok(w) => {
                        let _ = ready.send((i, Ok(())));
                        w
                    }
                    Err(e) => {
                        let copy = std::io::Error::new(e.kind(), e.to_string());
                        let _ = ready.send((i, Err(copy)));
                        return Err(e);
                    }
                };
                worker.run()
            })
            .map_err(|error| Error::Worker { worker: i, error })?;
        threads.push(handle);
    }
    drop(ready_tx);
    let server = Server {
        local_addr,
        shutdown,
        threads,
    };
    for _ in 0..server.threads.len() {
        match ready_rx.recv() {
            Ok((_, Ok(()))) => {}
            Ok((worker, Err(error))) => {
                server.shutdown();
                let _ = server.join();
                return Err(Error::Worker { worker, error });
            }
            Err(_) => break,
        }
    }
    Ok(server)
}
