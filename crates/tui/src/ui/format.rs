//! Every number the dashboard prints goes through here, so one value always reads the same
//! in every panel (and the same as in the summary, whose formatters these are).

pub use tailscope_loadgen::fmt::{fmt_count, fmt_us};

/// A rate with an SI suffix: `950`, `12.3k`, `1.88M`.
pub fn fmt_si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A CPU list as the command line writes it (`0-3,6`), or `any` when nothing is pinned.
pub fn fmt_cpus(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "any".into();
    }
    tailscope_targets::cpus::format_list(cpus)
}

/// Seconds with `decimals` decimals and the unit glued on, as [`fmt_us`] writes them:
/// `2.00s`, `4s`.
pub fn fmt_secs(s: f64, decimals: usize) -> String {
    format!("{s:.decimals$}s")
}

/// A measured value with `decimals` decimals, or `n/a` where it could not be measured
/// (never a made-up zero).
pub fn fmt_or_na(v: Option<f64>, decimals: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.decimals$}"))
}
