//! Whether a run held still: a drift or a step in its per-second throughput or p99 is warned
//! of, with when and how much (the tests are `crate::stats::stationarity`'s: Mann–Kendall
//! with Sen's slope, the CUSUM's step; each only when significant and at least 10 % of the
//! median). A run shorter than the tests need gets no warning: it was not judged.

use super::fmt::fmt_rate;
use super::{fmt_us, Report};
use crate::stats::stationarity::{stationarity, Stationarity, StationarityOptions};

/// One per-second figure of the run, as the warning names it and writes its values.
struct Figure {
    name: &'static str,
    series: Vec<f64>,
    show: fn(f64) -> String,
}

impl Report {
    /// The warnings of a run whose per-second throughput or p99 drifted or stepped.
    pub(super) fn stationarity_warnings(&self) -> Vec<String> {
        // Whole seconds only: the last, partial one has fewer requests by its length.
        let seconds: Vec<_> = self.timeseries.iter().filter(|p| !p.partial).collect();
        let mut figures = vec![Figure {
            name: "p99 per second",
            series: seconds
                .iter()
                .map(|p| match p.p99_us {
                    0 => f64::NAN,
                    v => v as f64,
                })
                .collect(),
            show: |v| fmt_us(v.round() as u64),
        }];
        // A rate changed on purpose (the dashboard's + and -) moves the throughput: not a
        // drift of the server's.
        if self.rate_changes.is_empty() {
            figures.insert(
                0,
                Figure {
                    name: "throughput",
                    series: seconds.iter().map(|p| p.requests as f64).collect(),
                    show: |v| format!("{} req/s", fmt_rate(v)),
                },
            );
        }
        let start_of = |i: usize| {
            // A point's t_s is the end of its second.
            seconds.get(i).map_or(0.0, |p| (p.t_s - 1.0).max(0.0))
        };
        let options = StationarityOptions::default();
        figures
            .iter()
            .filter_map(|f| {
                let show = f.show;
                match stationarity(&f.series, &options) {
                    Stationarity::Step(s) => Some(format!(
                        "{} stepped from {} to {}{} at {:.0} s: the run's figures mix two regimes (look at the time series; measure each apart)",
                        f.name,
                        show(s.before),
                        show(s.after),
                        s.change.map_or(String::new(), |c| format!(" ({})", signed_pct(c))),
                        start_of(s.at_s)
                    )),
                    Stationarity::Drift(d) => Some(format!(
                        "{} drifted from {} to {} ({}) between {:.0} s and {:.0} s: the run did not hold still (warming up, filling, or degrading); the run's figures describe no one moment of it",
                        f.name,
                        show(d.start),
                        show(d.end),
                        signed_pct(d.change),
                        start_of(d.from_s),
                        start_of(d.to_s.saturating_sub(1)) + 1.0
                    )),
                    Stationarity::Stationary { .. } | Stationarity::TooShort { .. } => None,
                }
            })
            .collect()
    }
}

/// `+30 %`, `−12 %`.
fn signed_pct(change: f64) -> String {
    let pct = (change * 100.0).round();
    if pct < 0.0 {
        format!("−{} %", -pct)
    } else {
        format!("+{pct} %")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Report;
    use tailscope_loadgen::recorder::new_histogram;
    use tailscope_loadgen::snapshot::{Counters, RunTotals, TimePoint};
    use tailscope_loadgen::Plan;

    /// A report whose seconds had these (requests, p99 µs).
    fn report_of_seconds(seconds: Vec<(f64, f64)>) -> Report {
        let mut latency = new_histogram(Duration::from_secs(60));
        latency.record(1_000).unwrap();
        let mut totals = RunTotals::of_latency(
            Duration::from_secs(seconds.len() as u64),
            Counters::default(),
            latency,
        );
        totals.timeseries = seconds
            .iter()
            .enumerate()
            .map(|(i, &(requests, p99))| TimePoint {
                t_s: (i + 1) as f64,
                requests: requests.round() as u64,
                p50_us: 500,
                p99_us: p99.round() as u64,
                max_us: p99.round() as u64,
                ..TimePoint::default()
            })
            .collect();
        Report::new(&Plan::new("http://127.0.0.1:9/x").unwrap(), &totals)
    }

    /// A steady run gets no warning; one whose p99 and throughput step halfway gets one
    /// each, saying when and how much; one that drifts says so.
    #[test]
    fn steps_and_drifts_are_warned_of_and_steady_runs_are_not() {
        // 20 s, small noise around 1 000 req/s and a 2 ms p99.
        // ±5 %, scrambled (a splitmix64 step), so that no stretch of it trends.
        let noise = |i: usize| {
            let mut z = (i as u64)
                .wrapping_add(1)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as f64 / u64::MAX as f64 * 0.1 - 0.05
        };
        let steady = report_of_seconds(
            (0..20)
                .map(|i| (1_000.0 * (1.0 + noise(i)), 2_000.0 * (1.0 + noise(i + 3))))
                .collect(),
        );
        let stationary: Vec<_> = steady.stationarity_warnings();
        assert!(stationary.is_empty(), "{stationary:?}");

        let stepped = report_of_seconds(
            (0..20)
                .map(|i| {
                    let slow = if i >= 12 { 3.0 } else { 1.0 };
                    (1_000.0 / slow * (1.0 + noise(i)), 2_000.0 * slow)
                })
                .collect(),
        );
        let w = stepped.stationarity_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("throughput stepped from 991.5 req/s to 334.5 req/s (−66 %) at 12 s"),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("p99 per second stepped from 2.00ms to 6.00ms (+200 %) at 12 s"),
            "{w:?}"
        );

        let drifting = report_of_seconds(
            (0..30)
                .map(|i| (1_000.0 * (1.0 + noise(i)), 2_000.0 + 100.0 * i as f64))
                .collect(),
        );
        let w = drifting.stationarity_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("p99 per second drifted from 2.00ms to 4.90ms"),
            "{w:?}"
        );
        assert!(w[0].contains("between 0 s and 30 s"), "{w:?}");
    }
}
