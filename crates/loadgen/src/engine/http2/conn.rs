//! One open HTTP/2 connection: dialing it (TCP, TLS with ALPN h2 for https, the HTTP/2
//! handshake), the task that drives its socket, and what that task learns (the server's
//! stream limit, the connection's end, a GOAWAY).

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::super::connection::{Connect, Connection, Dialed};
use super::super::tcp::dial_tcp;
use super::super::{tls, Shared, Worker};
use crate::error::ErrorKind;

/// The socket under an h2 connection: a TCP stream, or TLS over one.
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// The socket as h2 reads it, counting the bytes read (the HTTP/2 frames, after TLS): what
/// the report's `bytes_read` counts over HTTP/2, as it counts a response's head and body
/// over HTTP/1.1.
struct Counted {
    io: Box<dyn Io>,
    facts: Rc<ConnFacts>,
    /// h2c: the server's first bytes are still to come (they are looked at once, for a TLS
    /// server's answer: see [`ConnFacts::tls_answer`]).
    first_read: bool,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        let got = (buf.filled().len() - before) as u64;
        this.facts.read.set(this.facts.read.get() + got);
        if this.first_read && got > 0 {
            this.first_read = false;
            let answer = &buf.filled()[before..];
            this.facts
                .tls_answer
                .set(crate::transport::is_tls_answer(answer));
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// One open HTTP/2 connection.
pub(in crate::engine) struct H2Conn {
    pub(super) send: SendRequest<Bytes>,
    /// A duplicate of the socket's descriptor, for TCP_INFO: h2 owns the socket, which may
    /// be closed (and its number reused) before this connection notices.
    fd: socket2::Socket,
    pub(super) facts: Rc<ConnFacts>,
    driver: tokio::task::JoinHandle<()>,
    /// A GOAWAY or a connection error was seen: no new stream is opened on it; it is
    /// dropped once its streams are done.
    pub(super) draining: bool,
    /// The reason of the server's GOAWAY, once one was seen (and counted).
    pub(super) goaway: Option<h2::Reason>,
}

impl H2Conn {
    /// Whether the server sent GOAWAY on this connection, counting it (once per connection)
    /// the first time it is seen. h2 reports a GOAWAY only to the streams it ends and to
    /// the next stream opened; a GOAWAY that came while the connection was idle, or whose
    /// streams all ended with the connection's close (an I/O error), is seen here, by
    /// asking for a new stream: a clone of the sender asks without waiting or waking.
    pub(super) fn goaway_seen(&mut self, w: &Worker) -> Option<h2::Reason> {
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
    pub(in crate::engine) async fn closed(&self) {
        while !self.facts.ended.get() {
            let woken = self.facts.ended_notify.notified();
            if self.facts.ended.get() {
                return;
            }
            woken.await;
        }
    }

    /// No new stream on this connection: let go once its streams are done.
    pub(super) fn drain(&mut self, w: &Worker) {
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
pub(super) const STREAMS_BEFORE_SETTINGS: usize = 100;

/// What the connection's driver task learns: the server's stream limit, and its end.
pub(super) struct ConnFacts {
    pub(super) max_streams: Cell<usize>,
    /// Responses so far: once a whole first burst has come back, the server's SETTINGS
    /// (its first frame; h2 applies them a poll after reading them) are surely in force, and
    /// a limit still unbounded is the server's own.
    pub(super) responses: Cell<usize>,
    pub(super) ended: Cell<bool>,
    pub(super) ended_notify: Notify,
    /// HTTP/2 bytes read on the connection since the last response ended on it (see
    /// [`ConnFacts::take_read`]).
    read: Cell<u64>,
    /// h2c: the server's first bytes were a TLS server's answer to plain text (a TLS
    /// record, nginx's 400 "The plain HTTP request was sent to HTTPS port"): the port speaks
    /// TLS, and its requests' bad_response is counted in `tls_answers` too.
    pub(super) tls_answer: Cell<bool>,
}

impl ConnFacts {
    /// The bytes the connection read since the last response ended on it, which the
    /// response ending now takes: its own HEADERS and DATA frames, and whatever else came
    /// meanwhile (the server's SETTINGS before a first response, WINDOW_UPDATEs, PINGs, the
    /// frames of streams still open). The run's total is what its connections read; with
    /// several streams open, a response may take some of another's bytes.
    pub(super) fn take_read(&self) -> u64 {
        self.read.replace(0)
    }
}

/// Dials TCP, TLS (ALPN h2) for https, and the HTTP/2 handshake.
pub(super) async fn connect(c: &mut Connection<H2Conn>, now: Instant) -> Connect {
    let limit = c.connect_limit();
    let source = c.w.take_source();
    let shared = c.shared.clone();
    c.connect_via(now, async move { dial(&shared, source, limit).await })
        .await
}

/// Opens an HTTP/2 connection (the load's, and held idle ones).
pub(in crate::engine) async fn dial(
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
                    Some(tls::h2_not_chosen(session.alpn_protocol())),
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
    let facts = Rc::new(ConnFacts {
        max_streams: Cell::new(usize::MAX),
        responses: Cell::new(0),
        ended: Cell::new(false),
        ended_notify: Notify::new(),
        read: Cell::new(0),
        tls_answer: Cell::new(false),
    });
    let io = Counted {
        io,
        facts: facts.clone(),
        first_read: shared.tls.is_none(),
    };
    let (send, connection) = tokio::time::timeout(limit, h2::client::handshake(io))
        .await
        .map_err(|_| (ErrorKind::ConnectTimeout, None))?
        .map_err(h2_failed)?;
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
