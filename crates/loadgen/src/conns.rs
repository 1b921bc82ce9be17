//! Connection populations: the load's own connections, and those held open beside it
//! (`--idle-conns`: silent; `--slow-conns`: a header byte now and then, a slowloris client)
//! to measure what holding many clients costs the server.
//!
//! Workers report [`Gauges`] (how many are open and opening now) with every interval; the
//! aggregator keeps each worker's latest, sums them, files them under the second they fall
//! in ([`ConnPoint`] in the time series) and keeps the peaks. What happened to the held
//! connections (opened, failed to connect, closed by the server) is counted in
//! [`HeldCounters`], added up like every other counter. [`Connections`] is the report's
//! section of all of it.

use serde::{Deserialize, Serialize};

/// A population of held connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldKind {
    /// `--idle-conns`: connected, then silent.
    Idle,
    /// `--slow-conns`: a request head that never ends, one byte at a time.
    Slow,
}

impl HeldKind {
    /// Both kinds, in the order arrays indexed by [`HeldKind::index`] keep them.
    pub const ALL: [HeldKind; 2] = [HeldKind::Idle, HeldKind::Slow];

    /// Its index into per-kind arrays.
    pub fn index(self) -> usize {
        match self {
            HeldKind::Idle => 0,
            HeldKind::Slow => 1,
        }
    }
}

/// How many connections of one population are open, and in their TCP handshake, now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gauge {
    /// Connected.
    pub open: u64,
    /// The most connected at once since the worker's previous interval (at least `open`).
    #[serde(default)]
    pub peak_open: u64,
    /// In their TCP handshake.
    pub opening: u64,
    /// The most in their handshake at once since the worker's previous interval (at least
    /// `opening`): handshakes on loopback begin and end between two ticks, so `opening` at
    /// a tick's end is mostly 0 while a whole `-c` was opening a moment before.
    #[serde(default)]
    pub peak_opening: u64,
}

/// Every population's [`Gauge`]: one worker's at the end of an interval, or a run's sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    /// The load's connections (`-c`).
    pub load: Gauge,
    /// Held connections, by [`HeldKind::index`].
    pub held: [Gauge; 2],
    /// Of the load's open connections, those that have answered a response (the most of a
    /// run's, in its peaks).
    pub serving: u64,
}

impl Gauges {
    /// Adds another worker's gauges to these.
    pub(crate) fn add(&mut self, other: &Gauges) {
        for (a, b) in std::iter::once((&mut self.load, &other.load))
            .chain(self.held.iter_mut().zip(&other.held))
        {
            a.open += b.open;
            a.peak_open += b.peak_open;
            a.opening += b.opening;
            a.peak_opening += b.peak_opening;
        }
        self.serving += other.serving;
    }

    /// Raises each figure to at least `other`'s (the peaks of a run): `open` to the most
    /// `other` had open at once, `opening` to the most it had in their handshake.
    pub(crate) fn raise_to(&mut self, other: &Gauges) {
        for (a, b) in std::iter::once((&mut self.load, &other.load))
            .chain(self.held.iter_mut().zip(&other.held))
        {
            a.open = a.open.max(b.peak_open.max(b.open));
            a.opening = a.opening.max(b.peak_opening.max(b.opening));
        }
        self.serving = self.serving.max(other.serving);
    }
}

/// What happened to one population of held connections (counted like requests: per
/// interval, then added up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldCounters {
    /// TCP connections opened (reopened ones included).
    pub opened: u64,
    /// Connect attempts that failed (refused, timed out, no local port, …).
    pub connect_failures: u64,
    /// Closed by the server, with a FIN or a reset (its idle or header timeout, a
    /// connection limit, a 408 and a close): each is opened again, in turn, while the run
    /// lasts.
    pub closed_by_server: u64,
    /// Failed on the generator's side otherwise (a slow byte that could not be written).
    pub failed: u64,
    /// Still open when the run ended, after the load's last response or the grace period
    /// (then closed by the generator).
    pub open_at_end: u64,
}

impl HeldCounters {
    pub(crate) fn merge(&mut self, other: &HeldCounters) {
        self.opened += other.opened;
        self.connect_failures += other.connect_failures;
        self.closed_by_server += other.closed_by_server;
        self.failed += other.failed;
        self.open_at_end += other.open_at_end;
    }
}

/// The connections of one second of the run (`connections` of a time series point): the
/// gauges as of the end of the second, the failures in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnPoint {
    /// Load connections open.
    pub open: u64,
    /// Load connections in their TCP handshake.
    pub opening: u64,
    /// Connect attempts of the load's connections that failed in the second.
    pub failed: u64,
    /// Of `open`, those that had answered a response: the connections the server served.
    #[serde(default)]
    pub serving: u64,
    /// `--idle-conns` connections open; null without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_open: Option<u64>,
    /// `--slow-conns` connections open; null without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_open: Option<u64>,
    /// Held connections (idle and slow) in their handshake; null without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_opening: Option<u64>,
    /// Held connections that failed to connect or were closed by the server in the second;
    /// null without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_lost: Option<u64>,
}

impl ConnPoint {
    /// Adds another generator's second to this one (`tailscope merge`).
    pub fn add(&mut self, other: &ConnPoint) {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.open += other.open;
        self.opening += other.opening;
        self.failed += other.failed;
        self.serving += other.serving;
        self.idle_open = sum(self.idle_open, other.idle_open);
        self.slow_open = sum(self.slow_open, other.slow_open);
        self.held_opening = sum(self.held_opening, other.held_opening);
        self.held_lost = sum(self.held_lost, other.held_lost);
    }
}

/// One population of held connections in the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldReport {
    /// How many were asked for (`--idle-conns N`, `--slow-conns N`).
    pub asked: u64,
    /// What happened to them.
    #[serde(flatten)]
    pub counters: HeldCounters,
    /// The most open at once (see [`Connections::peak_open`]).
    pub peak_open: u64,
    /// `--slow-conns`: seconds between header bytes; null for idle connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_interval_s: Option<f64>,
}

/// The report's `connections` section: every population, how many were open at the peak
/// and what became of the held ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    /// The load's connections: the most open at once (each generator thread's most within
    /// a tick, added up over the threads: exact with one thread, else an upper bound).
    pub peak_open: u64,
    /// The most in their handshake at once (each generator thread's most within a tick,
    /// added up over the threads, as `peak_open`).
    pub peak_opening: u64,
    /// `--idle-conns`; null without.
    #[serde(default)]
    pub idle: Option<HeldReport>,
    /// `--slow-conns`; null without.
    #[serde(default)]
    pub slow: Option<HeldReport>,
}

impl Connections {
    /// The section of a finished run (or of a run so far).
    pub fn of(plan: &crate::Plan, totals: &crate::RunTotals) -> Connections {
        let peak = &totals.conns_peak;
        let held = |k: HeldKind, asked: usize| {
            (asked > 0).then(|| HeldReport {
                asked: asked as u64,
                counters: totals.counters.held[k.index()],
                peak_open: peak.held[k.index()].open,
                byte_interval_s: (k == HeldKind::Slow).then_some(plan.slow_interval.as_secs_f64()),
            })
        };
        Connections {
            peak_open: peak.load.open,
            peak_opening: peak.load.opening,
            idle: held(HeldKind::Idle, plan.idle_conns),
            slow: held(HeldKind::Slow, plan.slow_conns),
        }
    }

    /// A warning for each held population the server did not hold whole: some were closed
    /// by it, failed, or were not open when the run ended.
    pub fn warnings(&self) -> Vec<String> {
        use crate::fmt::fmt_count;
        let mut out = Vec::new();
        for (name, flag, h) in [
            ("idle", "--idle-conns", &self.idle),
            ("slow", "--slow-conns", &self.slow),
        ] {
            let Some(h) = h else { continue };
            let k = &h.counters;
            let failures = k.connect_failures + k.failed;
            if k.open_at_end == h.asked && k.closed_by_server == 0 && failures == 0 {
                continue;
            }
            out.push(format!(
                "{} of {} {name} connections ({flag}) were open when the run ended; during the run the server closed {} (an idle or header timeout, a connection limit) and {} failed: the server did not hold them all throughout",
                fmt_count(k.open_at_end),
                fmt_count(h.asked),
                fmt_count(k.closed_by_server),
                fmt_count(failures)
            ));
        }
        out
    }

    /// Several generators' sections as one (`tailscope merge`): counts added up; the
    /// peaks, which need not have fallen at once, are the merged time series' highest.
    pub fn merged<'a>(
        parts: impl Iterator<Item = &'a Connections>,
        series: &[crate::TimePoint],
    ) -> Option<Connections> {
        let mut out: Option<Connections> = None;
        for p in parts {
            let o = out.get_or_insert_with(Connections::default);
            for (mine, theirs) in [(&mut o.idle, &p.idle), (&mut o.slow, &p.slow)] {
                if let Some(t) = theirs {
                    let m = mine.get_or_insert_with(HeldReport::default);
                    m.asked += t.asked;
                    m.counters.merge(&t.counters);
                    m.byte_interval_s = m.byte_interval_s.or(t.byte_interval_s);
                }
            }
        }
        let o = out.as_mut()?;
        let most = |f: fn(&ConnPoint) -> Option<u64>| {
            series
                .iter()
                .filter_map(|p| f(&p.connections))
                .max()
                .unwrap_or(0)
        };
        o.peak_open = most(|c| Some(c.open));
        o.peak_opening = most(|c| Some(c.opening));
        if let Some(i) = o.idle.as_mut() {
            i.peak_open = most(|c| c.idle_open);
        }
        if let Some(s) = o.slow.as_mut() {
            s.peak_open = most(|c| c.slow_open);
        }
        out
    }
}
