//! How tailscope writes numbers for people: durations, counts, rates and sizes. A leaf
//! module: the published types (a slow request's phases, the held connections' warnings),
//! the report, the dashboard and the rules all write a figure the same way.

/// A duration in microseconds with the unit that reads best: `850µs`, `1.23ms`, `1.62s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// A count with thousands separators.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Requests per second with one decimal and separators.
pub fn fmt_rate(r: f64) -> String {
    format!(
        "{}.{}",
        fmt_count(r.trunc() as u64),
        ((r.fract() * 10.0).floor() as u64).min(9)
    )
}

/// Bytes in binary units.
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// A rate asked for, as given: whole above 100 req/s (`5,000`), with up to two decimals
/// below (`2.5`, `0.5`), so a slow open loop is not misstated by rounding.
pub fn fmt_asked_rate(r: f64) -> String {
    if r >= 100.0 {
        fmt_count(r.round() as u64)
    } else {
        let s = format!("{r:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
