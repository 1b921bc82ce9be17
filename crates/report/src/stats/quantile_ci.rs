//! A percentile's confidence interval from a histogram by order statistics.
//!
//! Of n independent samples of one continuous distribution, the number B that fall below the
//! true p-quantile is Binomial(n, p), whatever the distribution. So the interval between the
//! j-th and the k-th smallest sample, [X(j), X(k)], holds the true quantile with probability
//! P(j ≤ B ≤ k−1); [`ranks`] picks the j and k that put at most (1−γ)/2 on each side. Where
//! the binomial is wide enough to be normal this is the familiar np ± z·√(np(1−p)) of Le Boudec
//! (Theorem 2.1) and Lancet; in the tails, where it is not, the ranks are exact (see [`ranks`]).

use std::fmt;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{normal_quantile, Method};

/// Where the smaller side's expected count (n·min(p, 1−p)) is at most this, the ranks come from
/// the exact binomial; above it from the normal approximation. At this size the binomial's skew
/// is below 0.05 and the approximation (rounded outwards) is as good as exact, while the exact
/// sum would start at a probability too small for an f64 (e^−n·ln(1/p)).
const EXACT_UP_TO: f64 = 400.0;

/// A percentile with its confidence interval, in the histogram's unit (µs for latencies).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuantileCi {
    /// The quantile, in (0, 1): 0.99 for p99.
    pub quantile: f64,
    /// The point estimate: `Histogram::value_at_quantile`.
    pub estimate: u64,
    /// The lower bound: the lowest value of the bucket that holds the lower order statistic.
    pub low: u64,
    /// The upper bound: the highest value of the bucket that holds the upper order statistic.
    pub high: u64,
    /// The rank (1-based, ascending) of the lower order statistic.
    pub lower_rank: u64,
    /// The rank (1-based, ascending) of the upper order statistic.
    pub upper_rank: u64,
    /// The number of samples in the histogram.
    pub samples: u64,
    /// The confidence level, 0.95 for a 95 % interval.
    pub confidence: f64,
    /// How the interval was obtained: [`Method::OrderStatistics`].
    pub method: Method,
}

impl QuantileCi {
    /// The interval as `[low, high]`, the JSON form (`ci95.p99 = [low, high]`).
    pub fn bounds(&self) -> [u64; 2] {
        [self.low, self.high]
    }
}

/// Which side of the interval the samples cannot bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Too few samples below the quantile (a low quantile of a small run).
    Below,
    /// Too few samples above the quantile (p99.99 of a short run): the usual case.
    Above,
}

/// A percentile that the samples cannot bound at the asked confidence: its tail holds too few
/// samples, so even the extreme sample is not outside the quantile with enough probability.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CannotBound {
    /// The quantile asked for.
    pub quantile: f64,
    /// The number of samples.
    pub samples: u64,
    /// The side that cannot be bounded.
    pub side: Side,
    /// The samples on that side of the quantile's point estimate (in buckets wholly beyond it).
    pub beyond_estimate: u64,
    /// The smallest number of samples in all that would bound it at this confidence.
    pub samples_needed: u64,
    /// The confidence level asked for.
    pub confidence: f64,
}

impl fmt::Display for CannotBound {
    /// `p99.99 n/a: 1 sample above it of 10000, 36888 needed for a 95 % interval`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Below => "below",
            Side::Above => "above",
        };
        let plural = if self.beyond_estimate == 1 { "" } else { "s" };
        // Some levels carry float noise once scaled (0.513 × 100 is 51.300000000000004): round
        // to a tenth of a percent and drop a trailing ".0".
        let percent = format!("{:.1}", self.confidence * 100.0);
        write!(
            f,
            "{} n/a: {} sample{plural} {side} it of {}, {} needed for a {} % interval",
            label(self.quantile),
            self.beyond_estimate,
            self.samples,
            self.samples_needed,
            percent.trim_end_matches(".0")
        )
    }
}

impl CannotBound {
    /// The report's line for it, counting the samples beyond a `reference` percentile (the
    /// next one in that can be bounded): `p99.99 n/a: 23 samples above p99.9`.
    pub fn note(&self, histogram: &Histogram<u64>, reference: f64) -> String {
        let (count, side) = match self.side {
            Side::Above => (samples_above(histogram, reference), "above"),
            Side::Below => (samples_below(histogram, reference), "below"),
        };
        format!(
            "{} n/a: {count} samples {side} {}",
            label(self.quantile),
            label(reference)
        )
    }
}

/// The percentile's usual name: 0.5 → `p50`, 0.999 → `p99.9`, 0.9999 → `p99.99`.
pub fn label(quantile: f64) -> String {
    let percent = format!("{:.4}", quantile * 100.0);
    let percent = percent.trim_end_matches('0').trim_end_matches('.');
    format!("p{percent}")
}

/// The 1-based ranks (j, k) of the order statistics whose interval [X(j), X(k)] holds the
/// `quantile` of the distribution with probability at least `confidence`, from `n` i.i.d.
/// samples; or why it cannot be done.
///
/// With B ~ Binomial(n, p) the count of samples below the true quantile, j is the largest rank
/// with P(B ≤ j−1) ≤ α/2 and k the smallest with P(B ≥ k) ≤ α/2, α = 1 − confidence, computed
/// exactly where the smaller side expects at most 400 samples; beyond that from Le Boudec's
/// normal approximation j = ⌊np − z·√(np(1−p))⌋, k = ⌈np + z·√(np(1−p))⌉ + 1.
///
/// # Panics
/// If `quantile` or `confidence` is not strictly between 0 and 1.
pub fn ranks(n: u64, quantile: f64, confidence: f64) -> Result<(u64, u64), Side> {
    assert!(
        quantile > 0.0 && quantile < 1.0,
        "quantile {quantile} not in (0, 1)"
    );
    assert!(
        confidence > 0.0 && confidence < 1.0,
        "confidence {confidence} not in (0, 1)"
    );
    if n == 0 {
        return Err(Side::Above);
    }
    let tail = (1.0 - confidence) / 2.0;
    let nf = n as f64;
    // Count the side with the smaller mean (Y), so that the exact sum starts where the mass is.
    let upper_side = quantile > 0.5;
    let r = if upper_side { 1.0 - quantile } else { quantile };
    if nf * r > EXACT_UP_TO {
        let m = nf * quantile;
        let h = normal_quantile(1.0 - tail) * (m * (1.0 - quantile)).sqrt();
        let j = (m - h).floor();
        let k = (m + h).ceil() + 1.0;
        if j < 1.0 {
            return Err(Side::Below);
        }
        if k > nf {
            return Err(Side::Above);
        }
        return Ok((j as u64, k as u64));
    }
    // Y ~ Binomial(n, r): l = the largest l with P(Y ≤ l) ≤ tail, u = the smallest u with
    // P(Y ≥ u) ≤ tail.
    let (l, u) = small_side_bounds(n, r, tail);
    if upper_side {
        // Y = n − B counts the samples above the quantile.
        let j = u.filter(|&u| u <= n).map(|u| n - u + 1);
        let k = l.map(|l| n - l);
        match (j, k) {
            (Some(j), Some(k)) if j >= 1 => Ok((j, k)),
            (_, None) => Err(Side::Above),
            _ => Err(Side::Below),
        }
    } else {
        let j = l.map(|l| l + 1);
        match (j, u) {
            (Some(j), Some(k)) if k <= n => Ok((j, k)),
            (None, _) => Err(Side::Below),
            _ => Err(Side::Above),
        }
    }
}

/// For Y ~ Binomial(n, r) with a small mean: the largest l with P(Y ≤ l) ≤ tail (None if even
/// P(Y = 0) is more) and the smallest u with P(Y ≥ u) ≤ tail (None if there is none up to n).
fn small_side_bounds(n: u64, r: f64, tail: f64) -> (Option<u64>, Option<u64>) {
    let odds = r / (1.0 - r);
    let mut pmf = (n as f64 * (-r).ln_1p()).exp();
    let mut cdf = 0.0;
    let mut l = None;
    for y in 0..=n {
        cdf += pmf;
        if cdf <= tail {
            l = Some(y);
        }
        // P(Y ≥ y + 1) = 1 − P(Y ≤ y) ≤ tail.
        if 1.0 - cdf <= tail {
            return (l, Some(y + 1));
        }
        pmf *= (n - y) as f64 / (y + 1) as f64 * odds;
    }
    (l, None)
}

/// The smallest number of samples in all for which [`ranks`] can bound `quantile`.
pub fn samples_needed(quantile: f64, confidence: f64) -> u64 {
    // Bounding needs the extreme sample beyond the quantile with probability 1 − α/2, which is
    // max(p, 1−p)^n ≤ α/2: start just below that count and step up to the first n that works.
    let tail = (1.0 - confidence) / 2.0;
    let far = quantile.max(1.0 - quantile);
    let guess = (tail.ln() / far.ln()).floor().max(1.0) as u64;
    let mut n = guess.saturating_sub(2).max(1);
    while ranks(n, quantile, confidence).is_err() {
        n += 1;
    }
    n
}

/// The count of samples in buckets wholly above that of the `quantile`'s value: the figure in
/// "p99.99 n/a: 23 samples above p99.9" (here `samples_above(h, 0.999)`).
pub fn samples_above(histogram: &Histogram<u64>, quantile: f64) -> u64 {
    if histogram.is_empty() {
        return 0;
    }
    let value = histogram.value_at_quantile(quantile);
    histogram.len() - histogram.count_between(0, value)
}

/// The count of samples in buckets wholly below that of the `quantile`'s value.
fn samples_below(histogram: &Histogram<u64>, quantile: f64) -> u64 {
    if histogram.is_empty() {
        return 0;
    }
    let lowest = histogram.lowest_equivalent(histogram.value_at_quantile(quantile));
    match lowest.checked_sub(1) {
        Some(below) => histogram.count_between(0, below),
        None => 0,
    }
}

/// The `quantile` of the histogram with its `confidence` interval by order statistics, or why
/// the samples cannot bound it.
///
/// The histogram keeps each sample only as its bucket (its value to `sigfig` significant
/// figures), so the j-th order statistic is known to be somewhere in its bucket: the interval
/// is widened outwards to the bucket edges, `low` the lowest value of X(j)'s bucket and `high`
/// the highest of X(k)'s. That widens each side by less than one bucket (10^−sigfig of the
/// value, 0.1 % at the usual 3 figures), never narrows it, and so keeps the coverage at least
/// the stated one.
///
/// # Panics
/// If `quantile` or `confidence` is not strictly between 0 and 1.
pub fn quantile_ci(
    histogram: &Histogram<u64>,
    quantile: f64,
    confidence: f64,
) -> Result<QuantileCi, CannotBound> {
    let n = histogram.len();
    let (lower_rank, upper_rank) = ranks(n, quantile, confidence).map_err(|side| {
        let beyond_estimate = match side {
            Side::Above => samples_above(histogram, quantile),
            Side::Below => samples_below(histogram, quantile),
        };
        CannotBound {
            quantile,
            samples: n,
            side,
            beyond_estimate,
            samples_needed: samples_needed(quantile, confidence),
            confidence,
        }
    })?;
    let (low, high) = values_at_ranks(histogram, lower_rank, upper_rank);
    Ok(QuantileCi {
        quantile,
        estimate: histogram.value_at_quantile(quantile),
        low: histogram.lowest_equivalent(low),
        high: histogram.highest_equivalent(high),
        lower_rank,
        upper_rank,
        samples: n,
        confidence,
        method: Method::OrderStatistics,
    })
}

/// The values (as their buckets' representative values) of the order statistics of ranks
/// `lower` ≤ `upper`, both in 1..=len, in one pass over the recorded buckets.
fn values_at_ranks(histogram: &Histogram<u64>, lower: u64, upper: u64) -> (u64, u64) {
    let mut seen = 0u64;
    let mut low = None;
    for bucket in histogram.iter_recorded() {
        seen += bucket.count_at_value();
        let value = bucket.value_iterated_to();
        if low.is_none() && seen >= lower {
            low = Some(value);
        }
        if seen >= upper {
            return (low.unwrap_or(value), value);
        }
    }
    // Unreachable for ranks within len; the maximum is the honest answer if it were reached.
    let max = histogram.max();
    (low.unwrap_or(max), max)
}
