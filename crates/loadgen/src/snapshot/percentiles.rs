//! Latency percentiles of a histogram, with their 95 % intervals where the report has them.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Fastest.
    pub min: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: u64,
    /// 75th percentile.
    pub p75: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// 99.99th percentile.
    pub p9999: u64,
    /// Slowest.
    pub max: u64,
    /// Each percentile's 95 % confidence interval, where the report computed them (the run's
    /// `latency_us`); absent elsewhere (the generator never fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<Ci95>,
}

/// The 95 % confidence intervals of a run's latency percentiles, `[low, high]` µs each; null
/// for a percentile its samples cannot bound (the report says why beside it). Plain data:
/// `tailscope-report` computes it (`stats`), the generator only carries the type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ci95 {
    /// Median.
    pub p50: Option<[u64; 2]>,
    /// 75th percentile.
    pub p75: Option<[u64; 2]>,
    /// 90th percentile.
    pub p90: Option<[u64; 2]>,
    /// 95th percentile.
    pub p95: Option<[u64; 2]>,
    /// 99th percentile.
    pub p99: Option<[u64; 2]>,
    /// 99.9th percentile.
    pub p999: Option<[u64; 2]>,
    /// 99.99th percentile.
    pub p9999: Option<[u64; 2]>,
}

impl Ci95 {
    /// The interval of the percentile named as in the JSON (`p99`, `p999`).
    pub fn get(&self, name: &str) -> Option<[u64; 2]> {
        *self.slot_ref(name)?
    }

    /// The place of the percentile named `name`'s interval.
    pub fn slot(&mut self, name: &str) -> Option<&mut Option<[u64; 2]>> {
        Some(match name {
            "p50" => &mut self.p50,
            "p75" => &mut self.p75,
            "p90" => &mut self.p90,
            "p95" => &mut self.p95,
            "p99" => &mut self.p99,
            "p999" => &mut self.p999,
            "p9999" => &mut self.p9999,
            _ => return None,
        })
    }

    fn slot_ref(&self, name: &str) -> Option<&Option<[u64; 2]>> {
        Some(match name {
            "p50" => &self.p50,
            "p75" => &self.p75,
            "p90" => &self.p90,
            "p95" => &self.p95,
            "p99" => &self.p99,
            "p999" => &self.p999,
            "p9999" => &self.p9999,
            _ => return None,
        })
    }
}

impl Percentiles {
    /// The percentiles of a histogram; all zero when it is empty.
    ///
    /// The same figures as hdrhistogram's `mean`, `stdev` and `value_at_quantile`, in three
    /// passes over the counts rather than ten: the run's loop takes them twice a tick, and
    /// under `taskset` it shares the generator's CPU (a 100 ms tick's work at -q 100000 was
    /// ~1.3 ms of CPU 1, a third of it `mean` and `stdev`, which walks the counts twice).
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        const QUANTILES: [f64; 7] = [0.50, 0.75, 0.90, 0.95, 0.99, 0.999, 0.9999];
        let mut q = [0u64; QUANTILES.len()];
        for (slot, v) in q.iter_mut().zip(h.value_at_quantiles(QUANTILES)) {
            *slot = v;
        }
        let total = h.len() as f64;
        // hdrhistogram's `mean` and `stdev`, summed in the same order (the same f64s).
        let mean = h.iter_recorded().fold(0.0_f64, |sum, v| {
            sum + h.median_equivalent(v.value_iterated_to()) as f64 * v.count_at_value() as f64
                / total
        });
        let squares = h.iter_recorded().fold(0.0_f64, |sum, v| {
            let dev = h.median_equivalent(v.value_iterated_to()) as f64 - mean;
            sum + (dev * dev) * v.count_since_last_iteration() as f64
        });
        Percentiles {
            min: h.min(),
            mean,
            stdev: (squares / total).sqrt(),
            p50: q[0],
            p75: q[1],
            p90: q[2],
            p95: q[3],
            p99: q[4],
            p999: q[5],
            p9999: q[6],
            max: h.max(),
            ci95: None,
        }
    }

    /// These figures, none above `ceiling`: a part's figures (a request name's) bounded by
    /// the whole run's slowest. A part's histogram may keep fewer significant figures than
    /// the run's, and each reads the top of its bucket: without the bound a name's max read
    /// above the run's max, which no request of it can be.
    pub fn capped(self, ceiling: u64) -> Percentiles {
        let cap = |v: u64| v.min(ceiling);
        Percentiles {
            min: cap(self.min),
            mean: self.mean.min(ceiling as f64),
            p50: cap(self.p50),
            p75: cap(self.p75),
            p90: cap(self.p90),
            p95: cap(self.p95),
            p99: cap(self.p99),
            p999: cap(self.p999),
            p9999: cap(self.p9999),
            max: cap(self.max),
            ..self
        }
    }
}
