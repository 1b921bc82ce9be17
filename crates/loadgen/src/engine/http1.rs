//! The tokio engine's HTTP/1.1 connection task: a [`Connection`] driven as an async loop on
//! a [`Stream`] (TCP, or TLS over it): claim, connect if needed, write every claimed request
//! in one write, then wait for readiness and parse responses, until there is no more work or
//! the grace period ends.

use std::future::pending;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::connection::{Closed, Connect, Connection};
use super::tcp::dial_tcp;
use super::tls::{self, Stream};
use super::{Claim, Worker};
use crate::error::ErrorKind;
use crate::recorder::Stage;

/// The tokio engine reads into one buffer per worker ([`Worker::read_buf`]) of this size;
/// a connection keeps only the bytes of a response it could not parse yet.
pub(super) const READ_BUF: usize = 64 * 1024;
/// Open loop, tokio engine: a slot due within this is sent now rather than slept for, and
/// sleeps end this long before their slot. tokio rounds a deadline up to the next 1 ms tick and the wake-up
/// comes later still (measured: ~1.5 ms after the asked time), so waking 1 ms early made
/// on-time sends leave ~0.5 ms late and charged that to the server in the corrected latency.
/// A send that leaves early is measured from when it actually left.
pub(super) const EARLY_WAKE: Duration = Duration::from_millis(2);

/// A connection task; its lifetime is what its requests' time is checked against
/// (Little's law).
pub(super) async fn task(w: Rc<Worker>) {
    let started = Instant::now();
    Connection::new(w.clone(), EARLY_WAKE).run().await;
    w.rec
        .borrow_mut()
        .record_connection_span(started, Instant::now(), w.shared.plan.pipeline);
}

/// What writing the queued requests left the connection with.
enum Sent {
    /// They are in flight.
    Written,
    /// The write failed and the connection was closed: start over.
    Closed,
    /// The grace period ended during the write: the task is over.
    GraceOver,
}

impl Connection<Stream> {
    /// The task's loop: claim, connect if needed, write, read, until there is no more work
    /// or the grace period ends.
    async fn run(mut self) {
        let request_timeout = self.shared.plan.timeout;
        let timer = tokio::time::sleep_until((Instant::now() + request_timeout).into());
        tokio::pin!(timer);

        loop {
            let now = Instant::now();
            if self.w.grace_over.get() {
                self.abandon(now, Stage::NotSent);
                return;
            }
            // 1. Claim work up to the pipelining depth.
            self.claim(now);
            if self.in_flight.is_empty() && self.queued.is_empty() {
                let Some(slot) = self.next_slot else {
                    self.observe(false);
                    return;
                };
                self.idle_until(slot).await;
                continue;
            }

            // 2. Connect when needed, in turn under --connect-rate (a closed-loop request
            // begins when its connect does, not while it waits for its turn).
            let mut now = now;
            let mut connect_time = None;
            if self.stream.is_none() && !self.queued.is_empty() {
                let Some(turn) = self.connect_turn(now).await else {
                    return;
                };
                now = turn;
                match self.connect(now).await {
                    Connect::Open(took) => {
                        connect_time = Some(took);
                        timer.as_mut().reset((now + request_timeout).into());
                    }
                    Connect::Retry => continue,
                    Connect::GraceOver => return,
                }
            }
            if self.stream.is_none() {
                continue;
            }

            // 3. Write every claimed request in one write.
            if !self.queued.is_empty() {
                match self.send_queued(now, connect_time).await {
                    Sent::Written => {}
                    Sent::Closed => continue,
                    Sent::GraceOver => return,
                }
            }

            // 4. Wait for responses, the next slot, or the timeout.
            let slot_due = self
                .next_slot
                .and_then(|c| c.intended)
                .filter(|_| self.in_flight.len() < self.depth);
            let Some(s) = self.stream.as_ref() else {
                continue;
            };
            let w = &*self.w;
            let mut grace_over = false;
            // Readiness, not a read: a pending read would hold a buffer per connection.
            let read = tokio::select! {
                biased;
                r = s.readable() => Some(r),
                _ = &mut timer => None,
                _ = async { match slot_due { Some(t) => sleep_until((t - EARLY_WAKE).into()).await, None => pending().await } } => continue,
                _ = w.grace_ended() => {
                    grace_over = true;
                    None
                }
            };
            if grace_over {
                self.abandon(now, Stage::NotSent);
                return;
            }
            let now = Instant::now();
            match read {
                None => {
                    let next = self.on_timer(now);
                    timer.as_mut().reset(next.into());
                }
                Some(Err(e)) => self.read_failed(&e),
                // 5. Every complete response read, in order.
                Some(Ok(())) => self.read_ready(now),
            }
        }
    }

    /// The socket is readable: reads into the worker's buffer (taken out of its cell for
    /// the call; no other task runs before it is put back) and parses what came.
    fn read_ready(&mut self, now: Instant) {
        let Some(s) = self.stream.as_mut() else {
            return;
        };
        let mut buf = std::mem::take(&mut *self.w.read_buf.borrow_mut());
        match s.read_now(&mut buf) {
            Ok(0) => self.on_eof(now),
            Ok(n) => self.on_received(&buf[..n], now),
            // Readiness that was not (another wake-up got there first): wait again.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => self.read_failed(&e),
        }
        *self.w.read_buf.borrow_mut() = buf;
    }

    /// A read failed: its requests fail as I/O errors, or by what TLS said (a client
    /// certificate the server refused after the handshake, on TLS 1.3).
    fn read_failed(&mut self, e: &std::io::Error) {
        let kind = match tls::classify_open(e) {
            Some((kind, why)) => {
                self.w.rec.borrow_mut().record_tls_failure(why);
                kind
            }
            None => ErrorKind::from_io(e),
        };
        self.close(Closed::failed(kind));
    }

    /// Open loop, nothing to send: idles until the slot (waking early, see [`EARLY_WAKE`]),
    /// a stop or the end of the grace period.
    async fn idle_until(&mut self, slot: Claim) {
        let wake = slot.intended.expect("open-loop slots have a time") - EARLY_WAKE;
        let (stream, w) = (&mut self.stream, &*self.w);
        let closed_while_idle = tokio::select! {
            _ = sleep_until(wake.into()) => false,
            _ = w.stop_idle.notified() => false,
            _ = w.grace_ended() => false,
            // A server that closes idle connections (keep-alive timeout) is noticed here,
            // not as a failure of the next request.
            _ = async { match stream.as_mut() { Some(s) => closed_while_idle(s).await, None => pending().await } } => true,
        };
        if closed_while_idle {
            // Its retransmissions since the last read are counted as at any other close.
            self.observe(false);
            self.drop_stream();
        }
    }

    /// Opens a connection for the queued claims: TCP, then TLS for https, each phase timed
    /// on its own (connect_us, tls_us).
    async fn connect(&mut self, now: Instant) -> Connect {
        let limit = self.connect_limit();
        let source = self.w.take_source();
        let shared = self.shared.clone();
        self.connect_via(now, async move {
            let (tcp, tcp_done) = dial_tcp(&shared, source, limit).await?;
            let Some(client) = &shared.tls else {
                return Ok((Stream::Plain(tcp), tcp_done, None));
            };
            match tls::handshake(client, tcp, limit).await {
                Ok(done) => Ok((
                    done.stream,
                    tcp_done,
                    Some((tcp_done.elapsed(), done.resumed)),
                )),
                Err((kind, why)) => Err((kind, Some(why))),
            }
        })
        .await
    }

    /// Writes every queued request in one write and moves them in flight. `now` is when
    /// they began (their connect, if `connect_time` says one was just made, else the write).
    async fn send_queued(&mut self, now: Instant, connect_time: Option<Duration>) -> Sent {
        if self.stream.is_none() {
            return Sent::Closed;
        }
        let batch = self.take_batch();
        let mut scratch = std::mem::take(&mut self.scratch);
        let patched = if self.shared.requests.templated() {
            if scratch.is_empty() {
                scratch = vec![0; self.shared.requests.batch_room(self.depth)];
            }
            Some(self.patch_batch(&mut scratch, 0))
        } else {
            None
        };
        let Some(s) = self.stream.as_mut() else {
            return Sent::Closed;
        };
        let bytes = match patched {
            Some(len) => &scratch[..len],
            None => &self.shared.requests.bytes()[batch],
        };
        let sent = if connect_time.is_some() {
            Instant::now()
        } else {
            now
        };
        let shared = &*self.shared;
        let w = &*self.w;
        let write = tokio::select! {
            r = s.write_requests(bytes, shared.plan.timeout) => Some(r),
            _ = w.grace_ended() => None,
        };
        self.scratch = scratch;
        let Some(write) = write else {
            self.abandon(now, Stage::Sending);
            return Sent::GraceOver;
        };
        self.mark_sent(now, sent, connect_time);
        if let Err(kind) = write {
            self.close(Closed::failed(kind));
            return Sent::Closed;
        }
        Sent::Written
    }
}

/// Resolves when an idle connection is closed by the server (or sends what nobody asked
/// for): either way it is not reused.
async fn closed_while_idle(s: &mut Stream) {
    let mut byte = [0u8; 1];
    loop {
        if s.readable().await.is_err() {
            return;
        }
        // A TLS session ticket is read here too, and yields nothing to read.
        match s.read_now(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => return,
        }
    }
}
