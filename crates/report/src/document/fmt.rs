//! How the report writes numbers: percentages, CPU lists, plurals; durations, counts, rates
//! and sizes are the crate's [`tailscope_loadgen::fmt`], which the published types use too.

pub use tailscope_loadgen::fmt::{fmt_asked_rate, fmt_bytes, fmt_count, fmt_rate, fmt_us};

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
