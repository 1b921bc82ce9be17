//! The boundary between an engine and everything that reads its results.
//!
//! An engine gives each of its threads a [`WorkerRecorder`] and calls `record_*` for every
//! finished request; nothing is shared or locked. Once per tick the worker hands its
//! [`IntervalData`] (histograms and counters of that interval) to the [`Aggregator`], which
//! merges them into run totals and per-second points and publishes a [`Snapshot`]. Memory is
//! bounded: histograms and a fixed number of slow requests, never a record per request.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error::ErrorKind;

/// Significant figures of every latency histogram.
const SIGFIG: u8 = 3;
/// A send that leaves more than this after its intended time is counted as late.
pub const LATE_SLACK: Duration = Duration::from_millis(1);

/// Responses at least this slow get their connection's TCP_INFO read (a retransmit delays a
/// response by the 200 ms minimum RTO or more).
pub const SLOW_TCP_INFO: Duration = Duration::from_millis(100);

/// A new latency histogram in microseconds that can hold values up to `highest`.
pub fn new_histogram(highest: Duration) -> Histogram<u64> {
    let highest_us = (highest.as_micros() as u64).max(2_000);
    Histogram::new_with_bounds(1, highest_us, SIGFIG).expect("valid histogram bounds")
}

fn record_us(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, h.high());
    h.record(us).expect("value clamped into range");
}

/// What the kernel's TCP_INFO said of one of the generator's own connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFacts {
    /// Segments retransmitted over the connection's life, SYNs included.
    pub total_retrans: u32,
    /// Segments the kernel currently thinks lost.
    pub lost: u32,
    /// The retransmission timeout now (µs).
    pub rto_us: u32,
    /// The smoothed round-trip time (µs).
    pub rtt_us: u32,
}

/// One request that finished with a complete response, as the engine timed it.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// Open loop: when the schedule meant the request to leave.
    pub intended: Option<Instant>,
    /// When the generator began the request: its connect, if it opened one, else its write.
    pub begun: Instant,
    /// When its bytes were written.
    pub sent: Instant,
    /// When the first byte of its response arrived.
    pub first_byte: Instant,
    /// When the last byte of its response arrived.
    pub end: Instant,
    /// The TCP handshake, when this request opened the connection.
    pub connect: Option<Duration>,
    /// The first request on its connection.
    pub first_on_connection: bool,
    /// Connection number within the worker.
    pub conn: u64,
    /// Status code.
    pub status: u16,
    /// Response bytes, head and body.
    pub bytes: u64,
    /// Its connection's TCP_INFO when it ended, read for slow requests only.
    pub tcp: Option<TcpFacts>,
}

impl Finished {
    /// Latency as the report counts it: from the intended time in open loop (or from when it
    /// actually began, if it left early within the timer's resolution), else from `begun`.
    pub fn latency(&self) -> Duration {
        let start = match self.intended {
            Some(i) => i.min(self.begun),
            None => self.begun,
        };
        self.end.saturating_duration_since(start)
    }
}

/// One of the slowest requests of a run, with where its time went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SlowRequest {
    /// Seconds from the start of measurement to when the request began.
    pub at_s: f64,
    /// Total latency (as counted in the report).
    pub latency_us: u64,
    /// From the write to the first response byte.
    pub ttfb_us: u64,
    /// From the first to the last response byte.
    pub body_us: u64,
    /// The TCP handshake, when this request opened its connection.
    pub connect_us: Option<u64>,
    /// Open loop: how long after its intended time the request actually left.
    pub queued_us: Option<u64>,
    /// The first request on its connection.
    pub first_on_connection: bool,
    /// Connection number within its worker.
    pub conn: u64,
    /// Generator thread.
    pub worker: usize,
    /// Status code, or none when the request failed.
    pub status: Option<u16>,
    /// The failure kind, when it failed.
    pub error: Option<ErrorKind>,
    /// Still unfinished when the run ended: `latency_us` is how long it had waited by then,
    /// a lower bound of its latency.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
    /// For an unfinished request, what it was waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Segments its connection had retransmitted when it ended (from TCP_INFO; SYNs
    /// included); null when not read.
    #[serde(default)]
    pub retransmits: Option<u32>,
    /// Its connection's smoothed RTT then (µs).
    #[serde(default)]
    pub rtt_us: Option<u32>,
    /// Its connection's retransmission timeout then (µs): above the 200 ms minimum after a
    /// timeout fired.
    #[serde(default)]
    pub rto_us: Option<u32>,
}

/// What an unfinished request was waiting for when the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Open loop: its slot fell due but no connection was free to send it.
    NotSent,
    /// Its connection's TCP handshake.
    Connecting,
    /// Its request bytes to be taken by the server (a full socket buffer).
    Sending,
    /// Its response (or the rest of it).
    Response,
}

impl Stage {
    /// A few words for the text summary.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::NotSent => "never sent: no connection was free",
            Stage::Connecting => "still connecting",
            Stage::Sending => "still sending",
            Stage::Response => "waiting for the response",
        }
    }
}

/// A request still unfinished when the run ended, as the engine saw it then.
#[derive(Debug, Clone, Copy)]
pub struct Unfinished {
    /// When it began (its intended time in open loop).
    pub start: Instant,
    /// When its bytes were written, if they were.
    pub sent: Option<Instant>,
    /// When the first byte of its response arrived, if one did.
    pub first_byte: Option<Instant>,
    /// What it was waiting for.
    pub stage: Stage,
    /// It opened (or was opening) its connection.
    pub first_on_connection: bool,
    /// Connection number within the worker.
    pub conn: u64,
    /// Its connection's TCP_INFO at the end, when it had a connection.
    pub tcp: Option<TcpFacts>,
}

/// Keeps the N slowest requests seen, with O(1) rejection of the common fast request.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    cap: usize,
    items: Vec<SlowRequest>,
}

impl Slowest {
    /// An empty set that keeps `cap` requests.
    pub fn new(cap: usize) -> Self {
        Slowest {
            cap,
            items: Vec::with_capacity(cap),
        }
    }

    /// Whether a request of this latency would be kept.
    #[inline]
    pub fn admits(&self, latency_us: u64) -> bool {
        self.cap > 0
            && (self.items.len() < self.cap
                || self.items.last().is_some_and(|s| latency_us > s.latency_us))
    }

    /// Adds a request if it is among the slowest.
    pub fn offer(&mut self, req: SlowRequest) {
        if !self.admits(req.latency_us) {
            return;
        }
        let at = self
            .items
            .partition_point(|s| s.latency_us >= req.latency_us);
        self.items.insert(at, req);
        self.items.truncate(self.cap);
    }

    /// Slowest first.
    pub fn items(&self) -> &[SlowRequest] {
        &self.items
    }
}

/// Counters of a run or of one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counters {
    /// Complete responses, of any status.
    pub successes: u64,
    /// Failed requests, by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::COUNT],
    /// Response bytes read.
    pub bytes_read: u64,
    /// Open loop: sends that left more than [`LATE_SLACK`] after their intended time.
    pub late_sends: u64,
    /// Connections the server closed (or `--no-keepalive` closed) that were opened again.
    pub reconnects: u64,
    /// Requests abandoned because their connection task could not be stopped in time (a
    /// generator bug if ever non-zero: unfinished requests are counted in `unfinished`).
    pub aborted: u64,
    /// Connections still in their TCP handshake when the grace period ran out.
    pub still_connecting: u64,
    /// Requests that began in the measured window (open loop: slots that fell due in it)
    /// and were still unfinished when the grace period ended; their waits so far are in the
    /// latency histogram as lower bounds.
    pub unfinished: u64,
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

    fn count_status(&mut self, code: u16, n: u64) {
        match self.status_codes.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count += n,
            None => self.status_codes.push((code, n)),
        }
    }

    fn merge(&mut self, other: &Counters) {
        self.successes += other.successes;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.late_sends += other.late_sends;
        self.reconnects += other.reconnects;
        self.aborted += other.aborted;
        self.still_connecting += other.still_connecting;
        self.unfinished += other.unfinished;
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
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What one worker recorded in one tick.
#[derive(Debug, Clone)]
pub struct IntervalData {
    /// The generator thread.
    pub worker: usize,
    /// Ticks since measurement started at the end of this interval (1 = the first tick).
    pub tick: u64,
    /// Latency of every measured request (corrected in open loop).
    pub latency: Histogram<u64>,
    /// Open loop: latency from the actual send.
    pub latency_uncorrected: Histogram<u64>,
    /// Connect times of the connections opened.
    pub connect: Histogram<u64>,
    /// Latency of requests that were the first on their connection (connect included).
    pub first_request: Histogram<u64>,
    /// Body time: first to last response byte.
    pub body: Histogram<u64>,
    /// Counters.
    pub counters: Counters,
    /// The slowest requests of the interval.
    pub slowest: Slowest,
}

impl IntervalData {
    fn new(worker: usize, highest: Duration, slowest: usize) -> Self {
        IntervalData {
            worker,
            tick: 0,
            latency: new_histogram(highest),
            latency_uncorrected: new_histogram(highest),
            connect: new_histogram(highest),
            first_request: new_histogram(highest),
            body: new_histogram(highest),
            counters: Counters::default(),
            slowest: Slowest::new(slowest),
        }
    }
}

/// A generator thread's own recorder. Not shared: the engine owns one per thread.
#[derive(Debug)]
pub struct WorkerRecorder {
    worker: usize,
    measure_start: Instant,
    highest: Duration,
    slowest_cap: usize,
    current: IntervalData,
}

impl WorkerRecorder {
    /// A recorder for generator thread `worker`; requests that began before `measure_start`
    /// belong to the warm-up and are not recorded.
    pub fn new(worker: usize, measure_start: Instant, highest: Duration, slowest: usize) -> Self {
        WorkerRecorder {
            worker,
            measure_start,
            highest,
            slowest_cap: slowest,
            current: IntervalData::new(worker, highest, slowest),
        }
    }

    /// When measurement starts.
    pub fn measure_start(&self) -> Instant {
        self.measure_start
    }

    /// Records a request that got a complete response.
    #[inline]
    pub fn record_finished(&mut self, f: &Finished) {
        let start = f.intended.map_or(f.begun, |i| i.min(f.begun));
        if start < self.measure_start {
            return;
        }
        let cur = &mut self.current;
        let latency = f.latency();
        record_us(&mut cur.latency, latency);
        if f.intended.is_some() {
            record_us(
                &mut cur.latency_uncorrected,
                f.end.saturating_duration_since(f.begun),
            );
        }
        if let Some(c) = f.connect {
            record_us(&mut cur.connect, c);
        }
        if f.first_on_connection {
            record_us(&mut cur.first_request, latency);
        }
        record_us(&mut cur.body, f.end.saturating_duration_since(f.first_byte));
        let c = &mut cur.counters;
        c.successes += 1;
        c.bytes_read += f.bytes;
        c.accounted_us += micros(latency);
        match c
            .status_codes
            .iter_mut()
            .find(|(code, _)| *code == f.status)
        {
            Some((_, n)) => *n += 1,
            None => c.status_codes.push((f.status, 1)),
        }
        let latency_us = latency.as_micros() as u64;
        if cur.slowest.admits(latency_us) {
            let queued = f
                .intended
                .map(|i| f.begun.saturating_duration_since(i).as_micros() as u64);
            cur.slowest.offer(SlowRequest {
                at_s: start
                    .saturating_duration_since(self.measure_start)
                    .as_secs_f64(),
                latency_us,
                ttfb_us: f.first_byte.saturating_duration_since(f.sent).as_micros() as u64,
                body_us: f.end.saturating_duration_since(f.first_byte).as_micros() as u64,
                connect_us: f.connect.map(|c| c.as_micros() as u64),
                queued_us: queued,
                first_on_connection: f.first_on_connection,
                conn: f.conn,
                worker: self.worker,
                status: Some(f.status),
                error: None,
                unfinished: false,
                stage: None,
                retransmits: f.tcp.map(|t| t.total_retrans),
                rtt_us: f.tcp.map(|t| t.rtt_us),
                rto_us: f.tcp.map(|t| t.rto_us),
            });
        }
    }

    /// Records a failed request. `start` is when it began (its intended time in open loop);
    /// failures are counted but not put into the latency histograms, whose percentiles
    /// describe responses. A timeout still shows among the slowest requests.
    pub fn record_failed(
        &mut self,
        kind: ErrorKind,
        start: Instant,
        now: Instant,
        conn: u64,
        first_on_connection: bool,
    ) {
        if start < self.measure_start {
            return;
        }
        let cur = &mut self.current;
        cur.counters.errors[kind.index()] += 1;
        let latency_us = micros(now.saturating_duration_since(start));
        cur.counters.accounted_us += latency_us;
        if cur.slowest.admits(latency_us) {
            cur.slowest.offer(SlowRequest {
                at_s: start
                    .saturating_duration_since(self.measure_start)
                    .as_secs_f64(),
                latency_us,
                ttfb_us: 0,
                body_us: 0,
                connect_us: None,
                queued_us: None,
                first_on_connection,
                conn,
                worker: self.worker,
                status: None,
                error: Some(kind),
                unfinished: false,
                stage: None,
                retransmits: None,
                rtt_us: None,
                rto_us: None,
            });
        }
    }

    /// Records a request still unfinished when the run ended (`now`): its wait so far goes
    /// into the latency histograms as a lower bound of its latency, so the tail that never
    /// came back is not dropped from the percentiles.
    pub fn record_unfinished(&mut self, u: &Unfinished, now: Instant) {
        if u.start < self.measure_start {
            return;
        }
        let cur = &mut self.current;
        let waited = now.saturating_duration_since(u.start);
        let waited_us = micros(waited);
        record_us(&mut cur.latency, waited);
        if let Some(sent) = u.sent {
            record_us(
                &mut cur.latency_uncorrected,
                now.saturating_duration_since(sent),
            );
        }
        if u.first_on_connection {
            record_us(&mut cur.first_request, waited);
        }
        let c = &mut cur.counters;
        c.unfinished += 1;
        c.unfinished_min_us = min_some(c.unfinished_min_us, Some(waited_us));
        c.unfinished_max_us = c.unfinished_max_us.max(Some(waited_us));
        c.accounted_us += waited_us;
        if cur.slowest.admits(waited_us) {
            cur.slowest.offer(SlowRequest {
                at_s: u
                    .start
                    .saturating_duration_since(self.measure_start)
                    .as_secs_f64(),
                latency_us: waited_us,
                ttfb_us: match (u.sent, u.first_byte) {
                    (Some(sent), Some(first)) => micros(first.saturating_duration_since(sent)),
                    (Some(sent), None) => micros(now.saturating_duration_since(sent)),
                    _ => 0,
                },
                body_us: u
                    .first_byte
                    .map_or(0, |first| micros(now.saturating_duration_since(first))),
                connect_us: None,
                queued_us: (u.stage == Stage::NotSent).then_some(waited_us),
                first_on_connection: u.first_on_connection,
                conn: u.conn,
                worker: self.worker,
                status: None,
                error: None,
                unfinished: true,
                stage: Some(u.stage),
                retransmits: u.tcp.map(|t| t.total_retrans),
                rtt_us: u.tcp.map(|t| t.rtt_us),
                rto_us: u.tcp.map(|t| t.rto_us),
            });
        }
    }

    /// Counts what a TCP_INFO read of one connection adds: the segments retransmitted since
    /// `seen` (the connection's count at the previous read), under SYNs when the read came
    /// right after a slow handshake.
    pub fn record_tcp(&mut self, facts: Option<TcpFacts>, seen: &mut u32, handshake: bool) {
        let Some(f) = facts else { return };
        let c = &mut self.current.counters;
        c.tcp_info_reads += 1;
        let new = u64::from(f.total_retrans.saturating_sub(*seen));
        *seen = (*seen).max(f.total_retrans);
        if handshake {
            c.syn_retransmits += new;
        } else {
            c.retransmits += new;
        }
    }

    /// Whether a response of this latency would be among the slowest kept now: the engine
    /// reads the connection's TCP_INFO for those.
    pub fn is_slow(&self, latency: Duration) -> bool {
        latency >= SLOW_TCP_INFO || self.current.slowest.admits(micros(latency))
    }

    /// Little's law check: time the generator deliberately spent waiting for `claims`
    /// requests (a connect that failed, a back-off) that no request's latency holds.
    pub fn record_waiting(&mut self, since: Instant, now: Instant, claims: usize) {
        if since < self.measure_start {
            return;
        }
        self.current.counters.accounted_us +=
            micros(now.saturating_duration_since(since)) * claims as u64;
    }

    /// Little's law check: a connection task lived from `started` to `ended` with
    /// `depth` requests' worth of room; the measured part of that is what requests could
    /// account for.
    pub fn record_connection_span(&mut self, started: Instant, ended: Instant, depth: usize) {
        let from = started.max(self.measure_start);
        self.current.counters.connection_us +=
            micros(ended.saturating_duration_since(from)) * depth as u64;
    }

    /// Counts a send that left late (open loop).
    pub fn record_late_send(&mut self, intended: Instant) {
        if intended >= self.measure_start {
            self.current.counters.late_sends += 1;
        }
    }

    /// Counts a reconnect after the server (or `--no-keepalive`) closed a connection.
    pub fn record_reconnect(&mut self) {
        self.current.counters.reconnects += 1;
    }

    /// Counts requests abandoned in flight when the run stopped.
    pub fn record_aborted(&mut self, n: u64) {
        self.current.counters.aborted += n;
    }

    /// Counts connections still opening when the run stopped.
    pub fn record_still_connecting(&mut self, n: u64) {
        self.current.counters.still_connecting += n;
    }

    /// Notes how late the worker's tick fired.
    pub fn record_loop_lag(&mut self, lag: Duration) {
        let us = lag.as_micros() as u64;
        let c = &mut self.current.counters;
        c.max_loop_lag_us = c.max_loop_lag_us.max(us);
    }

    /// Hands over this interval's data and starts a new interval.
    pub fn take_interval(&mut self, now: Instant, tick: Duration) -> IntervalData {
        let fresh = IntervalData::new(self.worker, self.highest, self.slowest_cap);
        let mut data = std::mem::replace(&mut self.current, fresh);
        let since = now.saturating_duration_since(self.measure_start);
        data.tick = (since.as_nanos() / tick.as_nanos().max(1)) as u64;
        data
    }
}

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
}

impl Percentiles {
    /// The percentiles of a histogram; all zero when it is empty.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            min: h.min(),
            mean: h.mean(),
            stdev: h.stdev(),
            p50: h.value_at_quantile(0.50),
            p75: h.value_at_quantile(0.75),
            p90: h.value_at_quantile(0.90),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
        }
    }
}

/// One point of the run's time series (one second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Median latency of its responses.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Slowest response.
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
    fn of(
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
        SpikeCounts::of(&self.latency, &self.first_request, &self.body)
    }
}

/// How many finished seconds a snapshot carries.
const RECENT_SECONDS: usize = 120;

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

/// What the run looks like now: plain data, cheap enough to clone every tick, for the TUI,
/// headless progress and the profiler.
#[derive(Debug, Clone)]
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
}

/// Everything a finished run measured, from which reports are made.
#[derive(Debug, Clone)]
pub struct RunTotals {
    /// The measured window: from the end of the warm-up to the last finished request.
    pub duration: Duration,
    /// Counters.
    pub counters: Counters,
    /// Latency of every response (corrected in open loop).
    pub latency: Histogram<u64>,
    /// Open loop: from the actual send.
    pub latency_uncorrected: Histogram<u64>,
    /// Connect times.
    pub connect: Histogram<u64>,
    /// Latency of first-on-connection requests (connect included).
    pub first_request: Histogram<u64>,
    /// Body times (first to last byte).
    pub body: Histogram<u64>,
    /// One point a second.
    pub timeseries: Vec<TimePoint>,
    /// The slowest requests.
    pub slowest: Vec<SlowRequest>,
    /// After the load window: how long in-flight requests took to finish (or until the grace
    /// period ran out). Their responses are counted in the run.
    pub grace: Duration,
    /// Open-loop rate changes during the run, in order.
    pub rate_changes: Vec<RateChange>,
    /// The run was stopped before its end (`RunControl::stop`: a signal, the dashboard).
    pub stopped_early: bool,
}

/// A change of the open-loop rate during a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateChange {
    /// When, in seconds from the start of measurement (negative during the warm-up).
    pub t_s: f64,
    /// The new total rate, requests per second.
    pub rate: f64,
}

struct SecondBucket {
    counters: Counters,
    latency: Histogram<u64>,
}

/// Merges workers' interval data into run totals, per-second points and snapshots.
pub struct Aggregator {
    highest: Duration,
    tick: Duration,
    totals: RunTotals,
    last_tick: Counters,
    last_tick_latency: Histogram<u64>,
    seconds: BTreeMap<u64, SecondBucket>,
    slowest: Slowest,
    /// Highest tick reported by each worker; a second is final once every worker is past it.
    worker_ticks: Vec<u64>,
    /// Seconds below this are points already; data arriving for them (a worker's last
    /// interval, taken just after a tick) goes into the first open second instead, so no
    /// second is made a point twice.
    open_from: u64,
}

impl Aggregator {
    /// An aggregator for `workers` threads.
    pub fn new(workers: usize, highest: Duration, tick: Duration, slowest: usize) -> Self {
        Aggregator {
            highest,
            tick,
            totals: RunTotals {
                duration: Duration::ZERO,
                counters: Counters::default(),
                latency: new_histogram(highest),
                latency_uncorrected: new_histogram(highest),
                connect: new_histogram(highest),
                first_request: new_histogram(highest),
                body: new_histogram(highest),
                timeseries: Vec::new(),
                slowest: Vec::new(),
                grace: Duration::ZERO,
                rate_changes: Vec::new(),
                stopped_early: false,
            },
            last_tick: Counters::default(),
            last_tick_latency: new_histogram(highest),
            seconds: BTreeMap::new(),
            slowest: Slowest::new(slowest),
            worker_ticks: vec![0; workers],
            open_from: 0,
        }
    }

    /// Merges one worker's interval.
    pub fn merge(&mut self, data: IntervalData) {
        let t = &mut self.totals;
        t.latency.add(&data.latency).expect("same bounds");
        t.latency_uncorrected
            .add(&data.latency_uncorrected)
            .expect("same bounds");
        t.connect.add(&data.connect).expect("same bounds");
        t.first_request
            .add(&data.first_request)
            .expect("same bounds");
        t.body.add(&data.body).expect("same bounds");
        t.counters.merge(&data.counters);
        self.last_tick.merge(&data.counters);
        self.last_tick_latency
            .add(&data.latency)
            .expect("same bounds");
        for s in data.slowest.items() {
            self.slowest.offer(s.clone());
        }
        let ticks_per_second =
            (Duration::from_secs(1).as_nanos() / self.tick.as_nanos().max(1)).max(1) as u64;
        // The interval ending at tick k covers (k-1, k]; it belongs to second (k-1)/tps.
        let second = (data.tick.saturating_sub(1) / ticks_per_second).max(self.open_from);
        let highest = self.highest;
        let bucket = self.seconds.entry(second).or_insert_with(|| SecondBucket {
            counters: Counters::default(),
            latency: new_histogram(highest),
        });
        bucket.counters.merge(&data.counters);
        bucket.latency.add(&data.latency).expect("same bounds");
        if let Some(w) = self.worker_ticks.get_mut(data.worker) {
            *w = (*w).max(data.tick);
        }
        let done_before = self.worker_ticks.iter().min().copied().unwrap_or(0) / ticks_per_second;
        self.finalize_seconds(done_before);
    }

    fn finalize_seconds(&mut self, before: u64) {
        while let Some(entry) = self.seconds.first_entry() {
            if *entry.key() >= before {
                break;
            }
            let (second, b) = entry.remove_entry();
            self.open_from = second + 1;
            let p = Percentiles::of(&b.latency);
            let run_p50 = if self.totals.latency.is_empty() {
                0
            } else {
                self.totals.latency.value_at_quantile(0.5)
            };
            let threshold = (run_p50 * 10).max(1_000);
            let outliers = if b.latency.is_empty() || b.latency.max() < threshold {
                0
            } else {
                b.latency.count_between(threshold, b.latency.max())
            };
            self.totals.timeseries.push(TimePoint {
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
            });
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
        let snap = Snapshot {
            phase,
            elapsed,
            warmup_left,
            totals: self.totals.counters.clone(),
            last_tick: std::mem::take(&mut self.last_tick),
            tick,
            latency: Percentiles::of(&self.totals.latency),
            last_tick_latency: Percentiles::of(&self.last_tick_latency),
            histogram: self.totals.latency.clone(),
            slowest: self.slowest.items().to_vec(),
            recent_seconds: self.totals.timeseries
                [self.totals.timeseries.len().saturating_sub(RECENT_SECONDS)..]
                .to_vec(),
            spike_counts: SpikeCounts::of(
                &self.totals.latency,
                &self.totals.first_request,
                &self.totals.body,
            ),
        };
        self.last_tick_latency.reset();
        snap
    }

    /// Requests counted so far.
    pub fn requests(&self) -> u64 {
        self.totals.counters.requests()
    }

    /// The run's totals, with every remaining second made a point. `duration` is the load
    /// window, `grace` how long in-flight requests took after it; the last point, when the
    /// data ends before its second does, is marked partial and dated when the data ends.
    pub fn finish(mut self, duration: Duration, grace: Duration) -> RunTotals {
        self.finalize_seconds(u64::MAX);
        let data_end_s = (duration + grace).as_secs_f64();
        if let Some(last) = self.totals.timeseries.last_mut() {
            let second_start = last.t_s - 1.0;
            if data_end_s < last.t_s {
                last.partial = true;
                // Milliseconds, and never at or before the second's start: t_s stays unique.
                last.t_s = ((data_end_s * 1000.0).ceil() / 1000.0).max(second_start + 0.001);
            }
        }
        self.totals.duration = duration;
        self.totals.grace = grace;
        self.totals.slowest = self.slowest.items().to_vec();
        self.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(base: Instant, begun_ms: u64, latency_ms: u64, status: u16) -> Finished {
        let begun = base + Duration::from_millis(begun_ms);
        Finished {
            intended: None,
            begun,
            sent: begun,
            first_byte: begun + Duration::from_millis(latency_ms) / 2,
            end: begun + Duration::from_millis(latency_ms),
            connect: None,
            first_on_connection: false,
            conn: 0,
            status,
            bytes: 100,
            tcp: None,
        }
    }

    #[test]
    fn warmup_requests_are_not_recorded() {
        let base = Instant::now();
        let mut r = WorkerRecorder::new(
            0,
            base + Duration::from_millis(500),
            Duration::from_secs(60),
            5,
        );
        r.record_finished(&finished(base, 100, 5, 200));
        r.record_finished(&finished(base, 600, 5, 200));
        r.record_failed(
            ErrorKind::Timeout,
            base,
            base + Duration::from_secs(1),
            0,
            false,
        );
        let d = r.take_interval(
            base + Duration::from_millis(700),
            Duration::from_millis(100),
        );
        assert_eq!(d.counters.successes, 1);
        assert_eq!(d.counters.error_total(), 0);
        assert_eq!(d.latency.len(), 1);
    }

    #[test]
    fn open_loop_latency_counts_from_intended_time() {
        let base = Instant::now();
        let mut f = finished(base, 10, 2, 200);
        f.intended = Some(base);
        assert_eq!(f.latency(), Duration::from_millis(12));
        // Left early (within timer resolution): counted from when it actually began.
        f.intended = Some(base + Duration::from_millis(11));
        assert_eq!(f.latency(), Duration::from_millis(2));
    }

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
        assert_eq!(totals.latency.len(), 22);
        assert_eq!(totals.timeseries[1].t_s, 1.2);
        assert!(totals.timeseries[1].partial && !totals.timeseries[0].partial);
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

    #[test]
    fn slowest_keeps_the_top_n_in_order() {
        let mut s = Slowest::new(3);
        for (i, l) in [5u64, 1, 9, 7, 3, 9].into_iter().enumerate() {
            s.offer(SlowRequest {
                at_s: i as f64,
                latency_us: l,
                ttfb_us: 0,
                body_us: 0,
                connect_us: None,
                queued_us: None,
                first_on_connection: false,
                conn: 0,
                worker: 0,
                status: Some(200),
                error: None,
                unfinished: false,
                stage: None,
                retransmits: None,
                rtt_us: None,
                rto_us: None,
            });
        }
        let kept: Vec<u64> = s.items().iter().map(|r| r.latency_us).collect();
        assert_eq!(kept, vec![9, 9, 7]);
        assert!(!s.admits(7));
        assert!(s.admits(8));
    }
}
