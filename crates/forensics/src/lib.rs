//! Spike forensics: name the likely cause of a tail spike, with its evidence, or nothing.
//!
//! Each rule names a cause only when both its latency signature and its corroborating
//! evidence are there; a healthy run names none. The evidence is the run's own: TCP_INFO of
//! the generator's connections and the accept queue of the target's listeners. The kernel's
//! machine-wide counters (/proc/net/netstat) move for every socket on the machine, so they
//! are cited beside it, labelled, and never create or veto a cause. The rules read
//! [`Evidence`]: the generator's own types (its seconds, slowest requests and histogram counts)
//! beside figures drawn from the profile (`evidence`), so they are tested on synthetic data,
//! near-misses included. What they found over a run, with the profile and the accept queues,
//! is [`Findings`], the report's typed sections (the session drives the profiler tick by tick).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tailscope_loadgen::fmt::fmt_us;
use tailscope_loadgen::snapshot::GENERATOR_LAG_WARN_US;
use tailscope_loadgen::{SlowRequest, SpikeCounts, TimePoint};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::seconds::seconds_list;

use accept::accept_queue_overflow;
use stall::server_stall;
use tcp::{delayed_ack, machine_wide, retransmission};

mod accept;
mod errors;
mod evidence;
mod findings;
mod pauses;
mod slow_by_request;
mod stall;
mod tcp;

pub use errors::{errors_unexplained, unexplained, ErrorEvidence};
pub use evidence::{CpuWaits, Load, Roles, Waited};
pub use findings::Findings;
use slow_by_request::in_window;
pub use slow_by_request::{slow_by_request, RequestShare};

/// A window of the run, in seconds from the start of measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Start.
    pub start_s: f64,
    /// End. When `open_ended`, the cause was still going on when the run ended: this is
    /// when it was last seen, not when it stopped.
    pub end_s: f64,
    /// Requests it held were still unfinished at the end of the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_ended: bool,
}

impl Window {
    /// When, in words: `1.50–2.52 s`, or `from 1.50 s, still going at the end`.
    pub fn describe(&self) -> String {
        if self.open_ended {
            format!("from {:.2} s, still going at the end", self.start_s)
        } else {
            format!("{:.2}–{:.2} s", self.start_s, self.end_s)
        }
    }
}

/// Why a tail is slow: every cause the rules can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// New connections waited for SYN retransmits: the listen queue was full.
    AcceptQueueOverflow,
    /// Response bodies waited ~40 ms for the client's delayed ACK (Nagle on the server).
    DelayedAck,
    /// Segments were lost and resent after the minimum RTO.
    Retransmission,
    /// The server stopped running for a while and released what it held at once.
    ServerStall,
    /// The server waited for a CPU that other work held.
    CpuContention,
    /// The generator, not the server, set the pace, or held the requests itself (its event
    /// loop held up as long as they were).
    GeneratorSaturated,
    /// A server stall that was the runtime's garbage collector (see `pauses`).
    GcPause,
    /// A server stall that was threads waiting on a lock (futex).
    LockContention,
    /// A server stall that was a serving thread waiting for the disk.
    BlockingIo,
    /// A server stall that was one function burning the CPU.
    CpuBurn,
    /// The server serves about N connections at once and closes the rest as it accepts them.
    ConnectionCap,
    /// 429 Too Many Requests: the server limits the request rate.
    RateLimited,
    /// 503 Service Unavailable: the server shed load.
    OverloadShed,
    /// 502/504 from a proxy whose upstream is down or slow.
    UpstreamFailure,
    /// The server closes every connection after N requests.
    KeepaliveLimit,
    /// TLS handshakes refused or failed.
    TlsFailure,
    /// Every connection lost at once, the listener gone, then (maybe) back.
    ServerCrashOrRestart,
    /// The generator ran out of local ports.
    PortExhaustion,
    /// The generator ran out of file descriptors.
    FdLimit,
}

impl Cause {
    /// The name used in reports (`server_stall`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::AcceptQueueOverflow => "accept_queue_overflow",
            Cause::DelayedAck => "delayed_ack",
            Cause::Retransmission => "retransmission",
            Cause::ServerStall => "server_stall",
            Cause::CpuContention => "cpu_contention",
            Cause::GeneratorSaturated => "generator_saturated",
            Cause::GcPause => "gc_pause",
            Cause::LockContention => "lock_contention",
            Cause::BlockingIo => "blocking_io",
            Cause::CpuBurn => "cpu_burn",
            Cause::ConnectionCap => "connection_cap",
            Cause::RateLimited => "rate_limited",
            Cause::OverloadShed => "overload_shed",
            Cause::UpstreamFailure => "upstream_failure",
            Cause::KeepaliveLimit => "keepalive_limit",
            Cause::TlsFailure => "tls_failure",
            Cause::ServerCrashOrRestart => "server_crash_or_restart",
            Cause::PortExhaustion => "port_exhaustion",
            Cause::FdLimit => "fd_limit",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// What the rules named.
    pub cause: Cause,
    /// The numbers that show it.
    pub evidence: String,
    /// Requests it slowed (an estimate from the histograms).
    pub requests_affected: u64,
    /// When, if it is confined to a window.
    pub window: Option<Window>,
    /// What the server was doing inside the window, from its stacks (see
    /// [`Findings::look_inside`]); `None` when they were not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<String>,
    /// In a mix: which requests the slowest kept in its window were (all of them when it
    /// has none), the commonest first; empty for a single request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestShare>,
}

/// What the rules read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evidence {
    /// Requests counted.
    pub requests: u64,
    /// Requests that can be in flight at once (connections × pipeline depth).
    pub in_flight: u64,
    /// The run's median latency.
    pub p50_us: Option<u64>,
    /// One entry per second.
    pub seconds: Vec<TimePoint>,
    /// The slowest requests.
    pub slowest: Vec<SlowRequest>,
    /// Responses at the delays that name a cause (SYN retransmit steps, a delayed ACK, RTO
    /// steps and what lies just below them).
    pub counts: SpikeCounts,
    /// Machine-wide kernel TCP counter deltas (every socket on the machine); `None` when
    /// unreadable. Cited as corroboration only.
    pub tcp: Option<BTreeMap<String, i64>>,
    /// Segments the generator's own connections retransmitted (TCP_INFO), SYNs apart;
    /// `None` when TCP_INFO could not be read.
    pub own_retransmits: Option<u64>,
    /// SYNs the generator's own connections retransmitted.
    pub own_syn_retransmits: Option<u64>,
    /// The request time-out (-t), when known: a request that timed out was held that long.
    pub timeout_us: Option<u64>,
    /// The accept queues of the target's listeners; `None` when not watched.
    pub listen: Option<ListenReport>,
    /// Mean busy % of the server's CPUs, when known.
    pub server_cpus_busy_pct: Option<f64>,
    /// Mean busy % of the generator's CPUs, when known.
    pub client_cpus_busy_pct: Option<f64>,
    /// Mean steal % over the CPUs used.
    pub steal_pct: Option<f64>,
    /// Of the server's CPUs' capacity, the percentage busy with work that was neither the
    /// server's own nor the generator's (another process competing for them), when the
    /// server's CPUs are known (and, where the generator may run on them, its CPU time is).
    pub server_foreign_pct: Option<f64>,
    /// Where the generator may run on the server's CPUs (not pinned apart from them): its own
    /// CPU time over the run as a share of those CPUs' capacity (%), at most what it took
    /// from the server. `None` where they are apart, or the generator's time is unknown.
    pub generator_on_server_cpus_pct: Option<f64>,
    /// The target's involuntary context switches per second.
    pub target_involuntary_per_s: Option<f64>,
    /// The run's length.
    pub duration_s: f64,
    /// How long the server's thread that waited most was runnable but waited for a CPU, in
    /// each second of the run (by second, from 0); empty where it was not measured.
    pub server_run_queue_s: BTreeMap<u64, f64>,
    /// Over the whole run: the wait of the thread that waited most, when measured.
    pub server_run_queue_total_s: Option<f64>,
    /// Tick by tick: the wait of the server's working thread that waited most; empty where
    /// not followed tick by tick (then the rules read the seconds).
    pub server_waits: Vec<Waited>,
    /// Mean busy % of all the machine's CPUs over the run (whoever kept them busy), when
    /// profiled.
    pub machine_busy_pct: Option<f64>,
    /// Whether the server's process was profiled (a pid known: `--pid`, `--target`).
    pub server_profiled: bool,
    /// Connect attempts of the load that gave up after `--connect-timeout`.
    pub connect_timeouts: u64,
    /// The connect time-out (`--connect-timeout`), when known.
    pub connect_timeout_us: Option<u64>,
    /// The run's failures, for the error rules.
    pub errors: ErrorEvidence,
}

/// A cause whose latency signature was there but that its evidence (or the lack of it) kept
/// from being named, and why: "no cause found" must not hide a rule that nearly named one (a
/// Node event-loop stall read "no rule's signature and evidence were both there" while a
/// warm-up second's wait for a CPU had vetoed it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldBack {
    /// The cause not named.
    pub cause: Cause,
    /// What vetoed it, with its numbers, and what would tell (a flag to add) where known.
    pub why: String,
}

/// What the rules concluded over the evidence.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    /// The causes named, most specific first.
    pub named: Vec<Diagnosis>,
    /// The causes held back, and why.
    pub held_back: Vec<HeldBack>,
    /// The seconds of the run (0-based) that a named `server_stall` held its requests in;
    /// empty when none was named. Its stacks are compared in these against the others
    /// ([`tailscope_targets::stacks::Inside::compared_in`]), so that what refines it is read
    /// from its own seconds.
    pub stalled_seconds: std::collections::BTreeSet<u32>,
}

/// What one rule concluded.
enum Ruling {
    /// Its signature and its evidence were both there.
    Named(Diagnosis),
    /// Its signature was there, and something vetoed it.
    HeldBack(HeldBack),
    /// Its signature was not there.
    Absent,
}

impl From<Option<Diagnosis>> for Ruling {
    fn from(d: Option<Diagnosis>) -> Ruling {
        d.map_or(Ruling::Absent, Ruling::Named)
    }
}

/// Names the causes the evidence supports, most specific first.
pub fn diagnose(e: &Evidence) -> Vec<Diagnosis> {
    judge(e).named
}

/// Names the causes the evidence supports, most specific first, and says which were held
/// back and why.
pub fn judge(e: &Evidence) -> Verdict {
    let (stall, stalled_seconds) = server_stall(e);
    let rulings: [Ruling; 6] = [
        accept_queue_overflow(e).into(),
        delayed_ack(e).into(),
        retransmission(e).into(),
        stall,
        cpu_contention(e).into(),
        generator_saturated(e).into(),
    ];
    let mut verdict = Verdict {
        stalled_seconds,
        ..Verdict::default()
    };
    for ruling in rulings.into_iter().chain(errors::rulings(e)) {
        match ruling {
            Ruling::Named(mut d) => {
                d.requests = slow_by_request(in_window(&e.slowest, d.window));
                verdict.named.push(d);
            }
            Ruling::HeldBack(h) => verdict.held_back.push(h),
            Ruling::Absent => {}
        }
    }
    verdict
}

/// A stall shorter than this is not named (VMs show few-ms blips all the time).
const MIN_STALL_US: u64 = 20_000;

/// The server's CPUs count as contended when this much of their capacity went to others.
const FOREIGN_PCT: f64 = 30.0;
/// Steal from the hypervisor that counts as contention.
const STEAL_PCT: f64 = 5.0;

/// A server thread waiting this share of the run for a CPU is contention.
const RUN_QUEUE_SHARE: f64 = 0.05;

fn contended(e: &Evidence) -> bool {
    // Where the server's CPUs cannot be told apart from the generator's (they overlap, or
    // were never pinned), others' share of them is unknown; then a thread that waited a
    // measured share of the run on a run queue is the evidence itself (a newcomer's stalled
    // server on a machine four builds kept busy waited 57 % of the run, and nothing was named).
    let waited_measured = match (e.server_run_queue_total_s, e.duration_s) {
        (Some(w), d) if d > 0.0 => w / d >= RUN_QUEUE_SHARE,
        _ => false,
    };
    // The wait must also fall in a spiky second, as long as half its worst delay: a busy
    // server waits a little in any run.
    let waited_in_a_spike = e
        .seconds
        .iter()
        .any(|s| s.outliers > 0 && waited_for_cpu(e, s));
    // Where the generator shares the server's CPUs, it may be what the server waited for:
    // the wait alone is the evidence then, as where others' share is unknown.
    let shared = e.server_foreign_pct.is_none() || e.generator_on_server_cpus_pct.is_some();
    let others = e.steal_pct.is_some_and(|s| s >= STEAL_PCT)
        || e.server_foreign_pct.is_some_and(|f| f >= FOREIGN_PCT)
        || (shared && waited_measured && waited_in_a_spike);
    // Others busy on the server's CPUs took only what the server did not need when its
    // threads hardly ever waited for one.
    let waited = match (e.server_run_queue_total_s, e.duration_s) {
        (Some(w), d) if d > 0.0 => w / d >= RUN_QUEUE_SHARE || waited_in_a_spike,
        _ => true,
    };
    others && waited
}

/// How long the second's requests were held: its slowest response, or the time-out when
/// some timed out in it (each waited that long, and no response of theirs says more).
fn held_us(e: &Evidence, s: &TimePoint) -> u64 {
    match (s.timeouts, e.timeout_us) {
        (1.., Some(t)) => s.max_us.max(t),
        _ => s.max_us,
    }
}

/// When the second of point `s` began: a point covers (ceil(t_s) - 1, t_s], so a partial
/// last second (t_s 10.4) began at 10, not at t_s - 1 (a stall in it read "second 9").
fn second_start(s: &TimePoint) -> f64 {
    s.t_s.ceil() - 1.0
}

/// Whether the slow request `r` ended in the second ending at `s.t_s` (a point covers
/// (ceil(t_s) - 1, t_s]): one of the requests that second held.
fn released_in(s: &TimePoint, r: &SlowRequest) -> bool {
    let end = r.at_s + r.latency_us as f64 / 1e6;
    end > second_start(s) && end <= s.t_s
}

/// The most a generator thread's event loop was held up while the second's requests were
/// held: in any second from the one the earliest of them began in to this one. The loop's lag
/// is filed under the interval in which it resumed, and the responses it then read may be
/// filed under the next one, in the next second (a newcomer's busy machine: the loop held
/// 987 ms in second 2–3, and the 894 ms hold of the requests it could not read named a
/// server_stall from second 3–4, whose own lag was small).
///
/// When they began is read from the slowest requests released in the second; only where
/// none of them was kept is it bounded by the earliest any could have begun (the second's
/// start less its hold). That bound alone reached back past the hold: a 300 ms stall at
/// 5.6–5.9 s was taken from the server for a 160 ms loop lag that ended at 4.3 s.
fn generator_lag_while_held(e: &Evidence, s: &TimePoint) -> u64 {
    let began_s = e
        .slowest
        .iter()
        .filter(|r| released_in(s, r))
        .map(|r| r.at_s)
        .min_by(f64::total_cmp)
        .unwrap_or(second_start(s) - held_us(e, s) as f64 / 1e6);
    e.seconds
        .iter()
        // A point covers (ceil(t_s) - 1, t_s]: a partial last second is dated when its data
        // ends, not a second after its start.
        .filter(|p| p.t_s > began_s && p.t_s.ceil() - 1.0 < s.t_s)
        .map(|p| p.generator_lag_us)
        .max()
        .unwrap_or(0)
}

/// Whether the generator's own loop was held up for at least half as long as the second's
/// requests were: it could not send them nor read their responses then, so the delay may be
/// (mostly) its own, whatever the server did. Enough to keep server_stall from naming the
/// server; [`generator_stall`] names the generator only for a lag the report warns of too.
fn held_by_generator(e: &Evidence, s: &TimePoint) -> bool {
    generator_lag_while_held(e, s) * 2 >= held_us(e, s)
}

/// Whether a server thread waited for a CPU, in the second ending at `s.t_s`, for at least
/// half of how long its requests were held: then the CPU's other users explain the delay.
fn waited_for_cpu(e: &Evidence, s: &TimePoint) -> bool {
    let second = (s.t_s.ceil() as u64).saturating_sub(1);
    e.server_run_queue_s
        .get(&second)
        .is_some_and(|w| *w * 1e6 >= held_us(e, s) as f64 * 0.5)
}

fn cpu_contention(e: &Evidence) -> Option<Diagnosis> {
    let spiky = e.seconds.iter().any(|s| s.outliers > 0);
    if !spiky || !contended(e) {
        return None;
    }
    let mut why = Vec::new();
    if let Some(s) = e.steal_pct.filter(|s| *s >= STEAL_PCT) {
        why.push(format!("the hypervisor took {s:.1} % of the CPUs (steal)"));
    }
    if let Some(f) = e.server_foreign_pct.filter(|f| *f >= FOREIGN_PCT) {
        why.push(match e.generator_on_server_cpus_pct {
            Some(_) => format!(
                "{f:.0} % of the server's CPUs went to work that was neither the server's nor the generator's"
            ),
            None => format!("{f:.0} % of the server's CPUs went to work that was not the server's"),
        });
    }
    if let Some(p) = e.target_involuntary_per_s {
        why.push(format!("the server was preempted {p:.0} times a second"));
    }
    if let (Some(w), true) = (e.server_run_queue_total_s, e.duration_s > 0.0) {
        why.push(format!(
            "its thread that waited most waited {:.0} ms a second for a CPU (schedstat)",
            w / e.duration_s * 1e3
        ));
    }
    // Where the generator runs on the server's CPUs, its own share of them is known (its CPU
    // time over the run): the generator itself may be what the server waited for (a
    // newcomer's unpinned run named 45 % of "work that was not the server's" on a quiet
    // machine: it was the generator's).
    let shared = if let Some(g) = e.generator_on_server_cpus_pct {
        format!(
            " (the generator is not pinned apart from the server and its own CPU time over the \
             run was up to {g:.0} % of the server's CPUs (where it ran is not known), so it may \
             be what the server waited for: pin them apart, the \
             generator with --cpus and the server on other CPUs with taskset -c, or \
             --server-cpus for a server tailscope launches)"
        )
    } else if e.server_foreign_pct.is_none() && e.steal_pct.is_none_or(|s| s < STEAL_PCT) {
        " (the server's CPUs overlap the generator's or are unknown, so the generator may be \
         what it waited for: pin them apart with --server-cpus and --cpus, or taskset)"
            .to_string()
    } else {
        String::new()
    };
    Some(Diagnosis {
        cause: Cause::CpuContention,
        evidence: format!(
            "tail outliers while {}: the server waited for a CPU{shared}",
            why.join(" and ")
        ),
        requests_affected: e.seconds.iter().map(|s| s.outliers).sum(),
        window: None,
        inside: None,
        requests: Vec::new(),
    })
}

fn generator_saturated(e: &Evidence) -> Option<Diagnosis> {
    let (Some(client), Some(server)) = (e.client_cpus_busy_pct, e.server_cpus_busy_pct) else {
        return generator_stall(e);
    };
    if client < 90.0 || server > 70.0 {
        return generator_stall(e);
    }
    Some(Diagnosis {
        cause: Cause::GeneratorSaturated,
        evidence: format!(
            "the generator's CPUs were {client:.0} % busy while the server's were {server:.0} %: the generator, not the server, \
             set the pace; these numbers describe the generator (add --threads/--cpus, or use pipelining)"
        ),
        requests_affected: 0,
        window: None,
        inside: None,
        requests: Vec::new(),
    })
}

/// The generator's own loop held up as long as the spike it measured (a stall's length, not
/// a blip): it could neither send nor read, so the requests waited for it. Named as the
/// generator's, with its lag, where server_stall is held back for the same reason.
///
/// Only a lag the report warns of ([`GENERATOR_LAG_WARN_US`]) names the generator: a 10–20
/// ms tick lag beside one 20–40 ms response named generator_saturated while the warnings said
/// the generator kept time. A shorter lag still keeps server_stall from naming the server
/// (a review asked for the same floor there; a machine-wide hiccup of a few tens of ms then
/// holds the generator's loop and the server alike, and would name a stall of a healthy
/// server): between the two, nothing is named.
fn generator_stall(e: &Evidence) -> Option<Diagnosis> {
    let floor = MIN_STALL_US.max(e.p50_us.unwrap_or(0) * 20);
    let held: Vec<&TimePoint> = e
        .seconds
        .iter()
        .filter(|s| {
            s.outliers > 0
                && held_us(e, s) >= floor
                && held_by_generator(e, s)
                && generator_lag_while_held(e, s) >= GENERATOR_LAG_WARN_US
        })
        .collect();
    let (first, last) = (held.first()?, held.last()?);
    let worst_held = held.iter().map(|s| held_us(e, s)).max().unwrap_or(0);
    let worst_lag = held
        .iter()
        .map(|s| generator_lag_while_held(e, s))
        .max()
        .unwrap_or(0);
    let seconds = seconds_list(held.iter().map(|s| (s.t_s.ceil() - 1.0).max(0.0) as u64));
    let start_s = first.t_s.ceil() - 1.0 - worst_held as f64 / 1e6;
    let in_seconds = |r: &&SlowRequest| held.iter().any(|s| released_in(s, r));
    Some(Diagnosis {
        cause: Cause::GeneratorSaturated,
        evidence: format!(
            "in second(s) {}, responses were held up to {} while a generator thread's event loop was itself held up \
             to {} around them (generator_lag_us): it could neither send nor read then, so the generator, not the \
             server, held these requests (its thread did not get a CPU, or did other work); these delays are the \
             generator's: keep other work off its CPUs (--cpus apart from the server's and from other busy \
             processes) and run again",
            seconds,
            fmt_us(worst_held),
            fmt_us(worst_lag),
        ),
        requests_affected: held.iter().map(|s| s.outliers).sum(),
        window: window_of(e.slowest.iter().filter(in_seconds)).or(Some(Window {
            start_s: start_s.max(0.0),
            end_s: last.t_s,
            open_ended: false,
        })),
        inside: None,
        requests: Vec::new(),
    })
}

/// The most slow requests that ended at the same moment (within 10 ms, or 5 % of their
/// latency): a stall releases everything it held at once, retransmit delays end one by one.
fn released_together(slowest: &[SlowRequest]) -> usize {
    let ends: Vec<(f64, f64)> = slowest
        .iter()
        .map(|s| {
            (
                s.at_s + s.latency_us as f64 / 1e6,
                s.latency_us as f64 / 1e6,
            )
        })
        .collect();
    ends.iter()
        .map(|&(end, latency)| {
            let tolerance = (0.05 * latency).max(0.010);
            ends.iter()
                .filter(|(e, _)| (e - end).abs() <= tolerance)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Whether the slowest requests look released together: at least `least`, and at least half
/// of `of`.
fn stall_shaped(e: &Evidence, least: usize, of: usize) -> bool {
    let together = released_together(&e.slowest);
    together >= least && together * 2 >= of
}

/// How many of the slowest kept one stall can release: all of them, or what can be in
/// flight where that is fewer (at -c 4 a stall every 700 ms kept 4 + 4 of the 10 slowest,
/// released at two moments, and was never named).
fn one_stall_can_hold(e: &Evidence) -> usize {
    match usize::try_from(e.in_flight) {
        Ok(n) if n > 0 => e.slowest.len().min(n),
        _ => e.slowest.len(),
    }
}

/// The fewest requests released together that make a stall: three, or, where fewer can be
/// in flight, all of them but never one (a lone slow request is no "together"; at -c 1
/// nothing tells a stall from any other delay). At -c 2 the rest of the rule (20× the
/// median, reused connections, the listener never full) keeps it from ordinary latency.
fn least_together(e: &Evidence) -> usize {
    usize::try_from(e.in_flight).map_or(3, |n| n.clamp(2, 3))
}

fn window_of<'a>(slow: impl Iterator<Item = &'a SlowRequest>) -> Option<Window> {
    let mut w: Option<Window> = None;
    for s in slow {
        let end = s.at_s + s.latency_us as f64 / 1e6;
        w = Some(match w {
            None => Window {
                start_s: s.at_s,
                end_s: end,
                open_ended: s.unfinished,
            },
            Some(w) => Window {
                start_s: w.start_s.min(s.at_s),
                end_s: w.end_s.max(end),
                open_ended: w.open_ended || s.unfinished,
            },
        });
    }
    w
}

#[cfg(test)]
mod tests;
