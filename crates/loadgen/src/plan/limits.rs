//! A plan's limits (each named in the message that refuses a value past it) and the parsers of
//! the values people write: durations, rates.

use std::time::Duration;

/// The most connections a plan may ask for (`-c`).
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// The most concurrent HTTP/2 streams one connection may be asked for (`--streams`).
pub const MAX_STREAMS: usize = 1024;
/// The most generator threads a plan may ask for (`--threads`).
pub const MAX_THREADS: usize = 1024;
/// The most measured requests a plan may ask for (`-n`).
pub const MAX_REQUESTS: u64 = 1_000_000_000_000;
/// The slowest open-loop rate, requests per second in total (`-q`, and the `-` key): below
/// it a slot is minutes apart and the schedule's arithmetic nears `Instant`'s range.
pub const MIN_RATE: f64 = 0.01;
/// The fastest open-loop rate, requests per second in total.
pub const MAX_RATE: f64 = 100_000_000.0;
/// The longest run and the longest warm-up (`-z`, `--warmup`): 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest request and connect timeouts (`-t`, `--connect-timeout`): 1 hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The shortest duration, warm-up aside, any of those may be.
pub const MIN_DURATION: Duration = Duration::from_millis(1);
/// Connections `--source-addrs auto` gives one source address. The default ephemeral range
/// (32768–60999) has ~28 k ports toward one destination, but connects slow down long before
/// it is full: with 18,000 connections from one loopback address to the reference server,
/// both engines' threads stalled in connects for 1.4–5 s and the held connects spilled into
/// the measured window; from 2, 3 or 4 addresses (9,000 or fewer each) they did not
/// (BENCHMARKS.md, "Idle connections beside the load").
pub const CONNS_PER_SOURCE: usize = 8_000;
/// The most source addresses a plan may name or `auto` may pick.
pub const MAX_SOURCE_ADDRS: usize = 1024;

/// The slowest `--connect-rate`: one new connection a second.
pub const MIN_CONNECT_RATE: f64 = 1.0;
/// The fastest `--connect-rate`.
pub const MAX_CONNECT_RATE: f64 = 10_000_000.0;
/// `--slow-interval`'s default: a slow connection's next header byte after this. Shorter
/// than the header timeouts servers keep by default (nginx 60 s, the reference server 10 s
/// from the first byte), so a server that holds slow clients is seen holding them.
pub const DEFAULT_SLOW_INTERVAL: Duration = Duration::from_secs(5);

/// Parses `--connect-rate`: `500/s` or `500`, new connections per second in total.
pub fn parse_connect_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let n = t.strip_suffix("/s").unwrap_or(t).trim();
    let r: f64 = n
        .parse()
        .map_err(|_| format!("{t:?} is not a rate: write connections per second, e.g. 500/s"))?;
    if !(MIN_CONNECT_RATE..=MAX_CONNECT_RATE).contains(&r) {
        return Err(format!(
            "{t} is out of range: give {MIN_CONNECT_RATE}..={MAX_CONNECT_RATE} per second"
        ));
    }
    Ok(r)
}

/// Parses a duration as people write one: `500ms`, `10s`, `2m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        let e = e.to_string();
        // humantime's words may already give examples ("time unit needed, for example
        // 10sec or 10ms"): the advice once, not twice.
        if e.contains("for example") {
            format!("{s:?}: {e}")
        } else {
            format!("{s:?}: {e}: write a number and a unit, e.g. 500ms, 10s, 2m")
        }
    })
}

/// Parses a duration and refuses one outside `lo..=hi`, naming the range.
pub fn parse_duration_within(s: &str, lo: Duration, hi: Duration) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < lo || d > hi {
        return Err(format!(
            "{} is out of range: give {}..={}",
            s.trim(),
            fmt_limit(lo),
            fmt_limit(hi)
        ));
    }
    Ok(d)
}

/// `0s`, `1ms`, `1h`, `30days`: a limit as people would write it.
pub fn fmt_limit(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
}

/// `1ms`, `10s`, `30days`: how the limits are named in messages.
pub(super) fn fmt_duration(d: Duration) -> String {
    // Whole milliseconds: a limit message has no use for nanoseconds.
    let ms = Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64);
    if ms.is_zero() && !d.is_zero() {
        return format!("{}ns", d.as_nanos());
    }
    humantime_like(ms)
}

/// A compact rendering of whole-millisecond durations (`0s`, `1ms`, `1h`, `30days`).
fn humantime_like(d: Duration) -> String {
    let ms = d.as_millis();
    const UNITS: [(u128, &str); 5] = [
        (24 * 3600 * 1000, "days"),
        (3600 * 1000, "h"),
        (60 * 1000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    if ms == 0 {
        return "0s".into();
    }
    for (unit, name) in UNITS {
        if ms % unit == 0 {
            return format!("{}{name}", ms / unit);
        }
    }
    unreachable!("every duration is a whole number of milliseconds")
}
