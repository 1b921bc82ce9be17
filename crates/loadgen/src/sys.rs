//! The crate's only `unsafe`: reading the kernel's TCP_INFO of the generator's own sockets.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

use crate::recorder::TcpFacts;

/// TCP_INFO of a connected (or connecting) TCP socket; `None` where the kernel refuses it.
pub fn tcp_facts(socket: &impl AsRawFd) -> Option<TcpFacts> {
    // SAFETY: `info` is a plain-old-data C struct for which all-zero bytes are a valid
    // value; getsockopt writes at most `len` bytes into it and sets `len` to what it wrote.
    // The fd is borrowed from a live socket for the duration of the call.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: see above; the pointers are to locals that outlive the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &mut len,
        )
    };
    // Kernels older than the struct fill only a prefix; total_retrans sits well inside
    // what every kernel since 2.6 writes.
    (rc == 0).then_some(TcpFacts {
        total_retrans: info.tcpi_total_retrans,
        lost: info.tcpi_lost,
        rto_us: info.tcpi_rto,
        rtt_us: info.tcpi_rtt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_connection_has_facts_and_no_retransmits() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let facts = tcp_facts(&client).expect("TCP_INFO on a connected socket");
        assert_eq!(facts.total_retrans, 0);
        assert!(
            facts.rto_us >= 200_000,
            "the minimum RTO is 200 ms: {facts:?}"
        );
        let not_tcp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_facts(&not_tcp), None);
    }
}
