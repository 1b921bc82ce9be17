//! Counts per (second of the run, key) that the stack samplers keep to the run's end: the
//! report compares the slow seconds, known only then, against the others, so no second can be
//! summed away. The seconds still being added to are a hash map; those before them are packed
//! into a list (16–24 B an entry, where the map spent 24–48 B with its empty slots), and the
//! dashboard's look at one second reads the open seconds, not the whole run's table. Measured
//! over 3 minutes the memory is no smaller (the list doubles as the map did: BENCHMARKS.md
//! "What a run grows by"); the scan a second that grew with the run is gone.

use std::collections::HashMap;
use std::hash::Hash;

/// Seconds within this of the newest one stay open: a sample or a wait of a second that is
/// over can still arrive (a drain comes every tick, a thread's wait is split at its end).
const OPEN_SECONDS: u32 = 3;

/// See the module's doc. `K` is what the counts are of (a stack, a thread, a way of waiting).
#[derive(Debug, Clone)]
pub(crate) struct PerSecond<K> {
    open: HashMap<(u32, K), u64>,
    /// The seconds before the open ones. A late addition to one of them goes to `open` again:
    /// a (second, key) may be in both, and every reader sums.
    sealed: Vec<(u32, K, u64)>,
    newest: u32,
}

impl<K> Default for PerSecond<K> {
    fn default() -> Self {
        PerSecond {
            open: HashMap::new(),
            sealed: Vec::new(),
            newest: 0,
        }
    }
}

impl<K: Copy + Eq + Hash + Ord> PerSecond<K> {
    /// Adds `n` to `key` in `second`.
    pub(crate) fn add(&mut self, second: u32, key: K, n: u64) {
        if second > self.newest {
            self.newest = second;
            self.seal();
        }
        *self.open.entry((second, key)).or_insert(0) += n;
    }

    /// Packs the open seconds that are no longer open.
    fn seal(&mut self) {
        let newest = self.newest;
        if !self.open.keys().any(|(s, _)| s + OPEN_SECONDS <= newest) {
            return;
        }
        let mut done: Vec<(u32, K, u64)> = Vec::new();
        self.open.retain(|&(s, k), &mut n| {
            let keep = s + OPEN_SECONDS > newest;
            if !keep {
                done.push((s, k, n));
            }
            keep
        });
        done.sort_unstable();
        self.sealed.extend(done);
    }

    /// Every (second, key, count), in no particular order; a (second, key) may come twice.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, K, u64)> + '_ {
        self.sealed
            .iter()
            .copied()
            .chain(self.open.iter().map(|(&(s, k), &n)| (s, k, n)))
    }

    /// The counts of `second`; a key may come twice. The open seconds' map alone for one of
    /// them (the dashboard asks for the second just over, once a second).
    pub(crate) fn of_second(&self, second: u32) -> impl Iterator<Item = (K, u64)> + '_ {
        let sealed = if second + OPEN_SECONDS > self.newest {
            &[][..]
        } else {
            // Packed in order of sealing, each batch sorted: a late addition makes a second's
            // entries come in two places, so the whole list is filtered.
            &self.sealed[..]
        };
        sealed
            .iter()
            .filter(move |e| e.0 == second)
            .map(|e| (e.1, e.2))
            .chain(
                self.open
                    .iter()
                    .filter(move |((s, _), _)| *s == second)
                    .map(|(&(_, k), &n)| (k, n)),
            )
    }

    /// Keeps only the counts `keep` accepts.
    pub(crate) fn retain(&mut self, keep: impl Fn(u32, K) -> bool) {
        self.open.retain(|&(s, k), _| keep(s, k));
        self.sealed.retain(|&(s, k, _)| keep(s, k));
    }

    /// The counts summed per (second, key), sorted.
    pub(crate) fn summed(&self) -> Vec<(u32, K, u64)> {
        let mut all: Vec<(u32, K, u64)> = self.iter().collect();
        all.sort_unstable_by_key(|a| (a.0, a.1));
        let mut out: Vec<(u32, K, u64)> = Vec::with_capacity(all.len());
        for (s, k, n) in all {
            match out.last_mut() {
                Some(last) if last.0 == s && last.1 == k => last.2 += n,
                _ => out.push((s, k, n)),
            }
        }
        out
    }
}

impl<K: Copy + Eq + Hash + Ord> PartialEq for PerSecond<K> {
    /// The same counts, however they are held.
    fn eq(&self, other: &Self) -> bool {
        self.summed() == other.summed()
    }
}

impl<K: Copy + Eq + Hash + Ord> FromIterator<(u32, K, u64)> for PerSecond<K> {
    fn from_iter<I: IntoIterator<Item = (u32, K, u64)>>(iter: I) -> Self {
        let mut out = PerSecond::default();
        for (s, k, n) in iter {
            out.add(s, k, n);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_seconds_are_packed_and_late_additions_still_count() {
        let mut p: PerSecond<u32> = PerSecond::default();
        for s in 0..10 {
            p.add(s, 7, 2);
            p.add(s, 8, 1);
        }
        // Seconds 0-6 are packed, 7-9 open.
        assert_eq!(p.sealed.len(), 14);
        assert_eq!(p.open.len(), 6);
        // A late sample of second 2 goes to the open map and is summed with the packed one.
        p.add(2, 7, 5);
        assert_eq!(p.of_second(2).map(|e| e.1).sum::<u64>(), 8);
        assert_eq!(p.of_second(9).collect::<Vec<_>>().len(), 2);
        let summed = p.summed();
        assert_eq!(summed.len(), 20);
        assert!(summed.contains(&(2, 7, 7)));
        assert_eq!(p.iter().map(|e| e.2).sum::<u64>(), 35);
        // Rebuilt from its entries (as a peer's list arrives): equal, though held otherwise.
        let again: PerSecond<u32> = p.iter().collect();
        assert_eq!(again, p);
        p.retain(|s, _| s != 2);
        assert_eq!(p.of_second(2).count(), 0);
        assert_eq!(p.iter().map(|e| e.2).sum::<u64>(), 27);
    }
}
