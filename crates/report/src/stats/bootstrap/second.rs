//! One second of a run as the bootstrap reads it, and a run's seconds gathered into the
//! units the bootstrap resamples.

use hdrhistogram::Histogram;

use super::{group_for, interval_of, BootstrapOptions, Estimate, Figure, Insufficient, Seconds};

/// One second's latency as the bootstrap reads it: the buckets it recorded, (highest
/// equivalent value, median equivalent value, count), ascending. A full `Histogram` at a run's
/// bounds holds ~140 KB of counts whatever it recorded: a 40-minute soak's seconds decoded at
/// once took ~500 MB at the end of the run (issue 38). This holds what was recorded, a few KB.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    pub(super) buckets: Vec<(u64, u64, u64)>,
    len: u64,
}

impl Second {
    /// The recorded buckets of `h`.
    pub fn of(h: &Histogram<u64>) -> Second {
        Second {
            buckets: h
                .iter_recorded()
                .map(|b| {
                    let v = b.value_iterated_to();
                    (v, h.median_equivalent(v), b.count_at_value())
                })
                .collect(),
            len: h.len(),
        }
    }

    /// The samples it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mean as `Histogram::mean` computes it (the same terms, in the same order).
    pub(super) fn mean(&self) -> f64 {
        if self.len == 0 {
            return 0.0;
        }
        self.buckets
            .iter()
            .fold(0.0_f64, |total, &(_, median, count)| {
                total + median as f64 * count as f64 / self.len as f64
            })
    }

    /// `seconds` merged into one (the buckets of one run share its grid).
    pub(super) fn merged(seconds: &[&Second]) -> Second {
        let mut all: Vec<(u64, u64, u64)> = seconds
            .iter()
            .flat_map(|s| s.buckets.iter().copied())
            .collect();
        all.sort_unstable_by_key(|b| b.0);
        let mut buckets: Vec<(u64, u64, u64)> = Vec::with_capacity(all.len());
        for b in all {
            match buckets.last_mut() {
                Some(last) if last.0 == b.0 => last.2 += b.2,
                _ => buckets.push(b),
            }
        }
        // Room for every second's buckets was made; the distinct ones are a few of them (a
        // unit of 85 seconds kept 1.4 MB for some 50 KB, 250 MB for a 6-hour run's units).
        buckets.shrink_to_fit();
        Second {
            buckets,
            len: seconds.iter().map(|s| s.len).sum(),
        }
    }
}

/// What the bootstrap takes as a second: a [`Second`], or a histogram read as one.
pub trait AsSecond {
    /// It as a [`Second`].
    fn as_second(&self) -> std::borrow::Cow<'_, Second>;
}

impl AsSecond for Second {
    fn as_second(&self) -> std::borrow::Cow<'_, Second> {
        std::borrow::Cow::Borrowed(self)
    }
}

impl AsSecond for Histogram<u64> {
    fn as_second(&self) -> std::borrow::Cow<'_, Second> {
        std::borrow::Cow::Owned(Second::of(self))
    }
}

/// A run's seconds merged, as they are read, into the units the bootstrap resamples
/// ([`group_for`] their number to a unit, at most [`super::MAX_UNITS`] units), rather than
/// held one by one: a second of widely spread latencies holds some 700 buckets (17 KB), and a
/// 6-hour run's seconds held at once took 370 MB at the end of the run, its table another
/// 250 MB (issue 38). The intervals are those of [`super::figure_interval`] over the seconds
/// themselves, to the bit: the units are the same, merged by the same function.
#[derive(Debug, Clone, Default)]
pub struct Units {
    units: Vec<Second>,
    /// Seconds to a whole unit (the last may hold fewer).
    group: usize,
    /// The seconds gathered.
    seconds: usize,
    /// The seconds of the unit being filled.
    filling: Vec<Second>,
}

impl Units {
    /// Ready for a run of `seconds` seconds.
    pub fn for_run(seconds: usize) -> Units {
        Units {
            group: group_for(seconds),
            ..Units::default()
        }
    }

    /// Adds the next second.
    pub fn push(&mut self, second: Second) {
        self.seconds += 1;
        if self.group <= 1 {
            self.units.push(second);
            return;
        }
        self.filling.push(second);
        if self.filling.len() == self.group {
            self.close_unit();
        }
    }

    fn close_unit(&mut self) {
        if !self.filling.is_empty() {
            let unit = Second::merged(&self.filling.iter().collect::<Vec<_>>());
            self.units.push(unit);
            self.filling.clear();
        }
    }
}

/// What a run's intervals are taken over: its seconds one by one, or gathered into [`Units`].
pub trait RunSeconds {
    /// How many seconds.
    fn seconds(&self) -> usize;

    /// A figure with its interval, as [`super::figure_interval`] gives it over the seconds.
    fn figure_interval(
        &self,
        figure: Figure,
        options: &BootstrapOptions,
    ) -> Result<Estimate, Insufficient>;
}

impl<S: AsSecond> RunSeconds for [S] {
    fn seconds(&self) -> usize {
        self.len()
    }

    fn figure_interval(
        &self,
        figure: Figure,
        options: &BootstrapOptions,
    ) -> Result<Estimate, Insufficient> {
        super::figure_interval(self, figure, options)
    }
}

impl RunSeconds for Units {
    fn seconds(&self) -> usize {
        self.seconds
    }

    fn figure_interval(
        &self,
        figure: Figure,
        options: &BootstrapOptions,
    ) -> Result<Estimate, Insufficient> {
        let filling = (!self.filling.is_empty())
            .then(|| Second::merged(&self.filling.iter().collect::<Vec<_>>()));
        let units: Vec<&Second> = self.units.iter().chain(filling.as_ref()).collect();
        let group = self.group.max(1) as u64;
        let seconds = self.seconds as u64;
        let spans = (0..units.len() as u64)
            .map(|i| group.min(seconds - i * group))
            .collect();
        let table = Seconds::of_units(&units, spans, self.group.max(1));
        interval_of(table, self.seconds, figure, options)
    }
}
