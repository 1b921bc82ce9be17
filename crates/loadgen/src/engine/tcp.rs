//! The tokio engine's socket operations, shared by its HTTP/1.1, HTTP/2 and held
//! connections: a TCP connect (from a chosen source address), a read that clears readiness,
//! and a batched write.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::connection::connect_error_kind;
use super::Shared;
use crate::error::ErrorKind;
use crate::sys::prepare_connect;

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

/// Connects to `addr`, from `source` when one is given, searching the whole port range (see
/// [`prepare_connect`]).
pub(super) async fn connect_from(
    source: Option<std::net::SocketAddr>,
    addr: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    prepare_connect(&socket, source)?;
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
