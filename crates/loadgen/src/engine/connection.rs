//! One connection's state, whatever engine drives it, and what every step of its loop does.
//!
//! A [`Connection`] is one generator connection: the socket (one TCP connection after
//! another), the bytes of a response that has not all arrived (reads land in a buffer of the
//! worker's, so an idle connection holds none), the response parser and the requests it
//! carries. Nothing here does I/O: claiming work from the [`Worker`], what a connect, a
//! timeout or a close does to the requests, and how they are recorded, shared by the tokio
//! engine's HTTP/1.1 task (`super::http1`), its HTTP/2 task (`super::http2`) and the io_uring
//! engine (`super::uring`), which drives the same state from completions. [`batch`] is the
//! sending side (which requests of the mix a batch is, and moving them in flight),
//! [`responses`] the receiving side (parsing and recording responses). Everything it records
//! goes through the worker's `WorkerRecorder`, one short `RefCell` borrow at a time.

mod batch;
mod responses;

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::{Claim, Held, InFlight, Shared, Worker};
use crate::error::ErrorKind;
use crate::http::ResponseParser;
use crate::plan::Pace;
use crate::recorder::{Stage, TcpFacts};
use crate::sys::tcp_facts;

/// A connection's partial-response buffer that grew beyond this (a long head arriving in
/// pieces) is freed once it empties, so an idle connection holds no more than this.
const KEEP_PARTIAL: usize = 4096;
/// A server's unannounced close this soon after a response cut a busy connection; no
/// server's keep-alive idle timeout is this short (nginx 75 s, Apache 5 s, Node 5 s,
/// gunicorn 2 s).
const BUSY_CLOSE: Duration = Duration::from_secs(1);
/// A connection whose connect failed waits this long before the next try, doubling up to
/// [`MAX_BACKOFF`] and back to this after a response: a refused connect returns in
/// microseconds, and without a pause a run against nothing spins at ~100 k connects a
/// second, burning the CPU it is meant to measure with. A connection that opened and closed
/// without a single response failed as surely (h2c's preface to an HTTP/1.1-only server
/// came back as ~19 k bad_response a second) and waits the same before the next one. Only
/// failed connects wait.
pub(super) const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest pause between failed connects of one connection.
pub(super) const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// A handshake at least this slow had a SYN retransmitted (the first SYN RTO is 1 s): the
/// connection's TCP_INFO is read right after it to count them.
const SLOW_HANDSHAKE: Duration = Duration::from_millis(200);
/// A response among the slowest that was on the wire (from its send) less than this is slow
/// from waiting to be sent (an open-loop backlog): no retransmission or delayed ACK, which
/// take milliseconds at the least, slowed it, so the connection's last TCP_INFO read serves
/// for it if it is at most [`FACTS_REUSE`] old. In a backlog every response is slower than
/// the last and so among the slowest: a read for each (a `getsockopt`) took 13 % of the
/// generator's time at -q 100000 and kept the backlog from draining.
const WIRE_FLOOR: Duration = Duration::from_millis(1);
/// How old a connection's last TCP_INFO read may be to serve a response on the wire for less
/// than [`WIRE_FLOOR`]: at most a read a second per connection for such responses.
const FACTS_REUSE: Duration = Duration::from_secs(1);

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
    /// Closed loop with connection stages: this connection's run-wide index; it sends only
    /// while the stages plan more connections than that.
    ramp: Option<usize>,
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
    /// The open connection's last TCP_INFO read and when it was made (see [`WIRE_FLOOR`]).
    last_facts: Option<(TcpFacts, Instant)>,
    /// A connection was open before: opening another is a reconnect.
    had_connection: bool,
    /// The pause before the next connect after a failed one (see [`MIN_BACKOFF`]).
    pub(super) backoff: Duration,
    /// The open connection has not answered a request yet: if it closes so, the next
    /// connect backs off as after a failed one.
    unanswered: bool,
    /// When the open connection opened, and the responses it has served: what a failure
    /// on it, or the server's close of it, is recorded with.
    opened_at: Option<Instant>,
    served: u64,
    /// When the open connection's last response ended: a close between responses within
    /// [`BUSY_CLOSE`] of it cut a busy connection (a server process that died), one after
    /// that an idle one (a keep-alive timeout).
    last_response: Option<Instant>,
    /// The TLS handshake of the connection just opened, for its first request.
    handshake_tls: Option<Duration>,
    /// Closed loop: when a graceful close put requests back in `queued`, and how many. Until
    /// they are sent again (or fail, or are abandoned) that time is theirs for Little's law,
    /// though the latency of each counts from its new send: with `--pipeline 4` against a
    /// server that answers one request and closes (gunicorn's sync workers), three of every
    /// four requests' first trip and the reconnect were in no request (75 % "lost").
    requeued: Option<(Instant, usize)>,
    /// Closed loop, pipelined: since when, and how many, free slots the refill at half the
    /// depth (see [`Self::claim`]) holds back. That wait is the generator's choice, not time
    /// it lost, and is recorded for Little's law as such: `--pipeline 16` against nginx (one
    /// write per response) otherwise read as 17 % of the slots' time "lost", at the rate
    /// h2load got.
    held_back: Option<(Instant, usize)>,
}

impl<S: AsRawFd> Connection<S> {
    /// A connection with no socket yet; `early_wake` is the engine's timer precision.
    pub(super) fn new(w: Rc<Worker>, early_wake: Duration) -> Connection<S> {
        let shared = w.shared.clone();
        let depth = shared.plan.pipeline;
        Connection {
            depth,
            open_loop: matches!(shared.plan.pace, Pace::Rate(_)),
            ramp: w.take_ramp_index(),
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
            last_facts: None,
            had_connection: false,
            backoff: MIN_BACKOFF,
            unanswered: false,
            handshake_tls: None,
            opened_at: None,
            served: 0,
            last_response: None,
            requeued: None,
            held_back: None,
            w,
            shared,
        }
    }

    /// Waits for this connect's turn (tokio engines): the back-off after a connection that
    /// answered nothing, then `--connect-rate`'s. Returns when the connect begins, or none
    /// when the grace period ended first (what the connection held is then recorded as
    /// unfinished).
    pub(super) async fn connect_turn(&mut self, now: Instant) -> Option<Instant> {
        let now = if self.back_off_if_unanswered().await {
            Instant::now()
        } else {
            now
        };
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
                self.back_off(failed_at).await;
                Connect::Retry
            }
        }
    }

    /// Waits out the back-off (see [`MIN_BACKOFF`]) after a failure at `failed_at`; a stop
    /// cuts it short.
    async fn back_off(&mut self, failed_at: Instant) {
        if !self.w.stopping.get() {
            tokio::select! {
                _ = tokio::time::sleep(self.backoff) => {}
                _ = self.w.stop_idle.notified() => {}
            }
        }
        self.backed_off(failed_at);
    }

    /// Before a connect (tokio engines): waits out the back-off [`Self::owes_back_off`] says
    /// is owed. Returns whether it waited.
    async fn back_off_if_unanswered(&mut self) -> bool {
        let owed = self.owes_back_off();
        if owed {
            self.back_off(Instant::now()).await;
        }
        owed
    }

    /// Before a connect, whatever the engine: whether the last connection closed without
    /// answering anything (a server that does not speak what is sent, one that accepts and
    /// closes), which is a failed connect too, and is backed off like one (its requests were
    /// counted as they failed). True once per such connection: the engine then waits
    /// `self.backoff` and calls [`Self::backed_off`].
    pub(super) fn owes_back_off(&mut self) -> bool {
        self.stream.is_none() && std::mem::take(&mut self.unanswered)
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
        // The back-off is reset by the first response on it, not by the connect.
        self.unanswered = true;
        let took = began.elapsed();
        self.retrans_seen = 0;
        self.last_facts = None;
        self.stream = Some(s);
        w.open.up();
        if took >= SLOW_HANDSHAKE {
            self.observe(true);
        }
        self.had_connection = true;
        self.opened_at = Some(Instant::now());
        self.served = 0;
        self.last_response = None;
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
        self.requeued_sent(began);
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
    /// is the generator's own, on purpose: Little's law counts it, the part before a stop
    /// cut it short too (the connection lived through it: against a closed port, the last
    /// back-offs of up to 100 ms each read as 6.8 % "lost" in a 1 s run).
    pub(super) fn backed_off(&mut self, failed_at: Instant) {
        let now = Instant::now();
        // The back-off counts the connection's whole room: requests a graceful close put
        // back wait through it too, so their own wait pauses for it (else counted twice).
        let requeued = self.requeued.map(|(_, n)| n);
        self.requeued_sent(failed_at);
        self.w
            .rec
            .borrow_mut()
            .record_waiting(failed_at, now, self.depth);
        self.requeued = requeued.map(|n| (now, n));
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
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
        self.held_back_until(now);
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
        let free = self.depth.saturating_sub(held);
        if !self.open_loop && !self.in_flight.is_empty() && free < self.depth / 2 {
            if free > 0 {
                self.held_back = Some((now, free));
            }
            return;
        }
        while self.in_flight.len() + self.queued.len() < self.depth {
            if self.open_loop {
                let Some(slot) = self.next_slot.take().or_else(|| w.claim_slot(now)) else {
                    break;
                };
                if slot.intended.is_some_and(|t| t > now + self.early_wake) {
                    self.next_slot = Some(slot);
                    break;
                }
                self.queued.push_back(slot);
            } else {
                // A connection the stages do not count yet (or any more) waits for its turn
                // as an open-loop one waits for its slot; none: its part is over.
                if let Some(wait) = self.ramp.and_then(|g| w.ramp_wait(g, now)) {
                    self.next_slot = wait.map(|at| Claim::now(Some(at)));
                    break;
                }
                self.next_slot = None;
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

    /// Reads the open connection's TCP_INFO and counts the segments it retransmitted since
    /// the last read; none without a connection.
    pub(super) fn observe(&mut self, handshake: bool) -> Option<TcpFacts> {
        let facts = tcp_facts(self.stream.as_ref()?);
        self.w
            .rec
            .borrow_mut()
            .record_tcp(facts, &mut self.retrans_seen, handshake);
        self.last_facts = facts.map(|f| (f, Instant::now()));
        facts
    }

    /// The TCP facts of a response among the slowest that was sent at `sent` and ended at
    /// `end`: a fresh read, or, for one on the wire less than [`WIRE_FLOOR`], the last read if
    /// at most [`FACTS_REUSE`] old.
    pub(super) fn facts_for_slow(&mut self, sent: Instant, end: Instant) -> Option<TcpFacts> {
        match self.last_facts {
            Some((facts, at))
                if end.saturating_duration_since(sent) < WIRE_FLOOR
                    && end.saturating_duration_since(at) <= FACTS_REUSE =>
            {
                Some(facts)
            }
            _ => self.observe(false),
        }
    }

    /// The grace period is over: records what the connection still holds as unfinished.
    /// `since` is when the queued claims began, `stage` what they wait for. Slots the refill
    /// held free were free to the end (every grace-end path comes here, not to
    /// [`Self::close`]: a server that stopped answering left them out of Little's law, 11-19 %
    /// "in no request" at `--pipeline 8`); `take` leaves none for a close after this.
    pub(super) fn abandon(&mut self, since: Instant, stage: Stage) {
        self.held_back_until(Instant::now());
        self.requeued_sent(since);
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
        self.held_back_until(Instant::now());
        if self.stream.is_some() {
            self.observe(false);
            self.drop_stream();
        }
        self.w.sub_in_flight(self.in_flight.len());
        match outcome {
            Closed::Graceful => {
                // The server's own close (`--no-keepalive` closes are ours): after how many
                // responses, for keepalive_limit.
                if self.opened_at.take().is_some() && self.served > 0 && self.shared.plan.keepalive
                {
                    self.w.rec.borrow_mut().record_closed_after(self.served);
                }
                // Their trip on this connection is theirs (Little's law), though their
                // latency will count from the next send; open-loop requests keep their
                // intended time, so their latency holds it already.
                let now = Instant::now();
                self.requeued_sent(now);
                let mut requeued = 0;
                let mut rec = self.w.rec.borrow_mut();
                for f in self.in_flight.drain(..).rev() {
                    if f.intended.is_none() {
                        rec.record_waiting(f.begun, now, 1);
                        requeued += 1;
                    }
                    self.queued.push_front(f.requeue());
                }
                drop(rec);
                self.requeued = (requeued > 0).then_some((now, requeued));
            }
            Closed::Failed { front, rest } => {
                let now = Instant::now();
                let mut rec = self.w.rec.borrow_mut();
                let opened = self.opened_at.take();
                for (i, f) in self.in_flight.drain(..).enumerate() {
                    let kind = if i == 0 { front } else { rest };
                    let request = Some(self.w.name_of(f.pos));
                    if let (Some(opened), true) = (opened, dropped_by_server(kind)) {
                        rec.record_dropped(
                            f.start(),
                            now,
                            opened,
                            self.served,
                            f.first_on_connection,
                        );
                    }
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
    /// The requests a graceful close put back in the queue leave it at `at` (sent again,
    /// their connect failed, or the run ended): their wait since the close is recorded for
    /// Little's law.
    pub(super) fn requeued_sent(&mut self, at: Instant) {
        let span = self.requeued.take();
        self.waited_until(span, at);
    }

    /// The slots the refill held back were free until `at` (refilled, or the connection
    /// closed): their wait is recorded for Little's law.
    fn held_back_until(&mut self, at: Instant) {
        let span = self.held_back.take();
        self.waited_until(span, at);
    }

    /// Records a span of `n` requests' (or slots') wait, from `since` to `at`, in Little's law.
    fn waited_until(&self, span: Option<(Instant, usize)>, at: Instant) {
        if let Some((since, n)) = span {
            self.w.rec.borrow_mut().record_waiting(since, at, n);
        }
    }

    /// Closes the socket, if one is open (the worker's open-connection gauge follows).
    pub(super) fn drop_stream(&mut self) {
        self.last_facts = None;
        if self.stream.take().is_some() {
            let w = &*self.w;
            w.open.down();
            if self.served > 0 {
                w.serving.set(w.serving.get().saturating_sub(1));
            }
        }
    }
}

impl<S> Drop for Connection<S> {
    /// A connection that ends with its socket open takes it out of the open gauge.
    fn drop(&mut self) {
        self.drop_stream();
    }
}

/// Whether a request failed with `kind` because the server closed or reset its connection.
fn dropped_by_server(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Reset | ErrorKind::EofBeforeResponse | ErrorKind::TruncatedBody
    )
}

pub(super) fn connect_error_kind(e: &std::io::Error) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        std::io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::from_io(e),
    }
}

/// A worker with one connection's share of `plan` (for unit tests).
#[cfg(test)]
fn worker_of(plan: crate::plan::Plan) -> Rc<Worker> {
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
    let spec = super::WorkerSpec::one_connection();
    Rc::new(Worker::new(shared, &spec))
}
