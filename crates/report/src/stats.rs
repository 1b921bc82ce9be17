//! Numbers you can trust: how sure a figure is, whether two runs differ by more than their
//! noise, and whether a run held still.
//!
//! Every method here says what it rests on. A figure that its data cannot support is a typed
//! "cannot say" ([`CannotBound`], [`Verdict::Insufficient`]), never a bare number.
//!
//! # A percentile's interval from one histogram: order statistics ([`quantile_ci`])
//!
//! Of n independent samples of one distribution, the count below the true p-quantile is
//! Binomial(n, p) whatever the distribution, so the interval between two order statistics
//! [X(j), X(k)] holds the quantile with a probability the binomial gives. The ranks are exact
//! where the smaller side expects at most 400 samples and Le Boudec's normal approximation
//! j = ⌊np − z·√(np(1−p))⌋, k = ⌈np + z·√(np(1−p))⌉ + 1 beyond (Lancet uses the same). The HDR
//! histogram keeps each sample only as its bucket, so the bounds are widened outwards to their
//! buckets' edges: wider on each side by less than one bucket (under 0.1 % of the value at the
//! run histogram's 3 significant figures, under 1 % at the per-name histograms' 2), never
//! narrower, so the coverage stays at least the stated one.
//!
//! *Assumes* the samples are independent and identically distributed. *Cannot promise*
//! coverage when they are not, and in a load test they are not quite: requests queue behind one
//! another (closed loop through the connection, open loop through the server's queues), so a
//! slow moment produces a run of slow samples and the effective sample count is smaller than n.
//! The interval is then too narrow; the block bootstrap below is the one to trust for that,
//! and for comparing runs. A tail with too few samples beyond the quantile cannot be bounded at
//! all (p99.99 needs about 37 000 samples for a 95 % interval): that is [`CannotBound`], with
//! the counts to say so.
//!
//! # Intervals that allow for dependence: the block bootstrap over seconds ([`bootstrap`])
//!
//! The run's seconds are resampled in blocks of consecutive seconds (the circular block
//! bootstrap of Politis & Romano, 1992, after Künsch's moving blocks, 1989), by default
//! ⌈n^(1/3)⌉ seconds long (the rate of Hall, Horowitz & Jing, 1995), and the figure (a
//! percentile of the merged histogram, or the requests per second) is recomputed for each of
//! 2 000 resamples. The interval is the resamples' percentile interval (Efron) *expanded* for
//! few units (Hesterberg, 2015): the tails are taken where a t interval over the n/b blocks
//! would put them, √(k/(k−1))·t(k−1) instead of 1.96, since a short run has only a handful of
//! blocks and the plain percentile interval is then too narrow. Measured on 300 simulated
//! 30 s runs whose per-second level wanders (AR(1), 0.4 from second to second, 4 %; the test
//! module's `run`): the plain interval held the true req/s 86 % of the time, the expanded one
//! 94 %; for p99, 300 A/A pairs were within noise 94 % of the time plain, 98 % expanded (so
//! there it is conservative).
//! A comparison of two runs resamples each run independently and takes the ratio new/base; it
//! is significant when its interval excludes 1 (a change of 0 %), and a regression gate fails
//! only when it is significant and the whole interval is beyond the threshold. The generator
//! is ChaCha8 from a seed that is recorded with the result, so a verdict can be reproduced
//! exactly.
//!
//! *Assumes* dependence dies out within a block (a few seconds) and the run is stationary (see
//! below); a run of fewer than 8 seconds is [`Verdict::Insufficient`]. *Cannot promise*: the
//! block bootstrap under-estimates the spread when seconds stay correlated for longer than a
//! block (a level that wanders for tens of seconds in a 30 s run), so its 95 % is then less;
//! it cannot see beyond the largest sample, so an extreme percentile is refused when its
//! order-statistics interval would be; and it says nothing of what differs between runs but
//! not within one (another machine state, another CPU placement): for that, compare several
//! runs per side, which the tests here checked on synthetic runs only.
//!
//! # Several runs per side ([`bootstrap::compare_runs`])
//!
//! Each run is one unit (its p99, its req/s). The change is the ratio of geometric means with
//! Welch's t interval on the logarithms (Welch, 1947), which holds from two runs per side and
//! is honestly wide with so few. A bootstrap over 2–5 runs would understate the spread (its
//! resamples have few distinct values). *Assumes* independent runs whose figure is roughly
//! log-normal from run to run. *Cannot promise* anything from one run per side (Insufficient).
//!
//! # Several figures at once: Holm's correction ([`family`])
//!
//! A comparison judges up to six figures, each at 95 %: identical servers would show some
//! "significant" change up to 26 % of the time. Each change also carries the two-sided
//! p-value of no change that its interval inverts (Welch's t test; for the bootstrap, the
//! change's logarithm over the resamples' spread of it, held to the expanded interval's t with
//! k − 1 degrees of freedom for k blocks), and Holm's step-down procedure (Holm, 1979) over the
//! figures judged together holds the family's false alarms to 5 %. *Costs* power where the
//! blocks are few: a +20 % p99 over 30 s synthetic runs passes the first of six's 0.05/6 on 17
//! of 20 pairs, where its own interval excluded no change on all 20.
//!
//! # Stationarity ([`stationarity`])
//!
//! A trend over the per-second series (throughput or a percentile) is tested with Mann–Kendall
//! (Mann, 1945; Kendall, 1975) and sized with Sen's slope (Sen, 1968); a step is located by the
//! CUSUM of deviations from the mean and tested by permutation (Page, 1954; Taylor, 2000).
//! Either is reported only when it is statistically significant *and* moves the figure by at
//! least 10 % of its median. `warmup_auto` truncates by MSER (White, 1997; Hoad, Robinson &
//! Davies, 2010): the warm-up is the first d seconds that minimise the marginal standard error
//! of the rest, and the series has settled only when that d lies in the first half of it.
//! *Assumes* for the tests' p-values independent seconds; per-second figures are correlated, which
//! makes both tests see change too readily, hence the 10 % floor. *Cannot promise* to tell a slow
//! drift from a long cycle shorter than the run, nor to find more than one step.
//!
//! # References
//!
//! - J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication Systems*, EPFL
//!   Press, 2010, ch. 2 (confidence intervals for the median and other quantiles, Theorem 2.1).
//! - M. Kogias, S. Mallon, E. Bugnion, *Lancet: A self-correcting Latency Measuring Tool*,
//!   USENIX ATC 2019.
//! - H. R. Künsch, The jackknife and the bootstrap for general stationary observations, Annals
//!   of Statistics 17 (1989); D. N. Politis, J. P. Romano, A circular block-resampling
//!   procedure for stationary data (1992); P. Hall, J. L. Horowitz, B.-Y. Jing, On blocking
//!   rules for the bootstrap with dependent data, Biometrika 82 (1995).
//! - B. Efron, R. Tibshirani, *An Introduction to the Bootstrap*, 1993 (percentile interval);
//!   T. C. Hesterberg, What teachers should know about the bootstrap, The American
//!   Statistician 69 (2015) (the expanded percentile interval).
//! - S. Holm, A simple sequentially rejective multiple test procedure, Scandinavian Journal of
//!   Statistics 6 (1979).
//! - B. L. Welch, The generalization of "Student's" problem when several different population
//!   variances are involved, Biometrika 34 (1947).
//! - H. B. Mann, Nonparametric tests against trend, Econometrica 13 (1945); M. G. Kendall, *Rank
//!   Correlation Methods*, 1975; P. K. Sen, Estimates of the regression coefficient based on
//!   Kendall's tau, JASA 63 (1968).
//! - E. S. Page, Continuous inspection schemes, Biometrika 41 (1954); W. A. Taylor,
//!   *Change-Point Analysis: A Powerful New Tool for Detecting Changes*, 2000.
//! - K. P. White Jr., An effective truncation heuristic for bias reduction in simulation output,
//!   Simulation 69 (1997); K. Hoad, S. Robinson, R. Davies, Automating warm-up length
//!   estimation, JORS 61 (2010).

pub mod bootstrap;
pub mod family;
pub mod quantile_ci;
pub mod stationarity;
#[cfg(test)]
mod tests;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

pub use bootstrap::{compare_runs, compare_seconds, figure_interval, BootstrapOptions, Figure};
pub use quantile_ci::{quantile_ci, CannotBound, QuantileCi};
pub use stationarity::{stationarity, warmup_auto, Stationarity, Warmup};

/// The usual confidence level: 95 %.
pub const CONFIDENCE: f64 = 0.95;

/// How an interval was obtained, with what reproduces it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Method {
    /// Order statistics of one histogram's samples (taken as independent).
    OrderStatistics,
    /// The circular block bootstrap over a run's seconds.
    CircularBlockBootstrap {
        /// Consecutive seconds per block.
        block_seconds: usize,
        /// The number of resamples.
        replicates: usize,
        /// The ChaCha8 seed that reproduces the resamples.
        seed: u64,
    },
    /// Welch's t interval on the logarithms of one figure per run.
    WelchLogT {
        /// The Welch–Satterthwaite degrees of freedom.
        degrees_of_freedom: f64,
    },
}

/// What the data upon which an interval rests are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Requests (samples of one histogram).
    Requests,
    /// Seconds of a run (resampled in blocks).
    Seconds,
    /// Whole runs.
    Runs,
}

/// Whether a change is larger than the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The interval of the change excludes no change.
    Significant,
    /// The interval of the change includes no change.
    WithinNoise,
    /// Too little data to judge (the reason is beside it).
    Insufficient,
}

/// A figure with its confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The point estimate from all the data.
    pub estimate: f64,
    /// The interval's lower bound.
    pub low: f64,
    /// The interval's upper bound.
    pub high: f64,
    /// The confidence level, 0.95 for a 95 % interval.
    pub confidence: f64,
    /// How the interval was obtained.
    pub method: Method,
    /// How many units the interval rests on.
    pub samples: u64,
    /// What those units are.
    pub unit: Unit,
}

/// Which way a figure gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Worse {
    /// Latencies, errors: a rise is a regression.
    Higher,
    /// Throughput: a fall is a regression.
    Lower,
}

/// The change of one figure from a base to a new run (or runs), as the ratio new/base with its
/// interval, and whether it is larger than the noise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The base's figure (None where it has none, e.g. no samples).
    pub base: Option<f64>,
    /// The new figure.
    pub new: Option<f64>,
    /// The ratio new/base from all the data (None where the base is 0 or missing).
    pub estimate: Option<f64>,
    /// The interval's lower bound on the ratio (None when insufficient).
    pub low: Option<f64>,
    /// The interval's upper bound on the ratio.
    pub high: Option<f64>,
    /// The confidence level.
    pub confidence: f64,
    /// How the interval was obtained.
    pub method: Method,
    /// Units (seconds or runs) of the base.
    pub base_samples: u64,
    /// Units of the new side.
    pub new_samples: u64,
    /// What the units are.
    pub unit: Unit,
    /// Whether the change is larger than the noise.
    pub verdict: Verdict,
    /// Why the verdict is [`Verdict::Insufficient`], for the report to print.
    pub reason: Option<String>,
    /// The two-sided p-value of "no change" for this figure alone (None when insufficient):
    /// what a family-wise correction ranks the figures by ([`family`]).
    pub p_value: Option<f64>,
    /// The family-wise correction this verdict went through, when the change was judged
    /// beside others ([`family::holm`]); `verdict` is then the corrected one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correction: Option<family::Correction>,
}

impl Change {
    /// The change in percent as (estimate, low, high): `+12 % (+8 … +16 %)`; None when there is
    /// no interval.
    pub fn percent(&self) -> Option<(f64, f64, f64)> {
        let pct = |r: f64| (r - 1.0) * 100.0;
        Some((pct(self.estimate?), pct(self.low?), pct(self.high?)))
    }

    /// Whether this is a regression a gate should fail on: significant, and the whole interval
    /// worse than `threshold_percent` (5.0 for 5 %) in the direction `worse`.
    pub fn regression_beyond(&self, threshold_percent: f64, worse: Worse) -> bool {
        let (Some((_, low, high)), Verdict::Significant) = (self.percent(), self.verdict) else {
            return false;
        };
        match worse {
            Worse::Higher => low > threshold_percent,
            Worse::Lower => high < -threshold_percent,
        }
    }

    /// A change that cannot be judged, with its reason.
    fn insufficient(
        base: Option<f64>,
        new: Option<f64>,
        method: Method,
        samples: (u64, u64, Unit),
        confidence: f64,
        reason: String,
    ) -> Change {
        Change {
            base,
            new,
            estimate: ratio(base, new),
            low: None,
            high: None,
            confidence,
            method,
            base_samples: samples.0,
            new_samples: samples.1,
            unit: samples.2,
            verdict: Verdict::Insufficient,
            reason: Some(reason),
            p_value: None,
            correction: None,
        }
    }
}

/// new/base, where both are known and the base is not 0.
fn ratio(base: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (base, new) {
        (Some(b), Some(n)) if b != 0.0 => Some(n / b),
        _ => None,
    }
}

/// The verdict on a ratio's interval: significant when it excludes 1.
fn verdict(low: f64, high: f64) -> Verdict {
    if low > 1.0 || high < 1.0 {
        Verdict::Significant
    } else {
        Verdict::WithinNoise
    }
}

/// The standard normal's quantile Φ⁻¹(p), p in (0, 1).
fn normal_quantile(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p)
}

/// The standard normal's distribution function Φ(x).
fn normal_cdf(x: f64) -> f64 {
    Normal::standard().cdf(x)
}

/// Student's t distribution function with `df` degrees of freedom (df > 0).
fn t_cdf(x: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.cdf(x),
        Err(_) => f64::NAN,
    }
}

/// Student's t quantile with `df` degrees of freedom (df > 0), p in (0, 1).
fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}
