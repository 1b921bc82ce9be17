//! TLS for the tokio engine: the handshake with the run's one rustls client configuration
//! (built in `transport::tls_client`), and [`Stream`], the socket a connection reads and
//! writes whether it is plain or TLS.
//!
//! The handshake is tokio-rustls' (well kept, and a handshake is once per connection);
//! after it the stream is taken apart and driven by hand from the socket's readiness, as the
//! plain path is: a connection waits for readability without holding a buffer, TLS records
//! are read into rustls' own buffer and decrypted straight into the worker's read buffer,
//! and a batch of requests is encrypted and written in one go. (tokio-rustls' `AsyncRead`
//! would need a buffer per pending read, which the plain engine was built to avoid.)
//!
//! The crypto provider is `ring`: it builds with a C compiler alone, where rustls' default
//! aws-lc-rs needs cmake (and nasm on some targets); a load generator's handshake cost is
//! small beside the server's, and both are audited and constant-time.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use rustls::ClientConnection;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::error::ErrorKind;
use crate::transport::tls_client::is_ca_used_as_end_entity;
// The run's client configuration is built from the plan's options in `transport`, where
// the plan checks it before anything starts.
pub(crate) use crate::transport::tls_client::{TlsClient, ALPN_H2};

/// A failed handshake's kind and reason: `certificate` when a certificate was refused (the
/// server's by us, or ours by the server), `tls_handshake` for everything else.
pub(crate) fn classify(err: &io::Error) -> (ErrorKind, String) {
    let Some(tls) = rustls_error(err) else {
        let why = match err.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                format!("the server closed the connection during the TLS handshake ({err}): does it speak TLS on this port?")
            }
            _ => format!("{err}"),
        };
        return (ErrorKind::TlsHandshake, why);
    };
    classify_tls(tls)
}

/// An error on an open TLS connection, when TLS itself failed: on TLS 1.3 the server judges
/// our certificate after our side of the handshake is done, so its refusal (an alert)
/// arrives with the first read. Counted as `certificate` or `tls_handshake` with the reason,
/// like a handshake that failed outright; none for any other I/O error.
pub(crate) fn classify_open(err: &io::Error) -> Option<(ErrorKind, String)> {
    rustls_error(err).map(classify_tls)
}

/// The TLS error an I/O error of rustls carries, if it is one.
fn rustls_error(err: &io::Error) -> Option<&rustls::Error> {
    err.get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
}

/// Why a handshake whose server chose none of the protocols `offered` (ALPN) failed, and
/// what to do: rustls says only "received fatal alert: NoApplicationProtocol", which is what
/// nginx without `http2 on;` answers `--http2`.
fn no_common_protocol(offered: &[Vec<u8>]) -> String {
    const ALERT: &str = "it sent the alert NoApplicationProtocol";
    if offered.iter().any(|p| p == ALPN_H2) {
        format!("the server does not offer HTTP/2 over TLS (ALPN h2; {ALERT}): drop --http2 to speak HTTP/1.1, or enable HTTP/2 on the server (nginx: `http2 on;`)")
    } else {
        format!("the server does not offer HTTP/1.1 over TLS (ALPN http/1.1; {ALERT}): if it speaks HTTP/2 only, add --http2")
    }
}

/// Why a finished handshake of `--http2` cannot carry HTTP/2: the server chose `chosen`
/// (ALPN) instead of h2, almost always nothing at all, which is what a server answers that
/// has no ALPN, or has it for HTTP/1.1 only and does not refuse a client asking for h2 alone
/// (rustls's server without protocols; nginx sends NoApplicationProtocol instead, see
/// [`no_common_protocol`]).
pub(crate) fn h2_not_chosen(chosen: Option<&[u8]>) -> String {
    let what = match chosen {
        None => "chose no application protocol in the TLS handshake (ALPN; it was offered h2 alone), so it speaks only HTTP/1.1 over TLS, or it lacks ALPN".to_string(),
        Some(p) => format!(
            "chose {:?} instead of h2 in the TLS handshake (ALPN)",
            String::from_utf8_lossy(p)
        ),
    };
    format!("the server {what}: drop --http2 to speak HTTP/1.1, or enable HTTP/2 on the server (nginx: `http2 on;`)")
}

/// What is wrong with the server's certificate, in words (rustls's own text for the rare
/// ones; its `Other` errors print in Rust's debug form).
fn certificate_problem(e: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match e {
        C::UnknownIssuer => "it is signed by a CA this run does not trust".into(),
        C::Expired | C::ExpiredContext { .. } => "it has expired".into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "it is not valid yet".into(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "it is not for this host name".into()
        }
        C::BadSignature => "its signature does not verify".into(),
        C::Revoked => "it was revoked".into(),
        e if is_ca_used_as_end_entity(e) => {
            "the server presents a CA certificate as its own (a self-signed certificate is trusted when --cacert names that very certificate)".into()
        }
        other => other.to_string(),
    }
}

fn classify_tls(tls: &rustls::Error) -> (ErrorKind, String) {
    use rustls::AlertDescription as A;
    match tls {
        rustls::Error::InvalidCertificate(e) => (
            ErrorKind::Certificate,
            format!("the server's certificate was refused: {}; trust the CA that signed it (--cacert FILE), or accept any certificate (--insecure)", certificate_problem(e)),
        ),
        rustls::Error::AlertReceived(
            A::CertificateRequired,
        ) => (
            ErrorKind::Certificate,
            "the server requires a client certificate (alert CertificateRequired): give --cert and --key".into(),
        ),
        rustls::Error::AlertReceived(
            a @ (A::BadCertificate
            | A::UnknownCA
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::CertificateRevoked
            | A::UnsupportedCertificate),
        ) => (
            ErrorKind::Certificate,
            format!("the server refused our certificate (alert {a:?}); check --cert and --key"),
        ),
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => (
            ErrorKind::TlsHandshake,
            format!("the server's answer is not TLS ({tls}): does this port speak plain HTTP? then write http://"),
        ),
        other => (ErrorKind::TlsHandshake, format!("{other}")),
    }
}

/// What a TLS handshake gave.
pub(crate) struct Handshaken {
    pub stream: Stream,
    /// The handshake resumed an earlier session.
    pub resumed: bool,
}

/// Runs the TLS handshake over a connected socket within `limit`, as tokio-rustls'
/// stream (what the HTTP/2 driver reads and writes through).
pub(crate) async fn connect(
    client: &TlsClient,
    tcp: TcpStream,
    limit: Duration,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, (ErrorKind, String)> {
    let connector = tokio_rustls::TlsConnector::from(client.config.clone());
    match timeout(limit, connector.connect(client.name.clone(), tcp)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(match rustls_error(&e) {
            Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)) => {
                (
                    ErrorKind::TlsHandshake,
                    no_common_protocol(&client.config.alpn_protocols),
                )
            }
            _ => classify(&e),
        }),
        Err(_) => Err((
            ErrorKind::TlsHandshake,
            format!(
                "the TLS handshake took longer than {} ms (--connect-timeout)",
                limit.as_millis()
            ),
        )),
    }
}

/// Whether a finished handshake resumed an earlier session.
pub(crate) fn resumed(tls: &ClientConnection) -> bool {
    tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
}

/// Runs the TLS handshake over a connected socket within `limit`, then takes the stream
/// apart to be driven from the socket's readiness (HTTP/1.1).
pub(crate) async fn handshake(
    client: &TlsClient,
    tcp: TcpStream,
    limit: Duration,
) -> Result<Handshaken, (ErrorKind, String)> {
    let (tcp, mut tls) = connect(client, tcp, limit).await?.into_inner();
    // Batches are bounded by --pipeline × the request: no limit is needed on what waits.
    tls.set_buffer_limit(None);
    let resumed = resumed(&tls);
    Ok(Handshaken {
        stream: Stream::Tls(Box::new(TlsStream {
            tcp,
            tls,
            plaintext: 0,
        })),
        resumed,
    })
}

/// A connection's socket in the tokio engine.
pub(crate) enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://`, after its handshake.
    Tls(Box<TlsStream>),
}

/// A TLS connection driven by hand from its socket's readiness.
pub(crate) struct TlsStream {
    tcp: TcpStream,
    tls: ClientConnection,
    /// Decrypted bytes rustls holds that were not read yet (a record larger than the read
    /// buffer): the connection is readable without the socket being so.
    plaintext: usize,
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Plain(s) => s.as_raw_fd(),
            Stream::Tls(t) => t.tcp.as_raw_fd(),
        }
    }
}

impl Stream {
    /// The protocol the server chose in the TLS handshake (ALPN); none in the clear.
    pub(crate) fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => t.tls.alpn_protocol(),
        }
    }

    /// Resolves when a read may find something.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.readable().await,
            Stream::Tls(t) if t.plaintext > 0 => Ok(()),
            Stream::Tls(t) => t.tcp.readable().await,
        }
    }

    /// One read after [`Stream::readable`]: `Ok(0)` at the end of the stream, `WouldBlock`
    /// when nothing (no plaintext: a TLS session ticket, say) came.
    pub(crate) fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => super::tcp::read_now(s, buf),
            Stream::Tls(t) => t.read_now(buf),
        }
    }

    /// Writes `bytes` now, without waiting: what the socket takes in the clear; over TLS,
    /// one record, written as far as the socket takes it (rustls keeps the rest for the next
    /// write). `WouldBlock` when the socket is full.
    pub(crate) fn send_now(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => socket2::SockRef::from(&*s)
                .send_with_flags(bytes, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL),
            Stream::Tls(t) => {
                let n = t.tls.writer().write(bytes)?;
                match t.write_some() {
                    Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
                    _ => Ok(n),
                }
            }
        }
    }

    /// Writes a batch of requests. The common case is one `write` with no timer; only a
    /// write that blocks gets the request timeout.
    pub(crate) async fn write_requests(
        &mut self,
        bytes: &[u8],
        limit: Duration,
    ) -> Result<(), ErrorKind> {
        match self {
            Stream::Plain(s) => super::tcp::write_requests(s, bytes, limit).await,
            Stream::Tls(t) => {
                t.tls
                    .writer()
                    .write_all(bytes)
                    .map_err(|e| ErrorKind::from_io(&e))?;
                t.flush(limit).await
            }
        }
    }
}

/// The socket as rustls reads it, noting whether a read returned less than it asked for.
struct ShortRead<'a> {
    sock: &'a socket2::Socket,
    short: bool,
}

impl Read for ShortRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut sock = self.sock;
        let n = sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl TlsStream {
    fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => {
                    self.plaintext = self.plaintext.saturating_sub(n);
                    return Ok(n);
                }
                // The peer closed without a close_notify: the end of the stream all the same
                // (many servers do; a response delimited by the close is judged by its length).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            self.plaintext = 0;
            let TlsStream { tcp, tls, .. } = self;
            // A read shorter than rustls asked for emptied the socket: its readiness is
            // cleared at once, as `tcp::read_now` does in the clear (and tokio's own `read`),
            // so the next wait costs no read that finds nothing (one recv per response, not
            // two). The byte count is carried out of `try_io` beside that `WouldBlock`.
            let mut got = None;
            let r = tcp.try_io(Interest::READABLE, || {
                let sock = socket2::SockRef::from(&*tcp);
                let mut reader = ShortRead {
                    sock: &sock,
                    short: false,
                };
                let n = tls.read_tls(&mut reader)?;
                got = Some(n);
                if n > 0 && reader.short {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(n)
                }
            });
            let got = match (r, got) {
                (_, Some(n)) => n,
                (r, None) => r?,
            };
            let state = self
                .tls
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            self.plaintext = state.plaintext_bytes_to_read();
            if self.tls.wants_write() {
                // An alert or a key update to answer: best effort, never blocking a read.
                let _ = self.write_some();
            }
            if got == 0 && self.plaintext == 0 {
                return Ok(0);
            }
        }
    }

    /// Writes what rustls has encrypted until it is all written or the socket is full.
    fn write_some(&mut self) -> io::Result<()> {
        let TlsStream { tcp, tls, .. } = self;
        while tls.wants_write() {
            tcp.try_io(Interest::WRITABLE, || {
                let sock = socket2::SockRef::from(&*tcp);
                let mut writer: &socket2::Socket = &sock;
                tls.write_tls(&mut writer)
            })?;
        }
        Ok(())
    }

    /// Writes everything rustls holds, waiting for room (within `limit`) if the socket is
    /// full.
    async fn flush(&mut self, limit: Duration) -> Result<(), ErrorKind> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match self.write_some() {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(ErrorKind::from_io(&e)),
            }
            match tokio::time::timeout_at(deadline, self.tcp.writable()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ErrorKind::from_io(&e)),
                Err(_) => return Err(ErrorKind::Timeout),
            }
        }
    }
}
