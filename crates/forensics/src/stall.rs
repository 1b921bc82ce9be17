//! `server_stall`: many requests held at once and released together, on reused connections
//! too, while the generator kept time, the listener never filled and the server did not wait
//! for a CPU. Each veto that drops the cause says so ([`HeldBack`]).

use std::collections::BTreeSet;

use tailscope_loadgen::fmt::{fmt_count, fmt_us};
use tailscope_loadgen::{SlowRequest, TimePoint};
use tailscope_targets::seconds::seconds_list;

use crate::accept::{listener_full, listener_text, own_syn_drops, syns_at_a_pressed_listener};
use crate::{
    contended, generator_lag_while_held, held_by_generator, held_us, least_together, machine_wide,
    one_stall_can_hold, released_in, released_together, second_start, stall_shaped, window_of,
    Cause, Diagnosis, Evidence, HeldBack, Ruling, Window, MIN_STALL_US,
};

/// The machine counts as saturated, where the server's own wait for a CPU is unknown, when its
/// CPUs were this busy on average: its threads may then have waited for one as long as any
/// stall (a newcomer's URL-only run with a CPU hog on both CPUs, idle 0.5 %, named a stall
/// that `--pid` showed was a 631 ms a second wait for a CPU).
const SATURATED_PCT: f64 = 90.0;

/// A second that counts as stalled by its timeouts: many at once, at a `-t` long enough to be
/// a stall (a stall longer than -t shows as timeouts, not slow responses).
fn timed_out_second(e: &Evidence, s: &TimePoint, threshold: u64, floor: u64) -> bool {
    s.timeouts >= threshold && e.timeout_us.is_some_and(|t| t >= floor)
}

/// The seconds, as the report numbers them (`0, 2, 3`).
fn numbered(seconds: &[&TimePoint]) -> String {
    seconds_list(
        seconds
            .iter()
            .map(|s| second_start(s).max(0.0).round() as u64),
    )
}

fn held_back(why: String) -> Ruling {
    Ruling::HeldBack(HeldBack {
        cause: Cause::ServerStall,
        why,
    })
}

/// Why the server's own wait for a CPU is unknown, and what would measure it.
fn wait_unmeasured(e: &Evidence) -> &'static str {
    if e.server_profiled {
        "its threads' wait for a CPU could not be read here (no schedstat)"
    } else {
        "its threads' wait for a CPU was not measured (it is read from the server's \
         process: add --pid PID, or launch it with --target)"
    }
}

/// On a saturated machine, a hold this many times longer than the longest the generator's own
/// loop was kept waiting is no wait for a CPU: threads there were not kept off one that long.
const HOLD_PER_LAG: u64 = 4;

/// On a saturated machine, a hold shorter than this is explained by a wait for a CPU whatever
/// the generator's loops saw: a few scheduler slices beside busy loops on every CPU.
const SATURATED_HOLD_US: u64 = 100_000;

/// The longest a generator thread's event loop was held up in any second of the run: how long
/// a runnable thread on this machine could wait then (at most: the loop's own work counts).
fn longest_lag_us(e: &Evidence) -> u64 {
    e.seconds
        .iter()
        .map(|s| s.generator_lag_us)
        .max()
        .unwrap_or(0)
}

/// The machine's CPUs saturated where the server's wait for a CPU was not measured, with the
/// stall no longer than such a wait could be: its mean busy %.
fn saturated(e: &Evidence, worst_us: u64) -> Option<f64> {
    // A hog on both CPUs: generator loops held up to 40–51 ms beside 46–84 ms holds; a
    // server frozen 2 s beside loops held under 100 ms did stop by itself.
    // Nor is a hold of a few scheduler slices: with every CPU busy a runnable thread waits
    // tens of ms as a matter of course, whether or not the generator's loops happened to
    // (CI: a 21 ms hold in second 0, both CPUs 100 % busy, loops held less than a quarter).
    let explainable = (HOLD_PER_LAG * longest_lag_us(e)).max(SATURATED_HOLD_US);
    e.machine_busy_pct
        .filter(|b| *b >= SATURATED_PCT && worst_us < explainable)
}

/// Where the server's wait for a CPU was not measured: whether its CPUs or the machine's were
/// busy enough for that wait to explain the delay, said as the reason to hold back.
fn unmeasured_contention(e: &Evidence, stalled: &[&TimePoint]) -> Option<String> {
    let worst = stalled.iter().map(|s| held_us(e, s)).max().unwrap_or(0);
    let busy = if contended(e) {
        "the server's CPUs were contended (see cpu_contention)".to_string()
    } else {
        match saturated(e, worst) {
            Some(b) => format!(
                "the machine's CPUs were {b:.1} % busy (a generator thread there was kept waiting \
                 up to {})",
                fmt_us(longest_lag_us(e))
            ),
            None => return None,
        }
    };
    Some(format!(
        "in second(s) {}, requests were held up to {}, but {busy} and {}: a stall cannot be \
         told from a wait for a CPU others held",
        numbered(stalled),
        fmt_us(worst),
        wait_unmeasured(e)
    ))
}

/// When the requests of the second ending at `s.t_s` were held: from the earliest start to
/// the latest end of the slowest kept that it released, or, where none was kept, from the
/// second's start less its hold to its end (any of its requests was held within that).
fn hold_interval(e: &Evidence, s: &TimePoint) -> (f64, f64) {
    let released: Vec<&SlowRequest> = e.slowest.iter().filter(|r| released_in(s, r)).collect();
    let from = released.iter().map(|r| r.at_s).min_by(f64::total_cmp);
    let to = released
        .iter()
        .map(|r| r.at_s + r.latency_us as f64 / 1e6)
        .max_by(f64::total_cmp);
    match (from, to) {
        (Some(from), Some(to)) => (from, to),
        _ => (second_start(s) - held_us(e, s) as f64 / 1e6, s.t_s),
    }
}

/// How long the server's working thread that waited most can have waited for a CPU (s) while
/// the requests of the second ending at `s.t_s` were held. Tick by tick where followed so: of
/// each tick's wait, no more than the part of the tick the hold covers (an unpinned Node
/// server waited ~200 ms a second for the CPU the generator held while it answered, and none
/// while its event loop spun 300 ms with nothing to answer: its seconds' waits vetoed that
/// stall). Otherwise from the seconds: that second's and those the hold reaches back into (a
/// stall longer than -t held its requests through the second before its timeouts), at most
/// what it waited then.
fn waited_while_held(e: &Evidence, s: &TimePoint) -> f64 {
    let (from, to) = hold_interval(e, s);
    if !e.server_waits.is_empty() {
        return e
            .server_waits
            .iter()
            .map(|w| {
                w.waited_s
                    .min((w.to_s.min(to) - w.from_s.max(from)).max(0.0))
            })
            .sum();
    }
    let end = second_start(s) as u64;
    let begin = (second_start(s) - held_us(e, s) as f64 / 1e6)
        .floor()
        .max(0.0) as u64;
    e.server_run_queue_s
        .range(begin..=end)
        .map(|(_, w)| w)
        .sum()
}

/// Why a stall whose seconds a generator thread's lag explains is held back.
fn held_by_the_generator(e: &Evidence, generators: &[&TimePoint]) -> String {
    let lag = generators
        .iter()
        .map(|s| generator_lag_while_held(e, s))
        .max()
        .unwrap_or(0);
    // On a saturated machine with the server's wait unmeasured, the generator's lag is one
    // symptom of it: say the whole of it, and what to add (CI: hogs on every CPU held a
    // generator loop 10 ms beside a 20 ms hold, and the note said only "the generator").
    if e.server_run_queue_s.is_empty() {
        if let Some(why) = unmeasured_contention(e, generators) {
            return format!(
                "{why}; a generator thread's event loop was held up to {} around them too",
                fmt_us(lag)
            );
        }
    }
    format!(
        "in second(s) {}, requests were held together, but a generator thread's event loop was \
         itself held up to {} around them, at least half as long: the generator may have held \
         them (see generator_saturated where that lag reaches 100 ms)",
        numbered(generators),
        fmt_us(lag)
    )
}

/// Stalled seconds split in two: those a wait for a CPU does not explain, and those it does.
type Split<'a> = (Vec<&'a TimePoint>, Vec<&'a TimePoint>);

/// The stalled seconds that a wait for a CPU does not explain, and those it does; or why the
/// stall is held back. A server that waited for a CPU others held did not stop by itself.
/// Where the scheduler says how long its threads waited on a run queue, a second explained by
/// that wait is not a stall (a blocked, sleeping or stopped server does not wait there,
/// however busy the machine); the seconds it does not explain still are: a Node server's
/// warm-up second (V8 compiling, its thread waiting 13 ms beside 26 ms responses) vetoed the
/// 300 ms event-loop stalls of every later second. Without that wait, CPUs that others kept
/// busy, or a saturated machine, leave a stall and a wait for a CPU indistinguishable.
fn not_waiting<'a>(e: &Evidence, stalled: Vec<&'a TimePoint>) -> Result<Split<'a>, String> {
    if e.server_run_queue_s.is_empty() {
        return match unmeasured_contention(e, &stalled) {
            Some(why) => Err(why),
            None => Ok((stalled, Vec::new())),
        };
    }
    let (free, waited): (Vec<&TimePoint>, Vec<&TimePoint>) = stalled
        .into_iter()
        .partition(|s| waited_while_held(e, s) * 1e6 < held_us(e, s) as f64 * 0.5);
    if !free.is_empty() {
        return Ok((free, waited));
    }
    let wait = waited
        .iter()
        .map(|s| waited_while_held(e, s))
        .fold(0.0, f64::max);
    // No pointer to cpu_contention here: its own rule (a share of the whole run) may not fire
    // on a few seconds' waits, and a newcomer found "(see cpu_contention)" with no such cause.
    Err(format!(
        "in second(s) {}, requests were held up to {}, and a server thread waited up to {:.0} ms \
         for a CPU while they were held (schedstat), at least half as long: others held its CPU, \
         it did not stop by itself",
        numbered(&waited),
        fmt_us(waited.iter().map(|s| held_us(e, s)).max().unwrap_or(0)),
        wait * 1e3
    ))
}

/// What a stall held: its seconds, those a wait for a CPU explained, the slowest requests
/// in them, and how many at once made it one.
struct Stalled<'a> {
    stalled: Vec<&'a TimePoint>,
    waited: Vec<&'a TimePoint>,
    slow: Vec<&'a SlowRequest>,
    threshold: u64,
}

/// `server_stall`, and the seconds of the run it held its requests in (empty unless named):
/// those its stack comparison reads ([`crate::Verdict::stalled_seconds`]).
pub(crate) fn server_stall(e: &Evidence) -> (Ruling, BTreeSet<u32>) {
    match stalled(e) {
        Ok(s) => (
            Ruling::Named(named(e, &s.stalled, &s.waited, &s.slow, s.threshold)),
            // With the seconds a wait for a CPU was left to explain: the server did the same
            // in them, and compared as the others' they hid its burn on a loaded machine.
            held_seconds(e, s.stalled.iter().chain(&s.waited)),
        ),
        Err(ruling) => (ruling, BTreeSet::new()),
    }
}

/// The seconds of the run (0-based, as the stacks count them) that the stalled seconds held
/// their requests in (those a wait for a CPU explained too): each stalled second, and those
/// before it back to the start of its hold (a 600 ms stall from 1.53 s is released in second 2, and held the server in 1).
fn held_seconds<'a>(
    e: &Evidence,
    stalled: impl Iterator<Item = &'a &'a TimePoint>,
) -> BTreeSet<u32> {
    let mut seconds = BTreeSet::new();
    for s in stalled {
        let last = second_start(s).max(0.0) as u32;
        let first = (hold_interval(e, s).0.max(0.0).floor() as u32).min(last);
        seconds.extend(first..=last);
    }
    seconds
}

/// The stall's seconds and what they held, or the ruling where none is named (absent, or
/// held back by a veto, which says why).
fn stalled(e: &Evidence) -> Result<Stalled<'_>, Ruling> {
    // At -c 1 (one request in flight, no pipelining) nothing tells a stall from any other
    // slow response: no two are ever held, let alone released, together. The thresholds
    // below floor at 2 for -c 2, which let -c 1 name a stall "of all of the 1 that can be in
    // flight" from evidence no run there gives.
    if e.in_flight == 1 {
        return Err(Ruling::Absent);
    }
    // Half of what can be in flight, and at least 5 (a few slow ones are scattered delays),
    // but never more than can be in flight: below -c 5 the rule could not be met (a stall
    // of the embedded server at -c 2..4 was never named); there the stall must hold them all.
    let threshold = (e.in_flight / 2).max(5).min(e.in_flight.max(2));
    let floor = MIN_STALL_US.max(e.p50_us.unwrap_or(0) * 20);
    // Many delayed at once, by a lot.
    // A stall longer than -t shows as timeouts, not slow responses (a newcomer's 2 s SIGSTOP
    // of nginx under -t 1s: 16 timeouts and nothing named): they count as held too.
    let signature: Vec<&TimePoint> = e
        .seconds
        .iter()
        .filter(|s| {
            let slow = s.outliers >= threshold && s.max_us >= floor;
            slow || timed_out_second(e, s, threshold, floor)
        })
        .collect();
    if signature.is_empty() {
        return Err(Ruling::Absent);
    }
    // ... while the generator's own loop kept time: a pause the generator took itself would
    // delay every response just the same.
    let (stalled, generators): (Vec<&TimePoint>, Vec<&TimePoint>) =
        signature.iter().partition(|s| !held_by_generator(e, s));
    if stalled.is_empty() {
        return Err(held_back(held_by_the_generator(e, &generators)));
    }
    let (stalled, waited) = match not_waiting(e, stalled) {
        Ok(split) => split,
        Err(why) => return Err(held_back(why)),
    };
    // The target's own listener full, or our own SYNs dropped, point at connection setup
    // instead. (The machine-wide ListenOverflows moves for every listener on the machine:
    // another busy server's leftovers must not veto this one's stall.) Retransmits do not
    // veto: measured here, a 250 ms stall of the io_uring server moved RetransSegs and
    // TCPTimeouts by about the number of requests it held (+45..+69) with nothing else wrong.
    // What tells a stall from retransmission is timing: many at the same moment.
    if listener_full(e) || own_syn_drops(e) > 0 || syns_at_a_pressed_listener(e) {
        return Err(held_back(format!(
            "in second(s) {}, requests were held together, but connections were being set up \
             through a full accept queue ({}; our SYNs resent: {}): see accept_queue_overflow",
            numbered(&stalled),
            listener_text(e),
            e.own_syn_retransmits.map_or("n/a".into(), fmt_count)
        )));
    }
    // Seconds that qualified by their timeouts, not one stray timeout in a second of slow
    // responses (a review finding: that one let all-new-connection seconds past the veto).
    let stalled_by_timeouts = stalled
        .iter()
        .any(|s| timed_out_second(e, s, threshold, floor));
    // Old connections were delayed too: not a connection-setup problem.
    let in_window = |s: &&SlowRequest| {
        stalled
            .iter()
            .any(|sec| s.at_s <= sec.t_s && s.at_s + s.latency_us as f64 / 1e6 >= second_start(sec))
    };
    let slow: Vec<&SlowRequest> = e.slowest.iter().filter(in_window).collect();
    // Requests that timed out waited on open connections (a connect that does not finish is
    // a connect_timeout): after a timeout closed its connection, the next request is first
    // on a new one and times out too, so the slowest list can be all new connections.
    // That says something only where new connections are rare enough for it to be unlikely
    // by chance: against a server that closes after every response (Python's http.server,
    // `--no-keepalive`) every request is first on its connection, stalled or not.
    if !stalled_by_timeouts
        && !slow.is_empty()
        && slow.iter().all(|s| s.first_on_connection)
        && all_new_is_telling(e, slow.len())
    {
        return Err(held_back(format!(
            "in second(s) {}, requests were held, but all {} of the slowest kept in them were the \
             first on a new connection: connection setup, not a stalled server",
            numbered(&stalled),
            slow.len()
        )));
    }
    // Many slow requests in a second is not enough (scattered retransmit delays add up too):
    // a stall releases what it held at one moment.
    let (least, of) = (least_together(e), one_stall_can_hold(e));
    if !stall_shaped(e, least, of) {
        return Err(held_back(format!(
            "in second(s) {}, many requests were slow, but at most {} of the {} slowest kept ended \
             at the same moment (a stall releases what it held at once: {} needed, and half of {}): \
             delays that end one by one",
            numbered(&stalled),
            released_together(&e.slowest),
            e.slowest.len(),
            least,
            of
        )));
    }
    Ok(Stalled {
        stalled,
        waited,
        slow,
        threshold,
    })
}

/// The stall named: the stalled seconds, what they held, and the seconds left out because a
/// wait for a CPU explained them.
fn named(
    e: &Evidence,
    stalled: &[&TimePoint],
    waited: &[&TimePoint],
    slow: &[&SlowRequest],
    threshold: u64,
) -> Diagnosis {
    let affected: u64 = stalled.iter().map(|s| s.outliers + s.timeouts).sum();
    let timed_out: u64 = stalled.iter().map(|s| s.timeouts).sum();
    let worst = stalled.iter().map(|s| held_us(e, s)).max().unwrap_or(0);
    let timeouts = match (timed_out, e.timeout_us) {
        (n, Some(t)) if n > 0 => {
            format!("{} timed out at -t {}; ", fmt_count(n), fmt_us(t))
        }
        _ => String::new(),
    };
    let window = window_of(slow.iter().copied()).or(Some(Window {
        start_s: second_start(stalled[0]),
        end_s: stalled[stalled.len() - 1].t_s,
        open_ended: false,
    }));
    let left_out = if waited.is_empty() {
        String::new()
    } else {
        format!(
            " (second(s) {} left out: a server thread waited for a CPU at least half as long as \
             their requests were held)",
            numbered(waited)
        )
    };
    Diagnosis {
        cause: Cause::ServerStall,
        evidence: format!(
            "in second(s) {1}{9}, at least {5} requests at once ({8} the {2} that can be in flight) were held \
             together, up to {0} ms, on reused connections too, and {6} requests in those seconds took 10× the median \
             or more or timed out ({7}the stall and the backlog it left), while the listen queue never filled ({3}; {4}): the server stopped \
             running for a while (a GC pause, a blocking call, a stalled event loop)",
            worst / 1000,
            numbered(stalled),
            fmt_count(e.in_flight),
            listener_text(e),
            machine_wide(e, &["ListenOverflows", "ListenDrops", "RetransSegs"]),
            fmt_count(threshold),
            fmt_count(affected),
            timeouts,
            if threshold >= e.in_flight {
                "all of"
            } else {
                "about half of"
            },
            left_out
        ),
        requests_affected: affected,
        window,
        inside: None,
        requests: Vec::new(),
    }
}

/// Whether `k` slowest requests all being first on a new connection points at connection
/// setup: it would happen by chance with probability f^k, f the run's share of requests that
/// were first on their connection (connects over requests); telling below 1 %.
fn all_new_is_telling(e: &Evidence, k: usize) -> bool {
    if e.requests == 0 {
        return true;
    }
    let share = (e.errors.connects as f64 / e.requests as f64).min(1.0);
    share.powi(k.min(i32::MAX as usize) as i32) < 0.01
}
