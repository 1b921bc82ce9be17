//! Whether a run held still: a drift or a step in a per-second series (throughput, or a
//! percentile per second), and where a warm-up ends.

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use super::bootstrap::DEFAULT_SEED;
use super::normal_cdf;

/// A series shorter than this is too short to call stationary or not.
pub const MIN_SECONDS: usize = 10;

/// Mann–Kendall and Sen's slope are O(n²); a longer series is first averaged into this many
/// consecutive bins (a trend survives averaging).
const MAX_POINTS: usize = 600;

/// How to judge stationarity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StationarityOptions {
    /// The tests' significance level.
    pub alpha: f64,
    /// The smallest change worth a warning, relative to the series' median: 0.10 for 10 %.
    /// Per-second figures are correlated, which makes the tests see change too readily (their
    /// p-values assume independent seconds); this floor keeps them to changes that matter.
    pub min_change: f64,
    /// Permutations for the step's test.
    pub permutations: usize,
    /// The seed of the permutations' ChaCha8 generator.
    pub seed: u64,
}

impl Default for StationarityOptions {
    fn default() -> Self {
        StationarityOptions {
            alpha: 0.05,
            min_change: 0.10,
            permutations: 1000,
            seed: DEFAULT_SEED,
        }
    }
}

/// A monotonic drift over the series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// The first second of the drift (the series' start: the test is over the whole of it).
    pub from_s: usize,
    /// The second after the drift's last (the series' end).
    pub to_s: usize,
    /// Sen's slope: the median of the pairwise slopes, per second.
    pub slope_per_s: f64,
    /// The fitted figure at the start (Sen's line).
    pub start: f64,
    /// The fitted figure at the end.
    pub end: f64,
    /// The change from start to end relative to the series' median: 0.3 for +30 %.
    pub change: f64,
    /// Mann–Kendall's two-sided p-value.
    pub p_value: f64,
}

/// A step: the series' level changes at one second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The first second at the new level (0-based: the series' index).
    pub at_s: usize,
    /// The median before it.
    pub before: f64,
    /// The median from it on.
    pub after: f64,
    /// after/before − 1 (None where before is 0).
    pub change: Option<f64>,
    /// The permutation test's p-value for the CUSUM's range.
    pub p_value: f64,
}

/// Whether a series held still, and if not, when and how much it moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Stationarity {
    /// No drift nor step of at least the floor.
    Stationary {
        /// The series' length.
        seconds: usize,
    },
    /// A drift through the series.
    Drift(Drift),
    /// A step at one second.
    Step(Step),
    /// Too short to say.
    TooShort {
        /// The series' length.
        seconds: usize,
        /// [`MIN_SECONDS`].
        needed: usize,
    },
}

impl Stationarity {
    /// Whether the series passed (a too-short series did not: it was not judged).
    pub fn is_stationary(&self) -> bool {
        matches!(self, Stationarity::Stationary { .. })
    }
}

/// Judges a per-second series (throughput, or a percentile per second; NaN seconds, e.g. a
/// percentile of a second without samples, are left out).
///
/// A step is the CUSUM's extreme (Page 1954; Taylor 2000): with S_k the running sum of the
/// deviations from the mean, the level changes after the k that maximises |S_k|, and the range
/// max S − min S is tested against that of random permutations. It is reported when significant,
/// at least `min_change` of the median, and neither side of it drifts on its own. A drift is
/// Mann–Kendall's trend test with Sen's slope for its size. A significant step whose sides drift
/// and no overall trend is still reported as the step.
pub fn stationarity(series: &[f64], options: &StationarityOptions) -> Stationarity {
    // The seconds that have a figure, and where each is in the series, so that a step's second
    // is the series' own even when seconds before it had none.
    let (at, xs): (Vec<usize>, Vec<f64>) = series
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .unzip();
    if xs.len() < MIN_SECONDS {
        return Stationarity::TooShort {
            seconds: xs.len(),
            needed: MIN_SECONDS,
        };
    }
    let median = median(&xs);
    let floor = options.min_change * median.abs();
    let big_drift = |d: &Drift| d.p_value < options.alpha && (d.end - d.start).abs() >= floor;
    let step = cusum_step(&xs, options)
        .filter(|s| s.p_value < options.alpha && (s.after - s.before).abs() >= floor);
    let drift = trend(&xs).filter(big_drift);
    if let Some(mut step) = step {
        let sides_flat = [&xs[..step.at_s], &xs[step.at_s..]]
            .iter()
            .all(|side| trend(side).is_none_or(|d| !big_drift(&d)));
        if sides_flat || drift.is_none() {
            step.at_s = at[step.at_s];
            return Stationarity::Step(step);
        }
    }
    match drift {
        Some(drift) => Stationarity::Drift(Drift {
            from_s: at[0],
            to_s: at[at.len() - 1] + 1,
            slope_per_s: drift.slope_per_s * (xs.len() - 1) as f64
                / (at[at.len() - 1] - at[0]) as f64,
            ..drift
        }),
        None => Stationarity::Stationary { seconds: xs.len() },
    }
}

/// Mann–Kendall's test and Sen's slope over the series (None under 3 points).
fn trend(series: &[f64]) -> Option<Drift> {
    if series.len() < 3 {
        return None;
    }
    let (xs, width) = binned(series);
    let n = xs.len();
    let mut s = 0i64;
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            s += match xs[j].partial_cmp(&xs[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
            slopes.push((xs[j] - xs[i]) / (j - i) as f64);
        }
    }
    let nf = n as f64;
    let ties: f64 = tie_groups(&xs)
        .into_iter()
        .map(|t| t * (t - 1.0) * (2.0 * t + 5.0))
        .sum();
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    // The continuity correction moves S one step towards 0.
    let z = if var <= 0.0 {
        0.0
    } else {
        (s - s.signum()) as f64 / var.sqrt()
    };
    let p_value = 2.0 * (1.0 - normal_cdf(z.abs()));
    let slope = median(&slopes);
    let offsets: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| x - slope * i as f64)
        .collect();
    let start = median(&offsets);
    let end = start + slope * (nf - 1.0);
    let level = median(&xs);
    Some(Drift {
        from_s: 0,
        to_s: series.len(),
        slope_per_s: slope / width,
        start,
        end,
        change: if level == 0.0 {
            0.0
        } else {
            (end - start) / level.abs()
        },
        p_value,
    })
}

/// The series averaged into at most [`MAX_POINTS`] bins, and the seconds per bin.
fn binned(series: &[f64]) -> (Vec<f64>, f64) {
    if series.len() <= MAX_POINTS {
        return (series.to_vec(), 1.0);
    }
    let width = series.len().div_ceil(MAX_POINTS);
    let bins = series
        .chunks(width)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    (bins, width as f64)
}

/// The sizes of the groups of equal values (for Mann–Kendall's variance).
fn tie_groups(xs: &[f64]) -> Vec<f64> {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted
        .chunk_by(|a, b| a == b)
        .map(|g| g.len() as f64)
        .filter(|&t| t > 1.0)
        .collect()
}

/// The CUSUM's change point and its permutation p-value.
fn cusum_step(xs: &[f64], options: &StationarityOptions) -> Option<Step> {
    let (range, at) = cusum(xs);
    if range == 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut shuffled = xs.to_vec();
    let as_large = (0..options.permutations)
        .filter(|_| {
            shuffled.shuffle(&mut rng);
            cusum(&shuffled).0 >= range
        })
        .count();
    let before = median(&xs[..at]);
    let after = median(&xs[at..]);
    Some(Step {
        at_s: at,
        before,
        after,
        change: (before != 0.0).then(|| after / before - 1.0),
        p_value: (as_large + 1) as f64 / (options.permutations + 1) as f64,
    })
}

/// The range max S − min S of the running sums of deviations from the mean, and the index of
/// the first point after the largest |S_k| (the first second at the new level).
fn cusum(xs: &[f64]) -> (f64, usize) {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let (mut s, mut lo, mut hi) = (0.0f64, 0.0f64, 0.0f64);
    let (mut peak, mut at) = (0.0f64, 1);
    for (k, x) in xs[..xs.len() - 1].iter().enumerate() {
        s += x - mean;
        lo = lo.min(s);
        hi = hi.max(s);
        if s.abs() > peak {
            peak = s.abs();
            at = k + 1;
        }
    }
    (hi - lo, at)
}

/// The median (NaN for an empty slice).
fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Where a warm-up ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Warmup {
    /// The series settled: the seconds from `after_s` on are the steady part.
    Settled {
        /// The number of warm-up seconds to drop (0: none).
        after_s: usize,
        /// The series' length.
        seconds: usize,
    },
    /// The best truncation lies in the series' second half: it has not settled (yet).
    NotSettled {
        /// The series' length.
        seconds: usize,
    },
    /// Too short to say.
    TooShort {
        /// The series' length.
        seconds: usize,
        /// [`MIN_SECONDS`].
        needed: usize,
    },
}

/// The end of the warm-up of a per-second series by MSER (White 1997): drop the first d
/// seconds for the d in 0..=n/2 that minimises the squared standard error of the rest's mean,
/// Σ(x − x̄_d)² / (n − d)²; the series has settled when that d lies in the first half
/// (d < ⌊n/2⌋). Dropping a warm-up lowers the spread of the rest faster than it shortens it;
/// dropping steady seconds does not. Called again each second on the series so far, it ends a
/// warm-up live: the first call that says Settled gives the warm-up's length.
pub fn warmup_auto(series: &[f64]) -> Warmup {
    // Seconds without a figure (NaN: a percentile of a second without samples) are left out,
    // and the answer is given in the series' own seconds.
    let (at, xs): (Vec<usize>, Vec<f64>) = series
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .unzip();
    let n = xs.len();
    if n < MIN_SECONDS {
        return Warmup::TooShort {
            seconds: n,
            needed: MIN_SECONDS,
        };
    }
    // Centre on the mean so that the running sums of squares keep their precision.
    let mean = xs.iter().sum::<f64>() / n as f64;
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    let mut mser = vec![0.0; n];
    for d in (0..n).rev() {
        let x = xs[d] - mean;
        sum += x;
        sum_sq += x * x;
        let m = (n - d) as f64;
        mser[d] = (sum_sq - sum * sum / m).max(0.0) / (m * m);
    }
    let half = n / 2;
    let best = (0..=half)
        .min_by(|&a, &b| mser[a].total_cmp(&mser[b]))
        .unwrap_or(0);
    if best < half {
        Warmup::Settled {
            after_s: at[best],
            seconds: series.len(),
        }
    } else {
        Warmup::NotSettled {
            seconds: series.len(),
        }
    }
}
