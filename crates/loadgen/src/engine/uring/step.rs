//! One connection's steps in the io_uring engine: claim work, connect, send what is claimed,
//! finish; and what each of its completions (connect, recv, send) does to it.

use std::time::{Duration, Instant};

use super::super::connection::{connect_error_kind, Closed};
use tailscope_uring::client::{Completion, Socket};

use super::token::{Conn, Op, Token};
use super::{wake_time, Due, UringWorker};
use crate::error::ErrorKind;
use crate::recorder::Stage;

impl UringWorker {
    /// The connection's loop step (the tokio task's loop, without its waits): claim work,
    /// connect if needed, send what is claimed, and say what to wake for.
    pub(super) fn advance(&mut self, i: usize, now: Instant) {
        let s = &mut self.slots[i];
        // Nothing is claimed while a send is in flight (the tokio engine claims after its
        // write), so that what is queued at the end of the grace period was never sent.
        let sending = s.sending.is_some() && s.c.stream.is_some();
        if s.done || s.connecting.is_some() || s.backoff.is_some() || sending {
            return;
        }
        s.c.claim(now);
        s.claimed_at = now;
        if s.c.is_idle() {
            match s.c.next_slot.and_then(|c| c.intended) {
                Some(at) => self.schedule(i, wake_time(at, now), Due::Wake),
                None => self.finish(i, now),
            }
            return;
        }
        if s.c.stream.is_none() {
            if s.c.owes_back_off() {
                // Woken at its end (or at a stop), it comes back here to connect.
                return self.back_off(i, now);
            }
            // --connect-rate: a connection that took a later turn waits for its wake-up.
            if s.connect_at.is_some() && s.wake_at.is_some() {
                return;
            }
            // Marked again once a slot has closed.
            if self.ring.waits_for_slot() {
                self.slot_waiters.push(i);
                return;
            }
            if s.connect_at.take().is_none() {
                if let Some(at) = self.w.connect_permit(now) {
                    s.connect_at = Some(at);
                    self.schedule(i, at, Due::Wake);
                    return;
                }
            }
            self.connect(i, now);
            return;
        }
        let patch_waits = self.scratch.is_some() && s.sends_in_flight > 0;
        if !s.c.queued.is_empty() && s.sending.is_none() && !patch_waits {
            self.send_queued(i, now);
        }
        // A slot held for later is waited for only while there is room to send it; else a
        // response (or the end of a send) makes room and calls this again.
        let s = &self.slots[i];
        if s.c.in_flight.len() + s.c.queued.len() < s.c.depth {
            if let Some(at) = s.c.next_slot.and_then(|c| c.intended) {
                self.schedule(i, wake_time(at, now), Due::Wake);
            }
        }
    }

    pub(super) fn connect(&mut self, i: usize, now: Instant) {
        let s = &mut self.slots[i];
        s.c.begin_connect();
        let source = self.w.take_source();
        let bind = |fd: &std::os::fd::OwnedFd| crate::sys::prepare_connect(fd, source);
        let socket = match Socket::tcp(&self.shared.plan.addr, false, &mut self.ring, bind) {
            Ok(socket) => socket,
            Err(e) => return self.connect_failed(i, ErrorKind::from_io(&e), now),
        };
        s.gen = s.gen.wrapping_add(1);
        s.sending = None;
        let limit = s.c.connect_limit();
        let submitted = self.ring.connect(
            &socket,
            limit,
            Token::new(Op::Connect, s.gen, Conn::Load(i)),
            Token::new(Op::ConnectTimeout, s.gen, Conn::Load(i)),
        );
        match submitted {
            Ok(()) => {
                s.connecting = Some((socket, now));
            }
            Err(e) => self.connect_failed(i, ErrorKind::from_io(&e), now),
        }
    }

    /// A failed connect: the front claim fails, and the connection backs off before the
    /// next try.
    pub(super) fn connect_failed(&mut self, i: usize, kind: ErrorKind, began: Instant) {
        let failed_at = self.slots[i].c.connect_failed(kind, began);
        self.back_off(i, failed_at);
    }

    /// The connection waits `c.backoff` after a failure at `failed_at` before its next
    /// connect (see `connection::MIN_BACKOFF`); a stop cuts the pause short.
    fn back_off(&mut self, i: usize, failed_at: Instant) {
        let s = &mut self.slots[i];
        if self.w.stopping.get() {
            s.c.backed_off(failed_at);
            self.mark(i);
        } else {
            s.backoff = Some(failed_at);
            let at = failed_at + s.c.backoff;
            self.schedule(i, at, Due::Wake);
        }
    }

    pub(super) fn send_queued(&mut self, i: usize, now: Instant) {
        let s = &mut self.slots[i];
        let (begun, sent, connect_time) = match s.just_connected.take() {
            Some((took, began)) => (began, Instant::now(), Some(took)),
            None => (now, now, None),
        };
        let mut batch = s.c.take_batch();
        if let Some((base, room)) = self.scratch {
            // No send of this connection is in flight (nothing is claimed while one is),
            // so the kernel reads none of its region while it is patched.
            let at = base + i * room;
            let len =
                s.c.patch_batch(&mut self.ring.send_buffer_mut()[at..at + room], at);
            batch = at..at + len;
        }
        s.c.mark_sent(begun, sent, connect_time);
        self.send(i, batch.start, batch.end);
    }

    pub(super) fn send(&mut self, i: usize, from: usize, to: usize) {
        let s = &mut self.slots[i];
        let Some(socket) = s.c.stream.as_ref() else {
            return;
        };
        match self
            .ring
            .send(socket, from, to, Token::new(Op::Send, s.gen, Conn::Load(i)))
        {
            Ok(()) => {
                s.sending = Some((from, to));
                s.sends_in_flight += 1;
            }
            Err(e) => s.c.close(Closed::failed(ErrorKind::from_io(&e))),
        }
    }

    /// The connection has no more work: its span is recorded and its socket closed.
    pub(super) fn finish(&mut self, i: usize, now: Instant) {
        let s = &mut self.slots[i];
        s.c.observe(false);
        s.c.drop_stream();
        s.done = true;
        self.live -= 1;
        self.w
            .rec
            .borrow_mut()
            .record_connection_span(s.started, now, self.shared.plan.pipeline);
    }

    /// The grace period is over: every connection records what it still holds as
    /// unfinished, and handshakes still open are named.
    pub(super) fn grace_over(&mut self, now: Instant) {
        self.w
            .rec
            .borrow_mut()
            .record_still_connecting(self.w.connecting.get());
        self.w.grace_over.set(true);
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            if s.done {
                continue;
            }
            match (&s.connecting, s.sending.filter(|_| s.c.stream.is_some())) {
                (Some((_, began)), _) => s.c.abandon(*began, Stage::Connecting),
                // Waiting for its --connect-rate turn: its time starts at the connect.
                (None, _) if s.connect_at.is_some() => s.c.abandon(now, Stage::Connecting),
                // The requests of a send not wholly sent are still being sent, as in the
                // tokio engine, from when they began.
                (None, Some((from, _))) => {
                    let unsent = s.c.unsent_after(from);
                    let begun = s.c.unsend(unsent).unwrap_or(now);
                    s.c.abandon(begun, Stage::Sending);
                }
                (None, None) => s.c.abandon(s.claimed_at, Stage::NotSent),
            }
            s.connecting = None;
            self.finish(i, now);
        }
    }

    pub(super) fn on_completion(&mut self, c: Completion<Token>, now: Instant) {
        let i = match c.token.conn {
            Conn::Load(i) => i,
            Conn::Held(i) => return self.on_held_completion(i, c),
        };
        let Some(s) = self.slots.get_mut(i) else {
            return;
        };
        let current = !s.done && c.token.is_of(s.gen);
        if !c.more && current {
            // Its op ended: retiring the socket will not cancel it.
            let connecting = s.connecting.as_ref().map(|(socket, _)| socket);
            if let Some(socket) = s.c.stream.as_ref().or(connecting) {
                socket.op_ended(c.token);
            }
        }
        match c.token.op {
            Op::Connect if current && s.connecting.is_some() => {
                let (socket, began) = s.connecting.take().expect("checked");
                if c.result >= 0 {
                    let recv = self
                        .ring
                        .recv_multi(&socket, Token::new(Op::Recv, s.gen, Conn::Load(i)));
                    let took = s.c.opened(socket, began);
                    s.just_connected = Some((took, began));
                    match recv {
                        Ok(()) => {}
                        Err(e) => s.c.close(Closed::failed(ErrorKind::from_io(&e))),
                    }
                    // Armed once: a timer that falls due re-arms itself from the oldest
                    // request (never later than its deadline), so a new connection needs no
                    // new heap entry; one per connect left a stale entry per connect.
                    if s.timer_at.is_none() {
                        let timeout = self.shared.plan.timeout;
                        self.schedule(i, now + timeout, Due::Timer);
                    }
                } else {
                    let kind = if -c.result == libc::ECANCELED {
                        // The linked timeout fired first.
                        ErrorKind::ConnectTimeout
                    } else {
                        connect_error_kind(&std::io::Error::from_raw_os_error(-c.result))
                    };
                    drop(socket);
                    self.connect_failed(i, kind, began);
                }
            }
            Op::Recv => {
                let open = current && s.c.stream.is_some();
                if let Some(bid) = c.buffer {
                    if open && c.result > 0 {
                        let bytes = self.ring.buffer(bid, c.result as usize);
                        s.c.on_received(bytes, now);
                    }
                    self.ring.recycle(bid);
                } else if open && c.result == 0 {
                    s.c.on_eof(now);
                } else if open && c.result < 0 && -c.result != libc::ENOBUFS {
                    let e = std::io::Error::from_raw_os_error(-c.result);
                    s.c.close(Closed::failed(ErrorKind::from_io(&e)));
                }
                // A multishot recv that ended on an open connection (out of buffers, or a
                // kernel that stops it) is armed again.
                if !c.more && current {
                    if let Some(socket) = s.c.stream.as_ref() {
                        match self
                            .ring
                            .recv_multi(socket, Token::new(Op::Recv, s.gen, Conn::Load(i)))
                        {
                            Ok(()) => {}
                            Err(e) => s.c.close(Closed::failed(ErrorKind::from_io(&e))),
                        }
                    }
                }
            }
            // An earlier socket's send: its region may be patched again now.
            Op::Send if !(current && s.c.stream.is_some()) => {
                s.sends_in_flight = s.sends_in_flight.saturating_sub(1);
            }
            Op::Send => {
                s.sends_in_flight = s.sends_in_flight.saturating_sub(1);
                let Some((from, to)) = s.sending.take() else {
                    return;
                };
                if c.result <= 0 {
                    let kind = if c.result == 0 {
                        ErrorKind::IoOther
                    } else {
                        ErrorKind::from_io(&std::io::Error::from_raw_os_error(-c.result))
                    };
                    s.c.close(Closed::failed(kind));
                } else if from + (c.result as usize) < to {
                    // A partial send is finished, never dropped.
                    self.send(i, from + c.result as usize, to);
                }
            }
            _ => return,
        }
        self.mark(i);
    }

    /// The run is over: every socket is closed, every op cancelled, and their completions
    /// reaped (within a second) before the ring and its buffers go.
    pub(super) fn close_all(&mut self) {
        for s in &mut self.slots {
            s.connecting = None;
            s.c.drop_stream();
        }
        self.release_held();
        self.ring.cancel_and_wait(Duration::from_secs(1));
    }
}
