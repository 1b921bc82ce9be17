//! The slow seconds of a run and the test that a share is clearly larger in them than in the
//! others: what the on-CPU and the off-CPU differentials share.

use std::collections::BTreeSet;

/// Least samples of a frame in the slow seconds before it can be claimed (for wall time:
/// milliseconds).
pub(crate) const MIN_SLOW_SAMPLES: u64 = 10;

/// Stacks listed in the report.
pub const TOP_STACKS: usize = 20;

/// The slow seconds of a run from its time series, `(second, outliers, max_us)` each (a
/// response counted in the second it finished): the seconds with outliers whose slowest
/// response is at least 3× the median second's slowest, and the seconds before each that its
/// slowest response spent waiting, taking it to have finished in the middle of its second (a
/// 600 ms stall from 1.53 s shows as a slow second 2; the server was stuck in second 1, and
/// the stall's end in second 2). On a busy machine every second has a few outliers; a spike
/// stands out of them. (A count of outliers 3× the median's, tried as a second sign, made
/// half the seconds of a Python server on a loaded machine slow: the count is noise there.)
pub fn slow_seconds(seconds: &[(u32, u64, u64)]) -> BTreeSet<u32> {
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    // The lower quartile, not the median, where that is lower: a stall every 1.5 s makes most
    // seconds of a short run slow, and their median one of them (a Go server's 900 ms
    // collections in three of five seconds made none stand out).
    let quartile = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 4).copied().unwrap_or(0)
    };
    let maxima: Vec<u64> = seconds.iter().map(|s| s.2).collect();
    let max_median = median(maxima.clone()).min(quartile(maxima));
    let mut slow = BTreeSet::new();
    for &(second, outliers, max_us) in seconds {
        if outliers == 0 || max_us < max_median.saturating_mul(3) {
            continue;
        }
        // When the slowest response was sent: the middle of its second less its latency.
        let middle_us = u64::from(second) * 1_000_000 + 500_000;
        let first = (middle_us.saturating_sub(max_us) / 1_000_000) as u32;
        slow.extend(first..=second);
    }
    slow
}

/// Whether `slow` of `slow_total` is clearly a larger share than `normal` of `normal_total`:
/// at least 10 points and twice as large, at least [`MIN_SLOW_SAMPLES`], and a two-proportion
/// z above 4 (a healthy run's noise claims nothing). Returns the two shares.
pub(crate) fn clearly_more(
    slow: u64,
    slow_total: u64,
    normal: u64,
    normal_total: u64,
) -> Option<(f64, f64)> {
    if slow_total == 0 || normal_total == 0 {
        return None;
    }
    let (ns, nn) = (slow_total as f64, normal_total as f64);
    let (ps, pn) = (slow as f64 / ns, normal as f64 / nn);
    let pooled = (slow + normal) as f64 / (ns + nn);
    let se = (pooled * (1.0 - pooled) * (1.0 / ns + 1.0 / nn)).sqrt();
    let z = if se > 0.0 { (ps - pn) / se } else { 0.0 };
    (slow >= MIN_SLOW_SAMPLES && ps - pn >= 0.10 && ps >= 2.0 * pn && z > 4.0).then_some((ps, pn))
}

pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spike_stands_out_of_the_noise() {
        // Every second has outliers (a busy machine); second 3 has a 300 ms one.
        let seconds: Vec<(u32, u64, u64)> = (0..8)
            .map(|s| (s, 1500, if s == 3 { 320_000 } else { 40_000 }))
            .collect();
        assert_eq!(slow_seconds(&seconds), BTreeSet::from([3]));
        // A one-second stall from 3.0 s finishes in second 4: seconds 3 and 4 are slow; one
        // of 600 ms from 1.53 s finishes in second 2: seconds 1 and 2.
        let stall: Vec<(u32, u64, u64)> = (0..8)
            .map(|s| (s, 10, if s == 4 { 1_050_000 } else { 40_000 }))
            .collect();
        assert_eq!(slow_seconds(&stall), BTreeSet::from([3, 4]));
        let short: Vec<(u32, u64, u64)> = (0..8)
            .map(|s| (s, 10, if s == 2 { 605_000 } else { 40_000 }))
            .collect();
        assert_eq!(slow_seconds(&short), BTreeSet::from([1, 2]));
        // Stalls in three seconds of five: the quiet ones set the bar.
        let periodic: Vec<(u32, u64, u64)> = (0..5)
            .map(|s| {
                (
                    s,
                    10,
                    if s % 2 == 1 || s == 4 {
                        300_000
                    } else {
                        40_000
                    },
                )
            })
            .collect();
        assert_eq!(slow_seconds(&periodic), BTreeSet::from([1, 3, 4]));
        // Many outliers alone are not a spike.
        let noisy: Vec<(u32, u64, u64)> = (0..8)
            .map(|s| (s, if s == 2 { 900 } else { 30 }, 40_000))
            .collect();
        assert!(slow_seconds(&noisy).is_empty());
        // A quiet run: the only second with outliers is slow.
        let quiet = [(0, 0, 900), (1, 4, 9_000), (2, 0, 1_000)];
        assert_eq!(slow_seconds(&quiet), BTreeSet::from([1]));
        assert!(slow_seconds(&[]).is_empty());
    }

    #[test]
    fn a_larger_share_is_claimed_only_when_clear() {
        // 40 % against 0 %: claimed.
        assert!(clearly_more(120, 300, 0, 700).is_some());
        // 12 % against 8 %: not twice.
        assert!(clearly_more(36, 300, 56, 700).is_none());
        // Too few samples, whatever the shares.
        assert!(clearly_more(5, 10, 0, 700).is_none());
        assert!(clearly_more(5, 0, 0, 700).is_none());
    }
}
