//! The tokio engine: one current-thread runtime per generator thread, one task per
//! connection, nothing shared or locked between threads on the hot path.
//!
//! A connection task runs the same loop in every mode: claim work (a ticket in closed loop,
//! a scheduled slot in open loop), connect if needed, write every claimed request in one
//! write (pipelining), then wait for responses, the next slot, or the timeout. Claims come
//! from the worker's own counters (`Cell`s: the runtime is single-threaded), so `-n` is
//! exact and the open-loop rate is held by whichever connection is free.
//!
//! The timeout timer is lazy: it is armed at a deadline no later than the oldest in-flight
//! request's, and only re-armed when it fires early, so a response costs no timer update.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::pending;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout};

use crate::error::ErrorKind;
use crate::http::{ResponseParser, MAX_HEAD};
use crate::plan::{Pace, Plan};
use crate::recorder::{
    Finished, IntervalData, Stage, TcpFacts, Unfinished, WorkerRecorder, LATE_SLACK,
};
use crate::sys::tcp_facts;

/// Read buffer per connection; it grows up to a full response head only when one needs it.
const INITIAL_BUF: usize = 16 * 1024;
/// Open loop: a slot due within this is sent now rather than slept for, and sleeps end this
/// long before their slot. tokio rounds a deadline up to the next 1 ms tick and the wake-up
/// comes later still (measured: ~1.5 ms after the asked time), so waking 1 ms early made
/// on-time sends leave ~0.5 ms late and charged that to the server in the corrected latency.
/// A send that leaves early is measured from when it actually left.
const EARLY_WAKE: Duration = Duration::from_millis(2);
/// A connection whose connect failed waits this long before the next try, doubling up to
/// [`MAX_BACKOFF`] and back to this after a success: a refused connect returns in
/// microseconds, and without a pause a run against nothing spins at ~100 k connects a
/// second, burning the CPU it is meant to measure with. Only failed connects wait.
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest pause between failed connects of one connection.
const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// A handshake at least this slow had a SYN retransmitted (the first SYN RTO is 1 s): the
/// connection's TCP_INFO is read right after it to count them.
const SLOW_HANDSHAKE: Duration = Duration::from_millis(200);

/// What every worker of a run reads; built once, never written after the start.
pub(crate) struct Shared {
    pub plan: Plan,
    /// `pipeline` copies of the encoded request; a prefix of k copies is k requests.
    pub batch: Vec<u8>,
    pub request_len: usize,
    pub start: Instant,
    pub measure_start: Instant,
    /// When sending stops (`-z`); none for `-n`.
    pub end: Option<Instant>,
    pub highest: Duration,
    /// A new total open-loop rate asked for during the run (f64 bits; 0: none).
    pub rate_override: Arc<AtomicU64>,
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
    pub cpu: Option<usize>,
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

/// A request claimed by a connection.
#[derive(Debug, Clone, Copy)]
struct Claim {
    intended: Option<Instant>,
}

/// A request written and waiting for its response.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    intended: Option<Instant>,
    begun: Instant,
    sent: Instant,
    first_byte: Option<Instant>,
    connect: Option<Duration>,
    first_on_connection: bool,
}

impl InFlight {
    fn start(&self) -> Instant {
        self.intended.unwrap_or(self.begun)
    }
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
    /// `-n`: when the last measured request was claimed (the end of the load window).
    last_ticket_at: Cell<Option<Instant>>,
    next_conn: Cell<u64>,
    /// Wakes connections idling until a future slot when the run stops.
    stop_idle: Notify,
    /// When sending stopped early (a stop request): open-loop slots from then on never fell
    /// due. `-z`'s end is in `shared.end`.
    stopped_at: Cell<Option<Instant>>,
    /// The grace period is over: every connection records what it still waits for as
    /// unfinished and returns.
    grace_over: Cell<bool>,
    grace_notify: Notify,
}

impl Worker {
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
                },
                now,
            );
        }
    }

    fn add_in_flight(&self, n: usize) {
        self.in_flight.set(self.in_flight.get() + n as u64);
    }

    fn sub_in_flight(&self, n: usize) {
        self.in_flight
            .set(self.in_flight.get().saturating_sub(n as u64));
    }
}

/// Starts one generator thread.
pub(crate) fn spawn_worker(
    shared: Arc<Shared>,
    spec: WorkerSpec,
    tx: Sender<IntervalData>,
    stop: Arc<Notify>,
) -> std::io::Result<std::thread::JoinHandle<WorkerOutcome>> {
    std::thread::Builder::new()
        .name(format!("tailscope-gen-{}", spec.index))
        .spawn(move || {
            if let Some(cpu) = spec.cpu {
                // Pinning is best effort: a CPU outside this process's set is reported by the
                // caller's validation; a failure here leaves the thread unpinned.
                let _ = core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
            }
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
    let rec = WorkerRecorder::new(
        spec.index,
        shared.measure_start,
        shared.highest,
        plan.slowest,
    );
    let w = Rc::new(Worker {
        rec: RefCell::new(rec),
        stopping: Cell::new(false),
        tickets: Cell::new(spec.requests),
        next_slot: Cell::new(0),
        slot_base: Cell::new(shared.start),
        slot_interval_s: Cell::new(spec.rate.map_or(0.0, |r| 1.0 / r)),
        rate_bits: Cell::new(shared.rate_override.load(Ordering::Relaxed)),
        share: spec.share,
        in_flight: Cell::new(0),
        connecting: Cell::new(0),
        last_ticket_at: Cell::new(None),
        next_conn: Cell::new(0),
        stop_idle: Notify::new(),
        stopped_at: Cell::new(None),
        grace_over: Cell::new(false),
        grace_notify: Notify::new(),
        shared: shared.clone(),
    });
    let mut conns = JoinSet::new();
    if spec.requests != Some(0) && spec.rate.is_none_or(|r| r > 0.0) {
        for _ in 0..spec.connections {
            conns.spawn_local(connection(w.clone()));
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
                let mut rec = w.rec.borrow_mut();
                rec.record_loop_lag(now.saturating_duration_since(scheduled));
                let data = rec.take_interval(now, tick);
                drop(rec);
                if tx.send(data).is_err() {
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
    if stopped {
        w.stopped_at.set(Some(Instant::now()));
    }
    // The load window ends when sending stops, not when the last response comes back: the
    // timer wakes a little after `end`, and `-n` ends at its last claim.
    let mut sending_ended = Instant::now();
    if let Some(e) = end {
        sending_ended = sending_ended.min(e);
    }
    if let Some(t) = w.last_ticket_at.get() {
        sending_ended = sending_ended.min(t);
    }
    w.stopping.set(true);
    w.stop_idle.notify_waiters();
    let drained = timeout(plan.grace, async {
        while conns.join_next().await.is_some() {}
    })
    .await
    .is_ok();
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
    if matches!(shared.plan.pace, Pace::Rate(_)) {
        w.grace_over.set(true);
        w.abandon_unsent_slots();
    }
    let finished = Instant::now();
    ticker.abort();
    let last = w.rec.borrow_mut().take_interval(finished, tick);
    let _ = tx.send(last);
    WorkerOutcome {
        sending_ended,
        finished,
    }
}

/// How a connection ended: the kind to count its in-flight requests under, if any.
enum Closed {
    /// Closed by the server between responses or by a `Connection: close`: resend the rest.
    Graceful,
    /// Failed: the front request gets `front`, the others `rest`.
    Failed { front: ErrorKind, rest: ErrorKind },
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

/// Reads a connection's TCP_INFO and counts the segments it retransmitted since the last
/// read (`seen`).
fn observe(w: &Worker, s: &TcpStream, seen: &mut u32, handshake: bool) -> Option<TcpFacts> {
    let facts = tcp_facts(s);
    w.rec.borrow_mut().record_tcp(facts, seen, handshake);
    facts
}

/// A connection task; its lifetime is what its requests' time is checked against
/// (Little's law).
async fn connection(w: Rc<Worker>) {
    let started = Instant::now();
    connection_loop(w.clone()).await;
    w.rec
        .borrow_mut()
        .record_connection_span(started, Instant::now(), w.shared.plan.pipeline);
}

async fn connection_loop(w: Rc<Worker>) {
    let shared = w.shared.clone();
    let plan = &shared.plan;
    let depth = plan.pipeline;
    let open_loop = matches!(plan.pace, Pace::Rate(_));
    let connect_limit = plan.connect_timeout.min(plan.timeout);
    let mut buf = vec![0u8; INITIAL_BUF];
    let (mut pos, mut filled) = (0usize, 0usize);
    let mut parser = ResponseParser::new(&plan.method);
    let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(depth);
    let mut queued: VecDeque<Claim> = VecDeque::with_capacity(depth);
    let mut next_slot: Option<Claim> = None;
    let mut stream: Option<TcpStream> = None;
    let mut conn_id = 0u64;
    // The connection's retransmitted segments as of its last TCP_INFO read.
    let mut retrans_seen = 0u32;
    let mut had_connection = false;
    let mut backoff = MIN_BACKOFF;
    let timer = tokio::time::sleep_until((Instant::now() + plan.timeout).into());
    tokio::pin!(timer);

    loop {
        let now = Instant::now();
        if w.grace_over.get() {
            let tcp = stream
                .as_ref()
                .and_then(|s| observe(&w, s, &mut retrans_seen, false));
            w.abandon(&Held {
                in_flight: &in_flight,
                queued: &queued,
                since: now,
                stage: Stage::NotSent,
                conn: conn_id,
                tcp,
            });
            return;
        }
        // 1. Claim work up to the pipelining depth. After a stop, a slot held for later is
        // dropped if it no longer falls inside the window.
        if w.stopping.get()
            && (!open_loop
                || next_slot
                    .and_then(|c| c.intended)
                    .zip(w.window_end())
                    .is_some_and(|(at, end)| at >= end))
        {
            next_slot = None;
        }
        while in_flight.len() + queued.len() < depth {
            if open_loop {
                let Some(slot) = next_slot.take().or_else(|| w.claim_slot()) else {
                    break;
                };
                if slot.intended.is_some_and(|t| t > now + EARLY_WAKE) {
                    next_slot = Some(slot);
                    break;
                }
                queued.push_back(slot);
            } else {
                match w.claim_closed(now) {
                    Some(c) => queued.push_back(c),
                    None => break,
                }
            }
        }
        if in_flight.is_empty() && queued.is_empty() {
            let Some(slot) = next_slot else {
                if let Some(s) = stream.as_ref() {
                    observe(&w, s, &mut retrans_seen, false);
                }
                return;
            };
            // Idle until the slot; wake early (see EARLY_WAKE).
            let wake = slot.intended.expect("open-loop slots have a time") - EARLY_WAKE;
            let closed_while_idle = tokio::select! {
                _ = sleep_until(wake.into()) => false,
                _ = w.stop_idle.notified() => false,
                _ = w.grace_ended() => false,
                // A server that closes idle connections (keep-alive timeout) is noticed here,
                // not as a failure of the next request.
                _ = async { match stream.as_mut() { Some(s) => { let _ = s.read(&mut buf[..]).await; } None => pending().await } } => true,
            };
            if closed_while_idle {
                stream = None;
            }
            continue;
        }

        // 2. Connect when needed.
        let mut begun = now;
        let mut connect_time = None;
        if stream.is_none() && !queued.is_empty() {
            if had_connection {
                w.rec.borrow_mut().record_reconnect();
            }
            w.connecting.set(w.connecting.get() + 1);
            let connecting = timeout(connect_limit, TcpStream::connect(shared.plan.addr));
            let connected = tokio::select! {
                r = connecting => match r {
                    Ok(Ok(s)) => Ok(s),
                    Ok(Err(e)) => Err(connect_error_kind(&e)),
                    Err(_) => Err(ErrorKind::ConnectTimeout),
                },
                _ = w.grace_ended() => {
                    w.abandon(&Held {
                        in_flight: &in_flight,
                        queued: &queued,
                        since: now,
                        stage: Stage::Connecting,
                        conn: conn_id,
                        tcp: None,
                    });
                    return;
                }
            };
            w.connecting.set(w.connecting.get().saturating_sub(1));
            match connected {
                Ok(s) => {
                    backoff = MIN_BACKOFF;
                    let _ = s.set_nodelay(true);
                    let took = now.elapsed();
                    retrans_seen = 0;
                    if took >= SLOW_HANDSHAKE {
                        observe(&w, &s, &mut retrans_seen, true);
                    }
                    stream = Some(s);
                    had_connection = true;
                    conn_id = w.next_conn.get();
                    w.next_conn.set(conn_id + 1);
                    connect_time = Some(took);
                    parser.reset();
                    (pos, filled) = (0, 0);
                    timer.as_mut().reset((now + plan.timeout).into());
                }
                Err(kind) => {
                    let c = queued.pop_front().expect("a claim to connect for");
                    let failed_at = Instant::now();
                    {
                        let mut rec = w.rec.borrow_mut();
                        rec.record_failed(kind, c.intended.unwrap_or(now), failed_at, 0, true);
                        // The claims behind it waited for the same connect and will try again.
                        rec.record_waiting(now, failed_at, queued.len());
                    }
                    // Back off before the next try (see MIN_BACKOFF); a stop cuts it short.
                    // The pause is the generator's own, on purpose: Little's law counts it.
                    if !w.stopping.get() {
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = w.stop_idle.notified() => {}
                        }
                        w.rec
                            .borrow_mut()
                            .record_waiting(failed_at, Instant::now(), depth);
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        }
        let Some(s) = stream.as_mut() else { continue };

        // 3. Write every claimed request in one write.
        if !queued.is_empty() {
            let sent = if connect_time.is_some() {
                Instant::now()
            } else {
                now
            };
            if connect_time.is_none() {
                begun = sent;
            }
            let k = queued.len();
            let write = tokio::select! {
                r = write_requests(s, &shared.batch[..k * shared.request_len], plan.timeout) => Some(r),
                _ = w.grace_ended() => None,
            };
            let Some(write) = write else {
                let tcp = observe(&w, s, &mut retrans_seen, false);
                w.abandon(&Held {
                    in_flight: &in_flight,
                    queued: &queued,
                    since: begun,
                    stage: Stage::Sending,
                    conn: conn_id,
                    tcp,
                });
                return;
            };
            let mut rec = w.rec.borrow_mut();
            for (i, c) in queued.drain(..).enumerate() {
                if let Some(t) = c.intended {
                    if sent > t + LATE_SLACK {
                        rec.record_late_send(t);
                    }
                }
                in_flight.push_back(InFlight {
                    intended: c.intended,
                    begun,
                    sent,
                    first_byte: None,
                    connect: if i == 0 { connect_time } else { None },
                    first_on_connection: i == 0 && connect_time.is_some(),
                });
            }
            drop(rec);
            w.add_in_flight(k);
            if let Err(kind) = write {
                close(
                    &w,
                    &mut stream,
                    &mut in_flight,
                    &mut queued,
                    Closed::Failed {
                        front: kind,
                        rest: kind,
                    },
                    conn_id,
                    &mut retrans_seen,
                );
                continue;
            }
        }

        // 4. Wait for responses, the next slot, or the timeout.
        let slot_due = next_slot
            .and_then(|c| c.intended)
            .filter(|_| in_flight.len() < depth);
        let mut grace_over = false;
        let read = tokio::select! {
            biased;
            r = s.read(&mut buf[filled..]) => Some(r),
            _ = &mut timer => None,
            _ = async { match slot_due { Some(t) => sleep_until((t - EARLY_WAKE).into()).await, None => pending().await } } => continue,
            _ = w.grace_ended() => {
                grace_over = true;
                None
            }
        };
        if grace_over {
            let tcp = observe(&w, s, &mut retrans_seen, false);
            w.abandon(&Held {
                in_flight: &in_flight,
                queued: &queued,
                since: now,
                stage: Stage::NotSent,
                conn: conn_id,
                tcp,
            });
            return;
        }
        let now = Instant::now();
        let n = match read {
            None => {
                // The lazy timer fired: a real timeout only if the oldest request is overdue.
                match in_flight.front() {
                    Some(oldest) if oldest.begun + plan.timeout <= now => {
                        close(
                            &w,
                            &mut stream,
                            &mut in_flight,
                            &mut queued,
                            Closed::Failed {
                                front: ErrorKind::Timeout,
                                rest: ErrorKind::Timeout,
                            },
                            conn_id,
                            &mut retrans_seen,
                        );
                        timer.as_mut().reset((now + plan.timeout).into());
                    }
                    Some(oldest) => timer.as_mut().reset((oldest.begun + plan.timeout).into()),
                    None => timer.as_mut().reset((now + plan.timeout).into()),
                }
                continue;
            }
            Some(Err(e)) => {
                let kind = ErrorKind::from_io(&e);
                close(
                    &w,
                    &mut stream,
                    &mut in_flight,
                    &mut queued,
                    Closed::Failed {
                        front: kind,
                        rest: kind,
                    },
                    conn_id,
                    &mut retrans_seen,
                );
                continue;
            }
            Some(Ok(0)) => {
                let outcome = if in_flight.is_empty() {
                    Closed::Graceful
                } else {
                    match parser.on_eof(filled - pos) {
                        Ok(Some(done)) => {
                            let f = in_flight.pop_front().expect("checked non-empty");
                            w.sub_in_flight(1);
                            let tcp = slow_tcp(&w, s, &mut retrans_seen, &f, now);
                            finish(&w, &f, now, conn_id, done.status, done.bytes, tcp);
                            Closed::Graceful
                        }
                        Ok(None) => Closed::Graceful,
                        Err(kind) => Closed::Failed {
                            front: kind,
                            rest: ErrorKind::EofBeforeResponse,
                        },
                    }
                };
                close(
                    &w,
                    &mut stream,
                    &mut in_flight,
                    &mut queued,
                    outcome,
                    conn_id,
                    &mut retrans_seen,
                );
                continue;
            }
            Some(Ok(n)) => n,
        };
        filled += n;

        // 5. Every complete response in the buffer, in order.
        let mut closing = None;
        while pos < filled {
            let Some(front) = in_flight.front_mut() else {
                // Bytes nobody asked for: the stream cannot be trusted any more.
                closing = Some(Closed::Graceful);
                break;
            };
            if front.first_byte.is_none() {
                front.first_byte = Some(now);
            }
            match parser.parse(&buf[pos..filled]) {
                Ok(progress) => {
                    pos += progress.consumed;
                    let Some(done) = progress.completed else {
                        break;
                    };
                    let f = in_flight.pop_front().expect("checked non-empty");
                    w.sub_in_flight(1);
                    let tcp = slow_tcp(&w, s, &mut retrans_seen, &f, now);
                    finish(&w, &f, now, conn_id, done.status, done.bytes, tcp);
                    if done.close || !plan.keepalive {
                        closing = Some(Closed::Graceful);
                        break;
                    }
                }
                Err(kind) => {
                    closing = Some(Closed::Failed {
                        front: kind,
                        rest: kind,
                    });
                    break;
                }
            }
        }
        if let Some(outcome) = closing {
            // A bad response poisons only its own request; the rest are sent again.
            let outcome = match outcome {
                Closed::Failed { front, .. }
                    if front == ErrorKind::BadResponse || front == ErrorKind::HeaderTooLarge =>
                {
                    let f = in_flight.pop_front().expect("a request was being parsed");
                    w.sub_in_flight(1);
                    w.rec.borrow_mut().record_failed(
                        front,
                        f.start(),
                        now,
                        conn_id,
                        f.first_on_connection,
                    );
                    Closed::Graceful
                }
                other => other,
            };
            close(
                &w,
                &mut stream,
                &mut in_flight,
                &mut queued,
                outcome,
                conn_id,
                &mut retrans_seen,
            );
            continue;
        }
        if pos == filled {
            (pos, filled) = (0, 0);
        } else if filled == buf.len() {
            if pos > 0 {
                buf.copy_within(pos..filled, 0);
                (pos, filled) = (0, filled - pos);
            } else {
                // A response head larger than the buffer: grow once, up to the head limit.
                buf.resize((buf.len() * 4).min(MAX_HEAD + 4096), 0);
            }
        }
    }
}

fn connect_error_kind(e: &std::io::Error) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        std::io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::from_io(e),
    }
}

/// Writes a batch of requests. The common case, a batch that fits the socket buffer, is one
/// `write` with no timer; only a write that blocks gets the request timeout.
async fn write_requests(s: &mut TcpStream, bytes: &[u8], limit: Duration) -> Result<(), ErrorKind> {
    let done = match s.try_write(bytes) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(e) => return Err(ErrorKind::from_io(&e)),
    };
    if done == bytes.len() {
        return Ok(());
    }
    match timeout(limit, s.write_all(&bytes[done..])).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ErrorKind::from_io(&e)),
        Err(_) => Err(ErrorKind::Timeout),
    }
}

/// A slow response's connection TCP_INFO (retransmits, RTT, RTO); none for the fast rest.
fn slow_tcp(
    w: &Worker,
    s: &TcpStream,
    seen: &mut u32,
    f: &InFlight,
    end: Instant,
) -> Option<TcpFacts> {
    let latency = end.saturating_duration_since(f.start().min(f.begun));
    if w.rec.borrow().is_slow(latency) {
        observe(w, s, seen, false)
    } else {
        None
    }
}

fn finish(
    w: &Worker,
    f: &InFlight,
    end: Instant,
    conn: u64,
    status: u16,
    bytes: u64,
    tcp: Option<TcpFacts>,
) {
    w.rec.borrow_mut().record_finished(&Finished {
        intended: f.intended,
        begun: f.begun,
        sent: f.sent,
        first_byte: f.first_byte.unwrap_or(end),
        end,
        connect: f.connect,
        first_on_connection: f.first_on_connection,
        conn,
        status,
        bytes,
        tcp,
    });
}

/// Drops the connection. Unanswered requests of a graceful close go back to the front of
/// the queue (keeping their intended times); those of a failed one are counted as failed.
fn close(
    w: &Worker,
    stream: &mut Option<TcpStream>,
    in_flight: &mut VecDeque<InFlight>,
    queued: &mut VecDeque<Claim>,
    outcome: Closed,
    conn: u64,
    retrans_seen: &mut u32,
) {
    if let Some(s) = stream.take() {
        observe(w, &s, retrans_seen, false);
    }
    w.sub_in_flight(in_flight.len());
    match outcome {
        Closed::Graceful => {
            for f in in_flight.drain(..).rev() {
                queued.push_front(Claim {
                    intended: f.intended,
                });
            }
        }
        Closed::Failed { front, rest } => {
            let now = Instant::now();
            let mut rec = w.rec.borrow_mut();
            for (i, f) in in_flight.drain(..).enumerate() {
                let kind = if i == 0 { front } else { rest };
                rec.record_failed(kind, f.start(), now, conn, f.first_on_connection);
            }
        }
    }
}
