//! HTTP/2 for the tokio engine (`--http2`): h2 over TLS (ALPN), or h2c with prior knowledge.
//!
//! A connection task runs the same [`Connection`] as HTTP/1.1 (claims, connects, back-off,
//! the grace period, which request of a mix each claim sends, and what is recorded are
//! shared), with the `h2` crate as its framing:
//! up to `--streams` requests in flight at once (fewer if the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS says so), each stream's exchange polled by the connection
//! task as it is woken, its response coming back in any order. The h2 connection's own task
//! drives the socket. A stream the
//! server did not process (REFUSED_STREAM, or beyond a graceful GOAWAY's last stream) is
//! sent again on a new connection, as HTTP/1.1 resends after a graceful close; any other
//! reset or GOAWAY fails its request under `rst_stream` or `goaway`. Each request costs h2's
//! allocations (its stream state, a header map, the exchange's slot in the set of streams):
//! h2load's C does without, which is why
//! BENCHMARKS.md measures the two side by side.
//!
//! This file is the connection task's loop (claim, connect, open streams, take their ends);
//! [`conn`] dials and drives one HTTP/2 connection, [`template`] builds the requests as
//! streams send them, [`exchange`] awaits one stream's response; [`slow`] is a slow held
//! connection's header block that never ends (`--slow-conns`).

mod conn;
mod exchange;
mod slow;
mod template;

use std::collections::VecDeque;
use std::future::{pending, poll_fn};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use h2::client::ResponseFuture;
use h2::SendStream;
use tokio::time::sleep_until;

use super::connection::{Closed, Connect, Connection};
use super::http1::EARLY_WAKE;
use super::{tls, Claim, Worker};
use crate::error::ErrorKind;
use crate::recorder::Stage;
use conn::{connect, STREAMS_BEFORE_SETTINGS};
pub(super) use conn::{dial, H2Conn};
use exchange::{Exchange, Exchanging, StreamEnd};
pub(super) use slow::{server_preface, SlowBlock, PREFACE, SETTINGS_ACK};
use template::Template;

/// An HTTP/2 connection task.
pub(super) async fn task(w: Rc<Worker>) {
    let started = Instant::now();
    let streams = w.shared.plan.streams;
    // Its depth is set at the top of the driver's loop, before anything is claimed.
    let c: Connection<H2Conn> = Connection::new(w.clone(), EARLY_WAKE);
    Driver {
        templates: Template::all(&w.shared),
        keys: VecDeque::new(),
        opened: Vec::new(),
        next_key: 0,
        running: FuturesUnordered::new(),
    }
    .run(c)
    .await;
    w.rec
        .borrow_mut()
        .record_connection_span(started, Instant::now(), streams);
}

struct Driver {
    /// Each request of the run (see [`Template::all`]).
    templates: Vec<Template>,
    /// The stream key of each of the connection's requests in flight, in the same order,
    /// with its task's handle (aborting it resets the stream).
    keys: VecDeque<(u64, SendStream<Bytes>)>,
    /// The streams opened by the batch being sent (kept: allocated once).
    opened: Vec<(ResponseFuture, SendStream<Bytes>)>,
    next_key: u64,
    /// The streams' exchanges, polled in this task as they are woken (a task per stream
    /// would cost a spawn, a scheduler round trip and a join per request).
    running: FuturesUnordered<Exchange>,
}

impl Driver {
    async fn run(mut self, mut c: Connection<H2Conn>) {
        let plan_streams = c.shared.plan.streams;
        let request_timeout = c.shared.plan.timeout;
        let timer = tokio::time::sleep_until((Instant::now() + request_timeout).into());
        tokio::pin!(timer);
        loop {
            let now = Instant::now();
            if c.w.grace_over.get() {
                self.abandon(&mut c, now);
                return;
            }
            // A drained connection is let go once its last stream is done.
            if c.stream.as_ref().is_some_and(|s| s.draining) && c.in_flight.is_empty() {
                if let Some(s) = c.stream.as_mut() {
                    s.goaway_seen(&c.w);
                }
                c.close(Closed::Graceful);
            }
            c.depth = match &c.stream {
                Some(s) => {
                    let mut limit = s.facts.max_streams.get();
                    if limit == usize::MAX && s.facts.responses.get() < STREAMS_BEFORE_SETTINGS {
                        limit = STREAMS_BEFORE_SETTINGS;
                    }
                    plan_streams.min(limit).max(1)
                }
                // What is claimed while connecting is sent at once.
                None => plan_streams.min(STREAMS_BEFORE_SETTINGS),
            };
            if !c.stream.as_ref().is_some_and(|s| s.draining) {
                c.claim(now);
            }
            if c.in_flight.is_empty() && c.queued.is_empty() {
                let Some(slot) = c.next_slot else {
                    c.observe(false);
                    return;
                };
                let wake = slot.intended.expect("open-loop slots have a time") - EARLY_WAKE;
                let w = &*c.w;
                tokio::select! {
                    _ = sleep_until(wake.into()) => {}
                    _ = w.stop_idle.notified() => {}
                    _ = w.grace_ended() => {}
                }
                continue;
            }

            let mut now = now;
            let mut connect_time = None;
            if c.stream.is_none() && !c.queued.is_empty() {
                let Some(turn) = c.connect_turn(now).await else {
                    return;
                };
                now = turn;
                match connect(&mut c, now).await {
                    Connect::Open(took) => {
                        connect_time = Some(took);
                        timer.as_mut().reset((now + request_timeout).into());
                    }
                    Connect::Retry => continue,
                    Connect::GraceOver => return,
                }
            }
            if c.stream.is_none() {
                continue;
            }

            if !c.queued.is_empty() && !c.stream.as_ref().is_some_and(|s| s.draining) {
                self.send_queued(&mut c, now, connect_time).await;
            }

            let slot_due = c
                .next_slot
                .and_then(|s| s.intended)
                .filter(|_| c.in_flight.len() < c.depth);
            let ended = c.stream.as_ref().map(|s| s.facts.clone());
            let w = &*c.w;
            let mut grace_over = false;
            let finished = tokio::select! {
                biased;
                Some(done) = self.running.next() => Some(done),
                _ = &mut timer => {
                    let next = self.on_timer(&mut c, Instant::now());
                    timer.as_mut().reset(next.into());
                    None
                }
                _ = async { match slot_due { Some(t) => sleep_until((t - EARLY_WAKE).into()).await, None => pending().await } } => None,
                _ = async { match &ended { Some(f) if c.in_flight.is_empty() => if !f.ended.get() { f.ended_notify.notified().await }, _ => pending().await } } => {
                    if let Some(s) = c.stream.as_mut() { s.drain(&c.w); }
                    None
                }
                _ = w.grace_ended() => {
                    grace_over = true;
                    None
                }
            };
            if grace_over {
                self.abandon(&mut c, now);
                return;
            }
            if let Some((key, end)) = finished {
                self.stream_ended(&mut c, key, end);
            }
        }
    }

    /// Opens a stream for every queued request and moves them in flight.
    async fn send_queued(
        &mut self,
        c: &mut Connection<H2Conn>,
        now: Instant,
        connect_time: Option<Duration>,
    ) {
        if c.stream.is_none() {
            return;
        }
        let k = c.queued.len();
        c.take_batch();
        let start = c.batch_start();
        let shared = c.shared.clone();
        let requests = &shared.requests;
        // A mix with placeholders: the batch patched, as HTTP/1.1 sends it, and each request
        // read back from it.
        let mut scratch = std::mem::take(&mut c.scratch);
        if requests.templated() {
            if scratch.is_empty() {
                scratch = vec![0; requests.batch_room(c.depth.max(k))];
            }
            c.patch_batch(&mut scratch, 0);
        }
        let Some(conn) = c.stream.as_mut() else {
            c.scratch = scratch;
            return;
        };
        let mut opened = std::mem::take(&mut self.opened);
        let mut failed = None;
        for pos in start..start + k {
            // Polled in place: `ready()` would take (so clone) the sender for every stream.
            if let Err(e) = poll_fn(|cx| conn.send.poll_ready(cx)).await {
                failed = Some(e);
                break;
            }
            let send = &mut conn.send;
            let template = &self.templates[requests.request_at(pos)];
            let patched = requests.templated().then(|| {
                let base = requests.offset(start);
                template.patched(&scratch[requests.offset(pos) - base..requests.end_of(pos) - base])
            });
            let (request, body) = match patched.flatten() {
                Some(patched) => patched,
                None => (template.request(), template.body.clone()),
            };
            let end_of_stream = body.is_empty();
            match send.send_request(request, end_of_stream) {
                Ok((response, mut stream)) => {
                    if !end_of_stream {
                        let _ = stream.send_data(body, true);
                    }
                    opened.push((response, stream));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        c.scratch = scratch;
        if failed.is_some() {
            conn.drain(&c.w);
        }
        let sent = Instant::now();
        let began = if connect_time.is_some() { now } else { sent };
        // Only the requests that got a stream leave; the rest wait for the next connection.
        let rest: Vec<Claim> = c.queued.drain(opened.len()..).collect();
        c.mark_sent(began, sent, connect_time);
        c.queued.extend(rest);
        for (response, stream) in opened.drain(..) {
            let key = self.next_key;
            self.next_key += 1;
            self.running.push(Exchange {
                key,
                state: Exchanging::Head(response),
            });
            self.keys.push_back((key, stream));
        }
        self.opened = opened;
    }

    /// A stream's task ended: its request is recorded, retried, or failed by kind.
    fn stream_ended(&mut self, c: &mut Connection<H2Conn>, key: u64, end: StreamEnd) {
        let Some(i) = self.keys.iter().position(|(k, _)| *k == key) else {
            return;
        };
        self.keys.remove(i);
        let Some(f) = c.in_flight.remove(i) else {
            return;
        };
        c.w.sub_in_flight(1);
        match end {
            StreamEnd::Done {
                status,
                bytes,
                first_byte,
                end,
            } => {
                // What the connection read for it (frames, not just the body's DATA).
                let bytes = match c.stream.as_ref() {
                    Some(s) => {
                        s.facts.responses.set(s.facts.responses.get() + 1);
                        s.facts.take_read()
                    }
                    None => bytes,
                };
                if let Some(max) = c.stream.as_ref().map(|s| s.facts.max_streams.get()) {
                    if max != usize::MAX {
                        let t = &mut c.w.rec.borrow_mut();
                        let seen = &mut t.transport().h2_max_streams;
                        *seen = Some(seen.map_or(max as u64, |s| s.min(max as u64)));
                    }
                }
                let mut f = f;
                f.first_byte = Some(first_byte);
                let tcp = c.slow_tcp(&f, end);
                c.finish(&f, end, status, bytes, tcp);
            }
            StreamEnd::Failed(e) => {
                let now = Instant::now();
                // Counted once per connection, whichever of its streams learns of it first.
                let goaway = match c.stream.as_mut() {
                    Some(conn) if e.is_go_away() || e.is_io() => {
                        conn.drain(&c.w);
                        conn.goaway
                    }
                    Some(conn) => conn.goaway,
                    None => None,
                };
                let mut rec = c.w.rec.borrow_mut();
                let t = rec.transport();
                let retry = e.reason() == Some(h2::Reason::REFUSED_STREAM)
                    || (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR));
                if e.is_reset() && e.is_remote() {
                    t.h2_resets += 1;
                }
                if retry {
                    t.h2_retried += 1;
                    drop(rec);
                    c.queued.push_front(f.requeue());
                    return;
                }
                // A GOAWAY with an error ends the streams past its last one with it, and
                // those before with the connection's close: both are the GOAWAY's.
                let goaway_error = goaway.is_some_and(|r| r != h2::Reason::NO_ERROR);
                // A GOAWAY that h2 itself sent (the server's bytes were not HTTP/2: an
                // HTTP/1.1 server's "505" to the h2c preface) is the response's fault, not a
                // GOAWAY of the server's.
                let kind = if (e.is_go_away() && e.is_remote()) || (e.is_io() && goaway_error) {
                    ErrorKind::Goaway
                } else if e.is_go_away() {
                    ErrorKind::BadResponse
                } else if e.is_reset() {
                    ErrorKind::RstStream
                } else if let Some(io) = e.get_io() {
                    match tls::classify_open(io) {
                        Some((kind, why)) => {
                            rec.record_tls_failure(why);
                            kind
                        }
                        None => ErrorKind::from_io(io),
                    }
                } else {
                    ErrorKind::BadResponse
                };
                if kind == ErrorKind::BadResponse
                    && c.stream.as_ref().is_some_and(|s| s.facts.tls_answer.get())
                {
                    rec.transport().tls_answers += 1;
                }
                let request = Some(c.w.name_of(f.pos));
                rec.record_failed(
                    kind,
                    f.start(),
                    now,
                    c.conn_id,
                    f.first_on_connection,
                    request,
                );
            }
        }
    }

    /// The lazy timer fired: every stream past the request timeout is failed (and reset by
    /// dropping it); returns when the timer should fire next.
    fn on_timer(&mut self, c: &mut Connection<H2Conn>, now: Instant) -> Instant {
        let limit = c.shared.plan.timeout;
        while let Some(oldest) = c.in_flight.front() {
            if oldest.begun + limit > now {
                return oldest.begun + limit;
            }
            let f = c.in_flight.pop_front().expect("checked non-empty");
            if let Some((_, mut stream)) = self.keys.pop_front() {
                // Its exchange then ends with this reset, which nobody waits for any more.
                stream.send_reset(h2::Reason::CANCEL);
            }
            c.w.sub_in_flight(1);
            c.w.rec.borrow_mut().record_failed(
                ErrorKind::Timeout,
                f.start(),
                now,
                c.conn_id,
                f.first_on_connection,
                Some(c.w.name_of(f.pos)),
            );
        }
        now + limit
    }

    /// The grace period is over: what is in flight or queued is unfinished.
    fn abandon(&mut self, c: &mut Connection<H2Conn>, now: Instant) {
        c.abandon(now, Stage::NotSent);
        self.running.clear();
        self.keys.clear();
    }
}
