//! HTTP/1.x response framing: where one response ends and the next begins.
//!
//! The head is parsed by `httparse`; the body framing (Content-Length, chunked, read until
//! close) is a small hand-written state machine because it runs once per response on the hot
//! path and must never copy a body: bodies are counted, not stored. The parser is a pure
//! function of the bytes it is fed, so it is unit-tested and fuzzed without sockets.

use std::mem::MaybeUninit;

use crate::error::ErrorKind;
use crate::failures::HeadTag;

/// The largest response head accepted; a larger one is counted as `header_too_large`.
pub const MAX_HEAD: usize = 64 * 1024;
/// Response heads with more header fields than this are counted as `bad_response`.
const MAX_HEADERS: usize = 128;
/// A chunk-size line or trailer line longer than this is counted as `bad_response`.
const MAX_LINE: usize = 8 * 1024;
/// Heads up to this long are remembered for [`HeadCache`].
const CACHED_HEAD: usize = 1024;

/// A response that has been read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    /// The status code of the final (non-1xx) head.
    pub status: u16,
    /// The server will close the connection after this response (`Connection: close`, an
    /// HTTP/1.0 response without keep-alive, or a body delimited by the close itself).
    pub close: bool,
    /// Bytes of this response, head and body.
    pub bytes: u64,
}

/// What one call to [`ResponseParser::parse`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input that belong to the current response and can be dropped.
    pub consumed: usize,
    /// Set when the current response ended within the consumed bytes.
    pub completed: Option<Completed>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Fixed { remaining: u64 },
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkDataEnd,
    Trailers,
    UntilClose,
}

/// The last head parsed on a connection and what it said. A server answers a benchmark's
/// identical requests with byte-identical heads (until its Date header turns over, once a
/// second), and the same bytes parse to the same result: comparing them costs a `memcmp`
/// where httparse and the header scan cost ~15 % of the generator's CPU at pipeline depth 16
/// (perf, io_uring engine vs the reference server). A hand-written fast path on the hot path,
/// exact by construction.
#[derive(Debug, Clone, Default)]
struct HeadCache {
    /// The head's bytes, its blank line included; empty when nothing is remembered.
    bytes: Vec<u8>,
    status: u16,
    close: bool,
    state: Option<State>,
    tag: HeadTag,
}

/// Incremental parser of a stream of HTTP/1.x responses on one connection.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    head_request: bool,
    status: u16,
    close: bool,
    bytes: u64,
    last_head: HeadCache,
    /// The last head's `Server` and `Retry-After` (see [`ResponseParser::tag`]).
    tag: HeadTag,
}

impl ResponseParser {
    /// A parser for responses to requests sent with `method` (a response to HEAD has no body).
    pub fn new(method: &str) -> Self {
        ResponseParser {
            state: State::Head,
            head_request: method.eq_ignore_ascii_case("HEAD"),
            status: 0,
            close: false,
            bytes: 0,
            last_head: HeadCache::default(),
            tag: HeadTag::default(),
        }
    }

    /// What the last head parsed said of itself (`Server`, `Retry-After`): the response
    /// just completed's, read by the error rules.
    pub fn tag(&self) -> &HeadTag {
        &self.tag
    }

    /// True once any byte of the current response has been consumed.
    pub fn in_progress(&self) -> bool {
        self.state != State::Head || self.bytes > 0
    }

    /// Resets to the start of a response (after a reconnect).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.status = 0;
        self.close = false;
        self.bytes = 0;
    }

    /// Consumes bytes of the current response from the front of `buf`. Stops at the end of
    /// the response (so the caller can record it and call again for the next one) or when
    /// more bytes are needed; unconsumed bytes must be presented again, with more after them.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Progress, ErrorKind> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Head => {
                    let Some(n) = self.parse_head(rest)? else {
                        return Ok(self.progress(pos, None));
                    };
                    pos += n;
                    if self.state == State::Head {
                        if (100..200).contains(&self.status) && self.status != 101 {
                            // An interim head (100 Continue): the final one follows.
                            self.status = 0;
                            continue;
                        }
                        if self.status == 101 {
                            // Switching protocols: nothing more of HTTP/1 on this connection.
                            self.close = true;
                        }
                        return Ok(self.finish(pos));
                    }
                }
                State::Fixed { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    if take == remaining {
                        return Ok(self.finish(pos));
                    }
                    self.state = State::Fixed {
                        remaining: remaining - take,
                    };
                    return Ok(self.progress(pos, None));
                }
                State::UntilClose => {
                    return Ok(self.progress(buf.len(), None));
                }
                State::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        pos += n;
                        self.state = if size == 0 {
                            State::Trailers
                        } else {
                            State::ChunkData { remaining: size }
                        };
                    }
                    Ok(httparse::Status::Partial) => {
                        if rest.len() > MAX_LINE {
                            return Err(ErrorKind::BadResponse);
                        }
                        return Ok(self.progress(pos, None));
                    }
                    Err(_) => return Err(ErrorKind::BadResponse),
                },
                State::ChunkData { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    if take < remaining {
                        self.state = State::ChunkData {
                            remaining: remaining - take,
                        };
                        return Ok(self.progress(pos, None));
                    }
                    self.state = State::ChunkDataEnd;
                }
                State::ChunkDataEnd => {
                    if rest.len() < 2 {
                        return Ok(self.progress(pos, None));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorKind::BadResponse);
                    }
                    pos += 2;
                    self.state = State::ChunkSize;
                }
                State::Trailers => match rest.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        pos += 2;
                        return Ok(self.finish(pos));
                    }
                    Some(line) => pos += line + 2,
                    None => {
                        if rest.len() > MAX_LINE {
                            return Err(ErrorKind::BadResponse);
                        }
                        return Ok(self.progress(pos, None));
                    }
                },
            }
        }
    }

    /// The connection reached end of file. Returns the response that the close completed
    /// (a body delimited by the close), `Ok(None)` when no response was under way, or the
    /// kind of failure when a response was cut short.
    pub fn on_eof(&mut self, pending: usize) -> Result<Option<Completed>, ErrorKind> {
        if self.state == State::UntilClose {
            self.close = true;
            let done = self.finish(0).completed;
            return Ok(done);
        }
        if self.in_progress() || pending > 0 {
            return Err(ErrorKind::TruncatedBody);
        }
        Err(ErrorKind::EofBeforeResponse)
    }

    fn progress(&mut self, consumed: usize, completed: Option<Completed>) -> Progress {
        self.bytes += consumed as u64;
        Progress {
            consumed,
            completed,
        }
    }

    fn finish(&mut self, consumed: usize) -> Progress {
        let done = Completed {
            status: self.status,
            close: self.close,
            bytes: self.bytes + consumed as u64,
        };
        self.reset();
        Progress {
            consumed,
            completed: Some(done),
        }
    }

    /// Parses a head at the front of `buf`: `Ok(None)` when incomplete, else its length.
    /// Leaves `state` at the body's framing, or at `Head` when the response has no body.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, ErrorKind> {
        let cached = &self.last_head;
        if let Some(state) = cached.state.filter(|_| buf.starts_with(&cached.bytes)) {
            self.status = cached.status;
            self.close = cached.close;
            self.tag = cached.tag;
            self.state = state;
            return Ok(Some(cached.bytes.len()));
        }
        let len = self.parse_head_fully(buf)?;
        if let Some(len) = len.filter(|&l| l <= CACHED_HEAD) {
            let cache = &mut self.last_head;
            cache.bytes.clear();
            cache.bytes.extend_from_slice(&buf[..len]);
            (cache.status, cache.close, cache.state) = (self.status, self.close, Some(self.state));
            cache.tag = self.tag;
        }
        Ok(len)
    }

    /// [`Self::parse_head`] without the cache.
    fn parse_head_fully(&mut self, buf: &[u8]) -> Result<Option<usize>, ErrorKind> {
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            buf,
            &mut headers,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => {
                if buf.len() >= MAX_HEAD {
                    return Err(ErrorKind::HeaderTooLarge);
                }
                return Ok(None);
            }
            // More header fields than we keep room for is a head too large, not a broken one.
            Err(httparse::Error::TooManyHeaders) => return Err(ErrorKind::HeaderTooLarge),
            Err(_) => return Err(ErrorKind::BadResponse),
        };
        if len > MAX_HEAD {
            return Err(ErrorKind::HeaderTooLarge);
        }
        let status = response.code.unwrap_or(0);
        let http10 = response.version == Some(0);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        let mut other_coding = false;
        let mut close = http10;
        let mut tag = HeadTag::default();
        for h in response.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = parse_content_length(h.value).ok_or(ErrorKind::BadResponse)?;
                if content_length.is_some_and(|prev| prev != v) {
                    return Err(ErrorKind::BadResponse);
                }
                content_length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // The last coding decides: `gzip, chunked` is chunked, `chunked, gzip` is not.
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                chunked = trim(last).eq_ignore_ascii_case(b"chunked");
                other_coding = !chunked;
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = trim(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        close = false;
                    }
                }
            } else if h.name.eq_ignore_ascii_case("server") {
                tag.set_server(trim(h.value));
            } else if h.name.eq_ignore_ascii_case("retry-after") {
                tag.set_retry_after(trim(h.value));
            }
        }
        self.tag = tag;
        self.status = status;
        self.close = close;
        let no_body =
            self.head_request || (100..200).contains(&status) || matches!(status, 204 | 304);
        self.state = if no_body {
            State::Head
        } else if chunked {
            State::ChunkSize
        } else if other_coding {
            self.close = true;
            State::UntilClose
        } else if let Some(n) = content_length {
            if n == 0 {
                State::Head
            } else {
                State::Fixed { remaining: n }
            }
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok(Some(len))
    }
}

fn parse_content_length(value: &[u8]) -> Option<u64> {
    let v = trim(value);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes, as a socket would, and returns the
    /// completed responses and how many bytes were left unconsumed at the end.
    fn feed(
        parser: &mut ResponseParser,
        input: &[u8],
        step: usize,
    ) -> Result<(Vec<Completed>, usize), ErrorKind> {
        let mut done = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for piece in input.chunks(step) {
            pending.extend_from_slice(piece);
            loop {
                let p = parser.parse(&pending)?;
                pending.drain(..p.consumed);
                match p.completed {
                    Some(c) => done.push(c),
                    None => break,
                }
            }
        }
        Ok((done, pending.len()))
    }

    const PLAIN: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";

    #[test]
    fn content_length_response_completes_at_any_split() {
        for step in [1, 2, 7, 100] {
            let mut p = ResponseParser::new("GET");
            let (done, left) = feed(&mut p, PLAIN, step).unwrap();
            assert_eq!(done.len(), 1, "step {step}");
            assert_eq!(done[0].status, 200);
            assert!(!done[0].close);
            assert_eq!(done[0].bytes, PLAIN.len() as u64);
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn pipelined_responses_are_split_in_order() {
        let mut input = Vec::new();
        for code in [200, 404, 500] {
            input.extend_from_slice(
                format!("HTTP/1.1 {code} X\r\nContent-Length: 2\r\n\r\nok").as_bytes(),
            );
        }
        let mut p = ResponseParser::new("GET");
        let (done, _) = feed(&mut p, &input, input.len()).unwrap();
        let codes: Vec<u16> = done.iter().map(|c| c.status).collect();
        assert_eq!(codes, vec![200, 404, 500]);
    }

    #[test]
    fn a_remembered_head_gives_what_parsing_it_gave_and_a_new_one_is_parsed() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let close = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye";
        // The same head as `ok` with its body cut: a prefix of a remembered head is not one.
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n";
        let mut input = Vec::new();
        for part in [&ok[..], ok, ok, close, ok, short] {
            input.extend_from_slice(part);
        }
        for step in [1, 7, input.len()] {
            let mut p = ResponseParser::new("GET");
            let (done, left) = feed(&mut p, &input, step).unwrap();
            let seen: Vec<(u16, bool, u64)> =
                done.iter().map(|c| (c.status, c.close, c.bytes)).collect();
            let (o, c) = (ok.len() as u64, close.len() as u64);
            assert_eq!(
                seen,
                vec![
                    (200, false, o),
                    (200, false, o),
                    (200, false, o),
                    (200, true, c),
                    (200, false, o)
                ],
                "step {step}"
            );
            assert_eq!(left, short.len(), "step {step}");
        }
    }

    #[test]
    fn chunked_body_with_extension_and_trailer() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nHello\r\n8\r\n, World!\r\n0\r\nX-Trailer: yes\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        for step in [1, 3, 1000] {
            let mut p = ResponseParser::new("GET");
            let (done, left) = feed(&mut p, input, step).unwrap();
            assert_eq!(done.len(), 2, "step {step}");
            assert_eq!(done[1].status, 204);
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn bad_chunk_terminator_is_bad_response() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY";
        let mut p = ResponseParser::new("GET");
        assert_eq!(
            feed(&mut p, input, 100).unwrap_err(),
            ErrorKind::BadResponse
        );
    }

    #[test]
    fn body_until_close_completes_at_eof() {
        let input = b"HTTP/1.0 200 OK\r\n\r\nsome body bytes";
        let mut p = ResponseParser::new("GET");
        let (done, _) = feed(&mut p, input, 4).unwrap();
        assert!(done.is_empty());
        let c = p.on_eof(0).unwrap().unwrap();
        assert_eq!(c.status, 200);
        assert!(c.close);
        assert_eq!(c.bytes, input.len() as u64);
    }

    #[test]
    fn http10_keep_alive_and_connection_close() {
        let mut p = ResponseParser::new("GET");
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            100,
        )
        .unwrap();
        assert!(!done[0].close);
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close\r\nContent-Length: 1\r\n\r\nx",
            100,
        )
        .unwrap();
        assert!(done[0].close);
    }

    #[test]
    fn eof_classification() {
        let mut p = ResponseParser::new("GET");
        assert_eq!(p.on_eof(0), Err(ErrorKind::EofBeforeResponse));
        assert_eq!(p.on_eof(5), Err(ErrorKind::TruncatedBody));
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            100,
        )
        .unwrap();
        assert!(done.is_empty());
        assert_eq!(p.on_eof(0), Err(ErrorKind::TruncatedBody));
    }

    #[test]
    fn head_and_no_body_statuses_ignore_content_length() {
        let mut p = ResponseParser::new("HEAD");
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n",
            100,
        )
        .unwrap();
        assert_eq!(done.len(), 1);
        let mut p = ResponseParser::new("GET");
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 13\r\n\r\n",
            100,
        )
        .unwrap();
        assert_eq!(done.len(), 1);
    }

    #[test]
    fn interim_100_continue_is_skipped() {
        let mut p = ResponseParser::new("POST");
        let (done, _) = feed(
            &mut p,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            5,
        )
        .unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].status, 201);
    }

    #[test]
    fn malformed_heads_are_bad_response() {
        for input in [
            &b"HTTQ/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
        ] {
            let mut p = ResponseParser::new("GET");
            assert_eq!(
                feed(&mut p, input, 100).unwrap_err(),
                ErrorKind::BadResponse,
                "{input:?}"
            );
        }
    }

    #[test]
    fn oversized_head_is_header_too_large() {
        // A few huge fields: the byte limit.
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        while input.len() < MAX_HEAD + 10 {
            input.extend_from_slice(format!("X-Filler: {}\r\n", "a".repeat(8000)).as_bytes());
        }
        let mut p = ResponseParser::new("GET");
        assert_eq!(
            feed(&mut p, &input, 4096).unwrap_err(),
            ErrorKind::HeaderTooLarge
        );
        // Many small fields: the field-count limit.
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..MAX_HEADERS + 1 {
            input.extend_from_slice(format!("X-{i}: a\r\n").as_bytes());
        }
        input.extend_from_slice(b"\r\n");
        let mut p = ResponseParser::new("GET");
        assert_eq!(
            feed(&mut p, &input, 100_000).unwrap_err(),
            ErrorKind::HeaderTooLarge
        );
    }
}
