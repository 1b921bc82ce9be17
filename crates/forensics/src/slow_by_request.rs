//! In a mix: which requests the slow ones were, over the run and inside a cause's window.

use serde::{Deserialize, Serialize};
use tailscope_loadgen::SlowRequest;

use crate::{Diagnosis, Window};

/// Which request of a mix some slow requests were: "93 % of the slowest were upload".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestShare {
    /// The request's name in the mix.
    pub name: String,
    /// How many of the slow requests looked at were this one.
    pub slow: u64,
    /// How many slow requests were looked at (named or not: an open-loop slot nobody sent
    /// has no name).
    pub of: u64,
    /// `slow / of`, 0..1.
    pub share: f64,
}

impl Diagnosis {
    /// Which requests its slow ones were, in words: "75 % of the 4 slowest in it were
    /// upload; the others: 1 search" (in its window; "of the run" for a cause without one,
    /// whose slow requests are the run's). None without a mix.
    pub fn requests_line(&self) -> Option<String> {
        let (top, rest) = self.requests.split_first()?;
        let scope = if self.window.is_some() {
            "in it"
        } else {
            "of the run"
        };
        let mut line = format!(
            "{:.0} % of the {} slowest {scope} were {}",
            100.0 * top.share,
            top.of,
            top.name
        );
        let mut others: Vec<String> = rest
            .iter()
            .map(|r| format!("{} {}", r.slow, r.name))
            .collect();
        let unnamed = top.of - self.requests.iter().map(|r| r.slow).sum::<u64>();
        if unnamed > 0 {
            others.push(format!("{unnamed} not sent yet"));
        }
        if !others.is_empty() {
            line.push_str(&format!("; the others: {}", others.join(", ")));
        }
        Some(line)
    }
}

/// The names of `slow` requests, the commonest first; empty when none has a name (no mix).
pub fn slow_by_request<'a>(slow: impl IntoIterator<Item = &'a SlowRequest>) -> Vec<RequestShare> {
    let slow: Vec<&SlowRequest> = slow.into_iter().collect();
    let of = slow.len() as u64;
    tailscope_loadgen::count_by_request(slow.iter().copied())
        .into_iter()
        .map(|(name, n)| RequestShare {
            name: name.to_string(),
            slow: n,
            of,
            share: n as f64 / of as f64,
        })
        .collect()
}

/// The slow requests a window held: those that were waiting at some time inside it.
pub(crate) fn in_window(
    slowest: &[SlowRequest],
    window: Option<Window>,
) -> impl Iterator<Item = &SlowRequest> {
    slowest.iter().filter(move |r| match window {
        None => true,
        Some(w) => {
            let end_s = r.at_s + r.latency_us as f64 / 1e6;
            r.at_s <= w.end_s && end_s >= w.start_s
        }
    })
}
