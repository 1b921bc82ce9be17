//! What a run knows of its failures beyond their kinds, for the rules that say why requests
//! failed (forensics' error causes): when in its connection's life a request failed, after how
//! many responses the server closed its connections, and what the error responses (429, 5xx)
//! said of themselves (their `Server`, their `Retry-After`, how long they took).
//!
//! Bounded like every counter: fixed arrays, a few entries per distinct status or close
//! count, and one entry per second of the run, never a record per request. Recorded per
//! interval by a worker and added up ([`FailureFacts::merge`]) like [`crate::Counters`].

use serde::{Deserialize, Serialize};

/// Distinct "closed after N responses" counts kept; more go to `closed_after_other`.
const CLOSED_AFTER_KEPT: usize = 16;
/// The longest `Server` / `Retry-After` value kept (longer ones are cut).
pub const TAG_LEN: usize = 40;

/// What a response head said of itself that the error rules read: its `Server` and
/// `Retry-After` values (cut to [`TAG_LEN`]). Fixed-size: parsed with every head, copied
/// without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadTag {
    server: [u8; TAG_LEN],
    server_len: u8,
    retry_after: [u8; TAG_LEN],
    retry_after_len: u8,
}

impl Default for HeadTag {
    fn default() -> Self {
        HeadTag {
            server: [0; TAG_LEN],
            server_len: 0,
            retry_after: [0; TAG_LEN],
            retry_after_len: 0,
        }
    }
}

fn keep(dst: &mut [u8; TAG_LEN], value: &[u8]) -> u8 {
    let n = value.len().min(TAG_LEN);
    dst[..n].copy_from_slice(&value[..n]);
    n as u8
}

impl HeadTag {
    /// Keeps a `Server` header's value.
    pub fn set_server(&mut self, value: &[u8]) {
        self.server_len = keep(&mut self.server, value);
    }

    /// Keeps a `Retry-After` header's value.
    pub fn set_retry_after(&mut self, value: &[u8]) {
        self.retry_after_len = keep(&mut self.retry_after, value);
    }

    /// The `Server` value, if the head had one.
    pub fn server(&self) -> Option<&[u8]> {
        (self.server_len > 0).then(|| &self.server[..usize::from(self.server_len)])
    }

    /// The `Retry-After` value, if the head had one.
    pub fn retry_after(&self) -> Option<&[u8]> {
        (self.retry_after_len > 0).then(|| &self.retry_after[..usize::from(self.retry_after_len)])
    }
}

/// Whether responses of `status` are among those the error rules read: 429 and every 5xx.
pub fn is_error_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// The responses of one error status (429, 5xx) over a run or an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusFacts {
    /// The status.
    pub status: u16,
    /// Responses.
    pub count: u64,
    /// When the first of them began, in seconds from the start of measurement.
    pub first_s: f64,
    /// When the last of them began.
    pub last_s: f64,
    /// Their time to first byte, summed (µs), for its mean.
    pub ttfb_sum_us: u64,
    /// The quickest time to first byte (µs).
    pub ttfb_min_us: u64,
    /// The slowest time to first byte (µs).
    pub ttfb_max_us: u64,
    /// The first `Server` value seen on them; `None` when they had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Of them, how many carried `Retry-After`.
    #[serde(default)]
    pub retry_after_count: u64,
    /// The first `Retry-After` value seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
}

impl StatusFacts {
    fn merge(&mut self, o: &StatusFacts) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            self.first_s = o.first_s;
            self.last_s = o.last_s;
            self.ttfb_min_us = o.ttfb_min_us;
        } else {
            self.first_s = self.first_s.min(o.first_s);
            self.last_s = self.last_s.max(o.last_s);
            self.ttfb_min_us = self.ttfb_min_us.min(o.ttfb_min_us);
        }
        self.count += o.count;
        self.ttfb_sum_us += o.ttfb_sum_us;
        self.ttfb_max_us = self.ttfb_max_us.max(o.ttfb_max_us);
        if self.server.is_none() {
            self.server.clone_from(&o.server);
        }
        self.retry_after_count += o.retry_after_count;
        if self.retry_after.is_none() {
            self.retry_after.clone_from(&o.retry_after);
        }
    }

    /// The mean time to first byte (µs).
    pub fn ttfb_mean_us(&self) -> u64 {
        self.ttfb_sum_us / self.count.max(1)
    }
}

/// What the run knows of its failures beyond their kinds (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailureFacts {
    /// Requests that failed on an open connection because the server closed or reset it
    /// (`reset`, `eof_before_response`, `truncated_body`).
    pub dropped: u64,
    /// Of `dropped`, those that were the first request on their connection.
    pub dropped_first_on_connection: u64,
    /// Of `dropped`, those whose connection had served at least one response before.
    pub dropped_after_served: u64,
    /// The connection's age when a `dropped` request failed: bucket i counts ages in
    /// [2^i, 2^(i+1)) µs (bucket 0 also holds ages under 1 µs).
    pub dropped_age_log2_us: [u64; 32],
    /// Connections the server closed gracefully (`Connection: close`, or an end of file
    /// between responses) after N responses: (N, connections), at most 16 distinct N.
    pub closed_after: Vec<(u64, u64)>,
    /// Graceful closes whose N did not fit in `closed_after`.
    pub closed_after_other: u64,
    /// `dropped` requests on connections that had served before, by second of the run
    /// (index 0: the first second): established connections the server lost.
    pub lost_by_second: Vec<u64>,
    /// Refused connects, by second of the run: nothing listening.
    pub refused_by_second: Vec<u64>,
    /// Busy connections (a response within the last second) the server closed between
    /// responses without saying so (no `Connection: close`), by second of the run: what a
    /// server process that died shows on the connections with nothing in flight at that
    /// moment (their responses were read, the next request not yet written). A keep-alive
    /// idle timeout closes only idle connections and is not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_by_second: Vec<u64>,
    /// Error responses (429, 5xx), by status, in first-seen order.
    pub statuses: Vec<StatusFacts>,
    /// The first `Server` value of a response that was not an error (the application's own,
    /// or its proxy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_server: Option<String>,
}

fn add_at(v: &mut Vec<u64>, i: usize, n: u64) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] += n;
}

impl FailureFacts {
    /// Zero, keeping the buffers.
    pub(crate) fn reset(&mut self) {
        self.dropped = 0;
        self.dropped_first_on_connection = 0;
        self.dropped_after_served = 0;
        self.dropped_age_log2_us = [0; 32];
        self.closed_after.clear();
        self.closed_after_other = 0;
        self.lost_by_second.clear();
        self.refused_by_second.clear();
        self.cut_by_second.clear();
        self.statuses.clear();
        self.ok_server = None;
    }

    /// Adds another interval's (or worker's) facts to these.
    pub(crate) fn merge(&mut self, o: &FailureFacts) {
        self.dropped += o.dropped;
        self.dropped_first_on_connection += o.dropped_first_on_connection;
        self.dropped_after_served += o.dropped_after_served;
        for (a, b) in self
            .dropped_age_log2_us
            .iter_mut()
            .zip(o.dropped_age_log2_us)
        {
            *a += b;
        }
        for &(n, c) in &o.closed_after {
            self.closed_after_n(n, c);
        }
        self.closed_after_other += o.closed_after_other;
        for (i, n) in o.lost_by_second.iter().enumerate() {
            add_at(&mut self.lost_by_second, i, *n);
        }
        for (i, n) in o.refused_by_second.iter().enumerate() {
            add_at(&mut self.refused_by_second, i, *n);
        }
        for (i, n) in o.cut_by_second.iter().enumerate() {
            add_at(&mut self.cut_by_second, i, *n);
        }
        for s in &o.statuses {
            self.status_mut(s.status).merge(s);
        }
        if self.ok_server.is_none() {
            self.ok_server.clone_from(&o.ok_server);
        }
    }

    fn status_mut(&mut self, status: u16) -> &mut StatusFacts {
        match self.statuses.iter().position(|s| s.status == status) {
            Some(i) => &mut self.statuses[i],
            None => {
                self.statuses.push(StatusFacts {
                    status,
                    ..StatusFacts::default()
                });
                self.statuses.last_mut().expect("just pushed")
            }
        }
    }

    /// The facts of one error status, if any response had it.
    pub fn status(&self, status: u16) -> Option<&StatusFacts> {
        self.statuses
            .iter()
            .find(|s| s.status == status && s.count > 0)
    }

    fn closed_after_n(&mut self, n: u64, count: u64) {
        if let Some(e) = self.closed_after.iter_mut().find(|(k, _)| *k == n) {
            e.1 += count;
        } else if self.closed_after.len() < CLOSED_AFTER_KEPT {
            self.closed_after.push((n, count));
        } else {
            self.closed_after_other += count;
        }
    }

    /// The server closed a connection gracefully after `served` responses.
    pub fn record_closed_after(&mut self, served: u64) {
        self.closed_after_n(served, 1);
    }

    /// A request failed because the server closed or reset its connection, `age_us` after
    /// the connection opened, with `served` responses on it before, `second` into the run.
    pub fn record_dropped(&mut self, age_us: u64, served: u64, first: bool, second: u64) {
        self.dropped += 1;
        self.dropped_first_on_connection += u64::from(first);
        let bucket = (64 - age_us.leading_zeros()).saturating_sub(1).min(31);
        self.dropped_age_log2_us[bucket as usize] += 1;
        if served > 0 {
            self.dropped_after_served += 1;
            add_at(&mut self.lost_by_second, second as usize, 1);
        }
    }

    /// The server closed a busy connection between responses without saying so, `second`
    /// into the run (see `cut_by_second`).
    pub fn record_cut(&mut self, second: u64) {
        add_at(&mut self.cut_by_second, second as usize, 1);
    }

    /// A connect was refused, `second` into the run.
    pub fn record_refused(&mut self, second: u64) {
        add_at(&mut self.refused_by_second, second as usize, 1);
    }

    /// A complete response of `status`, begun `at_s` into the run, its first byte `ttfb_us`
    /// after its send, its head's tag `tag`.
    pub fn record_response(&mut self, status: u16, at_s: f64, ttfb_us: u64, tag: &HeadTag) {
        if !is_error_status(status) {
            if self.ok_server.is_none() {
                self.ok_server = tag
                    .server()
                    .map(|s| String::from_utf8_lossy(s).into_owned());
            }
            return;
        }
        let s = self.status_mut(status);
        if s.count == 0 {
            s.first_s = at_s;
            s.last_s = at_s;
            s.ttfb_min_us = ttfb_us;
        } else {
            s.first_s = s.first_s.min(at_s);
            s.last_s = s.last_s.max(at_s);
            s.ttfb_min_us = s.ttfb_min_us.min(ttfb_us);
        }
        s.count += 1;
        s.ttfb_sum_us += ttfb_us;
        s.ttfb_max_us = s.ttfb_max_us.max(ttfb_us);
        if s.server.is_none() {
            s.server = tag
                .server()
                .map(|v| String::from_utf8_lossy(v).into_owned());
        }
        if let Some(r) = tag.retry_after() {
            s.retry_after_count += 1;
            if s.retry_after.is_none() {
                s.retry_after = Some(String::from_utf8_lossy(r).into_owned());
            }
        }
    }

    /// The median age of the connections of `dropped` requests when they failed, as the
    /// upper bound of its log2 bucket (µs); `None` without any.
    pub fn dropped_median_age_us(&self) -> Option<u64> {
        let total: u64 = self.dropped_age_log2_us.iter().sum();
        if total == 0 {
            return None;
        }
        let mut seen = 0;
        for (i, n) in self.dropped_age_log2_us.iter().enumerate() {
            seen += n;
            if seen * 2 >= total {
                return Some(1u64 << (i + 1));
            }
        }
        None
    }

    /// Of `dropped`, how many failed within `us` of their connection's opening (by whole
    /// log2 buckets: ages under the power of two at or above `us`).
    pub fn dropped_younger_than(&self, us: u64) -> u64 {
        let top = 64 - us.max(1).leading_zeros();
        self.dropped_age_log2_us.iter().take(top as usize).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_add_up_over_intervals() {
        let mut a = FailureFacts::default();
        let mut tag = HeadTag::default();
        tag.set_server(b"nginx/1.24.0");
        tag.set_retry_after(b"1");
        a.record_response(429, 1.5, 300, &tag);
        a.record_dropped(150, 0, true, 0);
        a.record_closed_after(100);
        let mut b = FailureFacts::default();
        b.record_response(429, 0.5, 100, &HeadTag::default());
        b.record_dropped(3_000_000, 5, false, 2);
        b.record_closed_after(100);
        b.record_refused(3);
        a.record_cut(1);
        b.record_cut(1);
        b.record_cut(2);
        a.merge(&b);
        let s = a.status(429).unwrap();
        assert_eq!((s.count, s.first_s, s.last_s), (2, 0.5, 1.5));
        assert_eq!(
            (s.ttfb_min_us, s.ttfb_max_us, s.ttfb_mean_us()),
            (100, 300, 200)
        );
        assert_eq!(s.server.as_deref(), Some("nginx/1.24.0"));
        assert_eq!(
            (s.retry_after_count, s.retry_after.as_deref()),
            (1, Some("1"))
        );
        assert_eq!(a.closed_after, vec![(100, 2)]);
        assert_eq!((a.dropped, a.dropped_first_on_connection), (2, 1));
        assert_eq!(a.lost_by_second, vec![0, 0, 1]);
        assert_eq!(a.refused_by_second, vec![0, 0, 0, 1]);
        assert_eq!(a.cut_by_second, vec![0, 2, 1]);
        assert_eq!(a.dropped_younger_than(1000), 1);
        // 150 µs is in [128, 256): the median's bound is 256.
        assert_eq!(a.dropped_median_age_us(), Some(256));
        a.reset();
        assert_eq!(a, FailureFacts::default());
    }
}
