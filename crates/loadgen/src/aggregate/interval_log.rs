//! Each second's latency histogram, serialized for the HdrHistogram interval log.

use flate2::{Compress, Compression, FlushCompress, Status};
use hdrhistogram::serialization::{Serializer as _, V2Serializer};
use hdrhistogram::Histogram;

/// The cookie of a V2 histogram compressed with zlib (hdrhistogram's `V2_COMPRESSED_COOKIE`,
/// which the crate does not export).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// Writes what hdrhistogram's `V2DeflateSerializer` writes (the cookie, the compressed
/// length, the V2 encoding compressed with zlib at the default level) with one compressor
/// for the run: the crate's makes a new zlib state, some 300 KiB, for every histogram, that
/// is every second of the run. The report's rebuild from a journal writes its seconds with it
/// too: a new zlib state a second fragmented glibc's heap there to 760 MB for a 40-minute run.
pub struct SecondSerializer {
    plain: V2Serializer,
    encoded: Vec<u8>,
    zlib: Compress,
}

impl Default for SecondSerializer {
    fn default() -> Self {
        SecondSerializer::new()
    }
}

impl SecondSerializer {
    /// A serializer with its own zlib state, kept for every histogram it writes.
    pub fn new() -> SecondSerializer {
        SecondSerializer {
            plain: V2Serializer::new(),
            encoded: Vec::new(),
            zlib: Compress::new(Compression::default(), true),
        }
    }

    /// `h`, serialized; empty if it could not be (which only drops its second from the
    /// interval log).
    pub fn serialize(&mut self, h: &Histogram<u64>) -> Vec<u8> {
        self.encoded.clear();
        if self.plain.serialize(h, &mut self.encoded).is_err() {
            return Vec::new();
        }
        self.zlib.reset();
        let mut out = Vec::with_capacity(8 + self.encoded.len() / 2);
        out.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        loop {
            let read = self.zlib.total_in() as usize;
            // compress_vec writes into the spare capacity only.
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            match self
                .zlib
                .compress_vec(&self.encoded[read..], &mut out, FlushCompress::Finish)
            {
                Ok(Status::StreamEnd) => break,
                Ok(Status::Ok | Status::BufError) => {}
                Err(_) => return Vec::new(),
            }
        }
        let compressed = (out.len() - 8) as u32;
        out[4..8].copy_from_slice(&compressed.to_be_bytes());
        // Kept for the whole run, one a second: the room reserved for the compressor (half
        // the plain encoding, some 1-2 KiB) would otherwise stay allocated beside each.
        out.shrink_to_fit();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

    /// What the crate's serializer would write, read back the same; the same compressor
    /// serves one second after another.
    #[test]
    fn seconds_read_back_as_the_crate_s_serialization_does() {
        let mut ours = SecondSerializer::new();
        for second in 0..3u64 {
            let mut h = crate::recorder::new_histogram(std::time::Duration::from_secs(60));
            for i in 0..5_000u64 {
                h.record(100 + (i * 7_919 + second * 13) % 50_000).unwrap();
            }
            let bytes = ours.serialize(&h);
            let mut theirs = Vec::new();
            V2DeflateSerializer::new()
                .serialize(&h, &mut theirs)
                .unwrap();
            assert_eq!(bytes[..4], theirs[..4], "the compressed V2 cookie");
            let back: Histogram<u64> = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .unwrap();
            assert_eq!(back, h, "second {second}");
            assert_eq!(bytes, theirs, "byte for byte, second {second}");
        }
        // An empty second too.
        let empty = crate::recorder::new_histogram(std::time::Duration::from_secs(60));
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut ours.serialize(&empty).as_slice())
            .unwrap();
        assert_eq!(back.len(), 0);
    }

    /// A second's bytes are kept for the whole run: they hold no room beyond themselves
    /// (before, each held the compressor's reserve, about as much again as its bytes).
    #[test]
    fn a_kept_second_holds_only_its_bytes() {
        let mut ours = SecondSerializer::new();
        let mut h = crate::recorder::new_histogram(std::time::Duration::from_secs(60));
        for i in 0..3_000u64 {
            h.record(1_000 + (i * 7_919) % 39_000).unwrap();
        }
        let bytes = ours.serialize(&h);
        assert!(bytes.len() > 8, "a second with requests has a body");
        assert_eq!(
            bytes.capacity(),
            bytes.len(),
            "no spare room kept per second"
        );
    }
}
