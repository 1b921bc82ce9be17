//! The crate's error type and the kinds a failed request is counted under.

use serde::{Deserialize, Serialize};

/// Why a plan could not be built or a run could not start. Per-request failures are not
/// errors of this kind: they are counted by [`ErrorKind`] and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The target URL could not be used.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {error}")]
    Resolve {
        /// Host and port as given.
        host: String,
        /// The resolver's error.
        error: std::io::Error,
    },
    /// A plan setting is out of range.
    #[error("{0}")]
    InvalidPlan(String),
    /// A generator thread or runtime could not be started.
    #[error("cannot start generator thread: {0}")]
    Spawn(std::io::Error),
    /// Reports that cannot be merged into one (`tailscope merge`), and why.
    #[error("{0}")]
    Merge(String),
    /// A request file (`--load`, `--urls-from-file`) cannot be used.
    #[error("{path}{}: {reason}", at_line(*line))]
    BadRequestFile {
        /// The file as given.
        path: String,
        /// The line the problem is on (1-based; 0 when it is the whole file's).
        line: usize,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// A threshold expression did not parse.
    #[error("bad threshold {expr:?}: {reason}")]
    BadThreshold {
        /// The expression as given.
        expr: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
}

/// The kinds a failed request is counted under. Every failure has exactly one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The server refused the TCP connection (nothing listening).
    ConnectRefused,
    /// The TCP handshake did not finish within the connect timeout.
    ConnectTimeout,
    /// No complete response within the request timeout.
    Timeout,
    /// The connection was reset by the peer (RST, or a write into a closed socket).
    Reset,
    /// The server closed the connection before sending any byte of the response.
    EofBeforeResponse,
    /// The server closed the connection after the response started but before it was complete.
    TruncatedBody,
    /// The response could not be parsed as HTTP/1.x.
    BadResponse,
    /// The response head was larger than 64 KiB.
    HeaderTooLarge,
    /// No file descriptor for a new socket (EMFILE, ENFILE): the process's or the system's
    /// open-file limit.
    TooManyOpenFiles,
    /// No local address/port for a new connection (EADDRNOTAVAIL): the ephemeral port
    /// range is used up, often by sockets in TIME_WAIT.
    NoLocalPort,
    /// The TLS handshake failed for another reason than a certificate (no shared protocol
    /// or cipher, a plain-HTTP server, an alert); the reason is in the text summary.
    TlsHandshake,
    /// A certificate was refused: the server's (unknown issuer, wrong name, expired; see
    /// `--cacert`, `--insecure`) or ours by the server (`--cert`).
    Certificate,
    /// HTTP/2: the server reset the request's stream (RST_STREAM, other than REFUSED_STREAM,
    /// which is retried).
    RstStream,
    /// HTTP/2: the server's GOAWAY with an error ended the request's connection (a graceful
    /// GOAWAY's unprocessed streams are retried).
    Goaway,
    /// Any other I/O error.
    IoOther,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::EofBeforeResponse,
        ErrorKind::TruncatedBody,
        ErrorKind::BadResponse,
        ErrorKind::HeaderTooLarge,
        ErrorKind::TooManyOpenFiles,
        ErrorKind::NoLocalPort,
        ErrorKind::TlsHandshake,
        ErrorKind::Certificate,
        ErrorKind::RstStream,
        ErrorKind::Goaway,
        ErrorKind::IoOther,
    ];

    /// How many kinds there are (the length of per-kind counter arrays).
    pub const COUNT: usize = 15;

    /// The name used in reports (`connect_refused`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::EofBeforeResponse => "eof_before_response",
            ErrorKind::TruncatedBody => "truncated_body",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::HeaderTooLarge => "header_too_large",
            ErrorKind::TooManyOpenFiles => "too_many_open_files",
            ErrorKind::NoLocalPort => "no_local_port",
            ErrorKind::TlsHandshake => "tls_handshake",
            ErrorKind::Certificate => "certificate",
            ErrorKind::RstStream => "rst_stream",
            ErrorKind::Goaway => "goaway",
            ErrorKind::IoOther => "io_other",
        }
    }

    /// Index into per-kind counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Classifies an I/O error from a connected socket.
    pub fn from_io(err: &std::io::Error) -> ErrorKind {
        use std::io::ErrorKind as K;
        match err.kind() {
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorKind::Reset,
            K::ConnectionRefused => ErrorKind::ConnectRefused,
            K::TimedOut => ErrorKind::Timeout,
            K::AddrNotAvailable => ErrorKind::NoLocalPort,
            // EMFILE (24) and ENFILE (23) have no stable io::ErrorKind; their numbers are the
            // same on every Linux architecture.
            _ if matches!(err.raw_os_error(), Some(23 | 24)) => ErrorKind::TooManyOpenFiles,
            _ => ErrorKind::IoOther,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `:LINE` after a file's name, nothing for a problem of the whole file (line 0).
fn at_line(line: usize) -> String {
    match line {
        0 => String::new(),
        n => format!(":{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;
    use std::io;

    #[test]
    fn descriptor_and_port_exhaustion_have_their_own_kinds() {
        let emfile = io::Error::from_raw_os_error(24);
        let enfile = io::Error::from_raw_os_error(23);
        let eaddrnotavail = io::Error::from_raw_os_error(99);
        assert_eq!(ErrorKind::from_io(&emfile), ErrorKind::TooManyOpenFiles);
        assert_eq!(ErrorKind::from_io(&enfile), ErrorKind::TooManyOpenFiles);
        assert_eq!(ErrorKind::from_io(&eaddrnotavail), ErrorKind::NoLocalPort);
        assert_eq!(ErrorKind::ALL.len(), ErrorKind::COUNT);
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i, "{k}");
        }
    }
}
