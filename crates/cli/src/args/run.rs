//! `tailscope run`'s flags, grouped as its help shows them: target, load, request, output,
//! more than one machine, TLS.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Args;
use tailscope_loadgen::plan::{
    MAX_CONNECTIONS, MAX_DURATION, MAX_REQUESTS, MAX_THREADS, MAX_TIMEOUT,
};
use tailscope_loadgen::segment::{parse_start_time, Segment, MAX_SEGMENTS};

use super::{
    count_in, duration_in, parse_cpu_list, parse_pid, parse_rate, CpuList, MAX_PIPELINE, MS,
};

/// `tailscope run URL [flags]` or `tailscope run --target KIND [flags]`.
#[derive(Debug, Args)]
// `-c -1` reaches the value parser (and its range message), not clap's "use '-- -1'" tip.
#[command(allow_negative_numbers = true)]
// One usage line everywhere, as the help lists URL: optional (clap's own line for a refusal
// wrote `<URL>` when one was given, as if it were always required).
#[command(override_usage = "tailscope run [OPTIONS] [URL]")]
pub struct RunArgs {
    /// Target URL: http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH (user:password@HOST
    /// is sent as Basic auth). Not needed with --target, which launches the server, nor with
    /// a --urls-from-file or --load file that names one.
    pub url: Option<String>,
    /// What is under test and where it runs.
    #[command(flatten)]
    pub target: TargetArgs,
    /// How much load and for how long.
    #[command(flatten)]
    pub load: LoadArgs,
    /// What each request is.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Where results go and what must hold.
    #[command(flatten)]
    pub output: OutputArgs,
    /// This generator's share of a load run from several hosts.
    #[command(flatten)]
    pub segment: SegmentArgs,
    /// TLS (https://) and the HTTP version.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The server's side read by a `tailscope agent` on its host.
    #[command(flatten)]
    pub agent_link: AgentLinkArgs,
}

/// `run --agent`: the server profiled by a `tailscope agent` on its own host.
#[derive(Debug, Args)]
#[command(next_help_heading = "Server on another host")]
pub struct AgentLinkArgs {
    /// Read the server's side (CPU, process tree, accept queue, TCP counters) from the
    /// `tailscope agent` at HOST:PORT on the server's host; it profiles --pid there, or the
    /// process listening on the URL's port.
    #[arg(long = "agent", value_name = "HOST:PORT")]
    pub agent: Option<String>,
    /// The file holding the agent's token (its --token-file, or the token it printed).
    #[arg(long = "agent-token", value_name = "FILE")]
    pub agent_token: Option<PathBuf>,
    /// The agent's certificate fingerprint (SHA-256, as it prints it): the run refuses any
    /// other. Without it the certificate presented is taken, and the report says so.
    #[arg(long = "agent-fingerprint", value_name = "SHA256")]
    pub agent_fingerprint: Option<String>,
}

/// TLS for `https://` URLs (rustls) and a launched target's TLS.
#[derive(Debug, Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsArgs {
    /// Accept any server certificate (names and issuers unchecked; handshake signatures
    /// still are).
    #[arg(short = 'k', long = "insecure")]
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file instead of the built-in Mozilla roots.
    #[arg(long = "cacert", value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// Offer this client certificate chain (PEM); needs --key.
    #[arg(long = "cert", value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); needs --cert.
    #[arg(long = "key", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Make every handshake a full one: no session resumption on reconnect.
    #[arg(long = "no-tls-resume")]
    pub no_tls_resume: bool,
    /// Serve the launched target over TLS (nginx: a throw-away self-signed certificate,
    /// trusted for this run); the URL becomes https://.
    #[arg(long = "tls", requires = "target")]
    pub tls: bool,
    /// Speak HTTP/2: h2 via ALPN over https://, h2c (prior knowledge) over http://. With
    /// --target nginx, nginx serves it.
    #[arg(long = "http2")]
    pub http2: bool,
    /// HTTP/2: concurrent streams per connection (the analogue of --pipeline), held below
    /// the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[arg(long = "streams", default_value_t = 1, value_name = "N", requires = "http2", value_parser = count_in::<usize>(1, tailscope_loadgen::plan::MAX_STREAMS as u64))]
    pub streams: usize,
}

impl TlsArgs {
    /// Whether any flag that only means something for https:// was given.
    pub fn any_tls_flag(&self) -> Option<&'static str> {
        [
            (self.insecure, "--insecure"),
            (self.cacert.is_some(), "--cacert"),
            (self.cert.is_some(), "--cert"),
            (self.no_tls_resume, "--no-tls-resume"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// One of N generators (an Indexed Job, a Slurm array, pdsh over ssh), merged afterwards with
/// `tailscope merge`.
#[derive(Debug, Args)]
#[command(next_help_heading = "More than one machine")]
pub struct SegmentArgs {
    /// Take share I of N of the load: -c, -n, -q, --idle-conns and --slow-conns are split so the N shares add up
    /// exactly (e.g. --segment 2/3).
    // A segment is a share of the load on one server: with --target each generator would
    // launch a server of its own.
    #[arg(long = "segment", value_name = "I/N", value_parser = Segment::parse, conflicts_with_all = ["segment_from_env", "target"])]
    pub segment: Option<Segment>,
    /// Read this generator's index, counted from 0, from the environment variable VAR
    /// [default: JOB_COMPLETION_INDEX, set by a Kubernetes Indexed Job]; needs --segments.
    #[arg(
        long = "segment-from-env",
        value_name = "VAR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "JOB_COMPLETION_INDEX",
        requires = "segments",
        conflicts_with = "target"
    )]
    pub segment_from_env: Option<String>,
    /// How many generators share the load, with --segment-from-env.
    #[arg(long = "segments", value_name = "N", requires = "segment_from_env", value_parser = count_in::<usize>(1, MAX_SEGMENTS as u64))]
    pub segments: Option<usize>,
    /// Wait until this wall-clock time, then start (Ctrl-C during the wait sends nothing):
    /// RFC 3339 (2026-01-01T12:00:00Z) or unix seconds, so that N generators overlap.
    #[arg(long = "start-at", value_name = "TIME", value_parser = parse_start_time)]
    pub start_at: Option<SystemTime>,
}

/// The server under test.
#[derive(Debug, Args)]
#[command(next_help_heading = "Target")]
pub struct TargetArgs {
    /// Launch the server, load it, stop it: embedded (the reference server), nginx (one
    /// worker process) or nginx:N (N worker processes), or 'command:CMD ... {port}' (a shell
    /// command; {port} and {cpus} are filled in).
    #[arg(long = "target", value_name = "KIND", conflicts_with = "url")]
    pub target: Option<String>,
    /// Path to load on a launched target [default: /plaintext for embedded and nginx, / for
    /// command:].
    #[arg(long = "path", value_name = "PATH", requires = "target")]
    pub path: Option<String>,
    /// CPUs for the launched server (default: the first half of the CPUs).
    #[arg(long = "server-cpus", value_parser = parse_cpu_list, value_name = "LIST", requires = "target")]
    pub server_cpus: Option<CpuList>,
    /// The process id of the server at URL: the profiler watches it (CPU time, context
    /// switches, service demand) and the report names it.
    #[arg(long = "pid", value_name = "PID", conflicts_with = "target", value_parser = parse_pid)]
    pub pid: Option<u32>,
}

/// Load shape.
#[derive(Debug, Args)]
#[command(next_help_heading = "Load")]
pub struct LoadArgs {
    /// Concurrent connections.
    #[arg(
        short = 'c',
        long = "connections",
        default_value_t = 50,
        value_name = "N",
        value_parser = count_in::<usize>(1, MAX_CONNECTIONS as u64)
    )]
    pub connections: usize,
    /// Run for this long (500ms, 10s, 2m; 1ms to 30days). Default 10s unless -n is given.
    #[arg(short = 'z', long = "duration", value_parser = duration_in(MS, MAX_DURATION), value_name = "DUR", allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Keep the load on until this percentile's 95 % interval is within ±X % of it, checked
    /// every second from the 8th on ('p99±2%', 'p99.9+-5%'; repeatable: until all are);
    /// needs --max-duration, the cap. The report says what was reached and when.
    #[arg(long = "until", value_name = "pN±X%", value_parser = tailscope_session::until::parse_goal)]
    pub until: Vec<tailscope_session::until::Goal>,
    /// With --until: the longest the run may last (1s to 30days).
    #[arg(long = "max-duration", value_parser = duration_in(Duration::from_secs(1), MAX_DURATION), value_name = "DUR", allow_hyphen_values = true)]
    pub max_duration: Option<Duration>,
    /// Send exactly this many measured requests.
    #[arg(short = 'n', long = "requests", value_name = "N", value_parser = count_in::<u64>(1, MAX_REQUESTS as u64))]
    pub requests: Option<u64>,
    /// Open loop: this many requests per second in total (0.01 to 100000000), latency
    /// measured from each request's intended send time (coordinated-omission corrected).
    #[arg(short = 'q', long = "rate", value_name = "RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// HTTP/1.1 pipelining depth: requests in flight per connection.
    #[arg(long = "pipeline", default_value_t = 1, value_name = "N", value_parser = count_in::<usize>(1, MAX_PIPELINE as u64))]
    pub pipeline: usize,
    /// Open a new connection for every request.
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,
    /// Generator threads (default: one per CPU).
    #[arg(long = "threads", value_name = "N", value_parser = count_in::<usize>(1, MAX_THREADS as u64))]
    pub threads: Option<usize>,
    /// Pin generator threads to these CPUs (e.g. 1 or 0,2-3). With --target the default is
    /// the CPUs the server does not get.
    #[arg(long = "cpus", visible_alias = "client-cpus", value_parser = parse_cpu_list, value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// Apply load for this long before measuring; nothing sent in it is recorded. auto: until
    /// the per-second throughput and p99 settle (MSER; at least 10 s, at most 120 s, on
    /// connections of its own), and the report says how long that took.
    #[arg(long = "warmup", value_parser = parse_warmup, value_name = "DUR|auto", allow_hyphen_values = true)]
    pub warmup: Option<WarmupArg>,
    /// Per-request timeout, from when the request began (its connect, if it opened one).
    #[arg(short = 't', long = "timeout", value_parser = duration_in(MS, MAX_TIMEOUT), default_value = "20s", value_name = "DUR", allow_hyphen_values = true)]
    pub timeout: Duration,
    /// Limit on the TCP handshake.
    #[arg(long = "connect-timeout", value_parser = duration_in(MS, MAX_TIMEOUT), default_value = "10s", value_name = "DUR", allow_hyphen_values = true)]
    pub connect_timeout: Duration,
    /// The generator engine: uring (io_uring), tokio (epoll), or auto (the report's
    /// config.engine says which ran and why).
    #[arg(long = "engine", value_enum, default_value_t = Engine::Auto, value_name = "ENGINE")]
    pub engine: Engine,
    /// Before a tokio generator thread sleeps, poll for a response this long, so that a
    /// server on this machine does not pay for waking it: auto (a window that adapts, 0 to
    /// 50µs), a duration up to 1ms, or 0 (off).
    #[arg(long = "spin-before-sleep", value_parser = tailscope_loadgen::SpinBeforeSleep::parse, default_value = "auto", value_name = "auto|DUR")]
    pub spin_before_sleep: tailscope_loadgen::SpinBeforeSleep,
    /// Spread connections over these local addresses (10.0.0.2,10.0.0.3), each with its own
    /// ephemeral ports; auto, for a loopback target: 127.0.0.1, 127.0.0.2, ... as -c needs.
    #[arg(long = "source-addrs", value_parser = tailscope_loadgen::SourceAddrs::parse, value_name = "LIST|auto")]
    pub source_addrs: Option<tailscope_loadgen::SourceAddrs>,
    /// Open new connections at most this fast, in total (500/s): a large -c ramps up
    /// instead of sending every SYN at once. Default: unbounded.
    #[arg(long = "connect-rate", value_parser = tailscope_loadgen::plan::parse_connect_rate, value_name = "N/s")]
    pub connect_rate: Option<f64>,
    /// Hold this many more connections open and silent beside the load, to measure what
    /// holding clients costs the server. They open like the load's (--source-addrs,
    /// --connect-rate, --connect-timeout), are counted apart, are opened again when the
    /// server closes them, and close when the run ends.
    #[arg(long = "idle-conns", default_value_t = 0, value_name = "N", value_parser = count_in::<usize>(0, MAX_CONNECTIONS as u64))]
    pub idle_conns: usize,
    /// Like --idle-conns, but each sends a request head that never ends, one header byte
    /// every --slow-interval (a slowloris client).
    #[arg(long = "slow-conns", default_value_t = 0, value_name = "N", value_parser = count_in::<usize>(0, MAX_CONNECTIONS as u64))]
    pub slow_conns: usize,
    /// The pause between a slow connection's header bytes (--slow-conns).
    #[arg(long = "slow-interval", value_parser = duration_in(MS, MAX_TIMEOUT), default_value = "5s", value_name = "DUR", allow_hyphen_values = true)]
    pub slow_interval: Duration,
    /// `--stages`, `--arrival`, `--burst`.
    #[command(flatten)]
    pub shape: super::ShapeArgs,
}

/// `--warmup`: a fixed length, or until the figures settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmupArg {
    /// This long.
    Fixed(Duration),
    /// Until the per-second figures settle.
    Auto,
}

/// Parses `--warmup`: `auto`, or a duration from 0 to 30 days.
fn parse_warmup(s: &str) -> Result<WarmupArg, String> {
    if s.trim() == "auto" {
        return Ok(WarmupArg::Auto);
    }
    duration_in(Duration::ZERO, MAX_DURATION)(s).map(WarmupArg::Fixed)
}

/// `--engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// io_uring where the kernel has what it needs, tokio otherwise.
    Auto,
    /// io_uring: one ring per generator thread.
    Uring,
    /// tokio: epoll.
    Tokio,
}

impl From<Engine> for tailscope_loadgen::EngineChoice {
    fn from(e: Engine) -> Self {
        match e {
            Engine::Auto => Self::Auto,
            Engine::Uring => Self::Uring,
            Engine::Tokio => Self::Tokio,
        }
    }
}

/// Request shape.
#[derive(Debug, Args)]
#[command(next_help_heading = "Request")]
pub struct RequestArgs {
    /// HTTP method.
    #[arg(
        short = 'm',
        long = "method",
        default_value = "GET",
        value_name = "METHOD"
    )]
    pub method: String,
    /// Extra header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(
        short = 'd',
        long = "body",
        value_name = "BODY",
        conflicts_with = "body_file"
    )]
    pub body: Option<String>,
    /// Request body from a file.
    #[arg(short = 'D', long = "body-file", value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    // Request mixes (issue 21): one contiguous block.
    /// Send the weighted mix of [[request]]s of this TOML load file (name, method, path,
    /// headers, body, weight; see README "Request mixes"), with every figure per name too.
    /// -H adds to every request.
    #[arg(long = "load", value_name = "FILE.toml", conflicts_with_all = ["urls_from_file", "method", "body", "body_file", "path"])]
    pub load: Option<PathBuf>,
    /// Send the requests of this file, one a line: a URL, a path, or METHOD URL with
    /// optional 'Name: value' and @BODYFILE lines after it (vegeta's targets format).
    #[arg(long = "urls-from-file", value_name = "FILE", conflicts_with_all = ["method", "body", "body_file", "path"])]
    pub urls_from_file: Option<PathBuf>,
    /// The order of a mix's requests: round-robin (smooth, by weight) or random (the same
    /// counts in a fixed shuffled order).
    #[arg(long = "url-order", value_parser = tailscope_loadgen::mix::Order::parse, value_name = "ORDER")]
    pub url_order: Option<tailscope_loadgen::mix::Order>,
}

/// Output and CI gates.
#[derive(Debug, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Headless: no live dashboard, only the summary at the end (automatic when stdout is not
    /// a terminal).
    #[arg(long = "no-tui")]
    pub no_tui: bool,
    /// Write the JSON report here ('-' for stdout; the text summary then goes to stderr).
    #[arg(long = "json", value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write the report as a self-contained HTML page with charts (opens offline, prints).
    #[arg(long = "html", value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Write the per-second series as CSV: a header row, then a row a second with the JSON
    /// report's `timeseries` fields, in its units (README "CSV").
    #[arg(long = "csv", value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Write the slowest requests as CSV: a header row, then the JSON report's `slowest`, one
    /// row each, slowest first.
    #[arg(long = "csv-slowest", value_name = "PATH")]
    pub csv_slowest: Option<PathBuf>,
    /// Write the latency as an HdrHistogram interval log (one histogram a second), for
    /// HistogramLogProcessor, hdr-plot and the like.
    #[arg(long = "hdr-log", value_name = "PATH")]
    pub hdr_log: Option<PathBuf>,
    /// Append each finished second to this journal as the run goes (default: beside the first
    /// report output, else in the working directory or $TAILSCOPE_JOURNAL_DIR, named
    /// tailscope-<UTC time>-<pid>.journal). `tailscope report JOURNAL` rebuilds the report from it,
    /// after a crash or kill too (docs/journal.md).
    #[arg(long, value_name = "PATH", conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,
    /// Write no journal.
    #[arg(long = "no-journal")]
    pub no_journal: bool,
    /// Fail (exit 99) unless this holds, e.g. 'p99 < 5ms', 'rps > 50000', 'error_rate < 0.1%'
    /// (repeatable).
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Sample the server's stacks on CPU (perf cpu-clock, 99 Hz per CPU) and its waits off
    /// CPU, and name what it ran or waited in in the slow seconds: auto = when allowed (root,
    /// CAP_PERFMON or kernel.perf_event_paranoid <= 0), waits from /proc thread states; on =
    /// always, waits with their stacks from sched:sched_switch (tracefs is mounted if needed;
    /// costs the server CPU per context switch).
    #[arg(long = "stacks", default_value = "auto", value_name = "auto|on|off")]
    pub stacks: tailscope_session::stacks::StacksMode,
    /// Write a flame graph (SVG) of the server's on-CPU stacks over the whole run.
    #[arg(long = "flamegraph", value_name = "PATH.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write a flame graph (SVG) of the server in the slow seconds only: on-CPU stacks beside
    /// off-CPU waits, in wall time.
    #[arg(long = "flamegraph-slow", value_name = "PATH.svg")]
    pub flamegraph_slow: Option<PathBuf>,
}
