//! What to run: the target, the request, and the run's independent modes
//! (`Stop` × `Pace` × pipelining depth), validated before any load starts.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::Error;
use crate::mix::{self, Order, RequestSpec};

mod arrival;
mod encode;
mod limits;
mod source;

#[cfg(test)]
mod tests;
mod url;

pub use arrival::{
    connection_active_from, parse_arrival, parse_burst, parse_stages, planned_at, stages_duration,
    Arrival, LoadStage, Schedule, StageTarget,
};
use limits::fmt_duration;
pub use limits::{
    fmt_limit, parse_connect_rate, parse_duration, parse_duration_within, CONNS_PER_SOURCE,
    DEFAULT_SLOW_INTERVAL, MAX_CONNECTIONS, MAX_CONNECT_RATE, MAX_DURATION, MAX_RATE, MAX_REQUESTS,
    MAX_SOURCE_ADDRS, MAX_STREAMS, MAX_THREADS, MAX_TIMEOUT, MIN_CONNECT_RATE, MIN_DURATION,
    MIN_RATE,
};
pub use source::SourceAddrs;
pub use url::basic_authorization;
use url::parse_url;
pub use url::{redact_password, without_credentials};

/// Which generator engine runs a plan (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// The io_uring engine where the kernel has what it needs and it has earned the default
    /// (see `engine::AUTO_PICKS_URING`); tokio otherwise.
    #[default]
    Auto,
    /// The io_uring engine; a plan that asks for it where io_uring cannot run fails to start.
    Uring,
    /// The tokio (epoll) engine.
    Tokio,
}

/// When the measured part of a run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Exactly this many measured requests are sent and finished.
    Requests(u64),
    /// Requests are sent for this long (after the warm-up), then in-flight ones may finish.
    Duration(Duration),
}

/// How fast requests are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Closed loop: each connection sends its next request as soon as it has room.
    Max,
    /// Open loop: this many requests per second in total, each with an intended send time;
    /// latency is measured from that time (coordinated-omission correction).
    Rate(f64),
}

/// A validated description of one run. Build it with [`Plan::new`] and the setters; every
/// setting has the default a user of oha would expect.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The URL as given, for reports, with the password of a `user:password@` written
    /// `***` (it is sent as `Authorization`, never shown).
    pub url: String,
    /// The resolved address connections go to.
    pub addr: SocketAddr,
    /// HTTP method.
    pub method: String,
    /// Extra request headers, in order; they replace the default ones of the same name.
    pub headers: Vec<(String, String)>,
    /// Request body (sent with a Content-Length).
    pub body: Vec<u8>,
    /// TCP connections in total, spread over the threads.
    pub connections: usize,
    /// Generator threads, each with its own runtime and connections.
    pub threads: usize,
    /// CPUs to pin generator threads to (thread i on `cpus[i % len]`); empty: no pinning.
    pub cpus: Vec<usize>,
    /// When the run ends.
    pub stop: Stop,
    /// Closed or open loop.
    pub pace: Pace,
    /// Open loop: how requests are spread in time (`--arrival`, `--burst`).
    pub arrival: Arrival,
    /// `--stages`: the rate (open loop) or the connections (closed loop) over the run, each
    /// stage ramping linearly from the previous one's target (the first from 0). Empty: the
    /// plan's `pace` and `connections` throughout. Open loop, `pace` is then the highest
    /// stage's rate (the figure reports name), and the run lasts the stages.
    pub stages: Vec<LoadStage>,
    /// Open loop: how long after the start the first slot falls (then one every 1/rate).
    /// Zero for a run of its own; segment I of N takes (I−1)/rate of the whole load, so the
    /// N generators started at one `--start-at` send between each other's slots instead of
    /// all at once (see [`crate::segment::Segment::apply`]).
    pub first_slot_offset: Duration,
    /// `{seq}`: this generator's values are `seq_offset + k × seq_stride` (segment I of N:
    /// I−1 and N), so N generators never send the same one.
    pub seq_offset: u64,
    /// See `seq_offset`.
    pub seq_stride: u64,
    /// HTTP/1.1 pipelining depth: requests in flight per connection.
    pub pipeline: usize,
    /// Reuse connections; when false every request opens its own (`Connection: close`).
    pub keepalive: bool,
    /// Per-request timeout, from when the request started (its connect, if it opened one).
    pub timeout: Duration,
    /// Limit on the TCP handshake.
    pub connect_timeout: Duration,
    /// Load applied before measuring; nothing sent in it is recorded.
    pub warmup: Duration,
    /// How many of the slowest requests are kept with their details.
    pub slowest: usize,
    /// How often workers hand their interval data to the aggregator.
    pub tick: Duration,
    /// How long in-flight requests may still finish once sending has stopped.
    pub grace: Duration,
    /// Which generator engine runs the plan.
    pub engine: EngineChoice,
    /// How long the tokio engine's threads poll for work before they sleep
    /// (`--spin-before-sleep`).
    pub spin_before_sleep: crate::SpinBeforeSleep,
    /// Which local addresses connections come from.
    pub source_addrs: SourceAddrs,
    /// New connections per second at most, in total (`--connect-rate`); none: unbounded.
    pub connect_rate: Option<f64>,
    /// A request mix (`--load`, `--urls-from-file`): these requests, by weight, instead of
    /// `method`, the URL's path, `headers` and `body`; every figure is also kept per name.
    /// Empty: the single request.
    pub requests: Vec<RequestSpec>,
    /// The order of the mix's requests (`--url-order`).
    pub order: Order,
    /// Connections held open and silent beside the load (`--idle-conns`).
    pub idle_conns: usize,
    /// Connections held open beside the load, each sending a request head that never ends
    /// one byte at a time (`--slow-conns`: a slowloris client).
    pub slow_conns: usize,
    /// How often a slow connection sends its next header byte (`--slow-interval`).
    pub slow_interval: Duration,
    /// TLS, for an `https://` URL (set by [`Plan::new`] with its defaults); none for http.
    pub tls: Option<crate::transport::TlsOptions>,
    /// Speak HTTP/2 (`--http2`): h2 via ALPN over TLS, h2c with prior knowledge over TCP.
    pub http2: bool,
    /// HTTP/2: concurrent streams per connection (`--streams`, the analogue of pipelining),
    /// at most what the server's SETTINGS allow.
    pub streams: usize,
    host_header: String,
    path: String,
    /// `Basic …` of the URL's `user:password@`: sent as Authorization unless a request has
    /// its own (`-H`, a mix's headers), as curl does.
    authorization: Option<String>,
}

impl Plan {
    /// A plan for `url` (http only) with oha's defaults: 50 connections, 10 s, closed loop.
    pub fn new(url: &str) -> Result<Plan, Error> {
        let parsed = parse_url(url)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Plan {
            url: parsed.shown,
            addr: parsed.addr,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            connections: 50,
            threads,
            cpus: Vec::new(),
            stop: Stop::Duration(Duration::from_secs(10)),
            pace: Pace::Max,
            arrival: Arrival::Uniform,
            stages: Vec::new(),
            first_slot_offset: Duration::ZERO,
            seq_offset: 0,
            seq_stride: 1,
            pipeline: 1,
            keepalive: true,
            timeout: Duration::from_secs(20),
            connect_timeout: Duration::from_secs(10),
            warmup: Duration::ZERO,
            slowest: 10,
            tick: Duration::from_millis(100),
            grace: Duration::from_secs(1),
            engine: EngineChoice::Auto,
            spin_before_sleep: crate::SpinBeforeSleep::Adaptive,
            source_addrs: SourceAddrs::Kernel,
            connect_rate: None,
            requests: Vec::new(),
            order: Order::RoundRobin,
            idle_conns: 0,
            slow_conns: 0,
            slow_interval: DEFAULT_SLOW_INTERVAL,
            tls: parsed.tls,
            http2: false,
            streams: 1,
            host_header: parsed.host_header,
            path: parsed.path,
            authorization: parsed.authorization,
        })
    }

    /// Points the plan at another URL, keeping every other setting (used once a launched
    /// target's port is known); TLS options set before are kept while the URL stays https.
    pub fn set_url(&mut self, url: &str) -> Result<(), Error> {
        let parsed = parse_url(url)?;
        self.tls = match (self.tls.take(), parsed.tls) {
            (Some(mut kept), Some(new)) => {
                kept.server_name = new.server_name;
                Some(kept)
            }
            (_, new) => new,
        };
        self.url = parsed.shown;
        self.addr = parsed.addr;
        self.host_header = parsed.host_header;
        self.path = parsed.path;
        self.authorization = parsed.authorization;
        Ok(())
    }

    /// Checks the settings against each other; called by [`crate::run`] before any load.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_concurrency()?;
        self.validate_shape()?;
        self.validate_times()?;
        self.validate_requests()?;
        self.validate_cpus()?;
        self.validate_held()?;
        self.validate_protocol()?;
        self.source_ips()?;
        crate::transport::tls_client(self.tls.as_ref(), self.http2)?;
        Ok(())
    }

    /// Connections, threads, pipelining and the open-loop rate within their bounds.
    fn validate_concurrency(&self) -> Result<(), Error> {
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return invalid(format!(
                "connections must be 1..={MAX_CONNECTIONS}, got {} (-c)",
                self.connections
            ));
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return invalid(format!(
                "threads must be 1..={MAX_THREADS}, got {} (--threads)",
                self.threads
            ));
        }
        if self.pipeline == 0 || self.pipeline > 1024 {
            return invalid(format!(
                "pipeline depth must be 1..=1024, got {} (--pipeline)",
                self.pipeline
            ));
        }
        if !self.keepalive && self.pipeline > 1 {
            return invalid("--pipeline needs keep-alive connections; drop --no-keepalive".into());
        }
        if let Pace::Rate(r) = self.pace {
            if !(MIN_RATE..=MAX_RATE).contains(&r) {
                return invalid(format!(
                    "rate must be {MIN_RATE}..={MAX_RATE} requests per second, got {r} (-q)"
                ));
            }
        }
        Ok(())
    }

    /// The run's length, warm-up, timeouts, grace and tick within their bounds.
    fn validate_times(&self) -> Result<(), Error> {
        match self.stop {
            Stop::Requests(n) if !(1..=MAX_REQUESTS).contains(&n) => {
                return invalid(format!(
                    "request count must be 1..={MAX_REQUESTS}, got {n} (-n)"
                ))
            }
            Stop::Duration(d) => span(d, MIN_DURATION, MAX_DURATION, "duration (-z)")?,
            Stop::Requests(_) => {}
        }
        span(
            self.warmup,
            Duration::ZERO,
            MAX_DURATION,
            "warm-up (--warmup)",
        )?;
        span(self.timeout, MIN_DURATION, MAX_TIMEOUT, "timeout (-t)")?;
        span(
            self.connect_timeout,
            MIN_DURATION,
            MAX_TIMEOUT,
            "connect timeout (--connect-timeout)",
        )?;
        span(self.grace, Duration::ZERO, MAX_TIMEOUT, "grace")?;
        span(
            self.first_slot_offset,
            Duration::ZERO,
            MAX_DURATION,
            "first slot offset",
        )?;
        if self.tick.is_zero() {
            return invalid("tick must be more than 0".into());
        }
        Ok(())
    }

    /// The request (or the mix) well formed, encoded once if a mix, so that what only encoding
    /// finds is found before anything is sent.
    fn validate_requests(&self) -> Result<(), Error> {
        if self.method.is_empty() || !self.method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return invalid(format!(
                "method {:?} is not an HTTP method (-m)",
                self.method
            ));
        }
        mix::check_headers(&self.headers).map_err(|m| Error::InvalidPlan(format!("{m} (-H)")))?;
        if !self.has_mix() {
            mix::check_framing(&self.headers, &self.body)
                .map_err(|m| Error::InvalidPlan(format!("{m} (-H)")))?;
        }
        mix::validate(&self.requests)?;
        if self.has_mix() {
            // What only encoding finds (a placeholder that does not parse, the size of a
            // period or of the copies placeholders need) is found before anything is sent.
            self.encode()?;
        }
        Ok(())
    }

    /// The generator's CPUs available to this process.
    fn validate_cpus(&self) -> Result<(), Error> {
        if !self.cpus.is_empty() {
            let available: Vec<usize> = core_affinity::get_core_ids()
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.id)
                .collect();
            if let Some(cpu) = self.cpus.iter().find(|c| !available.contains(c)) {
                let list: Vec<String> = available.iter().map(usize::to_string).collect();
                return invalid(format!(
                    "CPU {cpu} is not available to this process (available: {}); pick from those (--cpus)",
                    list.join(",")
                ));
            }
        }
        Ok(())
    }

    /// The connect rate and the held (idle and slow) connections within their bounds.
    fn validate_held(&self) -> Result<(), Error> {
        if let Some(r) = self.connect_rate {
            if !(MIN_CONNECT_RATE..=MAX_CONNECT_RATE).contains(&r) {
                return invalid(format!(
                    "connect rate must be {MIN_CONNECT_RATE}..={MAX_CONNECT_RATE} per second, got {r} (--connect-rate)"
                ));
            }
        }
        if self.idle_conns + self.slow_conns > MAX_CONNECTIONS {
            return invalid(format!(
                "held connections must be at most {MAX_CONNECTIONS} in all, got {} (--idle-conns {} + --slow-conns {})",
                self.idle_conns + self.slow_conns,
                self.idle_conns,
                self.slow_conns
            ));
        }
        span(
            self.slow_interval,
            MIN_DURATION,
            MAX_TIMEOUT,
            "slow-connection byte interval (--slow-interval)",
        )?;
        Ok(())
    }

    /// HTTP/1.1's and HTTP/2's settings not mixed.
    fn validate_protocol(&self) -> Result<(), Error> {
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return invalid(format!(
                "streams must be 1..={MAX_STREAMS}, got {} (--streams)",
                self.streams
            ));
        }
        if self.http2 && self.pipeline > 1 {
            return invalid(
                "--pipeline is HTTP/1.1's; with --http2 give --streams N (concurrent streams per connection)".into(),
            );
        }
        if self.http2 && !self.keepalive {
            return invalid("--no-keepalive is HTTP/1.1's; drop it with --http2".into());
        }
        if !self.http2 && self.streams > 1 {
            return invalid(
                "--streams is HTTP/2's; add --http2, or use --pipeline for HTTP/1.1".into(),
            );
        }
        Ok(())
    }

    /// The load's shape against the rest: arrivals and rate stages are open loop's,
    /// connection stages closed loop's, and stages set the run's length.
    fn validate_shape(&self) -> Result<(), Error> {
        let invalid = |m: &str| Err(Error::InvalidPlan(m.to_string()));
        if self.pace == Pace::Max && self.arrival != Arrival::Uniform {
            return invalid(
                "--arrival and --burst shape an open-loop schedule: give a rate (-q) or use --burst alone",
            );
        }
        let rates = !self.rate_stages().is_empty();
        if rates && self.pace == Pace::Max {
            return invalid("rate stages are open loop's: the plan has no rate (-q)");
        }
        if !self.stages.is_empty() && !rates && self.pace != Pace::Max {
            return invalid(
                "connection stages (DUR:c=N) are closed loop's: drop -q, or give rates (DUR:RATE)",
            );
        }
        if rates && matches!(self.arrival, Arrival::Burst { .. }) {
            return invalid("--burst sets its own rate: it does not take --stages");
        }
        if !self.stages.is_empty() && self.stop != Stop::Duration(stages_duration(&self.stages)) {
            return invalid("--stages set the run's length: drop -z and -n");
        }
        Ok(())
    }

    /// Every connection the run opens at once: the load's and the held ones.
    pub fn all_connections(&self) -> usize {
        self.connections + self.idle_conns + self.slow_conns
    }

    /// How many of the load's requests can be in flight at once: each connection's
    /// pipelining depth, or its streams with HTTP/2 (`--pipeline` is refused there). The
    /// spike rules read it as what one stall can hold: `--http2 -c 2 --streams 100` counted
    /// 2, and a stall rule for few connections claimed "all of the 2 that can be in flight".
    pub fn max_in_flight(&self) -> usize {
        let per_connection = if self.http2 {
            self.streams
        } else {
            self.pipeline
        };
        self.connections.saturating_mul(per_connection)
    }

    /// The threads actually used: never more than the connections.
    pub fn effective_threads(&self) -> usize {
        self.threads.min(self.connections).max(1)
    }

    /// Open-loop stages as (duration s, total rate at its end); empty without rate stages.
    pub fn rate_stages(&self) -> Vec<(f64, f64)> {
        self.stages
            .iter()
            .filter_map(|s| match s.target {
                StageTarget::Rate(r) => Some((s.duration.as_secs_f64(), r)),
                StageTarget::Connections(_) => None,
            })
            .collect()
    }

    /// The open-loop rate planned `t_s` seconds into the load (the stages', else `-q`'s);
    /// none in closed loop.
    pub fn planned_rate_at(&self, t_s: f64) -> Option<f64> {
        match self.pace {
            Pace::Max => None,
            Pace::Rate(_) if !self.stages.is_empty() => Some(planned_at(&self.stages, 0.0, t_s)),
            Pace::Rate(r) => Some(r),
        }
    }

    /// Open or closed loop, as reports name it.
    pub fn mode(&self) -> &'static str {
        match self.pace {
            Pace::Max => "closed",
            Pace::Rate(_) => "open",
        }
    }

    /// Whether the plan sends a mix (and keeps figures per request name).
    pub fn has_mix(&self) -> bool {
        !self.requests.is_empty()
    }

    /// What the run sends, as its progress line and the dashboard's header put it before
    /// the URL: the method, or "a mix of N requests on".
    pub fn what_is_sent(&self) -> String {
        match self.requests.len() {
            0 => self.method.clone(),
            1 => "a mix of 1 request on".to_string(),
            n => format!("a mix of {n} requests on"),
        }
    }

    /// The URL as the run names it beside [`Plan::what_is_sent`]: a mix's requests carry
    /// their own paths, so only its origin (the default path is not what a mix sends).
    pub fn url_shown(&self) -> &str {
        url_shown(&self.url, self.has_mix())
    }

    /// The mix's request names, first seen first; none for a single-request plan.
    pub fn request_names(&self) -> Vec<String> {
        mix::names(&self.requests).0
    }

    /// The method the response parser is told of (a mix is all HEAD or has none).
    pub(crate) fn parser_method(&self) -> &str {
        self.requests.first().map_or(&self.method, |r| &r.method)
    }

    /// What the plan needs that only the tokio engine does (TLS, HTTP/2), if anything.
    pub fn needs_tokio(&self) -> Option<&'static str> {
        match (self.http2, self.tls.is_some()) {
            (true, true) => Some("HTTP/2 over TLS"),
            (true, false) => Some("HTTP/2 (h2c)"),
            (false, true) => Some("TLS (https://)"),
            (false, false) => None,
        }
    }

    /// The HTTP spoken, as reports name it: "http/1.1", "h2" (over TLS) or "h2c".
    pub fn protocol(&self) -> &'static str {
        match (self.http2, self.tls.is_some()) {
            (true, true) => "h2",
            (true, false) => "h2c",
            (false, _) => "http/1.1",
        }
    }
}

/// `url` as a run names it: for a mix (`mix`), only its origin (`scheme://host:port`).
pub fn url_shown(url: &str, mix: bool) -> &str {
    if !mix {
        return url;
    }
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// A plan that cannot run, saying why.
fn invalid(m: String) -> Result<(), Error> {
    Err(Error::InvalidPlan(m))
}

/// `d` within `lo..=hi`, or an error naming `what`.
fn span(d: Duration, lo: Duration, hi: Duration, what: &str) -> Result<(), Error> {
    if d < lo || d > hi {
        Err(Error::InvalidPlan(format!(
            "{what} must be {}..={}, got {}",
            fmt_duration(lo),
            fmt_duration(hi),
            fmt_duration(d)
        )))
    } else {
        Ok(())
    }
}
