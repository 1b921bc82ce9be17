//! Why requests failed, not only why they were slow: rules that name the cause of a run's
//! errors and error statuses (429, 502, 503, 504) with their evidence and the fix each points
//! to, read from what the generator recorded of its failures ([`FailureFacts`]: when in its
//! connection's life a request failed, after how many responses the server closed its
//! connections, what the error responses said of themselves) beside the run's seconds.
//!
//! Each rule needs its failures to be a material share of the run (at least
//! [`MIN_FAILURES`] and 1 % of the requests), so a healthy run names none.

use tailscope_loadgen::failures::FailureFacts;
use tailscope_loadgen::fmt::{fmt_count, fmt_us};
use tailscope_loadgen::recorder::Counters;
use tailscope_loadgen::{ErrorKind, TimePoint};

use crate::{Cause, Diagnosis, Evidence, Ruling, Window};

mod statuses;

use statuses::{overload_shed, rate_limited, upstream_failure};

/// Fewest failures (or error responses) a rule names a cause for.
const MIN_FAILURES: u64 = 10;
/// A failed connection younger than this failed "right after it was accepted".
const YOUNG_US: u64 = 50_000;
/// A dominant "closed after N responses" makes a keep-alive limit only where the reconnects
/// are a material share of the requests (1 in 500: nginx's default 1000 is not a problem).
const KEEPALIVE_MAX_N: u64 = 500;

/// What the error rules read: the run's failures by kind and what is known of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ErrorEvidence {
    /// Failed requests, by [`ErrorKind::index`].
    pub by_kind: [u64; ErrorKind::COUNT],
    /// Complete responses, of any status.
    pub responses: u64,
    /// Status codes and their counts.
    pub status_codes: Vec<(u16, u64)>,
    /// When in their connections' life requests failed, error statuses' headers.
    pub facts: FailureFacts,
    /// Why the first failed TLS handshake failed, in rustls' words (with what to do).
    pub tls_reason: Option<String>,
    /// The most load connections open and answered at once (sampled at each tick's end);
    /// `None` when not known.
    pub serving_peak: Option<u64>,
    /// TCP connections opened.
    pub connects: u64,
    /// Connections asked for (`-c`); 0 when not known.
    pub connections: u64,
    /// Open loop: the rate asked for.
    pub rate: Option<f64>,
    /// Mean latency of the first request on a connection, and of every request (µs).
    pub first_request_mean_us: Option<f64>,
    /// Mean latency of every response (µs).
    pub latency_mean_us: Option<f64>,
}

impl ErrorEvidence {
    /// The failures of these counters.
    pub fn of_counters(c: &Counters) -> ErrorEvidence {
        ErrorEvidence {
            by_kind: c.errors,
            responses: c.successes,
            status_codes: c.status_codes.clone(),
            facts: c.failures.clone(),
            tls_reason: c.transport.tls_failure.clone(),
            connects: c.connects,
            ..ErrorEvidence::default()
        }
    }

    fn kind(&self, k: ErrorKind) -> u64 {
        self.by_kind[k.index()]
    }

    fn total(&self) -> u64 {
        self.by_kind.iter().sum()
    }

    fn status(&self, code: u16) -> u64 {
        self.status_codes
            .iter()
            .filter(|(c, _)| *c == code)
            .map(|(_, n)| n)
            .sum()
    }
}

/// Whether `n` failures of `of` requests are material.
fn material(n: u64, of: u64) -> bool {
    n >= MIN_FAILURES && n * 100 >= of
}

fn pct(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

/// The error rules' rulings, most specific first.
pub(crate) fn rulings(e: &Evidence) -> Vec<Ruling> {
    let crash = server_crash_or_restart(e);
    let crashed = crash.is_some();
    let mut out: Vec<Ruling> = vec![
        port_exhaustion(e).into(),
        fd_limit(e).into(),
        tls_failure(e).into(),
        crash.into(),
    ];
    // Connections lost to a crash are no connection limit; connections a capped server
    // reclaims after a response or two are no keep-alive limit.
    let cap = (!crashed).then(|| connection_cap(e)).flatten();
    let capped = cap.is_some();
    out.push(cap.into());
    if !capped {
        out.push(keepalive_limit(e).into());
    }
    out.push(rate_limited(e).into());
    out.push(overload_shed(e).into());
    out.push(upstream_failure(e));
    out
}

fn diagnosis(cause: Cause, evidence: String, n: u64, window: Option<Window>) -> Diagnosis {
    Diagnosis {
        cause,
        evidence,
        requests_affected: n,
        window,
        inside: None,
        requests: Vec::new(),
    }
}

fn port_exhaustion(e: &Evidence) -> Option<Diagnosis> {
    let n = e.errors.kind(ErrorKind::NoLocalPort);
    (n > 0).then(|| {
        diagnosis(
            Cause::PortExhaustion,
            format!(
                "{} connects found no free local port (EADDRNOTAVAIL): the generator used up its ephemeral ports \
                 (sockets in TIME_WAIT after {} reconnects); fix: more source addresses (--source-addrs), keep-alive \
                 instead of reconnects, or a wider net.ipv4.ip_local_port_range",
                fmt_count(n),
                fmt_count(e.errors.facts.closed_after.iter().map(|c| c.1).sum::<u64>())
            ),
            n,
            None,
        )
    })
}

fn fd_limit(e: &Evidence) -> Option<Diagnosis> {
    let n = e.errors.kind(ErrorKind::TooManyOpenFiles);
    (n > 0).then(|| {
        diagnosis(
            Cause::FdLimit,
            format!(
                "{} connects found no free file descriptor (EMFILE/ENFILE): the generator reached its open-file \
                 limit; fix: raise it (ulimit -n), or fewer connections (-c)",
                fmt_count(n)
            ),
            n,
            None,
        )
    })
}

fn tls_failure(e: &Evidence) -> Option<Diagnosis> {
    let handshake = e.errors.kind(ErrorKind::TlsHandshake);
    let certificate = e.errors.kind(ErrorKind::Certificate);
    let n = handshake + certificate;
    if n == 0 {
        return None;
    }
    let reason = e.errors.tls_reason.as_deref().unwrap_or("reason not kept");
    let fix = if certificate > 0 {
        "fix: trust the server's CA (--cacert), check the name in the URL, or --insecure for a test server"
    } else {
        "fix: what the reason says (a TLS version, cipher or ALPN protocol both sides accept)"
    };
    Some(diagnosis(
        Cause::TlsFailure,
        format!(
            "{} TLS handshakes failed ({} refused a certificate, {} failed otherwise): {reason}; {fix}",
            fmt_count(n),
            fmt_count(certificate),
            fmt_count(handshake)
        ),
        n,
        None,
    ))
}

/// The second of the run (from 0) that point `s` covers.
fn second_of(s: &TimePoint) -> usize {
    (s.t_s.ceil() as usize).saturating_sub(1)
}

/// Responses (any status) in the seconds before second `from` and after second `to`.
fn served_around(seconds: &[TimePoint], from: usize, to: usize) -> (u64, u64) {
    let ok = |s: &&TimePoint| s.requests.saturating_sub(s.errors + s.unfinished);
    let before = seconds
        .iter()
        .filter(|s| second_of(s) < from)
        .map(|s| ok(&s))
        .sum();
    let after = seconds
        .iter()
        .filter(|s| second_of(s) > to)
        .map(|s| ok(&s))
        .sum();
    (before, after)
}

fn server_crash_or_restart(e: &Evidence) -> Option<Diagnosis> {
    let f = &e.errors.facts;
    let refused: u64 = f.refused_by_second.iter().sum();
    let Some(first) = f.refused_by_second.iter().position(|n| *n > 0) else {
        return process_lost(e);
    };
    let last = f.refused_by_second.iter().rposition(|n| *n > 0)?;
    let (before, after) = served_around(&e.seconds, first, last);
    // It served, then nothing listened: a server that was never there is no crash.
    if refused < MIN_FAILURES || before == 0 {
        return None;
    }
    // Established connections lost around the moment the listener went.
    let lost: u64 = f
        .lost_by_second
        .iter()
        .enumerate()
        .filter(|(s, _)| *s + 1 >= first && *s <= first)
        .map(|(_, n)| n)
        .sum();
    let seconds = if first == last {
        format!("in second {first}")
    } else {
        format!("in seconds {first}–{last}")
    };
    let back = if after > 0 {
        format!(
            "then it was back: {} responses after second {last}",
            fmt_count(after)
        )
    } else {
        "and it was not back by the end of the run".to_string()
    };
    let n = refused + lost;
    Some(diagnosis(
        Cause::ServerCrashOrRestart,
        format!(
            "the server served {} responses, then {} established connections were reset or closed with requests \
             in flight around second {first}, and nothing listened: {} connects refused {seconds}; {back}; \
             the server crashed or was restarted (fix: its logs and exit status; a restart drains connections \
             first)",
            fmt_count(before),
            fmt_count(lost),
            fmt_count(refused),
        ),
        n,
        Some(Window {
            start_s: first as f64,
            end_s: (last + 1) as f64,
            open_ended: after == 0,
        }),
    ))
}

/// A server process that died while its listener stayed (a worker of nginx's, respawned by
/// its master): at least half the connections the run holds cut in one second, with requests
/// in flight (reset or closed before their response) or between responses without a
/// `Connection: close` (a busy generator had read their last response and not yet written
/// the next: on a busy CI machine 6 of 8, and in another run 8 of 8), nothing refused,
/// responses after it. With no request lost, every connection must have been cut.
fn process_lost(e: &Evidence) -> Option<Diagnosis> {
    let f = &e.errors.facts;
    let at = |v: &[u64], s: usize| v.get(s).copied().unwrap_or(0);
    let len = f.lost_by_second.len().max(f.cut_by_second.len());
    let (second, cut) = (0..len)
        .map(|s| (s, at(&f.lost_by_second, s) + at(&f.cut_by_second, s)))
        .max_by_key(|(_, n)| *n)?;
    let lost = at(&f.lost_by_second, second);
    let all: u64 = f.lost_by_second.iter().chain(&f.cut_by_second).sum();
    let connections = e.errors.connections;
    // With no request lost, every connection asked for: a generator held off its CPU when
    // the worker died had read every response and written no request, so all were closed
    // between responses (CI: 8 of 8, not one error). Half of them, such closes alone could
    // be a server's own drain of some connections.
    let needed = if lost == 0 {
        connections
    } else {
        connections.div_ceil(2)
    };
    if connections < 4 || cut < 3 || cut < needed || cut * 10 < all * 8 {
        return None;
    }
    let (_, after) = served_around(&e.seconds, second, second);
    if after == 0 {
        return None;
    }
    let how = if lost == 0 {
        "every one between responses, unannounced: none had a request in flight, so none failed, \
         and each reconnected"
            .to_string()
    } else {
        format!(
            "{} reset or closed with requests in flight, {} closed between responses unannounced",
            fmt_count(lost),
            fmt_count(cut - lost)
        )
    };
    Some(diagnosis(
        Cause::ServerCrashOrRestart,
        format!(
            "{} established connections of the {} asked for (-c) were cut in second {second}, all at once \
             ({how}), while the listener stayed (nothing refused), and {} responses came after it: a server \
             process died or was replaced and another took its place (a worker crashed and was respawned, \
             or a reload replaced the workers; fix: the server's logs, its workers' exit status)",
            fmt_count(cut),
            fmt_count(connections),
            fmt_count(after)
        ),
        // The requests it cost: those lost, and the next request of each connection closed
        // between responses, which waited for a reconnect.
        cut,
        Some(Window {
            start_s: second as f64,
            end_s: (second + 1) as f64,
            open_ended: false,
        }),
    ))
}

/// How many connections the server served at once: the run's peak of those open and
/// answered, else the most at any second's end.
fn steady_open(e: &Evidence) -> Option<u64> {
    e.errors
        .serving_peak
        .or_else(|| e.seconds.iter().map(|s| s.connections.serving).max())
        .filter(|n| *n > 0)
}

fn connection_cap(e: &Evidence) -> Option<Diagnosis> {
    let f = &e.errors.facts;
    // Material among the requests, or among the connections: a capped server answers its
    // few served connections fast while the rest fail and back off (the reference server's
    // --max-conns 4 at -c 16: 0.4 % of the requests, most of the connections).
    let of_connections = f.dropped_first_on_connection * 2 >= e.errors.connects;
    if f.dropped < MIN_FAILURES
        || !(f.dropped * 100 >= e.requests || of_connections)
        || e.errors.responses == 0
    {
        return None;
    }
    let young = f.dropped_younger_than(YOUNG_US);
    // Mostly on their first request, nearly all right after the connection opened: the
    // server closed them as it accepted them (nginx short of worker_connections also
    // reclaims idle keep-alive connections after a response or two: the rest).
    let median_young = f.dropped_median_age_us().is_some_and(|a| a <= YOUNG_US);
    // On a quiet machine nginx reclaims so eagerly that fewer than half the failures are a
    // connection's first request (measured: 46 % at worker_connections 64, -c 200), but
    // 99.9 % of them come within 50 ms of the connection's opening, and it never served
    // as many connections at once as were asked for (at most 104 of 200). Young alone is
    // not enough: a fast server that drops one request in 20 on its only connections does
    // it young too, but serves every connection asked for.
    let mostly_first = f.dropped_first_on_connection * 10 >= f.dropped * 6;
    let served_fewer = match (steady_open(e), e.errors.connections) {
        (Some(s), c) if c > 0 => s * 10 < c * 9,
        _ => false,
    };
    let reclaimed = young * 100 >= f.dropped * 95 && served_fewer;
    if !(mostly_first || reclaimed) || young * 10 < f.dropped * 8 || !median_young {
        return None;
    }
    let served = steady_open(e);
    let of_c = match (served, e.errors.connections) {
        (Some(s), c) if c > 0 => format!(
            "at most {} connections at once (the most open and answered at a tick's end) of the {} asked for (-c)",
            fmt_count(s),
            fmt_count(c)
        ),
        (Some(s), _) => format!("at most {} connections at once", fmt_count(s)),
        _ => "some connections".to_string(),
    };
    let fewer = served.map_or(String::new(), |s| format!(" (-c {s} or fewer)"));
    Some(diagnosis(
        Cause::ConnectionCap,
        format!(
            "the server served {of_c} and closed or reset the rest right after accepting them: {} requests failed \
             (reset {}, eof_before_response {}), {:.0} % of them the first request on their connection, {:.0} % \
             within {} of its opening (median age ≤ {}); fix: raise the server's connection limit (nginx \
             worker_connections, a --max-conns, a pool size) or run fewer connections{fewer}",
            fmt_count(f.dropped),
            fmt_count(e.errors.kind(ErrorKind::Reset)),
            fmt_count(e.errors.kind(ErrorKind::EofBeforeResponse)),
            pct(f.dropped_first_on_connection, f.dropped),
            pct(young, f.dropped),
            fmt_us(YOUNG_US),
            fmt_us(f.dropped_median_age_us().unwrap_or(0)),
        ),
        f.dropped,
        None,
    ))
}

fn keepalive_limit(e: &Evidence) -> Option<Diagnosis> {
    let f = &e.errors.facts;
    let closes: u64 = f.closed_after.iter().map(|c| c.1).sum::<u64>() + f.closed_after_other;
    let &(n, count) = f.closed_after.iter().max_by_key(|c| c.1)?;
    // n = 1 is a server that does not keep connections alive at all (Python's http.server,
    // gunicorn's sync workers answer with Connection: close): its own design, not a limit
    // that a setting raises, and no request fails for it.
    if closes < 5 || count * 10 < closes * 8 || !(2..=KEEPALIVE_MAX_N).contains(&n) {
        return None;
    }
    let cost = match (e.errors.first_request_mean_us, e.errors.latency_mean_us) {
        (Some(first), Some(all)) => format!(
            "; the first request on a connection (its reconnect) took {} on average against {} for all",
            fmt_us(first as u64),
            fmt_us(all as u64)
        ),
        _ => String::new(),
    };
    let lost = if f.dropped_after_served > 0 {
        format!(
            "; {} requests were lost to the closes (sent as the server closed)",
            fmt_count(f.dropped_after_served)
        )
    } else {
        String::new()
    };
    Some(diagnosis(
        Cause::KeepaliveLimit,
        format!(
            "the server closed {} connections after exactly {n} responses each ({:.0} % of its {} closes): a \
             reconnect every {n} requests{cost}{lost}; fix: raise the server's keep-alive request limit (nginx \
             keepalive_requests, an app server's max requests per connection)",
            fmt_count(count),
            pct(count, closes),
            fmt_count(closes)
        ),
        count,
        None,
    ))
}

/// The line a run with errors that no rule explained says instead of "no spike cause found".
pub fn unexplained(errors: u64) -> String {
    format!("{} errors, no cause found", fmt_count(errors))
}

/// Whether a run with `errors` failed requests, diagnosed `named`, leaves them unexplained:
/// no cause that says why requests fail was named (a latency cause explains no error).
pub fn errors_unexplained(errors: u64, named: &[Diagnosis]) -> bool {
    errors > 0 && !named.iter().any(|d| d.cause.explains_errors())
}

impl Cause {
    /// Whether this cause says why requests failed (or were refused with a status), not why
    /// they were slow.
    pub fn explains_errors(self) -> bool {
        matches!(
            self,
            Cause::ConnectionCap
                | Cause::RateLimited
                | Cause::OverloadShed
                | Cause::UpstreamFailure
                | Cause::KeepaliveLimit
                | Cause::TlsFailure
                | Cause::ServerCrashOrRestart
                | Cause::PortExhaustion
                | Cause::FdLimit
        )
    }
}

impl Evidence {
    /// Errors counted, of every kind.
    pub fn error_total(&self) -> u64 {
        self.errors.total()
    }

    /// Responses of `code`.
    pub fn responses_of(&self, code: u16) -> u64 {
        self.errors.status(code)
    }
}

#[cfg(test)]
mod tests;
