//! The reference server's ring (`tailscope-server`): multishot accept into direct
//! descriptors, multishot recv into the provided-buffer ring, sends of owned buffers, and a
//! table of the ops in flight whose entries hold each op's typed token (what it was for) and
//! the memory the kernel may touch.
//!
//! The rule that makes it safe (tokio-uring's): memory the kernel may touch belongs to this
//! module until the completion that releases it has been reaped. A send takes its `Vec` by
//! value and hands it back in the completion; a timeout's timespec is kept here until it
//! fires; received bytes land in the registered provided-buffer ring, whose buffers are only
//! read between their completion and their return to the ring. An accepted socket is a slot of
//! the ring's registered file table (a direct descriptor: multishot accept allocates it, so
//! the process's RLIMIT_NOFILE does not bound the connections, each worker's table holding up
//! to that many), or, where the kernel has no such tables, an `OwnedFd` made here, where it is
//! known to be new and unowned. A slot is closed by an op, so it is given out again only after
//! every op queued before that close has looked its file up.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use io_uring::types::{Fd, Fixed, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};

use crate::{kernel_at_least, retire, submit_error_is_transient, BufRing};

/// The buffer group of the provided-buffer ring.
const BUF_GROUP: u16 = 0;

/// What an op carried, handed back when it completes.
#[derive(Debug)]
pub enum Payload {
    /// Nothing (recv, timeout, or a failed accept).
    None,
    /// A connection accepted by multishot accept.
    Accepted(Socket),
    /// A send's buffer and the offset the send started at.
    Sent(Vec<u8>, usize),
}

/// One completion, translated.
#[derive(Debug)]
pub struct Completion<T> {
    /// The caller's token for the op: what it was for, kept beside the op (the kernel's
    /// user data is the op's [`OpId`]).
    pub token: T,
    /// The kernel's result: bytes, an fd, or a negative errno.
    pub result: i32,
    /// A multishot op goes on (more completions will follow).
    pub more: bool,
    /// The provided buffer that received data, if any; return it with [`Ring::recycle`].
    pub buffer: Option<u16>,
    /// What the op carried.
    pub payload: Payload,
}

/// An accepted connection's socket, as the ring's ops name it. Give it back with
/// [`Ring::close`] (dropping a direct one would leave its slot taken).
#[derive(Debug)]
pub enum Socket {
    /// A descriptor of the process's table.
    Plain(OwnedFd),
    /// A slot of the ring's registered file table.
    Direct(u32),
}

/// Builds the op `$build` with `$target` bound to the socket as ops take it (a fixed slot
/// or a descriptor: io_uring's builders take either, as different types).
macro_rules! on_socket {
    ($socket:expr, |$target:ident| $build:expr) => {
        match $socket {
            Socket::Direct(slot) => {
                let $target = Fixed(*slot);
                $build
            }
            Socket::Plain(fd) => {
                let $target = Fd(fd.as_raw_fd());
                $build
            }
        }
    };
}

#[derive(Debug)]
enum Resource {
    None,
    Accept,
    Send(Vec<u8>, usize),
    /// Never read: held so the kernel's pointer to it stays valid until the timeout fires.
    Timeout(#[allow(dead_code)] Box<Timespec>),
}

#[derive(Debug)]
struct Op<T> {
    token: T,
    resource: Resource,
}

/// An op in flight, as the kernel knows it: its user data (the index of its entry in the
/// ring's table of ops, and that entry's generation above it, so that an id outlives
/// neither its op nor a later op in the same entry). Cancel it with [`Ring::shutdown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpId(u64);

impl OpId {
    fn new(index: usize, generation: u32) -> OpId {
        OpId(u64::from(generation) << 32 | index as u64)
    }

    fn index(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// One thread's io_uring with its provided-buffer ring and the resources of its ops, each
/// op with the caller's token `T` (what it was for), handed back in its completions.
pub struct Ring<T> {
    // Field order matters: the ring is dropped (cancelling every op) before the buffers.
    ring: IoUring,
    bufs: BufRing,
    /// Ops in flight, by index, with each entry's generation (bumped when the entry is
    /// reused: see [`OpId`]).
    ops: Vec<(u32, Option<Op<T>>)>,
    free_ops: Vec<usize>,
    cqes: Vec<cqueue::Entry>,
    /// Accepted sockets go into a registered file table (direct descriptors).
    direct: bool,
}

impl<T: Copy> Ring<T> {
    /// A ring with `entries` submission slots and `buffers` provided buffers of `buffer_size`
    /// bytes. Uses `SINGLE_ISSUER | DEFER_TASKRUN` where the kernel has them, and a
    /// registered file table of `direct_slots` for accepted sockets where it has sparse tables
    /// and direct accept and close (else plain descriptors).
    pub fn new(
        entries: u32,
        buffers: u16,
        buffer_size: usize,
        direct_slots: u32,
    ) -> io::Result<Ring<T>> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(entries * 4)
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 4).build(entries))?;
        let mut bufs = BufRing::new(buffers, buffer_size)?;
        // SAFETY: `bufs` lives in the `Ring` beside `ring`, and is dropped after it (field
        // order), so never while registered.
        unsafe { bufs.register(&ring.submitter(), BUF_GROUP)? };
        let direct =
            direct_supported(&ring) && ring.submitter().register_files_sparse(direct_slots).is_ok();
        Ok(Ring {
            ring,
            bufs,
            ops: Vec::new(),
            free_ops: Vec::new(),
            cqes: Vec::with_capacity(1024),
            direct,
        })
    }

    fn push(&mut self, entry: squeue::Entry, token: T, resource: Resource) -> io::Result<OpId> {
        let slot = match self.free_ops.pop() {
            Some(s) => s,
            None => {
                self.ops.push((0, None));
                self.ops.len() - 1
            }
        };
        let (generation, op) = &mut self.ops[slot];
        *generation = generation.wrapping_add(1);
        *op = Some(Op { token, resource });
        let id = OpId::new(slot, *generation);
        let entry = entry.user_data(id.0);
        loop {
            // SAFETY: every pointer in `entry` refers to memory owned by `self.ops[slot]`
            // (a send's Vec, a timeout's boxed timespec), by the buffer ring, or to nothing;
            // it stays there until this op's final completion is reaped in `reap`.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                return Ok(id);
            }
            // The submission queue is full: hand it to the kernel and try again.
            self.ring.submit()?;
        }
    }

    /// Arms multishot accept on a listening socket.
    pub fn accept_multi(&mut self, listener: &impl AsRawFd, token: T) -> io::Result<()> {
        // A direct socket is in no descriptor table: SOCK_CLOEXEC is refused (EINVAL).
        let flags = if self.direct { 0 } else { libc::SOCK_CLOEXEC };
        let e = opcode::AcceptMulti::new(Fd(listener.as_raw_fd()))
            .flags(flags)
            .allocate_file_index(self.direct)
            .build();
        self.push(e, token, Resource::Accept).map(drop)
    }

    /// Arms multishot recv into the provided buffers.
    pub fn recv_multi(&mut self, socket: &Socket, token: T) -> io::Result<OpId> {
        let e = on_socket!(socket, |t| opcode::RecvMulti::new(t, BUF_GROUP).build());
        self.push(e, token, Resource::None)
    }

    /// Sends `buf[offset..]`; the buffer comes back in the completion.
    pub fn send(
        &mut self,
        socket: &Socket,
        buf: Vec<u8>,
        offset: usize,
        token: T,
    ) -> io::Result<OpId> {
        assert!(offset < buf.len(), "nothing to send");
        let rest = &buf[offset..];
        let (at, len) = (rest.as_ptr(), rest.len() as u32);
        let e = on_socket!(socket, |t| opcode::Send::new(t, at, len)
            .flags(libc::MSG_NOSIGNAL)
            .build());
        // Moving the Vec into the op moves its header, not its heap buffer, so the pointer
        // in the entry stays valid.
        self.push(e, token, Resource::Send(buf, offset))
    }

    /// Makes the ops armed on `socket` (`armed`: those whose last completion has not been
    /// reaped) finish, so that it can be closed: a shutdown (both ways) for a descriptor, at
    /// once; for a slot, a cancel of each of those ops by its own user data (each completing
    /// under `token`, its result of no interest; see [`crate::retire`] for why never by
    /// descriptor), whose close then sends the FIN. A recv that already ended (the client
    /// closed first, the common case) needs no cancel at all.
    pub fn shutdown(
        &mut self,
        socket: &Socket,
        armed: impl IntoIterator<Item = OpId>,
        token: T,
    ) -> io::Result<()> {
        match socket {
            Socket::Plain(fd) => {
                let _ = socket2::SockRef::from(fd).shutdown(std::net::Shutdown::Both);
                Ok(())
            }
            Socket::Direct(_) => {
                for op in armed {
                    self.push(retire::cancel(op.0, 0), token, Resource::None)?;
                }
                Ok(())
            }
        }
    }

    /// Closes `socket`: a descriptor at once, a slot by an op queued behind every op that
    /// names it (completing under `token`, its result of no interest).
    pub fn close(&mut self, socket: Socket, token: T) -> io::Result<()> {
        match socket {
            Socket::Plain(fd) => {
                drop(fd);
                Ok(())
            }
            Socket::Direct(slot) => self
                .push(retire::close(slot, 0), token, Resource::None)
                .map(drop),
        }
    }

    /// Completes after `after`.
    pub fn timeout(&mut self, after: Duration, token: T) -> io::Result<()> {
        let ts = Box::new(
            Timespec::new()
                .sec(after.as_secs())
                .nsec(after.subsec_nanos()),
        );
        let e = opcode::Timeout::new(&*ts as *const Timespec).build();
        self.push(e, token, Resource::Timeout(ts)).map(drop)
    }

    /// Hands what is queued to the kernel without waiting for anything.
    pub fn submit(&mut self) -> io::Result<()> {
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(e) if submit_error_is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Submits what is queued and waits for at least one completion. Interrupted waits
    /// (signals) return normally.
    pub fn submit_and_wait(&mut self) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            Err(e) if submit_error_is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Moves every available completion into `out`, releasing finished ops' resources.
    pub fn reap(&mut self, out: &mut Vec<Completion<T>>) {
        self.cqes.clear();
        self.cqes.extend(self.ring.completion());
        for cqe in self.cqes.drain(..) {
            let id = OpId(cqe.user_data());
            let slot = id.index();
            let flags = cqe.flags();
            let more = cqueue::more(flags);
            let Some(op) = self
                .ops
                .get_mut(slot)
                .filter(|(generation, _)| *generation == id.generation())
                .and_then(|(_, op)| op.as_mut())
            else {
                continue;
            };
            let token = op.token;
            let payload = match &op.resource {
                // Direct: the slot the kernel allocated in the table.
                Resource::Accept if cqe.result() >= 0 && self.direct => {
                    Payload::Accepted(Socket::Direct(cqe.result() as u32))
                }
                Resource::Accept if cqe.result() >= 0 => {
                    // SAFETY: a non-negative accept result is a new descriptor the kernel
                    // just created for this process; nothing else owns it.
                    Payload::Accepted(Socket::Plain(unsafe { OwnedFd::from_raw_fd(cqe.result()) }))
                }
                _ => Payload::None,
            };
            let mut completion = Completion {
                token,
                result: cqe.result(),
                more,
                buffer: cqueue::buffer_select(flags),
                payload,
            };
            if !more {
                let op = self.ops[slot].1.take().expect("checked above");
                self.free_ops.push(slot);
                if let Resource::Send(buf, offset) = op.resource {
                    completion.payload = Payload::Sent(buf, offset);
                }
            }
            out.push(completion);
        }
    }

    /// The bytes a recv completion put in provided buffer `bid`.
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        self.bufs.slice(bid, len)
    }

    /// Gives a provided buffer back to the kernel.
    pub fn recycle(&mut self, bid: u16) {
        self.bufs.recycle(bid);
    }
}

/// Whether io_uring works here at all (seccomp and `kernel.io_uring_disabled` make
/// `io_uring_setup` fail).
pub fn probe() -> io::Result<()> {
    IoUring::new(8).map(drop)
}

/// Whether `ring`'s kernel has what direct accepted sockets need: sparse file tables and
/// multishot accept into them (5.19), a cancel by slot (6.0) and the close of a slot (5.15).
fn direct_supported(ring: &IoUring) -> bool {
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe).is_ok()
        && [
            opcode::AsyncCancel2::CODE,
            opcode::Close::CODE,
            opcode::RecvMulti::CODE,
        ]
        .iter()
        .all(|&code| probe.is_supported(code))
        && kernel_at_least(6, 0)
}
