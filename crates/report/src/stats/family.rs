//! Several figures judged at once: the family-wise correction of their verdicts.
//!
//! A comparison judges six figures of a run (req/s, p50, p90, p99, p99.9, the mean), each at
//! 95 %. Were the six independent, identical servers would show at least one "significant"
//! change 1 − 0.95⁶ ≈ 26 % of the time, and a gate failing on any would flake. Holm's step-down
//! procedure (Holm, 1979) keeps the chance of any false "significant" in the family at 5 %
//! whatever the dependence between the figures (they are far from independent: p90 and p99
//! move together), and rejects at least what Bonferroni does: the figures are ranked by their
//! p-values, the i-th smallest (from 0) is held to α / (m − i), and the first that misses
//! stops the rest. Equivalently each gets the adjusted p-value max over j ≤ i of
//! min(1, (m − j)·p₍ⱼ₎), significant when it is at most α.
//!
//! A figure stays significant only when its own 95 % interval also excludes no change: the
//! correction can only take a verdict away, never give one the interval does not support.
//! Figures that cannot be judged ([`Verdict::Insufficient`]) have no test and are not in the
//! family.
//!
//! - S. Holm, A simple sequentially rejective multiple test procedure, Scandinavian Journal
//!   of Statistics 6 (1979).

use serde::Serialize;

use super::{Change, Verdict};

/// Which correction a verdict went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Procedure {
    /// Holm's step-down procedure (Holm–Bonferroni).
    Holm,
}

/// The family-wise correction of one change's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correction {
    /// The procedure.
    pub procedure: Procedure,
    /// How many figures were judged together (the family's size, m).
    pub family: usize,
    /// The change's p-value adjusted for the family (Holm's step-down adjusted p).
    pub adjusted_p: f64,
    /// The family-wise error rate held to (0.05 at 95 %).
    pub alpha: f64,
    /// The verdict of this figure alone, by its own interval, before the correction.
    pub alone: Verdict,
}

impl Correction {
    /// The correction in words: `Holm over 6 figures`.
    pub fn describe(&self) -> String {
        match self.procedure {
            Procedure::Holm => format!("Holm over {} figures", self.family),
        }
    }
}

/// Corrects the verdicts of `changes`, judged together, by Holm's procedure. Each judged
/// change (not [`Verdict::Insufficient`]) gets its [`Correction`] and its corrected verdict;
/// a family of fewer than two needs none and is left as it is. A judged change without a
/// p-value counts in the family as p = 1 (it cannot be significant after the correction).
pub fn holm(changes: &mut [&mut Change]) {
    let mut judged: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].verdict != Verdict::Insufficient)
        .collect();
    let m = judged.len();
    if m < 2 {
        return;
    }
    let p = |c: &Change| c.p_value.filter(|p| !p.is_nan()).unwrap_or(1.0);
    judged.sort_by(|&a, &b| p(changes[a]).total_cmp(&p(changes[b])));
    let mut running = 0.0f64;
    for (rank, &i) in judged.iter().enumerate() {
        let c = &mut *changes[i];
        // The step-down's adjusted p never falls below an earlier one's: once a figure
        // misses its threshold, every later one does too.
        running = running.max(((m - rank) as f64 * p(c)).min(1.0));
        let alpha = 1.0 - c.confidence;
        let alone = c.verdict;
        c.verdict = if alone == Verdict::Significant && running <= alpha {
            Verdict::Significant
        } else {
            Verdict::WithinNoise
        };
        c.correction = Some(Correction {
            procedure: Procedure::Holm,
            family: m,
            adjusted_p: running,
            alpha,
            alone,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::compare_runs;

    /// A change of the given p-value alone, significant when p < 0.05 (its interval is then
    /// taken to exclude 1, as the test it inverts says).
    fn change(p: f64) -> Change {
        let mut c = compare_runs(&[100.0, 101.0], &[102.0, 103.0], 0.95);
        c.p_value = Some(p);
        c.verdict = if p < 0.05 {
            Verdict::Significant
        } else {
            Verdict::WithinNoise
        };
        c
    }

    fn corrected(ps: &[f64]) -> Vec<Change> {
        let mut changes: Vec<Change> = ps.iter().map(|&p| change(p)).collect();
        holm(&mut changes.iter_mut().collect::<Vec<_>>());
        changes
    }

    #[test]
    fn holm_steps_down_and_keeps_what_the_interval_does_not_support_out() {
        // One of six just under 0.05, the rest far above: a false alarm of the family.
        let c = corrected(&[0.6, 0.048, 0.9, 0.4, 0.7, 0.3]);
        assert_eq!(c[1].verdict, Verdict::WithinNoise);
        let k = c[1].correction.as_ref().unwrap();
        assert_eq!((k.family, k.alone), (6, Verdict::Significant));
        assert!((k.adjusted_p - 6.0 * 0.048).abs() < 1e-12, "{k:?}");
        assert_eq!(k.describe(), "Holm over 6 figures");
        // The step-down: 0.005·6 = 0.03, 0.011·5 = 0.055 > 0.05 stops it, and 0.012·4 =
        // 0.048 is held to the 0.055 before it (Bonferroni would keep only the first too;
        // here 0.009 would pass Holm's second step, 0.009·5 = 0.045, and not Bonferroni's).
        let c = corrected(&[0.011, 0.005, 0.012, 0.5, 0.8, 0.9]);
        let verdicts: Vec<Verdict> = c.iter().map(|c| c.verdict).collect();
        assert_eq!(verdicts[1], Verdict::Significant);
        assert_eq!(verdicts[0], Verdict::WithinNoise);
        assert_eq!(verdicts[2], Verdict::WithinNoise);
        assert!((c[2].correction.as_ref().unwrap().adjusted_p - 0.055).abs() < 1e-12);
        let c = corrected(&[0.009, 0.005, 0.5, 0.5, 0.8, 0.9]);
        assert_eq!(
            (c[0].verdict, c[1].verdict),
            (Verdict::Significant, Verdict::Significant)
        );
        // The correction never makes significant what its own interval did not.
        let mut c = corrected(&[1e-6, 0.5]);
        assert_eq!(c[0].verdict, Verdict::Significant);
        c[0].verdict = Verdict::WithinNoise;
        c[0].correction = None;
        holm(&mut c.iter_mut().collect::<Vec<_>>());
        assert_eq!(c[0].verdict, Verdict::WithinNoise);
        // Alone, or beside figures that could not be judged, there is no family to correct.
        let mut one = [change(0.04), compare_runs(&[1.0], &[1.0], 0.95)];
        holm(&mut one.iter_mut().collect::<Vec<_>>());
        assert_eq!(
            (one[0].verdict, &one[0].correction),
            (Verdict::Significant, &None)
        );
    }
}
