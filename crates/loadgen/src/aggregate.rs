//! Merges the workers' interval data into the run's totals, per-second points and snapshots.
//!
//! The [`Aggregator`] lives on the calling thread of [`crate::run`]: each worker sends it an
//! [`IntervalData`] once per tick, it adds that to the run's [`Histograms`] and
//! [`Counters`], files it under its second, makes a [`TimePoint`] of every second all
//! workers are past, and publishes a [`Snapshot`] when asked. At the end, [`Aggregator::finish`]
//! returns the [`RunTotals`].

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::conns::{ConnPoint, Gauges, HeldKind};
pub use interval_log::SecondSerializer;

mod interval_log;
pub mod seconds;
use crate::recorder::{
    new_histogram, ticks_per_second, Histograms, IntervalData, RequestFigures, Slowest,
};
use crate::snapshot::{
    copy_histogram, Counters, Percentiles, Phase, RequestLive, RequestPoint, RunTotals, Snapshot,
    TimePoint,
};
use seconds::SecondHistograms;

/// How many finished seconds a snapshot carries.
const RECENT_SECONDS: usize = 120;

struct SecondBucket {
    counters: Counters,
    latency: Histogram<u64>,
    /// Every worker's connections as of the latest interval filed under this second.
    conns: Gauges,
    /// A mix's figures per name index in this second (none for a name without requests in
    /// it); empty until a worker hands some over.
    by_request: Vec<Option<RequestFigures>>,
}

/// Merges workers' interval data into run totals, per-second points and snapshots.
pub struct Aggregator {
    highest: Duration,
    tick: Duration,
    /// Counters of the run so far.
    counters: Counters,
    /// Histograms of the run so far.
    histograms: Histograms,
    /// The finished seconds, in order.
    timeseries: Vec<TimePoint>,
    /// Each point's latency histogram, serialized (see [`RunTotals::second_histograms`]):
    /// the last ten minutes in memory, older ones in a spill file (see [`seconds`]).
    second_histograms: SecondHistograms,
    /// How many of `second_histograms` a snapshot has handed out (for the run's journal).
    seconds_handed: usize,
    last_tick: Counters,
    last_tick_latency: Histogram<u64>,
    seconds: BTreeMap<u64, SecondBucket>,
    slowest: Slowest,
    /// A mix's figures per name index for the run so far, as the workers hand them over
    /// (once a second).
    by_request: Vec<Option<RequestFigures>>,
    /// A mix's time series per name index (see [`RunTotals::request_series`]).
    request_series: Vec<Vec<RequestPoint>>,
    /// A mix's names as the run stands, for snapshots.
    request_live: Vec<RequestLive>,
    /// Which names get a time series (by name index).
    series_kept: Vec<bool>,
    /// Highest tick reported by each worker; a second is final once every worker is past it.
    worker_ticks: Vec<u64>,
    /// Seconds below this are points already; data arriving for them (a worker's last
    /// interval, taken just after a tick) goes into the first open second instead, so no
    /// second is made a point twice.
    open_from: u64,
    /// Each worker's connections at the end of its latest interval.
    worker_conns: Vec<Gauges>,
    /// The most connections open and opening at once.
    conns_peak: Gauges,
    /// Which held populations the run has (`--idle-conns`, `--slow-conns`).
    held_asked: [bool; 2],
    /// Buckets of seconds made points, emptied for the next seconds: a bucket's histograms
    /// (some 100 KiB with a mix's per name) are not allocated anew every second.
    spare_buckets: Vec<SecondBucket>,
    /// Serializes each second's histogram; kept for its buffers and compressor.
    serializer: SecondSerializer,
}

/// How many emptied buckets are kept: a second and the one after it are open at once.
const SPARE_BUCKETS: usize = 2;

impl SecondBucket {
    /// Empties it for another second, keeping its memory (a name's emptied figures count
    /// as none, see [`add_figures`]).
    fn reset(&mut self) {
        self.counters.reset();
        self.latency.reset();
        for f in self.by_request.iter_mut().flatten() {
            f.reset();
        }
    }
}

impl Aggregator {
    /// An aggregator for `workers` threads.
    pub fn new(workers: usize, highest: Duration, tick: Duration, slowest: usize) -> Self {
        Aggregator {
            highest,
            tick,
            counters: Counters::default(),
            histograms: Histograms::new(highest),
            timeseries: Vec::new(),
            second_histograms: SecondHistograms::new(),
            seconds_handed: 0,
            last_tick: Counters::default(),
            last_tick_latency: new_histogram(highest),
            seconds: BTreeMap::new(),
            slowest: Slowest::new(slowest),
            by_request: Vec::new(),
            request_series: Vec::new(),
            request_live: Vec::new(),
            series_kept: Vec::new(),
            worker_ticks: vec![0; workers],
            open_from: 0,
            worker_conns: vec![Gauges::default(); workers],
            conns_peak: Gauges::default(),
            held_asked: [false; 2],
            spare_buckets: Vec::new(),
            serializer: SecondSerializer::new(),
        }
    }

    /// Says how many held connections of each kind the run asks for (by
    /// [`crate::conns::HeldKind::index`]): the time series has their gauges where non-zero.
    pub fn with_held(mut self, asked: [u64; 2]) -> Self {
        self.held_asked = asked.map(|n| n > 0);
        self
    }

    /// Keeps figures per name for a mix with these names (none: a single request), and a
    /// time series for the names `series` marks (see [`crate::mix::series_names`]).
    pub fn with_requests(mut self, names: &[String], series: &[bool]) -> Self {
        self.by_request = vec![None; names.len()];
        self.request_series = vec![Vec::new(); names.len()];
        self.series_kept = series.to_vec();
        self.request_live = names
            .iter()
            .map(|n| RequestLive {
                name: n.as_str().into(),
                ..RequestLive::default()
            })
            .collect();
        self
    }

    /// Every worker's connections now (their latest intervals).
    fn conns_now(&self) -> Gauges {
        let mut sum = Gauges::default();
        for g in &self.worker_conns {
            sum.add(g);
        }
        sum
    }

    /// Merges one worker's interval.
    pub fn merge(&mut self, data: IntervalData) {
        self.histograms.add(&data.histograms);
        self.counters.merge(&data.counters);
        self.last_tick.merge(&data.counters);
        self.last_tick_latency
            .add(&data.histograms.latency)
            .expect("same bounds");
        for s in data.slowest.items() {
            self.slowest.offer(s.clone());
        }
        add_figures(&mut self.by_request, &data.by_request);
        let ticks_per_second = ticks_per_second(self.tick);
        // The interval ending at tick k covers (k-1, k]; it belongs to second (k-1)/tps,
        // unless it hands over the names' figures of a second that ended (after a late
        // tick: the interval straddles the boundary), which it is then filed under whole,
        // so that the names' counts of a second add up to the run's.
        let second = data.by_request_second.max(self.open_from);
        if data.by_request.iter().flatten().any(|f| !f.is_empty()) {
            let bucket = self.bucket(second);
            add_figures(&mut bucket.by_request, &data.by_request);
        }
        if let Some(g) = self.worker_conns.get_mut(data.worker) {
            *g = data.conns;
        }
        let conns = self.conns_now();
        self.conns_peak.raise_to(&conns);
        let bucket = self.bucket(second);
        bucket.conns = conns;
        bucket.counters.merge(&data.counters);
        bucket
            .latency
            .add(&data.histograms.latency)
            .expect("same bounds");
        if let Some(w) = self.worker_ticks.get_mut(data.worker) {
            *w = (*w).max(data.tick);
        }
        let done_before = self.worker_ticks.iter().min().copied().unwrap_or(0) / ticks_per_second;
        self.finalize_seconds(done_before);
        data.recycle();
    }

    /// The bucket of `second`, made on first use with the connections as they are now.
    fn bucket(&mut self, second: u64) -> &mut SecondBucket {
        let highest = self.highest;
        let conns = self.conns_now();
        let spare = &mut self.spare_buckets;
        self.seconds
            .entry(second)
            .or_insert_with(|| match spare.pop() {
                Some(mut b) => {
                    b.conns = conns;
                    b
                }
                None => SecondBucket {
                    counters: Counters::default(),
                    latency: new_histogram(highest),
                    conns,
                    by_request: Vec::new(),
                },
            })
    }

    /// A finished second's figures per name: a point for each name that had requests in
    /// it, and the names' live figures (their rate in it, their latency so far).
    fn finalize_requests(&mut self, t_s: f64, by_request: &[Option<RequestFigures>]) {
        for live in &mut self.request_live {
            live.last_second = Some(0);
        }
        for (i, f) in by_request.iter().enumerate() {
            let Some(f) = f else { continue };
            let requests = f.counters.requests();
            if requests == 0 {
                continue;
            }
            let p = (!f.latency.is_empty()).then(|| Percentiles::of(&f.latency));
            let kept = self.series_kept.get(i).copied().unwrap_or(false);
            if let Some(series) = self.request_series.get_mut(i).filter(|_| kept) {
                series.push(RequestPoint {
                    t_s,
                    requests,
                    errors: f.counters.error_total(),
                    timeouts: f.counters.timeouts(),
                    p50_us: p.map(|p| p.p50),
                    p99_us: p.map(|p| p.p99),
                    max_us: p.map(|p| p.max),
                });
            }
            if let (Some(live), Some(Some(run))) =
                (self.request_live.get_mut(i), self.by_request.get(i))
            {
                live.requests = run.counters.requests();
                live.errors = run.counters.error_total();
                live.latency = (!run.latency.is_empty()).then(|| Percentiles::of(&run.latency));
                live.last_second = Some(requests);
            }
        }
    }

    fn finalize_seconds(&mut self, before: u64) {
        while let Some(entry) = self.seconds.first_entry() {
            if *entry.key() >= before {
                break;
            }
            let (second, b) = entry.remove_entry();
            self.open_from = second + 1;
            let p = Percentiles::of(&b.latency);
            let run_p50 = if self.histograms.latency.is_empty() {
                0
            } else {
                self.histograms.latency.value_at_quantile(0.5)
            };
            let threshold = (run_p50 * 10).max(1_000);
            let outliers = if b.latency.is_empty() || b.latency.max() < threshold {
                0
            } else {
                b.latency.count_between(threshold, b.latency.max())
            };
            let bytes = self.serializer.serialize(&b.latency);
            self.second_histograms.push(bytes);
            self.timeseries.push(TimePoint {
                t_s: (second + 1) as f64,
                partial: false,
                requests: b.counters.requests(),
                errors: b.counters.error_total(),
                timeouts: b.counters.timeouts(),
                unfinished: b.counters.unfinished,
                retransmits: b.counters.retransmits + b.counters.syn_retransmits,
                p50_us: p.p50,
                p99_us: p.p99,
                max_us: p.max,
                outliers,
                generator_lag_us: b.counters.max_loop_lag_us,
                cpu_busy_pct: Vec::new(),
                connections: self.conn_point(&b),
            });
            if !self.request_live.is_empty() {
                self.finalize_requests((second + 1) as f64, &b.by_request);
            }
            if self.spare_buckets.len() < SPARE_BUCKETS {
                let mut b = b;
                b.reset();
                self.spare_buckets.push(b);
            }
        }
    }

    /// A second's connections: its gauges as of its last interval, its failures.
    fn conn_point(&self, b: &SecondBucket) -> ConnPoint {
        let held = |k: HeldKind| self.held_asked[k.index()].then(|| b.conns.held[k.index()]);
        let any_held = self.held_asked.contains(&true);
        let lost: u64 = b
            .counters
            .held
            .iter()
            .map(|h| h.connect_failures + h.closed_by_server + h.failed)
            .sum();
        ConnPoint {
            open: b.conns.load.open,
            opening: b.conns.load.opening,
            failed: b.counters.connect_failures,
            serving: b.conns.serving,
            idle_open: held(HeldKind::Idle).map(|g| g.open),
            slow_open: held(HeldKind::Slow).map(|g| g.open),
            held_opening: any_held.then(|| b.conns.held.iter().map(|g| g.opening).sum()),
            held_lost: any_held.then_some(lost),
        }
    }

    /// A snapshot of the run so far; starts a new "last tick".
    pub fn snapshot(
        &mut self,
        phase: Phase,
        elapsed: Duration,
        warmup_left: Duration,
        tick: Duration,
    ) -> Snapshot {
        let mut snap = self.new_snapshot();
        self.snapshot_into(&mut snap, phase, elapsed, warmup_left, tick);
        snap
    }

    /// An empty snapshot with this run's histogram bounds, for [`Self::snapshot_into`].
    pub fn new_snapshot(&self) -> Snapshot {
        Snapshot {
            phase: Phase::WarmingUp,
            elapsed: Duration::ZERO,
            warmup_left: Duration::ZERO,
            totals: Counters::default(),
            last_tick: Counters::default(),
            tick: Duration::ZERO,
            latency: Percentiles::default(),
            last_tick_latency: Percentiles::default(),
            histogram: new_histogram(self.highest),
            slowest: Vec::new(),
            // Its full size at once (some 25 KiB): grown a point at a time, it and the
            // copies made of it would reallocate every few seconds for two minutes.
            recent_seconds: Vec::with_capacity(RECENT_SECONDS),
            spike_counts: Default::default(),
            conns: Gauges::default(),
            conns_peak: Gauges::default(),
            by_request: Vec::new(),
            seconds_closed: 0,
            new_second_histograms: Vec::new(),
            checkpoint: None,
        }
    }

    /// [`Self::snapshot`] into `snap`, whose buffers are reused: once they have grown to
    /// the run's size (two minutes of seconds, the slowest list), a tick allocates nothing.
    pub fn snapshot_into(
        &mut self,
        snap: &mut Snapshot,
        phase: Phase,
        elapsed: Duration,
        warmup_left: Duration,
        tick: Duration,
    ) {
        snap.phase = phase;
        snap.elapsed = elapsed;
        snap.warmup_left = warmup_left;
        snap.totals.copy_from(&self.counters);
        // The last tick's counters go to the snapshot, and its old ones, emptied, start
        // the next tick.
        std::mem::swap(&mut snap.last_tick, &mut self.last_tick);
        self.last_tick.reset();
        snap.tick = tick;
        snap.latency = Percentiles::of(&self.histograms.latency);
        snap.last_tick_latency = Percentiles::of(&self.last_tick_latency);
        copy_histogram(&mut snap.histogram, &self.histograms.latency);
        snap.slowest.clear();
        snap.slowest.extend_from_slice(self.slowest.items());
        let recent = &self.timeseries[self.timeseries.len().saturating_sub(RECENT_SECONDS)..];
        snap.recent_seconds.clear();
        snap.recent_seconds.extend_from_slice(recent);
        snap.spike_counts = self.histograms.spike_counts();
        snap.conns = self.conns_now();
        snap.conns_peak = self.conns_peak;
        snap.by_request.clone_from(&self.request_live);
        // The seconds closed since the last snapshot, each with its histogram (a few hundred
        // bytes), so that the journal can write every second once.
        snap.seconds_closed = self.timeseries.len();
        self.second_histograms
            .copy_from(self.seconds_handed, &mut snap.new_second_histograms);
        let minute = |seconds: usize| seconds / crate::snapshot::CHECKPOINT_SECONDS;
        snap.checkpoint = (minute(self.second_histograms.len()) > minute(self.seconds_handed))
            .then(|| Box::new(self.histograms.clone()));
        self.seconds_handed = self.second_histograms.len();
        self.last_tick_latency.reset();
    }

    /// The run's totals, with every remaining second made a point. `duration` is the load
    /// window, `grace` how long in-flight requests took after it; the last point, when the
    /// data ends before its second does, is marked partial and dated when the data ends.
    pub fn finish(mut self, duration: Duration, grace: Duration) -> RunTotals {
        self.finalize_seconds(u64::MAX);
        let data_end_s = (duration + grace).as_secs_f64();
        if let Some(last) = self.timeseries.last_mut() {
            let second_start = last.t_s - 1.0;
            if data_end_s < last.t_s {
                last.partial = true;
                // Milliseconds, and never at or before the second's start: t_s stays unique.
                let whole = last.t_s;
                last.t_s = ((data_end_s * 1000.0).ceil() / 1000.0).max(second_start + 0.001);
                // The names' points of that second are dated as the run's.
                for p in self.request_series.iter_mut().filter_map(|s| s.last_mut()) {
                    if p.t_s == whole {
                        p.t_s = last.t_s;
                    }
                }
            }
        }
        let spill_failed = self
            .second_histograms
            .failure()
            .map(|why| format!("the spill file of the seconds' histograms failed ({why}): they were kept in memory from then on, nothing is lost"));
        let (second_histograms, unread) = self.second_histograms.into_vec();
        RunTotals {
            duration,
            counters: self.counters,
            histograms: self.histograms,
            timeseries: self.timeseries,
            second_histograms,
            notes: spill_failed.into_iter().chain(unread).collect(),
            slowest: self.slowest.items().to_vec(),
            by_request: self.by_request,
            request_series: self.request_series,
            grace,
            rate_changes: Vec::new(),
            stopped_early: false,
            engine: Default::default(),
            conns_peak: self.conns_peak,
        }
    }
}

/// Adds a hand-over of figures per name into `sum` (grown to its length).
fn add_figures(sum: &mut Vec<Option<RequestFigures>>, more: &[Option<RequestFigures>]) {
    if sum.len() < more.len() {
        sum.resize(more.len(), None);
    }
    for (mine, theirs) in sum.iter_mut().zip(more) {
        match (mine, theirs) {
            // A worker's emptied figures of a name (reused, not dropped) count as none.
            (_, Some(t)) if t.is_empty() => {}
            (Some(m), Some(t)) => m.add(t),
            (m @ None, Some(t)) => *m = Some(t.clone()),
            (_, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::error::ErrorKind;
    use crate::recorder::tests::finished;
    use crate::recorder::WorkerRecorder;

    #[test]
    fn aggregator_merges_workers_and_builds_seconds() {
        let base = Instant::now();
        let tick = Duration::from_millis(100);
        let mut agg = Aggregator::new(2, Duration::from_secs(60), tick, 3);
        for worker in 0..2 {
            let mut r = WorkerRecorder::new(worker, base, Duration::from_secs(60), 3);
            for i in 0..10u64 {
                r.record_finished(&finished(
                    base,
                    i * 10,
                    1 + i + worker as u64 * 100,
                    if i == 0 { 500 } else { 200 },
                ));
            }
            r.record_failed(
                ErrorKind::Reset,
                base,
                base + Duration::from_millis(3),
                1,
                true,
                None,
            );
            agg.merge(r.take_interval(base + Duration::from_millis(100), tick));
            // A second interval in the next second.
            r.record_finished(&finished(base, 1_050, 7, 200));
            agg.merge(r.take_interval(base + Duration::from_millis(1_100), tick));
        }
        let snap = agg.snapshot(Phase::Running, Duration::from_secs(1), Duration::ZERO, tick);
        assert_eq!(snap.totals.requests(), 2 * 12);
        assert_eq!(snap.totals.errors[ErrorKind::Reset.index()], 2);
        assert_eq!(snap.totals.status_codes, vec![(500, 2), (200, 20)]);
        assert_eq!(snap.totals.non2xx(), 2);
        assert_eq!(snap.slowest.len(), 3);
        assert_eq!(snap.slowest[0].latency_us, 110_000);
        assert!(snap
            .slowest
            .windows(2)
            .all(|w| w[0].latency_us >= w[1].latency_us));
        let totals = agg.finish(Duration::from_millis(1_200), Duration::ZERO);
        assert_eq!(totals.timeseries.len(), 2);
        assert_eq!(totals.timeseries[0].requests, 22);
        assert_eq!(totals.timeseries[0].errors, 2);
        assert_eq!(totals.timeseries[1].requests, 2);
        // HDR reports the top of the value's bucket: within 0.1 % of 7 ms.
        assert!((7_000..=7_007).contains(&totals.timeseries[1].max_us));
        assert_eq!(totals.histograms.latency.len(), 22);
        assert_eq!(totals.timeseries[1].t_s, 1.2);
        assert!(totals.timeseries[1].partial && !totals.timeseries[0].partial);
    }

    /// The run's histograms ride on a snapshot once a minute of closed seconds (for the
    /// journal), not on every one, and hold every request up to then.
    #[test]
    fn a_snapshot_carries_the_runs_histograms_once_a_minute() {
        let base = Instant::now();
        let tick = Duration::from_secs(1);
        let mut agg = Aggregator::new(1, Duration::from_secs(60), tick, 3);
        let mut r = WorkerRecorder::new(0, base, Duration::from_secs(60), 3);
        let mut carried = Vec::new();
        for s in 0..130u64 {
            r.record_finished(&finished(base, s * 1_000 + 10, 5, 200));
            agg.merge(r.take_interval(base + Duration::from_millis(s * 1_000 + 500), tick));
            let snap = agg.snapshot(Phase::Running, Duration::from_secs(s), Duration::ZERO, tick);
            if let Some(h) = &snap.checkpoint {
                carried.push((snap.seconds_closed, h.latency.len()));
            }
        }
        assert_eq!(carried.len(), 2, "{carried:?}");
        for (closed, requests) in carried {
            assert_eq!(closed % 60, 0, "carried after {closed} seconds");
            assert!(
                requests >= closed as u64,
                "{requests} requests after {closed} s"
            );
        }
    }

    /// A mix's names get a point a second (the seconds they had requests in), the dashboard
    /// their figures so far, and the run their totals, from hand-overs once a second.
    #[test]
    fn names_get_their_own_seconds() {
        let base = Instant::now();
        let tick = Duration::from_millis(100);
        let names: Vec<String> = vec!["fast".into(), "slow".into()];
        let mut agg = Aggregator::new(1, Duration::from_secs(60), tick, 3)
            .with_requests(&names, &[true, true]);
        let mut r = WorkerRecorder::new(0, base, Duration::from_secs(60), 3)
            .with_requests(names.clone().into());
        let mut mid_run = None;
        for k in 1..=25u64 {
            let mut f = finished(base, k * 100 - 50, 1, 200);
            r.record_finished(&f);
            if (11..=20).contains(&k) {
                f = finished(base, k * 100 - 90, 50, 200);
                f.request = 1;
                r.record_finished(&f);
            }
            let data = if k == 25 {
                r.take_last_interval(base + Duration::from_millis(2_460), tick)
            } else {
                r.take_interval(base + tick * k as u32, tick)
            };
            // Figures per name travel once a second (and at the end), not every tick.
            assert_eq!(
                data.by_request.iter().any(Option::is_some),
                k % 10 == 0 || k == 25,
                "tick {k}"
            );
            agg.merge(data);
            if k == 15 {
                mid_run = Some(agg.snapshot(Phase::Running, tick * 15, Duration::ZERO, tick));
            }
        }
        let live = &mid_run.unwrap().by_request;
        assert_eq!(&*live[0].name, "fast");
        assert_eq!((live[0].requests, live[0].last_second), (10, Some(10)));
        // "slow" had nothing in the only finished second.
        assert_eq!((live[1].requests, live[1].last_second), (0, Some(0)));
        assert!(live[1].latency.is_none());
        let totals = agg.finish(Duration::from_millis(2_400), Duration::from_millis(60));
        let fast: Vec<(f64, u64)> = totals.request_series[0]
            .iter()
            .map(|p| (p.t_s, p.requests))
            .collect();
        assert_eq!(fast, vec![(1.0, 10), (2.0, 10), (2.46, 5)]);
        let slow = &totals.request_series[1];
        assert_eq!(slow.len(), 1, "a second without requests has no point");
        assert_eq!(
            (slow[0].t_s, slow[0].requests, slow[0].errors),
            (2.0, 10, 0)
        );
        // Two significant figures: within 1 % of 50 ms.
        assert!((49_500..=50_500).contains(&slow[0].p99_us.unwrap()));
        let run: Vec<u64> = totals.timeseries.iter().map(|p| p.requests).collect();
        assert_eq!(run, vec![10, 20, 5]);
        let by = |i: usize| totals.by_request[i].as_ref().unwrap().counters.requests();
        assert_eq!((by(0), by(1)), (25, 10));
    }

    #[test]
    fn after_a_late_tick_a_name_s_seconds_add_up_to_the_run_s() {
        let base = Instant::now();
        let tick = Duration::from_millis(100);
        let names: Vec<String> = vec!["only".into()];
        let mut agg =
            Aggregator::new(1, Duration::from_secs(60), tick, 3).with_requests(&names, &[true]);
        let mut r = WorkerRecorder::new(0, base, Duration::from_secs(60), 3)
            .with_requests(names.clone().into());
        // Ticks 1..=9 on time, then the one due at 1.0 s taken at 1.15 s, then on time.
        for at_ms in (1..=9u64).map(|k| k * 100).chain([1_150, 1_200]) {
            r.record_finished(&finished(base, at_ms - 50, 1, 200));
            agg.merge(r.take_interval(base + Duration::from_millis(at_ms), tick));
        }
        for at_ms in (13..=20u64).map(|k| k * 100) {
            r.record_finished(&finished(base, at_ms - 50, 1, 200));
            agg.merge(r.take_interval(base + Duration::from_millis(at_ms), tick));
        }
        r.record_finished(&finished(base, 2_050, 1, 200));
        agg.merge(r.take_last_interval(base + Duration::from_millis(2_100), tick));
        let totals = agg.finish(Duration::from_millis(2_100), Duration::ZERO);
        let run: Vec<u64> = totals.timeseries.iter().map(|p| p.requests).collect();
        let only: Vec<u64> = totals.request_series[0]
            .iter()
            .map(|p| p.requests)
            .collect();
        assert_eq!(only, run, "one name: its seconds are the run's");
        assert_eq!(run.iter().sum::<u64>(), 20);
    }

    /// With all but the last 3 seconds spilled to a file, the journal is handed the same
    /// seconds and the run ends with the same histograms, byte for byte, as with every second
    /// in memory.
    #[test]
    fn spilled_seconds_come_back_byte_for_byte() {
        let base = Instant::now();
        let tick = Duration::from_millis(100);
        let mut in_memory = Aggregator::new(1, Duration::from_secs(60), tick, 3);
        let mut spilling = Aggregator::new(1, Duration::from_secs(60), tick, 3);
        in_memory.second_histograms = SecondHistograms::with_window(usize::MAX, tempfile::tempfile);
        spilling.second_histograms = SecondHistograms::with_window(3, tempfile::tempfile);
        let mut recorders =
            [0, 1].map(|_| WorkerRecorder::new(0, base, Duration::from_secs(60), 3));
        let (mut handed, mut spilled_at_end) = (Vec::new(), 0);
        for k in 1..=200u64 {
            for (r, agg) in recorders.iter_mut().zip([&mut in_memory, &mut spilling]) {
                // Latencies spread differently every second: each histogram its own bytes.
                for i in 0..(k % 13 + 1) {
                    r.record_finished(&finished(
                        base,
                        k * 100 - 90 + i,
                        1 + (k * 7 + i * 13) % 97,
                        200,
                    ));
                }
                agg.merge(r.take_interval(base + tick * k as u32, tick));
            }
            let snaps = [&mut in_memory, &mut spilling]
                .map(|agg| agg.snapshot(Phase::Running, tick * k as u32, Duration::ZERO, tick));
            assert_eq!(
                snaps[0].new_second_histograms,
                snaps[1].new_second_histograms
            );
            handed.extend(snaps[1].new_second_histograms.iter().cloned());
            spilled_at_end = spilling.second_histograms.spilled();
        }
        assert_eq!(
            spilled_at_end,
            20 - 3,
            "all but the window's seconds are in the file"
        );
        let a = in_memory.finish(Duration::from_secs(20), Duration::ZERO);
        let b = spilling.finish(Duration::from_secs(20), Duration::ZERO);
        assert_eq!(a.second_histograms.len(), 20);
        assert_eq!(a.second_histograms, b.second_histograms);
        assert_eq!(handed, b.second_histograms);
        assert!(b.notes.is_empty(), "{:?}", b.notes);
    }

    #[test]
    fn a_late_interval_does_not_repeat_a_second() {
        // A worker's last interval taken just after tick 10 belongs to a second that is a
        // point already: it must not make a second point with the same t_s.
        let base = Instant::now();
        let tick = Duration::from_millis(100);
        let mut agg = Aggregator::new(1, Duration::from_secs(60), tick, 3);
        let mut r = WorkerRecorder::new(0, base, Duration::from_secs(60), 3);
        for k in 1..=11u64 {
            r.record_finished(&finished(base, k * 100 - 50, 1, 200));
            agg.merge(r.take_interval(base + tick * k as u32, tick));
        }
        r.record_finished(&finished(base, 1_090, 1, 200));
        // Taken at 1.1 s again (tick 11, second 1 is open) and then a stale tick 10.
        let mut stale = r.take_interval(base + Duration::from_millis(1_000), tick);
        stale.tick = 10;
        agg.merge(stale);
        let totals = agg.finish(Duration::from_millis(1_100), Duration::ZERO);
        let t: Vec<f64> = totals.timeseries.iter().map(|p| p.t_s).collect();
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        assert_eq!(totals.counters.requests(), 12);
        let in_points: u64 = totals.timeseries.iter().map(|p| p.requests).sum();
        assert_eq!(in_points, 12);
    }
}
