//! tailscope's HTTP/1.1 load generator.
//!
//! A [`Plan`] says what to run; [`run`] starts one generator thread per core (of the tokio
//! or the io_uring [`engine`]), each owning its connections and a [`recorder::WorkerRecorder`]. Every tick the
//! workers hand their interval data to the [`aggregate::Aggregator`] on the calling thread,
//! which publishes a [`Snapshot`] to the caller and, at the end, returns the run's
//! [`RunTotals`] (the published types are in [`snapshot`]); the report (crate
//! `tailscope-report`) turns those into the run's document. [`segment`] cuts a plan to one
//! generator's share when N hosts run the load together. The engines and the recorder meet
//! only at `WorkerRecorder`, so nothing after the engine knows which one ran.
//!
//! No `unsafe` here but for [`sys`], the few system calls no well-kept crate wraps (TCP_INFO,
//! IP_BIND_ADDRESS_NO_PORT, IP_LOCAL_PORT_RANGE, the allocator's mmap threshold, a thread's
//! context switches); the io_uring engine's ring and its `unsafe` are
//! `tailscope_uring::client`. Every other module is `forbid(unsafe_code)` (no `allow` inside
//! can lift it); the crate as a whole can only deny it, since `sys` must allow it.
#![deny(unsafe_code)]

#[forbid(unsafe_code)]
pub mod aggregate;
#[forbid(unsafe_code)]
pub mod conns;
#[forbid(unsafe_code)]
mod counts;
#[forbid(unsafe_code)]
mod engine;
#[forbid(unsafe_code)]
pub mod error;
#[forbid(unsafe_code)]
pub mod failures;
#[forbid(unsafe_code)]
pub mod fmt;
#[forbid(unsafe_code)]
pub mod http;
#[forbid(unsafe_code)]
pub mod mix;
#[forbid(unsafe_code)]
pub mod plan;
#[forbid(unsafe_code)]
pub mod recorder;
#[forbid(unsafe_code)]
pub mod segment;
#[forbid(unsafe_code)]
pub mod snapshot;
mod sys;
#[forbid(unsafe_code)]
pub mod transport;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use segment::share;

pub use engine::{EngineChoice, EngineUsed, SpinBeforeSleep, MAX_SPIN_WINDOW};
pub use error::{Error, ErrorKind};
pub use plan::{Pace, Plan, SourceAddrs, Stop};
pub use snapshot::{
    count_by_request, Percentiles, Phase, RateChange, RequestLive, RequestPoint, RunTotals,
    SlowRequest, Snapshot, SpikeCounts, Stage, TimePoint,
};

/// Lets another thread (a signal handler, the TUI) stop a run early. Stopping is graceful:
/// no new requests, in-flight ones may finish within the plan's grace period, then the run
/// returns its totals as usual.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    /// Open loop: a new total rate (f64 bits), 0 when never changed; read by the workers at
    /// each slot claim, a relaxed load.
    rate: Arc<AtomicU64>,
}

impl RunControl {
    /// A control that has not been stopped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The flag itself, for `signal_hook::flag::register`.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Open loop: changes the total rate from the next scheduled request on, kept within
    /// [`plan::MIN_RATE`]..=[`plan::MAX_RATE`]. Ignored in closed loop and for NaN.
    pub fn set_rate(&self, total_per_second: f64) {
        if !total_per_second.is_nan() {
            let rate = total_per_second.clamp(plan::MIN_RATE, plan::MAX_RATE);
            self.rate.store(rate.to_bits(), Ordering::Relaxed);
        }
    }

    /// The rate asked for by [`RunControl::set_rate`], if any.
    pub fn rate(&self) -> Option<f64> {
        match self.rate.load(Ordering::Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    pub(crate) fn rate_cell(&self) -> Arc<AtomicU64> {
        self.rate.clone()
    }
}

/// Which engine would run a plan that asks for `choice`, and why; an error when it asks
/// for io_uring and this machine cannot run it (check it before anything starts).
pub fn resolve_engine(choice: EngineChoice) -> Result<EngineUsed, Error> {
    engine::choose(choice, None).map(|(_, used)| used)
}

/// Which engine would run `plan`, and why (as [`resolve_engine`], knowing what the plan
/// needs: TLS runs on tokio only).
pub fn resolve_engine_for(plan: &Plan) -> Result<EngineUsed, Error> {
    engine::choose(plan.engine, plan.needs_tokio()).map(|(_, used)| used)
}

/// Whether `plan`'s sockets would live in its generator threads' registered file tables
/// (the io_uring engine's direct descriptors) rather than in the process's descriptor table:
/// each thread's table may then hold RLIMIT_NOFILE sockets, so a run may hold that many
/// per thread (slow held connections keep a plain descriptor each all the same).
pub fn direct_descriptors_for(plan: &Plan) -> bool {
    matches!(
        engine::choose(plan.engine, plan.needs_tokio()),
        Ok((engine::EngineKind::Uring, _))
    ) && engine::uring_direct().is_ok()
}

/// The most sockets one generator thread of `plan` holds with `threads` threads: its share
/// of `-c`, `--idle-conns` and `--slow-conns` (the first threads take the remainders).
pub fn sockets_per_thread(plan: &Plan, threads: usize) -> u64 {
    let threads = threads.min(plan.connections).max(1);
    share(plan.connections as u64, threads, 0)
        + [plan.idle_conns, plan.slow_conns]
            .iter()
            .map(|&n| held_share(plan, n, threads, 0) as u64)
            .sum::<u64>()
}

/// Thread `i`'s share of `n` held connections: only threads with a share of the load hold
/// any (a thread with no `-n` share ends at once, and its held connections never opened).
fn held_share(plan: &Plan, n: usize, threads: usize, i: usize) -> usize {
    let loaded = match plan.stop {
        Stop::Requests(requests) => threads.min(requests.try_into().unwrap_or(usize::MAX)),
        Stop::Duration(_) => threads,
    }
    .max(1);
    if i < loaded {
        share(n as u64, loaded, i) as usize
    } else {
        0
    }
}

/// The threads' shares of the load: connections, `-n` and `-q` by [`share`], each CPU in
/// turn. Open loop, thread t's first slot is the earlier threads' share of the connections
/// into its own interval (t/rate for equal shares), so T threads interleave into one even
/// schedule: without it they all sent at the same instant, T requests every T/rate s.
fn worker_specs(plan: &Plan, threads: usize) -> Vec<engine::WorkerSpec> {
    let mut before = 0.0;
    (0..threads)
        .map(|i| {
            let connections = share(plan.connections as u64, threads, i) as usize;
            let part = connections as f64 / plan.connections as f64;
            let spec = engine::WorkerSpec {
                index: i,
                connections,
                requests: match plan.stop {
                    Stop::Requests(n) => Some(share(n, threads, i)),
                    Stop::Duration(_) => None,
                },
                rate: match plan.pace {
                    Pace::Rate(r) => Some(r * part),
                    Pace::Max => None,
                },
                share: part,
                phase: before,
                burst_size: match plan.arrival {
                    plan::Arrival::Burst { size, .. } => share(size, threads, i),
                    _ => 0,
                },
                cpu: (!plan.cpus.is_empty()).then(|| plan.cpus[i % plan.cpus.len()]),
                held: [plan.idle_conns, plan.slow_conns].map(|n| held_share(plan, n, threads, i)),
            };
            before += part;
            spec
        })
        .collect()
}

/// Runs `plan` to its end (or until `control` stops it), calling `on_snapshot` about once a
/// tick with the run so far, and returns what it measured.
///
/// The phases: the plan checked and its requests encoded, one worker thread per share of the
/// connections, the loop on this thread that merges what they record and hands out a
/// snapshot each tick, then the workers joined and the load window measured.
pub fn run(
    plan: &Plan,
    control: &RunControl,
    mut on_snapshot: impl FnMut(&Snapshot),
) -> Result<RunTotals, Error> {
    plan.validate()?;
    // Memory in steady state from the first tick (see the function).
    sys::steady_allocator();
    // One growth of the descriptor table now, not one per doubling while connecting.
    sys::grow_descriptor_table(plan.connections + plan.idle_conns + plan.slow_conns);
    let sources = plan
        .source_ips()?
        .into_iter()
        .map(|ip| std::net::SocketAddr::new(ip, 0))
        .collect();
    let (engine, engine_used) = engine::choose(plan.engine, plan.needs_tokio())?;
    let shared = Arc::new(shared_state(plan, control, sources)?);
    let threads = plan.effective_threads();
    let (tx, rx) = mpsc::channel();
    let workers = spawn_workers(engine, &shared, plan, threads, tx)?;
    let agg = aggregate::Aggregator::new(threads, shared.highest, plan.tick, plan.slowest)
        .with_held([plan.idle_conns as u64, plan.slow_conns as u64])
        .with_requests(&shared.names, &mix::series_names(&plan.requests));
    let mut driver = Driver::new(plan, &shared, control, agg);
    driver.drive(&workers, &rx, &mut on_snapshot);
    let measure_start = shared.measure_start;
    let mut sending_ended = measure_start;
    let mut last_finish = measure_start;
    for (handle, _) in workers {
        match handle.join() {
            Ok(outcome) => {
                sending_ended = sending_ended.max(outcome.sending_ended);
                last_finish = last_finish.max(outcome.finished);
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    // The load window is the measured part of sending; responses that came back in the
    // grace period after it are counted, and the grace is reported on its own.
    let duration = sending_ended.saturating_duration_since(measure_start);
    let grace = last_finish.saturating_duration_since(sending_ended.max(measure_start));
    let mut totals = driver.finish(duration, grace, &mut on_snapshot);
    totals.engine = engine_used;
    Ok(totals)
}

/// What every worker shares: the plan with its requests encoded once, and the run's clock
/// (its start now, the measured part after the warm-up, the end of `-z`).
fn shared_state(
    plan: &Plan,
    control: &RunControl,
    sources: Vec<std::net::SocketAddr>,
) -> Result<engine::Shared, Error> {
    let tls = engine::transport_client(plan)?;
    let run_for = match plan.stop {
        Stop::Duration(d) => d,
        Stop::Requests(_) => Duration::from_secs(3600),
    };
    // Latencies above this are clamped into the top bucket; open-loop latency can grow with
    // the run's length, so the bound does too.
    let highest = (plan.timeout * 3)
        .max(run_for + plan.timeout)
        .clamp(Duration::from_secs(60), Duration::from_secs(24 * 3600));
    let start = Instant::now();
    let measure_start = start + plan.warmup;
    let end = match plan.stop {
        Stop::Duration(d) => Some(measure_start + d),
        Stop::Requests(_) => None,
    };
    let requests = plan.encode()?;
    let names: Arc<[String]> = plan.request_names().into();
    Ok(engine::Shared {
        rate_override: control.rate_cell(),
        plan: plan.clone(),
        requests,
        names,
        placeholder_seq: AtomicU64::new(0),
        start,
        measure_start,
        end,
        highest,
        sources,
        tls,
    })
}

/// A worker thread and the signal that stops it.
type Worker = (
    std::thread::JoinHandle<engine::WorkerOutcome>,
    engine::StopSignal,
);

/// Starts one worker per share of the connections, each sending what it records on `tx`; if
/// one cannot be started, those already started are stopped.
fn spawn_workers(
    engine: engine::EngineKind,
    shared: &Arc<engine::Shared>,
    plan: &Plan,
    threads: usize,
    tx: mpsc::Sender<recorder::IntervalData>,
) -> Result<Vec<Worker>, Error> {
    let mut workers: Vec<Worker> = Vec::with_capacity(threads);
    for spec in worker_specs(plan, threads) {
        let stop = engine::StopSignal::default();
        let handle =
            match engine::spawn_worker(engine, shared.clone(), spec, tx.clone(), stop.clone()) {
                Ok(h) => h,
                Err(e) => {
                    for (_, stop) in &workers {
                        stop.stop();
                    }
                    return Err(Error::Spawn(e));
                }
            };
        workers.push((handle, stop));
    }
    Ok(workers)
}

/// The run's loop on the calling thread: the workers' interval data merged as it comes, a
/// snapshot of the run so far each tick, the rate changes asked for noted, a stop passed on.
struct Driver<'a> {
    plan: &'a Plan,
    shared: &'a engine::Shared,
    control: &'a RunControl,
    agg: aggregate::Aggregator,
    /// One snapshot, overwritten every tick: its buffers (a histogram of some 100 KiB) are
    /// reused rather than allocated anew ten times a second.
    snap: Snapshot,
    next_snapshot: Instant,
    last_snapshot: Instant,
    /// When the stop was passed on to the workers.
    stopped_at: Option<Instant>,
    rate_changes: Vec<RateChange>,
    last_rate: Option<f64>,
}

impl<'a> Driver<'a> {
    fn new(
        plan: &'a Plan,
        shared: &'a engine::Shared,
        control: &'a RunControl,
        agg: aggregate::Aggregator,
    ) -> Self {
        let snap = agg.new_snapshot();
        Driver {
            plan,
            shared,
            control,
            agg,
            snap,
            next_snapshot: Instant::now() + plan.tick,
            last_snapshot: Instant::now(),
            stopped_at: None,
            rate_changes: Vec::new(),
            last_rate: control.rate(),
        }
    }

    /// Loops until every worker has ended (their channel closes).
    fn drive(
        &mut self,
        workers: &[Worker],
        rx: &mpsc::Receiver<recorder::IntervalData>,
        on_snapshot: &mut impl FnMut(&Snapshot),
    ) {
        loop {
            self.note_rate_change();
            let now = Instant::now();
            if now >= self.next_snapshot {
                self.snapshot(now, on_snapshot);
            }
            if self.stopped_at.is_none() && self.control.is_stopped() {
                for (_, stop) in workers {
                    stop.stop();
                }
                self.stopped_at = Some(Instant::now());
            }
            // Wake at least every 10 ms so a stop request is passed on promptly.
            let wait = self
                .next_snapshot
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(10));
            match rx.recv_timeout(wait) {
                Ok(data) => self.agg.merge(data),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Rate changes are noted here, off the workers' path, when they are asked for.
    fn note_rate_change(&mut self) {
        let asked = self.control.rate();
        if asked == self.last_rate {
            return;
        }
        self.last_rate = asked;
        if let Some(rate) = asked {
            let now = Instant::now();
            let measure_start = self.shared.measure_start;
            let t_s = if now >= measure_start {
                (now - measure_start).as_secs_f64()
            } else {
                -(measure_start - now).as_secs_f64()
            };
            self.rate_changes.push(RateChange { t_s, rate });
        }
    }

    /// The tick's snapshot of the run so far, handed to `on_snapshot`.
    fn snapshot(&mut self, now: Instant, on_snapshot: &mut impl FnMut(&Snapshot)) {
        let measure_start = self.shared.measure_start;
        let phase = if self.stopped_at.is_some() || self.shared.end.is_some_and(|e| now >= e) {
            Phase::Stopping
        } else if now < measure_start {
            Phase::WarmingUp
        } else {
            Phase::Running
        };
        self.agg.snapshot_into(
            &mut self.snap,
            phase,
            now.saturating_duration_since(measure_start),
            measure_start.saturating_duration_since(now),
            now - self.last_snapshot,
        );
        on_snapshot(&self.snap);
        self.last_snapshot = now;
        self.next_snapshot = now + self.plan.tick;
    }

    /// The last snapshot (the run done) and the run's totals over the load window `duration`
    /// and the `grace` after it.
    fn finish(
        mut self,
        duration: Duration,
        grace: Duration,
        on_snapshot: &mut impl FnMut(&Snapshot),
    ) -> RunTotals {
        let now = Instant::now();
        self.agg.snapshot_into(
            &mut self.snap,
            Phase::Done,
            duration + grace,
            Duration::ZERO,
            now - self.last_snapshot,
        );
        on_snapshot(&self.snap);
        let mut totals = self.agg.finish(duration, grace);
        totals.rate_changes = self.rate_changes;
        // A stop asked for once sending had ended (during the grace) cut nothing short.
        let end = self.shared.end;
        totals.stopped_early = self.stopped_at.is_some_and(|t| end.is_none_or(|e| t < e));
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads' open-loop schedules, merged, are one even schedule at the asked rate.
    #[test]
    fn threads_interleave_their_slots() {
        for (connections, threads) in [(4, 4), (8, 2), (3, 2), (5, 3)] {
            let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
            plan.connections = connections;
            plan.pace = Pace::Rate(1000.0);
            let specs = worker_specs(&plan, threads);
            assert_eq!(
                specs.iter().map(|s| s.connections).sum::<usize>(),
                connections
            );
            let mut sends: Vec<f64> = specs
                .iter()
                .flat_map(|s| {
                    let r = s.rate.unwrap();
                    (0..60).map(move |k| (s.phase + k as f64) / r)
                })
                .filter(|t| *t < 0.05)
                .collect();
            sends.sort_by(f64::total_cmp);
            assert_eq!(sends.len(), 50, "{connections}/{threads}: {sends:?}");
            let gaps: Vec<f64> = sends.windows(2).map(|w| w[1] - w[0]).collect();
            // Even shares give exactly 1 ms; uneven ones (3 over 2) no gap above 2 ms.
            let even = connections % threads == 0;
            for g in &gaps {
                assert!(
                    if even {
                        (g - 0.001).abs() < 1e-9
                    } else {
                        *g < 0.002 + 1e-9 && *g > 0.0
                    },
                    "{connections} conns on {threads} threads: gaps {gaps:?}"
                );
            }
        }
    }
}
