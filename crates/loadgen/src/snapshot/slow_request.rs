//! One of the slowest requests of a run, kept with where its time went, and what an
//! unfinished one was still waiting for.

use serde::{Deserialize, Serialize};

use crate::error::ErrorKind;

/// One of the slowest requests of a run, with where its time went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SlowRequest {
    /// Seconds from the start of measurement to when the request began.
    pub at_s: f64,
    /// Total latency (as counted in the report).
    pub latency_us: u64,
    /// From the write to the first response byte.
    pub ttfb_us: u64,
    /// From the first to the last response byte.
    pub body_us: u64,
    /// The TCP handshake, when this request waited for its connection to open (it opened
    /// it, or was sent in that connection's first batch).
    pub connect_us: Option<u64>,
    /// The TLS handshake, likewise (https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_us: Option<u64>,
    /// Open loop: how long after its intended time the request actually left.
    pub queued_us: Option<u64>,
    /// The first request on its connection.
    pub first_on_connection: bool,
    /// Connection number within its worker.
    pub conn: u64,
    /// Generator thread.
    pub worker: usize,
    /// Status code, or none when the request failed.
    pub status: Option<u16>,
    /// The failure kind, when it failed.
    pub error: Option<ErrorKind>,
    /// Still unfinished when the run ended: `latency_us` is how long it had waited by then,
    /// a lower bound of its latency.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
    /// For an unfinished request, what it was waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Segments its connection had retransmitted when it ended (from TCP_INFO; SYNs
    /// included); null when not read. For one on the wire under 1 ms (slow from waiting to be
    /// sent), the connection's last read, up to 1 s before, serves: nothing on the wire
    /// slowed it.
    #[serde(default)]
    pub retransmits: Option<u32>,
    /// Its connection's smoothed RTT then (µs; the same read as `retransmits`).
    #[serde(default)]
    pub rtt_us: Option<u32>,
    /// Its connection's retransmission timeout then (µs): above the 200 ms minimum after a
    /// timeout fired.
    #[serde(default)]
    pub rto_us: Option<u32>,
    /// The name of its request in a mix (absent for a single request); shared with the
    /// mix's own, so that a worker naming a slow request allocates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<std::sync::Arc<str>>,
}

/// What an unfinished request was waiting for when the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Open loop: its slot fell due but no connection was free to send it.
    NotSent,
    /// Its connection's TCP handshake.
    Connecting,
    /// Its request bytes to be taken by the server (a full socket buffer).
    Sending,
    /// Its response (or the rest of it).
    Response,
}

impl SlowRequest {
    /// Where its time went, in order: queued, connect, then time to first byte and body, or
    /// what an unfinished request was still waiting for. Each part comes with the µs it took
    /// (`u64::MAX` for an unfinished stage), so a narrow view can keep the longest parts.
    /// The text summary, the HTML report and the dashboard all show this one breakdown.
    pub fn phases(&self) -> Vec<(u64, String)> {
        use crate::fmt::fmt_us;
        let mut parts = Vec::new();
        if let Some(q) = self.queued_us.filter(|q| *q > 0) {
            parts.push((q, format!("queued {}", fmt_us(q))));
        }
        if let Some(c) = self.connect_us {
            parts.push((c, format!("connect {}", fmt_us(c))));
        }
        if let Some(t) = self.tls_us {
            parts.push((t, format!("tls {}", fmt_us(t))));
        }
        if let Some(stage) = self.stage {
            parts.push((u64::MAX, stage.describe().to_string()));
        } else if self.error.is_none() {
            parts.push((self.ttfb_us, format!("ttfb {}", fmt_us(self.ttfb_us))));
            parts.push((self.body_us, format!("body {}", fmt_us(self.body_us))));
        }
        parts
    }
}

impl Stage {
    /// A few words for the text summary.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::NotSent => "never sent: no connection was free",
            Stage::Connecting => "still connecting",
            Stage::Sending => "still sending",
            Stage::Response => "waiting for the response",
        }
    }
}
