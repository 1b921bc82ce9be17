//! Every `unsafe` operation of the server lives here, behind a safe API.
//!
//! The rule that makes it safe (tokio-uring's): memory the kernel may touch belongs to this
//! module until the completion that releases it has been reaped. A send takes its `Vec` by
//! value and hands it back in the completion; a timeout's timespec is kept here until it
//! fires; received bytes land in the registered provided-buffer ring, whose buffers are only
//! read between their completion and their return to the ring. An accepted socket becomes an
//! `OwnedFd` here, where it is known to be new and unowned.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{BufRingEntry, Fd, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};

/// The buffer group of the provided-buffer ring.
const BUF_GROUP: u16 = 0;

/// What an op carried, handed back when it completes.
#[derive(Debug)]
pub enum Payload {
    /// Nothing (recv, timeout, or a failed accept).
    None,
    /// A connection accepted by multishot accept.
    Accepted(OwnedFd),
    /// A send's buffer and the offset the send started at.
    Sent(Vec<u8>, usize),
}

/// One completion, translated.
#[derive(Debug)]
pub struct Completion {
    /// The caller's token for the op.
    pub token: u64,
    /// The kernel's result: bytes, an fd, or a negative errno.
    pub result: i32,
    /// A multishot op goes on (more completions will follow).
    pub more: bool,
    /// The provided buffer that received data, if any; return it with [`Ring::recycle`].
    pub buffer: Option<u16>,
    /// What the op carried.
    pub payload: Payload,
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
struct Op {
    token: u64,
    resource: Resource,
}

/// Provided buffers the kernel fills for multishot recv.
struct BufRing {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    buffers: *mut u8,
    buffers_layout: Layout,
    count: u16,
    size: usize,
    tail: u16,
}

impl BufRing {
    fn new(count: u16, size: usize) -> io::Result<BufRing> {
        assert!(
            count.is_power_of_two(),
            "buffer ring size must be a power of two"
        );
        let entries_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(|e| io::Error::other(e.to_string()))?;
        let buffers_layout = Layout::from_size_align(usize::from(count) * size, 64)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: both layouts have non-zero size (count >= 1, size >= 1); a null return is
        // handled as an allocation failure.
        let (entries, buffers) = unsafe {
            (
                alloc_zeroed(entries_layout).cast::<BufRingEntry>(),
                alloc_zeroed(buffers_layout),
            )
        };
        if entries.is_null() || buffers.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "cannot allocate the buffer ring",
            ));
        }
        Ok(BufRing {
            entries,
            entries_layout,
            buffers,
            buffers_layout,
            count,
            size,
            tail: 0,
        })
    }

    fn tail_ref(&self) -> &AtomicU16 {
        // SAFETY: `entries` is the page-aligned, zero-initialised base of the ring; the tail
        // is the u16 that overlays the first entry's reserved field (io_uring_buf_ring), and
        // the kernel reads it concurrently, hence the atomic.
        unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() }
    }

    /// Puts buffer `bid` at the tail without publishing it.
    fn push(&mut self, bid: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        // SAFETY: `index` < count, so the entry lies inside the allocation. The kernel only
        // reads entries between its head and the published tail; this one is past the tail.
        let entry = unsafe { &mut *self.entries.add(index) };
        // SAFETY: bid < count, so the buffer lies inside the buffers allocation.
        let addr = unsafe { self.buffers.add(usize::from(bid) * self.size) };
        entry.set_addr(addr as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        self.tail_ref().store(self.tail, Ordering::Release);
    }

    fn slice(&self, bid: u16, len: usize) -> &[u8] {
        assert!(
            bid < self.count && len <= self.size,
            "buffer {bid} of {len} bytes is out of range"
        );
        // SAFETY: the kernel wrote `len` bytes into buffer `bid` and posted the completion
        // that named it; it does not write there again until the buffer is pushed back,
        // which takes `&mut self` and so cannot happen while this borrow lives.
        unsafe { std::slice::from_raw_parts(self.buffers.add(usize::from(bid) * self.size), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts; the ring that used them is dropped
        // (and so unregistered) before this, see `Ring`'s field order.
        unsafe {
            dealloc(self.entries.cast(), self.entries_layout);
            dealloc(self.buffers, self.buffers_layout);
        }
    }
}

/// One thread's io_uring with its provided-buffer ring and the resources of its ops.
pub struct Ring {
    // Field order matters: the ring is dropped (cancelling every op) before the buffers.
    ring: IoUring,
    bufs: BufRing,
    ops: Vec<Option<Op>>,
    free_ops: Vec<usize>,
    cqes: Vec<cqueue::Entry>,
}

impl Ring {
    /// A ring with `entries` submission slots and `buffers` provided buffers of `buffer_size`
    /// bytes. Uses `SINGLE_ISSUER | DEFER_TASKRUN` where the kernel has them.
    pub fn new(entries: u32, buffers: u16, buffer_size: usize) -> io::Result<Ring> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(entries * 4)
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 4).build(entries))?;
        let mut bufs = BufRing::new(buffers, buffer_size)?;
        // SAFETY: the ring memory is page aligned, `buffers` entries long and lives in `bufs`
        // until after `ring` is dropped (field order), so the kernel never sees it freed.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries as u64,
                buffers,
                BUF_GROUP,
                0,
            )?
        };
        for bid in 0..buffers {
            bufs.push(bid);
        }
        bufs.publish();
        Ok(Ring {
            ring,
            bufs,
            ops: Vec::new(),
            free_ops: Vec::new(),
            cqes: Vec::with_capacity(1024),
        })
    }

    /// Whether io_uring works here at all (seccomp and `kernel.io_uring_disabled` make
    /// `io_uring_setup` fail).
    pub fn probe() -> io::Result<()> {
        IoUring::new(8).map(drop)
    }

    fn push(&mut self, entry: squeue::Entry, token: u64, resource: Resource) -> io::Result<()> {
        let slot = match self.free_ops.pop() {
            Some(s) => s,
            None => {
                self.ops.push(None);
                self.ops.len() - 1
            }
        };
        let entry = entry.user_data(slot as u64);
        self.ops[slot] = Some(Op { token, resource });
        loop {
            // SAFETY: every pointer in `entry` refers to memory owned by `self.ops[slot]`
            // (a send's Vec, a timeout's boxed timespec), by the buffer ring, or to nothing;
            // it stays there until this op's final completion is reaped in `reap`.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // The submission queue is full: hand it to the kernel and try again.
            self.ring.submit()?;
        }
    }

    /// Arms multishot accept on a listening socket.
    pub fn accept_multi(&mut self, listener: &impl AsRawFd, token: u64) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.push(e, token, Resource::Accept)
    }

    /// Arms multishot recv into the provided buffers.
    pub fn recv_multi(&mut self, socket: &impl AsRawFd, token: u64) -> io::Result<()> {
        let e = opcode::RecvMulti::new(Fd(socket.as_raw_fd()), BUF_GROUP).build();
        self.push(e, token, Resource::None)
    }

    /// Sends `buf[offset..]`; the buffer comes back in the completion.
    pub fn send(
        &mut self,
        socket: &impl AsRawFd,
        buf: Vec<u8>,
        offset: usize,
        token: u64,
    ) -> io::Result<()> {
        assert!(offset < buf.len(), "nothing to send");
        let rest = &buf[offset..];
        let e = opcode::Send::new(Fd(socket.as_raw_fd()), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        // Moving the Vec into the op moves its header, not its heap buffer, so the pointer
        // in the entry stays valid.
        self.push(e, token, Resource::Send(buf, offset))
    }

    /// Completes after `after`.
    pub fn timeout(&mut self, after: Duration, token: u64) -> io::Result<()> {
        let ts = Box::new(
            Timespec::new()
                .sec(after.as_secs())
                .nsec(after.subsec_nanos()),
        );
        let e = opcode::Timeout::new(&*ts as *const Timespec).build();
        self.push(e, token, Resource::Timeout(ts))
    }

    /// Submits what is queued and waits for at least one completion. Interrupted waits
    /// (signals) return normally.
    pub fn submit_and_wait(&mut self) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::EAGAIN | libc::ETIME)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Moves every available completion into `out`, releasing finished ops' resources.
    pub fn reap(&mut self, out: &mut Vec<Completion>) {
        self.cqes.clear();
        self.cqes.extend(self.ring.completion());
        for cqe in self.cqes.drain(..) {
            let slot = cqe.user_data() as usize;
            let flags = cqe.flags();
            let more = cqueue::more(flags);
            let Some(op) = self.ops.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let token = op.token;
            let payload = match &op.resource {
                Resource::Accept if cqe.result() >= 0 => {
                    // SAFETY: a non-negative accept result is a new descriptor the kernel
                    // just created for this process; nothing else owns it.
                    Payload::Accepted(unsafe { OwnedFd::from_raw_fd(cqe.result()) })
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
                let op = self.ops[slot].take().expect("checked above");
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
        self.bufs.push(bid);
        self.bufs.publish();
    }
}
