//! Suites that cancel drift: the targets' runs interleaved in rounds (file order first, then a
//! shuffled order each round, from a recorded seed), each median with its interval, and each
//! ratio to the baseline with its interval from the rounds' paired runs.
//!
//! A machine drifts during a suite (a thermal state, another job, a page cache filling): run
//! all of A and then all of B, and the drift is pinned on one of them. In rounds, every target
//! runs once per round, so a drift is shared; the shuffle keeps a fixed order (always A just
//! after the warm-up, always B second) from favouring one.

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// The seed used when the suite file names none; recorded in the JSON either way.
pub const DEFAULT_SEED: u64 = 0x5_0173;

/// How the rounds were ordered, as the suite's JSON records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// The ChaCha8 seed of the shuffles.
    pub seed: u64,
    /// Each round's order, as indices into the file's targets.
    pub order: Vec<Vec<usize>>,
}

/// The order of `targets` targets in each of `rounds` rounds: file order first, then each round
/// a shuffle by ChaCha8 from `seed`; every target exactly once per round.
pub fn round_order(targets: usize, rounds: usize, seed: u64) -> Rounds {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let order = (0..rounds)
        .map(|round| {
            let mut order: Vec<usize> = (0..targets).collect();
            if round > 0 {
                order.shuffle(&mut rng);
            }
            order
        })
        .collect();
    Rounds { seed, order }
}

/// The 95 % interval of a median from `values` (one a run) by order statistics: the count of
/// runs below the true median is Binomial(n, ½) whatever the distribution, so [X(j), X(n+1−j)]
/// holds it with probability 1 − 2·P(B < j); j is the largest rank that keeps that at least
/// 95 %. None with fewer than 6 runs, which no pair of order statistics bounds at 95 %
/// (with 5 the widest, [min, max], holds the median 93.75 % of the time).
pub fn median_interval(values: &[f64]) -> Option<[f64; 2]> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 6 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    // P(B ≤ k) for B ~ Binomial(n, ½), by the binomial coefficients in floating point.
    let below = |k: usize| -> f64 {
        let mut coefficient = 1.0f64;
        let mut sum = 0.0;
        for i in 0..=k {
            if i > 0 {
                coefficient *= (n - i + 1) as f64 / i as f64;
            }
            sum += coefficient;
        }
        sum * 0.5f64.powi(n as i32)
    };
    // The largest j (1-based) with coverage 1 − 2·P(B ≤ j − 1) ≥ 95 %.
    let j = (1..=n / 2)
        .take_while(|&j| 1.0 - 2.0 * below(j - 1) >= 0.95)
        .last()?;
    Some([v[j - 1], v[n - j]])
}

/// The ratio of a target's figure to the baseline's with its 95 % interval, from runs paired
/// by round (the i-th run of each is from the same round): the geometric mean of the per-round
/// ratios with Student's t on their logarithms. Pairing is what cancels drift: a round that
/// was slow for both moves neither the ratio nor its spread. None with fewer than 2 rounds
/// or a figure that is not positive.
pub fn paired_ratio(target: &[f64], baseline: &[f64]) -> Option<(f64, [f64; 2])> {
    let logs: Vec<f64> = target
        .iter()
        .zip(baseline)
        .map(|(&t, &b)| (t > 0.0 && b > 0.0).then(|| (t / b).ln()))
        .collect::<Option<Vec<f64>>>()?;
    let n = logs.len();
    if n < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = statrs::distribution::StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    let half =
        statrs::distribution::ContinuousCDF::inverse_cdf(&t, 0.975) * (var / n as f64).sqrt();
    Some((mean.exp(), [(mean - half).exp(), (mean + half).exp()]))
}

/// A ratio as the table writes it: `8.60× (8.10–9.20)`, or `no clear difference (0.97–1.04)`
/// where the interval spans 1; the bare ratio where there is no interval. Where the ratio is
/// the rounds' and the ratio of the medians (`medians`) lies on the other side of 1 as the
/// table shows them, both are said: the req/s column beside it would otherwise contradict it.
pub fn ratio_text(ratio: Option<f64>, interval: Option<[f64; 2]>, medians: Option<f64>) -> String {
    let text = plain_ratio_text(ratio, interval);
    let shown = |x: f64| (x * 100.0).round() / 100.0 - 1.0;
    match (ratio, medians) {
        (Some(r), Some(m)) if shown(r) * shown(m) < 0.0 => format!(
            "{text}; by the medians {m:.2}×: the rounds and the medians disagree on which is faster"
        ),
        _ => text,
    }
}

/// [`ratio_text`] without the medians.
fn plain_ratio_text(ratio: Option<f64>, interval: Option<[f64; 2]>) -> String {
    match (ratio, interval) {
        (Some(r), Some([lo, hi])) if lo <= 1.0 && hi >= 1.0 => {
            format!("no clear difference ({r:.2}×, {lo:.2}–{hi:.2})")
        }
        (Some(r), Some([lo, hi])) => format!("{r:.2}× ({lo:.2}–{hi:.2})"),
        (Some(r), None) => format!("{r:.2}×"),
        (None, _) => "n/a".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_runs_once_a_round_in_a_seeded_order() {
        let rounds = round_order(3, 25, 7);
        assert_eq!(
            rounds.order[0],
            vec![0, 1, 2],
            "the first round in file order"
        );
        for order in &rounds.order {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2], "{order:?}");
        }
        assert_eq!(round_order(3, 25, 7), rounds, "the seed reproduces it");
        assert_ne!(
            round_order(3, 25, 8).order,
            rounds.order,
            "another seed, another order"
        );
        // Shuffled: not every round in file order, and each target sometimes first.
        for first in 0..3 {
            assert!(
                rounds.order.iter().any(|o| o[0] == first),
                "{first} never first"
            );
        }
    }

    #[test]
    fn a_median_interval_needs_six_runs_and_is_exact_from_there() {
        assert_eq!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        // Six runs: only [min, max] covers 95 % (96.9 %).
        assert_eq!(
            median_interval(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]),
            Some([1.0, 6.0])
        );
        // 25 runs: ranks 8 and 18 (95.7 %), the textbook pair.
        let v: Vec<f64> = (1..=25).map(f64::from).collect();
        assert_eq!(median_interval(&v), Some([8.0, 18.0]));
    }

    #[test]
    fn a_paired_ratio_cancels_a_shared_drift() {
        // The baseline and the target drift together by ±30 % from round to round; the
        // target is always 2× the baseline: the ratio is 2 with a narrow interval.
        let baseline = [100.0, 130.0, 70.0, 110.0, 90.0];
        let target: Vec<f64> = baseline.iter().map(|b| b * 2.0 * 1.01).collect();
        let (r, [lo, hi]) = paired_ratio(&target, &baseline).unwrap();
        assert!(
            (r - 2.02).abs() < 1e-9 && lo > 2.0 && hi < 2.04,
            "{r} {lo} {hi}"
        );
        assert!(ratio_text(Some(r), Some([lo, hi]), Some(2.02)).starts_with("2.02× (2.02–2.02)"));
        let noisy = [1.0, 1.1, 0.9];
        let (r, ci) = paired_ratio(&noisy, &[1.0, 1.0, 1.0]).unwrap();
        assert!(ratio_text(Some(r), Some(ci), None).starts_with("no clear difference"));
        assert_eq!(paired_ratio(&[1.0], &[1.0]), None);
    }

    /// Rounds of 0.5×, 2× and 2× the baseline make a ratio of 1.26× while the medians make
    /// 100 against 200, 0.5×: the ratio cell said "1.26×" beside a req/s column saying the
    /// other way round (this test failed so); now it says both.
    #[test]
    fn a_ratio_the_medians_contradict_says_so() {
        let mut results = vec![
            crate::suite::SuiteResult::new("base", "/", None, Vec::new()),
            crate::suite::SuiteResult::new("other", "/", None, Vec::new()),
        ];
        let figures = |rps: f64| crate::suite::RunFigures {
            rps,
            requests: 100,
            errors: 0,
            non2xx: 0,
            p50_us: Some(100),
            p95_us: Some(200),
            p99_us: Some(300),
            p999_us: Some(400),
            max_us: Some(500),
            duration_s: 1.0,
            server_us_per_request: None,
            by_request: Default::default(),
            warnings: Vec::new(),
            causes: Vec::new(),
        };
        results[0].runs = [200.0, 50.0, 200.0].map(figures).to_vec();
        results[1].runs = [100.0, 100.0, 400.0].map(figures).to_vec();
        crate::suite::summarize(&mut results, Some("base"));
        let other = &results[1];
        assert!(
            (other.vs_baseline.unwrap() - 2f64.cbrt()).abs() < 1e-9,
            "{other:?}"
        );
        assert_eq!(other.vs_baseline_medians, Some(0.5));
        let table = crate::suite::markdown(&results, Some("base"));
        let row = table.lines().find(|l| l.starts_with("| other |")).unwrap();
        assert!(row.contains("| 100 |"), "{row}");
        assert!(
            row.contains("1.26×, ") && row.contains("; by the medians 0.50×: the rounds and the medians disagree on which is faster"),
            "{row}"
        );
        // Rounds and medians on the same side: the ratio alone.
        let agree = ratio_text(Some(1.26), Some([1.1, 1.4]), Some(1.3));
        assert_eq!(agree, "1.26× (1.10–1.40)");
    }
}
