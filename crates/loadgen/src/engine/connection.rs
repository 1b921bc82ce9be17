//! One connection: its state, the five steps of its loop, and the tokio task that runs them.
//!
//! A [`Connection`] is one generator connection, whatever engine drives it: the socket (one
//! TCP connection after another), the bytes of a response that has not all arrived (reads
//! land in a buffer of the worker's, so an idle connection holds none), the response parser
//! and the requests it carries. Everything that is not I/O lives in the generic `impl<S>` block and is shared by
//! both engines: claiming work from the [`Worker`], what a connect, a write, a read, an end
//! of file or a timeout does to the requests, and how they are recorded. The tokio engine's
//! [`task`] runs it as an async loop on a `TcpStream`: claim, connect if needed, write every
//! claimed request in one write, then read and parse responses, until there is no more work
//! or the grace period ends. The io_uring engine (`super::uring`) drives the same state from
//! completions. Everything it records goes through the worker's `WorkerRecorder`, one short
//! `RefCell` borrow at a time.

use std::collections::VecDeque;
use std::future::pending;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout};

use super::tls::{self, Stream};
use super::{Claim, Held, InFlight, Shared, Worker};
use crate::error::ErrorKind;
use crate::http::ResponseParser;
use crate::plan::Pace;
use crate::recorder::{Finished, Stage, TcpFacts, LATE_SLACK};
use crate::sys::{bind_source, tcp_facts};

/// The tokio engine reads into one buffer per worker ([`Worker::read_buf`]) of this size;
/// a connection keeps only the bytes of a response it could not parse yet.
pub(super) const READ_BUF: usize = 64 * 1024;
/// A connection's partial-response buffer that grew beyond this (a long head arriving in
/// pieces) is freed once it empties, so an idle connection holds no more than this.
const KEEP_PARTIAL: usize = 4096;
/// Open loop, tokio engine: a slot due within this is sent now rather than slept for, and
/// sleeps end this long before their slot. tokio rounds a deadline up to the next 1 ms tick and the wake-up
/// comes later still (measured: ~1.5 ms after the asked time), so waking 1 ms early made
/// on-time sends leave ~0.5 ms late and charged that to the server in the corrected latency.
/// A send that leaves early is measured from when it actually left.
pub(super) const EARLY_WAKE: Duration = Duration::from_millis(2);
/// A connection whose connect failed waits this long before the next try, doubling up to
/// [`MAX_BACKOFF`] and back to this after a success: a refused connect returns in
/// microseconds, and without a pause a run against nothing spins at ~100 k connects a
/// second, burning the CPU it is meant to measure with. Only failed connects wait.
pub(super) const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest pause between failed connects of one connection.
pub(super) const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// A handshake at least this slow had a SYN retransmitted (the first SYN RTO is 1 s): the
/// connection's TCP_INFO is read right after it to count them.
const SLOW_HANDSHAKE: Duration = Duration::from_millis(200);

/// How a connection ended: the kind to count its in-flight requests under, if any.
pub(super) enum Closed {
    /// Closed by the server between responses or by a `Connection: close`: resend the rest.
    Graceful,
    /// Failed: the front request gets `front`, the others `rest`.
    Failed { front: ErrorKind, rest: ErrorKind },
}

impl Closed {
    /// Failed, every in-flight request for the same reason (all but an end of file).
    pub(super) fn failed(kind: ErrorKind) -> Closed {
        Closed::Failed {
            front: kind,
            rest: kind,
        }
    }
}

/// A connection task; its lifetime is what its requests' time is checked against
/// (Little's law).
pub(super) async fn task(w: Rc<Worker>) {
    let started = Instant::now();
    Connection::new(w.clone(), EARLY_WAKE).run().await;
    w.rec
        .borrow_mut()
        .record_connection_span(started, Instant::now(), w.shared.plan.pipeline);
}

/// What dialing gave: the open socket, when its TCP handshake ended, and the TLS handshake's
/// time and whether it resumed; or the kind a failure is counted under and, for TLS, why.
pub(super) type Dialed<S> =
    Result<(S, Instant, Option<(Duration, bool)>), (ErrorKind, Option<String>)>;

/// What a connect attempt left the connection with.
pub(super) enum Connect {
    /// Open, after a handshake of this long.
    Open(Duration),
    /// Failed (counted, backed off): claim and try again.
    Retry,
    /// The grace period ended during the handshake: the task is over.
    GraceOver,
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

/// One connection's state, across the TCP connections it opens in turn (mini-redis's
/// `Connection` is the model): the socket `S` and its partial response, the response parser, and
/// the requests it carries. In the tokio engine it lives in its task's future, so it costs
/// what the loop's locals did; the per-response path borrows the recorder as before and
/// allocates nothing.
pub(super) struct Connection<S> {
    pub(super) w: Rc<Worker>,
    pub(super) shared: Arc<Shared>,
    /// Requests a connection may carry at once (the pipelining depth).
    pub(super) depth: usize,
    open_loop: bool,
    /// Open loop: a slot due within this is sent now rather than waited for (the engine's
    /// timer precision).
    early_wake: Duration,
    /// The socket, while one is open.
    pub(super) stream: Option<S>,
    /// Bytes read and not parsed yet: the start of a response (or of a chunk line) that has
    /// not all arrived. Empty, and usually without an allocation, between responses; the
    /// bytes are read elsewhere (the worker's buffer, a provided buffer) and parsed there.
    partial: Vec<u8>,
    parser: ResponseParser,
    /// Written, oldest first, waiting for their responses.
    pub(super) in_flight: VecDeque<InFlight>,
    /// Claimed, not written yet (waiting for a connect, or resent after a graceful close).
    pub(super) queued: VecDeque<Claim>,
    /// Open loop: a slot claimed that is not due yet.
    pub(super) next_slot: Option<Claim>,
    /// The position in `shared.requests` of the batch being sent (see [`Self::take_batch`]),
    /// how many requests it has, and where its first byte is in what the engine sends from.
    batch_start: usize,
    batch_len: usize,
    batch_at: usize,
    /// A mix with placeholders: the tokio engine's patched copy of the batch being sent
    /// (allocated once; empty otherwise, and in the io_uring engine, which patches in its
    /// ring's buffer).
    pub(super) scratch: Vec<u8>,
    /// The open connection's number within the worker.
    pub(super) conn_id: u64,
    /// The connection's retransmitted segments as of its last TCP_INFO read.
    retrans_seen: u32,
    /// A connection was open before: opening another is a reconnect.
    had_connection: bool,
    /// The pause before the next connect after a failed one (see [`MIN_BACKOFF`]).
    pub(super) backoff: Duration,
    /// The TLS handshake of the connection just opened, for its first request.
    handshake_tls: Option<Duration>,
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
                Some(Err(e)) => self.close(Closed::failed(ErrorKind::from_io(&e))),
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
            Err(e) => self.close(Closed::failed(ErrorKind::from_io(&e))),
        }
        *self.w.read_buf.borrow_mut() = buf;
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

impl<S: AsRawFd> Connection<S> {
    /// A connection with no socket yet; `early_wake` is the engine's timer precision.
    pub(super) fn new(w: Rc<Worker>, early_wake: Duration) -> Connection<S> {
        let shared = w.shared.clone();
        let depth = shared.plan.pipeline;
        Connection {
            depth,
            open_loop: matches!(shared.plan.pace, Pace::Rate(_)),
            early_wake,
            stream: None,
            partial: Vec::new(),
            parser: ResponseParser::new(shared.plan.parser_method()),
            in_flight: VecDeque::with_capacity(depth),
            queued: VecDeque::with_capacity(depth),
            next_slot: None,
            batch_start: 0,
            batch_len: 0,
            batch_at: 0,
            scratch: Vec::new(),
            conn_id: 0,
            retrans_seen: 0,
            had_connection: false,
            backoff: MIN_BACKOFF,
            handshake_tls: None,
            w,
            shared,
        }
    }

    /// `--connect-rate`: waits for this connect's turn (tokio engines). Returns when the
    /// connect begins, or none when the grace period ended first (what the connection held
    /// is then recorded as unfinished).
    pub(super) async fn connect_turn(&mut self, now: Instant) -> Option<Instant> {
        let Some(at) = self.w.connect_permit(now) else {
            return Some(now);
        };
        let w = &*self.w;
        let grace_over = tokio::select! {
            _ = sleep_until(at.into()) => false,
            _ = w.stop_idle.notified() => false,
            _ = w.grace_ended() => true,
        };
        if grace_over {
            self.abandon(now, Stage::Connecting);
            return None;
        }
        Some(Instant::now())
    }

    /// Opens a connection for the queued claims with `dial` (what an engine's connect is:
    /// TCP, TLS, an HTTP/2 handshake). A failed connect fails the front claim; the claims
    /// behind it wait for the next try, after a back-off.
    pub(super) async fn connect_via(
        &mut self,
        now: Instant,
        dial: impl std::future::Future<Output = Dialed<S>>,
    ) -> Connect {
        self.begin_connect();
        let w = &*self.w;
        let connected = tokio::select! {
            r = dial => r,
            _ = w.grace_ended() => {
                self.abandon(now, Stage::Connecting);
                return Connect::GraceOver;
            }
        };
        match connected {
            Ok((s, tcp_done, handshake)) => {
                self.opened(s, now);
                if let Some((took, resumed)) = handshake {
                    self.handshake_tls = Some(took);
                    self.w.rec.borrow_mut().record_tls_handshake(resumed);
                }
                Connect::Open(tcp_done.saturating_duration_since(now))
            }
            Err((kind, why)) => {
                if let Some(why) = why {
                    self.w.rec.borrow_mut().record_tls_failure(why);
                }
                let failed_at = self.connect_failed(kind, now);
                // Back off before the next try (see MIN_BACKOFF); a stop cuts it short.
                if !self.w.stopping.get() {
                    tokio::select! {
                        _ = tokio::time::sleep(self.backoff) => {}
                        _ = self.w.stop_idle.notified() => {}
                    }
                }
                self.backed_off(failed_at);
                Connect::Retry
            }
        }
    }

    /// The limit on one TCP handshake.
    pub(super) fn connect_limit(&self) -> Duration {
        self.w.connect_limit()
    }

    /// A connect begins: a reconnect if a connection was open before.
    pub(super) fn begin_connect(&self) {
        let w = &*self.w;
        if self.had_connection {
            w.rec.borrow_mut().record_reconnect();
        }
        w.connecting.set(w.connecting.get() + 1);
    }

    /// The connect that began at `began` opened `s` (its TCP_NODELAY set): the connection
    /// starts over on it. Returns how long the handshake took.
    pub(super) fn opened(&mut self, s: S, began: Instant) -> Duration {
        self.drop_stream();
        let w = &*self.w;
        w.connecting.set(w.connecting.get().saturating_sub(1));
        self.backoff = MIN_BACKOFF;
        let took = began.elapsed();
        self.retrans_seen = 0;
        self.stream = Some(s);
        w.open.up();
        if took >= SLOW_HANDSHAKE {
            self.observe(true);
        }
        self.had_connection = true;
        self.w.rec.borrow_mut().record_connect_opened();
        self.conn_id = self.w.next_conn.get();
        self.w.next_conn.set(self.conn_id + 1);
        self.parser.reset();
        self.clear_partial();
        took
    }

    /// The connect that began at `began` failed: the front claim fails with `kind`; the
    /// claims behind it wait for the next try. Returns when it failed; the engine then
    /// backs off for `self.backoff` (see [`MIN_BACKOFF`]) and calls [`Self::backed_off`].
    pub(super) fn connect_failed(&mut self, kind: ErrorKind, began: Instant) -> Instant {
        let w = &*self.w;
        w.connecting.set(w.connecting.get().saturating_sub(1));
        let c = self.queued.pop_front().expect("a claim to connect for");
        let failed_at = Instant::now();
        // The attempt has a number of its own, so that the slowest requests do not pin a
        // failed connect on the worker's first connection ("conn 0").
        self.conn_id = w.next_conn.get();
        w.next_conn.set(self.conn_id + 1);
        let mut rec = w.rec.borrow_mut();
        rec.record_connect_failed();
        rec.record_failed(
            kind,
            c.intended.unwrap_or(began),
            failed_at,
            self.conn_id,
            true,
            None,
        );
        // The claims behind it waited for the same connect and will try again.
        rec.record_waiting(began, failed_at, self.queued.len());
        failed_at
    }

    /// The back-off after a failed connect is over (or was cut short by a stop). The pause
    /// is the generator's own, on purpose: Little's law counts it.
    pub(super) fn backed_off(&mut self, failed_at: Instant) {
        if !self.w.stopping.get() {
            self.w
                .rec
                .borrow_mut()
                .record_waiting(failed_at, Instant::now(), self.depth);
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Picks the requests of the mix the queued claims send (the worker's next positions)
    /// and returns their bytes' range in `shared.requests`, one slice for the batch.
    /// [`Self::mark_sent`] then files each in flight under its position.
    pub(super) fn take_batch(&mut self) -> std::ops::Range<usize> {
        let k = self.queued.len();
        self.batch_start = self.w.take_requests(k);
        self.batch_len = k;
        let range = self.shared.requests.range(self.batch_start, k);
        self.batch_at = range.start;
        range
    }

    /// A mix with placeholders: copies the batch just taken into `dst` (at `at` in what
    /// the engine sends from) with every placeholder given a new value; returns its length.
    pub(super) fn patch_batch(&mut self, dst: &mut [u8], at: usize) -> usize {
        self.batch_at = at;
        let w = &*self.w;
        let values = crate::mix::Values {
            seq: &self.shared.placeholder_seq,
            seq_offset: self.shared.plan.seq_offset,
            seq_stride: self.shared.plan.seq_stride,
            rng: &w.placeholder_rng,
        };
        self.shared
            .requests
            .patch(dst, self.batch_start, self.batch_len, &values)
    }

    /// How many of the last batch's requests were not wholly sent when its bytes before
    /// `sent_to` (in what the engine sends from) were.
    pub(super) fn unsent_after(&self, sent_to: usize) -> usize {
        let requests = &self.shared.requests;
        let base = requests.offset(self.batch_start);
        self.in_flight
            .iter()
            .rev()
            .take(self.batch_len)
            .take_while(|f| self.batch_at + (requests.end_of(f.pos as usize) - base) > sent_to)
            .count()
    }

    /// Moves every queued request in flight: they began at `now` (their connect, if
    /// `connect_time` says one was just made, else the write) and left at `sent`.
    pub(super) fn mark_sent(
        &mut self,
        now: Instant,
        sent: Instant,
        connect_time: Option<Duration>,
    ) {
        let w = &*self.w;
        let k = self.queued.len();
        let tls = self.handshake_tls.take().filter(|_| connect_time.is_some());
        let mut rec = w.rec.borrow_mut();
        for (i, c) in self.queued.drain(..).enumerate() {
            if let Some(t) = c.intended {
                if sent > t + LATE_SLACK {
                    rec.record_late_send(t);
                }
            }
            self.in_flight.push_back(InFlight {
                pos: (self.batch_start + i) as u32,
                intended: c.intended,
                begun: now,
                sent,
                first_byte: None,
                connect: if i == 0 { connect_time } else { None },
                tls: if i == 0 { tls } else { None },
                first_on_connection: i == 0 && connect_time.is_some(),
            });
        }
        drop(rec);
        w.add_in_flight(k);
    }

    /// The last `n` requests in flight were not wholly sent: they go back to the front of
    /// the queue. Returns when they began.
    pub(super) fn unsend(&mut self, n: usize) -> Option<Instant> {
        let n = n.min(self.in_flight.len());
        let mut begun = None;
        for f in self.in_flight.drain(self.in_flight.len() - n..).rev() {
            begun = Some(f.begun);
            self.queued.push_front(Claim {
                intended: f.intended,
            });
        }
        self.w.sub_in_flight(n);
        begun
    }

    /// Bytes were received (into the worker's buffer, or a provided buffer): every
    /// complete response is recorded, in order, straight from them; only a response that
    /// has not all arrived is copied, to wait for the rest.
    pub(super) fn on_received(&mut self, bytes: &[u8], now: Instant) {
        let outcome = if self.partial.is_empty() {
            let (used, outcome) = self.parse_responses(bytes, now);
            if outcome.is_none() && used < bytes.len() {
                self.partial.extend_from_slice(&bytes[used..]);
            }
            outcome
        } else {
            let mut partial = std::mem::take(&mut self.partial);
            partial.extend_from_slice(bytes);
            let (used, outcome) = self.parse_responses(&partial, now);
            partial.drain(..used);
            self.partial = partial;
            outcome
        };
        match outcome {
            Some(outcome) => self.close_after_parse(outcome, now),
            None if self.partial.is_empty() && self.partial.capacity() > KEEP_PARTIAL => {
                self.partial = Vec::new();
            }
            None => {}
        }
    }

    /// Forgets the bytes of a response of a connection that is gone.
    fn clear_partial(&mut self) {
        self.partial.clear();
        if self.partial.capacity() > KEEP_PARTIAL {
            self.partial = Vec::new();
        }
    }

    /// Whether the connection is done: nothing in flight, nothing claimed, no slot to wait
    /// for.
    pub(super) fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.queued.is_empty()
    }

    /// Claims work up to the pipelining depth: a ticket in closed loop, due slots in open
    /// loop (one not due yet is kept in `next_slot`). After a stop, a slot held for later is
    /// dropped if it no longer falls inside the window.
    pub(super) fn claim(&mut self, now: Instant) {
        let w = &*self.w;
        if w.stopping.get()
            && (!self.open_loop
                || self
                    .next_slot
                    .and_then(|c| c.intended)
                    .zip(w.window_end())
                    .is_some_and(|(at, end)| at >= end))
        {
            self.next_slot = None;
        }
        // Closed loop, pipelined: refill once half the depth is free rather than after every
        // response, so that a server that writes each response on its own (nginx) gets
        // requests in batches, not one per send. `--pipeline N` stays "at most N in flight".
        // Open-loop slots are sent when due.
        let held = self.in_flight.len() + self.queued.len();
        if !self.open_loop
            && !self.in_flight.is_empty()
            && self.depth.saturating_sub(held) < self.depth / 2
        {
            return;
        }
        while self.in_flight.len() + self.queued.len() < self.depth {
            if self.open_loop {
                let Some(slot) = self.next_slot.take().or_else(|| w.claim_slot()) else {
                    break;
                };
                if slot.intended.is_some_and(|t| t > now + self.early_wake) {
                    self.next_slot = Some(slot);
                    break;
                }
                self.queued.push_back(slot);
            } else {
                match w.claim_closed(now) {
                    Some(c) => self.queued.push_back(c),
                    None => break,
                }
            }
        }
    }

    /// The lazy timer fired: a real timeout only if the oldest request is overdue; else it
    /// is re-armed at the oldest request's deadline.
    /// Returns when it should fire next.
    pub(super) fn on_timer(&mut self, now: Instant) -> Instant {
        let request_timeout = self.shared.plan.timeout;
        match self.in_flight.front() {
            Some(oldest) if oldest.begun + request_timeout <= now => {
                self.close(Closed::failed(ErrorKind::Timeout));
                now + request_timeout
            }
            Some(oldest) => oldest.begun + request_timeout,
            None => now + request_timeout,
        }
    }

    /// The server closed the connection: a response delimited by the close is complete, a
    /// partial one failed, and the requests behind it are sent again.
    pub(super) fn on_eof(&mut self, now: Instant) {
        let outcome = if self.in_flight.is_empty() {
            Closed::Graceful
        } else {
            match self.parser.on_eof(self.partial.len()) {
                Ok(Some(done)) => {
                    let f = self.in_flight.pop_front().expect("checked non-empty");
                    self.w.sub_in_flight(1);
                    let tcp = self.slow_tcp(&f, now);
                    self.finish(&f, now, done.status, done.bytes, tcp);
                    Closed::Graceful
                }
                Ok(None) => Closed::Graceful,
                Err(kind) => Closed::Failed {
                    front: kind,
                    rest: ErrorKind::EofBeforeResponse,
                },
            }
        };
        self.close(outcome);
    }

    /// Records every complete response in `data`, in order. Returns how many bytes it used
    /// and how the connection must close, if it must: a `Connection: close`, bytes nobody
    /// asked for, or a response that cannot be parsed.
    fn parse_responses(&mut self, data: &[u8], now: Instant) -> (usize, Option<Closed>) {
        let mut pos = 0;
        while pos < data.len() {
            let Some(front) = self.in_flight.front_mut() else {
                // Bytes nobody asked for: the stream cannot be trusted any more.
                return (pos, Some(Closed::Graceful));
            };
            if front.first_byte.is_none() {
                front.first_byte = Some(now);
            }
            match self.parser.parse(&data[pos..]) {
                Ok(progress) => {
                    pos += progress.consumed;
                    let Some(done) = progress.completed else {
                        break;
                    };
                    let f = self.in_flight.pop_front().expect("checked non-empty");
                    self.w.sub_in_flight(1);
                    let tcp = self.slow_tcp(&f, now);
                    self.finish(&f, now, done.status, done.bytes, tcp);
                    if done.close || !self.shared.plan.keepalive {
                        return (pos, Some(Closed::Graceful));
                    }
                }
                Err(kind) => return (pos, Some(Closed::failed(kind))),
            }
        }
        (pos, None)
    }

    /// Closes after parsing stopped. A bad response poisons only its own request; the rest
    /// are sent again.
    fn close_after_parse(&mut self, outcome: Closed, now: Instant) {
        let outcome = match outcome {
            Closed::Failed { front, .. }
                if front == ErrorKind::BadResponse || front == ErrorKind::HeaderTooLarge =>
            {
                let f = self
                    .in_flight
                    .pop_front()
                    .expect("a request was being parsed");
                self.w.sub_in_flight(1);
                self.w.rec.borrow_mut().record_failed(
                    front,
                    f.start(),
                    now,
                    self.conn_id,
                    f.first_on_connection,
                    Some(self.w.name_of(f.pos)),
                );
                Closed::Graceful
            }
            other => other,
        };
        self.close(outcome);
    }

    /// Reads the open connection's TCP_INFO and counts the segments it retransmitted since
    /// the last read; none without a connection.
    pub(super) fn observe(&mut self, handshake: bool) -> Option<TcpFacts> {
        let facts = tcp_facts(self.stream.as_ref()?);
        self.w
            .rec
            .borrow_mut()
            .record_tcp(facts, &mut self.retrans_seen, handshake);
        facts
    }

    /// A slow response's connection TCP_INFO (retransmits, RTT, RTO); none for the fast rest.
    pub(super) fn slow_tcp(&mut self, f: &InFlight, end: Instant) -> Option<TcpFacts> {
        let latency = end.saturating_duration_since(f.start().min(f.begun));
        if self.w.rec.borrow().is_slow(latency) {
            self.observe(false)
        } else {
            None
        }
    }

    /// Records a complete response.
    pub(super) fn finish(
        &self,
        f: &InFlight,
        end: Instant,
        status: u16,
        bytes: u64,
        tcp: Option<TcpFacts>,
    ) {
        self.w.rec.borrow_mut().record_finished(&Finished {
            intended: f.intended,
            begun: f.begun,
            sent: f.sent,
            first_byte: f.first_byte.unwrap_or(end),
            end,
            connect: f.connect,
            tls: f.tls,
            first_on_connection: f.first_on_connection,
            conn: self.conn_id,
            status,
            bytes,
            tcp,
            request: self.w.name_of(f.pos),
        });
    }

    /// The grace period is over: records what the connection still holds as unfinished.
    /// `since` is when the queued claims began, `stage` what they wait for.
    pub(super) fn abandon(&mut self, since: Instant, stage: Stage) {
        let tcp = self.observe(false);
        self.w.abandon(&Held {
            in_flight: &self.in_flight,
            queued: &self.queued,
            since,
            stage,
            conn: self.conn_id,
            tcp,
        });
    }

    /// Drops the connection. Unanswered requests of a graceful close go back to the front of
    /// the queue (keeping their intended times); those of a failed one are counted as failed.
    pub(super) fn close(&mut self, outcome: Closed) {
        if self.stream.is_some() {
            self.observe(false);
            self.drop_stream();
        }
        self.w.sub_in_flight(self.in_flight.len());
        match outcome {
            Closed::Graceful => {
                for f in self.in_flight.drain(..).rev() {
                    self.queued.push_front(Claim {
                        intended: f.intended,
                    });
                }
            }
            Closed::Failed { front, rest } => {
                let now = Instant::now();
                let mut rec = self.w.rec.borrow_mut();
                for (i, f) in self.in_flight.drain(..).enumerate() {
                    let kind = if i == 0 { front } else { rest };
                    let request = Some(self.w.name_of(f.pos));
                    rec.record_failed(
                        kind,
                        f.start(),
                        now,
                        self.conn_id,
                        f.first_on_connection,
                        request,
                    );
                }
            }
        }
    }
}

impl<S> Connection<S> {
    /// Closes the socket, if one is open (the worker's open-connection gauge follows).
    pub(super) fn drop_stream(&mut self) {
        if self.stream.take().is_some() {
            let w = &*self.w;
            w.open.down();
        }
    }
}

impl<S> Drop for Connection<S> {
    /// A connection that ends with its socket open takes it out of the open gauge.
    fn drop(&mut self) {
        self.drop_stream();
    }
}

pub(super) fn connect_error_kind(e: &std::io::Error) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        std::io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::from_io(e),
    }
}

/// One read from a socket tokio said is readable. A read shorter than `buf` emptied the
/// socket: its readiness is cleared at once, as tokio's own `read` does, so the next wait
/// does not cost a read that finds nothing (`try_read` alone leaves it set). The byte count
/// is carried out of `try_io` beside the `WouldBlock` that clears it.
pub(super) fn read_now(s: &TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut got = None;
    let r = s.try_io(tokio::io::Interest::READABLE, || {
        let n = (&*socket2::SockRef::from(s)).read(buf)?;
        got = Some(n);
        if n > 0 && n < buf.len() {
            Err(std::io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match (r, got) {
        (_, Some(n)) => Ok(n),
        (r, None) => r,
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

/// The TCP part of a connect, within `limit`: the socket (TCP_NODELAY set) and when its
/// handshake ended.
pub(super) async fn dial_tcp(
    shared: &Shared,
    source: Option<std::net::SocketAddr>,
    limit: Duration,
) -> Result<(TcpStream, Instant), (ErrorKind, Option<String>)> {
    match timeout(limit, connect_from(source, shared.plan.addr)).await {
        Ok(Ok(tcp)) => {
            let _ = tcp.set_nodelay(true);
            Ok((tcp, Instant::now()))
        }
        Ok(Err(e)) => Err((connect_error_kind(&e), None)),
        Err(_) => Err((ErrorKind::ConnectTimeout, None)),
    }
}

/// Connects to `addr`, from `source` when one is given (see [`bind_source`]).
pub(super) async fn connect_from(
    source: Option<std::net::SocketAddr>,
    addr: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let Some(src) = source else {
        return TcpStream::connect(addr).await;
    };
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    bind_source(&socket, src)?;
    socket.connect(addr).await
}

/// Writes a batch of requests. The common case, a batch that fits the socket buffer, is one
/// `write` with no timer; only a write that blocks gets the request timeout.
pub(super) async fn write_requests(
    s: &mut TcpStream,
    bytes: &[u8],
    limit: Duration,
) -> Result<(), ErrorKind> {
    let done = match s.try_write(bytes) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(e) => return Err(ErrorKind::from_io(&e)),
    };
    if done == bytes.len() {
        return Ok(());
    }
    match timeout(limit, s.write_all(&bytes[done..])).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ErrorKind::from_io(&e)),
        Err(_) => Err(ErrorKind::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::WorkerSpec;
    use crate::plan::Plan;

    fn worker() -> Rc<Worker> {
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        // The test sends batches of four.
        plan.pipeline = 4;
        worker_of(plan)
    }

    fn worker_of(plan: Plan) -> Rc<Worker> {
        let now = Instant::now();
        let names = plan.request_names().into();
        let shared = Arc::new(Shared {
            requests: plan.encode().unwrap(),
            placeholder_seq: Default::default(),
            plan,
            names,
            start: now,
            measure_start: now,
            end: None,
            highest: Duration::from_secs(60),
            rate_override: Default::default(),
            sources: Vec::new(),
            tls: None,
        });
        let spec = WorkerSpec::one_connection();
        Rc::new(Worker::new(shared, &spec))
    }

    #[test]
    fn a_batch_of_a_mix_is_one_slice_and_a_partial_send_counts_its_own_requests() {
        use crate::mix::RequestSpec;
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        plan.pipeline = 3;
        for (name, target) in [("a", "/a"), ("b", "/a-much-longer-target")] {
            plan.requests.push(RequestSpec {
                name: name.into(),
                method: "GET".into(),
                target: target.into(),
                headers: vec![],
                body: vec![],
                weight: 1,
            });
        }
        let w = worker_of(plan);
        let mut c: Connection<std::net::TcpStream> = Connection::new(w.clone(), EARLY_WAKE);
        let now = Instant::now();
        // One request, then a batch of three that wraps around the period of two.
        c.queued.push_back(Claim { intended: None });
        c.take_batch();
        c.mark_sent(now, now, None);
        for _ in 0..3 {
            c.queued.push_back(Claim { intended: None });
        }
        let batch = c.take_batch();
        c.mark_sent(now, now, None);
        let bytes = &w.shared.requests.bytes()[batch.clone()];
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(
            text.matches("GET /a-much-longer-target ").count(),
            2,
            "{text}"
        );
        assert_eq!(text.matches("GET /a ").count(), 1, "{text}");
        let names: Vec<u32> = c.in_flight.iter().map(|f| w.name_of(f.pos)).collect();
        assert_eq!(names, [0, 1, 0, 1]);
        // Nothing of the batch sent: its three requests (not the one before it).
        assert_eq!(c.unsent_after(batch.start), 3);
        let first_end = batch.start + w.shared.requests.end_of(c.in_flight[1].pos as usize)
            - w.shared.requests.offset(c.in_flight[1].pos as usize);
        assert_eq!(c.unsent_after(first_end - 1), 3);
        assert_eq!(c.unsent_after(first_end), 2);
        assert_eq!(c.unsent_after(batch.end), 0);
    }

    #[test]
    fn responses_split_anywhere_are_parsed_and_an_idle_connection_keeps_no_buffer() {
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let long_head = {
            let mut r = b"HTTP/1.1 200 OK\r\nX-Filler: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 3 * KEEP_PARTIAL));
            r.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
            r
        };
        let stream: Vec<u8> = [&response[..], &response[..], &long_head, &response[..]].concat();
        for piece in [1, 7, 40, stream.len()] {
            let w = worker();
            let mut c: Connection<std::net::TcpStream> = Connection::new(w.clone(), EARLY_WAKE);
            c.depth = 4;
            let now = Instant::now();
            for _ in 0..4 {
                c.queued.push_back(Claim { intended: None });
            }
            c.take_batch();
            c.mark_sent(now, now, None);
            for bytes in stream.chunks(piece) {
                c.on_received(bytes, Instant::now());
            }
            let data = w
                .rec
                .borrow_mut()
                .take_interval(Instant::now(), Duration::from_millis(100));
            assert_eq!(data.counters.successes, 4, "pieces of {piece}");
            assert_eq!(data.counters.error_total(), 0, "pieces of {piece}");
            assert!(c.in_flight.is_empty());
            assert!(c.partial.is_empty(), "pieces of {piece}");
            assert!(
                c.partial.capacity() <= KEEP_PARTIAL,
                "pieces of {piece}: an idle connection holds {} bytes",
                c.partial.capacity()
            );
        }
    }
}
