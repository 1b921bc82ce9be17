//! The generator engines and what they share.
//!
//! Two engines run a plan: tokio (epoll; one current-thread runtime per generator thread,
//! one task per connection) and io_uring ([`uring`]: one ring per generator thread, the
//! connections driven from its completions). [`EngineChoice`] picks one; both keep nothing
//! shared or locked between threads on the hot path, and both hand their data to the
//! aggregator through a `WorkerRecorder`, so nothing after them knows which ran.
//!
//! This module is the worker both engines build on: its shared counters and the claims it
//! hands out, and the tokio engine's thread and runtime; [`connection`] is one connection's
//! state (shared) and its tokio task. A connection task runs the same loop
//! in every mode: claim work (a ticket in closed loop, a scheduled slot in open loop),
//! connect if needed, write every claimed request in one write (pipelining), then wait for
//! responses, the next slot, or the timeout. Claims come
//! from the worker's own counters (`Cell`s: the runtime is single-threaded), so `-n` is
//! exact and the open-loop rate is held by whichever connection is free.
//!
//! The timeout timer is lazy: it is armed at a deadline no later than the oldest in-flight
//! request's, and only re-armed when it fires early, so a response costs no timer update.

mod connection;
mod held;
mod http2;
pub(crate) mod tls;
mod uring;

pub(crate) use uring::direct as uring_direct;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::pending;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout};

use serde::{Deserialize, Serialize};

use crate::conns::{Gauge, Gauges, HeldKind};
use crate::error::Error;
use crate::mix::Encoded;
use crate::plan::{Pace, Plan};
use crate::recorder::{IntervalData, Stage, TcpFacts, Unfinished, WorkerRecorder};

/// Which generator engine runs a plan (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// The io_uring engine where the kernel has what it needs and it has earned the default
    /// (see [`AUTO_PICKS_URING`]); tokio otherwise.
    #[default]
    Auto,
    /// The io_uring engine; a plan that asks for it where io_uring cannot run fails to start.
    Uring,
    /// The tokio (epoll) engine.
    Tokio,
}

/// The engine that ran a run, and why it was the one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EngineUsed {
    /// `uring` or `tokio`.
    pub name: String,
    /// Why: asked for with `--engine`, or what `auto` found.
    pub reason: String,
}

/// Whether `auto` picks io_uring when the probe succeeds. It does since the io_uring engine
/// passes the whole parameterised run test matrix (tests/run.rs, tests/unfinished.rs,
/// crates/loadgen/tests/rate_change.rs); set it to false to make tokio the default again.
const AUTO_PICKS_URING: bool = true;

/// The engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineKind {
    Tokio,
    Uring,
}

/// Decides which engine runs a plan that asked for `choice`; an error when it asked for
/// io_uring and this machine cannot run it, or the plan needs what only tokio has (TLS).
pub(crate) fn choose(
    choice: EngineChoice,
    transport: Option<&str>,
) -> Result<(EngineKind, EngineUsed), Error> {
    let used = |name: &str, reason: String| EngineUsed {
        name: name.into(),
        reason,
    };
    // TLS and HTTP/2 run on the tokio engine only: rustls is driven from the socket's
    // readiness there and h2 wants an AsyncRead/AsyncWrite; the io_uring engine receives
    // into provided buffers it would have to feed them from.
    match (choice, transport) {
        (EngineChoice::Uring, Some(what)) => {
            return Err(Error::InvalidPlan(format!(
                "the io_uring engine does not do {what} yet: drop --engine uring (auto picks tokio for it) or give --engine tokio"
            )))
        }
        (EngineChoice::Auto, Some(what)) => {
            return Ok((
                EngineKind::Tokio,
                used("tokio", format!("auto: {what} runs on the tokio engine only")),
            ))
        }
        _ => {}
    }
    match choice {
        EngineChoice::Tokio => Ok((EngineKind::Tokio, used("tokio", "--engine tokio".into()))),
        EngineChoice::Uring => match uring::probe() {
            Ok(()) => Ok((
                EngineKind::Uring,
                used("uring", format!("--engine uring{}", uring::descriptors_note())),
            )),
            Err(why) => Err(Error::InvalidPlan(format!(
                "the io_uring engine cannot run here: {why} (--engine uring; --engine tokio runs anywhere)"
            ))),
        },
        EngineChoice::Auto => match uring::probe() {
            Ok(()) if AUTO_PICKS_URING => Ok((
                EngineKind::Uring,
                used(
                    "uring",
                    format!(
                        "auto: the kernel has io_uring with multishot recv and buffer rings{}",
                        uring::descriptors_note()
                    ),
                ),
            )),
            Ok(()) => Ok((
                EngineKind::Tokio,
                used(
                    "tokio",
                    "auto: tokio, the default while io_uring is not (io_uring probe: ok)".into(),
                ),
            )),
            Err(why) => Ok((
                EngineKind::Tokio,
                used("tokio", format!("auto: io_uring unavailable ({why})")),
            )),
        },
    }
}

/// The run's TLS client for `plan` (reading the files it names), none for http; an error
/// says which file or flag is wrong. Built once per run and checked by `Plan::validate`.
pub(crate) fn transport_client(plan: &Plan) -> Result<Option<tls::TlsClient>, Error> {
    plan.tls
        .as_ref()
        .map(|options| {
            let alpn = if plan.http2 {
                tls::ALPN_H2
            } else {
                tls::ALPN_HTTP1
            };
            tls::client(options, &[alpn])
        })
        .transpose()
}

/// Asks a worker thread to stop sending, whichever engine runs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct StopSignal {
    /// Read by the io_uring engine at least every [`uring::STOP_POLL`].
    flag: Arc<AtomicBool>,
    /// Awaited by the tokio engine.
    notify: Arc<Notify>,
}

impl StopSignal {
    pub(crate) fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// What every worker of a run reads; built once, never written after the start.
pub(crate) struct Shared {
    pub plan: Plan,
    /// Every request of the run, encoded once: a batch of k requests is one slice of it.
    pub requests: Encoded,
    /// The mix's request names (empty for a single request: nothing is kept per name).
    pub names: Arc<[String]>,
    /// The next `{seq}` of a mix's placeholders, over all workers (touched only by a mix
    /// that has one).
    pub placeholder_seq: AtomicU64,
    pub start: Instant,
    pub measure_start: Instant,
    /// When sending stops (`-z`); none for `-n`.
    pub end: Option<Instant>,
    pub highest: Duration,
    /// A new total open-loop rate asked for during the run (f64 bits; 0: none).
    pub rate_override: Arc<AtomicU64>,
    /// Local addresses (port 0) connections are bound to, in turn; empty: the kernel picks.
    pub sources: Vec<std::net::SocketAddr>,
    /// The run's TLS client (https), shared by every connection: one session cache.
    pub tls: Option<tls::TlsClient>,
}

/// One worker's share of the run.
pub(crate) struct WorkerSpec {
    pub index: usize,
    pub connections: usize,
    /// This worker's share of `-n`.
    pub requests: Option<u64>,
    /// This worker's share of `-q`.
    pub rate: Option<f64>,
    /// This worker's share of the connections (and so of any new rate).
    pub share: f64,
    /// Open loop: where in its own slot interval this worker's schedule starts (0..1), so
    /// that the workers' schedules interleave.
    pub phase: f64,
    pub cpu: Option<usize>,
    /// This worker's share of `--idle-conns` and `--slow-conns`, by [`HeldKind::index`].
    pub held: [usize; 2],
}

#[cfg(test)]
impl WorkerSpec {
    /// The whole load on one unpinned worker with one connection (for unit tests).
    pub(crate) fn one_connection() -> WorkerSpec {
        WorkerSpec {
            index: 0,
            connections: 1,
            requests: None,
            rate: None,
            share: 1.0,
            phase: 0.0,
            cpu: None,
            held: [0; 2],
        }
    }
}

/// What a worker thread returns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerOutcome {
    /// When it stopped sending: the end of `-z`, the stop request, or when its last `-n`
    /// request was claimed.
    pub sending_ended: Instant,
    /// When its last in-flight request finished (or the grace period ran out).
    pub finished: Instant,
}

/// A count of connections that goes up and down, with the most it reached since it was
/// last asked (a tick's peak, which the tick's end alone would miss in a short run).
#[derive(Debug, Default)]
struct Level {
    now: Cell<u64>,
    most: Cell<u64>,
}

impl Level {
    fn up(&self) {
        self.now.set(self.now.get() + 1);
        self.most.set(self.most.get().max(self.now.get()));
    }

    fn down(&self) {
        self.now.set(self.now.get().saturating_sub(1));
    }

    fn get(&self) -> u64 {
        self.now.get()
    }

    /// The most since the last call (at least what is open now).
    fn take_most(&self) -> u64 {
        let most = self.most.get().max(self.now.get());
        self.most.set(self.now.get());
        most
    }
}

/// A request claimed by a connection.
#[derive(Debug, Clone, Copy)]
struct Claim {
    intended: Option<Instant>,
}

/// A request written and waiting for its response.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    /// Its position in `Shared::requests` (what was sent, and under which name).
    pos: u32,
    intended: Option<Instant>,
    begun: Instant,
    sent: Instant,
    first_byte: Option<Instant>,
    connect: Option<Duration>,
    /// The TLS handshake, when this request opened the connection.
    tls: Option<Duration>,
    first_on_connection: bool,
}

impl InFlight {
    fn start(&self) -> Instant {
        self.intended.unwrap_or(self.begun)
    }
}

/// A value that differs between runs and between processes: the wall clock's nanoseconds
/// and the pid, mixed.
fn run_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

struct Worker {
    shared: Arc<Shared>,
    rec: RefCell<WorkerRecorder>,
    stopping: Cell<bool>,
    /// Remaining measured requests (`-n`).
    tickets: Cell<Option<u64>>,
    /// Open loop: the schedule is `slot_base + k × slot_interval_s` for k = `next_slot`…;
    /// a rate change starts a new schedule at the next slot's time.
    next_slot: Cell<u64>,
    slot_base: Cell<Instant>,
    slot_interval_s: Cell<f64>,
    rate_bits: Cell<u64>,
    share: f64,
    in_flight: Cell<u64>,
    /// Connections in the middle of a TCP handshake.
    connecting: Cell<u64>,
    /// The load's connections open now.
    open: Level,
    /// Held connections (`--idle-conns`, `--slow-conns`) open and opening now, by
    /// [`HeldKind::index`].
    held_open: [Level; 2],
    held_opening: [Cell<u64>; 2],
    /// `-n`: when the last measured request was claimed (the end of the load window).
    last_ticket_at: Cell<Option<Instant>>,
    next_conn: Cell<u64>,
    /// The position in `shared.requests` the next batch begins at (workers start apart).
    next_request: Cell<usize>,
    /// The state of this worker's generator for `{rand}` and `{uuid}` placeholders.
    placeholder_rng: Cell<u64>,
    /// The next of `shared.sources` a connect is bound to (workers start apart).
    next_source: Cell<usize>,
    /// The tokio engine's one read buffer for all its connections (empty in the io_uring
    /// engine, whose connections receive into provided buffers).
    read_buf: RefCell<Vec<u8>>,
    /// `--connect-rate`: this worker's share of it, as the time between connects.
    connect_interval: Option<Duration>,
    /// When the next connect may begin.
    next_connect: Cell<Instant>,
    /// Wakes connections idling until a future slot when the run stops.
    stop_idle: Notify,
    /// When sending stopped early (a stop request): open-loop slots from then on never fell
    /// due. `-z`'s end is in `shared.end`.
    stopped_at: Cell<Option<Instant>>,
    /// Held connections are to close (see [`Worker::held_released`]).
    held_released: Cell<bool>,
    held_release: Notify,
    /// The grace period is over: every connection records what it still waits for as
    /// unfinished and returns.
    grace_over: Cell<bool>,
    grace_notify: Notify,
}

impl WorkerSpec {
    /// Whether this worker has anything to send (a share of `-n` or `-q` may be zero).
    fn has_work(&self) -> bool {
        self.requests != Some(0) && self.rate.is_none_or(|r| r > 0.0)
    }
}

impl Worker {
    fn new(shared: Arc<Shared>, spec: &WorkerSpec) -> Worker {
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
            next_slot: Cell::new(0),
            slot_base: Cell::new(
                shared.start
                    + shared.plan.first_slot_offset
                    + spec
                        .rate
                        .filter(|r| *r > 0.0)
                        .and_then(|r| Duration::try_from_secs_f64(spec.phase / r).ok())
                        .unwrap_or_default(),
            ),
            slot_interval_s: Cell::new(spec.rate.map_or(0.0, |r| 1.0 / r)),
            rate_bits: Cell::new(shared.rate_override.load(Ordering::Relaxed)),
            share: spec.share,
            in_flight: Cell::new(0),
            connecting: Cell::new(0),
            open: Level::default(),
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
    fn stop_sending(&self, stopped: bool) -> Instant {
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
    fn take_gauges(&self) -> Gauges {
        let held = |k: HeldKind| Gauge {
            open: self.held_open[k.index()].get(),
            peak_open: self.held_open[k.index()].take_most(),
            opening: self.held_opening[k.index()].get(),
        };
        Gauges {
            load: Gauge {
                open: self.open.get(),
                peak_open: self.open.take_most(),
                opening: self.connecting.get(),
            },
            held: [held(HeldKind::Idle), held(HeldKind::Slow)],
        }
    }

    /// Hands this interval's data (with the connection gauges now) to the aggregator.
    fn send_interval(&self, tx: &Sender<IntervalData>, now: Instant) -> bool {
        let mut data = self
            .rec
            .borrow_mut()
            .take_interval(now, self.shared.plan.tick);
        data.conns = self.take_gauges();
        tx.send(data).is_ok()
    }

    /// Resolves once sending has stopped (at once if it has): held connections make no new
    /// connects from then on.
    async fn sending_stopped(&self) {
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
    async fn held_released(&self) {
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
    fn wrap_up(
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
    fn connect_permit(&self, now: Instant) -> Option<Instant> {
        let interval = self.connect_interval?;
        let at = self.next_connect.get().max(now);
        self.next_connect.set(at + interval);
        (at > now).then_some(at)
    }

    /// The limit on one TCP handshake.
    fn connect_limit(&self) -> Duration {
        let plan = &self.shared.plan;
        plan.connect_timeout.min(plan.timeout)
    }

    /// The source address the next connect is bound to, round robin; none: the kernel picks.
    fn take_source(&self) -> Option<std::net::SocketAddr> {
        let sources = &self.shared.sources;
        if sources.is_empty() {
            return None;
        }
        let k = self.next_source.get();
        self.next_source.set(k.wrapping_add(1));
        Some(sources[k % sources.len()])
    }

    fn take_ticket(&self, measured: bool) -> bool {
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

    fn claim_closed(&self, now: Instant) -> Option<Claim> {
        if self.stopping.get() || self.shared.end.is_some_and(|e| now >= e) {
            return None;
        }
        self.take_ticket(now >= self.shared.measure_start)
            .then_some(Claim { intended: None })
    }

    /// Where the measured window ends for the schedule: `-z`'s end, or when a stop came.
    fn window_end(&self) -> Option<Instant> {
        match (self.shared.end, self.stopped_at.get()) {
            (Some(e), Some(s)) => Some(e.min(s)),
            (e, s) => e.or(s),
        }
    }

    /// Open loop: the next slot of the schedule, if it falls due inside the window. Slots
    /// that fell due before the window ended are still sent while the grace period lasts
    /// (a connection that was busy at the end takes them), so none goes unmeasured.
    fn claim_slot(&self) -> Option<Claim> {
        if self.grace_over.get() {
            return None;
        }
        let asked = self.shared.rate_override.load(Ordering::Relaxed);
        if asked != self.rate_bits.get() {
            self.rate_bits.set(asked);
            let rate = f64::from_bits(asked) * self.share;
            if rate > 0.0 {
                let k = self.next_slot.get();
                let next = self.slot_base.get()
                    + Duration::from_secs_f64(k as f64 * self.slot_interval_s.get());
                self.slot_base.set(next);
                self.next_slot.set(0);
                self.slot_interval_s.set(1.0 / rate);
            }
        }
        let k = self.next_slot.get();
        let at =
            self.slot_base.get() + Duration::from_secs_f64(k as f64 * self.slot_interval_s.get());
        if self.window_end().is_some_and(|e| at >= e) {
            return None;
        }
        if !self.take_ticket(at >= self.shared.measure_start) {
            return None;
        }
        self.next_slot.set(k + 1);
        Some(Claim { intended: Some(at) })
    }

    /// Resolves once the grace period is over (at once if it already is).
    async fn grace_ended(&self) {
        if !self.grace_over.get() {
            self.grace_notify.notified().await;
        }
    }

    /// Records every request a connection still holds when the grace period ends, and
    /// every claim it had not sent, as unfinished.
    fn abandon(&self, held: &Held<'_>) {
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
    fn abandon_unsent_slots(&self) {
        let Some(end) = self.window_end() else { return };
        let now = Instant::now();
        let until = end.min(now);
        let mut rec = self.rec.borrow_mut();
        loop {
            let k = self.next_slot.get();
            let at = self.slot_base.get()
                + Duration::from_secs_f64(k as f64 * self.slot_interval_s.get());
            if at >= until || !self.take_ticket(at >= self.shared.measure_start) {
                break;
            }
            self.next_slot.set(k + 1);
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
    fn name_of(&self, pos: u32) -> u32 {
        self.shared.requests.name_at(pos as usize)
    }

    /// Takes the next `k` positions of the mix for one batch; returns the first.
    #[inline]
    fn take_requests(&self, k: usize) -> usize {
        let start = self.next_request.get();
        self.next_request
            .set(self.shared.requests.advance(start, k));
        start
    }

    fn add_in_flight(&self, n: usize) {
        self.in_flight.set(self.in_flight.get() + n as u64);
    }

    fn sub_in_flight(&self, n: usize) {
        self.in_flight
            .set(self.in_flight.get().saturating_sub(n as u64));
    }
}

/// Starts one generator thread of `engine`.
pub(crate) fn spawn_worker(
    engine: EngineKind,
    shared: Arc<Shared>,
    spec: WorkerSpec,
    tx: Sender<IntervalData>,
    stop: StopSignal,
) -> std::io::Result<std::thread::JoinHandle<WorkerOutcome>> {
    std::thread::Builder::new()
        .name(format!("tailscope-gen-{}", spec.index))
        .spawn(move || {
            if let Some(cpu) = spec.cpu {
                // Pinning is best effort: a CPU outside this process's set is reported by the
                // caller's validation; a failure here leaves the thread unpinned.
                let _ = core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
            }
            if engine == EngineKind::Uring {
                return uring::worker_main(shared, spec, tx, stop.flag);
            }
            let stop = stop.notify;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime can be built");
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, worker_main(shared, spec, tx, stop))
        })
}

async fn worker_main(
    shared: Arc<Shared>,
    spec: WorkerSpec,
    tx: Sender<IntervalData>,
    stop: Arc<Notify>,
) -> WorkerOutcome {
    let plan = &shared.plan;
    let tick = plan.tick;
    let w = Rc::new(Worker::new(shared.clone(), &spec));
    *w.read_buf.borrow_mut() = vec![0; connection::READ_BUF];
    let mut conns = JoinSet::new();
    if spec.has_work() {
        for _ in 0..spec.connections {
            if plan.http2 {
                conns.spawn_local(http2::task(w.clone()));
            } else {
                conns.spawn_local(connection::task(w.clone()));
            }
        }
    }
    // Held connections are their own tasks, apart from the load's: the load ending does not
    // wait for them, and they close when sending stops.
    let mut held = JoinSet::new();
    for kind in HeldKind::ALL {
        for _ in 0..spec.held[kind.index()] {
            held.spawn_local(held::task(w.clone(), kind));
        }
    }
    let ticker = {
        let w = w.clone();
        let tx = tx.clone();
        tokio::task::spawn_local(async move {
            let mut iv = tokio::time::interval_at((w.shared.measure_start + tick).into(), tick);
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                let scheduled = iv.tick().await.into_std();
                let now = Instant::now();
                w.rec
                    .borrow_mut()
                    .record_loop_lag(now.saturating_duration_since(scheduled));
                if !w.send_interval(&tx, now) {
                    break;
                }
            }
        })
    };
    let end = shared.end;
    let stopped = tokio::select! {
        _ = async { match end { Some(e) => sleep_until(e.into()).await, None => pending().await } } => false,
        _ = stop.notified() => true,
        _ = async { while conns.join_next().await.is_some() {} } => false,
    };
    let sending_ended = w.stop_sending(stopped);
    w.stop_idle.notify_waiters();
    let drained = timeout(plan.grace, async {
        while conns.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    // The end of the figures: when the last response came, or when the grace period ran
    // out (not after the teardown below, which is no waiting for responses).
    let finished = Instant::now();
    if !drained {
        // Handshakes still open now: named in the summary (their requests are unfinished).
        w.rec
            .borrow_mut()
            .record_still_connecting(w.connecting.get());
        // What is still waiting now is the run's slowest: each connection records its
        // requests as unfinished and returns.
        w.grace_over.set(true);
        w.grace_notify.notify_waiters();
        let returned = timeout(Duration::from_millis(500), async {
            while conns.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        if !returned {
            w.rec.borrow_mut().record_aborted(w.in_flight.get());
            conns.abort_all();
        }
    }
    let gauges = w.take_gauges();
    // Each closes now, counting itself open at the end if it was.
    w.held_released.set(true);
    w.held_release.notify_waiters();
    while held.join_next().await.is_some() {}
    ticker.abort();
    w.wrap_up(&tx, sending_ended, finished, gauges)
}

/// What a connection holds when the grace period ends.
struct Held<'a> {
    in_flight: &'a VecDeque<InFlight>,
    queued: &'a VecDeque<Claim>,
    /// Closed loop: when the queued claims began (the connect or the write they wait for).
    since: Instant,
    /// What the queued claims wait for.
    stage: Stage,
    conn: u64,
    /// The connection's TCP_INFO now.
    tcp: Option<TcpFacts>,
}
