//! Requests in, responses out: functions over bytes, no sockets, so they are unit-tested and
//! fuzzed on their own. [`parse`] finds the request at the front of the input (a worker's
//! [`Parser`] remembers the last one, so a repeated request costs one comparison), [`respond`]
//! routes it and writes its answer; the worker only moves bytes and arms timers.
//!
//! This is the hot path. Plain `GET`/`HEAD` heads are read by a hand-written scanner that
//! looks only at what routing and framing need, everything else by `httparse` (the same
//! verdicts either way). The keep-alive `/plaintext` answer is rendered once per second of
//! the Date header and copied; other answers are written piece by piece with `itoa` lengths.

use std::mem::MaybeUninit;

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

/// Longest request [`Parser`] remembers; a longer one is parsed every time.
const MAX_REMEMBERED: usize = 512;

/// [`parse`] with a memory of the last request the hand-written path read.
///
/// A load generator sends the same bytes over and over. The verdict on a complete request
/// depends on its own bytes and nothing after them (the scanner stops at the end of the head,
/// and a body is counted, not read), so input that starts with exactly the bytes of the last
/// request is that request again: one `memcmp` instead of a scan of every header byte, which
/// was 80 % of the server's user-space instructions per request at pipeline depth 16.
/// Requests whose route borrows the input (`/static/`) are not remembered.
#[derive(Debug, Clone)]
pub struct Parser {
    limits: Limits,
    last: Vec<u8>,
    last_request: Option<Request<'static>>,
}

impl Parser {
    /// A parser that remembers nothing yet.
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            last: Vec::with_capacity(MAX_REMEMBERED),
            last_request: None,
        }
    }

    /// The limits it parses with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What [`parse`] says about `buf`, from memory when `buf` starts with the last request.
    ///
    /// Inlined into the caller's loop: returned through memory, the request was read back
    /// right after it was written, and that stall cost more than the comparison (perf).
    #[inline]
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Parsed<'a> {
        if let Some(request) = self.last_request {
            if buf.starts_with(&self.last) {
                return Parsed::Request(request);
            }
        }
        self.parse_anew(buf)
    }

    #[inline(never)]
    fn parse_anew<'a>(&mut self, buf: &'a [u8]) -> Parsed<'a> {
        match parse_simple(buf, &self.limits) {
            Some(parsed) => {
                if let Parsed::Request(request) = parsed {
                    self.remember(&buf[..request.len], request);
                }
                parsed
            }
            None => parse_general(buf, &self.limits),
        }
    }

    fn remember(&mut self, bytes: &[u8], request: Request<'_>) {
        let route = match request.route {
            Route::Plaintext => Route::Plaintext,
            Route::Json => Route::Json,
            Route::Bytes(n) => Route::Bytes(n),
            Route::Delay(ms) => Route::Delay(ms),
            Route::NotFound => Route::NotFound,
            Route::MethodNotAllowed => Route::MethodNotAllowed,
            Route::Static(_) => return,
        };
        if bytes.len() > MAX_REMEMBERED {
            return;
        }
        self.last.clear();
        self.last.extend_from_slice(bytes);
        self.last_request = Some(Request { route, ..request });
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

mod respond;

pub use respond::{
    http_date, respond, write_delayed, write_error, write_head, write_response, Delayed, HttpDate,
    Reply, Site,
};

#[cfg(test)]
mod tests;
