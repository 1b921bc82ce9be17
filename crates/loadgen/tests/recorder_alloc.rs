//! A worker's recorder allocates nothing per tick once warm (DESIGN.md: workers neither lock
//! nor allocate in the hot path beyond bounded memory), a request mix's figures per name
//! included: the aggregator hands the interval data it has merged back to the worker,
//! which reuses its histograms.
//!
//! The calling thread's side of a tick (merging the intervals, the run's snapshot and the
//! dashboard's copy of it) reuses its buffers too.
//!
//! Measured with a global allocator that counts the allocations of the thread that asks,
//! around the worker's calls in one test and the calling thread's in the other.

// A global allocator cannot be written without `unsafe`; this test binary's only unsafe is
// the counting allocator below, which passes every call on to the system's.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailscope_loadgen::aggregate::Aggregator;
use tailscope_loadgen::recorder::{Finished, WorkerRecorder};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are being counted, and how many there were.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: a thread being torn down has no thread-locals left to count into.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            let _ = BYTES.try_with(|b| b.set(b.get() + size as u64));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; counting touches only
// const-initialised thread-locals, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns what it returned, with the allocations (count, bytes) it made.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    ALLOCATIONS.with(|n| n.set(0));
    BYTES.with(|b| b.set(0));
    COUNTING.with(|on| on.set(true));
    let out = f();
    COUNTING.with(|on| on.set(false));
    (out, ALLOCATIONS.with(Cell::get), BYTES.with(Cell::get))
}

/// A closed-loop request on a connection already open: begun at `begun`, its head after
/// half of `latency`, its end after all of it, 100 bytes.
fn finished(begun: Instant, latency: Duration, conn: u64, status: u16, request: u32) -> Finished {
    Finished {
        intended: None,
        begun,
        sent: begun,
        first_byte: begun + latency / 2,
        end: begun + latency,
        connect: None,
        tls: None,
        first_on_connection: false,
        conn,
        status,
        bytes: 100,
        tcp: None,
        request,
    }
}

#[test]
fn a_warm_worker_recorder_allocates_nothing_per_tick_with_a_mix() {
    let names: Arc<[String]> = ["GET /a", "GET /b", "POST /c"].map(String::from).into();
    let tick = Duration::from_millis(100);
    let highest = Duration::from_secs(60);
    let base = Instant::now();
    let mut worker = WorkerRecorder::new(0, base, highest, 10).with_requests(names.clone());
    let mut agg = Aggregator::new(1, highest, tick, 10).with_requests(&names, &[true; 3]);

    // Six seconds of ticks, 300 requests a tick over the three names with varied latencies
    // and two statuses, so that slow requests are admitted and the seconds' per-name
    // figures are handed over; the first three seconds warm the recorder up.
    let ticks = 60u32;
    let warm = 30u32;
    let (mut allocations, mut bytes) = (0, 0);
    for k in 0..ticks {
        let tick_start = base + tick * k;
        let (data, n, b) = counted(|| {
            for i in 0..300u32 {
                let begun = tick_start + Duration::from_micros(u64::from(i) * 300);
                let latency = Duration::from_micros(200 + u64::from((i * 7919 + k * 13) % 5_000));
                // Every tenth as an open-loop slot, every hundredth opening its
                // connection: every histogram goes through a reuse.
                let opener = i % 100 == 0;
                let status = if i % 50 == 0 { 503 } else { 200 };
                worker.record_finished(&Finished {
                    intended: (i % 10 == 0).then_some(begun),
                    connect: opener.then_some(Duration::from_micros(50)),
                    tls: opener.then_some(Duration::from_micros(80)),
                    first_on_connection: opener,
                    ..finished(begun, latency, u64::from(i % 8), status, i % 3)
                });
            }
            worker.take_interval(tick_start + tick, tick)
        });
        if k >= warm {
            allocations += n;
            bytes += b;
        }
        agg.merge(data);
    }
    let totals = agg.finish(Duration::from_secs(6), Duration::ZERO);
    // The figures still add up: nothing was lost or counted twice by reusing the buffers.
    assert_eq!(totals.counters.requests(), 18_000);
    let per_name: u64 = totals
        .request_series
        .iter()
        .flatten()
        .map(|p| p.requests)
        .sum();
    assert_eq!(per_name, 18_000, "every request is in its name's series");
    // A reused interval starts empty: no histogram or slowest list carries an earlier tick's.
    let h = &totals.histograms;
    assert_eq!(h.latency.len(), 18_000);
    assert_eq!(h.body.len(), 18_000);
    assert_eq!(h.latency_uncorrected.len(), 1_800);
    assert_eq!(
        (h.connect.len(), h.tls.len(), h.first_request.len()),
        (180, 180, 180)
    );
    let mut seen = std::collections::HashSet::new();
    for s in &totals.slowest {
        assert!(
            seen.insert((s.at_s.to_bits(), s.conn, s.latency_us)),
            "{s:?} is in the slowest twice"
        );
    }
    eprintln!(
        "worker allocations in {} warm ticks: {allocations} ({bytes} bytes)",
        ticks - warm
    );
    assert_eq!(
        (allocations, bytes),
        (0, 0),
        "a warm worker's ticks allocate nothing"
    );
}

/// The calling thread's side of a tick, as `tailscope_loadgen::run` and a dashboard do it:
/// merge the workers' intervals, overwrite the run's one snapshot, and copy it into the
/// dashboard's older buffer (it keeps two: the one it shows and the one being filled).
/// Once warm, a tick that closes no second allocates nothing; a tick that closes one
/// allocates only what the run keeps of the second (its points, its serialized histogram).
#[test]
fn a_warm_calling_thread_reuses_its_snapshots_per_tick() {
    let names: Arc<[String]> = ["GET /a", "GET /b"].map(String::from).into();
    let tick = Duration::from_millis(100);
    let highest = Duration::from_secs(60);
    let base = Instant::now();
    let workers = 2;
    let mut recorders: Vec<WorkerRecorder> = (0..workers)
        .map(|w| WorkerRecorder::new(w, base, highest, 10).with_requests(names.clone()))
        .collect();
    let mut agg = Aggregator::new(workers, highest, tick, 10).with_requests(&names, &[true; 2]);
    let mut snap = agg.new_snapshot();
    let mut shown = [agg.new_snapshot(), agg.new_snapshot()];
    let ticks = 80u32;
    let warm = 30u32;
    let mut quiet = (0u64, 0u64);
    let mut closing = (0u64, 0u64, 0u32);
    for k in 0..ticks {
        let tick_start = base + tick * k;
        let intervals: Vec<_> = recorders
            .iter_mut()
            .map(|worker| {
                for i in 0..200u32 {
                    let begun = tick_start + Duration::from_micros(u64::from(i) * 400);
                    let latency =
                        Duration::from_micros(300 + u64::from((i * 7919 + k * 31) % 8_000));
                    let status = if i % 40 == 0 { 500 } else { 200 };
                    worker.record_finished(&finished(
                        begun,
                        latency,
                        u64::from(i % 4),
                        status,
                        i % 2,
                    ));
                }
                worker.take_interval(tick_start + tick, tick)
            })
            .collect();
        let ((), n, b) = counted(|| {
            for data in intervals {
                agg.merge(data);
            }
            agg.snapshot_into(
                &mut snap,
                tailscope_loadgen::Phase::Running,
                tick * (k + 1),
                Duration::ZERO,
                tick,
            );
            shown[k as usize % 2].clone_from(&snap);
        });
        // The interval ending at tick k + 1 makes second (k + 1) / 10 a point when it
        // completes it.
        let closes_a_second = (k + 1) % 10 == 0;
        if k >= warm {
            if closes_a_second {
                closing = (closing.0 + n, closing.1 + b, closing.2 + 1);
            } else {
                quiet = (quiet.0 + n, quiet.1 + b);
            }
        }
        // What the dashboard got is the run so far, whatever buffer it went into.
        let shown_now = &shown[k as usize % 2];
        assert_eq!(shown_now.totals, snap.totals);
        assert_eq!(shown_now.histogram.len(), snap.totals.requests());
        assert_eq!(shown_now.last_tick.requests(), 400, "tick {k}");
        assert_eq!(shown_now.recent_seconds.len(), ((k + 1) / 10) as usize);
    }
    let totals = agg.finish(tick * ticks, Duration::ZERO);
    assert_eq!(totals.counters.requests(), u64::from(ticks) * 400);
    let per_second: Vec<u64> = totals.timeseries.iter().map(|p| p.requests).collect();
    assert_eq!(
        per_second,
        vec![4_000; 8],
        "every second made a point once, whole"
    );
    let per_name: Vec<u64> = totals.request_series[1]
        .iter()
        .map(|p| p.requests)
        .collect();
    assert_eq!(
        per_name,
        vec![2_000; 8],
        "a name's seconds from reused buckets"
    );
    eprintln!(
        "calling thread, {} warm ticks: {} allocations ({} bytes) in the ticks that close no second; {} ({} bytes) in the {} that close one",
        ticks - warm - closing.2,
        quiet.0,
        quiet.1,
        closing.0,
        closing.1,
        closing.2
    );
    assert_eq!(
        quiet,
        (0, 0),
        "a warm tick that closes no second allocates nothing on the calling thread"
    );
    // What the run keeps of a second is a few KiB (its serialized histogram, its points);
    // a histogram or a zlib state (100–300 KiB) made anew would be far more.
    let per_closing_tick = closing.1 / u64::from(closing.2);
    assert!(
        per_closing_tick < 32 * 1024,
        "a tick that closes a second allocates {per_closing_tick} bytes"
    );
}
