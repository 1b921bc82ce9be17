//! The io_uring engine's held connections (`--idle-conns`, `--slow-conns`; see
//! `engine/held.rs` for what they are): the same [`HeldConn`] state as the tokio engine's,
//! driven from the worker's ring. A connect with its linked timeout, then a multishot recv
//! that notices the server's close (an idle connection receives nothing, so it holds no
//! provided buffer); a slow connection's byte is a plain non-blocking send on a deadline of
//! the worker's heap. Their ops' tokens name them as `Conn::Held`.

use std::time::Instant;

use super::super::held::{HeldConn, HeldEnd};
use tailscope_uring::client::{Completion, Socket};

use super::token::{Conn, Op, Token};
use super::{Due, UringWorker};
use crate::conns::HeldKind;

/// Marks a held connection's index in the worker's dirty queue.
pub(super) const HELD: usize = 1 << 31;

/// One held connection of the worker, with what its I/O is doing.
pub(super) struct HeldSlot {
    c: HeldConn<Socket>,
    /// The socket number (see the load's `Slot::gen`).
    gen: u32,
    /// A connect in progress.
    connecting: Option<Socket>,
    /// `--connect-rate`: its connect's turn is taken and waited for.
    has_turn: bool,
    /// What it waits for: its connect's turn, the end of a back-off, its next slow byte.
    wake_at: Option<Instant>,
    pub(super) dirty: bool,
    done: bool,
}

impl HeldSlot {
    pub(super) fn new(c: HeldConn<Socket>) -> HeldSlot {
        HeldSlot {
            c,
            gen: 0,
            connecting: None,
            has_turn: false,
            wake_at: None,
            dirty: true,
            done: false,
        }
    }
}

/// `held` connections of each kind (by [`HeldKind::index`]) for a worker.
pub(super) fn slots(w: &std::rc::Rc<super::Worker>, held: [usize; 2]) -> Vec<HeldSlot> {
    HeldKind::ALL
        .iter()
        .flat_map(|&k| (0..held[k.index()]).map(move |_| k))
        .map(|k| HeldSlot::new(HeldConn::new(w.clone(), k)))
        .collect()
}

impl UringWorker {
    pub(super) fn mark_held(&mut self, i: usize) {
        let h = &mut self.held[i];
        if !h.dirty && !h.done {
            h.dirty = true;
            self.dirty.push_back(i | HELD);
        }
    }

    fn wake_held(&mut self, i: usize, at: Instant) {
        self.held[i].wake_at = Some(at);
        self.deadlines.push(std::cmp::Reverse((at, Due::Held, i)));
    }

    /// A deadline of held connection `i` fell due; it counts only if still waited for.
    pub(super) fn on_held_deadline(&mut self, i: usize, at: Instant) {
        if self.held[i].wake_at == Some(at) {
            self.held[i].wake_at = None;
            self.mark_held(i);
        }
    }

    /// The held connection's step: connect (in turn) when it has no socket, send its next
    /// byte when it is a slow one and the byte is due.
    pub(super) fn advance_held(&mut self, i: usize, now: Instant) {
        let h = &mut self.held[i];
        if h.done || h.connecting.is_some() || h.wake_at.is_some() {
            return;
        }
        if h.c.stream.is_some() {
            if let Some(interval) = h.c.byte_interval() {
                match h.c.send_byte() {
                    Ok(()) => self.wake_held(i, now + interval),
                    Err(end) => {
                        h.c.ended(end);
                        self.mark_held(i);
                    }
                }
            }
            return;
        }
        if self.w.stopping.get() {
            // No new connects once sending stopped.
            return;
        }
        if !h.has_turn {
            if let Some(at) = self.w.connect_permit(now) {
                h.has_turn = true;
                self.wake_held(i, at);
                return;
            }
        }
        h.has_turn = false;
        h.c.begin_connect();
        let source = self.w.take_source();
        // A slow connection's bytes are plain sends: it keeps its plain descriptor.
        let keep_fd = self.held[i].c.byte_interval().is_some();
        let bind = |fd: &std::os::fd::OwnedFd| crate::sys::prepare_connect(fd, source);
        let socket = Socket::tcp(&self.shared.plan.addr, keep_fd, &mut self.ring, bind);
        let h = &mut self.held[i];
        h.gen = h.gen.wrapping_add(1);
        let submitted = socket.and_then(|socket| {
            self.ring
                .connect(
                    &socket,
                    self.w.connect_limit(),
                    Token::new(Op::Connect, h.gen, Conn::Held(i)),
                    // Its timeout's completion needs nothing done: an op of its own that
                    // no held branch matches.
                    Token::new(Op::ConnectTimeout, h.gen, Conn::Held(i)),
                )
                .map(|()| socket)
        });
        match submitted {
            Ok(socket) => h.connecting = Some(socket),
            Err(_) => self.held_connect_failed(i, now),
        }
    }

    fn held_connect_failed(&mut self, i: usize, now: Instant) {
        let pause = self.held[i].c.connect_failed();
        self.wake_held(i, now + pause);
    }

    /// A completion of held connection `i`.
    pub(super) fn on_held_completion(&mut self, i: usize, c: Completion<Token>) {
        let now = Instant::now();
        let Some(h) = self.held.get_mut(i) else {
            return;
        };
        let current = !h.done && c.token.is_of(h.gen);
        if !c.more && current {
            // Its op ended: retiring the socket will not cancel it.
            if let Some(socket) = h.c.stream.as_ref().or(h.connecting.as_ref()) {
                socket.op_ended(c.token);
            }
        }
        match c.token.op {
            Op::Connect if current && h.connecting.is_some() => {
                let socket = h.connecting.take().expect("checked");
                if c.result < 0 {
                    drop(socket);
                    return self.held_connect_failed(i, now);
                }
                let recv = self
                    .ring
                    .recv_multi(&socket, Token::new(Op::Recv, h.gen, Conn::Held(i)));
                h.c.opened(socket);
                if recv.is_err() {
                    h.c.ended(HeldEnd::Failed);
                }
            }
            Op::Recv => {
                if let Some(bid) = c.buffer {
                    // What the server said (a 408) is not read: only its close matters.
                    self.ring.recycle(bid);
                }
                let h = &mut self.held[i];
                if !current || h.c.stream.is_none() {
                    return;
                }
                if c.result == 0 {
                    h.c.ended(HeldEnd::ClosedByServer);
                } else if c.result < 0 && -c.result != libc::ENOBUFS {
                    let e = std::io::Error::from_raw_os_error(-c.result);
                    h.c.ended(HeldEnd::of(&e));
                } else if !c.more {
                    if let Some(socket) = h.c.stream.as_ref() {
                        let rearmed = self
                            .ring
                            .recv_multi(socket, Token::new(Op::Recv, h.gen, Conn::Held(i)));
                        if rearmed.is_err() {
                            h.c.ended(HeldEnd::Failed);
                        }
                    }
                }
                if self.held[i].c.stream.is_some() {
                    return;
                }
                // Closed: its pending byte wake-up is void, it connects again.
                self.held[i].wake_at = None;
            }
            _ => return,
        }
        self.mark_held(i);
    }

    /// Sending stopped: connects in progress are dropped (the open ones are held until
    /// [`UringWorker::release_held`]).
    pub(super) fn stop_held_connects(&mut self) {
        for h in &mut self.held {
            if h.connecting.take().is_some() {
                h.c.abandon_connect();
            }
        }
    }

    /// The run is over: every held connection closes (counted open at the end if it was).
    pub(super) fn release_held(&mut self) {
        for h in &mut self.held {
            if h.connecting.take().is_some() {
                h.c.abandon_connect();
            }
            h.c.release();
            h.done = true;
        }
    }
}
