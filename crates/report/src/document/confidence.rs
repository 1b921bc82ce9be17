//! The run's latency percentiles with their 95 % confidence intervals: `latency_us.ci95`.
//!
//! Each interval is the wider of two (see `crate::stats` for the methods): order statistics
//! of the run's histogram, which take the samples as independent, and the circular block
//! bootstrap over the run's seconds, which allows for the dependence a load test has (a slow
//! moment delays every request queued behind it) but needs [`MIN_SECONDS`] seconds and
//! cannot see into a tail beyond its largest samples. Where one method is blind the other
//! still bounds the figure, so the wider keeps the coverage of whichever holds. A run too
//! short for the bootstrap gets the order statistics alone, and says so in
//! `latency_ci95.method`.
//! A percentile whose tail holds too few samples is bounded by neither: it is null in
//! `ci95` and has a typed note in `latency_ci95.unbounded`.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::bootstrap::{Insufficient, RunSeconds, MIN_SECONDS};
use crate::stats::quantile_ci::{label, Side};
use crate::stats::{quantile_ci, BootstrapOptions, Figure, Method, CONFIDENCE};
use tailscope_loadgen::snapshot::{Ci95, Percentiles};

/// The percentiles that get an interval, as (JSON name, quantile).
pub const QUANTILES: [(&str, f64); 7] = [
    ("p50", 0.50),
    ("p75", 0.75),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
    ("p9999", 0.9999),
];

/// How a run's latency intervals (`latency_us.ci95`) were obtained, and the percentiles they
/// leave unbounded: the JSON's `latency_ci95`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencyCi95 {
    /// How the intervals were obtained.
    pub method: CiMethod,
    /// The percentiles that cannot be bounded (null in `ci95`), and why.
    #[serde(default)]
    pub unbounded: Vec<Unbounded>,
}

/// Which methods made the intervals.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CiMethodName {
    /// Order statistics of the run's histogram alone (a run of fewer than [`MIN_SECONDS`]
    /// seconds, or one without per-second histograms).
    OrderStatistics,
    /// The wider of order statistics and the circular block bootstrap over seconds.
    WiderOfOrderStatisticsAndBlockBootstrap,
}

/// How the intervals were obtained, with what reproduces them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CiMethod {
    /// The methods.
    pub name: CiMethodName,
    /// The confidence level: 0.95.
    pub confidence: f64,
    /// The run's seconds the bootstrap resampled (0 when it did not run).
    pub seconds: usize,
    /// Consecutive seconds per bootstrap block (null when it did not run).
    pub block_seconds: Option<usize>,
    /// The bootstrap's resamples (null when it did not run).
    pub replicates: Option<usize>,
    /// The ChaCha8 seed of the bootstrap (null when it did not run).
    pub seed: Option<u64>,
}

/// A percentile its samples cannot bound.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Unbounded {
    /// The JSON name: `p9999`.
    pub percentile: String,
    /// The quantile: 0.9999.
    pub quantile: f64,
    /// The samples in the run.
    pub samples: u64,
    /// `above` (too few samples above the percentile: the usual case) or `below`.
    pub side: String,
    /// The samples beyond the percentile's estimate on that side.
    pub beyond_estimate: u64,
    /// The samples a run would need in all for a 95 % interval.
    pub samples_needed: u64,
    /// The line the text summary prints in place of a bare number:
    /// `p99.99 n/a: 23 samples above p99.9`.
    pub note: String,
}

/// The latency of a run: the percentiles of `latency` with their intervals, the bootstrap
/// over `seconds` (the run's per-second histograms, in order) where there are enough of them,
/// and how they were obtained. None when nothing was measured.
pub fn latency<R: RunSeconds + ?Sized>(
    latency: &Histogram<u64>,
    seconds: &R,
) -> Option<(Percentiles, LatencyCi95)> {
    if latency.is_empty() {
        return None;
    }
    let options = BootstrapOptions::default();
    let bootstrap = seconds.seconds() >= MIN_SECONDS;
    let mut ci95 = Ci95::default();
    let mut unbounded = Vec::new();
    let mut block_seconds = None;
    for (i, &(name, q)) in QUANTILES.iter().enumerate() {
        match interval(latency, seconds, q) {
            Ok((bounds, block)) => {
                block_seconds = block_seconds.or(block);
                if let Some(slot) = ci95.slot(name) {
                    *slot = Some(bounds);
                }
            }
            Err(cannot) => unbounded.push(unbounded_note(latency, name, i, &cannot)),
        }
    }
    let percentiles = Percentiles {
        ci95: Some(ci95),
        ..Percentiles::of(latency)
    };
    let method = CiMethod {
        name: if bootstrap {
            CiMethodName::WiderOfOrderStatisticsAndBlockBootstrap
        } else {
            CiMethodName::OrderStatistics
        },
        confidence: CONFIDENCE,
        seconds: if bootstrap { seconds.seconds() } else { 0 },
        block_seconds: block_seconds.filter(|_| bootstrap),
        replicates: bootstrap.then_some(options.replicates),
        seed: bootstrap.then_some(options.seed),
    };
    Some((percentiles, LatencyCi95 { method, unbounded }))
}

/// The 95 % interval `[low, high]` of the quantile `q` of `latency`, as the report gives it:
/// the wider of order statistics and, given [`MIN_SECONDS`] or more `seconds` (the run's
/// per-second histograms, in order), the block bootstrap over them; with the bootstrap's
/// block length when it ran. `--until` checks the same interval as the run goes.
pub fn interval<R: RunSeconds + ?Sized>(
    latency: &Histogram<u64>,
    seconds: &R,
    q: f64,
) -> Result<([u64; 2], Option<usize>), crate::stats::CannotBound> {
    let mut bounds = quantile_ci(latency, q, CONFIDENCE)?.bounds();
    if seconds.seconds() < MIN_SECONDS {
        return Ok((bounds, None));
    }
    match seconds.figure_interval(Figure::Percentile(q), &BootstrapOptions::default()) {
        Ok(e) => {
            bounds = [
                bounds[0].min(e.low.floor() as u64),
                bounds[1].max(e.high.ceil() as u64),
            ];
            let block = match e.method {
                Method::CircularBlockBootstrap { block_seconds, .. } => Some(block_seconds),
                _ => None,
            };
            Ok((bounds, block))
        }
        // Bounded by order statistics but not by the seconds (their histograms hold fewer
        // samples than the whole, e.g. a run's partial seconds): the order statistics'
        // interval stands.
        Err(Insufficient::Tail(_) | Insufficient::NoSamples) => Ok((bounds, None)),
        Err(Insufficient::TooFewSeconds { .. } | Insufficient::BadQuantile(_)) => {
            Ok((bounds, None))
        }
    }
}

/// The note of a percentile that cannot be bounded, counting the samples beyond the nearest
/// percentile on its side that can be (`p99.99 n/a: 23 samples above p99.9`); with none, the
/// counts of the percentile itself.
fn unbounded_note(
    h: &Histogram<u64>,
    name: &str,
    index: usize,
    cannot: &crate::stats::CannotBound,
) -> Unbounded {
    let bounded = |q: f64| quantile_ci(h, q, CONFIDENCE).is_ok();
    let reference = match cannot.side {
        Side::Above => QUANTILES[..index]
            .iter()
            .rev()
            .map(|&(_, q)| q)
            .find(|&q| bounded(q)),
        Side::Below => QUANTILES[index + 1..]
            .iter()
            .map(|&(_, q)| q)
            .find(|&q| bounded(q)),
    };
    let note = match reference {
        Some(r) => cannot.note(h, r),
        None => cannot.to_string(),
    };
    Unbounded {
        percentile: name.to_string(),
        quantile: cannot.quantile,
        samples: cannot.samples,
        side: match cannot.side {
            Side::Above => "above",
            Side::Below => "below",
        }
        .to_string(),
        beyond_estimate: cannot.beyond_estimate,
        samples_needed: cannot.samples_needed,
        note,
    }
}

/// The text form of the percentile `name`'s interval in `p`, `(1.09ms – 1.22ms)`; or its
/// note when it cannot be bounded (`p99.99 n/a: 23 samples above p99.9`); None for figures
/// without intervals (an older report, connect times).
pub fn interval_text(
    p: &Percentiles,
    ci: Option<&LatencyCi95>,
    name: &str,
) -> Option<Result<String, String>> {
    let unbounded = ci.and_then(|c| c.unbounded.iter().find(|u| u.percentile == name));
    if let Some(u) = unbounded {
        return Some(Err(u.note.clone()));
    }
    let [low, high] = p.ci95.as_ref()?.get(name)?;
    Some(Ok(format!(
        "({} – {})",
        super::fmt_us(low),
        super::fmt_us(high)
    )))
}

/// The percentile's label as the text prints it: `p99.9` for `p999`.
pub fn percentile_label(name: &str) -> String {
    QUANTILES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or_else(|| name.to_string(), |&(_, q)| label(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    /// A short run: order statistics only; p99.9 and p99.99 of 2 000 samples cannot be
    /// bounded and say why, counting the samples above the nearest bounded percentile.
    #[test]
    fn a_short_run_has_order_statistics_and_notes_for_its_thin_tail() {
        let h = histogram((1..=2_000).map(|i| 1_000 + i));
        let (l, how) = latency::<[Histogram<u64>]>(&h, &[]).unwrap();
        let ci = l.ci95.unwrap();
        let [low, high] = ci.p99.unwrap();
        assert!(low <= l.p99 && l.p99 <= high, "{low} {} {high}", l.p99);
        assert!(high > low);
        assert_eq!((ci.p999, ci.p9999), (None, None));
        assert_eq!(how.method.name, CiMethodName::OrderStatistics);
        let notes: Vec<&str> = how.unbounded.iter().map(|u| u.note.as_str()).collect();
        // 2 000 samples: 20 above p99 (bucket edges aside).
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("p99.9 n/a: ") && notes[0].ends_with(" samples above p99"),
            "{notes:?}"
        );
        assert!(notes[1].starts_with("p99.99 n/a: "), "{notes:?}");
        let text = |name| interval_text(&l, Some(&how), name);
        assert_eq!(text("p9999"), Some(Err(notes[1].to_string())));
        assert!(matches!(text("p50"), Some(Ok(t)) if t.starts_with('(')));
    }

    /// With enough seconds the bootstrap runs, and the interval is never narrower than the
    /// order statistics' one.
    #[test]
    fn with_seconds_the_interval_is_the_wider_of_both() {
        // 20 seconds whose level steps: the bootstrap sees the seconds differ.
        let seconds: Vec<Histogram<u64>> = (0..20u64)
            .map(|s| histogram((0..500).map(|i| 1_000 + (s % 4) * 200 + i)))
            .collect();
        let mut whole = histogram([]);
        for s in &seconds {
            whole.add(s).unwrap();
        }
        let (both, how) = latency(&whole, &seconds[..]).unwrap();
        let (alone, _) = latency::<[Histogram<u64>]>(&whole, &[]).unwrap();
        let method = &how.method;
        assert_eq!(
            method.name,
            CiMethodName::WiderOfOrderStatisticsAndBlockBootstrap
        );
        assert_eq!(method.seconds, 20);
        for (name, _) in QUANTILES {
            let (Some(b), Some(a)) = (both.ci95.unwrap().get(name), alone.ci95.unwrap().get(name))
            else {
                continue;
            };
            assert!(b[0] <= a[0] && b[1] >= a[1], "{name}: {b:?} vs {a:?}");
        }
        // The seconds' levels differ, so the bootstrap's median interval is the wider here.
        let (b, a) = (
            both.ci95.unwrap().p50.unwrap(),
            alone.ci95.unwrap().p50.unwrap(),
        );
        assert!(b[1] - b[0] > a[1] - a[0], "{b:?} vs {a:?}");
    }

    #[test]
    fn nothing_measured_is_no_latency() {
        assert_eq!(latency::<[Histogram<u64>]>(&histogram([]), &[]), None);
    }
}
