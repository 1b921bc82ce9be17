//! `accept_queue_overflow`: the target's listen queue at its limit, told by new connections
//! that waited for SYN retransmits or gave up connecting, and the listener's own queue (or our
//! own SYN retransmits) as the evidence.

use tailscope_loadgen::fmt::{fmt_count, fmt_us};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::seconds::seconds_list;

use crate::{machine_wide, window_of, Cause, Diagnosis, Evidence, Window};

/// The watched listeners, when they could be sampled.
fn watched(e: &Evidence) -> Option<&ListenReport> {
    e.listen.as_ref().filter(|l| l.samples > 0)
}

/// Whether the target's own listener was seen at its limit.
pub(crate) fn listener_full(e: &Evidence) -> bool {
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
pub(crate) fn syns_at_a_pressed_listener(e: &Evidence) -> bool {
    listener_pressed(e) && e.own_syn_retransmits.unwrap_or(0) > 0
}

/// Our own SYN retransmits that point at dropped handshakes rather than packet loss: data
/// retransmits do not outnumber them (measured with 5 % loss: one lost SYN beside 191
/// resent data segments).
pub(crate) fn own_syn_drops(e: &Evidence) -> u64 {
    let syn = e.own_syn_retransmits.unwrap_or(0);
    if syn > 0 && e.own_retransmits.unwrap_or(0) <= syn {
        syn
    } else {
        0
    }
}

pub(crate) fn listener_text(e: &Evidence) -> String {
    match (watched(e), e.listen.as_ref()) {
        (Some(l), _) => format!(
            "the target's listener ({} socket{} on port {}, backlog {}) was at its limit in {} of {} samples, longest queue {}",
            l.sockets,
            if l.sockets == 1 { "" } else { "s" },
            l.port,
            l.backlog.map_or("n/a".into(), |b| fmt_count(b.into())),
            fmt_count(l.full_samples),
            fmt_count(l.samples),
            fmt_count(l.max_queue.into())
        ),
        (None, Some(l)) => format!(
            "the target's listener could not be watched ({})",
            l.unavailable.as_deref().unwrap_or("not found")
        ),
        (None, None) => "the target's listener was not watched".into(),
    }
}

/// The share of samples (in tenths) from which a listener at its limit means the server was
/// not taking connections off its queue at all, rather than too slowly for a burst.
const NOT_ACCEPTING_TENTHS: u64 = 9;

pub(crate) fn accept_queue_overflow(e: &Evidence) -> Option<Diagnosis> {
    // The specific evidence is the target's own listener at its limit; where it cannot be
    // watched (or the queue filled between samples), our own connections' SYN retransmits
    // (a full queue drops SYNs) when data retransmits do not outnumber them.
    let overflowed = listener_full(e) || own_syn_drops(e) > 0 || syns_at_a_pressed_listener(e);
    let slow_new: u64 = if overflowed {
        e.counts.new_connection_syn_steps.iter().sum()
    } else {
        0
    };
    // Connects that gave up count only beside the listener itself seen at its limit: a
    // connect times out for many other reasons (a firewall dropping SYNs, a host gone). A
    // server that stops accepting shows nothing else: no response ever comes back to be slow
    // (a newcomer's listen(0) never accepted: at its limit in 31 of 31 samples, ListenOverflows
    // +22, and "no spike cause found").
    let gave_up = if listener_full(e) {
        e.connect_timeouts
    } else {
        0
    };
    if slow_new == 0 && gave_up == 0 {
        return None;
    }
    let window = window_of(
        e.slowest
            .iter()
            .filter(|s| s.first_on_connection && s.latency_us >= 900_000),
    )
    .or_else(|| full_window(e));
    let full_seconds =
        watched(e)
            .filter(|l| !l.full_seconds.is_empty())
            .map_or(String::new(), |l| {
                let secs = seconds_list(l.full_seconds.iter().copied());
                format!(" (full in second(s) {secs})")
            });
    let mut signature = Vec::new();
    if slow_new > 0 {
        let [s1, s3, s7] = e.counts.new_connection_syn_steps;
        signature.push(format!(
            "{} requests on new connections took ~1 s ({}), ~3 s ({}) or ~7 s ({}): SYN or handshake retransmits",
            fmt_count(slow_new),
            fmt_count(s1),
            fmt_count(s3),
            fmt_count(s7),
        ));
    }
    if gave_up > 0 {
        signature.push(format!(
            "{} connects timed out{}: handshakes the full queue dropped",
            fmt_count(gave_up),
            e.connect_timeout_us.map_or(String::new(), |t| format!(
                " (--connect-timeout {})",
                fmt_us(t)
            ))
        ));
    }
    Some(Diagnosis {
        cause: Cause::AcceptQueueOverflow,
        evidence: format!(
            "{} after the listen queue overflowed: {}{full_seconds}; {} ({}); {}",
            signature.join("; "),
            listener_text(e),
            // Unread is said as such, not put where a count goes ("retransmitted n/a SYNs").
            e.own_syn_retransmits.map_or(
                "our connections' SYN retransmits are unknown (no TCP_INFO read)".into(),
                |n| format!("our connections retransmitted {} SYNs", fmt_count(n))
            ),
            machine_wide(e, &["ListenOverflows", "ListenDrops", "TCPSynRetrans"]),
            if not_accepting(e) {
                "a queue at its limit in nearly every sample is a server that is not accepting \
                 (it stopped calling accept(2), or is stuck before it): a larger backlog would only \
                 fill too"
            } else {
                "raise the backlog (listen(2), net.core.somaxconn) or accept faster"
            }
        ),
        requests_affected: slow_new + gave_up,
        window,
        inside: None,
        requests: Vec::new(),
    })
}

/// Whether the target's listener was at its limit in nearly every sample.
fn not_accepting(e: &Evidence) -> bool {
    watched(e).is_some_and(|l| l.full_samples * 10 >= l.samples * NOT_ACCEPTING_TENTHS)
}

/// From the first second the listener was seen full to the end of the last.
fn full_window(e: &Evidence) -> Option<Window> {
    let seconds = &watched(e)?.full_seconds;
    Some(Window {
        start_s: *seconds.first()? as f64,
        end_s: (*seconds.last()? + 1) as f64,
        open_ended: false,
    })
}
