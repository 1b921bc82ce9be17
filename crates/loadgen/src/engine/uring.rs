//! The io_uring engine: one ring per generator thread, every connection driven from its
//! completions, one timer source.
//!
//! A connection is the same [`Connection`] state the tokio engine runs (claims, parsing,
//! recording); this module only does its I/O: a connect with a linked timeout, a multishot
//! recv into a provided-buffer ring (armed once per TCP connection), and each claimed batch
//! sent from the ring's copy of the encoded requests, many submissions per `io_uring_enter`.
//! Time comes from one place: the ring's wait, whose timeout is the earliest of the next
//! tick, the next open-loop slot or back-off, the next request timeout and the end of the
//! run. Deadlines sit in a heap; an entry is live only while it matches what its connection
//! still waits for (the lazy timer of the tokio engine, without a timer per connection).
//! The ring itself, and all of its `unsafe`, is `tailscope_uring::client`; what each op is for
//! is a typed [`token::Token`]; a connection's steps and completions are in [`step`], held
//! connections' in [`held`].

mod held;
mod step;
mod token;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::connection::Connection;
use super::{Shared, Worker, WorkerOutcome, WorkerSpec};
use crate::recorder::IntervalData;
use tailscope_uring::client::Socket;
use token::Token;

/// The engine's ring: its ops carry [`Token`]s.
type Ring = tailscope_uring::client::Ring<Token>;

/// How often a worker looks at the stop flag at the least (the run's own loop polls it
/// every 10 ms too).
pub(super) const STOP_POLL: Duration = Duration::from_millis(10);
/// Open loop: the wait for a slot ends this long before it. The ring's timed wait is an
/// hrtimer that wakes within tens of microseconds (tokio's 1 ms wheel needs 2 ms).
const EARLY_WAKE: Duration = Duration::from_micros(200);
/// Open loop: slot wake-ups due within this of the first one are handled with it, so that at
/// high rates one `io_uring_enter` serves several slots rather than one wait per slot (see
/// [`next_due`]). On this project's VM each sleep and wake-up of the generator costs it tens
/// of microseconds of CPU: a wake-up per slot left it saturated at -q 100000 (9.5 µs of CPU
/// per request against ~5 closed loop) and used 0.9 of a core at -q 20000. The price: the
/// slots of a window leave together and the server queues them, so at high rates a window is
/// narrower (see [`coalesce_window`]).
const COALESCE: Duration = Duration::from_micros(300);
/// Open loop: a window holds at most this many slot intervals (see [`coalesce_window`]).
const MAX_BURST: f64 = 16.0;
/// Open loop: a slot due within this is sent now (see [`EARLY_WAKE`], [`COALESCE`]); a
/// send that leaves early is measured from when it left.
const SEND_EARLY: Duration = Duration::from_micros(500);
/// Connections advanced (claim, connect, send) per pass of the loop before its completions
/// are reaped.
const ADVANCE_BATCH: usize = 512;
/// The most time a pass spends advancing connections (checked every [`ADVANCE_CHECK`]) before
/// it submits, reaps and looks at its tick and deadlines again. A connect costs the loop its
/// socket's set-up here and the kernel's connect (a loopback handshake included) in the
/// submit that follows, 20-40 µs together in a debug build: 512 of them made a pass of
/// ~20 ms while 16,000 connections opened (issue 32: no second with generator lag above
/// 20 ms). The kernel's part counts against the budget too: a pass submits every
/// [`SUBMIT_EVERY`] advances before it reads the clock.
const ADVANCE_BUDGET: Duration = Duration::from_millis(4);
/// Advances between two reads of the clock against [`ADVANCE_BUDGET`].
const ADVANCE_CHECK: usize = 16;
/// Advances after which a pass hands its ops to the kernel before it reads the clock, so
/// that the budget counts the kernel's part of them too (a multiple of [`ADVANCE_CHECK`]).
/// Measured in a release build at `-c 16000 --threads 1` (issue 32): the advance of 512
/// connections took 2.5–3 ms, within the budget, but the submit that followed 11–13 ms (a
/// loopback connect's handshake runs inside it, ~22 µs each), and the tick that fell in such
/// a pass was 8–20 ms late in every second of the connect phase. A pass with fewer advances
/// (a few connections, `-c 16`) never submits early: no more `io_uring_enter` calls there.
const SUBMIT_EVERY: usize = 64;
/// Each provided buffer; a response larger than one arrives in several completions.
const BUFFER_SIZE: usize = 4096;

/// The next deadline to handle now, if any: a due one, or, once a wake-up was due in this
/// pass (`window_end`, None at the start of a pass), a wake-up within `coalesce` (see
/// [`coalesce_window`]) after it
/// (their sends leave in one submission). A wake-up not yet due waits for its time even when
/// a completion runs a pass before it: taken early a few at a time, each pass sent a slot or
/// two, and the timed wait between them lasted only until the next slot. A request timer
/// not yet due ends the window (rare: the wake-ups behind it wait for their own time).
fn next_due(
    deadlines: &mut BinaryHeap<Reverse<(Instant, Due, usize)>>,
    now: Instant,
    window_end: &mut Option<Instant>,
    coalesce: Duration,
) -> Option<(Instant, Due, usize)> {
    let &Reverse((at, due, i)) = deadlines.peek()?;
    if at > now && (due == Due::Timer || window_end.is_none_or(|end| at > end)) {
        return None;
    }
    if due != Due::Timer && window_end.is_none() {
        *window_end = Some(now + coalesce);
    }
    deadlines.pop();
    Some((at, due, i))
}

/// The window of slot wake-ups taken together at a slot interval of `slot_interval_s` (0:
/// closed loop): [`COALESCE`], but no more than [`MAX_BURST`] intervals. A window's sends
/// leave together and the server queues them, and that queue is measured as the server's
/// latency: 300 µs at -q 100000 (30 sends) moved the p50 from ~65 µs to 140–200 µs, where 16
/// intervals (160 µs) keep most of the saving of wake-ups.
fn coalesce_window(slot_interval_s: f64) -> Duration {
    if slot_interval_s > 0.0 && slot_interval_s.is_finite() {
        COALESCE.min(Duration::from_secs_f64(slot_interval_s * MAX_BURST))
    } else {
        COALESCE
    }
}

/// When to wake for a slot due `at`: [`EARLY_WAKE`] before it, and not in the past.
fn wake_time(at: Instant, now: Instant) -> Instant {
    at.checked_sub(EARLY_WAKE).unwrap_or(at).max(now)
}

/// Whether this machine can run the engine (see `tailscope_uring::client::probe`).
pub(super) fn probe() -> Result<(), String> {
    tailscope_uring::client::probe()
}

/// Whether the engine's sockets are direct descriptors, slots of each ring's registered file
/// table, which the process's RLIMIT_NOFILE does not bound (each table may hold that many),
/// and io_uring looks up without the file table's reference counting; else why not (see
/// `tailscope_uring::client::probe_direct`), and they are plain descriptors. Probed once per process.
pub(crate) fn direct() -> Result<(), String> {
    static DIRECT: OnceLock<Result<(), String>> = OnceLock::new();
    DIRECT
        .get_or_init(|| {
            // For comparisons (bench/, tests): the same engine on plain descriptors.
            if std::env::var_os("TAILSCOPE_URING_PLAIN_FDS").is_some() {
                return Err("TAILSCOPE_URING_PLAIN_FDS is set".into());
            }
            tailscope_uring::client::probe_direct()
        })
        .clone()
}

/// What `config.engine.reason` says of the descriptors.
pub(super) fn descriptors_note() -> String {
    match direct() {
        Ok(()) => "; sockets on direct descriptors (registered file tables)".into(),
        Err(why) => format!("; sockets on plain descriptors (no direct descriptors: {why})"),
    }
}

/// Slots of the registered file table of a thread holding `sockets`: room besides them for
/// each one's reconnect while its old slot's close has not completed yet, within what the
/// kernel allows a table (RLIMIT_NOFILE). A connect that finds none free while some are
/// closing waits for them (see `Ring::waits_for_slot`).
fn table_slots(sockets: usize) -> u32 {
    let sockets = sockets as u64;
    (2 * sockets + 64).min(tailscope_uring::open_file_limit()) as u32
}

/// What a deadline in the heap is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// The connection's request timer.
    Timer,
    /// The connection's next open-loop slot or the end of its back-off.
    Wake,
    /// A held connection's connect turn, back-off or next slow byte.
    Held,
}

/// One connection of the worker, with what its I/O is doing.
struct Slot {
    c: Connection<Socket>,
    /// The socket number: bumped for each new socket, so completions of an old one are
    /// recognised and dropped.
    gen: u32,
    /// When the connection began (for its Little's-law span).
    started: Instant,
    /// A connect in progress: its socket and when it began.
    connecting: Option<(Socket, Instant)>,
    /// The handshake just made (and when it began): the next send is the first on it.
    just_connected: Option<(Duration, Instant)>,
    /// A send in progress: bytes of the batch sent so far, and its length.
    sending: Option<(usize, usize)>,
    /// Sends handed to the kernel whose completion has not been reaped, on this socket or an
    /// earlier one: a mix with placeholders patches its region of the send buffer only when
    /// none is left, since the kernel may still read a closed socket's send from it.
    sends_in_flight: u32,
    /// When the connection last claimed work: claims still queued when the grace period
    /// ends, neither connecting nor sending, have waited since.
    claimed_at: Instant,
    /// Backing off after a failed connect that failed at this time.
    backoff: Option<Instant>,
    /// `--connect-rate`: the connect's turn, taken and not yet used.
    connect_at: Option<Instant>,
    wake_at: Option<Instant>,
    timer_at: Option<Instant>,
    done: bool,
    dirty: bool,
}

/// One generator thread of the io_uring engine.
struct UringWorker {
    w: Rc<Worker>,
    shared: Arc<Shared>,
    ring: Ring,
    slots: Vec<Slot>,
    deadlines: BinaryHeap<Reverse<(Instant, Due, usize)>>,
    /// Connections (and held ones, marked [`held::HELD`]) to advance.
    dirty: VecDeque<usize>,
    /// Connections not done.
    live: usize,
    /// A mix with placeholders: connection i patches its batches into the ring's send
    /// buffer at `base + i × room`, after the shared requests (see `mix::placeholder`).
    scratch: Option<(usize, usize)>,
    /// `--idle-conns` and `--slow-conns` connections.
    held: Vec<held::HeldSlot>,
    /// Connections waiting to connect until a slot of the file table has closed.
    slot_waiters: Vec<usize>,
}

/// A worker thread's body (called on the thread, already pinned).
pub(super) fn worker_main(
    shared: Arc<Shared>,
    spec: WorkerSpec,
    tx: Sender<IntervalData>,
    stop: Arc<AtomicBool>,
) -> WorkerOutcome {
    let mut worker = new_worker(shared, spec);
    let (sending_ended, finished) = worker.run(&tx, &stop);
    // The last second's connections as they were, before the teardown below.
    let gauges = worker.w.take_gauges();
    // Held connections close after the load's figures (see `Worker::held_released`).
    worker.release_held();
    worker.close_all();
    let w = worker.w.clone();
    w.wrap_up(&tx, sending_ended, finished, gauges)
}

/// The worker of `spec`'s connections, none open yet.
fn new_worker(shared: Arc<Shared>, spec: WorkerSpec) -> UringWorker {
    let w = Rc::new(Worker::new(shared.clone(), &spec));
    let connections = if spec.has_work() { spec.connections } else { 0 };
    let held = held::slots(&w, spec.held);
    let entries = ((connections + held.len()) as u32 * 2)
        .clamp(64, 4096)
        .next_power_of_two();
    let buffers = (connections * 4).clamp(64, 4096).next_power_of_two() as u16;
    // The kernel was probed before the run started; a ring that still cannot be built here
    // (memory, a limit reached since) leaves nothing to run the load with.
    let requests = &shared.requests;
    let mut send_from = requests.bytes().to_vec();
    let scratch = requests.templated().then(|| {
        let room = requests.batch_room(shared.plan.pipeline);
        let base = send_from.len();
        send_from.resize(base + room * connections, 0);
        (base, room)
    });
    let direct = direct()
        .is_ok()
        .then(|| table_slots(connections + held.len()));
    let ring = Ring::new(
        entries,
        buffers,
        BUFFER_SIZE,
        send_from,
        shared.plan.addr,
        direct,
        connections + held.len(),
    )
    .unwrap_or_else(|e| panic!("cannot set up the generator's io_uring: {e}"));
    let started = Instant::now();
    let slots = (0..connections)
        .map(|_| Slot {
            c: Connection::new(w.clone(), SEND_EARLY),
            gen: 0,
            started,
            connecting: None,
            just_connected: None,
            sending: None,
            sends_in_flight: 0,
            claimed_at: started,
            backoff: None,
            connect_at: None,
            wake_at: None,
            timer_at: None,
            done: false,
            dirty: true,
        })
        .collect();
    UringWorker {
        w: w.clone(),
        shared,
        ring,
        slots,
        deadlines: BinaryHeap::new(),
        dirty: (0..connections)
            .chain((0..held.len()).map(|i| i | held::HELD))
            .collect(),
        live: connections,
        scratch,
        held,
        slot_waiters: Vec::new(),
    }
}

impl UringWorker {
    /// The worker's loop; returns when the load window ended, and when its last request
    /// finished (or the grace period ran out).
    fn run(&mut self, tx: &Sender<IntervalData>, stop: &AtomicBool) -> (Instant, Instant) {
        let tick = self.shared.plan.tick;
        let mut next_tick = self.shared.measure_start + tick;
        let mut sending_ended = None;
        let mut grace_end = None;
        let mut completions = Vec::with_capacity(1024);
        loop {
            let now = Instant::now();
            if sending_ended.is_none() {
                let stopped = stop.load(Ordering::Relaxed);
                if stopped || self.live == 0 || self.shared.end.is_some_and(|e| now >= e) {
                    sending_ended = Some(self.w.stop_sending(stopped));
                    grace_end = Some(now + self.shared.plan.grace);
                    self.stop_held_connects();
                    // Wake whatever waits for a slot or a back-off: a stop cuts both short.
                    for i in 0..self.slots.len() {
                        let s = &mut self.slots[i];
                        s.wake_at = None;
                        if let Some(failed_at) = s.backoff.take() {
                            s.c.backed_off(failed_at);
                        }
                        self.mark(i);
                    }
                }
            }
            if let Some(ended) = sending_ended {
                if self.live == 0 {
                    return (ended, now);
                }
                if grace_end.is_some_and(|g| now >= g) {
                    // Finished now: closing what is left (a shutdown and a TCP_INFO read per
                    // connection, ~0.2 s for 5,000 at -c 18000) is not grace.
                    self.grace_over(now);
                    return (ended, now);
                }
            }
            if now >= next_tick {
                self.w.rec.borrow_mut().record_loop_lag(now - next_tick);
                self.w.send_interval(tx, now);
                while next_tick <= now {
                    next_tick += tick;
                }
            }
            let mut window_end = None;
            let coalesce = coalesce_window(self.w.slot_interval_s());
            while let Some((at, due, i)) =
                next_due(&mut self.deadlines, now, &mut window_end, coalesce)
            {
                self.on_deadline(i, at, due, now);
            }
            self.advance_batch(now);

            // Until the first deadline itself, whatever it is for (see `next_due`: a wake-up
            // takes those within COALESCE after it, so the next is at least that far). Waiting
            // until COALESCE before it made a timed wait of a few µs per slot at -q 100000.
            let mut until = next_tick;
            if let Some(&Reverse((at, _, _))) = self.deadlines.peek() {
                until = until.min(at);
            }
            match (sending_ended, grace_end) {
                (None, _) => {
                    until = until.min(now + STOP_POLL);
                    if let Some(e) = self.shared.end {
                        until = until.min(e);
                    }
                }
                (Some(_), Some(g)) => until = until.min(g),
                (Some(_), None) => {}
            }
            let wait = if self.dirty.is_empty() {
                until.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            // Out of work: nothing to advance, no deadline due, every completion reaped
            // handled (see `worker::idle_wait_ended`).
            let idle = (!wait.is_zero())
                .then(super::worker::idle_wait_begins)
                .flatten();
            if let Err(e) = self.ring.submit_and_wait(wait) {
                panic!("the generator's io_uring failed: {e}");
            }
            completions.clear();
            let now = Instant::now();
            super::worker::idle_wait_ended(idle, now);
            self.ring.reap(&mut completions);
            for &c in &completions {
                self.on_completion(c, now);
            }
            if !self.slot_waiters.is_empty() && !self.ring.waits_for_slot() {
                for i in std::mem::take(&mut self.slot_waiters) {
                    self.mark(i);
                }
            }
        }
    }

    /// At most a batch of connections per pass, oldest first, then the completions:
    /// 18 000 connects submitted before one completion is reaped measured every handshake at
    /// the length of the whole pass (~5 s on a loaded 2-core box).
    fn advance_batch(&mut self, now: Instant) {
        for k in 0..ADVANCE_BATCH {
            if k % ADVANCE_CHECK == ADVANCE_CHECK - 1 {
                if k % SUBMIT_EVERY == SUBMIT_EVERY - 1 {
                    if let Err(e) = self.ring.submit() {
                        panic!("the generator's io_uring failed: {e}");
                    }
                }
                if now.elapsed() >= ADVANCE_BUDGET {
                    break;
                }
            }
            let Some(i) = self.dirty.pop_front() else {
                break;
            };
            if i & held::HELD != 0 {
                let i = i & !held::HELD;
                self.held[i].dirty = false;
                self.advance_held(i, now);
                continue;
            }
            self.slots[i].dirty = false;
            self.advance(i, now);
        }
    }

    fn mark(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if !s.dirty && !s.done {
            s.dirty = true;
            self.dirty.push_back(i);
        }
    }

    fn schedule(&mut self, i: usize, at: Instant, due: Due) {
        let s = &mut self.slots[i];
        let field = match due {
            Due::Timer => &mut s.timer_at,
            Due::Wake | Due::Held => &mut s.wake_at,
        };
        if *field != Some(at) {
            *field = Some(at);
            self.deadlines.push(Reverse((at, due, i)));
        }
    }

    /// A deadline fell due; it counts only if the connection still waits for it.
    fn on_deadline(&mut self, i: usize, at: Instant, due: Due, now: Instant) {
        if due == Due::Held {
            return self.on_held_deadline(i, at);
        }
        let s = &mut self.slots[i];
        if s.done {
            return;
        }
        match due {
            Due::Timer if s.timer_at == Some(at) => {
                let next = s.c.on_timer(now);
                s.timer_at = None;
                self.schedule(i, next, Due::Timer);
            }
            Due::Wake if s.wake_at == Some(at) => {
                s.wake_at = None;
                if let Some(failed_at) = s.backoff.take() {
                    s.c.backed_off(failed_at);
                }
            }
            _ => return,
        }
        self.mark(i);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;
    use crate::error::ErrorKind;
    use crate::plan::{Plan, Stop};

    /// A server that answers every request with an empty 200 and closes.
    fn closing_server() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        addr
    }

    /// What one pass of the loop takes at `now`.
    fn pass(heap: &mut BinaryHeap<Reverse<(Instant, Due, usize)>>, now: Instant) -> Vec<usize> {
        let mut window_end = None;
        std::iter::from_fn(|| next_due(heap, now, &mut window_end, COALESCE))
            .map(|(_, due, i)| if due == Due::Timer { 1000 + i } else { i })
            .collect()
    }

    #[test]
    fn slot_wake_ups_are_taken_in_windows_once_the_first_is_due() {
        let t = Instant::now();
        let us = |n: u64| t + Duration::from_micros(n);
        // Slots every 10 µs (100 k req/s) from 100 µs, and a request timer at 450 µs.
        let mut heap = BinaryHeap::new();
        for k in 0..100 {
            heap.push(Reverse((us(100 + 10 * k), Due::Wake, k as usize)));
        }
        heap.push(Reverse((us(450), Due::Timer, 7)));
        // A completion's pass before the first wake-up takes none: it does not send the
        // next slot or two early on its own.
        assert_eq!(pass(&mut heap, us(95)), Vec::<usize>::new());
        // The first is due: it and every wake-up within COALESCE after now go together.
        assert_eq!(pass(&mut heap, us(100)), (0..=30).collect::<Vec<_>>());
        assert_eq!(pass(&mut heap, us(105)), Vec::<usize>::new());
        // The next window: the timer, not due, ends it (the wake-ups behind it wait).
        assert_eq!(pass(&mut heap, us(410)), (31..=34).collect::<Vec<_>>());
        // Due, the timer is taken with the wake-up due with it and its window.
        assert_eq!(
            pass(&mut heap, us(450)),
            std::iter::once(1007).chain(35..=65).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_window_holds_at_most_max_burst_slot_intervals() {
        // 100 k req/s (10 µs apart): 16 intervals, not the 30 that 300 µs would send at once.
        assert_eq!(coalesce_window(10e-6), Duration::from_micros(160));
        // 20 k req/s (50 µs apart): the whole COALESCE (6 slots).
        assert_eq!(coalesce_window(50e-6), COALESCE);
        // Closed loop (no interval) and nonsense: COALESCE.
        assert_eq!(coalesce_window(0.0), COALESCE);
        assert_eq!(coalesce_window(f64::INFINITY), COALESCE);
        // Applied: slots every 10 µs from 100 µs, a window of 160 µs from the first.
        let t = Instant::now();
        let us = |n: u64| t + Duration::from_micros(n);
        let mut heap: BinaryHeap<_> = (0..40)
            .map(|k| Reverse((us(100 + 10 * k), Due::Wake, k as usize)))
            .collect();
        let mut window_end = None;
        let taken: Vec<usize> = std::iter::from_fn(|| {
            next_due(&mut heap, us(100), &mut window_end, coalesce_window(10e-6))
        })
        .map(|(_, _, i)| i)
        .collect();
        assert_eq!(taken, (0..=16).collect::<Vec<_>>());
    }

    /// Issue 39 item 4: a connection that reconnects while every free slot of its thread's
    /// file table is taken and some are closing waits for one; it used to fail the connect
    /// as `too_many_open_files` (2,917 of them in a run of -c 3000 --no-keepalive against a
    /// closed port), though no limit was reached. Here the table has exactly one slot per
    /// connection, so each reconnect finds its old slot still closing.
    #[test]
    fn a_reconnect_waits_for_a_closing_slot_rather_than_failing() {
        if let Err(why) = probe() {
            eprintln!("skipped: {why}");
            return;
        }
        if let Err(why) = direct() {
            eprintln!("skipped: {why}");
            return;
        }
        const CONNECTIONS: usize = 8;
        let addr = closing_server();
        let mut plan = Plan::new(&format!("http://{addr}/")).unwrap();
        plan.keepalive = false;
        plan.connections = CONNECTIONS;
        plan.threads = 1;
        plan.stop = Stop::Duration(Duration::from_millis(500));
        let now = Instant::now();
        let shared = Arc::new(Shared::for_tests(
            plan,
            now,
            Some(now + Duration::from_millis(500)),
        ));
        let spec = WorkerSpec {
            connections: CONNECTIONS,
            ..WorkerSpec::one_connection()
        };
        let mut worker = new_worker(shared.clone(), spec);
        worker.ring = Ring::new(
            64,
            64,
            BUFFER_SIZE,
            shared.requests.bytes().to_vec(),
            addr,
            Some(CONNECTIONS as u32),
            CONNECTIONS,
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        worker.run(&tx, &AtomicBool::new(false));
        let connects = worker.w.next_conn.get();
        let last = worker
            .w
            .rec
            .borrow_mut()
            .take_last_interval(Instant::now(), shared.plan.tick);
        let (mut emfile, mut ok) = (0, 0);
        for interval in rx.try_iter().chain(std::iter::once(last)) {
            emfile += interval.counters.errors[ErrorKind::TooManyOpenFiles.index()];
            ok += interval.counters.successes;
        }
        worker.close_all();
        assert!(connects > 2 * CONNECTIONS as u64, "{connects} connections");
        assert!(ok > 0, "no response");
        assert_eq!(emfile, 0, "{emfile} connects failed as too_many_open_files");
    }

    #[test]
    fn reconnecting_leaves_no_stale_deadlines() {
        if let Err(why) = probe() {
            eprintln!("skipped: {why}");
            return;
        }
        let addr = closing_server();
        let mut plan = Plan::new(&format!("http://{addr}/")).unwrap();
        plan.keepalive = false;
        plan.connections = 1;
        plan.threads = 1;
        plan.stop = Stop::Duration(Duration::from_millis(300));
        let now = Instant::now();
        let shared = Arc::new(Shared::for_tests(
            plan,
            now,
            Some(now + Duration::from_millis(300)),
        ));
        let spec = WorkerSpec::one_connection();
        let mut worker = new_worker(shared, spec);
        let (tx, _rx) = std::sync::mpsc::channel();
        worker.run(&tx, &AtomicBool::new(false));
        let connects = worker.w.next_conn.get();
        assert!(connects >= 10, "{connects} connections in 300 ms");
        // Each connect used to push a request timer that stayed until its time (20 s).
        assert!(
            worker.deadlines.len() <= 2,
            "{} deadlines after {connects} connections",
            worker.deadlines.len()
        );
        worker.close_all();
    }
}
