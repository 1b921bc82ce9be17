//! The rules for error statuses: 429 (rate limited), 503 (load shed) and 502/504 (a proxy's
//! upstream failed), each with what the responses said of themselves.

use tailscope_loadgen::failures::StatusFacts;
use tailscope_loadgen::fmt::{fmt_count, fmt_us};

use super::{diagnosis, material, pct, second_of};
use crate::{Cause, Diagnosis, Evidence, HeldBack, Ruling, Window};

/// The rate requests were offered at when responses of `s` began: open loop's rate, or the
/// requests of the second they began in.
fn offered_when(e: &Evidence, s: &StatusFacts) -> String {
    if let Some(r) = e.errors.rate {
        return format!("at the offered rate of {r:.0} req/s (open loop)");
    }
    let second = s.first_s.floor() as usize;
    match e.seconds.iter().find(|p| second_of(p) == second) {
        Some(p) => format!(
            "in second {second}, at {} requests that second (closed loop)",
            fmt_count(p.requests)
        ),
        None => format!("in second {second}"),
    }
}

fn status_window(s: &StatusFacts) -> Window {
    Window {
        start_s: s.first_s,
        end_s: s.last_s,
        open_ended: false,
    }
}

fn headers_of(s: &StatusFacts) -> String {
    let server = s
        .server
        .as_deref()
        .map_or("no Server header".to_string(), |v| format!("Server: {v}"));
    let retry = match &s.retry_after {
        Some(r) => format!(
            ", Retry-After: {r} on {} of them",
            fmt_count(s.retry_after_count)
        ),
        None => ", no Retry-After".to_string(),
    };
    format!("{server}{retry}")
}

pub(super) fn rate_limited(e: &Evidence) -> Option<Diagnosis> {
    let s = e.errors.facts.status(429)?;
    if !material(s.count, e.requests) {
        return None;
    }
    Some(diagnosis(
        Cause::RateLimited,
        format!(
            "{} responses ({:.1} %) were 429 Too Many Requests ({}), from {:.2} s {}: the server limits the request \
             rate; fix: stay under its limit (a lower -q, honour Retry-After) or raise it (nginx limit_req rate and \
             burst)",
            fmt_count(s.count),
            pct(s.count, e.requests),
            headers_of(s),
            s.first_s,
            offered_when(e, s)
        ),
        s.count,
        Some(status_window(s)),
    ))
}

pub(super) fn overload_shed(e: &Evidence) -> Option<Diagnosis> {
    let s = e.errors.facts.status(503)?;
    if !material(s.count, e.requests) {
        return None;
    }
    Some(diagnosis(
        Cause::OverloadShed,
        format!(
            "{} responses ({:.1} %) were 503 Service Unavailable ({}), answered in {} on average, from {:.2} s {}: \
             the server (or its proxy) shed load it would not queue; fix: a lower rate, more capacity, or a higher \
             limit (nginx limit_req / limit_conn, a queue or pool size)",
            fmt_count(s.count),
            pct(s.count, e.requests),
            headers_of(s),
            fmt_us(s.ttfb_mean_us()),
            s.first_s,
            offered_when(e, s)
        ),
        s.count,
        Some(status_window(s)),
    ))
}

/// `Server` values of reverse proxies and load balancers.
const PROXIES: [&str; 12] = [
    "nginx",
    "openresty",
    "envoy",
    "haproxy",
    "caddy",
    "traefik",
    "cloudflare",
    "awselb",
    "varnish",
    "apache",
    "httpd",
    "tengine",
];

fn is_proxy(server: &str) -> bool {
    let s = server.to_ascii_lowercase();
    PROXIES.iter().any(|p| s.starts_with(p))
}

/// Why the 502/504 responses `s` are a proxy's own answer, if they are.
fn proxy_sign(e: &Evidence, s: &StatusFacts) -> Option<String> {
    let ok = e.errors.facts.ok_server.as_deref();
    match s.server.as_deref() {
        Some(v) if is_proxy(v) => Some(format!("Server: {v}, a proxy")),
        Some(v) if ok.is_some_and(|o| o != v) => Some(format!(
            "Server: {v}, not the application's {}",
            ok.unwrap_or_default()
        )),
        _ => None,
    }
}

pub(super) fn upstream_failure(e: &Evidence) -> Ruling {
    let f = &e.errors.facts;
    let (bad, timeout) = (f.status(502), f.status(504));
    let total = bad.map_or(0, |s| s.count) + timeout.map_or(0, |s| s.count);
    if !material(total, e.requests) {
        return Ruling::Absent;
    }
    let mut parts = Vec::new();
    let mut signs = Vec::new();
    if let Some(s) = bad {
        parts.push(format!(
            "{} were 502 Bad Gateway, answered in {} on average (the upstream refused or dropped the proxy's \
             connection)",
            fmt_count(s.count),
            fmt_us(s.ttfb_mean_us())
        ));
        signs.extend(proxy_sign(e, s));
    }
    if let Some(s) = timeout {
        // A proxy's time-out answers after the same wait every time.
        let steady = s.ttfb_min_us * 10 >= s.ttfb_max_us * 8 && s.ttfb_min_us >= 1_000;
        parts.push(format!(
            "{} were 504 Gateway Timeout, answered after {}–{} (the proxy's upstream time-out{})",
            fmt_count(s.count),
            fmt_us(s.ttfb_min_us),
            fmt_us(s.ttfb_max_us),
            if steady {
                ", the same wait each time"
            } else {
                ""
            }
        ));
        signs.extend(proxy_sign(e, s));
        if steady && signs.is_empty() {
            signs.push(format!(
                "every 504 after the same {}, a time-out's",
                fmt_us(s.ttfb_min_us)
            ));
        }
    }
    if signs.is_empty() {
        return Ruling::HeldBack(HeldBack {
            cause: Cause::UpstreamFailure,
            why: format!(
                "{} responses were 502/504, but nothing shows a proxy answered them (their Server header is the \
                 application's own, or missing, and no time-out's steady wait): the application's own errors",
                fmt_count(total)
            ),
        });
    }
    signs.dedup();
    let first = bad
        .iter()
        .chain(timeout.iter())
        .map(|s| s.first_s)
        .fold(f64::MAX, f64::min);
    let last = bad
        .iter()
        .chain(timeout.iter())
        .map(|s| s.last_s)
        .fold(0.0, f64::max);
    Ruling::Named(diagnosis(
        Cause::UpstreamFailure,
        format!(
            "{} responses ({:.1} %) came from a proxy whose upstream failed ({}): {}; fix: the upstream (is it up, \
             listening where the proxy points, fast enough for the proxy's time-out: nginx proxy_pass, \
             proxy_read_timeout)",
            fmt_count(total),
            pct(total, e.requests),
            signs.join("; "),
            parts.join("; ")
        ),
        total,
        Some(Window {
            start_s: first,
            end_s: last,
            open_ended: false,
        }),
    ))
}
