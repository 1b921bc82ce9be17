//! The generator's ring (`tailscope-loadgen`'s io_uring engine): connects with a linked
//! timeout, multishot recvs into the provided-buffer ring, sends from one request batch, each
//! op under the engine's typed token ([`OpToken`]), and its sockets ([`Socket`]) retired by
//! the ring when dropped ([`crate::retire`]).
//!
//! The rule that makes it safe (tokio-uring's): memory the kernel may touch belongs to this
//! module until the completion that releases it has been reaped, or, where the kernel copies
//! it while the submission is prepared (a connect's address, a timeout's timespec), until the
//! submission has been handed to the kernel. Sends read from the request batch, which the
//! [`Ring`] owns and frees only once no op is left (else leaks); received bytes land in the
//! registered provided-buffer ring ([`BufRing`], shared with the reference
//! server), whose buffers are only read between their completion and their return to the
//! ring. A socket is made here: a slot of the ring's registered file table (a direct
//! descriptor, installed from a plain socket that is then closed, unless kept for TCP_INFO)
//! or, where the kernel has no such tables, a plain descriptor. Either is shut down when
//! dropped, so that a multishot recv armed on it ends, and closed only once nothing queued
//! names it (see `socket::Retired`). Sockets are in [`socket`].

mod socket;

use std::io;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use std::marker::PhantomData;

use io_uring::types::{CancelBuilder, Fd, Fixed, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring, Probe};

use crate::{retire, submit_error_is_transient, BufRing, OpToken};
pub use socket::Socket;
use socket::{OpKind, Parked, Table, Target};

/// The buffer group of the provided-buffer ring.
const BUF_GROUP: u16 = 0;
/// The most sockets a thread's ring holds with DEFER_TASKRUN (see [`Ring::new`]).
const DEFER_TASKRUN_MAX_SOCKETS: usize = 2048;
/// The ring's own ops, in the top byte of their user data (reserved: see [`OpToken`]): a
/// retired slot's cancel of its ops, and its close (with the slot in the low bits).
const OP_RETIRE_CANCEL: u64 = 0xfe;
const OP_RETIRE_CLOSE: u64 = 0xff;
/// At the end, how long dropped sockets' ops are given to end by themselves before
/// everything left is cancelled at once (see [`Ring::cancel_and_wait`]).
const RETIRED_OPS_WAIT: Duration = Duration::from_millis(200);

/// One completion of an op of the engine's.
#[derive(Debug, Clone, Copy)]
pub struct Completion<T> {
    /// What the op was for.
    pub token: T,
    /// The kernel's result: bytes, or a negative errno.
    pub result: i32,
    /// A multishot op goes on (more completions will follow).
    pub more: bool,
    /// The provided buffer that received data, if any; give it back with [`Ring::recycle`].
    pub buffer: Option<u16>,
}

/// Builds the op `$build` with `$target` bound to the socket's file as the op takes it: a
/// fixed slot or a plain descriptor (io_uring's builders take either, but the two are
/// different types).
macro_rules! on_socket {
    ($socket:expr, |$target:ident| $build:expr) => {
        match $socket.target() {
            Target::Fixed(slot) => {
                let $target = Fixed(slot);
                $build
            }
            Target::Plain(fd) => {
                let $target = Fd(fd);
                $build
            }
        }
    };
}

/// One generator thread's io_uring: its provided-buffer ring, the request batch its sends
/// read from, and the target's address its connects use; its ops carry tokens `T`.
pub struct Ring<T: OpToken> {
    // Dropping the ring cancels its ops and waits for them; memory they may still use is
    // leaked rather than freed (see `Drop`).
    ring: IoUring,
    bufs: ManuallyDrop<BufRing>,
    batch: Box<[u8]>,
    /// Boxed: connects point at it.
    addr: Box<socket2::SockAddr>,
    /// Linked-timeout timespecs, kept until the submission that carries them is handed to
    /// the kernel (which copies them while preparing it): until a submit leaves the
    /// submission queue empty, as a submit may take only some of it. Boxed: a submission points at its
    /// timespec, which must not move when the vector grows.
    #[allow(clippy::vec_box)]
    timespecs: Vec<Box<Timespec>>,
    /// Dropped sockets, closed once nothing queued names them (see [`Retired`]).
    parked: Parked,
    /// The registered file table sockets live in; none: plain descriptors.
    table: Option<Table>,
    /// Ops handed in whose last completion has not been reaped.
    outstanding: usize,
    tokens: PhantomData<T>,
}

impl<T: OpToken> Ring<T> {
    /// A ring of `entries` submission slots (SINGLE_ISSUER | DEFER_TASKRUN), `buffers`
    /// provided buffers of `buffer_size` bytes, sending from `batch` and connecting to `addr`;
    /// its sockets in a registered file table of `direct` slots, or plain descriptors; for
    /// `sockets` sockets at most.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        entries: u32,
        buffers: u16,
        buffer_size: usize,
        batch: Vec<u8>,
        addr: SocketAddr,
        direct: Option<u32>,
        sockets: usize,
    ) -> io::Result<Ring<T>> {
        let mut builder = IoUring::builder();
        builder.setup_single_issuer().setup_cqsize(entries * 4);
        // DEFER_TASKRUN runs the kernel's task work (a recv's wake-up) only inside our
        // io_uring_enter: at 7,500 sockets a thread, responses sat unread in their sockets
        // for seconds (12,480 of 15,000 connections unfinished in a 5 s run; none without
        // it). Likely (not verified in the kernel source) the cap on the local work one
        // enter runs when it may return at once.
        // A thread with few sockets keeps it: it is what the p1/p16 figures were measured
        // with.
        if sockets <= DEFER_TASKRUN_MAX_SOCKETS {
            builder.setup_defer_taskrun();
        }
        let ring = builder.build(entries)?;
        let mut bufs = BufRing::new(buffers, buffer_size)?;
        // SAFETY: `bufs` lives in the `Ring`, whose drop frees it only once unregistered
        // with no op in flight, else leaks it.
        unsafe { bufs.register(&ring.submitter(), BUF_GROUP)? };
        let table = match direct {
            Some(slots) => {
                ring.submitter().register_files_sparse(slots)?;
                Some(Table {
                    free: (0..slots).rev().collect(),
                    closing: 0,
                })
            }
            None => None,
        };

        Ok(Ring {
            ring,
            bufs: ManuallyDrop::new(bufs),
            batch: batch.into_boxed_slice(),
            addr: Box::new(socket2::SockAddr::from(addr)),
            timespecs: Vec::new(),
            parked: Parked::default(),
            table,
            outstanding: 0,
            tokens: PhantomData,
        })
    }

    /// Queues the end of retired sockets' slots (their slots come back when the close
    /// completes), behind whatever already names them: each op still armed on the socket is
    /// cancelled by its own user data, then the slot is closed ([`retire::slot`], where the
    /// kernel behaviour this rests on is told). A connect's linked timeout goes with its
    /// connect.
    fn retire_slots(&mut self) -> io::Result<()> {
        let slots = std::mem::take(&mut self.parked.borrow_mut().slots);
        if let Some(table) = self.table.as_mut() {
            table.closing += slots.len();
        }
        let mut entries = Vec::with_capacity(4);
        for (slot, armed) in slots {
            retire::slot(
                slot,
                &armed,
                OP_RETIRE_CANCEL << 56,
                OP_RETIRE_CLOSE << 56 | u64::from(slot),
                &mut entries,
            );
            self.push_raw(&entries)?;
        }
        Ok(())
    }

    fn push(&mut self, entries: &[squeue::Entry]) -> io::Result<()> {
        if self.table.is_some() && !self.parked.borrow().slots.is_empty() {
            self.retire_slots()?;
        }
        self.push_raw(entries)
    }

    fn push_raw(&mut self, entries: &[squeue::Entry]) -> io::Result<()> {
        loop {
            // SAFETY: every pointer in these entries refers to memory this `Ring` owns until
            // the op completes (the batch, the address, the buffer ring) or until a submit
            // has emptied the submission queue (`timespecs`); see the module's rule.
            let pushed = unsafe { self.ring.submission().push_multiple(entries) };
            if pushed.is_ok() {
                self.outstanding += entries.len();
                return Ok(());
            }
            // The submission queue is full: hand it to the kernel and try again.
            let r = self.ring.submit();
            self.submitted();
            r?;
        }
    }

    /// After a submit (whole, short or refused): once the submission queue is empty, the
    /// kernel has prepared every submission, copying its timespec, and no queued op names a
    /// parked descriptor any more, so both go. The kernel looks a descriptor up when it
    /// first issues the op, inside the submit, and holds the file from then on; only an op
    /// linked behind another is issued later, and the only such op here, a connect's
    /// timeout, names no descriptor.
    fn submitted(&mut self) {
        if self.ring.submission().is_empty() {
            self.timespecs.clear();
            self.parked.borrow_mut().fds.clear();
        }
    }

    /// Whether a new socket must wait for a slot of the file table: none is free, but some
    /// are closing (free once their close completes, at the latest in the next wait). Not
    /// an error: under churn (`--no-keepalive`, a refused port) the sockets of one pass's
    /// reconnects and those retired in it outnumbered the spare slots, and each connect that
    /// found none counted as `too_many_open_files` although no limit was reached.
    pub fn waits_for_slot(&self) -> bool {
        self.table.as_ref().is_some_and(|table| {
            table.free.is_empty() && (table.closing > 0 || !self.parked.borrow().slots.is_empty())
        })
    }

    /// Connects `socket` to the ring's address within `limit` (a linked timeout: on expiry
    /// the connect completes with -ECANCELED); the timeout completes under `timeout_token`.
    pub fn connect(
        &mut self,
        socket: &Socket,
        limit: Duration,
        token: T,
        timeout_token: T,
    ) -> io::Result<()> {
        let (user_data, timeout_data) = (user_data(token), user_data(timeout_token));
        let ts = Box::new(Timespec::from(limit));
        let (addr, addr_len) = (self.addr.as_ptr(), self.addr.len());
        let connect = on_socket!(socket, |t| opcode::Connect::new(t, addr, addr_len).build())
            .flags(squeue::Flags::IO_LINK)
            .user_data(user_data);
        socket.armed(OpKind::Connect, user_data);
        let timeout = opcode::LinkTimeout::new(&*ts)
            .build()
            .user_data(timeout_data);
        self.timespecs.push(ts);
        self.push(&[connect, timeout])
    }

    /// Arms multishot recv into the provided buffers.
    pub fn recv_multi(&mut self, socket: &Socket, token: T) -> io::Result<()> {
        let user_data = user_data(token);
        let e = on_socket!(socket, |t| opcode::RecvMulti::new(t, BUF_GROUP).build())
            .user_data(user_data);
        socket.armed(OpKind::Recv, user_data);
        self.push(&[e])
    }

    /// The bytes sends read from, to patch a mix's placeholders into. The caller writes only
    /// a region no send in flight reads (a connection's own, between its sends): the kernel
    /// reads the rest meanwhile, and writing under it would send torn bytes.
    pub fn send_buffer_mut(&mut self) -> &mut [u8] {
        &mut self.batch
    }

    /// Sends `batch[from..to]`.
    pub fn send(&mut self, socket: &Socket, from: usize, to: usize, token: T) -> io::Result<()> {
        let user_data = user_data(token);
        let bytes = &self.batch[from..to];
        let (at, len) = (bytes.as_ptr(), bytes.len() as u32);
        let e = on_socket!(socket, |t| opcode::Send::new(t, at, len)
            .flags(libc::MSG_NOSIGNAL)
            .build())
        .user_data(user_data);
        socket.armed(OpKind::Send, user_data);
        self.push(&[e])
    }

    /// Cancels every op in flight (each completes, with -ECANCELED or its result).
    fn cancel_all(&mut self) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(CancelBuilder::any())
            .build()
            .user_data(OP_RETIRE_CANCEL << 56);
        self.push(&[e])
    }

    /// Hands what is queued to the kernel now, without waiting for a completion: the kernel
    /// issues each op inside this call (a loopback connect's handshake, a send's delivery to
    /// the peer's socket), so a caller that queues many can bound the time it spends before
    /// its next look at the clock. Refusals that leave entries queued (EBUSY, EAGAIN) are
    /// not errors: they go with the next submit.
    pub fn submit(&mut self) -> io::Result<()> {
        if self.table.is_some() && !self.parked.borrow().slots.is_empty() {
            self.retire_slots()?;
        }
        let r = self.ring.submit();
        self.submitted();
        match r {
            Ok(_) => Ok(()),
            Err(e) if submit_error_is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Submits what is queued and waits for a completion or for `limit` to pass, whichever
    /// comes first. Interrupted waits (signals) and the timeout return normally.
    pub fn submit_and_wait(&mut self, limit: Duration) -> io::Result<()> {
        if self.table.is_some() && !self.parked.borrow().slots.is_empty() {
            self.retire_slots()?;
        }
        let ts = Timespec::from(limit);
        let args = SubmitArgs::new().timespec(&ts);
        let r = self.ring.submitter().submit_with_args(1, &args);
        // Submitted, in part, or refused (EBUSY, EAGAIN): what is left stays queued.
        self.submitted();
        match r {
            Ok(_) => Ok(()),
            Err(e) if submit_error_is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Moves every available completion into `out`, but for the ring's own (a retired
    /// slot's cancel and close), which it handles itself.
    pub fn reap(&mut self, out: &mut Vec<Completion<T>>) {
        let from = out.len();
        let mut own = 0;
        for cqe in self.ring.completion() {
            let user_data = cqe.user_data();
            match user_data >> 56 {
                OP_RETIRE_CANCEL => own += 1,
                OP_RETIRE_CLOSE => {
                    own += 1;
                    if let Some(table) = self.table.as_mut() {
                        table.free.push((user_data & 0xffff_ffff) as u32);
                        table.closing = table.closing.saturating_sub(1);
                    }
                }
                _ => match T::decode(user_data) {
                    Some(token) => out.push(Completion {
                        token,
                        result: cqe.result(),
                        more: cqueue::more(cqe.flags()),
                        buffer: cqueue::buffer_select(cqe.flags()),
                    }),
                    // Never submitted by this ring.
                    None => own += 1,
                },
            }
        }
        let ended = out[from..].iter().filter(|c| !c.more).count() + own;
        self.outstanding = self.outstanding.saturating_sub(ended);
    }

    /// Reaps completions, giving their buffers back, until no op is left or `limit` has
    /// passed. The ops of sockets dropped before end by themselves (a plain socket's
    /// shutdown, a slot's cancels by user data); whatever is still in flight after
    /// [`RETIRED_OPS_WAIT`] is cancelled with one cancel of every op. Not at once: a cancel of any op matches each armed one by a walk of the
    /// whole cancel table (io_uring/poll.c `io_poll_file_find`), started again after every
    /// match, while cancelled ops stay there until their completion runs: n² over n ops.
    pub fn cancel_and_wait(&mut self, limit: Duration) {
        let start = Instant::now();
        self.reap_until(start + RETIRED_OPS_WAIT.min(limit));
        if self.outstanding > 0 {
            let _ = self.cancel_all();
            self.reap_until(start + limit);
        }
    }

    /// Reaps completions (giving their buffers back) until no op is left or `deadline`.
    fn reap_until(&mut self, deadline: Instant) {
        let mut completions = Vec::new();
        while self.outstanding > 0 {
            let now = Instant::now();
            if now >= deadline || self.submit_and_wait(deadline - now).is_err() {
                break;
            }
            completions.clear();
            self.reap(&mut completions);
            for c in &completions {
                if let Some(bid) = c.buffer {
                    self.recycle(bid);
                }
            }
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

impl<T: OpToken> Drop for Ring<T> {
    /// The kernel may write into the provided buffers and read the batch, the address and
    /// the timespecs until every op has completed: they are freed only then. Ops still in
    /// flight after a second (or a ring that failed) leave them leaked, as tokio-uring does,
    /// rather than freed under the kernel. A panic's unwinding comes through here too.
    fn drop(&mut self) {
        self.cancel_and_wait(Duration::from_secs(1));
        if self.outstanding == 0 && self.ring.submitter().unregister_buf_ring(BUF_GROUP).is_ok() {
            // SAFETY: unregistered, with no op left that could pick one of its buffers;
            // never used again (this is the ring's drop).
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
            return;
        }
        std::mem::forget(std::mem::take(&mut self.batch));
        std::mem::forget(std::mem::take(&mut self.timespecs));
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        std::mem::forget(std::mem::replace(
            &mut self.addr,
            Box::new(socket2::SockAddr::from(any)),
        ));
    }
}

/// Why this machine cannot run the engine, or `Ok` when it can: io_uring set up with
/// SINGLE_ISSUER | DEFER_TASKRUN (6.1), waits with a timeout (EXT_ARG, 5.11), a
/// provided-buffer ring (5.19), multishot recv (6.0), and the ops the engine uses.
pub fn probe() -> Result<(), String> {
    // Declared before the ring, so dropped after it.
    let mut bufs = BufRing::new(1, 64).map_err(|e| e.to_string())?;
    let ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .map_err(|e| format!("io_uring with SINGLE_ISSUER|DEFER_TASKRUN: {e}"))?;
    if !ring.params().is_feature_ext_arg() {
        return Err("io_uring cannot wait with a timeout (EXT_ARG, Linux 5.11)".into());
    }
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe: {e}"))?;
    for (code, name) in [
        (opcode::Connect::CODE, "connect"),
        (opcode::Send::CODE, "send"),
        (opcode::RecvMulti::CODE, "recv"),
        (opcode::LinkTimeout::CODE, "link_timeout"),
        (opcode::AsyncCancel2::CODE, "async_cancel"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring has no {name} op"));
        }
    }
    if !crate::kernel_at_least(6, 0) {
        let (major, minor) = crate::kernel_release();
        return Err(format!(
            "multishot recv needs Linux 6.0, this is {major}.{minor}"
        ));
    }
    // SAFETY: `bufs` outlives `ring` (declared before it), whose drop unregisters it,
    // and no op is ever submitted to it.
    unsafe {
        bufs.register(&ring.submitter(), BUF_GROUP)
            .map_err(|e| format!("io_uring provided-buffer ring: {e}"))?;
    }
    ring.submitter()
        .unregister_buf_ring(BUF_GROUP)
        .map_err(|e| format!("io_uring provided-buffer ring: {e}"))?;
    Ok(())
}

/// Why this machine cannot keep the engine's sockets in a registered file table (direct
/// descriptors), or `Ok` when it can: a sparse table (5.19), a socket installed in it
/// with a files update, a cancel by slot (6.0, checked by [`probe`]'s version) and
/// the close of a slot (5.15).
pub fn probe_direct() -> Result<(), String> {
    let ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .map_err(|e| format!("io_uring: {e}"))?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe: {e}"))?;
    for (code, name) in [(opcode::Close::CODE, "close")] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring has no {name} op"));
        }
    }
    ring.submitter()
        .register_files_sparse(4)
        .map_err(|e| format!("a sparse registered file table: {e}"))?;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    ring.submitter()
        .register_files_update(1, &[socket.as_raw_fd()])
        .map_err(|e| format!("installing a socket in the file table: {e}"))?;
    // A close of the slot that needs the direct-descriptor form of IORING_OP_CLOSE.
    let close = opcode::Close::new(Fixed(1)).build().user_data(1);
    let mut ring = ring;
    // SAFETY: the entry points at no memory.
    unsafe { ring.submission().push(&close) }.map_err(|e| e.to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring close of a slot: {e}"))?;
    let result = ring.completion().next().map(|c| c.result());
    match result {
        Some(0) => Ok(()),
        Some(e) => Err(format!(
            "io_uring close of a slot: {}",
            io::Error::from_raw_os_error(-e)
        )),
        None => Err("io_uring close of a slot did not complete".into()),
    }
}

/// The user data of an op under `token`, outside the ring's own (see [`OpToken`]).
fn user_data<T: OpToken>(token: T) -> u64 {
    let user_data = token.encode();
    debug_assert!(
        user_data >> 56 < OP_RETIRE_CANCEL,
        "a token's user data {user_data:#x} is in the ring's own range"
    );
    user_data
}

#[cfg(test)]
mod tests;
