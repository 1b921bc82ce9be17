//! Request mixes: several named requests, each with a weight, sent in a fixed order.
//!
//! A [`RequestSpec`] is one request of a mix (name, method, target, headers, body, weight);
//! a plan without any sends its single URL, a mix of one. Before the run, [`Encoded::new`]
//! encodes every request once and lays out one *period* of the mix as bytes: the requests in
//! smooth weighted round-robin order (nginx's: `7:2:1` is sent `a a b a a c a b a a`, not
//! in runs), or that order shuffled with a fixed seed (`--url-order random`), so that over a
//! period each request is sent exactly its weight's share of times. The period is followed
//! by its first `pipeline - 1` requests again, so any `k <= pipeline` consecutive positions,
//! starting anywhere in the period, are one contiguous slice of the bytes: a connection's
//! batch is a slice, as it was with one request, and nothing is allocated or copied per
//! request. A position's name index is what an in-flight request carries to the recorder.

mod order;
mod placeholder;
pub use placeholder::check_target;

use order::{period_of, SHUFFLE_SEED};
pub(crate) use order::{smooth_round_robin, SplitMix};
pub(crate) use placeholder::{Slot, Values};

use std::ops::Range;

use crate::error::Error;

/// The most distinct request names a mix may have: each gets a histogram per generator
/// thread (~20 KB), so the figures per name stay bounded.
pub const MAX_NAMES: usize = 1024;
/// The largest weight of one request.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// The longest period (the sum of the weights divided by their greatest common divisor).
pub const MAX_PERIOD: usize = 1_000_000;
/// The most bytes one period of encoded requests may take.
pub const MAX_ENCODED_BYTES: usize = 256 << 20;

/// One request of a mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    /// What the figures of this request are filed under (`search`, `GET /json`). Requests
    /// with the same name are counted together.
    pub name: String,
    /// HTTP method.
    pub method: String,
    /// The request target: path and query (`/search?q=1`).
    pub target: String,
    /// Extra headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Its share of the mix relative to the others' (1..=[`MAX_WEIGHT`]).
    pub weight: u32,
}

/// The order of a mix's requests within a period (`--url-order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Smooth weighted round robin: each request at even intervals.
    #[default]
    RoundRobin,
    /// The round-robin period shuffled with a fixed seed: the same counts per period, in
    /// an order without pattern (and the same in every run).
    Random,
}

impl Order {
    /// Parses `round-robin` or `random`.
    pub fn parse(s: &str) -> Result<Order, String> {
        match s.trim() {
            "round-robin" | "roundrobin" | "rr" => Ok(Order::RoundRobin),
            "random" => Ok(Order::Random),
            other => Err(format!(
                "{other:?} is not an order: give round-robin or random"
            )),
        }
    }
}

/// The names of a mix, first seen first, and each request's index among them.
pub fn names(requests: &[RequestSpec]) -> (Vec<String>, Vec<u32>) {
    let mut names: Vec<String> = Vec::new();
    let mut index = Vec::with_capacity(requests.len());
    for r in requests {
        let i = match names.iter().position(|n| *n == r.name) {
            Some(i) => i,
            None => {
                names.push(r.name.clone());
                names.len() - 1
            }
        };
        index.push(i as u32);
    }
    (names, index)
}

/// The most names of a mix that get a time series of their own (a point a second each): a
/// mix of more keeps one for the names of greatest weight, so that the series stay as small
/// as the run's own (64 names × a point of ~64 bytes a second: ~4 KB a second).
pub const MAX_SERIES_NAMES: usize = 64;

/// Which names (in the order of [`names`]) get a time series: all of them up to
/// [`MAX_SERIES_NAMES`], else the ones of greatest weight (the first on ties).
pub fn series_names(requests: &[RequestSpec]) -> Vec<bool> {
    let (names, index) = names(requests);
    let mut weight = vec![0u64; names.len()];
    for (r, &i) in requests.iter().zip(&index) {
        weight[i as usize] += u64::from(r.weight);
    }
    let mut by_weight: Vec<usize> = (0..names.len()).collect();
    by_weight.sort_by(|&a, &b| weight[b].cmp(&weight[a]).then(a.cmp(&b)));
    let mut kept = vec![false; names.len()];
    for &i in by_weight.iter().take(MAX_SERIES_NAMES) {
        kept[i] = true;
    }
    kept
}

/// Checks a mix's requests (names, methods, targets, headers, weights); the message names
/// the request.
pub fn validate(requests: &[RequestSpec]) -> Result<(), Error> {
    let invalid = |m: String| Err(Error::InvalidPlan(m));
    for r in requests {
        let who = format!("request {:?}", r.name);
        if r.name.trim().is_empty() {
            return invalid("a request of the mix has an empty name".into());
        }
        if r.method.is_empty() || !r.method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return invalid(format!(
                "{who}: method {:?} is not an HTTP method",
                r.method
            ));
        }
        if !r.target.starts_with('/') || r.target.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return invalid(format!(
                "{who}: target {:?} must start with '/' and have no spaces or control characters",
                r.target
            ));
        }
        if !(1..=MAX_WEIGHT).contains(&r.weight) {
            return invalid(format!(
                "{who}: weight must be 1..={MAX_WEIGHT}, got {}",
                r.weight
            ));
        }
        check_headers(&r.headers).map_err(|m| Error::InvalidPlan(format!("{who}: {m}")))?;
    }
    let heads = requests.iter().filter(|r| r.method == "HEAD").count();
    if heads > 0 && heads < requests.len() {
        // The response parser is told once per connection whether bodies follow.
        return invalid(
            "HEAD cannot be mixed with other methods yet (its responses have no body): run it alone"
                .into(),
        );
    }
    let (names, _) = names(requests);
    if names.len() > MAX_NAMES {
        return invalid(format!(
            "the mix has {} distinct request names; at most {MAX_NAMES} (give lines that \
             differ only in an id the same name, or vary the id with a placeholder)",
            names.len()
        ));
    }
    let period = period_of(requests);
    if period > MAX_PERIOD as u64 {
        return invalid(format!(
            "the weights make a period of {period} requests; at most {MAX_PERIOD} (smaller weights: only their ratios matter)"
        ));
    }
    Ok(())
}

/// Checks header names and values: a name is a token, a value has no line break.
pub(crate) fn check_headers(headers: &[(String, String)]) -> Result<(), String> {
    for (k, v) in headers {
        if k.is_empty() || k.bytes().any(|b| b <= b' ' || b == b':' || b >= 0x7f) {
            return Err(format!(
                "header name {k:?} is not a valid token ('Name: value')"
            ));
        }
        if v.bytes().any(|b| b == b'\r' || b == b'\n') {
            return Err(format!("header {k:?} has a line break in its value"));
        }
        // RFC 9110: a field value is visible characters, spaces and tabs.
        if v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(format!("header {k:?} has a control character in its value"));
        }
    }
    Ok(())
}

/// Checks that the headers given do not frame the body differently from how it is sent
/// (with its Content-Length, never chunked): a Content-Length that disagrees with the body,
/// or a Transfer-Encoding, would make the server read the next request as body, and half the
/// responses would be 400s of the tool's making.
pub(crate) fn check_framing(headers: &[(String, String)], body: &[u8]) -> Result<(), String> {
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!(
                "header {k:?}: tailscope sends the body whole with its Content-Length, never chunked; drop the header"
            ));
        }
        if k.eq_ignore_ascii_case("content-length") && v.trim() != body.len().to_string() {
            return Err(format!(
                "header \"{k}: {v}\" disagrees with the body's {} bytes (the server would read the next request as body); drop it: tailscope sets Content-Length",
                body.len()
            ));
        }
    }
    Ok(())
}

/// Checks a request's placeholders (`{rand:5..1}` is refused, and more than a request may
/// hold), for a file that says where it is; its target's words in braces are checked apart
/// ([`check_target`]).
pub fn check_placeholders(spec: &RequestSpec) -> Result<(), String> {
    encode_with_placeholders(spec, |target, headers, body| {
        let mut all = target.as_bytes().to_vec();
        for (_, v) in headers {
            all.extend_from_slice(v.as_bytes());
        }
        all.extend_from_slice(body);
        all
    })
    .map(|_| ())
}

/// Checks the placeholders of one field of a request (a header value, a body), for a file
/// that names the line of each field.
pub fn check_field_placeholders(text: &[u8]) -> Result<(), String> {
    placeholder::mark(text, &mut Vec::new()).map(|_| ())
}

/// One request of a mix, encoded: its bytes and its placeholders' slots in them.
#[derive(Debug, Clone, Default)]
pub(crate) struct EncodedRequest {
    pub bytes: Vec<u8>,
    pub slots: Vec<Slot>,
}

/// Encodes a mix's request with `encode(target, headers, body)`, its placeholders (see
/// [`placeholder`]) as slots; `Err` names what is wrong with them.
pub(crate) fn encode_with_placeholders(
    r: &RequestSpec,
    encode: impl Fn(&str, &[(String, String)], &[u8]) -> Vec<u8>,
) -> Result<EncodedRequest, String> {
    let mut kinds = Vec::new();
    let text = |b: Vec<u8>| String::from_utf8(b).expect("marking keeps text UTF-8");
    let target = text(placeholder::mark(r.target.as_bytes(), &mut kinds)?);
    let mut headers = Vec::with_capacity(r.headers.len());
    for (k, v) in &r.headers {
        headers.push((
            k.clone(),
            text(placeholder::mark(v.as_bytes(), &mut kinds)?),
        ));
    }
    let body = placeholder::mark(&r.body, &mut kinds)?;
    // The slots are found again by their marker bytes anywhere in the encoded request: a
    // marker byte of the user's own (a tab is marker 9) would be taken for one.
    let own_markers = placeholder::has_marker_bytes(r.target.as_bytes())
        || r.headers
            .iter()
            .any(|(_, v)| placeholder::has_marker_bytes(v.as_bytes()))
        || placeholder::has_marker_bytes(&r.body);
    if !kinds.is_empty() && own_markers {
        return Err(
            "a request with placeholders may not hold the control bytes 0x01..0x10 (tab included) in its path, headers or body"
                .into(),
        );
    }
    // Against the body as sent: a placeholder's slot is wider than its `{seq}`.
    check_framing(&headers, &body)?;
    let mut bytes = encode(&target, &headers, &body);
    let slots = placeholder::locate(&mut bytes, &kinds);
    Ok(EncodedRequest { bytes, slots })
}

/// A mix encoded for the run: one period of request bytes (and `pipeline - 1` more), where
/// each position begins, and whose name each position is.
#[derive(Debug, Clone, Default)]
pub(crate) struct Encoded {
    bytes: Vec<u8>,
    /// Where each position's request begins in `bytes`, and one past the last.
    offsets: Vec<usize>,
    /// The name index of each position.
    names_at: Vec<u32>,
    /// The request (index into `slots`) of each position.
    request_at: Vec<u32>,
    /// Each request's placeholder slots.
    slots: Vec<Vec<Slot>>,
    /// Whether any request has a placeholder: batches are then patched copies.
    templated: bool,
    /// The longest request's bytes.
    longest: usize,
    /// Positions in a period.
    period: usize,
}

impl Encoded {
    /// Lays out `requests` (their name indices in `name_of`) for batches of up to
    /// `pipeline` requests.
    pub(crate) fn new(
        requests: &[EncodedRequest],
        name_of: &[u32],
        weights: &[u32],
        order: Order,
        pipeline: usize,
    ) -> Result<Encoded, Error> {
        let mut sequence = smooth_round_robin(weights);
        if order == Order::Random {
            let mut rng = SplitMix(SHUFFLE_SEED);
            for i in (1..sequence.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                sequence.swap(i, j);
            }
        }
        let period = sequence.len();
        let positions = period + pipeline.max(1) - 1;
        let size: usize = (0..positions)
            .map(|p| requests[sequence[p % period]].bytes.len())
            .sum();
        if size > MAX_ENCODED_BYTES {
            return Err(Error::InvalidPlan(format!(
                "the mix's requests take {size} bytes encoded for one period at this pipelining depth; at most {MAX_ENCODED_BYTES} (smaller weights or bodies)"
            )));
        }
        let mut bytes = Vec::with_capacity(size);
        let mut offsets = Vec::with_capacity(positions + 1);
        let mut names_at = Vec::with_capacity(positions);
        let mut request_at = Vec::with_capacity(positions);
        for p in 0..positions {
            let r = sequence[p % period];
            offsets.push(bytes.len());
            bytes.extend_from_slice(&requests[r].bytes);
            names_at.push(name_of[r]);
            request_at.push(r as u32);
        }
        offsets.push(bytes.len());
        Ok(Encoded {
            bytes,
            offsets,
            names_at,
            request_at,
            slots: requests.iter().map(|r| r.slots.clone()).collect(),
            templated: requests.iter().any(|r| !r.slots.is_empty()),
            longest: requests.iter().map(|r| r.bytes.len()).max().unwrap_or(0),
            period,
        })
    }

    /// Whether batches must be patched copies (the mix has placeholders).
    pub(crate) fn templated(&self) -> bool {
        self.templated
    }

    /// The room a patched copy of a batch of `pipeline` requests needs.
    pub(crate) fn batch_room(&self, pipeline: usize) -> usize {
        self.longest * pipeline
    }

    /// Copies the batch of `k` requests from position `start` into the front of `dst` and
    /// fills each placeholder slot with a new value; returns the batch's length. `dst` has
    /// [`Self::batch_room`] bytes.
    pub(crate) fn patch(
        &self,
        dst: &mut [u8],
        start: usize,
        k: usize,
        values: &Values<'_>,
    ) -> usize {
        let range = self.range(start, k);
        let len = range.len();
        dst[..len].copy_from_slice(&self.bytes[range]);
        let base = self.offsets[start];
        for p in start..start + k {
            let at = self.offsets[p] - base;
            for slot in &self.slots[self.request_at[p] as usize] {
                let from = at + slot.offset;
                values.fill(slot.kind, &mut dst[from..from + slot.width]);
            }
        }
        len
    }

    /// Where the request at `pos` begins in the bytes.
    #[inline]
    pub(crate) fn offset(&self, pos: usize) -> usize {
        self.offsets[pos]
    }

    /// Every position's bytes, in order.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Positions in one period.
    pub(crate) fn period(&self) -> usize {
        self.period
    }

    /// The bytes of `k` requests from position `start` (`start < period`, `k <= pipeline`).
    #[inline]
    pub(crate) fn range(&self, start: usize, k: usize) -> Range<usize> {
        self.offsets[start]..self.offsets[start + k]
    }

    /// Where the request at `pos` ends in the bytes.
    #[inline]
    pub(crate) fn end_of(&self, pos: usize) -> usize {
        self.offsets[pos + 1]
    }

    /// The name index of the request at `pos`.
    #[inline]
    pub(crate) fn name_at(&self, pos: usize) -> u32 {
        self.names_at[pos]
    }

    /// The request (its index in the mix) at `pos`.
    #[inline]
    pub(crate) fn request_at(&self, pos: usize) -> usize {
        self.request_at[pos] as usize
    }

    /// The position after `k` requests from `start`.
    #[inline]
    pub(crate) fn advance(&self, start: usize, k: usize) -> usize {
        if self.period == 1 {
            0
        } else {
            (start + k) % self.period
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past 64 names, the heaviest keep a time series (their weight summed over the requests
    /// that share a name).
    #[test]
    fn the_heaviest_names_keep_a_time_series() {
        let spec = |name: String, weight| RequestSpec {
            name,
            method: "GET".into(),
            target: "/".into(),
            headers: vec![],
            body: vec![],
            weight,
        };
        let few: Vec<RequestSpec> = (0..3).map(|i| spec(format!("n{i}"), 1)).collect();
        assert_eq!(series_names(&few), vec![true; 3]);
        let mut many: Vec<RequestSpec> = (0..100).map(|i| spec(format!("n{i}"), 1)).collect();
        // n99 twice (weight 2 in all), n98 heavy: both kept; of the rest, the first 62.
        many.push(spec("n99".into(), 1));
        many[98].weight = 50;
        let kept = series_names(&many);
        assert_eq!(kept.len(), 100);
        assert_eq!(kept.iter().filter(|k| **k).count(), MAX_SERIES_NAMES);
        assert!(kept[98] && kept[99] && kept[61] && !kept[62]);
    }

    #[test]
    fn any_batch_is_one_slice_and_names_follow_positions() {
        let reqs: Vec<EncodedRequest> = [&b"aa"[..], b"bbb", b"c"]
            .iter()
            .map(|b| EncodedRequest {
                bytes: b.to_vec(),
                slots: vec![],
            })
            .collect();
        let e = Encoded::new(&reqs, &[0, 1, 2], &[2, 1, 1], Order::RoundRobin, 3).unwrap();
        assert_eq!(e.period(), 4);
        // A batch starting at the last position of the period wraps into the copies.
        let last = e.period() - 1;
        let r = e.range(last, 3);
        let text = String::from_utf8(e.bytes()[r].to_vec()).unwrap();
        let expected: String = (last..last + 3)
            .map(|p| ["aa", "bbb", "c"][e.name_at(p) as usize])
            .collect();
        assert_eq!(text, expected);
        assert_eq!(e.advance(last, 3), 2);
        assert_eq!(e.end_of(0), e.range(0, 1).end);
    }

    #[test]
    fn random_order_keeps_the_counts_and_is_the_same_every_time() {
        let reqs: Vec<EncodedRequest> = (0..100)
            .map(|i| EncodedRequest {
                bytes: format!("r{i}").into_bytes(),
                slots: vec![],
            })
            .collect();
        let names: Vec<u32> = (0..100).collect();
        let a = Encoded::new(&reqs, &names, &[1; 100], Order::Random, 1).unwrap();
        let b = Encoded::new(&reqs, &names, &[1; 100], Order::Random, 1).unwrap();
        assert_eq!(a.names_at, b.names_at);
        let mut sorted = a.names_at.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, names, "a permutation");
        assert_ne!(a.names_at, names, "shuffled");
    }

    #[test]
    fn bad_mixes_are_refused_with_the_request_named() {
        let ok = RequestSpec {
            name: "search".into(),
            method: "GET".into(),
            target: "/search".into(),
            headers: vec![],
            body: vec![],
            weight: 1,
        };
        validate(std::slice::from_ref(&ok)).unwrap();
        let bad = |f: &dyn Fn(&mut RequestSpec)| {
            let mut r = ok.clone();
            f(&mut r);
            validate(&[r]).unwrap_err().to_string()
        };
        assert!(bad(&|r| r.weight = 0).contains("\"search\": weight"));
        assert!(bad(&|r| r.target = "search".into()).contains("start with '/'"));
        // Brackets are fine (a URL list's default names are its query strings: ?f[a]=1).
        let mut bracketed = ok.clone();
        bracketed.name = "GET /items?filter[a]=1".into();
        validate(&[bracketed]).unwrap();
        assert!(bad(&|r| r.headers.push(("a b".into(), "v".into()))).contains("token"));
        assert!(bad(&|r| r.headers.push(("X-A".into(), "a\u{1}b".into())))
            .contains("control character"));
        let mut head = ok.clone();
        head.method = "HEAD".into();
        assert!(validate(&[ok.clone(), head])
            .unwrap_err()
            .to_string()
            .contains("HEAD"));
        let mut heavy = ok.clone();
        heavy.weight = MAX_WEIGHT;
        let mut other = ok.clone();
        other.weight = MAX_WEIGHT - 1;
        other.name = "other".into();
        assert!(validate(&[heavy, other])
            .unwrap_err()
            .to_string()
            .contains("period"));
    }

    /// Framing is judged on the body as sent (a `{seq}` slot is 10 bytes wide), and a request
    /// with placeholders holds no marker byte of its own (a tab in a header is marker 9).
    #[test]
    fn placeholders_are_framed_as_sent_and_keep_to_their_slots() {
        let encode = |target: &str, headers: &[(String, String)], body: &[u8]| {
            let mut out = format!("POST {target} HTTP/1.1\r\n").into_bytes();
            for (k, v) in headers {
                out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(body);
            out
        };
        let with = |headers: Vec<(String, String)>| RequestSpec {
            name: "post".into(),
            method: "POST".into(),
            target: "/p".into(),
            headers,
            body: b"id={seq}".to_vec(),
            weight: 1,
        };
        let cl = |n: &str| vec![("Content-Length".to_string(), n.to_string())];
        let e = encode_with_placeholders(&with(cl("8")), encode).unwrap_err();
        assert!(e.contains("13 bytes"), "{e}");
        encode_with_placeholders(&with(cl("13")), encode).unwrap();
        let tab = vec![("X-A".to_string(), "a\tb".to_string())];
        let e = encode_with_placeholders(&with(tab.clone()), encode).unwrap_err();
        assert!(e.contains("tab included"), "{e}");
        // Without placeholders a tab is an ordinary header character.
        let mut plain = with(tab);
        plain.body = b"id=1".to_vec();
        encode_with_placeholders(&plain, encode).unwrap();
    }
}
