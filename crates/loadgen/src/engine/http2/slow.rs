//! A slow connection over HTTP/2 (`--slow-conns` with `--http2`): the slowloris client of
//! HTTP/1.1 in frames. The connection sends the client preface and its SETTINGS, acknowledges
//! the server's, and then a header block that never ends, one byte every `--slow-interval`:
//! a HEADERS frame (neither END_HEADERS nor END_STREAM) holding the run's first request
//! (its pseudo-headers and headers, then an `x-slow` header of [`SLOW_VALUE`] bytes), then
//! CONTINUATION frames of one more `x-slow` header each, for ever. Frame headers are sent a
//! byte at a time too. Until the block ends the server can neither answer the stream nor
//! read another frame on the connection: it must hold it, and a server with a header (or
//! frame) timeout closes it, as one closes an HTTP/1.1 head that never ends.
//!
//! Written by hand, not with the `h2` crate: h2 sends a header block whole, in one go.
//! The header fields are HPACK literals without indexing and without Huffman coding (RFC
//! 7541 6.2.2), so the block needs no encoder state.

use super::super::Shared;
use super::template::Template;

/// The client connection preface (RFC 9113 3.4), then an empty SETTINGS frame.
pub(in crate::engine) const PREFACE: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A SETTINGS frame with ACK, sent once the server's SETTINGS came.
pub(in crate::engine) const SETTINGS_ACK: &[u8] = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00";

/// The length of each `x-slow` header's value: small enough for a server's field limit
/// (nginx: 4 KiB by default), so that the block is refused only for its total size.
const SLOW_VALUE: usize = 1000;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const SETTINGS: u8 = 0x4;

/// The bytes a slow HTTP/2 connection sends after the preface, as a function of their
/// position: a head (the HEADERS frame up to its `x-slow` value), the value's `a`s, then
/// CONTINUATION frames, each a fixed prefix and `a`s. Built once per held connection task.
pub(in crate::engine) struct SlowBlock {
    /// The HEADERS frame (and the CONTINUATIONs a long request needs) up to the first
    /// `x-slow` value.
    head: Vec<u8>,
    /// A CONTINUATION frame's header and its field up to the value.
    more: Vec<u8>,
}

impl SlowBlock {
    /// The block for the run's first request (a mix's first).
    pub(in crate::engine) fn new(shared: &Shared) -> SlowBlock {
        let template = Template::all(shared).swap_remove(0);
        let mut fields = Vec::new();
        let uri = &template.uri;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        literal(&mut fields, b":method", template.method.as_str().as_bytes());
        literal(
            &mut fields,
            b":scheme",
            uri.scheme_str().unwrap_or("http").as_bytes(),
        );
        literal(
            &mut fields,
            b":authority",
            uri.authority().map_or("", |a| a.as_str()).as_bytes(),
        );
        literal(&mut fields, b":path", path.as_bytes());
        for (name, value) in &template.headers {
            literal(&mut fields, name.as_str().as_bytes(), value.as_bytes());
        }
        slow_field(&mut fields);
        let head = frames_of(&fields);
        let mut field = Vec::new();
        slow_field(&mut field);
        let mut more = frame_header(field.len() + SLOW_VALUE, CONTINUATION);
        more.extend_from_slice(&field);
        SlowBlock { head, more }
    }

    /// Byte `k` of what the connection sends after the preface.
    pub(in crate::engine) fn byte(&self, k: usize) -> u8 {
        let first = self.head.len() + SLOW_VALUE;
        let at = if k < first {
            k
        } else {
            (k - first) % (self.more.len() + SLOW_VALUE)
        };
        let prefix = if k < first { &self.head } else { &self.more };
        prefix.get(at).copied().unwrap_or(b'a')
    }
}

/// Whether `bytes` (what the server sent first) begin with a whole SETTINGS frame, its
/// server preface (RFC 9113 3.4); `None` while the first frame is not all there.
pub(in crate::engine) fn server_preface(bytes: &[u8]) -> Option<bool> {
    let header = bytes.get(..9)?;
    let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    if bytes.len() < 9 + len && header[3] == SETTINGS {
        return None;
    }
    Some(header[3] == SETTINGS && header[4] & 1 == 0)
}

/// A frame header of stream 1 with no flags.
fn frame_header(len: usize, kind: u8) -> Vec<u8> {
    let len = len as u32;
    vec![
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        kind,
        0,
        0,
        0,
        0,
        1,
    ]
}

/// SETTINGS_MAX_FRAME_SIZE's initial value (RFC 9113 6.5.2): a client may send no larger
/// frame before the server raises it.
const MAX_FRAME: usize = 16_384;

/// The header block's `fields` (ending with the `x-slow` field up to its value) in a HEADERS
/// frame, and as many CONTINUATION frames as a long request needs: a block may be cut
/// anywhere between its frames, and none may pass [`MAX_FRAME`] with the value's bytes that
/// follow in the last one (a request with large headers otherwise ended in FRAME_SIZE_ERROR).
fn frames_of(fields: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = fields;
    let mut kind = HEADERS;
    while rest.len() + SLOW_VALUE > MAX_FRAME {
        let (whole, after) = rest.split_at(MAX_FRAME);
        out.extend(frame_header(MAX_FRAME, kind));
        out.extend_from_slice(whole);
        rest = after;
        kind = CONTINUATION;
    }
    out.extend(frame_header(rest.len() + SLOW_VALUE, kind));
    out.extend_from_slice(rest);
    out
}

/// A literal header field without indexing, with a new name (RFC 7541 6.2.2).
fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    string(out, name);
    string(out, value);
}

/// The `x-slow` field up to its value: the value's length is said, its bytes follow.
fn slow_field(out: &mut Vec<u8>) {
    out.push(0);
    string(out, b"x-slow");
    integer(out, SLOW_VALUE);
}

/// A string literal without Huffman coding.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, s.len());
    out.extend_from_slice(s);
}

/// An integer with a 7-bit prefix (RFC 7541 5.1), the prefix's high bit clear (no Huffman).
fn integer(out: &mut Vec<u8>, mut n: usize) {
    if n < 127 {
        out.push(n as u8);
        return;
    }
    out.push(127);
    n -= 127;
    while n >= 128 {
        out.push((n % 128) as u8 | 0x80);
        n /= 128;
    }
    out.push(n as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_with_a_7_bit_prefix() {
        let enc = |n| {
            let mut v = Vec::new();
            integer(&mut v, n);
            v
        };
        assert_eq!(enc(10), [10]);
        assert_eq!(enc(126), [126]);
        assert_eq!(enc(127), [127, 0]);
        // RFC 7541 C.1.2's 1337 has a 5-bit prefix; with 7 bits: 1337 - 127 = 1210.
        assert_eq!(enc(1337), [127, 58 | 0x80, 9]);
        assert_eq!(enc(4000), [127, 0xa1, 0x1e]);
    }

    #[test]
    fn a_slow_block_is_a_headers_frame_then_continuations_of_x_slow() {
        let block = SlowBlock {
            head: {
                let mut h = frame_header(3 + SLOW_VALUE, HEADERS);
                h.extend_from_slice(b"abc");
                h
            },
            more: frame_header(2 + SLOW_VALUE, CONTINUATION)
                .into_iter()
                .chain(*b"xy")
                .collect(),
        };
        let bytes: Vec<u8> = (0..2 * (12 + SLOW_VALUE) + 11 + 1)
            .map(|k| block.byte(k))
            .collect();
        // The HEADERS frame: its length says what follows it, to the end of its `a`s.
        assert_eq!(SLOW_VALUE, 1000);
        assert_eq!(&bytes[..9], &[0, 0x03, 0xeb, HEADERS, 0, 0, 0, 0, 1]);
        assert_eq!(&bytes[9..12], b"abc");
        assert!(bytes[12..12 + SLOW_VALUE].iter().all(|&b| b == b'a'));
        // Then CONTINUATION frames, over and over.
        let second = 12 + SLOW_VALUE;
        assert_eq!(
            &bytes[second..second + 9],
            &[0, 0x03, 0xea, CONTINUATION, 0, 0, 0, 0, 1]
        );
        assert_eq!(&bytes[second + 9..second + 11], b"xy");
        let third = second + 11 + SLOW_VALUE;
        assert_eq!(bytes[third - 1], b'a');
        assert_eq!(&bytes[third..third + 9], &bytes[second..second + 9]);
    }

    /// A request with 20 KB of headers is cut into frames of at most 16,384 bytes, the
    /// last one's declared length counting the value's bytes that follow it.
    #[test]
    fn a_long_request_s_block_is_cut_into_frames_within_the_initial_size() {
        let fields = vec![b'h'; 20_000];
        let out = frames_of(&fields);
        let len = |at: usize| len_of(&out[at..]);
        assert_eq!((len(0), out[3]), (MAX_FRAME, HEADERS));
        let second = 9 + MAX_FRAME;
        assert_eq!(out[second + 3], CONTINUATION);
        assert_eq!(len(second), 20_000 - MAX_FRAME + SLOW_VALUE);
        assert_eq!(out.len(), second + 9 + 20_000 - MAX_FRAME);
        // A short one is one HEADERS frame.
        let short = frames_of(b"abc");
        assert_eq!((len_of(&short), short[3]), (3 + SLOW_VALUE, HEADERS));
        assert_eq!(short.len(), 12);
    }

    fn len_of(frame: &[u8]) -> usize {
        (usize::from(frame[0]) << 16) | (usize::from(frame[1]) << 8) | usize::from(frame[2])
    }

    #[test]
    fn the_servers_preface_is_a_whole_settings_frame() {
        let settings = [0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 128];
        assert_eq!(server_preface(&settings[..5]), None);
        assert_eq!(server_preface(&settings[..12]), None);
        assert_eq!(server_preface(&settings), Some(true));
        assert_eq!(server_preface(SETTINGS_ACK), Some(false));
        assert_eq!(server_preface(b"HTTP/1.1 400 Bad Request\r\n"), Some(false));
    }
}
