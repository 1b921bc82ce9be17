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

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::{pending, poll_fn, Future};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::sleep_until;

use super::connection::{Closed, Connect, Connection, Dialed};
use super::http1::EARLY_WAKE;
use super::tcp::dial_tcp;
use super::{tls, Claim, Shared, Worker};
use crate::error::ErrorKind;
use crate::recorder::Stage;

/// The socket under an h2 connection: a TCP stream, or TLS over one.
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// One open HTTP/2 connection.
pub(super) struct H2Conn {
    send: SendRequest<Bytes>,
    /// A duplicate of the socket's descriptor, for TCP_INFO: h2 owns the socket, which may
    /// be closed (and its number reused) before this connection notices.
    fd: socket2::Socket,
    facts: Rc<ConnFacts>,
    driver: tokio::task::JoinHandle<()>,
    /// A GOAWAY or a connection error was seen: no new stream is opened on it; it is
    /// dropped once its streams are done.
    draining: bool,
    /// The reason of the server's GOAWAY, once one was seen (and counted).
    goaway: Option<h2::Reason>,
}

impl H2Conn {
    /// Whether the server sent GOAWAY on this connection, counting it (once per connection)
    /// the first time it is seen. h2 reports a GOAWAY only to the streams it ends and to
    /// the next stream opened; a GOAWAY that came while the connection was idle, or whose
    /// streams all ended with the connection's close (an I/O error), is seen here, by
    /// asking for a new stream: a clone of the sender asks without waiting or waking.
    fn goaway_seen(&mut self, w: &Worker) -> Option<h2::Reason> {
        if self.goaway.is_none() {
            let mut probe = self.send.clone();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if let std::task::Poll::Ready(Err(e)) = probe.poll_ready(&mut cx) {
                if e.is_go_away() && e.is_remote() {
                    self.goaway = e.reason();
                    w.rec.borrow_mut().transport().h2_goaways += 1;
                }
            }
        }
        self.goaway
    }

    /// Resolves when the connection has ended (the server closed it, or it failed).
    pub(super) async fn closed(&self) {
        while !self.facts.ended.get() {
            let woken = self.facts.ended_notify.notified();
            if self.facts.ended.get() {
                return;
            }
            woken.await;
        }
    }

    /// No new stream on this connection: let go once its streams are done.
    fn drain(&mut self, w: &Worker) {
        self.goaway_seen(w);
        self.draining = true;
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl AsRawFd for H2Conn {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Streams opened before the server's SETTINGS are known to have arrived: the least RFC 9113
/// (6.5.2) recommends a server allow. Until then h2 takes the limit for unbounded, and a
/// `--streams 1024` burst into nginx's 128 came back as a storm of refused streams.
const STREAMS_BEFORE_SETTINGS: usize = 100;

/// What the connection's driver task learns: the server's stream limit, and its end.
struct ConnFacts {
    max_streams: Cell<usize>,
    /// Responses so far: once a whole first burst has come back, the server's SETTINGS
    /// (its first frame; h2 applies them a poll after reading them) are surely in force, and
    /// a limit still unbounded is the server's own.
    responses: Cell<usize>,
    ended: Cell<bool>,
    ended_notify: Notify,
}

/// How a stream ended.
enum StreamEnd {
    Done {
        status: u16,
        bytes: u64,
        first_byte: Instant,
        end: Instant,
    },
    Failed(h2::Error),
}

/// Headers that are HTTP/1.1's connection and not HTTP/2's (RFC 9113 8.2.2); Host becomes
/// :authority.
fn http1_only(lower: &str) -> bool {
    matches!(
        lower,
        "host" | "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// One request of the run as streams send it, built once per connection task.
struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Template {
    /// `method target` with `headers` and `body` at the plan's authority. Validated with the
    /// plan: method, authority and target are what HTTP/1.1 sends too.
    fn new(
        shared: &Shared,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Template {
        let (authority, _) = shared.plan.authority_and_path();
        let scheme = if shared.plan.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let uri = format!("{scheme}://{authority}{target}")
            .parse()
            .unwrap_or_else(|_| http::Uri::from_static("/"));
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            let lower = k.to_ascii_lowercase();
            if http1_only(&lower) {
                continue;
            }
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(lower.as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                map.append(name, value);
            }
        }
        let defaults = [
            (
                "user-agent",
                concat!("tailscope/", env!("CARGO_PKG_VERSION")),
            ),
            ("accept", "*/*"),
        ];
        for (k, v) in defaults {
            if !map.contains_key(k) {
                map.insert(k, http::HeaderValue::from_static(v));
            }
        }
        Template {
            method: http::Method::from_bytes(method.as_bytes()).unwrap_or(http::Method::GET),
            uri,
            headers: map,
            body: Bytes::copy_from_slice(body),
        }
    }

    /// One template per request of the run: the mix's, in its order, or the single one.
    fn all(shared: &Shared) -> Vec<Template> {
        let plan = &shared.plan;
        if plan.requests.is_empty() {
            let (_, path) = plan.authority_and_path();
            return vec![Template::new(
                shared,
                &plan.method,
                path,
                &plan.headers,
                &plan.body,
            )];
        }
        plan.requests
            .iter()
            .map(|r| Template::new(shared, &r.method, &r.target, &r.headers, &r.body))
            .collect()
    }

    /// A request of a mix with placeholders, read back from its patched HTTP/1.1 bytes (the
    /// placeholders are filled there, where both engines fill them); none if they do not
    /// parse, which the plan's validation rules out.
    fn patched(&self, bytes: &[u8]) -> Option<(http::Request<()>, Bytes)> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head) = parsed.parse(bytes).ok()? else {
            return None;
        };
        let mut r = http::Request::new(());
        *r.method_mut() = http::Method::from_bytes(parsed.method?.as_bytes()).ok()?;
        let mut uri = self.uri.clone().into_parts();
        uri.path_and_query = Some(parsed.path?.parse().ok()?);
        *r.uri_mut() = http::Uri::from_parts(uri).ok()?;
        let map = r.headers_mut();
        for h in parsed.headers.iter() {
            let lower = h.name.to_ascii_lowercase();
            if http1_only(&lower) {
                continue;
            }
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(lower.as_bytes()),
                http::HeaderValue::from_bytes(h.value),
            ) {
                map.append(name, value);
            }
        }
        Some((r, Bytes::copy_from_slice(&bytes[head..])))
    }

    fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

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
                if let Some(s) = c.stream.as_ref() {
                    s.facts.responses.set(s.facts.responses.get() + 1);
                }
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
                    c.queued.push_front(Claim {
                        intended: f.intended,
                    });
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

/// One stream's exchange, its request sent: awaits the response head, then reads the body
/// to the end, giving flow-control credit back as it goes. Written out as a state machine
/// (not an `async fn`) so that it is `Unpin` and needs no box of its own.
struct Exchange {
    key: u64,
    state: Exchanging,
}

enum Exchanging {
    Head(ResponseFuture),
    Body {
        body: RecvStream,
        status: u16,
        bytes: u64,
        first_byte: Instant,
    },
    Ended,
}

impl Future for Exchange {
    type Output = (u64, StreamEnd);

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                Exchanging::Head(response) => match Pin::new(response).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, StreamEnd::Failed(e)));
                    }
                    Poll::Ready(Ok(head)) => {
                        let status = head.status().as_u16();
                        this.state = Exchanging::Body {
                            body: head.into_body(),
                            status,
                            bytes: 0,
                            first_byte: Instant::now(),
                        };
                    }
                },
                Exchanging::Body {
                    body,
                    status,
                    bytes,
                    first_byte,
                } => match body.poll_data(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(Ok(data))) => {
                        *bytes += data.len() as u64;
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, StreamEnd::Failed(e)));
                    }
                    Poll::Ready(None) => {
                        let end = StreamEnd::Done {
                            status: *status,
                            bytes: *bytes,
                            first_byte: *first_byte,
                            end: Instant::now(),
                        };
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, end));
                    }
                },
                Exchanging::Ended => return Poll::Pending,
            }
        }
    }
}

/// Dials TCP, TLS (ALPN h2) for https, and the HTTP/2 handshake.
async fn connect(c: &mut Connection<H2Conn>, now: Instant) -> Connect {
    let limit = c.connect_limit();
    let source = c.w.take_source();
    let shared = c.shared.clone();
    c.connect_via(now, async move { dial(&shared, source, limit).await })
        .await
}

/// Opens an HTTP/2 connection (the load's, and held idle ones).
pub(super) async fn dial(
    shared: &Shared,
    source: Option<std::net::SocketAddr>,
    limit: Duration,
) -> Dialed<H2Conn> {
    let (tcp, tcp_done) = dial_tcp(shared, source, limit).await?;
    let fd = socket2::SockRef::from(&tcp)
        .try_clone()
        .map_err(|e| (ErrorKind::from_io(&e), None))?;
    let (io, handshake): (Box<dyn Io>, _) = match &shared.tls {
        None => (Box::new(tcp), None),
        Some(client) => {
            let stream = tls::connect(client, tcp, limit)
                .await
                .map_err(|(kind, why)| (kind, Some(why)))?;
            let (_, session) = stream.get_ref();
            if session.alpn_protocol() != Some(tls::ALPN_H2) {
                return Err((
                    ErrorKind::TlsHandshake,
                    Some("the server did not agree to HTTP/2 in the TLS handshake (ALPN h2): it speaks HTTP/1.1 only; drop --http2".into()),
                ));
            }
            let took = tcp_done.elapsed();
            let resumed = tls::resumed(session);
            (Box::new(stream), Some((took, resumed)))
        }
    };
    let h2_failed = |e: h2::Error| {
        (
            e.get_io()
                .map_or(ErrorKind::BadResponse, ErrorKind::from_io),
            Some(format!(
                "the HTTP/2 handshake failed: {e} (does the server speak h2{}?)",
                if shared.tls.is_none() {
                    "c, prior knowledge"
                } else {
                    ""
                }
            )),
        )
    };
    let (send, connection) = tokio::time::timeout(limit, h2::client::handshake(io))
        .await
        .map_err(|_| (ErrorKind::ConnectTimeout, None))?
        .map_err(h2_failed)?;
    let facts = Rc::new(ConnFacts {
        max_streams: Cell::new(usize::MAX),
        responses: Cell::new(0),
        ended: Cell::new(false),
        ended_notify: Notify::new(),
    });
    let driver = {
        let facts = facts.clone();
        let mut connection = connection;
        tokio::task::spawn_local(async move {
            let _ = poll_fn(|cx| {
                let r = Pin::new(&mut connection).poll(cx);
                facts
                    .max_streams
                    .set(connection.max_concurrent_send_streams());
                r
            })
            .await;
            facts.ended.set(true);
            facts.ended_notify.notify_waiters();
        })
    };
    Ok((
        H2Conn {
            send,
            fd,
            facts,
            driver,
            draining: false,
            goaway: None,
        },
        tcp_done,
        handshake,
    ))
}
