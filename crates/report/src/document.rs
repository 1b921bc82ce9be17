//! The run's report: a versioned JSON document (schema in README.md) and the text summary.
//!
//! [`Report::new`] (`of_run`) turns a run's
//! [`RunTotals`](tailscope_loadgen::snapshot::RunTotals) into the serde [`Report`] (this module);
//! `text` writes the human summary, `histogram` the bars, `fmt` the numbers in it.

mod by_request;
mod confidence;
mod fmt;
mod hdr_log;
mod histogram;
pub mod merge;
mod of_run;
mod stages;
mod steady;
mod text;
mod until;
mod warmup_auto;
mod warnings;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sections::RunSections;
use tailscope_loadgen::conns::Connections;
use tailscope_loadgen::segment::{unix_seconds, Segment};
use tailscope_loadgen::snapshot::{Percentiles, RateChange, SlowRequest, TimePoint};

pub use confidence::{
    interval as percentile_interval, interval_text, percentile_label, CiMethod, CiMethodName,
    LatencyCi95, Unbounded,
};
pub use fmt::{fmt_asked_rate, fmt_bytes, fmt_count, fmt_rate, fmt_us};
pub(crate) use histogram::{decode_base64, encoded, lower_bounds, percentiles};
pub use histogram::{decode_histogram, histogram_bars, log_buckets, Bucket};
pub use until::{Until, UntilCheck, UntilGoal};
pub use warmup_auto::WarmupAuto;
pub use warnings::is_generator_warning;

pub use by_request::RequestReport;
pub use hdr_log::{write_hdr_log, write_report_hdr_log};
pub use merge::{merge, MergeInfo, MergedRun};
pub use stages::{stage_figures, stage_plans, StageFigures, StagePlan};
pub use text::progress_line;
pub use warnings::GENERATOR_LAG_WARN_US;

/// The version of the JSON layout; bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

/// The tool that wrote a report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    /// Always "tailscope".
    pub name: String,
    /// The tool's version.
    pub version: String,
}

/// The run's settings as the report records them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    /// Target URL.
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// TCP connections.
    pub connections: usize,
    /// Generator threads.
    pub threads: usize,
    /// Pipelining depth.
    pub pipeline: usize,
    /// "closed" or "open".
    pub mode: String,
    /// Open loop: requests per second asked for (with `--stages`, the highest stage's).
    pub rate: Option<f64>,
    /// Open loop: how requests arrived: "uniform", "poisson" or "burst"; null in closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<String>,
    /// `--burst`: requests per burst and seconds between bursts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<(u64, f64)>,
    /// `--stages`, as planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StagePlan>,
    /// `-z`, when the run was timed.
    pub duration_s: Option<f64>,
    /// `-n`, when the run was counted.
    pub requests: Option<u64>,
    /// Warm-up, not recorded.
    pub warmup_s: f64,
    /// Per-request timeout.
    pub timeout_s: f64,
    /// Connect timeout.
    pub connect_timeout_s: f64,
    /// Whether connections were reused.
    pub keepalive: bool,
    /// CPUs the generator threads were pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// The generator engine that ran (`uring` or `tokio`) and why it was chosen.
    #[serde(default)]
    pub engine: tailscope_loadgen::EngineUsed,
    /// `--spin-before-sleep` of the tokio engine: "auto", "off" or the fixed window ("20µs");
    /// null when the io_uring engine ran (it does not poll before sleeping).
    #[serde(default)]
    pub spin_before_sleep: Option<String>,
    /// `--connect-rate`: new connections per second at most, in total; null: unbounded.
    #[serde(default)]
    pub connect_rate: Option<f64>,
    /// `--source-addrs`: the local addresses connections were bound to, in turn (`auto`
    /// resolved); empty: the kernel picked.
    #[serde(default)]
    pub source_addrs: Vec<String>,
    /// `--idle-conns`: connections held open and silent beside the load.
    #[serde(default)]
    pub idle_conns: usize,
    /// `--slow-conns`: connections held open beside the load sending a never-ending head.
    #[serde(default)]
    pub slow_conns: usize,
    /// `--slow-interval`: seconds between a slow connection's header bytes; null without
    /// slow connections.
    #[serde(default)]
    pub slow_interval_s: Option<f64>,
    /// The HTTP spoken: "http/1.1", "h2" (over TLS) or "h2c" (cleartext).
    #[serde(default = "http1")]
    pub protocol: String,
    /// HTTP/2: concurrent streams asked for per connection (`--streams`); null for HTTP/1.1.
    #[serde(default)]
    pub streams: Option<usize>,
    /// The TLS settings (https); null over plain TCP.
    #[serde(default)]
    pub tls: Option<tailscope_loadgen::transport::TlsConfig>,
}

fn http1() -> String {
    "http/1.1".into()
}

/// The server under test, when tailscope launched it or was told its pid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TargetInfo {
    /// `embedded`, `nginx`, `command`, or `external` (a URL, with `--pid`).
    pub kind: String,
    /// A short name: `embedded`, `nginx`, the command's program.
    pub name: String,
    /// Its process id, when known.
    pub pid: Option<u32>,
    /// The command that was run, when tailscope launched it.
    pub command: Option<String>,
    /// CPUs the server was pinned to (empty: not pinned).
    pub server_cpus: Vec<usize>,
}

/// The run's totals.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// successes + errors + unfinished: every request that began in the measured window
    /// (in open loop, every slot that fell due in it).
    pub requests: u64,
    /// Complete responses of any status.
    pub successes: u64,
    /// Failed requests (every kind, timeouts included).
    pub errors: u64,
    /// Failed by timeout.
    pub timeouts: u64,
    /// The load window: from the end of the warm-up until sending stopped (`-z`, the last
    /// `-n` request sent, or a stop). Responses in the grace period after it are counted.
    pub duration_s: f64,
    /// After the load window, how long in-flight requests took to finish (at most the grace
    /// period; requests still in flight then are `aborted`).
    #[serde(default)]
    pub grace_s: f64,
    /// requests / duration_s.
    pub rps: f64,
    /// Response bytes read.
    pub bytes_read: u64,
    /// Open loop: sends that left more than 1 ms after their intended time.
    pub late_sends: u64,
    /// Open loop: `late_sends` by why each left late (they add up to it); absent in closed
    /// loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends_by_cause: Option<LateSendsByCause>,
    /// Connections opened again after the server closed them.
    pub reconnects: u64,
    /// Requests the generator lost track of at the end (a connection task that had to be
    /// cancelled): 0 unless something is wrong with the generator itself. Unfinished
    /// requests are counted in `unfinished`, not here.
    pub aborted: u64,
    /// Connections still in their TCP handshake when the run stopped.
    #[serde(default)]
    pub still_connecting: u64,
    /// TCP connections opened, the warm-up's included.
    #[serde(default)]
    pub connections_opened: u64,
    /// Connect attempts that failed (refused, timed out, no local port, …), the warm-up's
    /// included.
    #[serde(default)]
    pub connect_failures: u64,
    /// Requests still waiting when the grace period ended, recorded in every latency
    /// figure at their wait so far (a lower bound of their latency).
    #[serde(default)]
    pub unfinished: u64,
    /// Of `unfinished`, those never sent: claimed, still queued for a connection when the run
    /// ended (open loop: slots the schedule had queued behind the server).
    #[serde(default)]
    pub unfinished_unsent: u64,
    /// The shortest wait of an unfinished request; null when there were none.
    #[serde(default)]
    pub unfinished_min_us: Option<u64>,
    /// The longest wait of an unfinished request; null when there were none.
    #[serde(default)]
    pub unfinished_max_us: Option<u64>,
    /// Segments the generator's own connections retransmitted (TCP_INFO, SYNs apart); null
    /// when TCP_INFO could not be read.
    #[serde(default)]
    pub retransmits: Option<u64>,
    /// SYNs the generator's own connections retransmitted; null when not read.
    #[serde(default)]
    pub syn_retransmits: Option<u64>,
    /// TLS handshakes, resumptions and the first failure's reason (https); absent over
    /// plain TCP unless a server answered `http://` in TLS (`tls_answers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<tailscope_loadgen::transport::TransportCounters>,
    /// errors / requests.
    pub error_rate: f64,
    /// Responses whose status was not 2xx.
    pub non2xx: u64,
    /// non2xx / requests.
    pub non2xx_rate: f64,
}

/// Open loop: why the late sends left late. Each is counted under the first cause that
/// explains it, in this order.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct LateSendsByCause {
    /// The generator's thread waited for a CPU (its run-queue wait from the intended time to
    /// the send, from `/proc/thread-self/schedstat`, covers the lateness); null where that
    /// wait cannot be read.
    pub waited_for_cpu: Option<u64>,
    /// No connection was free and open: the slot was claimed only after its time while the
    /// generator's loop ran out of work meanwhile (every connection waited on the server),
    /// or it waited for its connection to open (see
    /// [`tailscope_loadgen::recorder::LateCause::NoFreeConnection`]).
    pub no_free_connection: u64,
    /// The generator's own: its loop or timer was too slow while it had a CPU (a loop busy
    /// throughout, that did not get to a free connection in time, is here).
    pub generator: u64,
}

impl LateSendsByCause {
    fn of(c: &tailscope_loadgen::snapshot::Counters) -> LateSendsByCause {
        LateSendsByCause {
            waited_for_cpu: c.late_waited_for_cpu,
            no_free_connection: c.late_no_free_connection,
            generator: c.late_generator,
        }
    }
}

/// Little's law as a self-check of a closed-loop run: the connections' time in the measured
/// window against the time its requests account for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LittlesLaw {
    /// Connections' lifetimes in the window × pipelining depth (s).
    pub connection_s: f64,
    /// Finished, failed and unfinished requests' times, plus retried connects and, pipelined,
    /// free slots waiting for the refill at half the depth (s).
    pub accounted_s: f64,
    /// The share of `connection_s` no request accounts for (%): time the generator lost
    /// between requests. Over 5 % means the generator was saturated or has a bug.
    pub unaccounted_pct: f64,
}

/// Unaccounted time above this share is reported as the generator's own.
pub const LITTLES_LAW_SLACK_PCT: f64 = 5.0;
/// Connections' time below this (s) is too little to judge: a connection's set-up and
/// tear-down outweigh its requests (`-n 1 -c 50`: 16 % of 0.00 s "lost").
pub const LITTLES_LAW_MIN_S: f64 = 1.0;

impl LittlesLaw {
    /// Whether the generator lost enough of the connections' time between requests to say
    /// so: more than [`LITTLES_LAW_SLACK_PCT`] of at least [`LITTLES_LAW_MIN_S`].
    pub fn generator_lost_time(&self) -> bool {
        self.unaccounted_pct > LITTLES_LAW_SLACK_PCT && self.connection_s >= LITTLES_LAW_MIN_S
    }
}

/// The latency histogram, losslessly, for tools that want every percentile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EncodedHistogram {
    /// "hdrhistogram-v2-deflate-base64".
    pub encoding: String,
    /// "us".
    pub unit: String,
    /// Base64 of the V2 deflate serialization.
    pub data: String,
}

/// Where and when a generator ran, for merging the reports of several (`tailscope merge`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Generator {
    /// The host's name (/proc/sys/kernel/hostname: a pod's name under Kubernetes); null when
    /// it could not be read.
    pub host: Option<String>,
    /// This generator's share of the load (`--segment`); null when it ran all of it.
    pub segment: Option<Segment>,
    /// When measurement began (after the warm-up), RFC 3339 UTC.
    pub started_at: String,
    /// The same, in unix seconds.
    pub started_unix_s: f64,
    /// When the load window and its grace period ended, RFC 3339 UTC.
    pub ended_at: String,
    /// The same, in unix seconds.
    pub ended_unix_s: f64,
    /// `--start-at`, when given: the wall-clock time the generator waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
}

impl Generator {
    /// This host's generator, whose measurement began at `measure_started` and whose report
    /// is `report` (its load window and grace give the end).
    pub fn here(
        report: &Report,
        measure_started: std::time::SystemTime,
        segment: Option<Segment>,
        start_at: Option<std::time::SystemTime>,
    ) -> Generator {
        let ended = measure_started
            + std::time::Duration::from_secs_f64(
                (report.summary.duration_s + report.summary.grace_s).max(0.0),
            );
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        Generator {
            host,
            segment,
            started_at: rfc3339(measure_started),
            started_unix_s: unix_seconds(measure_started),
            ended_at: rfc3339(ended),
            ended_unix_s: unix_seconds(ended),
            start_at: start_at.map(rfc3339),
        }
    }
}

/// RFC 3339 in UTC to the millisecond.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A whole report (`schema_version` 1). Percentile objects are null when nothing was
/// measured, never zeros.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Who wrote it.
    pub tool: Tool,
    /// The settings.
    pub config: Config,
    /// The server under test, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetInfo>,
    /// The totals.
    pub summary: Summary,
    /// Latency of every request that got a response, and of every unfinished one at its
    /// wait so far (corrected for coordinated omission in open loop), with each
    /// percentile's 95 % confidence interval (`ci95`).
    pub latency_us: Option<Percentiles>,
    /// How `latency_us.ci95` was obtained, and the percentiles it cannot bound (with why);
    /// absent when nothing was measured or in reports written before the intervals were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ci95: Option<LatencyCi95>,
    /// The percentiles of `latency_us` that unfinished requests reach (`p99`, `p999`,
    /// `max`, ...): their true values are at least as high.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_lower_bound: Vec<String>,
    /// Closed loop: Little's law as a self-check; null in open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub littles_law: Option<LittlesLaw>,
    /// Open loop only: latency from the actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_us: Option<Percentiles>,
    /// TCP connect times.
    pub connect_us: Option<Percentiles>,
    /// TLS handshake times (https; absent over plain TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_us: Option<Percentiles>,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Failed requests by kind (every kind, zeros included).
    pub errors: BTreeMap<String, u64>,
    /// A request mix (`--load`, `--urls-from-file`): every figure per request name. Absent
    /// for a single request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_request: BTreeMap<String, RequestReport>,
    /// One point a second.
    pub timeseries: Vec<TimePoint>,
    /// Connections: the most open at once, and what became of the held ones
    /// (`--idle-conns`, `--slow-conns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<Connections>,
    /// Open-loop rate changes during the run (the dashboard's `+`/`-`), in order.
    #[serde(default)]
    pub rate_changes: Vec<RateChange>,
    /// `--until`: the percentiles the run waited on, and whether they were reached before
    /// `--max-duration`; absent without `--until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Until>,
    /// `--warmup auto`: how long the warm-up lasted and whether the figures settled in it;
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_auto: Option<WarmupAuto>,
    /// `--stages`: each stage's figures (from the seconds in it), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageFigures>,
    /// The run was stopped before its end (Ctrl-C, SIGTERM, or from the dashboard).
    #[serde(default)]
    pub interrupted: bool,
    /// The signal that stopped it (`SIGINT`, `SIGTERM`); null when none did.
    #[serde(default)]
    pub signal: Option<String>,
    /// What the reader should know before trusting the numbers (non-2xx responses, no
    /// responses at all, connections still opening at the end), one sentence each.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The slowest requests, slowest first.
    pub slowest: Vec<SlowRequest>,
    /// The full latency histogram.
    pub histogram: EncodedHistogram,
    /// The connect-time histogram, encoded like `histogram` (so merged reports keep exact
    /// connect percentiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_histogram: Option<EncodedHistogram>,
    /// https: the TLS handshake histogram, encoded like `histogram` (so merged reports keep
    /// `tls_us`); absent for http.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_histogram: Option<EncodedHistogram>,
    /// Open loop: the uncorrected latency histogram, encoded like `histogram`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_histogram: Option<EncodedHistogram>,
    /// The latency histogram of each `timeseries` point, in the same order, base64 of the
    /// V2 deflate serialization: what `tailscope merge` adds up second by second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub second_histograms: Vec<String>,
    /// Where and when the generator ran (host, segment, wall-clock window); null in a
    /// merged report, whose `merged` section lists every generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<Generator>,
    /// A report made by `tailscope merge`: what it was made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeInfo>,
    /// The sections beside the generator's figures (the profile, the diagnosis, the accept
    /// queues, the stacks), at the top level of the JSON.
    #[serde(flatten)]
    pub sections: RunSections,
}

pub(crate) fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl Report {
    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

#[cfg(test)]
mod tests;
