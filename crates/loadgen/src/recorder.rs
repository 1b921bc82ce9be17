//! The boundary between an engine and everything that reads its results: worker-side
//! recording.
//!
//! An engine gives each of its threads a [`WorkerRecorder`] and calls `record_*` for every
//! finished ([`Finished`]), failed or [`Unfinished`] request; nothing is shared or locked.
//! Once per tick the worker hands its [`IntervalData`] (the [`Histograms`] and [`Counters`]
//! of that interval, and its [`Slowest`] requests) to the [`crate::aggregate::Aggregator`],
//! which merges them into the published types of [`crate::snapshot`]. Memory is bounded:
//! histograms and a fixed number of slow requests, never a record per request. Nor does a
//! warm worker allocate: the aggregator resets the interval data it has merged and hands it
//! back ([`IntervalData::recycle`]), and the worker's next interval reuses its histograms.

mod events;
mod late;

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::sys::TcpFacts;
pub use events::{Finished, Unfinished};
pub use late::LateCause;
use late::{classify, RunQueueWait};

use crate::conns::{Gauges, HeldCounters, HeldKind};
use crate::counts::min_some;
use crate::error::ErrorKind;
use crate::failures::{is_error_status, HeadTag};
use crate::snapshot::record_us;
// The histograms live beside the published types that carry them (`RunTotals`); a recorder
// fills them.
pub use crate::snapshot::{new_histogram, Histograms, RequestFigures, Slowest};
// The published types lived here before the split; their old paths
// (`tailscope_loadgen::recorder::Counters`, ...) keep working.
pub use crate::snapshot::{
    Counters, Percentiles, Phase, RateChange, RunTotals, SlowRequest, Snapshot, SpikeCounts, Stage,
    TimePoint,
};

/// A send that leaves more than this after its intended time is counted as late.
pub const LATE_SLACK: Duration = Duration::from_millis(1);

/// Responses at least this slow get their connection's TCP_INFO read (a retransmit delays a
/// response by the 200 ms minimum RTO or more).
pub const SLOW_TCP_INFO: Duration = Duration::from_millis(100);

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
    /// The interval's histograms.
    pub histograms: Histograms,
    /// Counters.
    pub counters: Counters,
    /// The slowest requests of the interval.
    pub slowest: Slowest,
    /// A mix's figures per name index (none where nothing was recorded) since the worker
    /// last handed them over: they come once a second (with the first interval at or past
    /// each second's end) and with the worker's last interval, not every tick, so a mix of
    /// many names costs a histogram per active name a second, not one a tick.
    pub by_request: Vec<Option<RequestFigures>>,
    /// The second `by_request` is filed under (the second that just ended; for the last
    /// interval, its own second).
    pub by_request_second: u64,
    /// The worker's connections open and opening at the end of the interval.
    pub conns: Gauges,
    /// Where [`IntervalData::recycle`] sends this back to its worker, once merged.
    give_back: Option<SyncSender<IntervalData>>,
}

impl IntervalData {
    fn new(worker: usize, highest: Duration, slowest: usize) -> Self {
        IntervalData {
            worker,
            tick: 0,
            histograms: Histograms::new(highest),
            counters: Counters::default(),
            slowest: Slowest::new(slowest),
            by_request: Vec::new(),
            by_request_second: 0,
            conns: Gauges::default(),
            give_back: None,
        }
    }

    /// Empties this interval's figures and hands it back to the worker that recorded it,
    /// which reuses its histograms (and its figures per name) for a later interval instead
    /// of allocating new ones: the aggregator calls this once it has merged the interval,
    /// so the resetting, too, is done off the worker's thread. Dropped instead when the
    /// worker has enough spares or is gone.
    pub fn recycle(mut self) {
        let Some(back) = self.give_back.take() else {
            return;
        };
        self.histograms.reset();
        self.counters.reset();
        self.slowest.clear();
        for figures in self.by_request.iter_mut().flatten() {
            figures.reset();
        }
        self.by_request_second = 0;
        self.tick = 0;
        self.conns = Gauges::default();
        let _ = back.try_send(self);
    }
}

/// Spare intervals a worker keeps. While the aggregator keeps up, one is enough (the one
/// being recorded, the one being merged and one handed back make a double buffer); a
/// worker whose aggregator fell behind and caught up again (a busy calling thread, a slow
/// snapshot) takes the ones it had to make meanwhile back into use, up to this many.
const SPARE_INTERVALS: usize = 4;

/// A generator thread's own recorder. Not shared: the engine owns one per thread.
#[derive(Debug)]
pub struct WorkerRecorder {
    worker: usize,
    measure_start: Instant,
    highest: Duration,
    slowest_cap: usize,
    current: IntervalData,
    /// Intervals the aggregator has merged and emptied, for the next ones to reuse.
    spares: Receiver<IntervalData>,
    /// The sending end of `spares`, which every interval handed over carries.
    give_back: SyncSender<IntervalData>,
    /// The mix's request names; empty: nothing is kept per name (a single request).
    names: Vec<Arc<str>>,
    /// The figures of each name since they were last handed over, created at the name's
    /// first request after that (or reused, emptied, from a set handed back).
    by_request: Vec<Option<RequestFigures>>,
    /// An emptied set of figures per name that came back, for the next hand-over (empty:
    /// none came back yet).
    spare_by_request: Vec<Option<RequestFigures>>,
    /// The tick of the interval that last handed `by_request` over.
    by_request_tick: u64,
    /// Open loop: the thread's run-queue wait, for the late sends' causes.
    run_queue: RunQueueWait,
}

impl WorkerRecorder {
    /// A recorder for generator thread `worker`; requests that began before `measure_start`
    /// belong to the warm-up and are not recorded.
    pub fn new(worker: usize, measure_start: Instant, highest: Duration, slowest: usize) -> Self {
        let (give_back, spares) = sync_channel(SPARE_INTERVALS);
        let mut current = IntervalData::new(worker, highest, slowest);
        current.give_back = Some(give_back.clone());
        WorkerRecorder {
            worker,
            measure_start,
            highest,
            slowest_cap: slowest,
            current,
            spares,
            give_back,
            names: Vec::new(),
            by_request: Vec::new(),
            spare_by_request: Vec::new(),
            by_request_tick: 0,
            run_queue: RunQueueWait::new(),
        }
    }

    /// Keeps figures per request name too, for a mix with these names (none: not at all).
    pub fn with_requests(mut self, names: Arc<[String]>) -> Self {
        self.by_request = vec![None; names.len()];
        // Shared, so that naming a slow request costs no allocation.
        self.names = names.iter().map(|n| Arc::from(n.as_str())).collect();
        self
    }

    /// The figures of name `request`, when figures are kept per name.
    #[inline]
    fn figures(&mut self, request: Option<u32>) -> Option<&mut RequestFigures> {
        let highest = self.highest;
        let slot = self.by_request.get_mut(request? as usize)?;
        Some(slot.get_or_insert_with(|| RequestFigures::new(highest)))
    }

    /// The name of `request` for a slow request, when the run has a mix.
    fn name(&self, request: Option<u32>) -> Option<Arc<str>> {
        self.names.get(request? as usize).cloned()
    }

    /// Hands over the figures per name not handed over yet; the names go on with the set
    /// that came back emptied, if one did.
    fn take_requests(&mut self) -> Vec<Option<RequestFigures>> {
        let next = if self.spare_by_request.len() == self.by_request.len() {
            std::mem::take(&mut self.spare_by_request)
        } else {
            vec![None; self.by_request.len()]
        };
        std::mem::replace(&mut self.by_request, next)
    }

    /// An empty interval to record the next one into: one handed back if there is one, a
    /// new one while the worker warms up.
    fn next_interval(&mut self) -> IntervalData {
        let mut next = match self.spares.try_recv() {
            Ok(mut spare) => {
                if !spare.by_request.is_empty() {
                    self.spare_by_request = std::mem::take(&mut spare.by_request);
                }
                spare
            }
            Err(_) => IntervalData::new(self.worker, self.highest, self.slowest_cap),
        };
        next.give_back = Some(self.give_back.clone());
        next
    }

    /// Records a request that got a complete response.
    #[inline]
    pub fn record_finished(&mut self, f: &Finished) {
        let start = f.intended.map_or(f.begun, |i| i.min(f.begun));
        if start < self.measure_start {
            return;
        }
        let cur = &mut self.current;
        let h = &mut cur.histograms;
        let latency = f.latency();
        record_us(&mut h.latency, latency);
        if f.intended.is_some() {
            record_us(
                &mut h.latency_uncorrected,
                f.end.saturating_duration_since(f.begun),
            );
        }
        // One connect and one TLS handshake per connection: the requests that only waited
        // for it (the rest of its first batch) show them in their breakdown, not here.
        if f.first_on_connection {
            if let Some(c) = f.connect {
                record_us(&mut h.connect, c);
            }
            if let Some(t) = f.tls {
                record_us(&mut h.tls, t);
            }
            record_us(&mut h.first_request, latency);
        }
        record_us(&mut h.body, f.end.saturating_duration_since(f.first_byte));
        if let Some(r) = self.figures(Some(f.request)) {
            record_us(&mut r.latency, latency);
            r.counters.successes += 1;
            r.counters.bytes_read += f.bytes;
            r.counters.count_status(f.status, 1);
        }
        let cur = &mut self.current;
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
            let request = self.name(Some(f.request));
            let cur = &mut self.current;
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
                tls_us: f.tls.map(|t| t.as_micros() as u64),
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
                request,
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
        request: Option<u32>,
    ) {
        if start < self.measure_start {
            return;
        }
        if let Some(r) = self.figures(request) {
            r.counters.errors[kind.index()] += 1;
        }
        let cur = &mut self.current;
        cur.counters.errors[kind.index()] += 1;
        if kind == ErrorKind::ConnectRefused {
            let second = now.saturating_duration_since(self.measure_start).as_secs();
            cur.counters.failures.record_refused(second);
        }
        let latency_us = micros(now.saturating_duration_since(start));
        cur.counters.accounted_us += latency_us;
        if cur.slowest.admits(latency_us) {
            let request = self.name(request);
            let cur = &mut self.current;
            cur.slowest.offer(SlowRequest {
                at_s: start
                    .saturating_duration_since(self.measure_start)
                    .as_secs_f64(),
                latency_us,
                ttfb_us: 0,
                body_us: 0,
                connect_us: None,
                tls_us: None,
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
                request,
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
        let waited = now.saturating_duration_since(u.start);
        let waited_us = micros(waited);
        if let Some(r) = self.figures(u.request) {
            record_us(&mut r.latency, waited);
            r.counters.unfinished += 1;
            r.counters.unfinished_min_us = min_some(r.counters.unfinished_min_us, Some(waited_us));
            r.counters.unfinished_max_us = r.counters.unfinished_max_us.max(Some(waited_us));
        }
        let cur = &mut self.current;
        let h = &mut cur.histograms;
        record_us(&mut h.latency, waited);
        if let Some(sent) = u.sent {
            record_us(
                &mut h.latency_uncorrected,
                now.saturating_duration_since(sent),
            );
        }
        if u.first_on_connection {
            record_us(&mut h.first_request, waited);
        }
        let c = &mut cur.counters;
        c.unfinished += 1;
        c.unfinished_unsent += u64::from(u.sent.is_none());
        c.unfinished_min_us = min_some(c.unfinished_min_us, Some(waited_us));
        c.unfinished_max_us = c.unfinished_max_us.max(Some(waited_us));
        c.accounted_us += waited_us;
        if cur.slowest.admits(waited_us) {
            let request = self.name(u.request);
            let cur = &mut self.current;
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
                tls_us: None,
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
                request,
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
    /// requests (a connect that failed, a back-off, pipelined slots held for the refill)
    /// that no request's latency holds.
    pub fn record_waiting(&mut self, since: Instant, now: Instant, claims: usize) {
        // Its measured part, as a connection's span counts from the measured window's
        // start (a back-off across the end of a warm-up was dropped whole).
        let from = since.max(self.measure_start);
        self.current.counters.accounted_us +=
            micros(now.saturating_duration_since(from)) * claims as u64;
    }

    /// Little's law check: a connection task lived from `started` to `ended` with
    /// `depth` requests' worth of room; the measured part of that is what requests could
    /// account for.
    pub fn record_connection_span(&mut self, started: Instant, ended: Instant, depth: usize) {
        let from = started.max(self.measure_start);
        self.current.counters.connection_us +=
            micros(ended.saturating_duration_since(from)) * depth as u64;
    }

    /// Open loop: samples the thread's run-queue wait (at most every 250 µs) as a batch
    /// leaves at `sent`, before its sends are counted.
    #[inline]
    pub fn sample_run_queue(&mut self, sent: Instant) {
        self.run_queue.sample(sent);
    }

    /// Counts a send intended at `intended` that left at `sent`, if it left late (open
    /// loop), under its [`LateCause`]; `claimed_late`: its slot was claimed after its time
    /// + [`LATE_SLACK`].
    #[inline]
    pub fn record_send(&mut self, intended: Instant, sent: Instant, claimed_late: bool) {
        if sent <= intended + LATE_SLACK || intended < self.measure_start {
            return;
        }
        let cpu_wait = self.run_queue.since(intended);
        let c = &mut self.current.counters;
        c.late_sends += 1;
        match classify(intended, sent, cpu_wait, claimed_late) {
            LateCause::WaitedForCpu => *c.late_waited_for_cpu.get_or_insert(0) += 1,
            LateCause::NoFreeConnection => c.late_no_free_connection += 1,
            LateCause::Generator => c.late_generator += 1,
        }
    }

    /// Counts a reconnect after the server (or `--no-keepalive`) closed a connection.
    pub fn record_reconnect(&mut self) {
        self.current.counters.reconnects += 1;
    }

    /// Counts a connection opened.
    pub fn record_connect_opened(&mut self) {
        self.current.counters.connects += 1;
    }

    /// The interval's TLS and HTTP/2 counters, for an engine to count into.
    pub fn transport(&mut self) -> &mut crate::transport::TransportCounters {
        &mut self.current.counters.transport
    }

    /// Counts a TLS handshake that finished (`resumed`: an abbreviated one).
    pub fn record_tls_handshake(&mut self, resumed: bool) {
        let t = &mut self.current.counters.transport;
        t.tls_handshakes += 1;
        t.tls_resumed += u64::from(resumed);
    }

    /// Keeps why a TLS handshake failed, if no reason was kept yet (the failed request
    /// itself is counted by `record_failed`).
    pub fn record_tls_failure(&mut self, reason: String) {
        let t = &mut self.current.counters.transport;
        if t.tls_failure.is_none() {
            t.tls_failure = Some(reason);
        }
    }

    /// What the error rules read of a complete response of `status` to a request that began
    /// at `start`, its first byte `ttfb` after its send, its head saying `tag`: a branch for
    /// a plain response once its `Server` is known.
    #[inline]
    pub fn record_head(&mut self, status: u16, start: Instant, ttfb: Duration, tag: &HeadTag) {
        let f = &mut self.current.counters.failures;
        if (!is_error_status(status) && (f.ok_server.is_some() || tag.server().is_none()))
            || start < self.measure_start
        {
            return;
        }
        let at_s = start
            .saturating_duration_since(self.measure_start)
            .as_secs_f64();
        f.record_response(status, at_s, micros(ttfb), tag);
    }

    /// A request that began at `start` failed at `now` because the server closed or reset
    /// its connection, which had opened at `opened` and served `served` responses before.
    pub fn record_dropped(
        &mut self,
        start: Instant,
        now: Instant,
        opened: Instant,
        served: u64,
        first_on_connection: bool,
    ) {
        if start < self.measure_start {
            return;
        }
        let second = now.saturating_duration_since(self.measure_start).as_secs();
        self.current.counters.failures.record_dropped(
            micros(now.saturating_duration_since(opened)),
            served,
            first_on_connection,
            second,
        );
    }

    /// The server closed a busy connection between responses without saying so, at `now`.
    pub fn record_cut(&mut self, now: Instant) {
        if now < self.measure_start {
            return;
        }
        let second = now.saturating_duration_since(self.measure_start).as_secs();
        self.current.counters.failures.record_cut(second);
    }

    /// The server closed a connection gracefully after it served `served` responses.
    pub fn record_closed_after(&mut self, served: u64) {
        self.current.counters.failures.record_closed_after(served);
    }

    /// Counts a connect attempt that failed.
    pub fn record_connect_failed(&mut self) {
        self.current.counters.connect_failures += 1;
    }

    /// Counts requests abandoned in flight when the run stopped.
    pub fn record_aborted(&mut self, n: u64) {
        self.current.counters.aborted += n;
    }

    /// Counts connections still opening when the run stopped.
    pub fn record_still_connecting(&mut self, n: u64) {
        self.current.counters.still_connecting += n;
    }

    /// What happened to a held connection of `kind`, counted into this interval.
    pub fn held(&mut self, kind: HeldKind) -> &mut HeldCounters {
        &mut self.current.counters.held[kind.index()]
    }

    /// Notes how late the worker's tick fired.
    pub fn record_loop_lag(&mut self, lag: Duration) {
        let us = lag.as_micros() as u64;
        let c = &mut self.current.counters;
        c.max_loop_lag_us = c.max_loop_lag_us.max(us);
    }

    /// Hands over this interval's data and starts a new interval.
    pub fn take_interval(&mut self, now: Instant, tick: Duration) -> IntervalData {
        let fresh = self.next_interval();
        let mut data = std::mem::replace(&mut self.current, fresh);
        if self.run_queue.readable() == Some(true) {
            // Measured: no late send waited for a CPU is 0, not n/a.
            data.counters.late_waited_for_cpu.get_or_insert(0);
        }
        let since = now.saturating_duration_since(self.measure_start);
        data.tick = (since.as_nanos() / tick.as_nanos().max(1)) as u64;
        let tps = ticks_per_second(tick);
        let second = data.tick / tps;
        if !self.by_request.is_empty() && second > self.by_request_tick / tps {
            // A second ended in this interval (or, after a slow tick, in the ones since the
            // last hand-over): the names' figures so far belong to the second that ended.
            data.by_request = self.take_requests();
            data.by_request_second = second - 1;
            self.by_request_tick = data.tick;
        } else {
            data.by_request_second = data.tick.saturating_sub(1) / tps;
        }
        data
    }

    /// The worker's last interval, with every figure per name not handed over yet, filed
    /// under the interval's own second.
    pub fn take_last_interval(&mut self, now: Instant, tick: Duration) -> IntervalData {
        let mut data = self.take_interval(now, tick);
        if data.by_request.is_empty() {
            data.by_request = self.take_requests();
        }
        data
    }
}

/// Ticks in a second (at least one), as the aggregator files intervals under seconds.
pub(crate) fn ticks_per_second(tick: Duration) -> u64 {
    (Duration::from_secs(1).as_nanos() / tick.as_nanos().max(1)).max(1) as u64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A response that began `begun_ms` after `base` and took `latency_ms`, its body arriving
    /// half way: the tests' stock request.
    pub(crate) fn finished(base: Instant, begun_ms: u64, latency_ms: u64, status: u16) -> Finished {
        let begun = base + Duration::from_millis(begun_ms);
        Finished {
            intended: None,
            begun,
            sent: begun,
            first_byte: begun + Duration::from_millis(latency_ms) / 2,
            end: begun + Duration::from_millis(latency_ms),
            connect: None,
            tls: None,
            first_on_connection: false,
            conn: 0,
            status,
            bytes: 100,
            tcp: None,
            request: 0,
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
            None,
        );
        let d = r.take_interval(
            base + Duration::from_millis(700),
            Duration::from_millis(100),
        );
        assert_eq!(d.counters.successes, 1);
        assert_eq!(d.counters.error_total(), 0);
        assert_eq!(d.histograms.latency.len(), 1);
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
    fn slowest_keeps_the_top_n_in_order() {
        let mut s = Slowest::new(3);
        for (i, l) in [5u64, 1, 9, 7, 3, 9].into_iter().enumerate() {
            s.offer(SlowRequest {
                at_s: i as f64,
                latency_us: l,
                status: Some(200),
                ..SlowRequest::default()
            });
        }
        let kept: Vec<u64> = s.items().iter().map(|r| r.latency_us).collect();
        assert_eq!(kept, vec![9, 9, 7]);
        assert!(!s.admits(7));
        assert!(s.admits(8));
    }
}
