//! A generator thread's worker, whichever engine drives it: the counters its connections
//! claim work from (tickets in closed loop, the slot schedule in open loop), the gauges of
//! its connections, and how it records what a connection still holds when the run ends.
//! Everything is a `Cell`: a worker and its connections live on one thread.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Shared, WorkerOutcome, WorkerSpec};
use crate::conns::{Gauge, Gauges, HeldKind};
use crate::plan::{Pace, Schedule};
use crate::recorder::{IntervalData, Stage, TcpFacts, Unfinished};
use crate::recorder::{WorkerRecorder, LATE_SLACK};

/// A count of connections that goes up and down, with the most it reached since it was
/// last asked (a tick's peak, which the tick's end alone would miss in a short run).
#[derive(Debug, Default)]
pub(super) struct Level {
    pub(super) now: Cell<u64>,
    pub(super) most: Cell<u64>,
}

impl Level {
    pub(super) fn up(&self) {
        self.now.set(self.now.get() + 1);
        self.most.set(self.most.get().max(self.now.get()));
    }

    pub(super) fn down(&self) {
        self.now.set(self.now.get().saturating_sub(1));
    }

    /// Sets the count (as a `Cell`'s `set`), raising the most to it.
    pub(super) fn set(&self, now: u64) {
        self.now.set(now);
        self.most.set(self.most.get().max(now));
    }

    pub(super) fn get(&self) -> u64 {
        self.now.get()
    }

    /// The most since the last call (at least what is open now).
    pub(super) fn take_most(&self) -> u64 {
        let most = self.most.get().max(self.now.get());
        self.most.set(self.now.get());
        most
    }
}

thread_local! {
    /// When this generator thread's loop was last out of work: it had handled every response
    /// it had been handed, every connection with room had claimed, and it waited idle until
    /// then (the io_uring engine's wake from a timed wait entered so, in which it slept; the
    /// tokio runtime's unpark after a park, with no task ready, in which it slept). See
    /// [`Worker::claim_slot`].
    static CAUGHT_UP_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The tokio engine: the thread's voluntary context switches when it last parked.
    static PARKED_SWITCHES: Cell<Option<i64>> = const { Cell::new(None) };
}

/// The tokio engine's thread parks (no task ready).
pub(super) fn parking() {
    PARKED_SWITCHES.with(|p| p.set(idle_wait_begins()));
}

/// The tokio engine's thread unparked (see [`idle_wait_ended`]).
pub(super) fn unparking() {
    idle_wait_ended(PARKED_SWITCHES.with(Cell::take), Instant::now());
}

/// The calling generator thread's loop begins a wait out of work: what
/// [`idle_wait_ended`] is to be given.
pub(super) fn idle_wait_begins() -> Option<i64> {
    crate::sys::voluntary_switches()
}

/// That wait ended at `now`: if the thread slept in it (a voluntary context switch since
/// `begun`), the loop was idle, out of work, until now (see [`CAUGHT_UP_AT`]). A wait that
/// returned at once (work already in) is a busy loop's.
pub(super) fn idle_wait_ended(begun: Option<i64>, now: Instant) {
    if begun.is_some_and(|b| crate::sys::voluntary_switches().is_some_and(|a| a > b)) {
        caught_up(now);
    }
}

/// The calling generator thread's loop was idle, out of work, until `now`.
fn caught_up(now: Instant) {
    CAUGHT_UP_AT.with(|c| c.set(Some(now)));
}

/// Whether the calling thread's loop ran out of work after `at`.
fn caught_up_after(at: Instant) -> bool {
    CAUGHT_UP_AT.with(|c| c.get().is_some_and(|t| t > at))
}

/// A request claimed by a connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct Claim {
    pub(super) intended: Option<Instant>,
    /// Open loop: the slot was claimed only after its intended time + [`LATE_SLACK`], and
    /// the loop ran out of work in between: every connection was waiting on a response (see
    /// [`crate::recorder::LateCause`]). Claimed late by a loop that was busy throughout is
    /// not this: the loop did not get to a connection in time.
    pub(super) claimed_late: bool,
}

impl Claim {
    /// A closed-loop claim (a ticket), or a claim taken at once.
    pub(super) fn now(intended: Option<Instant>) -> Claim {
        Claim {
            intended,
            claimed_late: false,
        }
    }
}

/// A request written and waiting for its response.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    /// Its position in `Shared::requests` (what was sent, and under which name).
    pub(super) pos: u32,
    pub(super) intended: Option<Instant>,
    pub(super) begun: Instant,
    pub(super) sent: Instant,
    pub(super) first_byte: Option<Instant>,
    pub(super) connect: Option<Duration>,
    /// The TLS handshake, when this request opened the connection.
    pub(super) tls: Option<Duration>,
    pub(super) first_on_connection: bool,
    /// Carried from its [`Claim`], for when it is sent again.
    pub(super) claimed_late: bool,
}

impl InFlight {
    pub(super) fn start(&self) -> Instant {
        self.intended.unwrap_or(self.begun)
    }

    /// The claim it was, to be sent again (a graceful close, a partial write, a refused
    /// stream).
    pub(super) fn requeue(&self) -> Claim {
        Claim {
            intended: self.intended,
            claimed_late: self.claimed_late,
        }
    }
}

/// A value that differs between runs and between processes: the wall clock's nanoseconds
/// and the pid, mixed.
pub(super) fn run_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A worker's open-loop schedule from the plan: its share of the rate (or of the stages'
/// rates), its phase among the workers, its part of a burst. Closed loop: an empty one.
fn schedule_of(plan: &crate::plan::Plan, spec: &WorkerSpec) -> Schedule {
    let stages = plan.rate_stages();
    let rate = match plan.pace {
        Pace::Rate(r) => r,
        Pace::Max => 0.0,
    };
    Schedule::new(
        plan.arrival,
        rate,
        &stages,
        spec.share,
        spec.phase,
        spec.burst_size,
        run_nonce() ^ (spec.index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
}

pub(super) struct Worker {
    pub(super) shared: Arc<Shared>,
    pub(super) rec: RefCell<WorkerRecorder>,
    pub(super) stopping: Cell<bool>,
    /// Remaining measured requests (`-n`).
    pub(super) tickets: Cell<Option<u64>>,
    /// Open loop: the intended send times, `slot_base` + the schedule's (see
    /// [`crate::plan::Schedule`]); a rate change starts a constant one at the next slot.
    pub(super) schedule: RefCell<Schedule>,
    pub(super) slot_base: Instant,
    pub(super) rate_bits: Cell<u64>,
    pub(super) share: f64,
    /// Closed loop with connection stages: this worker's place among the threads and how
    /// many connection slots it made, for each slot's run-wide index (see
    /// [`Worker::take_ramp_index`]).
    index: usize,
    threads: usize,
    conn_slots: Cell<usize>,
    pub(super) in_flight: Cell<u64>,
    /// Connections in the middle of a TCP handshake, and the most at once since the last
    /// tick: the io_uring engine begins a pass's connects and reaps their completions
    /// within one loop pass, so a tick's end never saw one in progress.
    pub(super) connecting: Level,
    /// The load's connections open now.
    pub(super) open: Level,
    /// Of `open`, those that have answered a response: the connections the server serves.
    pub(super) serving: Cell<u64>,
    /// Held connections (`--idle-conns`, `--slow-conns`) open and opening now, by
    /// [`HeldKind::index`].
    pub(super) held_open: [Level; 2],
    pub(super) held_opening: [Cell<u64>; 2],
    /// `-n`: when the last measured request was claimed (the end of the load window).
    pub(super) last_ticket_at: Cell<Option<Instant>>,
    pub(super) next_conn: Cell<u64>,
    /// The position in `shared.requests` the next batch begins at (workers start apart).
    pub(super) next_request: Cell<usize>,
    /// The state of this worker's generator for `{rand}` and `{uuid}` placeholders.
    pub(super) placeholder_rng: Cell<u64>,
    /// The next of `shared.sources` a connect is bound to (workers start apart).
    pub(super) next_source: Cell<usize>,
    /// The tokio engine's one read buffer for all its connections (empty in the io_uring
    /// engine, whose connections receive into provided buffers).
    pub(super) read_buf: RefCell<Vec<u8>>,
    /// `--connect-rate`: this worker's share of it, as the time between connects.
    pub(super) connect_interval: Option<Duration>,
    /// When the next connect may begin.
    pub(super) next_connect: Cell<Instant>,
    /// Wakes connections idling until a future slot when the run stops.
    pub(super) stop_idle: Notify,
    /// When sending stopped early (a stop request): open-loop slots from then on never fell
    /// due. `-z`'s end is in `shared.end`.
    pub(super) stopped_at: Cell<Option<Instant>>,
    /// Held connections are to close (see [`Worker::held_released`]).
    pub(super) held_released: Cell<bool>,
    pub(super) held_release: Notify,
    /// The grace period is over: every connection records what it still waits for as
    /// unfinished and returns.
    pub(super) grace_over: Cell<bool>,
    pub(super) grace_notify: Notify,
}

impl Worker {
    pub(super) fn new(shared: Arc<Shared>, spec: &WorkerSpec) -> Worker {
        let rec = WorkerRecorder::new(
            spec.index,
            shared.measure_start,
            shared.highest,
            shared.plan.slowest,
        )
        .with_requests(shared.names.clone());
        let period = shared.requests.period();
        Worker {
            rec: RefCell::new(rec),
            stopping: Cell::new(false),
            tickets: Cell::new(spec.requests),
            schedule: RefCell::new(schedule_of(&shared.plan, spec)),
            slot_base: shared.start + shared.plan.first_slot_offset,
            rate_bits: Cell::new(shared.rate_override.load(Ordering::Relaxed)),
            share: spec.share,
            index: spec.index,
            threads: shared.plan.effective_threads(),
            conn_slots: Cell::new(0),
            in_flight: Cell::new(0),
            connecting: Level::default(),
            open: Level::default(),
            serving: Cell::new(0),
            held_open: Default::default(),
            held_opening: Default::default(),
            last_ticket_at: Cell::new(None),
            next_conn: Cell::new(0),
            next_request: Cell::new(spec.index.wrapping_mul(7919) % period.max(1)),
            // Seeded from the run's start and the process (never the same in two runs or two
            // generators, so {rand} and {uuid} defeat caches across them too) and the worker.
            placeholder_rng: Cell::new(
                (spec.index as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ run_nonce(),
            ),
            next_source: Cell::new(spec.index),
            read_buf: RefCell::new(Vec::new()),
            connect_interval: shared
                .plan
                .connect_rate
                .map(|r| Duration::from_secs_f64(1.0 / (r * spec.share).max(f64::MIN_POSITIVE))),
            next_connect: Cell::new(shared.start),
            stop_idle: Notify::new(),
            stopped_at: Cell::new(None),
            held_released: Cell::new(false),
            held_release: Notify::new(),
            grace_over: Cell::new(false),
            grace_notify: Notify::new(),
            shared,
        }
    }

    /// Sending stops: at the end of `-z`, when every connection ran out of work, or, when
    /// `stopped`, on a stop request. Returns when the load window ended: when sending
    /// stopped, not when the last response comes back. The timer wakes a little after `end`,
    /// and `-n` ends at its last claim. Under `-z` the window is the whole duration unless a
    /// stop cut it short: an open-loop schedule whose last slot fell before the end (-q 10
    /// -z 1s: the last at 0.9 s) still measured a 1 s window.
    pub(super) fn stop_sending(&self, stopped: bool) -> Instant {
        let mut sending_ended = Instant::now();
        if stopped {
            self.stopped_at.set(Some(sending_ended));
        }
        if let Some(e) = self.shared.end {
            sending_ended = if stopped { sending_ended.min(e) } else { e };
        }
        if let Some(t) = self.last_ticket_at.get() {
            sending_ended = sending_ended.min(t);
        }
        self.stopping.set(true);
        sending_ended
    }

    /// Its connections open and opening now, every population, and the most open since
    /// the last call.
    pub(super) fn take_gauges(&self) -> Gauges {
        let held = |k: HeldKind| Gauge {
            open: self.held_open[k.index()].get(),
            peak_open: self.held_open[k.index()].take_most(),
            opening: self.held_opening[k.index()].get(),
            peak_opening: self.held_opening[k.index()].get(),
        };
        Gauges {
            load: Gauge {
                open: self.open.get(),
                peak_open: self.open.take_most(),
                opening: self.connecting.get(),
                peak_opening: self.connecting.take_most(),
            },
            held: [held(HeldKind::Idle), held(HeldKind::Slow)],
            serving: self.serving.get(),
        }
    }

    /// Hands this interval's data (with the connection gauges now) to the aggregator.
    pub(super) fn send_interval(&self, tx: &Sender<IntervalData>, now: Instant) -> bool {
        let mut data = self
            .rec
            .borrow_mut()
            .take_interval(now, self.shared.plan.tick);
        data.conns = self.take_gauges();
        tx.send(data).is_ok()
    }

    /// Resolves once sending has stopped (at once if it has): held connections make no new
    /// connects from then on.
    pub(super) async fn sending_stopped(&self) {
        loop {
            // Made before the check: a stop between the two still wakes it.
            let woken = self.stop_idle.notified();
            if self.stopping.get() {
                return;
            }
            woken.await;
        }
    }

    /// Resolves once the load's last response is in (or the grace period is over): held
    /// connections close then, after the run's figures, so that closing thousands of
    /// sockets (seconds of system time) neither delays the responses still in flight nor
    /// counts as grace.
    pub(super) async fn held_released(&self) {
        loop {
            let woken = self.held_release.notified();
            if self.held_released.get() {
                return;
            }
            woken.await;
        }
    }

    /// The end of a worker, once its connections are done: open-loop slots nobody took are
    /// recorded as unfinished, and the last interval is handed over.
    /// `finished` is when its last request finished (or the grace period ran out); `gauges`
    /// its connections then, before the held ones were let go (the last second's figures).
    pub(super) fn wrap_up(
        &self,
        tx: &Sender<IntervalData>,
        sending_ended: Instant,
        finished: Instant,
        gauges: Gauges,
    ) -> WorkerOutcome {
        if matches!(self.shared.plan.pace, Pace::Rate(_)) {
            self.grace_over.set(true);
            self.abandon_unsent_slots();
        }
        let mut rec = self.rec.borrow_mut();
        let mut last = rec.take_last_interval(Instant::now(), self.shared.plan.tick);
        drop(rec);
        last.conns = gauges;
        let _ = tx.send(last);
        WorkerOutcome {
            sending_ended,
            finished,
        }
    }

    /// `--connect-rate`: takes the next connect's turn and returns when it is, if not now.
    /// A token bucket of depth one per worker (the workers split the rate): connects leave
    /// evenly spaced rather than in bursts, which is what a ramp-up is for.
    pub(super) fn connect_permit(&self, now: Instant) -> Option<Instant> {
        let interval = self.connect_interval?;
        let at = self.next_connect.get().max(now);
        self.next_connect.set(at + interval);
        (at > now).then_some(at)
    }

    /// The limit on one TCP handshake.
    pub(super) fn connect_limit(&self) -> Duration {
        let plan = &self.shared.plan;
        plan.connect_timeout.min(plan.timeout)
    }

    /// The source address the next connect is bound to, round robin; none: the kernel picks.
    pub(super) fn take_source(&self) -> Option<std::net::SocketAddr> {
        let sources = &self.shared.sources;
        if sources.is_empty() {
            return None;
        }
        let k = self.next_source.get();
        self.next_source.set(k.wrapping_add(1));
        Some(sources[k % sources.len()])
    }

    pub(super) fn take_ticket(&self, measured: bool) -> bool {
        if !measured {
            return true;
        }
        match self.tickets.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.tickets.set(Some(n - 1));
                if n == 1 {
                    self.last_ticket_at.set(Some(Instant::now()));
                }
                true
            }
        }
    }

    /// Closed loop with connection stages: the run-wide index of the connection slot being
    /// made (none without them). Slot k of worker i is k × threads + i: the shares differ
    /// by at most one, the larger first, so the indices are 0..connections and the first N
    /// of them are spread over every worker.
    pub(super) fn take_ramp_index(&self) -> Option<usize> {
        let plan = &self.shared.plan;
        if plan.pace != Pace::Max || plan.stages.is_empty() {
            return None;
        }
        let k = self.conn_slots.get();
        self.conn_slots.set(k + 1);
        Some(k * self.threads + self.index)
    }

    /// Closed loop with connection stages: whether connection `index` may send at `now`
    /// (none), or when it may next (`Some(Some(at))`), or never again in the window
    /// (`Some(None)`).
    pub(super) fn ramp_wait(&self, index: usize, now: Instant) -> Option<Option<Instant>> {
        let start = self.shared.start;
        let t = now.saturating_duration_since(start).as_secs_f64();
        let from = crate::plan::connection_active_from(&self.shared.plan.stages, index, t);
        let at = from.and_then(|s| start.checked_add(Duration::from_secs_f64(s)));
        match at {
            Some(at) if at <= now => None,
            Some(at) if self.shared.end.is_none_or(|e| at < e) => Some(Some(at)),
            _ => Some(None),
        }
    }

    pub(super) fn claim_closed(&self, now: Instant) -> Option<Claim> {
        if self.stopping.get() || self.shared.end.is_some_and(|e| now >= e) {
            return None;
        }
        self.take_ticket(now >= self.shared.measure_start)
            .then_some(Claim::now(None))
    }

    /// Where the measured window ends for the schedule: `-z`'s end, or when a stop came.
    pub(super) fn window_end(&self) -> Option<Instant> {
        match (self.shared.end, self.stopped_at.get()) {
            (Some(e), Some(s)) => Some(e.min(s)),
            (e, s) => e.or(s),
        }
    }

    /// Open loop: the next slot of the schedule, if it falls due inside the window. Slots
    /// that fell due before the window ended are still sent while the grace period lasts
    /// (a connection that was busy at the end takes them), so none goes unmeasured. `now`
    /// is when a connection with room asks: a slot claimed more than [`LATE_SLACK`] after
    /// its time waited for a free connection if the loop ran out of work meanwhile (then no
    /// connection had room), else for the busy loop to get to one.
    pub(super) fn claim_slot(&self, now: Instant) -> Option<Claim> {
        if self.grace_over.get() {
            return None;
        }
        let asked = self.shared.rate_override.load(Ordering::Relaxed);
        if asked != self.rate_bits.get() {
            self.rate_bits.set(asked);
            self.schedule
                .borrow_mut()
                .set_rate(f64::from_bits(asked) * self.share);
        }
        let at = self.next_slot_at()?;
        if self.window_end().is_some_and(|e| at >= e) {
            return None;
        }
        if !self.take_ticket(at >= self.shared.measure_start) {
            return None;
        }
        self.schedule.borrow_mut().advance();
        Some(Claim {
            intended: Some(at),
            claimed_late: now > at + LATE_SLACK && caught_up_after(at),
        })
    }

    /// The next slot's intended time, none when the schedule sends no more (or it would
    /// fall past what an `Instant` holds).
    fn next_slot_at(&self) -> Option<Instant> {
        let t = self.schedule.borrow().peek()?;
        Duration::try_from_secs_f64(t)
            .ok()
            .and_then(|d| self.slot_base.checked_add(d))
    }

    /// Open loop: the mean time between this worker's slots around the next one (s; 0 when
    /// not known), for the engines that take close slots together.
    pub(super) fn slot_interval_s(&self) -> f64 {
        self.schedule.borrow().mean_interval_s()
    }

    /// Resolves once the grace period is over (at once if it already is).
    pub(super) async fn grace_ended(&self) {
        if !self.grace_over.get() {
            self.grace_notify.notified().await;
        }
    }

    /// Records every request a connection still holds when the grace period ends, and
    /// every claim it had not sent, as unfinished.
    pub(super) fn abandon(&self, held: &Held<'_>) {
        let now = Instant::now();
        let mut rec = self.rec.borrow_mut();
        for f in held.in_flight {
            rec.record_unfinished(
                &Unfinished {
                    start: f.start(),
                    sent: Some(f.sent),
                    first_byte: f.first_byte,
                    stage: Stage::Response,
                    first_on_connection: f.first_on_connection,
                    conn: held.conn,
                    tcp: held.tcp,
                    request: Some(self.name_of(f.pos)),
                },
                now,
            );
        }
        for (i, c) in held.queued.iter().enumerate() {
            rec.record_unfinished(
                &Unfinished {
                    start: c.intended.unwrap_or(held.since),
                    sent: None,
                    first_byte: None,
                    stage: held.stage,
                    first_on_connection: i == 0 && held.stage == Stage::Connecting,
                    conn: held.conn,
                    tcp: held.tcp,
                    // Not sent: which request it would have been is not picked yet.
                    request: None,
                },
                now,
            );
        }
        drop(rec);
        self.sub_in_flight(held.in_flight.len());
    }

    /// Open loop, after the grace period: every slot that fell due inside the window and
    /// no connection took is unfinished, waiting since its intended time.
    pub(super) fn abandon_unsent_slots(&self) {
        let Some(end) = self.window_end() else { return };
        let now = Instant::now();
        let until = end.min(now);
        let mut rec = self.rec.borrow_mut();
        while let Some(at) = self.next_slot_at() {
            if at >= until || !self.take_ticket(at >= self.shared.measure_start) {
                break;
            }
            self.schedule.borrow_mut().advance();
            rec.record_unfinished(
                &Unfinished {
                    start: at,
                    sent: None,
                    first_byte: None,
                    stage: Stage::NotSent,
                    first_on_connection: false,
                    conn: 0,
                    tcp: None,
                    request: None,
                },
                now,
            );
        }
    }

    /// The name index of the request at position `pos` of `shared.requests`.
    #[inline]
    pub(super) fn name_of(&self, pos: u32) -> u32 {
        self.shared.requests.name_at(pos as usize)
    }

    /// Takes the next `k` positions of the mix for one batch; returns the first.
    #[inline]
    pub(super) fn take_requests(&self, k: usize) -> usize {
        let start = self.next_request.get();
        self.next_request
            .set(self.shared.requests.advance(start, k));
        start
    }

    pub(super) fn add_in_flight(&self, n: usize) {
        self.in_flight.set(self.in_flight.get() + n as u64);
    }

    pub(super) fn sub_in_flight(&self, n: usize) {
        self.in_flight
            .set(self.in_flight.get().saturating_sub(n as u64));
    }
}

/// What a connection holds when the grace period ends.
pub(super) struct Held<'a> {
    pub(super) in_flight: &'a VecDeque<InFlight>,
    pub(super) queued: &'a VecDeque<Claim>,
    /// Closed loop: when the queued claims began (the connect or the write they wait for).
    pub(super) since: Instant,
    /// What the queued claims wait for.
    pub(super) stage: Stage,
    pub(super) conn: u64,
    /// The connection's TCP_INFO now.
    pub(super) tcp: Option<TcpFacts>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Plan, Stop};

    /// A worker of an open-loop schedule of a slot a millisecond from `start`.
    fn open_loop_worker(start: Instant) -> Worker {
        let mut plan = Plan::new("http://127.0.0.1:9/").unwrap();
        plan.pace = Pace::Rate(1000.0);
        plan.stop = Stop::Duration(Duration::from_secs(1));
        let shared = Arc::new(Shared::for_tests(
            plan,
            start,
            Some(start + Duration::from_secs(1)),
        ));
        let spec = WorkerSpec {
            rate: Some(1000.0),
            ..WorkerSpec::one_connection()
        };
        Worker::new(shared, &spec)
    }

    #[test]
    fn a_slot_claimed_late_waited_for_a_connection_only_if_the_loop_ran_out_of_work() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let w = open_loop_worker(start);
        // Slot 0 (due at 0 ms), claimed at 5 ms by a loop busy since before it: not a wait
        // for a free connection (the loop did not get to one in time).
        caught_up(start - Duration::from_millis(1));
        let claim = w.claim_slot(ms(5)).unwrap();
        assert_eq!(claim.intended, Some(ms(0)));
        assert!(!claim.claimed_late);
        // Slot 1 (due at 1 ms), claimed at 5 ms by a loop that ran out of work at 2 ms:
        // every connection was waiting on a response.
        caught_up(ms(2));
        let claim = w.claim_slot(ms(5)).unwrap();
        assert_eq!(claim.intended, Some(ms(1)));
        assert!(claim.claimed_late);
        // Slot 2 (due at 2 ms), claimed within the slack: on time, whatever the loop did.
        caught_up(ms(3));
        assert!(!w.claim_slot(ms(2) + LATE_SLACK).unwrap().claimed_late);
    }
}
