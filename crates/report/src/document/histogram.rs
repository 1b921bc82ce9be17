//! The report's histograms: percentiles of one, its encoding (HDR V2, deflate, base64) and
//! back, which percentiles unfinished requests make lower bounds, and the log-bucketed bars
//! the text summary and the dashboard draw.

use std::fmt::Write as _;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::fmt::{fmt_count, fmt_us};
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

/// One bucket of a log-spaced latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Lower edge, inclusive, in microseconds.
    pub low_us: u64,
    /// Upper edge, exclusive, in microseconds.
    pub high_us: u64,
    /// Responses in it.
    pub count: u64,
}

/// Log-spaced buckets (1-2-5 per decade) from the fastest to the slowest response, so a
/// second mode of slow requests stands apart as its own group. Empty buckets between modes
/// are kept: the gap is part of the picture.
pub fn log_buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut edges = Vec::new();
    let mut decade = 1u64;
    'outer: loop {
        for m in [1, 2, 5] {
            let edge = decade.saturating_mul(m);
            edges.push(edge);
            if edge > h.max() {
                break 'outer;
            }
        }
        decade = decade.saturating_mul(10);
    }
    let first = edges.iter().rposition(|&e| e <= h.min()).unwrap_or(0);
    let edges = &edges[first..];
    let mut buckets: Vec<Bucket> = edges
        .windows(2)
        .map(|w| Bucket {
            low_us: w[0],
            high_us: w[1],
            count: 0,
        })
        .collect();
    for v in h.iter_recorded() {
        let value = v.value_iterated_to();
        let i = edges
            .partition_point(|&e| e <= value)
            .saturating_sub(1)
            .min(buckets.len().saturating_sub(1));
        if let Some(b) = buckets.get_mut(i) {
            b.count += v.count_at_value();
        }
    }
    buckets
}

/// [`log_buckets`] drawn as text bars `width` wide.
pub fn histogram_bars(h: &Histogram<u64>, width: usize) -> String {
    let buckets = log_buckets(h);
    let most = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let total = h.len().max(1);
    let mut out = String::new();
    for b in &buckets {
        let bar = ((b.count as f64 / most as f64) * width as f64).ceil() as usize;
        let _ = writeln!(
            out,
            "  {:>8} – {:<8} {:>6.2} % {:<width$} {}",
            fmt_us(b.low_us),
            fmt_us(b.high_us),
            100.0 * b.count as f64 / total as f64,
            "■".repeat(bar),
            fmt_count(b.count),
            width = width
        );
    }
    out
}
