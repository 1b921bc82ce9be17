//! The target's own listening sockets and their accept queues.
//!
//! The kernel's sock_diag (what `ss -lt` reads) reports, for a listening socket, the
//! connections waiting in its accept queue and the queue's limit (the backlog). Sampled every
//! tick, that tells whether *this* listener overflowed, where the machine-wide
//! ListenOverflows counter moves for every listener on the machine. Listeners are found by
//! the address the run loads (its own address, or a wildcard one when the run loads
//! loopback), so a target tailscope did not launch (a URL, `--pid`) is watched too, as long
//! as it listens in this network namespace.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::Socket;
use serde::{Deserialize, Serialize};

/// One listening socket, as sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// Where it listens.
    pub address: SocketAddr,
    /// Its socket inode (as in /proc/PID/fd).
    pub inode: u32,
    /// Connections waiting in its accept queue now.
    pub queue: u32,
    /// The accept queue's limit: the backlog given to listen(2), capped by somaxconn.
    pub backlog: u32,
}

impl Listener {
    /// The queue is at its limit: the kernel drops (or, with syncookies, cookies) the next
    /// handshake.
    pub fn full(&self) -> bool {
        self.queue > 0 && self.queue >= self.backlog
    }
}

fn dump(socket: &Socket, family: u8, port: u16, out: &mut Vec<Listener>) -> std::io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::LISTEN,
            socket_id: if family == AF_INET {
                SocketId::new_v4()
            } else {
                SocketId::new_v6()
            },
        })
        .into(),
    );
    request.finalize();
    let mut bytes = vec![0; request.buffer_len()];
    request.serialize(&mut bytes);
    socket.send(&bytes, 0)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut buf[..], 0)?;
        let mut offset = 0;
        while offset < size {
            let message = NetlinkMessage::<SockDiagMessage>::deserialize(&buf[offset..size])
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
            let length = message.header.length as usize;
            match message.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    let h = &r.header;
                    if h.socket_id.source_port == port {
                        out.push(Listener {
                            address: SocketAddr::new(h.socket_id.source_address, port),
                            inode: h.inode,
                            queue: h.recv_queue,
                            backlog: h.send_queue,
                        });
                    }
                }
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(std::io::Error::other(format!("sock_diag: {e:?}")))
                }
                _ => {}
            }
            if length == 0 {
                break;
            }
            offset += length;
        }
    }
}

/// Every TCP socket listening on `port` in this network namespace (IPv4 and IPv6).
pub fn listeners(port: u16) -> std::io::Result<Vec<Listener>> {
    listeners_via(&sock_diag()?, port).map(|(found, _)| found)
}

/// A netlink socket for [`listeners_via`].
fn sock_diag() -> std::io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
    Ok(socket)
}

/// A [`sock_diag`] socket in `pid`'s network namespace: made by a short-lived thread that
/// enters it (a netlink socket stays in the namespace it was made in, whichever thread then
/// uses it; the rest of the process never leaves its own).
fn sock_diag_in_netns_of(pid: u32) -> std::io::Result<Socket> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(std::io::Error::from)?;
                sock_diag()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the netns thread panicked")))
    })
}

/// [`listeners`] through a netlink socket of [`sock_diag`], and whether both dumps were
/// read to their end (else replies may be left queued on the socket).
fn listeners_via(socket: &Socket, port: u16) -> std::io::Result<(Vec<Listener>, bool)> {
    let mut out = Vec::new();
    dump(socket, AF_INET, port, &mut out)?;
    // A kernel without IPv6 refuses the second dump; the IPv4 listeners still count.
    let whole = dump(socket, AF_INET6, port, &mut out).is_ok();
    Ok((out, whole))
}

/// One tick's view of the target's listeners, for the live dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListenSample {
    /// Listening sockets on the port (several with SO_REUSEPORT).
    pub sockets: usize,
    /// Connections waiting in their accept queues, summed.
    pub queue: u32,
    /// Their limits, summed.
    pub backlog: u32,
    /// How many of them were at their limit.
    pub full: usize,
}

/// The accept queues of the target's listeners over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenReport {
    /// The port watched.
    pub port: u16,
    /// Listening sockets seen on it (the most at once).
    pub sockets: usize,
    /// The largest backlog among them.
    pub backlog: Option<u32>,
    /// Ticks sampled.
    pub samples: u64,
    /// Ticks in which some listener's queue was at its limit.
    pub full_samples: u64,
    /// The longest accept queue seen on one listener.
    pub max_queue: u32,
    /// The seconds of the run (from 0) in which a listener was seen full.
    pub full_seconds: Vec<u64>,
    /// Why nothing could be watched, when so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Samples the listeners behind one address every tick.
#[derive(Debug)]
pub struct ListenWatch {
    target: SocketAddr,
    /// Every listener on the port counts, whatever its address (an agent on the server's
    /// host: the run's address for the server may be one the host does not know, behind NAT).
    any_address: bool,
    report: ListenReport,
    full_seconds: BTreeSet<u64>,
    /// The netlink socket, opened at the first sample and kept: the run's loop samples
    /// every tick, on a CPU it may share with the generator.
    socket: Option<Socket>,
    /// A process whose network namespace the listeners are in, when not this one's (an
    /// agent on the host watching a container's server).
    netns_of: Option<u32>,
}

/// Whether `l` is what a client of `target` connects to: the same address, or a wildcard
/// listener when the target is loopback (a remote address's port number may well be in use
/// here by something else).
fn serves(l: &Listener, target: SocketAddr) -> bool {
    l.address.ip() == target.ip() || (l.address.ip().is_unspecified() && target.ip().is_loopback())
}

impl ListenWatch {
    /// Watches the listeners a client of `target` reaches.
    pub fn new(target: SocketAddr) -> ListenWatch {
        ListenWatch {
            target,
            any_address: false,
            report: ListenReport {
                port: target.port(),
                sockets: 0,
                backlog: None,
                samples: 0,
                full_samples: 0,
                max_queue: 0,
                full_seconds: Vec::new(),
                unavailable: None,
            },
            full_seconds: BTreeSet::new(),
            socket: None,
            netns_of: None,
        }
    }

    /// Watches the listeners in `pid`'s network namespace instead of this one's (its
    /// sock_diag socket is opened there; that needs CAP_SYS_ADMIN, and without it the
    /// report says why nothing was watched).
    pub fn in_netns_of(mut self, pid: u32) -> ListenWatch {
        self.netns_of = Some(pid);
        self
    }

    /// Watches every listener on `port`, whatever its address (an agent on the server's
    /// host).
    pub fn on_port(port: u16) -> ListenWatch {
        ListenWatch {
            any_address: true,
            ..ListenWatch::new(SocketAddr::from(([0, 0, 0, 0], port)))
        }
    }

    /// Forgets what was seen so far (the warm-up is over).
    pub fn restart(&mut self) {
        let socket = self.socket.take();
        let (any_address, netns_of) = (self.any_address, self.netns_of);
        *self = ListenWatch::new(self.target);
        self.any_address = any_address;
        self.netns_of = netns_of;
        self.socket = socket;
    }

    /// What was seen so far.
    pub fn so_far(&self) -> ListenReport {
        let mut r = self.report.clone();
        r.full_seconds = self.full_seconds.iter().copied().collect();
        r
    }

    /// Samples now, `elapsed` into the measured run.
    pub fn sample(&mut self, elapsed: Duration) -> Option<ListenSample> {
        let socket = match (self.socket.take(), self.netns_of) {
            (Some(socket), _) => Ok(socket),
            (None, None) => sock_diag(),
            (None, Some(pid)) => sock_diag_in_netns_of(pid),
        };
        let found = socket.and_then(|socket| {
            // After a failed dump its replies may be half read, and the next dump would read
            // them as its own: the next sample opens anew.
            listeners_via(&socket, self.report.port).map(|(found, whole)| {
                if whole {
                    self.socket = Some(socket);
                }
                found
            })
        });
        let found: Vec<Listener> = match found {
            Ok(found) => found
                .into_iter()
                .filter(|l| self.any_address || serves(l, self.target))
                .collect(),
            Err(e) => {
                self.report.unavailable = Some(format!("sock_diag unavailable: {e}"));
                return None;
            }
        };
        if found.is_empty() {
            return None;
        }
        let r = &mut self.report;
        r.samples += 1;
        r.sockets = r.sockets.max(found.len());
        r.backlog = found.iter().map(|l| l.backlog).max().max(r.backlog);
        r.max_queue = r
            .max_queue
            .max(found.iter().map(|l| l.queue).max().unwrap_or(0));
        let full = found.iter().filter(|l| l.full()).count();
        if full > 0 {
            r.full_samples += 1;
            self.full_seconds.insert(elapsed.as_secs());
        }
        Some(ListenSample {
            sockets: found.len(),
            queue: found.iter().map(|l| l.queue).sum(),
            backlog: found.iter().map(|l| l.backlog).sum(),
            full,
        })
    }

    /// What was seen.
    pub fn finish(self) -> ListenReport {
        let mut r = self.so_far();
        if r.samples == 0 && r.unavailable.is_none() {
            r.unavailable = Some(format!(
                "no socket listening at {} in this network namespace (a remote target, or one in another namespace)",
                self.target
            ));
        }
        r
    }
}

/// Whether process `pid` holds one of `sockets` (`socket:[INODE]`, as its /proc/PID/fd links
/// read): how the process that serves a port is told from the others of its group.
pub fn holds(pid: i32, sockets: &[String]) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|link| sockets.iter().any(|s| link.as_os_str() == s.as_str()))
}

/// Of `processes`, the oldest that holds one of `sockets` (nginx's master rather than a
/// worker, a server rather than the `sh -c` around it, which holds none); `None` when no
/// readable process holds one.
pub fn oldest_holder<'a>(
    processes: impl IntoIterator<Item = &'a procfs::process::Process>,
    sockets: &[String],
) -> Option<u32> {
    processes
        .into_iter()
        .filter(|p| holds(p.pid, sockets))
        .filter_map(|p| p.stat().ok())
        .min_by_key(|s| (s.starttime, s.pid))
        .and_then(|s| u32::try_from(s.pid).ok())
}

/// Whether a process given by `--pid` serves the port the load is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PidServes {
    /// The process or one of its descendants holds a socket listening on the port.
    Yes,
    /// Sockets listen on the port in this network namespace, but none is held by the
    /// process or its descendants.
    No {
        /// The oldest process that holds one, if readable.
        owner: Option<u32>,
    },
    /// Nothing listens on the port in this network namespace (a server on another host or
    /// in another namespace, reached through a forward): it cannot be told here.
    Unknown,
}

/// Whether `pid` or a process of its tree holds a socket listening on `port` (in this
/// network namespace): how a `--pid` that names another process than the server is caught.
pub fn pid_serves(pid: u32, port: u16) -> std::io::Result<PidServes> {
    let sockets: Vec<String> = listeners(port)?
        .iter()
        .map(|l| format!("socket:[{}]", l.inode))
        .collect();
    if sockets.is_empty() {
        return Ok(PidServes::Unknown);
    }
    let tree = crate::tree::ProcessTree::new(pid, None);
    if tree.live_pids().into_iter().any(|p| holds(p, &sockets)) {
        return Ok(PidServes::Yes);
    }
    let all: Vec<_> = procfs::process::all_processes()
        .map_err(std::io::Error::other)?
        .flatten()
        .collect();
    Ok(PidServes::No {
        owner: oldest_holder(&all, &sockets),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_shows_its_backlog_and_its_queue() {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        socket.listen(3).unwrap();
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        let found = listeners(port).expect("sock_diag works here");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].backlog, 3);
        assert_eq!(found[0].queue, 0);
        // Connections the server never accepts wait in the queue until it is full.
        let clients: Vec<_> = (0..6)
            .filter_map(|_| {
                std::net::TcpStream::connect_timeout(
                    &SocketAddr::from(([127, 0, 0, 1], port)),
                    Duration::from_millis(200),
                )
                .ok()
            })
            .collect();
        assert!(!clients.is_empty());
        let mut watch = ListenWatch::new(SocketAddr::from(([127, 0, 0, 1], port)));
        let sample = watch.sample(Duration::from_millis(1500)).unwrap();
        assert!(sample.queue >= 3, "{sample:?}");
        assert_eq!(sample.full, 1);
        let report = watch.finish();
        assert_eq!(report.full_samples, 1);
        assert_eq!(report.full_seconds, vec![1]);
        assert_eq!(report.backlog, Some(3));
    }

    #[test]
    fn nothing_listening_is_said_not_zeroed() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut watch = ListenWatch::new(SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(watch.sample(Duration::ZERO), None);
        let report = watch.finish();
        assert_eq!(report.samples, 0);
        assert!(report.unavailable.unwrap().contains("no socket listening"));
    }
}
