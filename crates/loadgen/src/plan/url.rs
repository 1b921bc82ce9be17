//! What a URL says: the address to connect to, the Host header, the request target, TLS.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::Error;

/// What a URL says: the address to connect to, the Host header, the request target (path
/// and query), and for https the TLS defaults for its host.
pub(super) type ParsedUrl = (
    SocketAddr,
    String,
    String,
    Option<crate::transport::TlsOptions>,
);

/// Resolves an http or https URL (see [`ParsedUrl`]).
pub(super) fn parse_url(url: &str) -> Result<ParsedUrl, Error> {
    let bad = |reason: &str| Error::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let parsed = url::Url::parse(url)
        .map_err(|e| bad(&format!("{e}; expected http(s)://HOST[:PORT]/PATH")))?;
    let https = match parsed.scheme() {
        "http" => false,
        "https" => true,
        other => {
            return Err(bad(&format!(
                "scheme {other:?} is not supported; use http:// or https://"
            )))
        }
    };
    let host = parsed.host_str().ok_or_else(|| bad("no host"))?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    // Port 0 asks the kernel for any port when binding; nothing listens on it, so a run at
    // it would only count refused connections for its whole duration.
    if port == 0 {
        return Err(bad(
            "port 0 cannot be connected to: give the port the server listens on",
        ));
    }
    let host_for_resolve = host.trim_start_matches('[').trim_end_matches(']');
    let resolve_error = |error| Error::Resolve {
        host: format!("{host}:{port}"),
        error,
    };
    let addr = (host_for_resolve, port)
        .to_socket_addrs()
        .map_err(resolve_error)?
        .next()
        .ok_or_else(|| {
            resolve_error(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no address",
            ))
        })?;
    let host_header = match parsed.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let mut path = parsed.path().to_string();
    if let Some(q) = parsed.query() {
        path.push('?');
        path.push_str(q);
    }
    let tls = https.then(|| crate::transport::TlsOptions::new(host_for_resolve));
    Ok((addr, host_header, path, tls))
}
