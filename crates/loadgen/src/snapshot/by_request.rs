//! A mix's published figures per request name: a name's second, its live figures for the
//! dashboard, and which names the slowest requests were.

use serde::{Deserialize, Serialize};

use super::{Percentiles, SlowRequest};

/// One second of one request name of a mix: the run's [`TimePoint`](super::TimePoint) figures, for the name.
/// A name has a point for each second in which it had a request (a second without one is
/// not listed: it had none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestPoint {
    /// End of the second, as the run's point of that second (`TimePoint::t_s`).
    pub t_s: f64,
    /// Its requests finished in the second (successes, errors and unfinished).
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Of which timed out.
    pub timeouts: u64,
    /// Its median latency in the second; null when none of them got a response.
    pub p50_us: Option<u64>,
    /// Its 99th percentile (as `p50_us`).
    pub p99_us: Option<u64>,
    /// Its slowest (as `p50_us`).
    pub max_us: Option<u64>,
}

/// One request name of a mix as the run stands, for the dashboard: updated once a second,
/// when a second is finished.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestLive {
    /// The name.
    pub name: std::sync::Arc<str>,
    /// Its requests so far (successes, errors, unfinished).
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Its latency so far; `None` before it got a response.
    pub latency: Option<Percentiles>,
    /// Its requests in the latest finished second (its rate); `None` before one finished.
    pub last_second: Option<u64>,
}

/// How many of `slowest` each request name of a mix has, the commonest first (ties by
/// name); requests without a name (no mix, or not sent yet) are not counted.
pub fn count_by_request<'a>(
    slowest: impl IntoIterator<Item = &'a SlowRequest>,
) -> Vec<(&'a str, u64)> {
    let mut counts: Vec<(&str, u64)> = Vec::new();
    for name in slowest.into_iter().filter_map(|r| r.request.as_deref()) {
        match counts.iter_mut().find(|(m, _)| *m == name) {
            Some((_, k)) => *k += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts
}
