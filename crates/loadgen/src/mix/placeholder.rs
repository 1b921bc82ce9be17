//! Placeholders in a mix's requests: `{seq}`, `{rand:A..B}` and `{uuid}` in a path, a
//! header value or a body, a new value for every request sent, so caches can be defeated.
//!
//! No request is formatted or allocated per send. Each placeholder is a *fixed-width slot*:
//! `{seq}` is 10 digits (zero-padded, wrapping at 10^10), `{rand:A..B}` as many digits as B
//! (zero-padded: `{rand:1..1000}` sends 0001..1000), `{uuid}` 36 characters (a random v4
//! UUID). The request is encoded once with each slot in place (so its Content-Length is
//! right for every value), and each slot's offset is remembered; when a batch is sent, its
//! bytes are copied into the connection's own send buffer and every slot is overwritten in
//! place there with digits (see [`Slots::patch`]). A mix without placeholders sends straight
//! from the shared encoded bytes, as before.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::SplitMix;

/// The most placeholders one request may have (each is marked by its own byte while the
/// request is encoded).
pub const MAX_PER_REQUEST: usize = 16;
/// Digits of `{seq}`.
const SEQ_WIDTH: usize = 10;

/// What a slot is filled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The run's request sequence number (unique across threads).
    Seq,
    /// A uniform integer in `lo..=hi`.
    Rand { lo: u64, hi: u64 },
    /// A random version 4 UUID.
    Uuid,
}

impl Kind {
    fn width(self) -> usize {
        match self {
            Kind::Seq => SEQ_WIDTH,
            Kind::Rand { hi, .. } => hi.to_string().len(),
            Kind::Uuid => 36,
        }
    }
}

/// One slot of an encoded request: where it is and what fills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Its first byte, from the start of the encoded request.
    pub offset: usize,
    /// Its width in bytes.
    pub width: usize,
    /// What fills it.
    pub kind: Kind,
}

/// Replaces each placeholder of `text` by its marker (the byte `first_mark + k` for the
/// request's k-th placeholder, repeated to the slot's width) and returns the kinds in order.
/// Text in braces that is not a placeholder (`{"a": 1}`) is left alone.
pub(crate) fn mark(text: &[u8], kinds: &mut Vec<Kind>) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'{' {
            if let Some(len) = text[i..].iter().position(|&b| b == b'}') {
                let inner = &text[i + 1..i + len];
                if let Some(kind) = parse(inner)? {
                    if kinds.len() == MAX_PER_REQUEST {
                        return Err(format!(
                            "more than {MAX_PER_REQUEST} placeholders in one request"
                        ));
                    }
                    let marker = marker(kinds.len());
                    out.extend(std::iter::repeat_n(marker, kind.width()));
                    kinds.push(kind);
                    i += len + 1;
                    continue;
                }
            }
        }
        out.push(text[i]);
        i += 1;
    }
    Ok(out)
}

/// The byte that marks placeholder `k` of a request while it is encoded: a control byte
/// (1..=16) that a path or header value may not hold and a body with placeholders is
/// refused for.
fn marker(k: usize) -> u8 {
    1 + k as u8
}

/// Whether `bytes` hold a byte that would be taken for a marker.
pub(crate) fn has_marker_bytes(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .any(|&b| (1..=MAX_PER_REQUEST as u8).contains(&b))
}

/// Refuses a word in braces in a request target that is no placeholder (`/item/{id}`,
/// `{sequence}`, `{rand}`): braces are not valid unescaped in a path or query, so it is a
/// typo of one, and sent as written it would load the server's 404 page instead.
pub fn check_target(target: &str) -> Result<(), String> {
    let bytes = target.as_bytes();
    let mut i = 0;
    while let Some(open) = bytes[i..].iter().position(|&b| b == b'{') {
        let start = i + open;
        let Some(len) = bytes[start..].iter().position(|&b| b == b'}') else {
            break;
        };
        let inner = &bytes[start + 1..start + len];
        let word = !inner.is_empty()
            && inner
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"_:.-".contains(&b));
        if word && parse(inner)?.is_none() {
            return Err(format!(
                "{{{}}} is not a placeholder: the placeholders are {{seq}}, {{rand:A..B}} and {{uuid}} (percent-encode braces meant literally: %7B %7D)",
                String::from_utf8_lossy(inner)
            ));
        }
        i = start + len + 1;
    }
    Ok(())
}

/// `seq`, `uuid`, `rand:A..B`: a placeholder; anything else is not one (`None`). A
/// malformed `rand:` is an error.
fn parse(inner: &[u8]) -> Result<Option<Kind>, String> {
    match inner {
        b"seq" => Ok(Some(Kind::Seq)),
        b"uuid" => Ok(Some(Kind::Uuid)),
        _ => {
            let Some(range) = inner.strip_prefix(b"rand:") else {
                return Ok(None);
            };
            let range = String::from_utf8_lossy(range);
            let bad = || {
                format!("{{rand:{range}}} is not a range: write {{rand:A..B}} with 0 <= A <= B < 10^18, e.g. {{rand:1..1000}}")
            };
            let (lo, hi) = range.split_once("..").ok_or_else(bad)?;
            let lo: u64 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u64 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || hi >= 1_000_000_000_000_000_000 {
                return Err(bad());
            }
            Ok(Some(Kind::Rand { lo, hi }))
        }
    }
}

/// Finds the slots of `kinds` (marked by [`mark`]) in an encoded request and fills each
/// with a first value of its width, so the bytes are a valid request even unpatched.
pub(crate) fn locate(request: &mut [u8], kinds: &[Kind]) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(kinds.len());
    for (k, &kind) in kinds.iter().enumerate() {
        let m = marker(k);
        let offset = request
            .iter()
            .position(|&b| b == m)
            .expect("every marked placeholder is in its encoded request");
        let width = kind.width();
        request[offset..offset + width].fill(b'0');
        slots.push(Slot {
            offset,
            width,
            kind,
        });
    }
    slots.sort_by_key(|s| s.offset);
    slots
}

/// Where a worker's placeholder values come from: the run's sequence (shared, so values are
/// unique across threads) and the worker's own random generator.
pub(crate) struct Values<'a> {
    pub seq: &'a AtomicU64,
    /// `{seq}` is `offset + k × stride` for the k-th value taken (a segment's share).
    pub seq_offset: u64,
    /// See `seq_offset`.
    pub seq_stride: u64,
    pub rng: &'a Cell<u64>,
}

impl Values<'_> {
    /// Overwrites `slot` (its bytes, `dst`) with a new value.
    #[inline]
    pub(crate) fn fill(&self, kind: Kind, dst: &mut [u8]) {
        match kind {
            Kind::Seq => {
                let k = self.seq.fetch_add(1, Ordering::Relaxed);
                let n = k
                    .wrapping_mul(self.seq_stride)
                    .wrapping_add(self.seq_offset)
                    % 10_000_000_000;
                write_digits(dst, n);
            }
            Kind::Rand { lo, hi } => {
                let mut rng = SplitMix(self.rng.get());
                let n = lo + rng.below(hi - lo + 1);
                self.rng.set(rng.0);
                write_digits(dst, n);
            }
            Kind::Uuid => {
                let mut rng = SplitMix(self.rng.get());
                let (a, b) = (rng.next(), rng.next());
                self.rng.set(rng.0);
                // Version 4, variant 10xx.
                let a = (a & !0xf000) | 0x4000;
                let b = (b & !(0xc << 60)) | (0x8 << 60);
                let bits = (u128::from(a) << 64) | u128::from(b);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut nibble = 32;
                for (i, d) in dst.iter_mut().enumerate() {
                    if matches!(i, 8 | 13 | 18 | 23) {
                        *d = b'-';
                    } else {
                        nibble -= 1;
                        *d = HEX[((bits >> (nibble * 4)) & 0xf) as usize];
                    }
                }
            }
        }
    }
}

/// Writes `n` as zero-padded decimal filling `dst` (its leading digits dropped if wider).
fn write_digits(dst: &mut [u8], mut n: u64) {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_marked_at_their_width_and_other_braces_kept() {
        let mut kinds = Vec::new();
        let out = mark(b"{\"id\": {seq}, \"r\": {rand:1..1000}, {x}", &mut kinds).unwrap();
        assert_eq!(kinds, vec![Kind::Seq, Kind::Rand { lo: 1, hi: 1000 }]);
        let mut expected = b"{\"id\": ".to_vec();
        expected.extend([1; 10]);
        expected.extend(b", \"r\": ");
        expected.extend([2; 4]);
        expected.extend(b", {x}");
        assert_eq!(out, expected);
        let mut req = out.clone();
        let slots = locate(&mut req, &kinds);
        assert_eq!(slots[0].offset, 7);
        assert_eq!(slots[1].width, 4);
        assert!(!has_marker_bytes(&req));
        for bad in ["{rand:5..1}", "{rand:a..b}", "{rand:1}"] {
            assert!(mark(bad.as_bytes(), &mut Vec::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_word_in_braces_in_a_target_must_be_a_placeholder() {
        for good in [
            "/a?id={seq}&r={rand:1..9}",
            "/u/{uuid}",
            "/plain",
            "/x?q=%7Bid%7D",
            "/{",
        ] {
            assert_eq!(check_target(good), Ok(()), "{good}");
        }
        for (bad, word) in [
            ("/x?{bogus}", "{bogus}"),
            ("/item/{id}/", "{id}"),
            ("/r/{rand}", "{rand}"),
            ("/{seq}/{Seq}", "{Seq}"),
        ] {
            let err = check_target(bad).unwrap_err();
            assert!(
                err.starts_with(&format!("{word} is not a placeholder")),
                "{err}"
            );
        }
        assert!(check_target("/r/{rand:9..1}").is_err());
    }

    #[test]
    fn values_fill_their_slots() {
        let seq = AtomicU64::new(42);
        let rng = Cell::new(7);
        let v = Values {
            seq: &seq,
            seq_offset: 0,
            seq_stride: 1,
            rng: &rng,
        };
        let mut d = [0u8; 10];
        v.fill(Kind::Seq, &mut d);
        assert_eq!(&d, b"0000000042");
        // Segment 2 of 3 takes 1, 4, 7...: never a value another segment sends.
        let seq = AtomicU64::new(0);
        let second = Values {
            seq: &seq,
            seq_offset: 1,
            seq_stride: 3,
            rng: &rng,
        };
        for want in [b"0000000001", b"0000000004", b"0000000007"] {
            second.fill(Kind::Seq, &mut d);
            assert_eq!(&d, want);
        }
        let mut d = [0u8; 2];
        for _ in 0..200 {
            v.fill(Kind::Rand { lo: 5, hi: 10 }, &mut d);
            let n: u64 = std::str::from_utf8(&d).unwrap().parse().unwrap();
            assert!((5..=10).contains(&n), "{n}");
        }
        let mut u = [0u8; 36];
        v.fill(Kind::Uuid, &mut u);
        let s = std::str::from_utf8(&u).unwrap();
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "4", "{s}");
        assert!("89ab".contains(&s[19..20]), "{s}");
        assert_eq!(s.matches('-').count(), 4, "{s}");
    }
}
