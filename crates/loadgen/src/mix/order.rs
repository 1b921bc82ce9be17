//! The order of a mix's period: smooth weighted round robin (or, for many requests, the
//! same spread from a heap), and the fixed-seed generator of its shuffle.

use super::RequestSpec;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The number of positions of a period: the weights' sum over their gcd.
pub(super) fn period_of(requests: &[RequestSpec]) -> u64 {
    let g = requests
        .iter()
        .fold(0, |g, r| gcd(g, u64::from(r.weight)))
        .max(1);
    requests.iter().map(|r| u64::from(r.weight) / g).sum()
}

/// One period of smooth weighted round robin: request indices, each `weight / gcd` times.
/// Every step adds each request's weight to its credit and picks the one with the most
/// (the first on ties), which then pays the total back.
///
/// That costs the period × the requests; past [`SMOOTH_MAX_REQUESTS`] requests (a replayed
/// URL list) the period is laid out by [`spread_by_heap`] instead, in period × log(requests).
pub(crate) fn smooth_round_robin(weights: &[u32]) -> Vec<usize> {
    let g = weights.iter().fold(0, |g, &w| gcd(g, u64::from(w))).max(1);
    if weights.len() > SMOOTH_MAX_REQUESTS {
        let w: Vec<u64> = weights.iter().map(|&w| u64::from(w) / g).collect();
        return spread_by_heap(&w);
    }
    let w: Vec<i64> = weights.iter().map(|&w| (u64::from(w) / g) as i64).collect();
    let total: i64 = w.iter().sum();
    let mut credit = vec![0i64; w.len()];
    let mut order = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for i in 0..w.len() {
            credit[i] += w[i];
            if credit[i] > credit[best] {
                best = i;
            }
        }
        credit[best] -= total;
        order.push(best);
    }
    order
}

/// Up to this many requests, [`smooth_round_robin`] walks all of them at every step.
const SMOOTH_MAX_REQUESTS: usize = 64;

/// One period in which request i comes `w[i]` times, spread as evenly: the k-th turn of
/// request i falls at (k + ½) / w[i] of the period (Sainte-Laguë), the earliest next turn
/// taken first from a heap (the lower index on ties). Every turn of a period is below 1 and
/// every later one above, so each request comes exactly `w[i]` times.
fn spread_by_heap(w: &[u64]) -> Vec<usize> {
    use std::cmp::{Ordering, Reverse};
    use std::collections::BinaryHeap;
    /// Request `i`'s turn `(2k + 1) / (2 w)`, compared exactly by cross-multiplying.
    #[derive(PartialEq, Eq)]
    struct Turn {
        num: u64,
        den: u64,
        i: usize,
    }
    impl Ord for Turn {
        fn cmp(&self, o: &Self) -> Ordering {
            (u128::from(self.num) * u128::from(o.den))
                .cmp(&(u128::from(o.num) * u128::from(self.den)))
                .then(self.i.cmp(&o.i))
        }
    }
    impl PartialOrd for Turn {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    let total: u64 = w.iter().sum();
    let mut heap: BinaryHeap<Reverse<Turn>> = w
        .iter()
        .enumerate()
        .filter(|(_, &w)| w > 0)
        .map(|(i, &w)| {
            Reverse(Turn {
                num: 1,
                den: 2 * w,
                i,
            })
        })
        .collect();
    let mut order = Vec::with_capacity(total as usize);
    while order.len() < total as usize {
        let Some(Reverse(t)) = heap.pop() else { break };
        order.push(t.i);
        heap.push(Reverse(Turn {
            num: t.num + 2,
            ..t
        }));
    }
    order
}

/// SplitMix64: a fixed-seed generator for the shuffle (no dependency, same order in every
/// run and on every machine).
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift (bias below 2^-32 for the
    /// sizes here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The seed of `--url-order random`.
pub(super) const SHUFFLE_SEED: u64 = 0x7a11_5c09_e000_0021;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_round_robin_spreads_each_request_evenly() {
        assert_eq!(smooth_round_robin(&[5, 1, 1]), vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(smooth_round_robin(&[70, 20, 10]).len(), 10);
        let order = smooth_round_robin(&[7, 2, 1]);
        for (i, w) in [7, 2, 1].into_iter().enumerate() {
            assert_eq!(order.iter().filter(|&&r| r == i).count(), w);
        }
        assert_eq!(smooth_round_robin(&[3]), vec![0]);
        // A long list (a replayed log) is laid out by the heap: exact counts, spread.
        let weights: Vec<u32> = (0..500).map(|i| 1 + i % 40).collect();
        let order = smooth_round_robin(&weights);
        assert_eq!(
            order.len(),
            weights.iter().map(|&w| w as usize).sum::<usize>()
        );
        for (i, &w) in weights.iter().enumerate() {
            let at: Vec<usize> = (0..order.len()).filter(|&p| order[p] == i).collect();
            assert_eq!(at.len(), w as usize, "request {i}");
            // No two turns of one request closer than half its even spacing.
            let even = order.len() / w as usize;
            assert!(
                at.windows(2).all(|p| p[1] - p[0] >= even / 2),
                "request {i}: {at:?}"
            );
        }
        assert_eq!(spread_by_heap(&[5, 1, 1]), vec![0, 0, 0, 1, 2, 0, 0]);
    }
}
