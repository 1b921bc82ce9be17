//! The histograms and bounded sets a recorder fills: declared and merged here once, for a
//! worker's interval, a request name of a mix and the run alike.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{Counters, SlowRequest, SpikeCounts};

/// Significant figures of every latency histogram.
const SIGFIG: u8 = 3;

/// A new latency histogram in microseconds that can hold values up to `highest`.
pub fn new_histogram(highest: Duration) -> Histogram<u64> {
    let highest_us = (highest.as_micros() as u64).max(2_000);
    Histogram::new_with_bounds(1, highest_us, SIGFIG).expect("valid histogram bounds")
}

pub(crate) fn record_us(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, h.high());
    h.record(us).expect("value clamped into range");
}

/// The latency histograms a worker's interval, and the run, keep (µs): declared and merged
/// here once, so a new one is added in one place.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// Latency of every measured request (corrected in open loop).
    pub latency: Histogram<u64>,
    /// Open loop: latency from the actual send.
    pub latency_uncorrected: Histogram<u64>,
    /// Connect times of the connections opened.
    pub connect: Histogram<u64>,
    /// TLS handshake times of the connections opened (https).
    pub tls: Histogram<u64>,
    /// Latency of requests that were the first on their connection (connect included).
    pub first_request: Histogram<u64>,
    /// Body time: first to last response byte.
    pub body: Histogram<u64>,
}

impl Histograms {
    /// Empty histograms that can hold values up to `highest`.
    pub fn new(highest: Duration) -> Self {
        Histograms {
            latency: new_histogram(highest),
            latency_uncorrected: new_histogram(highest),
            connect: new_histogram(highest),
            tls: new_histogram(highest),
            first_request: new_histogram(highest),
            body: new_histogram(highest),
        }
    }

    /// Adds another set's counts to these. Both must come from [`Histograms::new`] with the
    /// same `highest` (every recorder of a run does).
    pub fn add(&mut self, other: &Histograms) {
        // Destructured so that a histogram added to the struct cannot be forgotten here.
        let Histograms {
            latency,
            latency_uncorrected,
            connect,
            tls,
            first_request,
            body,
        } = other;
        self.latency.add(latency).expect("same bounds");
        self.latency_uncorrected
            .add(latency_uncorrected)
            .expect("same bounds");
        self.connect.add(connect).expect("same bounds");
        self.tls.add(tls).expect("same bounds");
        self.first_request.add(first_request).expect("same bounds");
        self.body.add(body).expect("same bounds");
    }

    /// Empties them, keeping their memory.
    pub fn reset(&mut self) {
        let Histograms {
            latency,
            latency_uncorrected,
            connect,
            tls,
            first_request,
            body,
        } = self;
        for h in [
            latency,
            latency_uncorrected,
            connect,
            tls,
            first_request,
            body,
        ] {
            reset(h);
        }
    }

    /// The forensics counts of these histograms.
    pub fn spike_counts(&self) -> SpikeCounts {
        SpikeCounts::of(&self.latency, &self.first_request, &self.body)
    }
}

/// Empties a histogram, keeping its memory; one never recorded into is left as it is (the
/// reset writes every one of its counts).
fn reset(h: &mut Histogram<u64>) {
    if !h.is_empty() {
        h.reset();
    }
}

/// Significant figures of the histograms kept per request name: 1 % precision in ~20 KB
/// each (three figures take ~130 KB), so a mix of many names stays small.
const SIGFIG_PER_NAME: u8 = 2;

/// What one request name of a mix measured: its counters (successes, errors by kind,
/// status codes, unfinished, bytes) and its latency histogram (µs), for the run so far.
#[derive(Debug, Clone)]
pub struct RequestFigures {
    /// Its counters (the connection-level ones stay zero: connections are shared).
    pub counters: Counters,
    /// Latency of its responses and of its unfinished requests at their wait.
    pub latency: Histogram<u64>,
}

impl RequestFigures {
    /// Nothing yet, for latencies up to `highest`.
    pub fn new(highest: Duration) -> Self {
        let highest_us = (highest.as_micros() as u64).max(2_000);
        RequestFigures {
            counters: Counters::default(),
            latency: Histogram::new_with_bounds(1, highest_us, SIGFIG_PER_NAME)
                .expect("valid histogram bounds"),
        }
    }

    /// Nothing was recorded into these (or they were emptied since).
    pub fn is_empty(&self) -> bool {
        self.counters.requests() == 0
    }

    /// Empties them, keeping their memory.
    pub fn reset(&mut self) {
        self.counters.reset();
        reset(&mut self.latency);
    }

    /// Adds another's figures (same `highest`) to these.
    pub fn add(&mut self, other: &RequestFigures) {
        self.counters.merge(&other.counters);
        self.latency.add(&other.latency).expect("same bounds");
    }
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
        if self.items.len() == self.cap {
            // Made room first, so that the set never grows past its capacity (it is admitted:
            // slower than the one dropped).
            self.items.pop();
        }
        let at = self
            .items
            .partition_point(|s| s.latency_us >= req.latency_us);
        self.items.insert(at, req);
    }

    /// Forgets every request, keeping the memory.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Slowest first.
    pub fn items(&self) -> &[SlowRequest] {
        &self.items
    }
}
