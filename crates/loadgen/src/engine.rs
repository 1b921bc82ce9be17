//! The generator engines and what they share.
//!
//! Two engines run a plan: tokio (epoll; one current-thread runtime per generator thread,
//! one task per connection) and io_uring ([`uring`]: one ring per generator thread, the
//! connections driven from its completions). [`EngineChoice`] picks one; both keep nothing
//! shared or locked between threads on the hot path, and both hand their data to the
//! aggregator through a `WorkerRecorder`, so nothing after them knows which ran.
//!
//! This module picks the engine and runs the tokio engine's threads and runtime. The parts:
//! [`worker`] is the worker both engines build on (its shared counters and the claims it
//! hands out); [`connection`] is one connection's state and steps, engine-independent;
//! [`http1`] and [`http2`] are the tokio engine's connection tasks, [`tcp`] and [`tls`] its
//! socket and TLS setup, [`held`] the idle and slow held connections. A connection runs the same loop
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
mod http1;
mod http2;
mod spin;
mod tcp;
pub(crate) mod tls;
mod uring;
mod worker;

pub use spin::{SpinBeforeSleep, MAX_WINDOW as MAX_SPIN_WINDOW};
pub(crate) use uring::direct as uring_direct;

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

use crate::conns::HeldKind;
use crate::error::Error;
use crate::mix::Encoded;
use crate::plan::Plan;
use crate::recorder::IntervalData;
use worker::{Claim, Held, InFlight, Level, Worker};

// What a plan asks for is the plan's; its old path stays.
pub use crate::plan::EngineChoice;

/// The engine that ran a run, and why it was the one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EngineUsed {
    /// `uring` or `tokio`.
    pub name: String,
    /// Why: asked for with `--engine`, or what `auto` found.
    pub reason: String,
}

/// Whether `auto` picks io_uring when the probe succeeds. It does since the io_uring engine
/// passes the whole parameterised run test matrix (tests/generator/run.rs,
/// tests/cli/unfinished.rs, crates/loadgen/tests/rate_change.rs); set it to false to make tokio
/// the default again.
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
    crate::transport::tls_client(plan.tls.as_ref(), plan.http2)
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
    /// `--burst`: this worker's part of each burst (the parts add up to its size).
    pub burst_size: u64,
    pub cpu: Option<usize>,
    /// This worker's share of `--idle-conns` and `--slow-conns`, by [`HeldKind::index`].
    pub held: [usize; 2],
}

#[cfg(test)]
impl Shared {
    /// What the workers of `plan` read for a load from `start` (measured at once) to `end`
    /// (for unit tests).
    pub(crate) fn for_tests(plan: Plan, start: Instant, end: Option<Instant>) -> Shared {
        Shared {
            requests: plan.encode().unwrap(),
            names: Vec::new().into(),
            placeholder_seq: AtomicU64::new(0),
            start,
            measure_start: start,
            end,
            highest: plan.timeout * 3,
            rate_override: Arc::new(AtomicU64::new(0)),
            sources: Vec::new(),
            tls: None,
            plan,
        }
    }
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
            burst_size: 0,
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

impl WorkerSpec {
    /// Whether this worker has anything to send (a share of `-n` or `-q` may be zero).
    fn has_work(&self) -> bool {
        self.requests != Some(0) && self.rate.is_none_or(|r| r > 0.0)
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
            let runtime = spin::runtime(shared.plan.spin_before_sleep)
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
    *w.read_buf.borrow_mut() = vec![0; http1::READ_BUF];
    let mut conns = JoinSet::new();
    if spec.has_work() {
        for _ in 0..spec.connections {
            if plan.http2 {
                conns.spawn_local(http2::task(w.clone()));
            } else {
                conns.spawn_local(http1::task(w.clone()));
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
