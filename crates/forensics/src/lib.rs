//! Spike forensics: name the likely cause of a tail spike, with its evidence, or nothing.
//!
//! Each rule names a cause only when both its latency signature and its corroborating
//! evidence are there; a healthy run names none. The evidence is the run's own: TCP_INFO of
//! the generator's connections and the accept queue of the target's listeners. The kernel's
//! machine-wide counters (/proc/net/netstat) move for every socket on the machine, so they
//! are cited beside it, labelled, and never create or veto a cause. The rules read plain numbers
//! ([`Evidence`]) that the binary extracts from the generator's histograms and the profile,
//! so they are tested on synthetic data, near-misses included.

use std::collections::BTreeMap;

use serde::Serialize;

use tailscope_targets::listen::ListenReport;

/// A window of the run, in seconds from the start of measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Window {
    /// Start.
    pub start_s: f64,
    /// End. When `open_ended`, the cause was still going on when the run ended: this is
    /// when it was last seen, not when it stopped.
    pub end_s: f64,
    /// Requests it held were still unfinished at the end of the run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub open_ended: bool,
}

/// Why a tail is slow: every cause the rules can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
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
    /// The generator, not the server, set the pace.
    GeneratorSaturated,
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
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// What the rules named.
    pub cause: Cause,
    /// The numbers that show it.
    pub evidence: String,
    /// Requests it slowed (an estimate from the histograms).
    pub requests_affected: u64,
    /// When, if it is confined to a window.
    pub window: Option<Window>,
}

/// One second of the run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Second {
    /// End of the second.
    pub t_s: f64,
    /// Requests finished in it.
    pub requests: u64,
    /// Responses ≥ 10× the run's median (and ≥ 1 ms).
    pub outliers: u64,
    /// Its slowest response.
    pub max_us: u64,
    /// The most the generator's own event loop was held up in it.
    pub generator_lag_us: u64,
}

/// One of the slowest requests.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Slow {
    /// When it began.
    pub at_s: f64,
    /// Its latency.
    pub latency_us: u64,
    /// It opened its connection.
    pub first_on_connection: bool,
    /// Still unfinished when the run ended: `latency_us` is a lower bound.
    pub unfinished: bool,
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
    pub seconds: Vec<Second>,
    /// The slowest requests.
    pub slowest: Vec<Slow>,
    /// First-on-connection requests that took ~1 s, ~3 s, ~7 s (SYN retransmit times).
    pub new_connection_syn_steps: [u64; 3],
    /// Responses whose body arrived 38–60 ms after their head.
    pub split_body_40ms: u64,
    /// Responses that took ~200 ms, ~400 ms, ~800 ms (minimum RTO and its back-off).
    pub rto_steps: [u64; 3],
    /// Responses that took 100–190 ms: RTO delays stand out above these, a stall's spread
    /// of latencies does not.
    pub below_rto: u64,
    /// Machine-wide kernel TCP counter deltas (every socket on the machine); `None` when
    /// unreadable. Cited as corroboration only.
    pub tcp: Option<BTreeMap<String, i64>>,
    /// Segments the generator's own connections retransmitted (TCP_INFO), SYNs apart;
    /// `None` when TCP_INFO could not be read.
    pub own_retransmits: Option<u64>,
    /// SYNs the generator's own connections retransmitted.
    pub own_syn_retransmits: Option<u64>,
    /// The accept queues of the target's listeners; `None` when not watched.
    pub listen: Option<ListenReport>,
    /// Mean busy % of the server's CPUs, when known.
    pub server_cpus_busy_pct: Option<f64>,
    /// Mean busy % of the generator's CPUs, when known.
    pub client_cpus_busy_pct: Option<f64>,
    /// Mean steal % over the CPUs used.
    pub steal_pct: Option<f64>,
    /// Of the server's CPUs' capacity, the percentage busy with work that was not the
    /// server's own (another process competing for them), when its CPUs are known and apart
    /// from the generator's.
    pub server_foreign_pct: Option<f64>,
    /// The target's involuntary context switches per second.
    pub target_involuntary_per_s: Option<f64>,
    /// The run's length.
    pub duration_s: f64,
}

fn tcp(e: &Evidence, name: &str) -> i64 {
    e.tcp
        .as_ref()
        .and_then(|t| t.get(name).copied())
        .unwrap_or(0)
}

fn tcp_list(e: &Evidence, names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n} +{}", tcp(e, n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The machine-wide counters as a labelled aside.
fn machine_wide(e: &Evidence, names: &[&str]) -> String {
    if e.tcp.is_some() {
        format!("machine-wide, all sockets: {}", tcp_list(e, names))
    } else {
        "machine-wide counters unreadable".into()
    }
}

/// The watched listeners, when they could be sampled.
fn watched(e: &Evidence) -> Option<&ListenReport> {
    e.listen.as_ref().filter(|l| l.samples > 0)
}

/// Whether the target's own listener was seen at its limit.
fn listener_full(e: &Evidence) -> bool {
    watched(e).is_some_and(|l| l.full_samples > 0)
}

/// Whether the target's own listener was seen at least half full. A queue that fills and
/// drains between two samples (100 ms apart) is seen so, not at its limit.
fn listener_pressed(e: &Evidence) -> bool {
    watched(e).is_some_and(|l| {
        l.backlog
            .is_some_and(|b| u64::from(l.max_queue) * 2 >= u64::from(b).max(1))
    })
}

/// Our own SYNs were resent while our listener was pressed: a full accept queue drops SYNs,
/// and the data of connections whose final ACK it dropped is resent too, so here data
/// retransmits outnumbering the SYNs do not mean packet loss.
fn syns_at_a_pressed_listener(e: &Evidence) -> bool {
    listener_pressed(e) && e.own_syn_retransmits.unwrap_or(0) > 0
}

/// Our own SYN retransmits that point at dropped handshakes rather than packet loss: data
/// retransmits do not outnumber them (measured with 5 % loss: one lost SYN beside 191
/// resent data segments).
fn own_syn_drops(e: &Evidence) -> u64 {
    let syn = e.own_syn_retransmits.unwrap_or(0);
    if syn > 0 && e.own_retransmits.unwrap_or(0) <= syn {
        syn
    } else {
        0
    }
}

fn listener_text(e: &Evidence) -> String {
    match (watched(e), e.listen.as_ref()) {
        (Some(l), _) => format!(
            "the target's listener ({} socket{} on port {}, backlog {}) was at its limit in {} of {} samples, longest queue {}",
            l.sockets,
            if l.sockets == 1 { "" } else { "s" },
            l.port,
            l.backlog.map_or("n/a".into(), |b| b.to_string()),
            l.full_samples,
            l.samples,
            l.max_queue
        ),
        (None, Some(l)) => format!(
            "the target's listener could not be watched ({})",
            l.unavailable.as_deref().unwrap_or("not found")
        ),
        (None, None) => "the target's listener was not watched".into(),
    }
}

/// Names the causes the evidence supports, most specific first.
pub fn diagnose(e: &Evidence) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    out.extend(accept_queue_overflow(e));
    out.extend(delayed_ack(e));
    out.extend(retransmission(e));
    out.extend(server_stall(e));
    out.extend(cpu_contention(e));
    out.extend(generator_saturated(e));
    out
}

fn accept_queue_overflow(e: &Evidence) -> Option<Diagnosis> {
    let slow_new: u64 = e.new_connection_syn_steps.iter().sum();
    // The specific evidence is the target's own listener at its limit; where it cannot be
    // watched (or the queue filled between samples), our own connections' SYN retransmits
    // (a full queue drops SYNs) when data retransmits do not outnumber them.
    if slow_new == 0 || !(listener_full(e) || own_syn_drops(e) > 0 || syns_at_a_pressed_listener(e))
    {
        return None;
    }
    let [s1, s3, s7] = e.new_connection_syn_steps;
    let window = window_of(
        e.slowest
            .iter()
            .filter(|s| s.first_on_connection && s.latency_us >= 900_000),
    );
    let full_seconds =
        watched(e)
            .filter(|l| !l.full_seconds.is_empty())
            .map_or(String::new(), |l| {
                let secs: Vec<String> = l.full_seconds.iter().map(u64::to_string).collect();
                format!(" (full in second(s) {})", secs.join(", "))
            });
    Some(Diagnosis {
        cause: Cause::AcceptQueueOverflow,
        evidence: format!(
            "{slow_new} requests on new connections took ~1 s ({s1}), ~3 s ({s3}) or ~7 s ({s7}): SYN or handshake retransmits \
             after the listen queue overflowed: {}{full_seconds}; our connections retransmitted {} SYNs ({}); \
             raise the backlog (listen(2), net.core.somaxconn) or accept faster",
            listener_text(e),
            e.own_syn_retransmits.map_or("n/a".into(), |n| n.to_string()),
            machine_wide(e, &["ListenOverflows", "ListenDrops", "TCPSynRetrans"])
        ),
        requests_affected: slow_new,
        window,
    })
}

fn delayed_ack(e: &Evidence) -> Option<Diagnosis> {
    let n = e.split_body_40ms;
    if n < 10 || (n as f64) < 0.01 * e.requests as f64 {
        return None;
    }
    Some(Diagnosis {
        cause: Cause::DelayedAck,
        evidence: format!(
            "{n} responses ({:.1} %) arrived in two parts, the body 38–60 ms after the head: the server writes head and body \
             separately with Nagle on, and the second write waits for the client's delayed ACK (40 ms); fix: TCP_NODELAY or one write",
            100.0 * n as f64 / e.requests.max(1) as f64
        ),
        requests_affected: n,
        window: None,
    })
}

fn retransmission(e: &Evidence) -> Option<Diagnosis> {
    let n: u64 = e.rto_steps.iter().sum();
    // Segments our own connections actually resent. A timer firing is no evidence: an
    // application that stops reading for longer than the minimum RTO makes retransmit timers
    // fire with nothing lost (seen here: a 250 ms stall, TCPTimeouts +32, RetransSegs +0).
    let resent = e.own_retransmits.unwrap_or(0);
    // Steps, not a spread: a stall in open loop delays requests by every amount up to its
    // length, RTOs by ~200 ms and its doublings.
    if n < 3 || resent == 0 || n < 3 * e.below_rto {
        return None;
    }
    // Released at the same moment is a stall's signature; RTO delays end one by one.
    if stall_shaped(e) {
        return None;
    }
    let [r2, r4, r8] = e.rto_steps;
    Some(Diagnosis {
        cause: Cause::Retransmission,
        evidence: format!(
            "{n} responses took ~200 ms ({r2}), ~400 ms ({r4}) or ~800 ms ({r8}): the minimum RTO and its back-off, while \
             our own connections retransmitted {resent} segments (TCP_INFO; {}): segments were lost and resent",
            machine_wide(e, &["RetransSegs", "TCPTimeouts", "TCPLossProbes"])
        ),
        requests_affected: n,
        window: None,
    })
}

/// A stall shorter than this is not named (VMs show few-ms blips all the time).
const MIN_STALL_US: u64 = 20_000;

fn server_stall(e: &Evidence) -> Option<Diagnosis> {
    // A server that waited for a CPU others held did not stop by itself.
    if contended(e) {
        return None;
    }
    let threshold = (e.in_flight / 2).max(5);
    let floor = MIN_STALL_US.max(e.p50_us.unwrap_or(0) * 20);
    // Many delayed at once, by a lot, while the generator's own loop kept time: a pause the
    // generator took itself would delay every response just the same.
    let stalled: Vec<&Second> = e
        .seconds
        .iter()
        .filter(|s| {
            s.outliers >= threshold && s.max_us >= floor && s.generator_lag_us * 2 < s.max_us
        })
        .collect();
    if stalled.is_empty() {
        return None;
    }
    // The listen-queue counters point at connection setup instead. Retransmits do not veto:
    // measured here, a 250 ms stall of the io_uring server moved RetransSegs and TCPTimeouts
    // by about the number of requests it held (+45..+69) with nothing else wrong. What tells
    // a stall from retransmission is timing: many at the same moment, not one by one.
    // The target's own listener full, or our own SYNs dropped, point at connection setup
    // instead. (The machine-wide ListenOverflows moves for every listener on the machine:
    // another busy server's leftovers must not veto this one's stall.)
    let affected_total: u64 = stalled.iter().map(|s| s.outliers).sum();
    if listener_full(e) || own_syn_drops(e) > 0 || syns_at_a_pressed_listener(e) {
        return None;
    }
    // Old connections were delayed too: not a connection-setup problem.
    let in_window = |s: &&Slow| {
        stalled
            .iter()
            .any(|sec| s.at_s <= sec.t_s && s.at_s + s.latency_us as f64 / 1e6 >= sec.t_s - 1.0)
    };
    let slow: Vec<&Slow> = e.slowest.iter().filter(in_window).collect();
    if !slow.is_empty() && slow.iter().all(|s| s.first_on_connection) {
        return None;
    }
    // Many slow requests in a second is not enough (scattered retransmit delays add up too):
    // a stall releases what it held at one moment.
    if !stall_shaped(e) {
        return None;
    }
    let affected = affected_total;
    let worst = stalled.iter().map(|s| s.max_us).max().unwrap_or(0);
    let window = window_of(slow.iter().copied()).or(Some(Window {
        start_s: stalled[0].t_s - 1.0,
        end_s: stalled[stalled.len() - 1].t_s,
        open_ended: false,
    }));
    let seconds: Vec<String> = stalled
        .iter()
        .map(|s| format!("{:.0}", s.t_s - 1.0))
        .collect();
    Some(Diagnosis {
        cause: Cause::ServerStall,
        evidence: format!(
            "in second(s) {1}, at least {threshold} requests at once (about half of the {2} that can be in flight) were held \
             together, up to {0} ms, on reused connections too, and {affected} responses in those seconds took 10× the median \
             or more (the stall and the backlog it left), while the listen queue never filled ({3}; {4}): the server stopped \
             running for a while (a GC pause, a blocking call, a stalled event loop)",
            worst / 1000,
            seconds.join(", "),
            e.in_flight,
            listener_text(e),
            machine_wide(e, &["ListenOverflows", "ListenDrops", "RetransSegs"])
        ),
        requests_affected: affected,
        window,
    })
}

/// The server's CPUs count as contended when this much of their capacity went to others.
const FOREIGN_PCT: f64 = 30.0;
/// Steal from the hypervisor that counts as contention.
const STEAL_PCT: f64 = 5.0;

fn contended(e: &Evidence) -> bool {
    e.steal_pct.is_some_and(|s| s >= STEAL_PCT)
        || e.server_foreign_pct.is_some_and(|f| f >= FOREIGN_PCT)
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
        why.push(format!(
            "{f:.0} % of the server's CPUs went to work that was not the server's"
        ));
    }
    if let Some(p) = e.target_involuntary_per_s {
        why.push(format!("the server was preempted {p:.0} times a second"));
    }
    Some(Diagnosis {
        cause: Cause::CpuContention,
        evidence: format!(
            "tail outliers while {}: the server waited for a CPU",
            why.join(" and ")
        ),
        requests_affected: e.seconds.iter().map(|s| s.outliers).sum(),
        window: None,
    })
}

fn generator_saturated(e: &Evidence) -> Option<Diagnosis> {
    let (Some(client), Some(server)) = (e.client_cpus_busy_pct, e.server_cpus_busy_pct) else {
        return None;
    };
    if client < 90.0 || server > 70.0 {
        return None;
    }
    Some(Diagnosis {
        cause: Cause::GeneratorSaturated,
        evidence: format!(
            "the generator's CPUs were {client:.0} % busy while the server's were {server:.0} %: the generator, not the server, \
             set the pace; these numbers describe the generator (add --threads/--cpus, or use pipelining)"
        ),
        requests_affected: 0,
        window: None,
    })
}

/// The most slow requests that ended at the same moment (within 10 ms, or 5 % of their
/// latency): a stall releases everything it held at once, retransmit delays end one by one.
fn released_together(slowest: &[Slow]) -> usize {
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

/// Whether the slowest requests look released together: at least three, and at least half
/// of those kept.
fn stall_shaped(e: &Evidence) -> bool {
    let together = released_together(&e.slowest);
    together >= 3 && together * 2 >= e.slowest.len()
}

fn window_of<'a>(slow: impl Iterator<Item = &'a Slow>) -> Option<Window> {
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
mod tests {
    use super::*;

    fn healthy() -> Evidence {
        Evidence {
            requests: 100_000,
            in_flight: 64,
            p50_us: Some(250),
            seconds: (1..=10)
                .map(|t| Second {
                    t_s: t as f64,
                    requests: 10_000,
                    outliers: 2,
                    max_us: 4_000,
                    generator_lag_us: 300,
                })
                .collect(),
            slowest: vec![Slow {
                at_s: 3.2,
                latency_us: 4_000,
                first_on_connection: false,
                unfinished: false,
            }],
            tcp: Some(BTreeMap::from([
                ("ListenOverflows".into(), 0),
                ("RetransSegs".into(), 0),
                ("TCPSynRetrans".into(), 0),
            ])),
            own_retransmits: Some(0),
            own_syn_retransmits: Some(0),
            listen: Some(ListenReport {
                port: 8080,
                sockets: 1,
                backlog: Some(4096),
                samples: 100,
                full_samples: 0,
                max_queue: 3,
                full_seconds: Vec::new(),
                unavailable: None,
            }),
            server_cpus_busy_pct: Some(99.0),
            client_cpus_busy_pct: Some(95.0),
            steal_pct: Some(0.2),
            target_involuntary_per_s: Some(3.0),
            duration_s: 10.0,
            ..Evidence::default()
        }
    }

    /// Slow requests a 300 ms stall at 4.1 s released together at 4.40 s.
    fn stalled_slowest() -> Vec<Slow> {
        [
            (4.1, 300_000),
            (4.12, 280_000),
            (4.15, 250_000),
            (4.2, 200_000),
        ]
        .into_iter()
        .map(|(at_s, latency_us)| Slow {
            at_s,
            latency_us,
            first_on_connection: false,
            unfinished: false,
        })
        .collect()
    }

    /// `e` with a machine-wide counter moved by `n`.
    fn with_machine_counter(e: &Evidence, name: &str, n: i64) -> Evidence {
        let mut e = e.clone();
        e.tcp
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), n);
        e
    }

    fn causes(e: &Evidence) -> Vec<String> {
        diagnose(e)
            .into_iter()
            .map(|d| d.cause.to_string())
            .collect()
    }

    #[test]
    fn a_healthy_run_names_nothing() {
        assert!(causes(&healthy()).is_empty());
    }

    #[test]
    fn accept_queue_overflow_needs_slow_new_connections_and_our_own_listener_or_syns() {
        let mut e = healthy();
        e.new_connection_syn_steps = [12, 2, 0];
        e.slowest.push(Slow {
            at_s: 1.5,
            latency_us: 1_020_000,
            first_on_connection: true,
            unfinished: false,
        });
        // Near-miss: ~1 s on new connections but our listener never filled and no SYN of
        // ours was resent.
        assert!(causes(&e).is_empty());
        // Near-miss: another listener on the machine overflowed (machine-wide counters
        // moved), ours did not: not ours to name.
        let elsewhere = with_machine_counter(&e, "ListenOverflows", 900);
        assert!(causes(&elsewhere).is_empty(), "{:?}", diagnose(&elsewhere));
        // Near-miss: one SYN of ours resent among many data retransmits is packet loss.
        let mut lossy = e.clone();
        lossy.own_syn_retransmits = Some(1);
        lossy.own_retransmits = Some(192);
        assert!(!causes(&lossy).contains(&"accept_queue_overflow".to_string()));
        // Our SYNs dropped and nothing else resent: the queue, even between samples.
        let mut syns = e.clone();
        syns.own_syn_retransmits = Some(14);
        assert_eq!(causes(&syns), vec!["accept_queue_overflow"]);
        // Python's http.server (backlog 5) seen at 4 of 5, never at 5: our SYNs resent and
        // more data resent (dropped final ACKs) is still the queue, at a pressed listener.
        let mut pressed = e.clone();
        pressed.own_syn_retransmits = Some(74);
        pressed.own_retransmits = Some(141);
        let l = pressed.listen.as_mut().unwrap();
        l.backlog = Some(5);
        l.max_queue = 4;
        assert_eq!(causes(&pressed), vec!["accept_queue_overflow"]);
        // Near-miss: the same retransmits at an idle listener are loss.
        pressed.listen.as_mut().unwrap().max_queue = 0;
        assert!(!causes(&pressed).contains(&"accept_queue_overflow".to_string()));
        // The listener seen full.
        let l = e.listen.as_mut().unwrap();
        l.full_samples = 25;
        l.max_queue = 4096;
        l.full_seconds = vec![1, 2];
        let d = diagnose(&e);
        assert_eq!(d[0].cause, Cause::AcceptQueueOverflow);
        assert_eq!(d[0].requests_affected, 14);
        assert!(
            d[0].evidence.contains("at its limit in 25 of 100 samples")
                && d[0].evidence.contains("second(s) 1, 2")
                && d[0].evidence.contains("machine-wide"),
            "{}",
            d[0].evidence
        );
        assert_eq!(
            d[0].window,
            Some(Window {
                start_s: 1.5,
                end_s: 2.52,
                open_ended: false,
            })
        );
    }

    #[test]
    fn delayed_ack_needs_split_responses() {
        let mut e = healthy();
        e.split_body_40ms = 8;
        assert!(causes(&e).is_empty(), "too few to name");
        e.split_body_40ms = 3_000;
        assert_eq!(causes(&e), vec!["delayed_ack"]);
    }

    #[test]
    fn retransmission_needs_rto_steps_and_retransmits() {
        let mut e = healthy();
        e.rto_steps = [20, 3, 0];
        assert!(
            causes(&e).is_empty(),
            "200 ms responses alone could be a slow server"
        );
        // Near-miss: segments resent machine-wide, none on our connections.
        e.tcp.as_mut().unwrap().insert("RetransSegs".into(), 25);
        assert!(causes(&e).is_empty(), "{:?}", diagnose(&e));
        e.own_retransmits = Some(25);
        assert_eq!(causes(&e), vec!["retransmission"]);
        // Near-miss: as many just below 200 ms: a spread (a stall), not RTO steps.
        e.below_rto = 30;
        assert!(causes(&e).is_empty());
    }

    #[test]
    fn server_stall_needs_many_delayed_together_on_old_connections_and_quiet_tcp() {
        let mut e = healthy();
        e.seconds[4].outliers = 60;
        e.seconds[4].max_us = 300_000;
        // Released together: every one ends at 4.40 s.
        e.slowest = stalled_slowest();
        let d = diagnose(&e);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].cause, Cause::ServerStall);
        assert_eq!(d[0].requests_affected, 60);
        assert_eq!(
            d[0].window,
            Some(Window {
                start_s: 4.1,
                end_s: 4.4,
                open_ended: false,
            })
        );
        // Near-miss: the generator's own loop was held up as long: its pause, not the server's.
        let mut own = e.clone();
        own.seconds[4].generator_lag_us = 280_000;
        assert!(causes(&own).is_empty());
        // Near-miss: a few-ms blip is not named, however many it touched.
        let mut blip = e.clone();
        blip.seconds[4].max_us = 8_000;
        assert!(causes(&blip).is_empty());
        // Near-miss: as many slow, but ending one by one (retransmit delays), is no stall.
        let mut scattered = e.clone();
        scattered.slowest = [
            (4.1, 300_000),
            (4.3, 250_000),
            (4.5, 280_000),
            (4.7, 210_000),
        ]
        .into_iter()
        .map(|(at_s, latency_us)| Slow {
            at_s,
            latency_us,
            first_on_connection: false,
            unfinished: false,
        })
        .collect();
        assert!(causes(&scattered).is_empty(), "{:?}", diagnose(&scattered));
        // Near-miss: a handful of outliers is not "most in-flight requests".
        let mut few = e.clone();
        few.seconds[4].outliers = 20;
        assert!(causes(&few).is_empty());
        // Near-miss: only new connections were slow: not a stall.
        let mut only_new = e.clone();
        only_new
            .slowest
            .iter_mut()
            .for_each(|s| s.first_on_connection = true);
        assert!(causes(&only_new).is_empty());
        // Retransmits during a stall (the stalled receiver lets RTO timers fire) do not turn
        // it into "retransmission": the requests were delayed together, not one by one.
        let mut retrans = with_machine_counter(&e, "RetransSegs", 60);
        retrans.rto_steps = [0, 0, 0];
        assert_eq!(causes(&retrans), vec!["server_stall"]);
        // Another listener on the machine overflowing does not veto this server's stall.
        let elsewhere = with_machine_counter(&e, "ListenOverflows", 178);
        assert_eq!(causes(&elsewhere), vec!["server_stall"]);
        // Its own listener full does: connection setup, not a stall.
        let mut listen = e.clone();
        listen.listen.as_mut().unwrap().full_samples = 3;
        assert!(!causes(&listen).contains(&"server_stall".to_string()));
    }

    #[test]
    fn cpu_contention_and_generator_saturation() {
        let mut e = healthy();
        e.steal_pct = Some(12.0);
        assert_eq!(causes(&e), vec!["cpu_contention"]);
        // Another process on the server's CPU: the spike is contention, not a stall.
        let mut hog = healthy();
        hog.server_foreign_pct = Some(60.0);
        hog.seconds[4].outliers = 60;
        hog.seconds[4].max_us = 20_000;
        hog.slowest = stalled_slowest();
        assert_eq!(causes(&hog), vec!["cpu_contention"]);
        hog.server_foreign_pct = Some(3.0);
        assert_eq!(
            causes(&hog),
            vec!["server_stall"],
            "the same spike without a competitor is a stall"
        );
        let mut quiet = e.clone();
        quiet.seconds.iter_mut().for_each(|s| s.outliers = 0);
        assert!(
            causes(&quiet).is_empty(),
            "steal without a tail is not a spike cause"
        );
        let mut g = healthy();
        g.server_cpus_busy_pct = Some(40.0);
        assert_eq!(causes(&g), vec!["generator_saturated"]);
        g.client_cpus_busy_pct = Some(85.0);
        assert!(causes(&g).is_empty());
    }
}
