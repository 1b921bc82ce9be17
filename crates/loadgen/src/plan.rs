//! What to run: the target, the request, and the run's independent modes
//! (`Stop` × `Pace` × pipelining depth), validated before any load starts.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use crate::engine::EngineChoice;
use crate::error::Error;
use crate::mix::{self, Encoded, EncodedRequest, Order, RequestSpec};

/// The most connections a plan may ask for (`-c`).
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// The most concurrent HTTP/2 streams one connection may be asked for (`--streams`).
pub const MAX_STREAMS: usize = 1024;
/// The most generator threads a plan may ask for (`--threads`).
pub const MAX_THREADS: usize = 1024;
/// The most measured requests a plan may ask for (`-n`).
pub const MAX_REQUESTS: u64 = 1_000_000_000_000;
/// The slowest open-loop rate, requests per second in total (`-q`, and the `-` key): below
/// it a slot is minutes apart and the schedule's arithmetic nears `Instant`'s range.
pub const MIN_RATE: f64 = 0.01;
/// The fastest open-loop rate, requests per second in total.
pub const MAX_RATE: f64 = 100_000_000.0;
/// The longest run and the longest warm-up (`-z`, `--warmup`): 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest request and connect timeouts (`-t`, `--connect-timeout`): 1 hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The shortest duration, warm-up aside, any of those may be.
pub const MIN_DURATION: Duration = Duration::from_millis(1);
/// Connections `--source-addrs auto` gives one source address. The default ephemeral range
/// (32768–60999) has ~28 k ports toward one destination, but connects slow down long before
/// it is full: with 18,000 connections from one loopback address to the reference server,
/// both engines' threads stalled in connects for 1.4–5 s and the held connects spilled into
/// the measured window; from 2, 3 or 4 addresses (9,000 or fewer each) they did not
/// (BENCHMARKS.md, "Idle connections beside the load").
pub const CONNS_PER_SOURCE: usize = 8_000;
/// The most source addresses a plan may name or `auto` may pick.
pub const MAX_SOURCE_ADDRS: usize = 1024;

/// The slowest `--connect-rate`: one new connection a second.
pub const MIN_CONNECT_RATE: f64 = 1.0;
/// The fastest `--connect-rate`.
pub const MAX_CONNECT_RATE: f64 = 10_000_000.0;
/// `--slow-interval`'s default: a slow connection's next header byte after this. Shorter
/// than the header timeouts servers keep by default (nginx 60 s, the reference server 10 s
/// from the first byte), so a server that holds slow clients is seen holding them.
pub const DEFAULT_SLOW_INTERVAL: Duration = Duration::from_secs(5);

/// Parses `--connect-rate`: `500/s` or `500`, new connections per second in total.
pub fn parse_connect_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let n = t.strip_suffix("/s").unwrap_or(t).trim();
    let r: f64 = n
        .parse()
        .map_err(|_| format!("{t:?} is not a rate: write connections per second, e.g. 500/s"))?;
    if !(MIN_CONNECT_RATE..=MAX_CONNECT_RATE).contains(&r) {
        return Err(format!(
            "{t} is out of range: give {MIN_CONNECT_RATE}..={MAX_CONNECT_RATE} per second"
        ));
    }
    Ok(r)
}

/// Which local addresses the connections come from (`--source-addrs`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceAddrs {
    /// The kernel picks (the route's address): one address's ephemeral ports in all.
    #[default]
    Kernel,
    /// A loopback target: 127.0.0.1, 127.0.0.2, … as many as the connections need (the
    /// whole 127/8 is local); the IPv6 loopback has only ::1.
    Auto,
    /// These local addresses, taken in turn by each new connection.
    List(Vec<IpAddr>),
}

impl SourceAddrs {
    /// Parses `auto` or a comma-separated list of IP addresses.
    pub fn parse(s: &str) -> Result<SourceAddrs, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(SourceAddrs::Auto);
        }
        let mut ips = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let ip: IpAddr = part.parse().map_err(|_| {
                format!("{part:?} is not an IP address: give auto or a list like 10.0.0.2,10.0.0.3")
            })?;
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        if ips.len() > MAX_SOURCE_ADDRS {
            return Err(format!(
                "{} addresses given; at most {MAX_SOURCE_ADDRS}",
                ips.len()
            ));
        }
        Ok(SourceAddrs::List(ips))
    }
}

/// Parses a duration as people write one: `500ms`, `10s`, `2m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e}: write a number and a unit, e.g. 500ms, 10s, 2m"))
}

/// Parses a duration and refuses one outside `lo..=hi`, naming the range.
pub fn parse_duration_within(s: &str, lo: Duration, hi: Duration) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < lo || d > hi {
        return Err(format!(
            "{} is out of range: give {}..={}",
            s.trim(),
            fmt_limit(lo),
            fmt_limit(hi)
        ));
    }
    Ok(d)
}

/// `0s`, `1ms`, `1h`, `30days`: a limit as people would write it.
fn fmt_limit(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
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
    /// The URL as given, for reports.
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
}

impl Plan {
    /// A plan for `url` (http only) with oha's defaults: 50 connections, 10 s, closed loop.
    pub fn new(url: &str) -> Result<Plan, Error> {
        let (addr, host_header, path, tls) = parse_url(url)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Plan {
            url: url.to_string(),
            addr,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            connections: 50,
            threads,
            cpus: Vec::new(),
            stop: Stop::Duration(Duration::from_secs(10)),
            pace: Pace::Max,
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
            source_addrs: SourceAddrs::Kernel,
            connect_rate: None,
            requests: Vec::new(),
            order: Order::RoundRobin,
            idle_conns: 0,
            slow_conns: 0,
            slow_interval: DEFAULT_SLOW_INTERVAL,
            tls,
            http2: false,
            streams: 1,
            host_header,
            path,
        })
    }

    /// Points the plan at another URL, keeping every other setting (used once a launched
    /// target's port is known); TLS options set before are kept while the URL stays https.
    pub fn set_url(&mut self, url: &str) -> Result<(), Error> {
        let (addr, host_header, path, tls) = parse_url(url)?;
        self.tls = match (self.tls.take(), tls) {
            (Some(mut kept), Some(new)) => {
                kept.server_name = new.server_name;
                Some(kept)
            }
            (_, new) => new,
        };
        self.url = url.to_string();
        self.addr = addr;
        self.host_header = host_header;
        self.path = path;
        Ok(())
    }

    /// Checks the settings against each other; called by [`crate::run`] before any load.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::InvalidPlan(m));
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
        let span = |d: Duration, lo: Duration, hi: Duration, what: &str| {
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
        };
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
        if self.slow_conns > 0 && self.http2 {
            return invalid(
                "--slow-conns send an HTTP/1.1 request head byte by byte: not over HTTP/2 yet (--idle-conns hold HTTP/2 connections; drop --http2 to hold slow ones over HTTP/1.1)"
                    .into(),
            );
        }
        if !self.http2 && self.streams > 1 {
            return invalid(
                "--streams is HTTP/2's; add --http2, or use --pipeline for HTTP/1.1".into(),
            );
        }
        self.source_ips()?;
        crate::engine::transport_client(self)?;
        Ok(())
    }

    /// Every connection the run opens at once: the load's and the held ones.
    pub fn all_connections(&self) -> usize {
        self.connections + self.idle_conns + self.slow_conns
    }

    /// The local addresses connections are bound to before they connect (none: the kernel
    /// picks). An error when `auto` cannot pick them or a named one is not this host's.
    pub fn source_ips(&self) -> Result<Vec<IpAddr>, Error> {
        let invalid = |m: String| Err(Error::InvalidPlan(m));
        let target = self.addr.ip();
        match &self.source_addrs {
            SourceAddrs::Kernel => Ok(Vec::new()),
            SourceAddrs::Auto => {
                let needed = self.all_connections().div_ceil(CONNS_PER_SOURCE).max(1);
                match target {
                    IpAddr::V4(v4) if v4.is_loopback() => {
                        if needed > MAX_SOURCE_ADDRS {
                            return invalid(format!("--source-addrs auto would need {needed} addresses for -c {}; at most {MAX_SOURCE_ADDRS}", self.connections));
                        }
                        let base = u32::from(Ipv4Addr::new(127, 0, 0, 1));
                        Ok((0..needed as u32)
                            .map(|k| IpAddr::V4(Ipv4Addr::from(base + k)))
                            .collect())
                    }
                    IpAddr::V6(v6) if v6.is_loopback() => {
                        if needed > 1 {
                            return invalid(format!(
                                "--source-addrs auto: the IPv6 loopback has one address (::1), enough for about {CONNS_PER_SOURCE} connections, not -c {}; target 127.0.0.1 instead (all of 127/8 is local)",
                                self.connections
                            ));
                        }
                        Ok(vec![target])
                    }
                    _ => invalid(format!(
                        "--source-addrs auto picks addresses only for a loopback target; for {target} name this host's addresses (--source-addrs 10.0.0.2,10.0.0.3)"
                    )),
                }
            }
            SourceAddrs::List(ips) => {
                if ips.is_empty() {
                    return invalid("--source-addrs names no address".into());
                }
                for ip in ips {
                    if ip.is_ipv4() != target.is_ipv4() {
                        return invalid(format!(
                            "source address {ip} is not of the target's family ({target}) (--source-addrs)"
                        ));
                    }
                    // Binding port 0 fails with EADDRNOTAVAIL for an address this host does
                    // not have.
                    if let Err(e) = UdpSocket::bind(SocketAddr::new(*ip, 0)) {
                        return invalid(format!(
                            "source address {ip} is not an address of this host ({e}); `ip addr` lists them (--source-addrs)"
                        ));
                    }
                }
                Ok(ips.clone())
            }
        }
    }

    /// The threads actually used: never more than the connections.
    pub fn effective_threads(&self) -> usize {
        self.threads.min(self.connections).max(1)
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

    /// The Host header (the `:authority` of HTTP/2) and the request target (path and
    /// query).
    pub fn authority_and_path(&self) -> (&str, &str) {
        (&self.host_header, &self.path)
    }

    /// The request bytes, encoded once for the whole run.
    pub fn encode_request(&self) -> Vec<u8> {
        self.encode_one(&self.method, &self.path, &self.headers, &self.body)
    }

    /// Every request of the run laid out for batches of `pipeline` (see [`Encoded`]): the
    /// mix, or the single request as a mix of one.
    pub(crate) fn encode(&self) -> Result<Encoded, Error> {
        if self.requests.is_empty() {
            let single = EncodedRequest {
                bytes: self.encode_request(),
                slots: Vec::new(),
            };
            // HTTP/2 claims up to `streams` requests at once, as pipelining claims `pipeline`.
            let depth = self.pipeline.max(self.streams);
            return Encoded::new(&[single], &[0], &[1], Order::RoundRobin, depth);
        }
        let (_, name_of) = mix::names(&self.requests);
        let encoded = self
            .requests
            .iter()
            .map(|r| {
                mix::encode_with_placeholders(r, |target, headers, body| {
                    self.encode_one(&r.method, target, headers, body)
                })
                .map_err(|m| Error::InvalidPlan(format!("request {:?}: {m}", r.name)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let weights: Vec<u32> = self.requests.iter().map(|r| r.weight).collect();
        let depth = self.pipeline.max(self.streams);
        let encoded = Encoded::new(&encoded, &name_of, &weights, self.order, depth)?;
        // Placeholders are patched into each connection's own copy of its batch.
        let copies = encoded.batch_room(depth) as u64 * self.connections as u64;
        if encoded.templated() && copies > mix::MAX_ENCODED_BYTES as u64 * 4 {
            return Err(Error::InvalidPlan(format!(
                "a mix with placeholders keeps a copy of a batch per connection: {copies} bytes at -c {} and {} requests a batch (--pipeline, --streams); at most {} (fewer connections, a shallower pipeline or shorter requests)",
                self.connections,
                depth,
                mix::MAX_ENCODED_BYTES * 4
            )));
        }
        Ok(encoded)
    }

    fn encode_one(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + body.len());
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        out.extend_from_slice(format!("{method} {target} HTTP/1.1\r\n").as_bytes());
        if !has("host") {
            out.extend_from_slice(format!("Host: {}\r\n", self.host_header).as_bytes());
        }
        if !has("user-agent") {
            out.extend_from_slice(
                concat!("User-Agent: tailscope/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            );
        }
        if !has("accept") {
            out.extend_from_slice(b"Accept: */*\r\n");
        }
        if !self.keepalive && !has("connection") {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        if (!body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH"))
            && !has("content-length")
        {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        for (k, v) in headers {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }
}

/// `1ms`, `10s`, `30days`: how the limits are named in messages.
fn fmt_duration(d: Duration) -> String {
    // Whole milliseconds: a limit message has no use for nanoseconds.
    let ms = Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64);
    if ms.is_zero() && !d.is_zero() {
        return format!("{}ns", d.as_nanos());
    }
    humantime_like(ms)
}

/// A compact rendering of whole-millisecond durations (`0s`, `1ms`, `1h`, `30days`).
fn humantime_like(d: Duration) -> String {
    let ms = d.as_millis();
    const UNITS: [(u128, &str); 5] = [
        (24 * 3600 * 1000, "days"),
        (3600 * 1000, "h"),
        (60 * 1000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    if ms == 0 {
        return "0s".into();
    }
    for (unit, name) in UNITS {
        if ms % unit == 0 {
            return format!("{}{name}", ms / unit);
        }
    }
    unreachable!("every duration is a whole number of milliseconds")
}

/// What a URL says: the address to connect to, the Host header, the request target (path
/// and query), and for https the TLS defaults for its host.
type ParsedUrl = (
    SocketAddr,
    String,
    String,
    Option<crate::transport::TlsOptions>,
);

/// Resolves an http or https URL (see [`ParsedUrl`]).
fn parse_url(url: &str) -> Result<ParsedUrl, Error> {
    let bad = |reason: &str| Error::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let parsed = url::Url::parse(url)
        .map_err(|e| bad(&format!("{e}; expected http(s)://HOST[:PORT]/PATH")))?;
    let https = match parsed.scheme() {
        "http" => false,
        "https" => true,
        other => {
            return Err(bad(&format!(
                "scheme {other:?} is not supported; use http:// or https://"
            )))
        }
    };
    let host = parsed.host_str().ok_or_else(|| bad("no host"))?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let host_for_resolve = host.trim_start_matches('[').trim_end_matches(']');
    let resolve_error = |error| Error::Resolve {
        host: format!("{host}:{port}"),
        error,
    };
    let addr = (host_for_resolve, port)
        .to_socket_addrs()
        .map_err(resolve_error)?
        .next()
        .ok_or_else(|| {
            resolve_error(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no address",
            ))
        })?;
    let host_header = match parsed.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let mut path = parsed.path().to_string();
    if let Some(q) = parsed.query() {
        path.push('?');
        path.push_str(q);
    }
    let tls = https.then(|| crate::transport::TlsOptions::new(host_for_resolve));
    Ok((addr, host_header, path, tls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_encoded_with_host_and_user_headers() {
        let mut plan = Plan::new("http://127.0.0.1:8080/a?b=c").unwrap();
        plan.method = "POST".into();
        plan.headers.push(("X-Test".into(), "1".into()));
        plan.headers.push(("User-Agent".into(), "me".into()));
        plan.body = b"hi".to_vec();
        let req = String::from_utf8(plan.encode_request()).unwrap();
        assert!(
            req.starts_with("POST /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
            "{req}"
        );
        assert!(req.contains("Content-Length: 2\r\n"));
        assert!(req.contains("User-Agent: me\r\n"));
        assert!(!req.contains("tailscope/"));
        assert!(
            req.ends_with("X-Test: 1\r\nUser-Agent: me\r\n\r\nhi"),
            "{req}"
        );
    }

    #[test]
    fn source_addrs_auto_picks_loopback_addresses_as_the_connections_need() {
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        plan.source_addrs = SourceAddrs::parse("auto").unwrap();
        plan.connections = 100;
        assert_eq!(
            plan.source_ips().unwrap(),
            vec![IpAddr::from([127, 0, 0, 1])]
        );
        plan.connections = 2 * CONNS_PER_SOURCE + 1;
        let picked: Vec<String> = plan
            .source_ips()
            .unwrap()
            .iter()
            .map(|ip| ip.to_string())
            .collect();
        assert_eq!(picked, ["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
        plan.set_url("http://[::1]:1/").unwrap();
        let err = plan.validate().unwrap_err().to_string();
        assert!(err.contains("one address (::1)"), "{err}");
        plan.connections = 10;
        assert_eq!(
            plan.source_ips().unwrap(),
            vec!["::1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            SourceAddrs::parse("127.0.0.2, 127.0.0.3,127.0.0.2").unwrap(),
            SourceAddrs::List(vec![
                IpAddr::from([127, 0, 0, 2]),
                IpAddr::from([127, 0, 0, 3])
            ])
        );
        assert!(SourceAddrs::parse("127.0.0.2,").is_err());
    }

    #[test]
    fn bad_urls_and_settings_are_refused() {
        assert!(matches!(
            Plan::new("ftp://127.0.0.1/"),
            Err(Error::BadUrl { .. })
        ));
        let https = Plan::new("https://localhost:8443/x").unwrap();
        let tls = https.tls.as_ref().expect("https has TLS options");
        assert_eq!(tls.server_name, "localhost");
        assert!(tls.resume && !tls.insecure);
        assert_eq!(https.addr.port(), 8443);
        assert!(Plan::new("http://127.0.0.1/").unwrap().tls.is_none());
        assert!(matches!(
            Plan::new("127.0.0.1:80"),
            Err(Error::BadUrl { .. })
        ));
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        plan.validate().unwrap();
        plan.pipeline = 4;
        plan.keepalive = false;
        assert!(plan.validate().is_err());
        plan.keepalive = true;
        plan.pace = Pace::Rate(0.0);
        assert!(plan.validate().is_err());
        plan.pace = Pace::Rate(1e-20);
        assert!(plan.validate().unwrap_err().to_string().contains("0.01..="));
        plan.pace = Pace::Rate(10.0);
        plan.stop = Stop::Duration(Duration::from_secs(u64::MAX / 4));
        let err = plan.validate().unwrap_err().to_string();
        assert!(err.contains("1ms..=30days"), "{err}");
        plan.stop = Stop::Duration(Duration::from_secs(1));
        plan.timeout = Duration::from_secs(7200);
        assert!(plan.validate().unwrap_err().to_string().contains("1h"));
        plan.timeout = Duration::from_secs(1);
        plan.validate().unwrap();
        plan.headers.push(("Bad Name".into(), "v".into()));
        assert!(plan.validate().is_err());
    }

    /// A framing header that disagrees with how the body is sent desynchronises the
    /// connection: refused; one that agrees is harmless.
    #[test]
    fn framing_headers_must_agree_with_the_body() {
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        plan.body = b"hello".to_vec();
        plan.headers = vec![("content-length".into(), "5".into())];
        plan.validate().unwrap();
        plan.headers = vec![("Content-Length".into(), "99".into())];
        let e = plan.validate().unwrap_err().to_string();
        assert!(e.contains("disagrees with the body's 5 bytes"), "{e}");
        plan.body.clear();
        plan.headers = vec![("Content-Length".into(), "5".into())];
        assert!(plan.validate().is_err(), "a GET with no body");
        plan.headers = vec![("Transfer-Encoding".into(), "chunked".into())];
        let e = plan.validate().unwrap_err().to_string();
        assert!(e.contains("never chunked"), "{e}");
    }
}
