//! The crate's `unsafe` outside the io_uring ring: reading the kernel's TCP_INFO of the
//! generator's own sockets, IP_BIND_ADDRESS_NO_PORT and IP_LOCAL_PORT_RANGE (which no socket
//! crate wraps), the C
//! allocator's mmap threshold (see [`steady_allocator`]), the descriptor table's one growth
//! before the run (see [`grow_descriptor_table`]), and the calling thread's voluntary
//! context switches (see [`voluntary_switches`]); and [`TcpFacts`], what TCP_INFO says.
#![allow(unsafe_code)]

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};

/// What the kernel's TCP_INFO said of one of the generator's own connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFacts {
    /// Segments retransmitted over the connection's life, SYNs included.
    pub total_retrans: u32,
    /// Segments the kernel currently thinks lost.
    pub lost: u32,
    /// The retransmission timeout now (µs).
    pub rto_us: u32,
    /// The smoothed round-trip time (µs).
    pub rtt_us: u32,
}

/// The calling thread's voluntary context switches so far (`getrusage(RUSAGE_THREAD)`): one
/// more after a wait means the thread slept in it. `None` where the kernel refuses.
pub fn voluntary_switches() -> Option<i64> {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (rc == 0).then_some(usage.ru_nvcsw)
}

/// TCP_INFO of a connected (or connecting) TCP socket; `None` where the kernel refuses it.
pub fn tcp_facts(socket: &impl AsRawFd) -> Option<TcpFacts> {
    // SAFETY: `info` is a plain-old-data C struct for which all-zero bytes are a valid
    // value; getsockopt writes at most `len` bytes into it and sets `len` to what it wrote.
    // The fd is borrowed from a live socket for the duration of the call.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: see above; the pointers are to locals that outlive the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &mut len,
        )
    };
    // Kernels older than the struct fill only a prefix; total_retrans sits well inside
    // what every kernel since 2.6 writes.
    (rc == 0).then_some(TcpFacts {
        total_retrans: info.tcpi_total_retrans,
        lost: info.tcpi_lost,
        rto_us: info.tcpi_rto,
        rtt_us: info.tcpi_rtt,
    })
}

/// Binds a socket that is about to connect to the source address `src` (port 0) with
/// IP_BIND_ADDRESS_NO_PORT set, so that the kernel picks the port at connect time, per
/// destination: without it, a bind to port 0 reserves a port for every destination at once
/// and one address runs out at ~28 k connections whatever the targets.
pub fn bind_source(socket: &impl AsFd, src: SocketAddr) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: the option value points to a live c_int of the length given; the fd is
    // borrowed from a live socket for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::addr_of!(one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    socket2::SockRef::from(socket).bind(&src.into())
}

/// `IP_LOCAL_PORT_RANGE` (linux/in.h, Linux 6.3+), which the `libc` crate does not name yet.
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// Sets up a socket that is about to connect: it searches the whole ephemeral port range
/// (see [`use_whole_port_range`]) and, when `source` is given, is bound to it (see
/// [`bind_source`]).
pub fn prepare_connect(socket: &impl AsFd, source: Option<SocketAddr>) -> std::io::Result<()> {
    use_whole_port_range(socket);
    match source {
        Some(src) => bind_source(socket, src),
        None => Ok(()),
    }
}

/// Lets a connect take any free port of the ephemeral range, not the even ones first.
///
/// `connect()` picks its port in `__inet_hash_connect`, which tries the even ports of
/// `ip_local_port_range` first (leaving the odd ones to `bind()`) and the odd ones only after
/// a scan of every even one: past ~14,100 connections from one address to one server
/// (28,232 ports here), every further connect checked all ~14,100 even ports' established
/// connections first, 1.5-5 ms a connect in the kernel, and io_uring runs a connect inside the
/// `io_uring_enter` that submits it, so the generator's loop was held 0.4-1.2 s a second at
/// `-c 16000 --threads 1` (issue 32). For a socket with a port range of its own
/// (`IP_LOCAL_PORT_RANGE`, Linux 6.3+), the kernel steps through the ports one by one without
/// the even-first order since 6.8 ("tcp/dccp: change source port selection at connect()
/// time", written for this cost): a free port in a few tries whatever the parity, 34-83 µs a
/// connect from 14,000 to 16,000 connections here (6.18) against 1,640-5,160 µs (a Python
/// loop of blocking connects, each way). The range given is 0-65535, which the kernel narrows to `ip_local_port_range` (a
/// bound outside the system's range is ignored): the ports are the system's, only the order
/// of the search changes. A kernel that refuses the option (older than 6.3) keeps its order:
/// the error is ignored, as is a kernel that takes it but keeps the order (6.3-6.7).
pub fn use_whole_port_range(socket: &impl AsFd) {
    let range: u32 = 0xffff << 16;
    // SAFETY: the option value points to a live u32 of the length given; the fd is borrowed
    // from a live socket for the duration of the call.
    let _ = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_IP,
            IP_LOCAL_PORT_RANGE,
            std::ptr::addr_of!(range).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
}

/// Whether the epoll fd `epoll_fd` has events ready (a poll with no timeout: an epoll fd is
/// readable while its ready list is not empty). Used by the tokio engine's poll before
/// sleeping (engine/spin.rs).
pub fn has_events(epoll_fd: std::os::fd::RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd: epoll_fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd in a live local, count 1; a closed or reused fd number costs a
    // wrong answer (POLLNVAL, or another fd's readiness), never memory: poll only reads and
    // writes the array it is given.
    let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
    rc > 0 && pfd.revents & libc::POLLIN != 0
}

/// Fixes glibc's mmap threshold at its default (128 KiB), which turns off its dynamic
/// raising. The run allocates latency histograms of ~130 KiB (three significant figures)
/// for a worker's intervals until its spares come back warm (the snapshots, the
/// aggregator's seconds and the interval log's compressor are reused; until session 7 they
/// were made anew every tick or second). Without this, the first one freed raised the
/// threshold above their size, and from then on they came from the heaps, which kept the
/// chunks freed and grew for seconds before they settled (RSS of a 22 s run, measured before
/// workers reused their intervals: 13.2 MiB at 2 s, 14.0 from 6 s on). Blocks that size are
/// mapped and unmapped instead: a few per tick.
/// A no-op where the C library is not glibc.
pub fn steady_allocator() {
    #[cfg(target_env = "gnu")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt takes two integers and no pointers; it is thread-safe in glibc
            // (it takes the arenas' locks).
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
            }
        });
    }
}

/// Grows the process's descriptor table once, before the run, to room for `descriptors`
/// (within RLIMIT_NOFILE): a descriptor is duplicated at that number and closed again (the
/// table never shrinks). Else the table doubles while the connections open, and each growth
/// of a table that the process's threads share waits for an RCU grace period inside the
/// `socket()` that needed it (fs/file.c `expand_fdtable`, `synchronize_rcu`): up to 16 ms a
/// time in a release run of `-c 16000 --threads 1` (issue 32), which held the generator's
/// loop. Best effort: a refusal leaves the table to grow as before.
pub fn grow_descriptor_table(descriptors: usize) {
    let limit = tailscope_uring::open_file_limit().saturating_sub(1);
    let at = (descriptors as u64 + 64).min(limit);
    if at <= 1024 {
        return;
    }
    let Ok(null) = std::fs::File::open("/dev/null") else {
        return;
    };
    // SAFETY: F_DUPFD_CLOEXEC of an open descriptor takes no pointer; a refusal is an error
    // returned. The duplicate is closed at once below and never used.
    let fd = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, at as libc::c_int) };
    if fd >= 0 {
        // SAFETY: `fd` was just made by this call and is owned by nobody else.
        drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's size (FDSize in /proc/self/status) covers what was asked for.
    #[test]
    fn the_descriptor_table_is_grown_before_the_run() {
        let fd_size = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("FDSize:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap()
        };
        let want = 3000u64.min(tailscope_uring::open_file_limit().saturating_sub(65));
        if want <= 1024 {
            eprintln!("skipped: RLIMIT_NOFILE too low to grow the table");
            return;
        }
        grow_descriptor_table(want as usize);
        assert!(fd_size() >= want, "FDSize {} < {want}", fd_size());
    }

    #[test]
    fn a_loopback_connection_has_facts_and_no_retransmits() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let facts = tcp_facts(&client).expect("TCP_INFO on a connected socket");
        assert_eq!(facts.total_retrans, 0);
        assert!(
            facts.rto_us >= 200_000,
            "the minimum RTO is 200 ms: {facts:?}"
        );
        let not_tcp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_facts(&not_tcp), None);
    }

    #[test]
    fn a_bound_source_is_the_connection_local_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let src: SocketAddr = "127.0.0.3:0".parse().unwrap();
        bind_source(&socket, src).unwrap();
        // No port is taken until the connect.
        let bound = socket.local_addr().unwrap().as_socket().unwrap();
        assert_eq!((bound.ip(), bound.port()), (src.ip(), 0));
        socket
            .connect(&listener.local_addr().unwrap().into())
            .unwrap();
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), src.ip());
        assert_ne!(peer.port(), 0);
        let elsewhere: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let err = bind_source(
            &socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap(),
            elsewhere,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EADDRNOTAVAIL));
    }
}
