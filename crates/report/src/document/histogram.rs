//! The report's histograms: percentiles of one, its encoding (HDR V2, deflate, base64) and
//! back, and which percentiles unfinished requests make lower bounds.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::EncodedHistogram;
use tailscope_loadgen::snapshot::Percentiles;

pub(crate) fn percentiles(h: &Histogram<u64>) -> Option<Percentiles> {
    (!h.is_empty()).then(|| Percentiles::of(h))
}

fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `h` as a report carries it.
pub(crate) fn encoded(h: &Histogram<u64>) -> EncodedHistogram {
    EncodedHistogram {
        encoding: "hdrhistogram-v2-deflate-base64".into(),
        unit: "us".into(),
        data: encode(h),
    }
}

/// Decodes a report's histogram back into an HDR histogram.
pub fn decode_histogram(h: &EncodedHistogram) -> Option<Histogram<u64>> {
    decode_base64(&h.data)
}

impl super::Report {
    /// The JSON field of the first histogram this report carries that cannot be decoded
    /// (`histogram.data`, `second_histograms[3]`): a damaged or edited report, whose pages
    /// and merges would read it as nothing measured. The one check `merge`, `report` and
    /// `compare` refuse such a report by.
    pub fn undecodable_histogram(&self) -> Option<String> {
        let whole = [
            ("histogram", Some(&self.histogram)),
            ("connect_histogram", self.connect_histogram.as_ref()),
            ("tls_histogram", self.tls_histogram.as_ref()),
            (
                "latency_uncorrected_histogram",
                self.latency_uncorrected_histogram.as_ref(),
            ),
        ];
        for (field, h) in whole {
            if h.is_some_and(|h| decode_histogram(h).is_none()) {
                return Some(format!("{field}.data"));
            }
        }
        self.second_histograms
            .iter()
            .position(|d| decode_base64(d).is_none())
            .map(|i| format!("second_histograms[{i}]"))
    }
}

/// Decodes base64 of a V2 (deflate) serialized histogram.
pub(crate) fn decode_base64(data: &str) -> Option<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .ok()
}

/// The names of the percentiles whose value unfinished requests may set: a percentile is
/// exact only when it lies below every unfinished request's wait.
pub(crate) fn lower_bounds(h: &Histogram<u64>, unfinished_min_us: Option<u64>) -> Vec<String> {
    let (Some(min), false) = (unfinished_min_us, h.is_empty()) else {
        return Vec::new();
    };
    let floor = h.lowest_equivalent(min.clamp(1, h.high()));
    let p = Percentiles::of(h);
    [
        ("min", p.min),
        ("p50", p.p50),
        ("p75", p.p75),
        ("p90", p.p90),
        ("p95", p.p95),
        ("p99", p.p99),
        ("p999", p.p999),
        ("p9999", p.p9999),
        ("max", p.max),
    ]
    .into_iter()
    .filter(|&(_, v)| v >= floor)
    .map(|(name, _)| name.to_string())
    .collect()
}
