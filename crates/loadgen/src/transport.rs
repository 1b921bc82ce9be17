//! What a connection speaks above TCP: TLS (`https://`) and the HTTP version, as a plan
//! asks for them and as a run counts them.
//!
//! [`TlsOptions`] is the plan's side (SNI, trust, client certificate, resumption); the
//! run builds one rustls client configuration from it (`tls_client`), so the
//! files it names are read, and found wanting, before anything is sent.
//! [`TransportCounters`] is what the workers count of it beside the request counters.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::counts::{is_zero, min_some};
use crate::error::Error;

pub(crate) mod tls_client;

/// The run's TLS client for these options (reading the files they name), none for http; an
/// error says which file or flag is wrong. HTTP/2 offers only `h2` by ALPN.
pub(crate) fn tls_client(
    tls: Option<&TlsOptions>,
    http2: bool,
) -> Result<Option<tls_client::TlsClient>, Error> {
    tls.map(|options| {
        let alpn = if http2 {
            tls_client::ALPN_H2
        } else {
            tls_client::ALPN_HTTP1
        };
        tls_client::client(options, &[alpn])
    })
    .transpose()
}

/// How a plan's connections secure themselves (`https://`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// The name sent as SNI and checked against the certificate: the URL's host. An IP
    /// address is checked against the certificate's IP names and sends no SNI (RFC 6066).
    pub server_name: String,
    /// Accept any certificate (`--insecure`): signatures are still checked, names and
    /// issuers are not.
    pub insecure: bool,
    /// Trust only the certificates in this PEM file (`--cacert`) instead of the built-in
    /// Mozilla roots.
    pub cacert: Option<PathBuf>,
    /// A client certificate chain (PEM, `--cert`), with its key.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, `--key`).
    pub key: Option<PathBuf>,
    /// Resume sessions on reconnect (tickets or ids, shared by the run's connections);
    /// `--no-tls-resume` makes every handshake a full one.
    pub resume: bool,
}

impl TlsOptions {
    /// The defaults for a server name: verify against the built-in roots, resume sessions.
    pub fn new(server_name: &str) -> TlsOptions {
        TlsOptions {
            server_name: server_name.to_string(),
            insecure: false,
            cacert: None,
            cert: None,
            key: None,
            resume: true,
        }
    }
}

/// The TLS settings of a run, as the report records them (`config.tls`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsConfig {
    /// SNI / the name the certificate was checked against.
    pub server_name: String,
    /// Whether certificates were verified (false with `--insecure`).
    pub verify: bool,
    /// The CA file trusted instead of the built-in roots, if any.
    pub cacert: Option<String>,
    /// Whether a client certificate was offered.
    pub client_cert: bool,
    /// Whether sessions were resumed on reconnect.
    pub resume: bool,
    /// The crypto provider (`ring`).
    pub provider: String,
}

impl TlsConfig {
    /// What the report says of `options`.
    pub fn of(options: &TlsOptions) -> TlsConfig {
        TlsConfig {
            server_name: options.server_name.clone(),
            verify: !options.insecure,
            cacert: options.cacert.as_ref().map(|p| p.display().to_string()),
            client_cert: options.cert.is_some(),
            resume: options.resume,
            provider: "ring".into(),
        }
    }
}

/// What the connections' TLS layer did in a run or an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransportCounters {
    /// TLS handshakes that finished.
    pub tls_handshakes: u64,
    /// Of those, how many resumed an earlier session (an abbreviated handshake).
    pub tls_resumed: u64,
    /// Why the first failed handshake failed (the `tls_handshake` and `certificate` kinds),
    /// in rustls' words; the text summary shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_failure: Option<String>,
    /// HTTP/2: GOAWAY frames that reached a request (one per connection): streams it
    /// refused or failed, or a stream it kept from opening. A GOAWAY that closed an idle
    /// connection is counted in `reconnects` only (h2 does not tell it from a close).
    #[serde(default)]
    pub h2_goaways: u64,
    /// HTTP/2: streams the server reset (RST_STREAM), REFUSED_STREAM included.
    #[serde(default)]
    pub h2_resets: u64,
    /// HTTP/2: requests sent again on a new connection because the server had not
    /// processed them (REFUSED_STREAM, or beyond a graceful GOAWAY's last stream).
    #[serde(default)]
    pub h2_retried: u64,
    /// HTTP/2: the server's SETTINGS_MAX_CONCURRENT_STREAMS, the lowest any connection saw
    /// (`--streams` is held below it); null when no SETTINGS limit was seen.
    #[serde(default)]
    pub h2_max_streams: Option<u64>,
    /// `http://`: answers that were TLS, not HTTP (a TLS record, or nginx's "400 The plain
    /// HTTP request was sent to HTTPS port"): the port speaks TLS. Absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_answers: u64,
}

/// Whether `answer`, which came where an HTTP/1.1 response was due, is a TLS server's: a TLS
/// record (an alert, 0x15, or a handshake, 0x16, of TLS 1.0-1.3 framing) or nginx's 400 to
/// plain HTTP on its TLS port. Only failed or 400 answers are looked at (not the hot path).
pub(crate) fn is_tls_answer(answer: &[u8]) -> bool {
    const NGINX: &[u8] = b"The plain HTTP request was sent to HTTPS port";
    matches!(answer, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
        || answer.windows(NGINX.len()).any(|w| w == NGINX)
}

impl TransportCounters {
    /// Adds another interval's (or worker's) counts to these; the first failure reason
    /// seen is kept.
    pub fn merge(&mut self, other: &TransportCounters) {
        self.tls_handshakes += other.tls_handshakes;
        self.tls_resumed += other.tls_resumed;
        if self.tls_failure.is_none() {
            self.tls_failure.clone_from(&other.tls_failure);
        }
        self.h2_goaways += other.h2_goaways;
        self.h2_resets += other.h2_resets;
        self.h2_retried += other.h2_retried;
        self.tls_answers += other.tls_answers;
        self.h2_max_streams = min_some(self.h2_max_streams, other.h2_max_streams);
    }
}

#[cfg(test)]
mod tests {
    use super::is_tls_answer;

    #[test]
    fn tls_records_and_nginx_s_plain_http_answer_are_told_from_http() {
        // OpenSSL's alert to "GET / HTTP/1.1" (protocol_version), a ServerHello's start.
        assert!(is_tls_answer(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]));
        assert!(is_tls_answer(&[0x16, 0x03, 0x03, 0x00, 0x5a]));
        let nginx = b"HTTP/1.1 400 Bad Request\r\nServer: nginx/1.22.1\r\nContent-Length: 255\r\n\r\n<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>";
        assert!(is_tls_answer(nginx));
        assert!(!is_tls_answer(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!is_tls_answer(b"\x15\x04 not TLS"));
        assert!(!is_tls_answer(&[0x15]));
        assert!(!is_tls_answer(b""));
    }
}
