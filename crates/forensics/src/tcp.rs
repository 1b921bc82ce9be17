//! The TCP rules: delayed ACK (a body split across segments waits ~40 ms) and
//! retransmission, with the TCP counters they cite (ours, and the machine's labelled as such).

use tailscope_loadgen::fmt::fmt_count;

use crate::{stall_shaped, Cause, Diagnosis, Evidence};

fn tcp(e: &Evidence, name: &str) -> i64 {
    e.tcp
        .as_ref()
        .and_then(|t| t.get(name).copied())
        .unwrap_or(0)
}

/// A counter's change with thousands separators (`+19,888` reads at a glance).
fn fmt_delta(d: i64) -> String {
    let n = fmt_count(d.unsigned_abs());
    if d < 0 {
        format!("-{n}")
    } else {
        n
    }
}

fn tcp_list(e: &Evidence, names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n} +{}", fmt_delta(tcp(e, n))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The machine-wide counters as a labelled aside.
pub(crate) fn machine_wide(e: &Evidence, names: &[&str]) -> String {
    if e.tcp.is_some() {
        format!("machine-wide, all sockets: {}", tcp_list(e, names))
    } else {
        "machine-wide counters unreadable".into()
    }
}

pub(crate) fn delayed_ack(e: &Evidence) -> Option<Diagnosis> {
    let n = e.counts.split_body_40ms;
    if n < 10 || (n as f64) < 0.01 * e.requests as f64 {
        return None;
    }
    Some(Diagnosis {
        cause: Cause::DelayedAck,
        evidence: format!(
            "{} responses ({:.1} %) arrived in two parts, the body 38–60 ms after the head: the server writes head and body \
             separately with Nagle on, and the second write waits for the client's delayed ACK (40 ms); fix: TCP_NODELAY or one write",
            fmt_count(n),
            100.0 * n as f64 / e.requests.max(1) as f64
        ),
        requests_affected: n,
        window: None,
        inside: None,
        requests: Vec::new(),
    })
}

pub(crate) fn retransmission(e: &Evidence) -> Option<Diagnosis> {
    let n: u64 = e.counts.rto_steps.iter().sum();
    // Segments our own connections actually resent. A timer firing is no evidence: an
    // application that stops reading for longer than the minimum RTO makes retransmit timers
    // fire with nothing lost (seen here: a 250 ms stall, TCPTimeouts +32, RetransSegs +0).
    let resent = e.own_retransmits.unwrap_or(0);
    // Steps, not a spread: a stall in open loop delays requests by every amount up to its
    // length, RTOs by ~200 ms and its doublings.
    if n < 3 || resent == 0 || n < 3 * e.counts.below_rto {
        return None;
    }
    // Released at the same moment is a stall's signature; RTO delays end one by one. Half of
    // the slowest kept, not of what can be in flight: at -c 4 three RTO delays that happen
    // to end within 10 ms of each other would otherwise veto (server_stall's cap is for a
    // stall that holds no more than can be in flight; losses are not bounded by it).
    if stall_shaped(e, 3, e.slowest.len()) {
        return None;
    }
    let [r2, r4, r8] = e.counts.rto_steps;
    Some(Diagnosis {
        cause: Cause::Retransmission,
        evidence: format!(
            "{} responses took ~200 ms ({}), ~400 ms ({}) or ~800 ms ({}): the minimum RTO and its back-off, while \
             our own connections retransmitted {} segments (TCP_INFO; {}): segments were lost and resent",
            fmt_count(n),
            fmt_count(r2),
            fmt_count(r4),
            fmt_count(r8),
            fmt_count(resent),
            machine_wide(e, &["RetransSegs", "TCPTimeouts", "TCPLossProbes"])
        ),
        requests_affected: n,
        window: None,
        inside: None,
        requests: Vec::new(),
    })
}
