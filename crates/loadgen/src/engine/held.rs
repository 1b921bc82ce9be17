//! Held connections (`--idle-conns`, `--slow-conns`): opened beside the load to measure
//! what holding many clients costs the server, through the same connect path as the load's
//! (source addresses, `--connect-rate` turns, the connect timeout), counted apart.
//!
//! An idle connection connects and says nothing; a slow one sends a request head that
//! never ends, one byte every `--slow-interval` (a slowloris client; over HTTP/2 a header
//! block that never ends, see `http2/slow.rs`). Either waits for the
//! server to close it (an idle or header timeout, a connection limit): that is counted as
//! `closed_by_server` and the connection is opened again, in turn, so the population stays
//! what was asked for while the run lasts. No connect begins once sending stops; when the
//! load's last response is in (or the grace period is over) each closes, counted
//! `open_at_end` if it was open. [`HeldConn`] is the state and bookkeeping both engines
//! share; [`task`] is the tokio engine's loop (the io_uring engine drives the same state
//! from its completions in `uring/held.rs`).

use std::io::ErrorKind as IoKind;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::time::{sleep, sleep_until};

use super::connection::{MAX_BACKOFF, MIN_BACKOFF};
use super::http2::{self, H2Conn, SlowBlock};
use super::tcp::dial_tcp;
use super::tls::{self, Stream};
use super::Worker;
use crate::conns::HeldKind;

/// After the request head's last header line, a slow connection goes on with this header,
/// whose value never ends.
const SLOW_HEADER: &[u8] = b"X-Slow: ";

/// How a held connection ended, when it was not the generator that closed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeldEnd {
    /// A FIN or a reset from the server.
    ClosedByServer,
    /// Anything else (counted as `failed`).
    Failed,
}

impl HeldEnd {
    /// What an I/O error on a held connection means.
    pub(super) fn of(e: &std::io::Error) -> HeldEnd {
        match e.kind() {
            IoKind::ConnectionReset | IoKind::BrokenPipe | IoKind::ConnectionAborted => {
                HeldEnd::ClosedByServer
            }
            _ => HeldEnd::Failed,
        }
    }
}

/// One held connection, across the TCP connections it opens in turn.
pub(super) struct HeldConn<S> {
    pub(super) w: Rc<Worker>,
    pub(super) kind: HeldKind,
    /// The socket, while one is open.
    pub(super) stream: Option<S>,
    /// Header bytes sent on the open socket (slow connections).
    sent: usize,
    /// Over HTTP/2, the header block a slow connection sends (its bytes after the preface).
    slow_h2: Option<SlowBlock>,
    /// The pause after the next failed connect (doubling up to [`MAX_BACKOFF`]).
    backoff: Duration,
}

impl<S> HeldConn<S> {
    pub(super) fn new(w: Rc<Worker>, kind: HeldKind) -> HeldConn<S> {
        HeldConn {
            w,
            kind,
            stream: None,
            sent: 0,
            slow_h2: None,
            backoff: MIN_BACKOFF,
        }
    }

    fn gauge(&self, cells: &[std::cell::Cell<u64>; 2], up: bool) {
        let c = &cells[self.kind.index()];
        c.set(if up {
            c.get() + 1
        } else {
            c.get().saturating_sub(1)
        });
    }

    fn open_level(&self) -> &super::Level {
        &self.w.held_open[self.kind.index()]
    }

    /// A connect begins.
    pub(super) fn begin_connect(&self) {
        self.gauge(&self.w.held_opening, true);
    }

    /// The connect that began was dropped unfinished (sending stopped).
    pub(super) fn abandon_connect(&self) {
        self.gauge(&self.w.held_opening, false);
    }

    /// The connect made `s`.
    pub(super) fn opened(&mut self, s: S) {
        self.gauge(&self.w.held_opening, false);
        self.open_level().up();
        self.w.rec.borrow_mut().held(self.kind).opened += 1;
        self.stream = Some(s);
        self.sent = 0;
        self.backoff = MIN_BACKOFF;
    }

    /// The connect failed: counted; returns how long to pause before the next.
    pub(super) fn connect_failed(&mut self) -> Duration {
        self.gauge(&self.w.held_opening, false);
        self.w.rec.borrow_mut().held(self.kind).connect_failures += 1;
        let pause = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        pause
    }

    /// The open connection ended (the server closed it, or it failed): counted, closed.
    pub(super) fn ended(&mut self, how: HeldEnd) {
        if self.stream.take().is_some() {
            self.open_level().down();
            let mut rec = self.w.rec.borrow_mut();
            let c = rec.held(self.kind);
            match how {
                HeldEnd::ClosedByServer => c.closed_by_server += 1,
                HeldEnd::Failed => c.failed += 1,
            }
        }
    }

    /// Sending stopped: the connection closes, counted as open at the end if it was.
    pub(super) fn release(&mut self) {
        if self.stream.take().is_some() {
            self.open_level().down();
            self.w.rec.borrow_mut().held(self.kind).open_at_end += 1;
        }
    }

    /// The pause between a slow connection's header bytes; none for an idle one.
    pub(super) fn byte_interval(&self) -> Option<Duration> {
        (self.kind == HeldKind::Slow).then_some(self.w.shared.plan.slow_interval)
    }
}

impl<S> HeldConn<S> {
    /// A slow connection's next header byte, written now by `send` without waiting (one
    /// byte every few seconds: a plain non-blocking send costs less than an op or a task
    /// wake-up would). A full socket buffer skips this turn.
    fn send_byte_with(
        &mut self,
        send: impl FnOnce(&mut S, u8) -> std::io::Result<usize>,
    ) -> Result<(), HeldEnd> {
        // The run's first request (a mix's first position; with placeholders, its template).
        let byte = match &self.slow_h2 {
            Some(block) => block.byte(self.sent),
            None => {
                let requests = &self.w.shared.requests;
                slow_byte(&requests.bytes()[requests.range(0, 1)], self.sent)
            }
        };
        let Some(s) = self.stream.as_mut() else {
            return Ok(());
        };
        match send(s, byte) {
            Ok(n) => {
                self.sent += n;
                Ok(())
            }
            Err(e) if e.kind() == IoKind::WouldBlock => Ok(()),
            Err(e) => Err(HeldEnd::of(&e)),
        }
    }
}

impl<S: AsFd> HeldConn<S> {
    /// A slow connection's next header byte, sent on the socket (see [`Self::send_byte_with`]).
    pub(super) fn send_byte(&mut self) -> Result<(), HeldEnd> {
        self.send_byte_with(|s, byte| {
            socket2::SockRef::from(&*s)
                .send_with_flags(&[byte], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        })
    }
}

/// Byte `k` of a request head that never ends: the request's own head up to its last
/// header line, then an `X-Slow` header whose value goes on and on.
fn slow_byte(request: &[u8], k: usize) -> u8 {
    let head = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(request.len(), |p| p + 2);
    match k.checked_sub(head) {
        None => request[k],
        Some(j) => SLOW_HEADER.get(j).copied().unwrap_or(b'a'),
    }
}

/// A held connection's socket in the tokio engine.
enum HeldSocket {
    /// Bytes written by hand, in the clear or after a TLS handshake: HTTP/1.1, or a slow
    /// connection's HTTP/2 frames after the preface; a slow connection's head goes through it
    /// (over TLS, a record per byte).
    Http1(Stream),
    /// HTTP/2 idle connections: the h2 connection, its preface and SETTINGS
    /// exchanged, driven by its own task (which answers the server's PINGs) until the server
    /// closes it.
    H2(H2Conn),
}

/// Opens a held connection as the load's are: TCP, then TLS for https, then HTTP/2's
/// handshake with `--http2` (a slow one's by hand, see [`h2_preface`]). A TLS or HTTP/2
/// failure is a failed connect.
async fn dial(w: &Worker, kind: HeldKind) -> Option<HeldSocket> {
    let shared = &*w.shared;
    let limit = w.connect_limit();
    let source = w.take_source();
    if shared.plan.http2 && kind == HeldKind::Idle {
        return http2::dial(shared, source, limit)
            .await
            .ok()
            .map(|(conn, _, _)| HeldSocket::H2(conn));
    }
    let (tcp, _) = dial_tcp(shared, source, limit).await.ok()?;
    let mut stream = match &shared.tls {
        None => Stream::Plain(tcp),
        Some(client) => tls::handshake(client, tcp, limit).await.ok()?.stream,
    };
    if shared.plan.http2 {
        if shared.tls.is_some() && stream.alpn() != Some(tls::ALPN_H2) {
            return None;
        }
        tokio::time::timeout(limit, h2_preface(&mut stream, limit))
            .await
            .ok()??;
    }
    Some(HeldSocket::Http1(stream))
}

/// A slow HTTP/2 connection's start, by hand: the client preface and SETTINGS, then the
/// server's SETTINGS (its first frame), acknowledged. What else the server sent with it is
/// read and dropped later, with the rest.
async fn h2_preface(s: &mut Stream, limit: Duration) -> Option<()> {
    s.write_requests(http2::PREFACE, limit).await.ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        s.readable().await.ok()?;
        match s.read_now(&mut buf) {
            Ok(0) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == IoKind::WouldBlock => continue,
            Err(_) => return None,
        }
        match http2::server_preface(&got) {
            None => continue,
            Some(false) => return None,
            Some(true) => break,
        }
    }
    s.write_requests(http2::SETTINGS_ACK, limit).await.ok()
}

/// A held connection's tokio task: connect (in turn), hold, and when the server closes it,
/// connect again, until sending stops.
pub(super) async fn task(w: Rc<Worker>, kind: HeldKind) {
    let mut c = HeldConn::<HeldSocket>::new(w.clone(), kind);
    if w.shared.plan.http2 && kind == HeldKind::Slow {
        c.slow_h2 = Some(SlowBlock::new(&w.shared));
    }
    loop {
        if let Some(at) = w.connect_permit(Instant::now()) {
            tokio::select! {
                _ = sleep_until(at.into()) => {}
                _ = w.sending_stopped() => return,
            }
        }
        c.begin_connect();
        let connected = tokio::select! {
            r = dial(&w, kind) => r,
            _ = w.sending_stopped() => {
                c.abandon_connect();
                return;
            }
        };
        let Some(s) = connected else {
            let pause = c.connect_failed();
            tokio::select! {
                _ = sleep(pause) => {}
                _ = w.sending_stopped() => return,
            }
            continue;
        };
        c.opened(s);
        let end = tokio::select! {
            end = hold(&mut c) => end,
            _ = w.held_released() => {
                c.release();
                return;
            }
        };
        c.ended(end);
        if w.stopping.get() {
            // No new connects once sending stopped.
            return;
        }
    }
}

/// Holds the open connection until the server closes it (or a write fails), sending a
/// header byte every interval if it is a slow one. What the server sends meanwhile (a 408)
/// is read and dropped.
async fn hold(c: &mut HeldConn<HeldSocket>) -> HeldEnd {
    if let Some(HeldSocket::H2(conn)) = c.stream.as_ref() {
        conn.closed().await;
        return HeldEnd::ClosedByServer;
    }
    let interval = c.byte_interval();
    let mut next_byte = Instant::now();
    loop {
        if interval.is_some() && Instant::now() >= next_byte {
            let sent = c.send_byte_with(|s, byte| match s {
                HeldSocket::Http1(s) => s.send_now(&[byte]),
                HeldSocket::H2(_) => Ok(0),
            });
            if let Err(end) = sent {
                return end;
            }
            // From now, not from when it was due: a late wake-up sends one byte, not a burst.
            next_byte = Instant::now() + interval.unwrap_or_default();
        }
        let Some(HeldSocket::Http1(s)) = c.stream.as_mut() else {
            return HeldEnd::Failed;
        };
        let readable = tokio::select! {
            r = s.readable() => r,
            _ = sleep_until(next_byte.into()), if interval.is_some() => continue,
        };
        if let Err(e) = readable {
            return HeldEnd::of(&e);
        }
        let mut scratch = [0u8; 512];
        match s.read_now(&mut scratch) {
            Ok(0) => return HeldEnd::ClosedByServer,
            Ok(_) => {}
            Err(e) if e.kind() == IoKind::WouldBlock => {}
            Err(e) => return HeldEnd::of(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_head_is_the_request_head_then_a_header_that_never_ends() {
        let request = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody";
        let want = b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: aaaaaaa";
        let head: Vec<u8> = (0..want.len()).map(|k| slow_byte(request, k)).collect();
        assert_eq!(
            String::from_utf8_lossy(&head),
            String::from_utf8_lossy(want)
        );
    }
}
