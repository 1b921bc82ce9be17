//! Requests in, responses out: functions over bytes, no sockets, so they are unit-tested and
//! fuzzed on their own. [`parse`] finds the request at the front of the input, [`respond`]
//! routes it and writes its answer; the worker only moves bytes and arms timers.
//!
//! This is the hot path. Plain `GET`/`HEAD` heads are read by a hand-written scanner that
//! looks only at what routing and framing need, everything else by `httparse` (the same
//! verdicts either way). The keep-alive `/plaintext` answer is rendered once per second of
//! the Date header and copied; other answers are written piece by piece with `itoa` lengths.

use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::time::Duration;

use crate::static_files;

/// Limits on what a client may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request head; a larger one is answered 431.
    pub max_head: usize,
    /// Largest request body; a larger one is answered 413.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 8 * 1024,
            max_body: 1024 * 1024,
        }
    }
}

/// Most header fields a request may have; more is answered 431.
const MAX_HEADERS: usize = 64;
/// Largest `/bytes/N`.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;
/// Longest `/delay/MS`.
pub const MAX_DELAY_MS: u64 = 60_000;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/plaintext` and `/`.
    Plaintext,
    /// `/json`.
    Json,
    /// `/bytes/N`: an N-byte body.
    Bytes(usize),
    /// `/delay/MS`: plaintext after MS milliseconds.
    Delay(u64),
    /// `/static/PATH`, still percent-encoded.
    Static(&'a str),
    /// Anything else.
    NotFound,
    /// A method other than GET and HEAD.
    MethodNotAllowed,
}

/// A complete request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// Bytes of head and body.
    pub len: usize,
    /// What it asks for.
    pub route: Route<'a>,
    /// HEAD: answer without a body.
    pub head_only: bool,
    /// Whether the connection stays open after the answer, and what the answer says about it.
    pub connection: Connection,
}

impl Request<'_> {
    /// The connection stays open after this request is answered.
    pub fn keep_alive(&self) -> bool {
        self.connection != Connection::Close
    }
}

/// What happens to the connection after a response, and the `Connection` header that says so.
///
/// HTTP/1.1 connections persist unless a side says `close`; HTTP/1.0 connections close unless
/// the client asks for `keep-alive`, and then the response must echo `Connection: keep-alive`
/// or the client (ApacheBench `ab -k`, for one) waits for a close that never comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// HTTP/1.1's default: kept open, no header.
    Persistent,
    /// HTTP/1.0 with `Connection: keep-alive`: kept open, the header echoed.
    KeepAlive,
    /// Closed after the response, which says `Connection: close`.
    Close,
}

impl Connection {
    /// The rule above, from the request's version and its `Connection` tokens.
    pub fn negotiate(http10: bool, asked_close: bool, asked_keep_alive: bool) -> Connection {
        match (http10, asked_close, asked_keep_alive) {
            (_, true, _) => Connection::Close,
            (true, false, true) => Connection::KeepAlive,
            (true, false, false) => Connection::Close,
            (false, false, _) => Connection::Persistent,
        }
    }

    /// The header line (with its leading CRLF) a response carries for this, if any.
    fn header(self) -> &'static [u8] {
        match self {
            Connection::Persistent => b"",
            Connection::KeepAlive => b"\r\nConnection: keep-alive",
            Connection::Close => b"\r\nConnection: close",
        }
    }
}

/// What the front of a connection's input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// Not a whole request yet.
    Partial,
    /// A whole request.
    Request(Request<'a>),
    /// A request that is answered with this status and a close.
    Reject(Status),
}

/// The statuses the server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 200
    Ok,
    /// 400
    BadRequest,
    /// 404
    NotFound,
    /// 405
    MethodNotAllowed,
    /// 413
    PayloadTooLarge,
    /// 431
    HeaderFieldsTooLarge,
    /// 501
    NotImplemented,
}

impl Status {
    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PayloadTooLarge => 413,
            Status::HeaderFieldsTooLarge => 431,
            Status::NotImplemented => 501,
        }
    }

    fn line(self) -> &'static [u8] {
        match self {
            Status::Ok => b"HTTP/1.1 200 OK\r\n",
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\n",
            Status::PayloadTooLarge => b"HTTP/1.1 413 Payload Too Large\r\n",
            Status::HeaderFieldsTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            Status::NotImplemented => b"HTTP/1.1 501 Not Implemented\r\n",
        }
    }
}

/// Parses the request at the front of `buf`.
///
/// Plain `GET`/`HEAD` heads of the bytes every generator sends take a hand-written path
/// ([`parse_simple`]); anything it does not recognise goes to `httparse`, which gives every
/// verdict (400, 431, partial) as it always did. The hand-written path accepts a strict subset
/// of what `httparse` accepts and reads it the same way, so the answer to any input is the
/// one `httparse` alone would give (a randomized unit test holds the two paths to that).
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    match parse_simple(buf, limits) {
        Some(parsed) => parsed,
        None => parse_general(buf, limits),
    }
}

/// A byte class as a table, built at compile time: one load per byte on the hot path.
macro_rules! byte_table {
    (|$b:ident| $class:expr) => {{
        let mut table = [false; 256];
        let mut i = 0;
        while i < 256 {
            let $b = i as u8;
            table[i] = $class;
            i += 1;
        }
        table
    }};
}

/// Request-target bytes: `httparse`'s set less 0x80..=0xFF (left to `httparse`).
static TARGET_BYTE: [bool; 256] = byte_table!(|b| b.is_ascii_graphic());
/// Header-name bytes (RFC 9110 tchar), `httparse`'s set exactly.
static NAME_BYTE: [bool; 256] = byte_table!(|b| {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
});
/// Header-value bytes: `httparse`'s set less 0x80..=0xFF (left to `httparse`).
static VALUE_BYTE: [bool; 256] = byte_table!(|b| b == b'\t' || b == b' ' || b.is_ascii_graphic());

/// The hand-written path: `GET` or `HEAD`, an ASCII target, `HTTP/1.1` or `HTTP/1.0`, CRLF
/// line ends, `name:value` fields of plain ASCII, a complete head within the limits. `None`
/// for anything else (including a head not yet complete), which `httparse` then judges.
///
/// Hand-written because `httparse` was about 60 % of the server's instructions per request
/// at pipeline depth 16 (general header storage, UTF-8 checks of every name, SIMD set-up
/// for 20-byte values); this path looks only at what routing and framing need.
fn parse_simple<'a>(buf: &'a [u8], limits: &Limits) -> Option<Parsed<'a>> {
    let (head_only, mut i) = if buf.starts_with(b"GET ") {
        (false, 4)
    } else if buf.starts_with(b"HEAD ") {
        (true, 5)
    } else {
        return None;
    };
    let target_start = i;
    i = skip_printable(buf, i, b'!');
    i = skip_class(buf, i, &TARGET_BYTE);
    if i == target_start || buf.get(i) != Some(&b' ') {
        return None;
    }
    let target = &buf[target_start..i];
    let http10 = match buf.get(i + 1..i + 11)? {
        b"HTTP/1.1\r\n" => false,
        b"HTTP/1.0\r\n" => true,
        _ => return None,
    };
    i += 11;
    let mut fields = Fields::default();
    let mut verdict = Ok(());
    let mut count = 0;
    loop {
        if buf.get(i..i + 2)? == b"\r\n" {
            i += 2;
            break;
        }
        let name_start = i;
        i = skip_class(buf, i, &NAME_BYTE);
        if i == name_start || *buf.get(i)? != b':' {
            return None;
        }
        let name = &buf[name_start..i];
        i += 1;
        let value_start = i;
        i = skip_printable(buf, i, b' ');
        i = skip_class(buf, i, &VALUE_BYTE);
        if buf.get(i..i + 2)? != b"\r\n" {
            return None;
        }
        let value = &buf[value_start..i];
        i += 2;
        count += 1;
        if count > MAX_HEADERS || i > limits.max_head {
            return None;
        }
        if verdict.is_ok() {
            verdict = fields.read(name, value);
        }
    }
    if i > limits.max_head {
        return None;
    }
    if let Err(status) = verdict {
        return Some(Parsed::Reject(status));
    }
    let route = route(target);
    Some(fields.finish(buf.len(), i, http10, head_only, route, limits))
}

/// The index of the first byte at or after `i` outside `class` (`buf.len()` if none).
fn skip_class(buf: &[u8], i: usize, class: &[bool; 256]) -> usize {
    buf[i..]
        .iter()
        .position(|&b| !class[usize::from(b)])
        .map_or(buf.len(), |n| i + n)
}

/// Skips the run of bytes in `low..=0x7e` that starts at `i`, eight at a time: returns the
/// index of the first byte outside it, or of a byte among the last 7 of `buf` (the caller's
/// byte loop does the rest). Word-at-a-time tests from "Bit Twiddling Hacks" (`hasless`,
/// `hasmore`) set a high bit in the lane of every byte below `low` or above `~`; borrows and
/// carries only run upwards from a lane that is itself set, so the lowest set lane is exact.
fn skip_printable(buf: &[u8], mut i: usize, low: u8) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES * 0x80;
    let below = ONES * u64::from(low);
    // `hasmore(x, 0x7e)` adds 127 - 0x7e = 1 to every lane: 0x7f and up then have a high bit.
    let above = ONES;
    while let Some(chunk) = buf.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let outside = ((x.wrapping_sub(below) & !x) | (x.wrapping_add(above) | x)) & HIGHS;
        if outside != 0 {
            return i + (outside.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// What the header fields say about framing and the connection.
#[derive(Default)]
struct Fields {
    body: usize,
    seen_length: bool,
    asked_close: bool,
    asked_keep_alive: bool,
}

impl Fields {
    /// Takes in one field; the first field that makes the request unanswerable says why.
    fn read(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        // Lengths first: most fields are none of these three.
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let n = parse_decimal(value).ok_or(Status::BadRequest)?;
                if self.seen_length && n != self.body {
                    return Err(Status::BadRequest);
                }
                self.seen_length = true;
                self.body = n;
            }
            // Chunked request bodies are not needed by any endpoint here.
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                return Err(Status::NotImplemented)
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        self.asked_close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        self.asked_keep_alive = true;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The request, once its head (`head_len` bytes of `available`) is complete and valid.
    fn finish<'a>(
        self,
        available: usize,
        head_len: usize,
        http10: bool,
        head_only: bool,
        route: Route<'a>,
        limits: &Limits,
    ) -> Parsed<'a> {
        if self.body > limits.max_body {
            return Parsed::Reject(Status::PayloadTooLarge);
        }
        let len = head_len + self.body;
        if available < len {
            return Parsed::Partial;
        }
        Parsed::Request(Request {
            len,
            route,
            head_only,
            connection: Connection::negotiate(http10, self.asked_close, self.asked_keep_alive),
        })
    }
}

/// Every request the hand-written path does not take: `httparse`.
fn parse_general<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let head_len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > limits.max_head {
                Parsed::Reject(Status::HeaderFieldsTooLarge)
            } else {
                Parsed::Partial
            };
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Reject(Status::HeaderFieldsTooLarge)
        }
        Err(_) => return Parsed::Reject(Status::BadRequest),
    };
    if head_len > limits.max_head {
        return Parsed::Reject(Status::HeaderFieldsTooLarge);
    }
    let http10 = req.version == Some(0);
    let mut fields = Fields::default();
    for h in req.headers.iter() {
        if let Err(status) = fields.read(h.name.as_bytes(), h.value) {
            return Parsed::Reject(status);
        }
    }
    let method = req.method.unwrap_or("");
    let head_only = method == "HEAD";
    let route = if method == "GET" || head_only {
        route(req.path.unwrap_or("/").as_bytes())
    } else {
        Route::MethodNotAllowed
    };
    fields.finish(buf.len(), head_len, http10, head_only, route, limits)
}

fn parse_decimal(v: &[u8]) -> Option<usize> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        v.iter()
            .fold(0usize, |acc, &d| acc * 10 + usize::from(d - b'0')),
    )
}

fn route(target: &[u8]) -> Route<'_> {
    // The benchmark paths first, before looking for a query.
    match target {
        b"/plaintext" => return Route::Plaintext,
        b"/json" => return Route::Json,
        _ => {}
    }
    let path = target
        .iter()
        .position(|&b| b == b'?')
        .map_or(target, |q| &target[..q]);
    match path {
        b"/plaintext" | b"/" => Route::Plaintext,
        b"/json" => Route::Json,
        _ => {
            if let Some(n) = path.strip_prefix(b"/bytes/") {
                match parse_decimal(n) {
                    Some(n) if n <= MAX_BYTES => Route::Bytes(n),
                    _ => Route::NotFound,
                }
            } else if let Some(ms) = path.strip_prefix(b"/delay/") {
                match parse_decimal(ms) {
                    Some(ms) if ms as u64 <= MAX_DELAY_MS => Route::Delay(ms as u64),
                    _ => Route::NotFound,
                }
            } else if let Some(file) = path.strip_prefix(b"/static/") {
                // ASCII on the hand-written path; a `&str` already on httparse's.
                std::str::from_utf8(file).map_or(Route::NotFound, Route::Static)
            } else {
                Route::NotFound
            }
        }
    }
}

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
pub fn respond(request: &Request<'_>, site: &Site, out: &mut Vec<u8>) -> Reply {
    let connection = request.connection;
    let written = Reply::Written {
        close: connection == Connection::Close,
    };
    let head_only = request.head_only;
    match request.route {
        Route::Plaintext if !head_only && connection == Connection::Persistent => {
            out.extend_from_slice(&site.plaintext);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(bytes: &[u8]) -> Parsed<'_> {
        parse(bytes, &Limits::default())
    }

    #[test]
    fn routes() {
        let cases: [(&[u8], Route<'_>); 7] = [
            (b"GET / HTTP/1.1\r\n\r\n", Route::Plaintext),
            (b"GET /plaintext?x=1 HTTP/1.1\r\n\r\n", Route::Plaintext),
            (b"GET /json HTTP/1.1\r\n\r\n", Route::Json),
            (b"GET /bytes/6000 HTTP/1.1\r\n\r\n", Route::Bytes(6000)),
            (b"GET /delay/25 HTTP/1.1\r\n\r\n", Route::Delay(25)),
            (
                b"GET /static/a%20b.txt HTTP/1.1\r\n\r\n",
                Route::Static("a%20b.txt"),
            ),
            (
                b"POST /json HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
                Route::MethodNotAllowed,
            ),
        ];
        for (bytes, want) in cases {
            match req(bytes) {
                Parsed::Request(r) => {
                    assert_eq!(r.route, want, "{:?}", String::from_utf8_lossy(bytes));
                    assert_eq!(r.len, bytes.len());
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            req(b"GET /nope HTTP/1.1\r\n\r\n"),
            Parsed::Request(Request {
                route: Route::NotFound,
                ..
            })
        ));
        assert!(matches!(
            req(b"GET /bytes/99999999999 HTTP/1.1\r\n\r\n"),
            Parsed::Request(Request {
                route: Route::NotFound,
                ..
            })
        ));
    }

    #[test]
    fn partial_pipelined_and_keep_alive() {
        assert_eq!(req(b"GET / HTTP/1.1\r\nHost: x\r\n"), Parsed::Partial);
        assert_eq!(
            req(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Parsed::Partial
        );
        let two = b"GET / HTTP/1.1\r\n\r\nGET /json HTTP/1.1\r\n\r\n";
        let Parsed::Request(first) = req(two) else {
            panic!()
        };
        assert_eq!(first.len, 18);
        assert!(first.keep_alive());
        let Parsed::Request(r) = req(b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n") else {
            panic!()
        };
        assert!(!r.keep_alive() && r.head_only);
    }

    #[test]
    fn http10_is_kept_open_only_when_it_asks_and_then_hears_so() {
        let cases: [(&[u8], Connection); 7] = [
            (b"GET / HTTP/1.0\r\n\r\n", Connection::Close),
            (
                b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                Connection::KeepAlive,
            ),
            // ApacheBench's spelling.
            (
                b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
                Connection::KeepAlive,
            ),
            (
                b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
                Connection::Close,
            ),
            (b"GET / HTTP/1.1\r\n\r\n", Connection::Persistent),
            (
                b"GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
                Connection::Persistent,
            ),
            (
                b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
                Connection::Close,
            ),
        ];
        for (bytes, want) in cases {
            let Parsed::Request(r) = req(bytes) else {
                panic!("{:?}", String::from_utf8_lossy(bytes))
            };
            assert_eq!(r.connection, want, "{:?}", String::from_utf8_lossy(bytes));
            assert_eq!(r.keep_alive(), want != Connection::Close);
        }
        let date = http_date(std::time::UNIX_EPOCH);
        let head = |connection| {
            let mut out = Vec::new();
            write_head(&mut out, Status::Ok, "text/plain", 0, &date, connection);
            String::from_utf8(out).unwrap()
        };
        assert!(head(Connection::KeepAlive).ends_with("\r\nConnection: keep-alive\r\n\r\n"));
        assert!(head(Connection::Close).ends_with("\r\nConnection: close\r\n\r\n"));
        assert!(!head(Connection::Persistent).contains("Connection:"));
    }

    fn answer(bytes: &[u8], site: &Site) -> (Reply, String) {
        let Parsed::Request(r) = req(bytes) else {
            panic!("{:?}", String::from_utf8_lossy(bytes))
        };
        let mut out = Vec::new();
        let reply = respond(&r, site, &mut out);
        (reply, String::from_utf8(out).unwrap())
    }

    #[test]
    fn respond_routes_and_says_what_is_left() {
        let site = Site::new(None, http_date(std::time::UNIX_EPOCH));
        let keep = Reply::Written { close: false };
        let (reply, text) = answer(b"GET /plaintext HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, keep);
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nServer: tailscope\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
             Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
        );
        let mut later = site.clone();
        later.set_date(http_date(
            std::time::UNIX_EPOCH + Duration::from_secs(86400 + 3661),
        ));
        let (_, text) = answer(b"GET /plaintext HTTP/1.1\r\n\r\n", &later);
        assert!(
            text.contains("\r\nDate: Fri, 02 Jan 1970 01:01:01 GMT\r\n"),
            "{text}"
        );
        let (reply, text) = answer(b"GET /json HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, keep);
        assert!(text.contains("application/json\r\nContent-Length: 27\r\n"));
        assert!(text.ends_with("\r\n\r\n{\"message\":\"Hello, World!\"}"));
        let (_, text) = answer(b"HEAD /bytes/5 HTTP/1.1\r\n\r\n", &site);
        assert!(text.ends_with("Content-Length: 5\r\n\r\n"));
        let (_, text) = answer(b"GET /bytes/5 HTTP/1.1\r\n\r\n", &site);
        assert!(text.ends_with("\r\n\r\nxxxxx"));
        let (reply, text) = answer(b"GET /delay/7 HTTP/1.0\r\n\r\n", &site);
        assert_eq!(
            reply,
            Reply::Delayed(Delayed {
                after: Duration::from_millis(7),
                head_only: false,
                connection: Connection::Close,
            })
        );
        assert!(text.is_empty(), "nothing written before the delay");
        let (reply, text) = answer(b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n", &site);
        assert_eq!(reply, Reply::Written { close: true });
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(text.contains("\r\nConnection: close\r\n"));
        let (reply, text) = answer(b"DELETE / HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, keep);
        assert!(text.starts_with("HTTP/1.1 405 "));
        // /static/ without --static: 404 and a close.
        let (reply, text) = answer(b"GET /static/a.txt HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, Reply::Written { close: true });
        assert!(text.starts_with("HTTP/1.1 404 "));
    }

    #[test]
    fn respond_serves_static_files_and_refuses_traversal() {
        let dir = std::env::temp_dir().join(format!("tailscope-respond-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), b"static body").unwrap();
        let site = Site::new(
            Some(dir.canonicalize().unwrap()),
            http_date(std::time::UNIX_EPOCH),
        );
        let (reply, text) = answer(b"GET /static/a.txt HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, Reply::Written { close: false });
        assert!(text.ends_with("\r\n\r\nstatic body"), "{text}");
        let (reply, text) = answer(b"GET /static/../x HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, Reply::Written { close: true });
        assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
        let (reply, _) = answer(b"GET /static/missing HTTP/1.1\r\n\r\n", &site);
        assert_eq!(reply, Reply::Written { close: true });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The hand-written path either declines or says exactly what `httparse` says, on
    /// requests of every shape and on their random corruptions.
    #[test]
    fn the_simple_path_agrees_with_httparse() {
        let limits = Limits {
            max_head: 200,
            max_body: 50,
        };
        let seeds: [&[u8]; 12] = [
            b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
            b"HEAD /json?x=1 HTTP/1.0\r\nConnection: Keep-Alive\r\nUser-Agent: ab\r\n\r\n",
            b"GET /bytes/12 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
            b"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 99\r\n\r\n",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET /static/a%20b.txt HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n",
            b"GET / HTTP/1.1\r\nX:\r\nY: \t v \r\n\r\nGET / HTTP/1.1\r\n\r\n",
            b"GET /delay/5 HTTP/1.1\nHost: x\n\n",
            b"GET http://x/ HTTP/1.1\r\nHost : x\r\n\r\n",
            b"GET / HTTP/1.2\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let interesting = b"\r\n :\t,?/%\x00\x7f\x80\xffaZ09";
        let mut agreed = 0;
        for seed in seeds {
            for round in 0..3000 {
                let mut input = seed.to_vec();
                for _ in 0..round % 4 {
                    let at = next(input.len());
                    match next(4) {
                        0 => input[at] = interesting[next(interesting.len())],
                        1 => input[at] = next(256) as u8,
                        2 => input.insert(at, interesting[next(interesting.len())]),
                        _ => {
                            input.remove(at);
                        }
                    }
                }
                let cut = if round % 5 == 0 {
                    next(input.len() + 1)
                } else {
                    input.len()
                };
                let input = &input[..cut];
                if let Some(simple) = parse_simple(input, &limits) {
                    assert_eq!(
                        simple,
                        parse_general(input, &limits),
                        "{:?}",
                        String::from_utf8_lossy(input)
                    );
                    agreed += 1;
                }
            }
        }
        assert!(agreed > 5000, "the simple path took only {agreed} inputs");
    }

    #[test]
    fn skip_printable_stops_at_the_first_byte_outside() {
        let text = b"abcdefgh ijklmno~pqrstuvwxyz0123";
        assert_eq!(skip_printable(text, 0, b' '), 32);
        assert_eq!(
            skip_printable(text, 0, b'!'),
            8,
            "the space ends the first word"
        );
        for bad in [b'\r', b'\t', 0x1f, 0x7f, 0x80, 0xff, 0] {
            for at in 0..24 {
                let mut t = text.to_vec();
                t[at] = bad;
                t[at + 3] = bad;
                assert_eq!(skip_printable(&t, 0, b' '), at, "{bad:#x} at {at}");
                assert_eq!(skip_printable(&t, at / 2, b' '), at, "{bad:#x} at {at}");
            }
        }
        assert_eq!(
            skip_printable(b"abcdef", 0, b' '),
            0,
            "short tails are the caller's"
        );
    }

    #[test]
    fn rejects() {
        assert_eq!(req(b"GARBAGE\r\n\r\n"), Parsed::Reject(Status::BadRequest));
        assert_eq!(
            req(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Parsed::Reject(Status::BadRequest)
        );
        assert_eq!(
            req(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Parsed::Reject(Status::NotImplemented)
        );
        assert_eq!(
            req(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Parsed::Reject(Status::PayloadTooLarge)
        );
        let mut big = b"GET / HTTP/1.1\r\nX-A: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 9000));
        assert_eq!(req(&big), Parsed::Reject(Status::HeaderFieldsTooLarge));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..100 {
            many.extend_from_slice(format!("X-{i}: a\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(req(&many), Parsed::Reject(Status::HeaderFieldsTooLarge));
    }

    #[test]
    fn responses_are_well_formed() {
        let date = http_date(std::time::UNIX_EPOCH);
        assert_eq!(&date, b"Thu, 01 Jan 1970 00:00:00 GMT");
        let mut out = Vec::new();
        write_response(
            &mut out,
            Status::Ok,
            "text/plain",
            b"Hello, World!",
            &date,
            false,
            Connection::Persistent,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: tailscope\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
        );
        out.clear();
        write_error(&mut out, Status::NotFound, &date);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nnot found\n"));
    }
}
