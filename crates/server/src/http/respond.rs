//! Responses out: the Date header, heads, error answers, and [`respond`], the router that
//! writes a parsed request's answer.

use std::path::PathBuf;
use std::time::Duration;

use super::{Connection, Request, Route, Status};
use crate::static_files;

/// The fixed 29-byte value of the Date header, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub type HttpDate = [u8; 29];

/// Formats the current time for the Date header.
pub fn http_date(now: std::time::SystemTime) -> HttpDate {
    let text = httpdate::fmt_http_date(now);
    let mut out = [b' '; 29];
    let n = text.len().min(29);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

/// Appends one response: status line, Server, Date, Content-Type, Content-Length, the
/// `Connection` header `connection` calls for, and the body unless `head_only`.
pub fn write_response(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &str,
    body: &[u8],
    date: &HttpDate,
    head_only: bool,
    connection: Connection,
) {
    write_head(out, status, content_type, body.len(), date, connection);
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// Appends a response head for a body of `len` bytes (the caller appends the body).
pub fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &str,
    len: usize,
    date: &HttpDate,
    connection: Connection,
) {
    out.extend_from_slice(status.line());
    out.extend_from_slice(b"Server: tailscope\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    out.extend_from_slice(connection.header());
    out.extend_from_slice(b"\r\n\r\n");
}

/// Appends an error response with a one-line text body; it always closes the connection.
pub fn write_error(out: &mut Vec<u8>, status: Status, date: &HttpDate) {
    let body: &[u8] = match status {
        Status::BadRequest => b"bad request\n",
        Status::NotFound => b"not found\n",
        Status::MethodNotAllowed => b"method not allowed\n",
        Status::PayloadTooLarge => b"request body too large\n",
        Status::HeaderFieldsTooLarge => b"request head too large\n",
        Status::NotImplemented => b"not implemented\n",
        Status::Ok => b"",
    };
    write_response(
        out,
        status,
        "text/plain",
        body,
        date,
        false,
        Connection::Close,
    );
}

/// What answers depend on besides the request: the `--static` root and the Date header.
#[derive(Debug, Clone)]
pub struct Site {
    static_root: Option<PathBuf>,
    date: HttpDate,
    /// The whole answer to a keep-alive `GET /plaintext`, rendered again only when the date
    /// changes: the hot path is then one copy.
    plaintext: Vec<u8>,
}

impl Site {
    /// A site serving `/static/` from `static_root` (canonical), if any, dated `date`.
    pub fn new(static_root: Option<PathBuf>, date: HttpDate) -> Site {
        let mut site = Site {
            static_root,
            date,
            plaintext: Vec::with_capacity(160),
        };
        site.set_date(date);
        site
    }

    /// Changes the Date header of the answers from now on (once a second).
    pub fn set_date(&mut self, date: HttpDate) {
        self.date = date;
        self.plaintext.clear();
        write_response(
            &mut self.plaintext,
            Status::Ok,
            "text/plain",
            PLAINTEXT,
            &date,
            false,
            Connection::Persistent,
        );
    }

    /// The Date header's value.
    pub fn date(&self) -> &HttpDate {
        &self.date
    }
}

/// What is left to do once [`respond`] has seen a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The answer is written; close the connection after sending it if `close`.
    Written {
        /// The connection closes after this answer.
        close: bool,
    },
    /// Nothing is written yet: the answer is due later (`/delay/MS`).
    Delayed(Delayed),
}

/// An answer due after a delay; write it with [`write_delayed`] when the time has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delayed {
    /// How long to wait.
    pub after: Duration,
    /// HEAD: answer without a body.
    pub head_only: bool,
    /// What happens to the connection afterwards.
    pub connection: Connection,
}

/// The body of `/plaintext`, `/` and `/delay/MS`.
const PLAINTEXT: &[u8] = b"Hello, World!";

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

/// Routes `request` and appends its answer to `out`, or says when it is due.
///
/// Reads a `/static/` file (a brief blocking read: the reference server serves small files
/// from the page cache, not a file system under load); otherwise a function of its inputs.
///
/// The keep-alive `GET /plaintext` answer is inlined into the caller's loop (one copy); the
/// rest is a call.
#[inline]
pub fn respond(request: &Request<'_>, site: &Site, out: &mut Vec<u8>) -> Reply {
    if request.route == Route::Plaintext
        && !request.head_only
        && request.connection == Connection::Persistent
    {
        out.extend_from_slice(&site.plaintext);
        return Reply::Written { close: false };
    }
    respond_other(request, site, out)
}

#[inline(never)]
fn respond_other(request: &Request<'_>, site: &Site, out: &mut Vec<u8>) -> Reply {
    let connection = request.connection;
    let written = Reply::Written {
        close: connection == Connection::Close,
    };
    let head_only = request.head_only;
    match request.route {
        Route::Plaintext => write_response(
            out,
            Status::Ok,
            "text/plain",
            PLAINTEXT,
            &site.date,
            head_only,
            connection,
        ),
        Route::Json => {
            // Serialized per request (TechEmpower's rule), into the stack: no allocation.
            let mut buf = [0u8; 64];
            let mut rest = &mut buf[..];
            serde_json::to_writer(
                &mut rest,
                &Message {
                    message: "Hello, World!",
                },
            )
            .expect("a struct of one string fits in 64 bytes");
            let len = 64 - rest.len();
            write_response(
                out,
                Status::Ok,
                "application/json",
                &buf[..len],
                &site.date,
                head_only,
                connection,
            );
        }
        Route::Bytes(n) => {
            write_head(
                out,
                Status::Ok,
                "application/octet-stream",
                n,
                &site.date,
                connection,
            );
            if !head_only {
                out.resize(out.len() + n, b'x');
            }
        }
        Route::Delay(ms) => {
            return Reply::Delayed(Delayed {
                after: Duration::from_millis(ms),
                head_only,
                connection,
            })
        }
        Route::Static(path) => {
            let file = site
                .static_root
                .as_deref()
                .ok_or(Status::NotFound)
                .and_then(|root| static_files::resolve(root, path))
                .and_then(|file| {
                    let body = std::fs::read(&file).map_err(|_| Status::NotFound)?;
                    Ok((file, body))
                });
            match file {
                Ok((file, body)) => write_response(
                    out,
                    Status::Ok,
                    static_files::content_type(&file),
                    &body,
                    &site.date,
                    head_only,
                    connection,
                ),
                Err(status) => {
                    write_error(out, status, &site.date);
                    return Reply::Written { close: true };
                }
            }
        }
        Route::NotFound => write_response(
            out,
            Status::NotFound,
            "text/plain",
            b"not found\n",
            &site.date,
            head_only,
            connection,
        ),
        Route::MethodNotAllowed => write_response(
            out,
            Status::MethodNotAllowed,
            "text/plain",
            b"method not allowed\n",
            &site.date,
            false,
            connection,
        ),
    }
    written
}

/// Appends the answer to a `/delay/MS` request whose time has come.
pub fn write_delayed(delayed: &Delayed, site: &Site, out: &mut Vec<u8>) {
    write_response(
        out,
        Status::Ok,
        "text/plain",
        PLAINTEXT,
        &site.date,
        delayed.head_only,
        delayed.connection,
    );
}
