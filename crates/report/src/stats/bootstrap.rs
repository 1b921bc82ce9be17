//! Intervals that allow for dependence between samples: the circular block bootstrap over a
//! run's per-second histograms, and the comparison of runs taken as units.
//!
//! A load test's samples are not independent: a slow moment of the server delays every request
//! queued behind it, so slow samples come in runs. Seconds far enough apart are nearly
//! independent, so the bootstrap resamples blocks of consecutive seconds (keeping the dependence
//! within a block) and recomputes the figure from the merged resample.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::quantile_ci::{ranks, samples_needed, CannotBound, Side};
use super::{
    normal_cdf, ratio, t_cdf, t_quantile, verdict, Change, Estimate, Method, Unit, Verdict,
    CONFIDENCE,
};

mod second;
pub use second::{AsSecond, RunSeconds, Second, Units};

/// A run of fewer seconds than this has too few blocks for the bootstrap to tell noise from a
/// change.
pub const MIN_SECONDS: usize = 8;

/// The most units a run's seconds are resampled as. A resample costs work in proportion to the
/// units (each one's entries are added), times 2,000 replicates, times every figure asked for:
/// an hour's 3,600 seconds took minutes of the report's end (the soak of issue 38 found it).
/// A longer run is resampled in units of consecutive seconds merged ([`group_for`]): blocks
/// of whole units keep the dependence the blocks are there for, and 256 units still give
/// dozens of blocks.
pub const MAX_UNITS: usize = 256;

/// The seed used when the caller has none of its own; whatever the seed, it is recorded in the
/// result's [`Method`].
pub const DEFAULT_SEED: u64 = 0x7a11_5c09e;

/// How to bootstrap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootstrapOptions {
    /// The confidence level, 0.95 for 95 %; strictly between 0 and 1 (a constant of the
    /// caller's: outside that the percentile check panics).
    pub confidence: f64,
    /// The number of resamples (2 000 puts the expanded interval's ends, about the 0.5 %
    /// points for a 30 s run, at the 10th from each end).
    pub replicates: usize,
    /// Consecutive seconds per block; None for ⌈n^(1/3)⌉ (Hall, Horowitz & Jing, 1995).
    pub block_seconds: Option<usize>,
    /// The seed of the ChaCha8 generator.
    pub seed: u64,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        BootstrapOptions {
            confidence: CONFIDENCE,
            replicates: 2000,
            block_seconds: None,
            seed: DEFAULT_SEED,
        }
    }
}

/// The figure of a run that is bootstrapped.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// A latency percentile of the merged histogram, as a quantile in (0, 1): 0.99 for p99.
    Percentile(f64),
    /// Samples (completed requests) per second: each histogram's count, averaged.
    Throughput,
    /// The mean latency of the merged histogram (as `Histogram::mean` computes it).
    Mean,
}

/// Why a run's seconds cannot give an interval.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum Insufficient {
    /// Too few seconds to resample in blocks.
    #[error("{seconds} s of data, the bootstrap needs at least {needed} s")]
    TooFewSeconds {
        /// The seconds given.
        seconds: usize,
        /// [`MIN_SECONDS`].
        needed: usize,
    },
    /// No samples at all.
    #[error("no samples")]
    NoSamples,
    /// A percentile asked for outside (0, 1): a caller's mistake, said rather than panicked on.
    #[error("quantile {0} is not between 0 and 1")]
    BadQuantile(f64),
    /// The percentile's tail holds too few samples to be bounded even by order statistics.
    #[error("{0}")]
    Tail(CannotBound),
}

/// A run's seconds as sparse counts over the distinct bucket values of all of them, so that a
/// resample is merged by adding a few counts per second rather than whole histograms.
struct Seconds {
    /// Consecutive seconds merged into one unit (the last unit may hold fewer).
    group: usize,
    /// Per unit: the seconds it holds.
    spans: Vec<u64>,
    /// The distinct bucket values (highest equivalent), ascending.
    values: Vec<u64>,
    /// Per unit: (index into `values`, count), ascending.
    entries: Vec<Vec<(u32, u64)>>,
    /// Per unit: the number of samples.
    counts: Vec<u64>,
    /// Per unit: the sum of its samples (as `Histogram::mean` weighs them), for the mean.
    sums: Vec<f64>,
    /// The window of values that holds a percentile of every resample (built on first use).
    window: Option<Window>,
    /// Merged counts of a resample over the window.
    scratch: Vec<u64>,
}

/// The values that can be a quantile of any resample. A resample is a mixture of seconds, and a
/// mixture's q-quantile lies between the smallest and the largest of its parts' q-quantiles
/// (below the smallest, every part has less than q of its samples, so the mixture too; at the
/// largest, every part has at least q). So only the values between the seconds' own quantiles
/// need merging, with the counts below them summed once per second: for p99 of seconds with
/// many samples, a few buckets rather than all of them.
struct Window {
    /// The quantile the window is for.
    quantile: f64,
    /// The index of the window's first value.
    lo: usize,
    /// Per second: its samples below the window.
    below: Vec<u64>,
    /// Per second: its entries within the window, indexed from `lo`.
    entries: Vec<Vec<(u32, u64)>>,
}

impl Seconds {
    /// The table of `seconds` in units of `group` consecutive seconds (1: each its own).
    fn new<S: AsSecond>(seconds: &[S], group: usize) -> Seconds {
        let group = group.max(1);
        let seconds: Vec<std::borrow::Cow<'_, Second>> =
            seconds.iter().map(AsSecond::as_second).collect();
        let units: Vec<std::borrow::Cow<'_, Second>> = if group == 1 {
            seconds
                .iter()
                .map(|s| std::borrow::Cow::Borrowed(&**s))
                .collect()
        } else {
            seconds
                .chunks(group)
                .map(|c| std::borrow::Cow::Owned(merge_unit(c)))
                .collect()
        };
        let spans = seconds.chunks(group).map(|c| c.len() as u64).collect();
        let units: Vec<&Second> = units.iter().map(|u| &**u).collect();
        Seconds::of_units(&units, spans, group)
    }

    /// The table of `units`, each of the seconds `spans` gives, `group` to a whole unit.
    fn of_units(units: &[&Second], spans: Vec<u64>, group: usize) -> Seconds {
        let mut values: Vec<u64> = units
            .iter()
            .flat_map(|s| s.buckets.iter().map(|b| b.0))
            .collect();
        values.sort_unstable();
        values.dedup();
        let entries = units
            .iter()
            .map(|s| {
                s.buckets
                    .iter()
                    .map(|&(v, _, count)| {
                        let at = values.binary_search(&v).unwrap_or(0);
                        (at as u32, count)
                    })
                    .collect()
            })
            .collect();
        Seconds {
            group,
            spans,
            values,
            entries,
            counts: units.iter().map(|s| s.len()).collect(),
            sums: units.iter().map(|s| s.mean() * s.len() as f64).collect(),
            window: None,
            scratch: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.counts.len()
    }

    /// The figure of the resample in which second i appears `weights[i]` times.
    fn figure(&mut self, figure: Figure, weights: &[u32]) -> Option<f64> {
        let total: u64 = weights
            .iter()
            .zip(&self.counts)
            .map(|(&w, &c)| u64::from(w) * c)
            .sum();
        match figure {
            Figure::Throughput => {
                let seconds: u64 = weights
                    .iter()
                    .zip(&self.spans)
                    .map(|(&w, &span)| u64::from(w) * span)
                    .sum();
                (seconds > 0).then(|| total as f64 / seconds as f64)
            }
            Figure::Mean => {
                let sum: f64 = weights
                    .iter()
                    .zip(&self.sums)
                    .map(|(&w, &s)| f64::from(w) * s)
                    .sum();
                (total > 0).then(|| sum / total as f64)
            }
            Figure::Percentile(q) => {
                if total == 0 {
                    return None;
                }
                self.prepare(q);
                let window = self.window.as_ref()?;
                // The rank Histogram::value_at_quantile uses, so the point estimate matches it.
                let rank = ((q * total as f64).ceil() as u64).max(1);
                let mut seen: u64 = weights
                    .iter()
                    .zip(&window.below)
                    .map(|(&w, &b)| u64::from(w) * b)
                    .sum();
                self.scratch.fill(0);
                for (entries, &w) in window.entries.iter().zip(weights) {
                    if w == 0 {
                        continue;
                    }
                    for &(at, count) in entries {
                        self.scratch[at as usize] += u64::from(w) * count;
                    }
                }
                let offset = self.scratch.iter().position(|&count| {
                    seen += count;
                    seen >= rank
                });
                let last = self.scratch.len() - 1;
                Some(self.values[window.lo + offset.unwrap_or(last)] as f64)
            }
        }
    }

    /// Builds the [`Window`] for `quantile` unless it is there already.
    fn prepare(&mut self, quantile: f64) {
        if self.window.as_ref().is_some_and(|w| w.quantile == quantile) {
            return;
        }
        let (mut lo, mut hi) = (usize::MAX, 0);
        for (entries, &count) in self.entries.iter().zip(&self.counts) {
            let rank = (quantile * count as f64).ceil() as u64;
            let mut seen = 0;
            let own = entries.iter().find(|(_, c)| {
                seen += c;
                seen >= rank
            });
            if let Some(&(at, _)) = own {
                lo = lo.min(at as usize);
                hi = hi.max(at as usize);
            }
        }
        if lo > hi {
            self.window = None;
            return;
        }
        let inside = |at: u32| (lo..=hi).contains(&(at as usize));
        let below = self
            .entries
            .iter()
            .map(|e| {
                e.iter()
                    .filter(|(at, _)| (*at as usize) < lo)
                    .map(|(_, c)| c)
                    .sum()
            })
            .collect();
        let entries = self
            .entries
            .iter()
            .map(|e| {
                e.iter()
                    .filter(|(at, _)| inside(*at))
                    .map(|&(at, c)| (at - lo as u32, c))
                    .collect()
            })
            .collect();
        self.scratch = vec![0; hi - lo + 1];
        self.window = Some(Window {
            quantile,
            lo,
            below,
            entries,
        });
    }

    /// Whether the figure can be bootstrapped from these seconds at all.
    fn check(&mut self, figure: Figure, confidence: f64) -> Result<(), Insufficient> {
        if self.len() < MIN_SECONDS {
            return Err(Insufficient::TooFewSeconds {
                seconds: self.len(),
                needed: MIN_SECONDS,
            });
        }
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return Err(Insufficient::NoSamples);
        }
        let Figure::Percentile(q) = figure else {
            return Ok(());
        };
        if !(q > 0.0 && q < 1.0) {
            return Err(Insufficient::BadQuantile(q));
        }
        // A resample never holds a value beyond the run's extremes, so a percentile whose tail
        // order statistics cannot bound is not bounded by the bootstrap either.
        let Err(side) = ranks(total, q, confidence) else {
            return Ok(());
        };
        let all = vec![1; self.len()];
        let estimate = self.figure(figure, &all).unwrap_or(0.0) as u64;
        let values = &self.values;
        let beyond = self
            .entries
            .iter()
            .flatten()
            .filter(|(at, _)| match side {
                Side::Above => values[*at as usize] > estimate,
                Side::Below => values[*at as usize] < estimate,
            })
            .map(|(_, c)| c)
            .sum();
        Err(Insufficient::Tail(CannotBound {
            quantile: q,
            samples: total,
            side,
            beyond_estimate: beyond,
            samples_needed: samples_needed(q, confidence),
            confidence,
        }))
    }

    /// The figure of each of `replicates` block resamples.
    fn replicates(
        &mut self,
        figure: Figure,
        block: usize,
        n: usize,
        rng: &mut ChaCha8Rng,
    ) -> Vec<f64> {
        let mut weights = vec![0u32; self.len()];
        (0..n)
            .filter_map(|_| {
                block_weights(block, rng, &mut weights);
                self.figure(figure, &weights)
            })
            .collect()
    }
}

/// The block length in units for `units` units of `group` seconds each: ⌈n^(1/3)⌉ units, or
/// the caller's seconds rounded up to whole units; at most a quarter of the run.
fn block_len(units: usize, group: usize, options: &BootstrapOptions) -> usize {
    let auto = (units as f64).cbrt().ceil() as usize;
    options
        .block_seconds
        .map_or(auto, |seconds| seconds.div_ceil(group.max(1)))
        .clamp(1, (units / 4).max(1))
}

/// The seconds merged into one unit so that a run of `seconds` seconds is at most
/// [`MAX_UNITS`] units.
pub(crate) fn group_for(seconds: usize) -> usize {
    seconds.div_ceil(MAX_UNITS).max(1)
}

/// One unit: its seconds merged.
fn merge_unit(seconds: &[std::borrow::Cow<'_, Second>]) -> Second {
    Second::merged(&seconds.iter().map(|s| &**s).collect::<Vec<_>>())
}

/// One circular block resample, as how often each second appears: blocks of `block`
/// consecutive seconds (wrapping from the last second to the first) at uniform random starts
/// until the resample is as long as the run.
fn block_weights(block: usize, rng: &mut ChaCha8Rng, weights: &mut [u32]) {
    let n = weights.len();
    weights.fill(0);
    let mut filled = 0;
    while filled < n {
        let start = rng.random_range(0..n);
        for offset in 0..block.min(n - filled) {
            weights[(start + offset) % n] += 1;
        }
        filled += block;
    }
}

/// The expanded percentile interval (Hesterberg, 2015): Efron's percentile interval of the
/// sorted replicates, at the tail probability that a t interval over `blocks` independent
/// units would use rather than the normal's. The plain percentile interval is too narrow with
/// few units (it acts as if the bootstrap's spread were the truth's, and the spread of n units
/// is short by √((n−1)/n)); here the units are the blocks, as few as 2 to 10 in a short run.
/// The expansion fades as the blocks grow many (30 blocks: 2.08 instead of 1.96).
fn percentile_interval(replicates: &mut [f64], confidence: f64, blocks: f64) -> (f64, f64) {
    replicates.sort_unstable_by(f64::total_cmp);
    let tail = expanded_tail((1.0 - confidence) / 2.0, blocks);
    let last = replicates.len() - 1;
    let at = |p: f64| replicates[((p * last as f64).round() as usize).min(last)];
    (at(tail), at(1.0 - tail))
}

/// The one-sided tail α'/2 with Φ⁻¹(1 − α'/2) = √(k/(k−1))·t(1 − α/2, k−1).
fn expanded_tail(tail: f64, blocks: f64) -> f64 {
    if blocks <= 1.0 {
        return tail;
    }
    let z = (blocks / (blocks - 1.0)).sqrt() * t_quantile(1.0 - tail, blocks - 1.0);
    if z.is_finite() {
        1.0 - normal_cdf(z)
    } else {
        tail
    }
}

/// A figure of one run with its interval, by the circular block bootstrap over the run's
/// per-second histograms (one histogram per second, in order).
pub fn figure_interval<S: AsSecond>(
    seconds: &[S],
    figure: Figure,
    options: &BootstrapOptions,
) -> Result<Estimate, Insufficient> {
    let table = Seconds::new(seconds, group_for(seconds.len()));
    interval_of(table, seconds.len(), figure, options)
}

/// [`figure_interval`] over `seconds` seconds already in `table`.
fn interval_of(
    mut table: Seconds,
    seconds: usize,
    figure: Figure,
    options: &BootstrapOptions,
) -> Result<Estimate, Insufficient> {
    table.check(figure, options.confidence)?;
    let all = vec![1; table.len()];
    let estimate = table.figure(figure, &all).ok_or(Insufficient::NoSamples)?;
    let block = block_len(table.len(), table.group, options);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut replicates = table.replicates(figure, block, options.replicates.max(1), &mut rng);
    if replicates.is_empty() {
        return Err(Insufficient::NoSamples);
    }
    let blocks = table.len() as f64 / block as f64;
    let (low, high) = percentile_interval(&mut replicates, options.confidence, blocks);
    Ok(Estimate {
        estimate,
        low,
        high,
        confidence: options.confidence,
        method: bootstrap_method(block * table.group, options),
        samples: seconds as u64,
        unit: Unit::Seconds,
    })
}

fn bootstrap_method(block: usize, options: &BootstrapOptions) -> Method {
    Method::CircularBlockBootstrap {
        block_seconds: block,
        replicates: options.replicates,
        seed: options.seed,
    }
}

/// The change of a figure from the `base` run to the `new` one, each given as its per-second
/// histograms: the ratio new/base with its interval by resampling each run's seconds in blocks
/// independently (the runs are), significant when the interval excludes 1.
pub fn compare_seconds<S: AsSecond>(
    base: &[S],
    new: &[S],
    figure: Figure,
    options: &BootstrapOptions,
) -> Change {
    // One unit size for both sides, so that their blocks span the same seconds; the shorter
    // side keeps at least 32 units.
    let shorter = base.len().min(new.len());
    let group = group_for(base.len().max(new.len())).min((shorter / 32).max(1));
    let mut base_table = Seconds::new(base, group);
    let mut new_table = Seconds::new(new, group);
    let base_all = vec![1; base_table.len()];
    let new_all = vec![1; new_table.len()];
    let base_figure = base_table.figure(figure, &base_all);
    let new_figure = new_table.figure(figure, &new_all);
    let block = block_len(base_table.len().min(new_table.len()), group, options);
    let samples = (base.len() as u64, new.len() as u64, Unit::Seconds);
    let method = bootstrap_method(block * group, options);
    let refuse = |side: &str, why: Insufficient| {
        let reason = format!("{side}: {why}");
        Change::insufficient(
            base_figure,
            new_figure,
            method.clone(),
            samples,
            options.confidence,
            reason,
        )
    };
    if let Err(why) = base_table.check(figure, options.confidence) {
        return refuse("base", why);
    }
    if let Err(why) = new_table.check(figure, options.confidence) {
        return refuse("new", why);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut base_weights = vec![0u32; base_table.len()];
    let mut new_weights = vec![0u32; new_table.len()];
    let mut ratios: Vec<f64> = (0..options.replicates.max(1))
        .filter_map(|_| {
            block_weights(block, &mut rng, &mut base_weights);
            block_weights(block, &mut rng, &mut new_weights);
            let b = base_table.figure(figure, &base_weights)?;
            let n = new_table.figure(figure, &new_weights)?;
            (b > 0.0).then(|| n / b)
        })
        .collect();
    // A resample whose base figure is 0 (every second chosen had no samples) has no ratio; if
    // that is more than a sliver of them the interval would be biased, so refuse.
    if ratios.len() < options.replicates.max(1) * 99 / 100 || ratios.is_empty() {
        return refuse("base", Insufficient::NoSamples);
    }
    let blocks = base_table.len().min(new_table.len()) as f64 / block as f64;
    let estimate = ratio(base_figure, new_figure);
    let p_value = bootstrap_p(estimate, &ratios, blocks);
    let (low, high) = percentile_interval(&mut ratios, options.confidence, blocks);
    Change {
        base: base_figure,
        new: new_figure,
        estimate,
        low: Some(low),
        high: Some(high),
        confidence: options.confidence,
        method,
        base_samples: samples.0,
        new_samples: samples.1,
        unit: Unit::Seconds,
        verdict: verdict(low, high),
        reason: None,
        p_value,
        correction: None,
    }
}

/// The two-sided p-value of "no change" that the expanded percentile interval inverts: the
/// change's logarithm over the resamples' standard deviation of it is a z that the interval
/// holds to √(k/(k−1))·t(k−1) for `blocks` = k, so z·√((k−1)/k) is referred to Student's t
/// with k − 1 degrees of freedom. A p-value from the resamples' own tail would do the same
/// where the bootstrap is roughly log-normal, but 2 000 resamples cannot resolve a tail below
/// 1/2 000, and a family-wise correction needs p-values down to 0.05/6 and past them (a real
/// change's is far below). Where a ratio is 0 or unbounded (no logarithm), the share of
/// resamples on the far side of no change, (far + 1)/(R + 1) on each side.
fn bootstrap_p(estimate: Option<f64>, ratios: &[f64], blocks: f64) -> Option<f64> {
    let estimate = estimate.filter(|e| e.is_finite())?;
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    if estimate > 0.0 && logs.len() > 1 && logs.iter().all(|l| l.is_finite()) {
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let d = estimate.ln().abs();
        if sd == 0.0 {
            return Some(if d == 0.0 { 1.0 } else { 0.0 });
        }
        let z = d / sd;
        // The lower tail, doubled: 1 − cdf(z) would lose a tiny p to rounding.
        let p = if blocks > 1.0 {
            2.0 * t_cdf(-z * ((blocks - 1.0) / blocks).sqrt(), blocks - 1.0)
        } else {
            2.0 * normal_cdf(-z)
        };
        return (!p.is_nan()).then_some(p.min(1.0));
    }
    let below = ratios.iter().filter(|&&r| r <= 1.0).count();
    let above = ratios.iter().filter(|&&r| r >= 1.0).count();
    let far = below.min(above);
    Some((2.0 * (far + 1) as f64 / (ratios.len() + 1) as f64).min(1.0))
}

/// The change of a figure between several runs per side, each run one unit (its p99, its
/// req/s): the ratio of the sides' geometric means with Welch's t interval on the logarithms.
/// Needs at least two positive figures per side.
pub fn compare_runs(base: &[f64], new: &[f64], confidence: f64) -> Change {
    let samples = (base.len() as u64, new.len() as u64, Unit::Runs);
    let base_mean = geometric_mean(base);
    let new_mean = geometric_mean(new);
    let method = |df| Method::WelchLogT {
        degrees_of_freedom: df,
    };
    if base.len() < 2 || new.len() < 2 {
        let reason = format!(
            "{} base and {} new runs: comparing runs needs at least 2 per side",
            base.len(),
            new.len()
        );
        return Change::insufficient(
            base_mean,
            new_mean,
            method(f64::NAN),
            samples,
            confidence,
            reason,
        );
    }
    if base.iter().chain(new).any(|&x| x.is_nan() || x <= 0.0) {
        let reason = "a run's figure is 0 or missing, so no ratio".to_string();
        return Change::insufficient(
            base_mean,
            new_mean,
            method(f64::NAN),
            samples,
            confidence,
            reason,
        );
    }
    let (mb, vb) = log_mean_var(base);
    let (mn, vn) = log_mean_var(new);
    let (sb, sn) = (vb / base.len() as f64, vn / new.len() as f64);
    let se = (sb + sn).sqrt();
    let d = mn - mb;
    let (low, high, df, p) = if se == 0.0 {
        // Identical figures within each side: no spread to build an interval from.
        let r = d.exp();
        (r, r, f64::INFINITY, if d == 0.0 { 1.0 } else { 0.0 })
    } else {
        let df = (sb + sn).powi(2)
            / (sb.powi(2) / (base.len() - 1) as f64 + sn.powi(2) / (new.len() - 1) as f64);
        let t = t_quantile(1.0 - (1.0 - confidence) / 2.0, df);
        // Welch's test of no change, the one the interval inverts (lower tail, doubled).
        let p = 2.0 * t_cdf(-d.abs() / se, df);
        ((d - t * se).exp(), (d + t * se).exp(), df, p)
    };
    Change {
        base: base_mean,
        new: new_mean,
        estimate: Some(d.exp()),
        low: Some(low),
        high: Some(high),
        confidence,
        method: method(df),
        base_samples: samples.0,
        new_samples: samples.1,
        unit: Unit::Runs,
        verdict: if low.is_nan() || high.is_nan() {
            Verdict::Insufficient
        } else {
            verdict(low, high)
        },
        reason: (low.is_nan() || high.is_nan()).then(|| "no t quantile for these runs".into()),
        p_value: (!p.is_nan()).then_some(p.min(1.0)),
        correction: None,
    }
}

/// The geometric mean of positive figures (None if any is not positive or there are none).
fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| x.is_nan() || x <= 0.0) {
        return None;
    }
    Some(log_mean_var(xs).0.exp())
}

/// The mean and the sample variance (n − 1) of the logarithms.
fn log_mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().map(|x| x.ln()).sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x.ln() - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use hdrhistogram::Histogram;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The windowed merge gives exactly what merging the histograms themselves (each second
        /// as often as its weight) and asking `value_at_quantile` gives.
        #[test]
        fn a_resamples_percentile_is_the_merged_histograms(
            seconds in prop::collection::vec(
                prop::collection::vec(1u64..2_000_000, 0..60), 1..12),
            weights in prop::collection::vec(0u32..4, 12),
            q in prop_oneof![Just(0.5), Just(0.9), Just(0.99), Just(0.999), 0.01f64..0.999],
        ) {
            let histograms: Vec<Histogram<u64>> = seconds
                .iter()
                .map(|samples| {
                    let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
                    samples.iter().for_each(|&s| h.record(s).unwrap());
                    h
                })
                .collect();
            let weights = &weights[..histograms.len()];
            let mut merged = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            for (h, &w) in histograms.iter().zip(weights) {
                for _ in 0..w {
                    merged.add(h).unwrap();
                }
            }
            let mut table = Seconds::new(&histograms, 1);
            let ours = table.figure(Figure::Percentile(q), weights);
            if merged.is_empty() {
                prop_assert_eq!(ours, None);
            } else {
                prop_assert_eq!(ours, Some(merged.value_at_quantile(q) as f64));
            }
            // The window is reused for the same quantile: all ones, then the weights again.
            let ones = vec![1; histograms.len()];
            let _ = table.figure(Figure::Percentile(q), &ones);
            prop_assert_eq!(table.figure(Figure::Percentile(q), weights), ours);
            // Seconds merged into units of 3: the whole run's percentile is unchanged.
            let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            histograms.iter().for_each(|h| all.add(h).unwrap());
            let mut units = Seconds::new(&histograms, 3);
            let ones = vec![1; units.len()];
            let grouped = units.figure(Figure::Percentile(q), &ones);
            prop_assert_eq!(grouped, (!all.is_empty()).then(|| all.value_at_quantile(q) as f64));
            // A second keeps only what it recorded and reads as its histogram: seconds merged
            // are the merged histogram's, and the mean is `Histogram::mean`'s to the bit.
            let parts: Vec<Second> = histograms.iter().map(Second::of).collect();
            let whole = Second::of(&all);
            prop_assert_eq!(Second::merged(&parts.iter().collect::<Vec<_>>()), whole.clone());
            prop_assert_eq!(whole.mean().to_bits(), all.mean().to_bits());
            prop_assert_eq!(whole.buckets.len(), all.iter_recorded().count());
        }
    }

    #[test]
    fn block_weights_fill_the_run_once_over_in_blocks() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut weights = vec![0; 10];
        for _ in 0..100 {
            block_weights(4, &mut rng, &mut weights);
            assert_eq!(weights.iter().sum::<u32>(), 10);
        }
        // The expansion widens few blocks' intervals and fades with many.
        assert!(expanded_tail(0.025, 3.0) < 0.005);
        // A 30 s run in blocks of 4: 7.5 blocks, √(7.5/6.5)·t(0.975, 6.5) ≈ 2.58, tail ≈ 0.5 %.
        let thirty = expanded_tail(0.025, 7.5);
        assert!((thirty - 0.005).abs() < 0.0005, "{thirty}");
        assert!((expanded_tail(0.025, 1_000.0) - 0.025).abs() < 0.001);
    }
}
