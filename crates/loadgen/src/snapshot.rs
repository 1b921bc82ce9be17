//! The published types of a run: what the engine's recording turns into.
//!
//! The [`crate::aggregate::Aggregator`] fills these from the workers' interval data; the
//! caller gets a [`Snapshot`] every tick (for the TUI, headless progress and the profiler)
//! and the [`RunTotals`] at the end, from which the report (crate `tailscope-report`) is made. They are
//! plain data (`Clone`, most of them serde), so they cross threads and crates freely;
//! nothing here records or merges requests except [`Counters`], which is both the run's
//! published counters and what a worker counts into.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::conns::{ConnPoint, Gauges, HeldCounters};
pub use crate::counts::sum_some;
use crate::counts::{is_zero, min_some};

mod by_request;
mod figures;
mod percentiles;
mod slow_request;
use crate::error::ErrorKind;
pub use by_request::{count_by_request, RequestLive, RequestPoint};
pub(crate) use figures::record_us;
pub use figures::{new_histogram, Histograms, RequestFigures, Slowest};
pub use percentiles::{Ci95, Percentiles};
pub use slow_request::{SlowRequest, Stage};

/// Counters of a run or of one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Complete responses, of any status.
    pub successes: u64,
    /// Failed requests, by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::COUNT],
    /// Response bytes read.
    pub bytes_read: u64,
    /// Open loop: sends that left more than [`crate::recorder::LATE_SLACK`] after their
    /// intended time.
    pub late_sends: u64,
    /// Late sends while the generator's thread waited for a CPU (its run-queue wait covers
    /// the lateness); `None` where the wait cannot be read (no schedstat).
    pub late_waited_for_cpu: Option<u64>,
    /// Late sends whose slot no connection was free and open to take in time (see
    /// [`crate::recorder::LateCause::NoFreeConnection`]).
    pub late_no_free_connection: u64,
    /// Late sends of the generator's own (its loop or timer, with a CPU; a loop busy
    /// throughout that did not get to a free connection in time).
    pub late_generator: u64,
    /// Connections the server closed (or `--no-keepalive` closed) that were opened again.
    pub reconnects: u64,
    /// TCP connections opened (the warm-up's included).
    pub connects: u64,
    /// Connect attempts that failed (refused, timed out, no local port, …).
    pub connect_failures: u64,
    /// Requests abandoned because their connection task could not be stopped in time (a
    /// generator bug if ever non-zero: unfinished requests are counted in `unfinished`).
    pub aborted: u64,
    /// Connections still in their TCP handshake when the grace period ran out.
    pub still_connecting: u64,
    /// Requests that began in the measured window (open loop: slots that fell due in it)
    /// and were still unfinished when the grace period ended; their waits so far are in the
    /// latency histogram as lower bounds.
    pub unfinished: u64,
    /// Of `unfinished`, those never sent (queued for a connection when the run ended).
    pub unfinished_unsent: u64,
    /// The shortest wait of an unfinished request (µs).
    pub unfinished_min_us: Option<u64>,
    /// The longest wait of an unfinished request (µs).
    pub unfinished_max_us: Option<u64>,
    /// Little's law check: the time measured requests account for (µs), finished, failed
    /// and unfinished, plus deliberate waits (a connect retried).
    pub accounted_us: u64,
    /// Little's law check: what the connections could account for (µs): each connection's
    /// lifetime in the measured window × the pipelining depth.
    pub connection_us: u64,
    /// Segments the generator's own connections retransmitted (TCP_INFO, read at close, on
    /// a timeout and behind slow responses), SYNs not included.
    pub retransmits: u64,
    /// SYNs the generator's own connections retransmitted (read after a slow connect).
    pub syn_retransmits: u64,
    /// TCP_INFO reads that succeeded; 0 means the run's own TCP evidence is unavailable.
    pub tcp_info_reads: u64,
    /// The most a generator thread's tick fired late (µs): how long its event loop was held
    /// up. A "server stall" with a lag as long is the generator's own pause.
    pub max_loop_lag_us: u64,
    /// Status codes and their counts, in first-seen order.
    pub status_codes: Vec<(u16, u64)>,
    /// What happened to the held connections (`--idle-conns`, `--slow-conns`), by
    /// [`HeldKind::index`](crate::conns::HeldKind::index).
    pub held: [HeldCounters; 2],
    /// TLS (and HTTP/2) facts: handshakes, resumptions, why a handshake failed.
    pub transport: crate::transport::TransportCounters,
    /// What is known of the failures beyond their kinds (when in its connection's life a
    /// request failed, error statuses' headers), for forensics' error rules.
    pub failures: crate::failures::FailureFacts,
}

impl Counters {
    /// Failed requests of every kind.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Requests counted: successes + errors + unfinished.
    pub fn requests(&self) -> u64 {
        self.successes + self.error_total() + self.unfinished
    }

    /// Requests that ran out of time.
    pub fn timeouts(&self) -> u64 {
        self.errors[ErrorKind::Timeout.index()]
    }

    /// Complete responses whose status was not 2xx.
    pub fn non2xx(&self) -> u64 {
        self.status_codes
            .iter()
            .filter(|(c, _)| !(200..300).contains(c))
            .map(|(_, n)| n)
            .sum()
    }

    /// Counts `n` responses of status `code`.
    pub fn count_status(&mut self, code: u16, n: u64) {
        match self.status_codes.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count += n,
            None => self.status_codes.push((code, n)),
        }
    }

    /// Makes these counters equal to `other`, keeping the status codes' buffer: what a
    /// snapshot reused every tick copies (a clone would allocate it anew).
    pub fn copy_from(&mut self, other: &Counters) {
        self.reset();
        self.merge(other);
    }

    /// Zero, keeping the status codes' buffer.
    pub(crate) fn reset(&mut self) {
        let mut codes = std::mem::take(&mut self.status_codes);
        codes.clear();
        let mut failures = std::mem::take(&mut self.failures);
        failures.reset();
        *self = Counters {
            status_codes: codes,
            failures,
            ..Counters::default()
        };
    }

    /// Adds another interval's (or worker's) counters to these.
    pub(crate) fn merge(&mut self, other: &Counters) {
        self.successes += other.successes;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.late_sends += other.late_sends;
        self.late_waited_for_cpu = sum_some(self.late_waited_for_cpu, other.late_waited_for_cpu);
        self.late_no_free_connection += other.late_no_free_connection;
        self.late_generator += other.late_generator;
        self.reconnects += other.reconnects;
        self.connects += other.connects;
        self.connect_failures += other.connect_failures;
        self.aborted += other.aborted;
        self.still_connecting += other.still_connecting;
        self.unfinished += other.unfinished;
        self.unfinished_unsent += other.unfinished_unsent;
        self.unfinished_min_us = min_some(self.unfinished_min_us, other.unfinished_min_us);
        self.unfinished_max_us = self.unfinished_max_us.max(other.unfinished_max_us);
        self.accounted_us += other.accounted_us;
        self.connection_us += other.connection_us;
        self.retransmits += other.retransmits;
        self.syn_retransmits += other.syn_retransmits;
        self.tcp_info_reads += other.tcp_info_reads;
        self.max_loop_lag_us = self.max_loop_lag_us.max(other.max_loop_lag_us);
        for &(code, n) in &other.status_codes {
            self.count_status(code, n);
        }
        for (a, b) in self.held.iter_mut().zip(&other.held) {
            a.merge(b);
        }
        self.transport.merge(&other.transport);
        self.failures.merge(&other.failures);
    }
}

/// A latency figure of a second: `null` when it is the empty histogram's 0.
fn zero_as_null<S: serde::Serializer>(us: &u64, s: S) -> Result<S::Ok, S::Error> {
    match *us {
        0 => s.serialize_none(),
        us => s.serialize_u64(us),
    }
}

/// A latency figure of a second read back: `null` (nothing measured) is 0 in memory.
fn null_as_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(0))
}

/// A generator thread's event loop held up this long in a second (`generator_lag_us`) is
/// warned of: the delay is in every latency measured then, the server's or not. The report's
/// warnings and the forensics rules read the same bound.
pub const GENERATOR_LAG_WARN_US: u64 = 100_000;

/// One point of the run's time series (one second).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    /// End of the second, from the start of measurement; for the last, partial second, when
    /// its data ends. Unique and increasing.
    pub t_s: f64,
    /// The last point of a run that ended within this second: it covers less than 1 s, from
    /// the previous point's `t_s` to its own.
    #[serde(default)]
    pub partial: bool,
    /// Requests finished in it.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Of which timed out.
    pub timeouts: u64,
    /// Of which were still unfinished when the run ended (counted in the last second, at
    /// their wait so far).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unfinished: u64,
    /// Segments the generator's own connections retransmitted, as read in this second.
    #[serde(default)]
    pub retransmits: u64,
    /// Median latency of its responses; 0 in memory and `null` in the JSON for a second
    /// without a response (nothing was measured: no response takes under a microsecond).
    #[serde(serialize_with = "zero_as_null", deserialize_with = "null_as_zero")]
    pub p50_us: u64,
    /// 99th percentile (as `p50_us`).
    #[serde(serialize_with = "zero_as_null", deserialize_with = "null_as_zero")]
    pub p99_us: u64,
    /// Slowest response (as `p50_us`).
    #[serde(serialize_with = "zero_as_null", deserialize_with = "null_as_zero")]
    pub max_us: u64,
    /// Responses at least 10× the run's median so far (and at least 1 ms): the requests a
    /// spike in this second delayed.
    #[serde(default)]
    pub outliers: u64,
    /// The most a generator thread's event loop was held up in this second (µs).
    #[serde(default)]
    pub generator_lag_us: u64,
    /// Busy percentage of each CPU in this second, when the profiler ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_busy_pct: Vec<f64>,
    /// Connections open, opening and failed: as of the end of the second, and in it.
    #[serde(default)]
    pub connections: ConnPoint,
}

/// Counts from the run's histograms that spike forensics reads: how many responses fall at
/// the delays that name a cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpikeCounts {
    /// First-on-connection requests at ~1 s, ~3 s, ~7 s (SYN retransmit times).
    pub new_connection_syn_steps: [u64; 3],
    /// Responses whose body came 38–60 ms after their head (a delayed ACK).
    pub split_body_40ms: u64,
    /// Responses at ~200 ms, ~400 ms, ~800 ms (minimum RTO and its back-off).
    pub rto_steps: [u64; 3],
    /// Responses at 100–190 ms, below the first RTO step.
    pub below_rto: u64,
}

impl SpikeCounts {
    /// The counts of these histograms of a run (or of a run so far).
    pub(crate) fn of(
        latency: &Histogram<u64>,
        first_request: &Histogram<u64>,
        body: &Histogram<u64>,
    ) -> SpikeCounts {
        let count = |h: &Histogram<u64>, lo: u64, hi: u64| {
            if h.is_empty() || h.max() < lo {
                0
            } else {
                h.count_between(lo, hi)
            }
        };
        SpikeCounts {
            new_connection_syn_steps: [
                count(first_request, 900_000, 1_600_000),
                count(first_request, 2_800_000, 3_800_000),
                count(first_request, 6_800_000, 8_000_000),
            ],
            split_body_40ms: count(body, 38_000, 60_000),
            rto_steps: [
                count(latency, 195_000, 260_000),
                count(latency, 390_000, 500_000),
                count(latency, 790_000, 950_000),
            ],
            below_rto: count(latency, 100_000, 190_000),
        }
    }
}

impl RunTotals {
    /// The forensics counts of the whole run.
    pub fn spike_counts(&self) -> SpikeCounts {
        let h = &self.histograms;
        SpikeCounts::of(&h.latency, &h.first_request, &h.body)
    }

    /// The totals of a run that measured these counters and histograms over `duration` and
    /// nothing else: no seconds, no slowest requests, no names, no grace period, no rate
    /// change, no engine named, no connections.
    fn measured(duration: Duration, counters: Counters, histograms: Histograms) -> RunTotals {
        RunTotals {
            duration,
            counters,
            histograms,
            timeseries: Vec::new(),
            second_histograms: Vec::new(),
            slowest: Vec::new(),
            by_request: Vec::new(),
            request_series: Vec::new(),
            grace: Duration::ZERO,
            rate_changes: Vec::new(),
            stopped_early: false,
            notes: Vec::new(),
            engine: Default::default(),
            conns_peak: Default::default(),
        }
    }

    /// What a snapshot holds of the run so far, for a report while the run goes on. A
    /// snapshot carries the latency histogram but not the connect, body, first-request or
    /// uncorrected ones (they are empty here, so their figures read n/a), its seconds are the
    /// last two minutes, and nothing is in flight at its end yet (no grace period). Figures
    /// per name are kept for the whole run only (a report of the run so far has none), and
    /// the engine is not in a snapshot (the page of the run so far leaves its line out).
    pub fn so_far(snap: &Snapshot) -> RunTotals {
        let empty = || Histogram::new_from(&snap.histogram);
        let histograms = Histograms {
            latency: snap.histogram.clone(),
            latency_uncorrected: empty(),
            connect: empty(),
            tls: empty(),
            first_request: empty(),
            body: empty(),
        };
        RunTotals {
            timeseries: snap.recent_seconds.clone(),
            slowest: snap.slowest.clone(),
            conns_peak: snap.conns_peak,
            ..RunTotals::measured(snap.elapsed, snap.totals.clone(), histograms)
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Load is applied but not recorded.
    WarmingUp,
    /// Load is applied and recorded.
    Running,
    /// No new requests; in-flight ones may finish.
    Stopping,
    /// The run is over.
    Done,
}

/// What the run looks like now: plain data, for the TUI, headless progress and the
/// profiler. Made every tick: [`Clone::clone_from`] (and
/// [`crate::aggregate::Aggregator::snapshot_into`]) reuse the buffers of the snapshot they
/// overwrite, a histogram of some 100 KiB among them, so that a caller that keeps its
/// snapshots allocates nothing per tick once they are warm.
#[derive(Debug)]
pub struct Snapshot {
    /// Where the run is.
    pub phase: Phase,
    /// Time since measurement started (zero during warm-up).
    pub elapsed: Duration,
    /// Time left of the warm-up.
    pub warmup_left: Duration,
    /// Totals since measurement started.
    pub totals: Counters,
    /// Counters of the last tick.
    pub last_tick: Counters,
    /// Length of the last tick.
    pub tick: Duration,
    /// Percentiles of every response so far.
    pub latency: Percentiles,
    /// Percentiles of the last tick's responses.
    pub last_tick_latency: Percentiles,
    /// Histogram of every response so far (µs), for drawing the distribution.
    pub histogram: Histogram<u64>,
    /// The slowest requests so far.
    pub slowest: Vec<SlowRequest>,
    /// The last finished seconds (at most two minutes' worth).
    pub recent_seconds: Vec<TimePoint>,
    /// The forensics counts so far.
    pub spike_counts: SpikeCounts,
    /// Connections open and opening now, every population (the workers' latest ticks).
    pub conns: Gauges,
    /// The most open and opening at once so far.
    pub conns_peak: Gauges,
    /// A mix's names as the run stands, in the order of [`crate::Plan::request_names`];
    /// empty for a single request.
    pub by_request: Vec<RequestLive>,
    /// How many seconds of the run are closed (points of its time series) as of this
    /// snapshot; the last of them are the end of `recent_seconds`.
    pub seconds_closed: usize,
    /// The latency histograms (V2-deflate serialized, as [`RunTotals::second_histograms`])
    /// of the seconds closed since the previous snapshot, in order: the last
    /// `new_second_histograms.len()` of the `seconds_closed`. The run's journal writes them.
    pub new_second_histograms: Vec<Vec<u8>>,
    /// Each time a multiple of [`CHECKPOINT_SECONDS`] seconds is closed, the run's histograms
    /// so far (a clone, once a minute): the journal writes the connect, TLS, first-request,
    /// body and uncorrected ones, which a killed run's report then has as of that second.
    pub checkpoint: Option<Box<Histograms>>,
}

/// How often (in closed seconds) a snapshot carries the run's histograms for the journal:
/// the uncorrected one alone is a few KB deflated, too much for every second.
pub const CHECKPOINT_SECONDS: usize = 60;

impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        Snapshot {
            phase: self.phase,
            elapsed: self.elapsed,
            warmup_left: self.warmup_left,
            totals: self.totals.clone(),
            last_tick: self.last_tick.clone(),
            tick: self.tick,
            latency: self.latency,
            last_tick_latency: self.last_tick_latency,
            histogram: self.histogram.clone(),
            slowest: self.slowest.clone(),
            recent_seconds: self.recent_seconds.clone(),
            spike_counts: self.spike_counts,
            conns: self.conns,
            conns_peak: self.conns_peak,
            by_request: self.by_request.clone(),
            seconds_closed: self.seconds_closed,
            new_second_histograms: self.new_second_histograms.clone(),
            checkpoint: self.checkpoint.clone(),
        }
    }

    /// Copies `source` into this snapshot's buffers (Vec's `clone_from` keeps the
    /// allocation it has room in; the histogram is emptied and added to).
    fn clone_from(&mut self, source: &Snapshot) {
        let Snapshot {
            phase,
            elapsed,
            warmup_left,
            totals,
            last_tick,
            tick,
            latency,
            last_tick_latency,
            histogram,
            slowest,
            recent_seconds,
            spike_counts,
            conns,
            conns_peak,
            by_request,
            seconds_closed,
            new_second_histograms,
            checkpoint,
        } = self;
        *phase = source.phase;
        *elapsed = source.elapsed;
        *warmup_left = source.warmup_left;
        totals.copy_from(&source.totals);
        last_tick.copy_from(&source.last_tick);
        *tick = source.tick;
        *latency = source.latency;
        *last_tick_latency = source.last_tick_latency;
        copy_histogram(histogram, &source.histogram);
        slowest.clone_from(&source.slowest);
        recent_seconds.clone_from(&source.recent_seconds);
        *spike_counts = source.spike_counts;
        *conns = source.conns;
        *conns_peak = source.conns_peak;
        by_request.clone_from(&source.by_request);
        *seconds_closed = source.seconds_closed;
        new_second_histograms.clone_from(&source.new_second_histograms);
        checkpoint.clone_from(&source.checkpoint);
    }
}

/// Makes `to` hold the counts of `from` without allocating when their bounds are the same
/// (the run's histograms all share theirs); otherwise it becomes a clone.
pub(crate) fn copy_histogram(to: &mut Histogram<u64>, from: &Histogram<u64>) {
    to.reset();
    if to.add(from).is_err() {
        *to = from.clone();
    }
}

/// Everything a finished run measured, from which reports are made.
#[derive(Debug, Clone)]
pub struct RunTotals {
    /// The measured window: from the end of the warm-up to the last finished request.
    pub duration: Duration,
    /// Counters.
    pub counters: Counters,
    /// The run's histograms (latency, uncorrected latency, connect, TLS, first request,
    /// body): the recorders' own type, summed.
    pub histograms: Histograms,
    /// One point a second.
    pub timeseries: Vec<TimePoint>,
    /// The latency histogram of each point of `timeseries`, in the same order, V2-deflate
    /// serialized (a few hundred bytes a second: a full histogram a second would not stay
    /// small over a long run), for the HdrHistogram interval log (`--hdr-log`).
    pub second_histograms: Vec<Vec<u8>>,
    /// The slowest requests.
    pub slowest: Vec<SlowRequest>,
    /// A mix's figures per name, in the order of [`crate::Plan::request_names`] (none for
    /// a name nothing was recorded for); empty for a single request.
    pub by_request: Vec<Option<RequestFigures>>,
    /// A mix's time series per name, in the same order: a point for each second in which
    /// the name had a request, for at most [`crate::mix::MAX_SERIES_NAMES`] names (the
    /// heaviest; the others' are empty), so bounded as the run's own series is.
    pub request_series: Vec<Vec<RequestPoint>>,
    /// After the load window: how long in-flight requests took to finish (or until the grace
    /// period ran out). Their responses are counted in the run.
    pub grace: Duration,
    /// Open-loop rate changes during the run, in order.
    pub rate_changes: Vec<RateChange>,
    /// The run was stopped before its end (`RunControl::stop`: a signal, the dashboard).
    pub stopped_early: bool,
    /// What the generator has to say of its own bookkeeping, not of the target (a spill file
    /// of the seconds' histograms that failed, see `aggregate::seconds`): said on stderr once
    /// the run is over, not part of the report.
    pub notes: Vec<String>,
    /// The generator engine that ran it, and why.
    pub engine: crate::EngineUsed,
    /// The most connections open and opening at once, every population.
    pub conns_peak: Gauges,
}

impl RunTotals {
    /// A run's totals for a test (the report's tests build theirs with it): these counters
    /// and latencies (µs, in a histogram of [`new_histogram`]'s 60 s bounds) over `duration`;
    /// every other histogram is empty and nothing else was recorded.
    pub fn of_latency(
        duration: Duration,
        counters: Counters,
        latency: Histogram<u64>,
    ) -> RunTotals {
        let histograms = Histograms {
            latency,
            ..Histograms::new(Duration::from_secs(60))
        };
        RunTotals::measured(duration, counters, histograms)
    }
}

/// A change of the open-loop rate during a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateChange {
    /// When, in seconds from the start of measurement (negative during the warm-up).
    pub t_s: f64,
    /// The new total rate, requests per second.
    pub rate: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Percentiles::of` gives exactly hdrhistogram's own figures (it only walks the counts
    /// fewer times), on histograms from one value to values spread over seven decades.
    #[test]
    fn percentiles_are_hdrhistograms_own_figures() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..40 {
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
            let n = match case {
                0 => 1,
                1..=5 => case * 3,
                _ => 1 + next() % 20_000,
            };
            for _ in 0..n {
                // Up to 10^7 µs, log-spread: most near the bottom, a tail up to seconds.
                let decades = next() % 8;
                let v = 1 + next() % 10u64.pow(decades as u32);
                h.record_n(v, 1 + next() % 3).unwrap();
            }
            let p = Percentiles::of(&h);
            let q = |x: f64| h.value_at_quantile(x);
            let own = Percentiles {
                min: h.min(),
                mean: h.mean(),
                stdev: h.stdev(),
                p50: q(0.50),
                p75: q(0.75),
                p90: q(0.90),
                p95: q(0.95),
                p99: q(0.99),
                p999: q(0.999),
                p9999: q(0.9999),
                max: h.max(),
                ci95: None,
            };
            assert_eq!(p, own, "case {case}: {n} values");
        }
        assert_eq!(
            Percentiles::of(&Histogram::<u64>::new(3).unwrap()),
            Percentiles::default()
        );
    }

    /// What a reused snapshot copies equals a clone, whatever the buffer held before.
    #[test]
    fn counters_copied_into_a_used_buffer_equal_a_clone() {
        let mut run = Counters {
            successes: 7,
            unfinished: 2,
            unfinished_min_us: Some(40),
            unfinished_max_us: Some(900),
            max_loop_lag_us: 300,
            ..Counters::default()
        };
        run.errors[ErrorKind::Timeout.index()] = 3;
        run.count_status(503, 2);
        run.count_status(200, 5);
        run.held[1].failed = 1;
        run.transport.tls_failure = Some("bad certificate".into());
        run.transport.h2_max_streams = Some(100);
        let mut used = Counters {
            successes: 99,
            unfinished_min_us: Some(1),
            ..Counters::default()
        };
        used.count_status(404, 1);
        used.count_status(201, 1);
        used.count_status(202, 1);
        used.transport.tls_failure = Some("older".into());
        used.copy_from(&run);
        assert_eq!(used, run);
    }

    #[test]
    fn a_second_without_responses_has_null_latencies() {
        let quiet = TimePoint {
            t_s: 4.0,
            ..Default::default()
        };
        let json = serde_json::to_value(&quiet).unwrap();
        assert_eq!(
            (&json["p50_us"], &json["p99_us"], &json["max_us"]),
            (
                &serde_json::Value::Null,
                &serde_json::Value::Null,
                &serde_json::Value::Null
            ),
            "{json}"
        );
        assert_eq!(serde_json::from_value::<TimePoint>(json).unwrap(), quiet);
        let busy = TimePoint {
            requests: 3,
            p50_us: 120,
            p99_us: 900,
            max_us: 1_000,
            ..quiet
        };
        let json = serde_json::to_value(&busy).unwrap();
        assert_eq!(json["p50_us"], 120);
        assert_eq!(serde_json::from_value::<TimePoint>(json).unwrap(), busy);
    }
}
