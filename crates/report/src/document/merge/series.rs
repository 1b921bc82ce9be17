//! The merged clock: each run's seconds shifted by its start (to the whole second) and summed,
//! each second's percentiles from the sum of its histograms, and the slowest requests of all.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::super::{encoded, Generator, Report, SlowRequest};
use super::{add, decode, SECOND_ALIGN_WARN_S};
use tailscope_loadgen::error::Error;
use tailscope_loadgen::snapshot::{Percentiles, TimePoint};

/// The reports' seconds and slowest requests on the merged clock.
pub(super) struct Series<'a> {
    /// The runs whose seconds were moved further than [`SECOND_ALIGN_WARN_S`], and by how much.
    pub misaligned: Vec<(&'a str, f64)>,
    /// The seconds, summed.
    pub timeseries: Vec<TimePoint>,
    /// Each second's histogram, encoded.
    pub second_histograms: Vec<String>,
    /// The slowest requests of all, as many as the report that kept most.
    pub slowest: Vec<SlowRequest>,
}

/// Puts the reports' seconds and slowest requests on the clock that starts at `start`.
pub(super) fn series<'a>(
    reports: &'a [(String, Report)],
    generators: &[&Generator],
    start: f64,
) -> Result<Series<'a>, Error> {
    // Each run's seconds move onto the merged clock by its start, rounded to the whole
    // second: a run's second can only be added whole into one merged second. What the
    // rounding moved a run by (up to 0.5 s) is warned about below.
    let shifts: Vec<i64> = generators
        .iter()
        .map(|g| (g.started_unix_s - start).round() as i64)
        .collect();
    let misaligned: Vec<(&str, f64)> = reports
        .iter()
        .zip(generators)
        .zip(&shifts)
        .map(|(((name, _), g), &shift)| {
            (
                name.as_str(),
                (g.started_unix_s - start - shift as f64).abs(),
            )
        })
        .filter(|&(_, off)| off > SECOND_ALIGN_WARN_S)
        .collect();

    // Time series: each run's seconds shifted, and summed; each second's percentiles from the
    // sum of its histograms.
    struct Second {
        point: TimePoint,
        whole: bool,
        latency: Option<Histogram<u64>>,
    }
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    for ((name, r), &shift) in reports.iter().zip(&shifts) {
        for (p, h) in r.timeseries.iter().zip(&r.second_histograms) {
            let key = shift + p.t_s.ceil() as i64;
            let s = seconds.entry(key).or_insert_with(|| Second {
                point: TimePoint {
                    // Where the second starts: a partial point is dated when its data ends.
                    t_s: key as f64 - 1.0,
                    partial: false,
                    requests: 0,
                    errors: 0,
                    timeouts: 0,
                    unfinished: 0,
                    retransmits: 0,
                    p50_us: 0,
                    p99_us: 0,
                    max_us: 0,
                    outliers: 0,
                    generator_lag_us: 0,
                    cpu_busy_pct: Vec::new(),
                    connections: Default::default(),
                },
                whole: false,
                latency: None,
            });
            let q = &mut s.point;
            q.requests += p.requests;
            q.errors += p.errors;
            q.timeouts += p.timeouts;
            q.unfinished += p.unfinished;
            q.retransmits += p.retransmits;
            q.outliers += p.outliers;
            q.generator_lag_us = q.generator_lag_us.max(p.generator_lag_us);
            q.connections.add(&p.connections);
            if p.partial {
                // Dated when the data ends, unless a whole second of another run covers it.
                q.t_s = if s.whole {
                    q.t_s
                } else {
                    (shift as f64 + p.t_s).max(q.t_s)
                };
            } else {
                s.whole = true;
                q.t_s = key as f64;
            }
            add(&mut s.latency, decode(name, "per-second latency", h)?);
        }
    }
    let mut timeseries = Vec::with_capacity(seconds.len());
    let mut second_histograms = Vec::with_capacity(seconds.len());
    for (_, mut s) in seconds {
        let h = s.latency.expect("every second has a histogram");
        let p = Percentiles::of(&h);
        s.point.p50_us = p.p50;
        s.point.p99_us = p.p99;
        s.point.max_us = p.max;
        s.point.partial = !s.whole;
        second_histograms.push(encoded(&h).data);
        timeseries.push(s.point);
    }

    // The slowest requests of all, on the merged clock: shifted as their run's seconds are,
    // so each falls in the merged second that counts it.
    let keep = reports
        .iter()
        .map(|(_, r)| r.slowest.len())
        .max()
        .unwrap_or(0);
    let mut slowest: Vec<_> = reports
        .iter()
        .zip(&shifts)
        .flat_map(|((_, r), &shift)| {
            r.slowest.iter().cloned().map(move |mut s| {
                s.at_s += shift as f64;
                s
            })
        })
        .collect();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.latency_us));
    slowest.truncate(keep);

    Ok(Series {
        misaligned,
        timeseries,
        second_histograms,
        slowest,
    })
}
