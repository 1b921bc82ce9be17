//! The generator's sockets: made plain or in a ring's registered file table, and retired
//! (shut down, closed once nothing queued names them) when dropped.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::Ring;
use crate::OpToken;

/// Sockets dropped while submissions may still name them. A plain descriptor is closed only
/// when the ring's submission queue is empty: a queued submission names its socket by
/// number, and the descriptor table is the process's, so were the socket closed first, any
/// thread (another worker, the profiler) could get the same number and the submission would
/// act on that thread's file. A direct descriptor's slot is shut down and closed by ops the
/// ring queues behind whatever names it, and is given out again only once that close has
/// completed.
#[derive(Debug, Default)]
pub(super) struct Retired {
    pub(super) fds: Vec<OwnedFd>,
    /// Each slot with the user data of the ops still armed on it when it was dropped.
    pub(super) slots: Vec<(u32, Armed)>,
}

/// What an op on a socket is, for [`Armed`].
#[derive(Debug, Clone, Copy)]
pub(super) enum OpKind {
    Connect = 0,
    Recv = 1,
    Send = 2,
}

/// The user data of a socket's ops whose last completion has not been reaped (0: none): a
/// socket has at most one connect, one recv and one send in flight. Retiring a direct
/// socket cancels these by their user data, never by descriptor (see `Ring::retire_slots`).
pub(super) type Armed = [u64; 3];

pub(super) type Parked = Rc<RefCell<Retired>>;

/// Plain sockets' descriptors kept beside a direct descriptor, over all rings, so that
/// TCP_INFO stays readable (io_uring's getsockopt reads SOL_SOCKET options only); at most
/// [`info_fd_budget`], so that the descriptor table never runs out because of them.
static INFO_FDS: AtomicUsize = AtomicUsize::new(0);

/// How many plain descriptors direct sockets may keep for TCP_INFO: half of what the
/// process may open beyond a reserve for everything else (threads, the profiler, files).
fn info_fd_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| open_file_limit().saturating_sub(1024) as usize / 2)
}

/// RLIMIT_NOFILE's soft limit now (the binary raised it to the hard limit before the run).
fn open_file_limit() -> u64 {
    crate::open_file_limit()
}

/// A socket's file as an op names it.
pub(super) enum Target {
    Fixed(u32),
    Plain(RawFd),
}

/// Where a socket's file is for the ring's ops.
#[derive(Debug)]
enum Place {
    /// A descriptor of the process's table.
    Plain(OwnedFd),
    /// A slot of the ring's registered file table, and, while the budget allows, the plain
    /// descriptor it was made from (for TCP_INFO and plain sends; never named by an op).
    Direct { slot: u32, fd: Option<OwnedFd> },
}

/// A non-blocking TCP socket of the generator. Dropping it retires it with its [`Ring`]:
/// shut down (so that a recv armed on it completes) and closed once nothing queued names it.
#[derive(Debug)]
pub struct Socket {
    /// Always `Some` until dropped.
    place: Option<Place>,
    parked: Parked,
    armed: Cell<Armed>,
}

impl Socket {
    /// A new non-blocking TCP socket for `addr`'s family, with TCP_NODELAY set (requests are
    /// written whole, and a pipelined batch must not wait for an ACK), given to `prepare`
    /// (to bind it to a source address, say), for `ring`'s ops: in a slot of its registered file table when it
    /// has one (the plain descriptor is closed then, unless it is kept for TCP_INFO or
    /// `keep_fd` asks for it), else a plain descriptor. A full table is EMFILE, as a full
    /// descriptor table would be.
    pub fn tcp<T: OpToken>(
        addr: &SocketAddr,
        keep_fd: bool,
        ring: &mut Ring<T>,
        prepare: impl FnOnce(&OwnedFd) -> io::Result<()>,
    ) -> io::Result<Socket> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(*addr),
            socket2::Type::STREAM.nonblocking().cloexec(),
            None,
        )?;
        socket.set_nodelay(true)?;
        let fd = OwnedFd::from(socket);
        prepare(&fd)?;
        let place = match ring.table.as_mut() {
            None => Place::Plain(fd),
            Some(table) => {
                // Full with every slot in use: the table holds as many as RLIMIT_NOFILE lets
                // it. (Full while slots are closing is a wait, see `Ring::waits_for_slot`.)
                let Some(slot) = table.free.pop() else {
                    return Err(io::Error::from_raw_os_error(libc::EMFILE));
                };
                if let Err(e) = ring
                    .ring
                    .submitter()
                    .register_files_update(slot, &[fd.as_raw_fd()])
                {
                    table.free.push(slot);
                    return Err(e);
                }
                let keep = if keep_fd {
                    INFO_FDS.fetch_add(1, Ordering::Relaxed);
                    true
                } else {
                    INFO_FDS
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            (n < info_fd_budget()).then_some(n + 1)
                        })
                        .is_ok()
                };
                Place::Direct {
                    slot,
                    fd: keep.then_some(fd),
                }
            }
        };
        Ok(Socket {
            place: Some(place),
            parked: ring.parked.clone(),
            armed: Cell::new([0; 3]),
        })
    }

    /// An op of `kind` under `user_data` was handed to the ring on this socket.
    pub(super) fn armed(&self, kind: OpKind, user_data: u64) {
        let mut armed = self.armed.get();
        armed[kind as usize] = user_data;
        self.armed.set(armed);
    }

    /// The last completion of the op under `token` was reaped: retiring the socket need not
    /// cancel it (a cancel that finds nothing costs a lookup all the same).
    pub fn op_ended(&self, token: impl OpToken) {
        let user_data = token.encode();
        let mut armed = self.armed.get();
        for a in armed.iter_mut().filter(|a| **a == user_data) {
            *a = 0;
        }
        self.armed.set(armed);
    }

    pub(super) fn target(&self) -> Target {
        match self.place.as_ref().expect("open until dropped") {
            Place::Plain(fd) => Target::Plain(fd.as_raw_fd()),
            Place::Direct { slot, .. } => Target::Fixed(*slot),
        }
    }

    /// The plain descriptor, when the socket has one.
    pub(super) fn plain_fd(&self) -> Option<&OwnedFd> {
        match self.place.as_ref().expect("open until dropped") {
            Place::Plain(fd) | Place::Direct { fd: Some(fd), .. } => Some(fd),
            Place::Direct { fd: None, .. } => None,
        }
    }
}

impl std::os::fd::AsFd for Socket {
    /// The plain descriptor. Only a socket made with `keep_fd` (a slow held connection's,
    /// which sends its bytes with plain sends) or a plain one may be asked for it.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.plain_fd()
            .expect("a socket asked for its descriptor keeps one")
            .as_fd()
    }
}

impl AsRawFd for Socket {
    /// The plain descriptor for TCP_INFO reads, or -1 for a direct socket that keeps none
    /// (the read then fails, EBADF, and the connection's TCP facts are not known).
    fn as_raw_fd(&self) -> RawFd {
        self.plain_fd().map_or(-1, AsRawFd::as_raw_fd)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        match self.place.take() {
            None => {}
            Some(Place::Plain(fd)) => {
                // An error (a socket that never connected) is of no consequence. The
                // descriptor stays open (parked), so its number is not reused while a
                // queued submission names it.
                let _ = socket2::SockRef::from(&fd).shutdown(std::net::Shutdown::Both);
                self.parked.borrow_mut().fds.push(fd);
            }
            Some(Place::Direct { slot, fd }) => {
                // The plain descriptor is named by no op: it closes now (the socket lives on
                // in the table until the ring's close op).
                if fd.is_some() {
                    INFO_FDS.fetch_sub(1, Ordering::Relaxed);
                }
                drop(fd);
                self.parked
                    .borrow_mut()
                    .slots
                    .push((slot, self.armed.get()));
            }
        }
    }
}

/// A ring's registered file table: its free slots (a slot is free once its close completed).
pub(super) struct Table {
    pub(super) free: Vec<u32>,
    /// Slots whose close is queued or in flight: free again once it completes.
    pub(super) closing: usize,
}
