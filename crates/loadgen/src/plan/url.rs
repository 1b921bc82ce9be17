//! What a URL says: the address to connect to, the Host header, the request target, TLS,
//! and the credentials of its `user:password@`.

use std::net::{SocketAddr, ToSocketAddrs};

use base64::Engine as _;

use crate::error::Error;

/// What a URL says.
pub(super) struct ParsedUrl {
    /// The address connections go to.
    pub(super) addr: SocketAddr,
    /// The Host header (HTTP/2's :authority).
    pub(super) host_header: String,
    /// The request target: path and query.
    pub(super) path: String,
    /// For https, the TLS defaults for its host.
    pub(super) tls: Option<crate::transport::TlsOptions>,
    /// `Basic …` of the URL's `user:password@`, percent-decoded first, as curl sends it.
    pub(super) authorization: Option<String>,
    /// The URL as given with its password written `***`: what reports and the dashboard
    /// show, so that a report passed around does not hand out the password.
    pub(super) shown: String,
}

/// Resolves an http or https URL (see [`ParsedUrl`]).
pub(super) fn parse_url(url: &str) -> Result<ParsedUrl, Error> {
    let shown = redact_password(url);
    let bad = |reason: &str| Error::BadUrl {
        url: shown.clone(),
        reason: reason.to_string(),
    };
    // `127.0.0.1:8080` is no URL to the parser and `localhost:8080/` one of scheme
    // "localhost": both are a host and port that lack their scheme.
    if !url.contains("://") {
        return Err(bad(&format!(
            "it has no scheme: write http://{shown} (or https://{shown})"
        )));
    }
    // `http:///path` is, to the WHATWG parser, the host `path` (a newcomer was told "cannot
    // resolve path:80"): three slashes leave the host out.
    if let Some((_, rest)) = url.split_once("://") {
        if rest.starts_with('/') {
            return Err(bad(
                "it has no host (three slashes): write http(s)://HOST[:PORT]/PATH",
            ));
        }
    }
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
    let authorization = basic_authorization(&parsed);
    Ok(ParsedUrl {
        addr,
        host_header,
        path,
        tls,
        authorization,
        shown,
    })
}

/// The `Authorization` value of the URL's credentials, if it has any: `Basic
/// base64(user:password)` of the percent-decoded parts (a user without a password sends an
/// empty one, as curl does).
pub fn basic_authorization(url: &url::Url) -> Option<String> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
    let mut credentials = decode(url.username());
    credentials.push(b':');
    credentials.extend(decode(url.password().unwrap_or("")));
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    ))
}

/// `url` with the password of its `user:password@` replaced by `***`, or its whole user when
/// it has no password (`https://TOKEN@host/` is how API tokens are given): `***@host`.
///
/// What counts as the password is what the URL parser reads as one, so that no spelling it
/// accepts (`http:/u:p@h/`, `http:///u:p@h/`, `://` later in the query) slips through. The URL
/// is kept as written when a textual redaction reads back as the same URL with `***` for the
/// password; otherwise it is the parser's serialisation (which adds slashes and lower-cases
/// the host). A URL that does not parse is redacted by text, erring towards hiding too much.
pub fn redact_password(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return redact_unparsed(url);
    };
    if parsed.password().is_none() && parsed.username().is_empty() {
        return url.to_string();
    }
    let mut redacted = parsed;
    let hidden = if redacted.password().is_some() {
        redacted.set_password(Some(REDACTED))
    } else {
        redacted.set_username(REDACTED)
    };
    if hidden.is_err() {
        // Only URLs without a host refuse credentials, and those have none to hide.
        return url.to_string();
    }
    let textual = redact_as_written(url);
    if url::Url::parse(&textual).is_ok_and(|t| t == redacted) {
        textual
    } else {
        redacted.to_string()
    }
}

/// `url` (as shown: [`redact_password`]'s) without its `user:password@`: a URL a message
/// suggests to run, which a copy would otherwise send `***` as the password of.
pub fn without_credentials(url: &str) -> String {
    let Some(authority_start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_len].rfind('@') {
        Some(at) => format!("{}{}", &url[..authority_start], &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// What a password is shown as.
const REDACTED: &str = "***";

/// `url` with the password between the authority's `:` and `@` replaced (the user, when
/// there is no `:`), every other byte as written; checked by [`redact_password`] against the
/// parser's reading before it is used.
fn redact_as_written(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_len].rfind('@') else {
        return url.to_string();
    };
    let password_start = authority_start + rest[..at].find(':').map_or(0, |colon| colon + 1);
    format!(
        "{}{REDACTED}{}",
        &url[..password_start],
        &url[authority_start + at..]
    )
}

/// The redaction of a URL the parser refuses (`//u:p@h/`, a bad port): it is echoed in the
/// refusal, so whatever stands between the last `/` and an `@` before any `?` or `#` is taken
/// for credentials; the password after its `:` is hidden (the whole of it without a `:`).
fn redact_unparsed(url: &str) -> String {
    let before_query = &url[..url.find(['?', '#']).unwrap_or(url.len())];
    let Some(at) = before_query.rfind('@') else {
        return url.to_string();
    };
    let userinfo_start = before_query[..at].rfind('/').map_or(0, |i| i + 1);
    if userinfo_start == at {
        return url.to_string();
    }
    let password_start = userinfo_start
        + before_query[userinfo_start..at]
            .find(':')
            .map_or(0, |colon| colon + 1);
    format!("{}{REDACTED}{}", &url[..password_start], &url[at..])
}
