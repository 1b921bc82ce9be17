//! How the report writes numbers: durations, counts, rates, sizes, percentages.

/// A percentage with as many decimals as it needs to not read 0 or 100 when it is not.
pub(super) fn fmt_pct(p: f64) -> String {
    if (99.95..100.0).contains(&p) || (p > 0.0 && p < 0.05) {
        format!("{p:.3}")
    } else {
        format!("{p:.1}")
    }
}

/// `HOST:PORT` of a URL as given (`http://u:***@127.0.0.1:1/x` → `127.0.0.1:1`): where
/// connections go, without the credentials, which are no part of it.
pub(super) fn url_authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// `"s"` unless there is one.
pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// CPU numbers as `--cpus` and the kernel write them (`0-3,6`): the form the rest of the
/// output uses (targets' `format_list`; loadgen depends on no crate of ours), so one run
/// does not say "CPU 0-1" and "CPU 0,1".
pub(super) fn cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &cpu in cpus {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == cpu => *last = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    runs.iter()
        .map(|&(first, last)| match first == last {
            true => first.to_string(),
            false => format!("{first}-{last}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_lists_are_written_as_ranges() {
        assert_eq!(super::cpu_list(&[0, 1]), "0-1");
        assert_eq!(super::cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(super::cpu_list(&[5]), "5");
        assert_eq!(super::cpu_list(&[]), "");
    }
}
