//! The text summary of a run (`Report::to_text`, in the spirit of oha and wrk) and the
//! headless progress line.

use std::fmt::Write as _;

use super::fmt::{
    cpu_list, fmt_asked_rate, fmt_bytes, fmt_count, fmt_pct, fmt_rate, fmt_us, plural,
};
use super::histogram::histogram_bars;
use super::{decode_histogram, ratio, LateSendsByCause, Report};
use tailscope_loadgen::snapshot::{Percentiles, Snapshot};
use tailscope_loadgen::Phase;

impl LateSendsByCause {
    /// The late sends by cause in words: "18,100 while the generator's thread waited for a
    /// CPU, 3,000 for a free connection, 553 the generator's own".
    pub(super) fn describe(&self) -> String {
        let cpu = match self.waited_for_cpu {
            Some(n) => format!(
                "{} while the generator's thread waited for a CPU",
                fmt_count(n)
            ),
            None => "the generator's wait for a CPU n/a (no schedstat)".to_string(),
        };
        format!(
            "{cpu}, {} for a free connection, {} the generator's own",
            fmt_count(self.no_free_connection),
            fmt_count(self.generator)
        )
    }
}

impl Report {
    /// The text summary, in the spirit of oha and wrk.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_run_header(&mut out);
        self.write_request_counts(&mut out);
        self.write_connections(&mut out);
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        let _ = writeln!(out);
        self.write_latencies(&mut out);
        self.write_status_codes_and_errors(&mut out);
        self.write_slowest(&mut out);
        out
    }

    /// The summary's first lines: target, server, load, engine, duration, how the run ended and its rate changes.
    fn write_run_header(&self, out: &mut String) {
        let s = &self.summary;
        let c = &self.config;
        let _ = writeln!(out, "Summary:");
        let mode = match c.rate {
            Some(r) => format!("open loop at {} req/s", fmt_asked_rate(r)),
            None => "closed loop".to_string(),
        };
        if self.by_request.is_empty() {
            let _ = writeln!(out, "  Target:        {} {}", c.method, c.url);
        } else {
            let _ = writeln!(
                out,
                "  Target:        {} (a mix of {} {}, by request below)",
                tailscope_loadgen::plan::url_shown(&c.url, true),
                self.by_request.len(),
                if self.by_request.len() == 1 {
                    "request"
                } else {
                    "requests"
                }
            );
        }
        if let Some(t) = &self.target {
            let pid = t.pid.map_or(String::new(), |p| format!(" (pid {p})"));
            let cpus = if t.server_cpus.is_empty() {
                String::new()
            } else {
                format!(" on CPU {}", cpu_list(&t.server_cpus))
            };
            let gen = if c.cpus.is_empty() {
                String::new()
            } else {
                format!("; generator on CPU {}", cpu_list(&c.cpus))
            };
            let _ = writeln!(out, "  Server:        {}{pid}{cpus}{gen}", t.name);
        }
        let _ = writeln!(
            out,
            "  Load:          {mode}, {} connection{}, {} thread{}, {}{}",
            fmt_count(c.connections as u64),
            plural(c.connections),
            c.threads,
            plural(c.threads),
            match c.streams {
                Some(s) => format!("{}, {s} stream{} per connection", c.protocol, plural(s)),
                None => format!("pipeline {}", c.pipeline),
            },
            if c.keepalive { "" } else { ", no keep-alive" }
        );
        if !c.engine.name.is_empty() {
            let _ = writeln!(
                out,
                "  Engine:        {} ({})",
                c.engine.name, c.engine.reason
            );
        }
        let _ = writeln!(
            out,
            "  Duration:      {}{}, then {:.2} s for responses in flight",
            // A run of a few requests (-n 1) ends in milliseconds: "0.00 s" beside its
            // Requests/sec read as a rate from nothing.
            if s.duration_s < 0.1 {
                fmt_us((s.duration_s * 1e6).round() as u64)
            } else {
                format!("{:.2} s", s.duration_s)
            },
            match &self.warmup_auto {
                Some(w) => format!(" ({})", w.describe()),
                None if c.warmup_s > 0.0 => format!(" (after {:.1} s warm-up)", c.warmup_s),
                None => String::new(),
            },
            s.grace_s
        );
        if let Some(until) = &self.until {
            out.push_str(&until.text());
        }
        if self.interrupted {
            let _ = writeln!(
                out,
                "  Interrupted:   {}; the run was cut short",
                match &self.signal {
                    Some(sig) => format!("by {sig}"),
                    None => "stopped from the dashboard".to_string(),
                }
            );
        }
        if !self.rate_changes.is_empty() {
            let changes: Vec<String> = self
                .rate_changes
                .iter()
                .map(|r| {
                    format!(
                        "{} req/s at {:.1} s",
                        fmt_count(r.rate.round() as u64),
                        r.t_s
                    )
                })
                .collect();
            let _ = writeln!(out, "  Rate changes:  {}", changes.join(", "));
        }
    }

    /// Requests, their rate, successes, errors, transfer and (open loop) late sends.
    fn write_request_counts(&self, out: &mut String) {
        let s = &self.summary;
        let c = &self.config;
        let _ = writeln!(out, "  Requests:      {}", fmt_count(s.requests));
        let _ = writeln!(out, "  Requests/sec:  {}", fmt_rate(s.rps));
        // Requests count every slot that fell due (open loop) and every failure: when many
        // got no response, the rate the server answered at is not the one above (a
        // newcomer's gunicorn read "Requests/sec: 20,000.0" at -q 20000 while it answered
        // 9.2 k/s, 32,381 requests unfinished).
        if s.duration_s > 0.0 && s.successes * 100 < s.requests * 99 {
            let _ = writeln!(
                out,
                "  Answered/sec:  {} ({} of the {} requests got a response; {} failed, {} unfinished)",
                fmt_rate(s.successes as f64 / s.duration_s),
                fmt_count(s.successes),
                fmt_count(s.requests),
                fmt_count(s.errors),
                fmt_count(s.unfinished)
            );
        }
        let _ = writeln!(
            out,
            "  Successes:     {} ({:.2} %)",
            fmt_count(s.successes),
            100.0 * ratio(s.successes, s.requests)
        );
        if s.successes > 0 {
            let _ = writeln!(
                out,
                "  Non-2xx:       {} ({} % of responses)",
                fmt_count(s.non2xx),
                fmt_pct(100.0 * s.non2xx as f64 / s.successes as f64)
            );
        }
        let _ = writeln!(
            out,
            "  Errors:        {} (timeouts {})",
            fmt_count(s.errors),
            fmt_count(s.timeouts)
        );
        let _ = writeln!(
            out,
            "  Transfer:      {} ({}/s)",
            fmt_bytes(s.bytes_read as f64),
            fmt_bytes(if s.duration_s > 0.0 {
                s.bytes_read as f64 / s.duration_s
            } else {
                0.0
            })
        );
        if c.rate.is_some() {
            // Only requests that left can leave late: at -q 50000 against a server that
            // answered 960/s, "2,886 (1.9 %)" read as 98 % sent on time, while nearly every
            // request sent was late and 147,120 of 150,000 were still unfinished, most of
            // them never sent.
            let unsent = if s.unfinished > 0 {
                format!(
                    "; any requests that never left are among the {} unfinished, not here",
                    fmt_count(s.unfinished)
                )
            } else {
                String::new()
            };
            let _ = match s.late_sends_by_cause.filter(|_| s.late_sends > 0) {
                Some(by) => writeln!(
                    out,
                    "  Late sends:    {} ({} % of requests; {}): left more than 1 ms after their intended time{unsent}",
                    fmt_count(s.late_sends),
                    fmt_pct(100.0 * ratio(s.late_sends, s.requests)),
                    by.describe()
                ),
                None => writeln!(
                    out,
                    "  Late sends:    {} (left more than 1 ms after their intended time{unsent})",
                    fmt_count(s.late_sends)
                ),
            };
        }
    }

    /// Connections opened and held, and the requests the run ended with: unfinished, aborted, still connecting.
    fn write_connections(&self, out: &mut String) {
        let s = &self.summary;
        let c = &self.config;
        if s.reconnects > 0 {
            let _ = writeln!(
                out,
                "  Reconnects:    {} (connections opened again after one closed: by the server, a timeout or --no-keepalive)",
                fmt_count(s.reconnects)
            );
        }
        let conns = self.connections.as_ref();
        let held_asked = c.idle_conns + c.slow_conns > 0;
        if c.connect_rate.is_some() || s.connect_failures > 0 || held_asked {
            let limit = c
                .connect_rate
                .map_or(String::new(), |r| format!(" (--connect-rate {r}/s)"));
            let peak = conns.map_or(String::new(), |k| {
                format!(", at most {} open at once", fmt_count(k.peak_open))
            });
            let _ = writeln!(
                out,
                "  Connections:   {} opened, {} connects failed{peak}{limit}",
                fmt_count(s.connections_opened),
                fmt_count(s.connect_failures)
            );
        }
        for (label, held) in [
            ("Idle conns:", conns.and_then(|k| k.idle.as_ref())),
            ("Slow conns:", conns.and_then(|k| k.slow.as_ref())),
        ] {
            if let Some(h) = held {
                let _ = writeln!(out, "  {label:<14} {}", held_line(h));
            }
        }
        if s.unfinished > 0 {
            let waits = match (s.unfinished_min_us, s.unfinished_max_us) {
                (Some(lo), Some(hi)) if lo == hi => format!("waited {}", fmt_us(hi)),
                (Some(lo), Some(hi)) => format!("waited {} to {}", fmt_us(lo), fmt_us(hi)),
                _ => String::from("waits unknown"),
            };
            let _ = writeln!(
                out,
                "  Unfinished:    {} still waiting when the run ended ({waits}); counted at their wait so far, a lower bound",
                fmt_count(s.unfinished)
            );
        }
        if s.aborted > 0 {
            let _ = writeln!(
                out,
                "  Aborted:       {} lost by the generator at the end (not counted: a generator bug)",
                fmt_count(s.aborted)
            );
        }
        if s.still_connecting > 0 {
            let _ = writeln!(
                out,
                "  Connecting:    {} still opening at the end",
                fmt_count(s.still_connecting)
            );
        }
    }

    /// The latency percentiles (corrected and, open loop, uncorrected), connect and TLS times and the histogram.
    fn write_latencies(&self, out: &mut String) {
        let c = &self.config;
        let title = if c.rate.is_some() {
            "Latency (from intended send time; coordinated omission corrected):"
        } else {
            "Latency:"
        };
        write_percentiles(
            out,
            title,
            self.latency_us.as_ref(),
            &self.latency_lower_bound,
            self.latency_ci95.as_ref(),
        );
        if c.rate.is_some() {
            write_percentiles(
                out,
                "Latency from actual send (uncorrected):",
                self.latency_uncorrected_us.as_ref(),
                &[],
                None,
            );
        }
        if let Some(p) = &self.connect_us {
            let _ = writeln!(
                out,
                "Connect:         min {}  p50 {}  p99 {}  max {}\n",
                fmt_us(p.min),
                fmt_us(p.p50),
                fmt_us(p.p99),
                fmt_us(p.max)
            );
        }
        if let Some(p) = &self.tls_us {
            let resumed = match &self.summary.transport {
                Some(t) if t.tls_handshakes > 0 => format!(
                    "  ({} of {} handshakes resumed)",
                    fmt_count(t.tls_resumed),
                    fmt_count(t.tls_handshakes)
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "TLS handshake:   min {}  p50 {}  p99 {}  max {}{resumed}\n",
                fmt_us(p.min),
                fmt_us(p.p50),
                fmt_us(p.p99),
                fmt_us(p.max)
            );
        }
        if let Some(h) = decode_histogram(&self.histogram).filter(|h| !h.is_empty()) {
            let _ = writeln!(out, "Latency histogram:");
            out.push_str(&histogram_bars(&h, 40));
            let _ = writeln!(out);
        }
    }

    /// Status codes, errors by kind and the per-name table of a mix.
    fn write_status_codes_and_errors(&self, out: &mut String) {
        let _ = writeln!(out, "Status codes:");
        if self.status_codes.is_empty() {
            let _ = writeln!(out, "  (no responses)");
        }
        for (code, n) in &self.status_codes {
            let _ = writeln!(out, "  [{code}] {} responses", fmt_count(*n));
        }
        let errors: Vec<_> = self.errors.iter().filter(|(_, n)| **n > 0).collect();
        if !errors.is_empty() {
            let _ = writeln!(out, "\nErrors:");
            for (kind, n) in errors {
                let _ = writeln!(out, "  {kind}: {}", fmt_count(*n));
            }
        }
        if !self.by_request.is_empty() {
            out.push_str(&self.by_request_table());
        }
    }

    /// The slowest requests kept, with their phases.
    fn write_slowest(&self, out: &mut String) {
        if !self.slowest.is_empty() {
            let _ = writeln!(out, "\nSlowest requests:");
            if let Some(line) = self.slowest_by_name() {
                let _ = writeln!(out, "  {line}");
            }
            for r in self.slowest.iter().take(5) {
                let outcome = match (r.status, r.error) {
                    (Some(code), _) => code.to_string(),
                    (None, Some(kind)) => kind.to_string(),
                    (None, None) if r.unfinished => "unfinished".into(),
                    (None, None) => "?".into(),
                };
                let mut parts: Vec<String> = r.phases().into_iter().map(|(_, p)| p).collect();
                if r.first_on_connection {
                    parts.push("first on its connection".to_string());
                }
                if let Some(name) = &r.request {
                    parts.insert(0, name.to_string());
                }
                let _ = writeln!(
                    out,
                    "  {:>9}  at {:>7.3} s  [{}]  {}  (worker {}, conn {})",
                    if r.unfinished {
                        format!("≥ {}", fmt_us(r.latency_us))
                    } else {
                        fmt_us(r.latency_us)
                    },
                    r.at_s,
                    outcome,
                    parts.join(", "),
                    r.worker,
                    r.conn
                );
            }
        }
    }
}

impl Report {
    /// The per-name table of a mix: requests, share, errors, non-2xx and latency.
    fn by_request_table(&self) -> String {
        let mut out = String::new();
        let width = self
            .by_request
            .keys()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
            .max(7);
        let _ = writeln!(out, "\nBy request:");
        let _ = writeln!(
            out,
            "  {:<width$}  {:>9}  {:>6}  {:>7}  {:>7}  {:>9}  {:>9}  {:>9}  {:>9}",
            "request", "requests", "share", "errors", "non-2xx", "p50", "p90", "p99", "max"
        );
        for (name, r) in &self.by_request {
            let lat = |f: fn(&Percentiles) -> u64| {
                r.latency_us
                    .as_ref()
                    .map_or_else(|| "n/a".to_string(), |p| fmt_us(f(p)))
            };
            let _ = writeln!(
                out,
                "  {:<width$}  {:>9}  {:>5.1}%  {:>7}  {:>7}  {:>9}  {:>9}  {:>9}  {:>9}",
                name,
                fmt_count(r.requests),
                r.share * 100.0,
                fmt_count(r.errors),
                fmt_count(r.non2xx),
                lat(|p| p.p50),
                lat(|p| p.p90),
                lat(|p| p.p99),
                lat(|p| p.max),
            );
        }
        out
    }

    /// Which request names the slowest requests kept were, the commonest first: "80 % of
    /// the 10 slowest were search (GET /search); the others: 2 upload (POST /upload)". None
    /// without a mix.
    pub fn slowest_by_name(&self) -> Option<String> {
        let counts = tailscope_loadgen::snapshot::count_by_request(&self.slowest);
        if counts.is_empty() {
            return None;
        }
        let named: u64 = counts.iter().map(|(_, k)| k).sum();
        // A request named by default is named by its request line (a URL list's): said
        // once, not "GET /a (GET /a)".
        let describe = |name: &str| match self.by_request.get(name) {
            Some(r) if name != format!("{} {}", r.method, r.target) => {
                format!("{name} ({} {})", r.method, r.target)
            }
            _ => name.to_string(),
        };
        let mut rest: Vec<String> = counts
            .iter()
            .skip(1)
            .map(|(n, k)| format!("{k} {}", describe(n)))
            .collect();
        let unnamed = self.slowest.len() as u64 - named;
        if unnamed > 0 {
            rest.push(format!("{unnamed} not sent yet (no request picked)"));
        }
        let (top, k) = counts[0];
        let mut line = format!(
            "{} % of the {} slowest were {}",
            100 * k / self.slowest.len() as u64,
            self.slowest.len(),
            describe(top)
        );
        if !rest.is_empty() {
            line.push_str(&format!("; the others: {}", rest.join(", ")));
        }
        Some(line)
    }
}

/// `lower` names the percentiles that are lower bounds (unfinished requests reach them):
/// they print as `≥ 2.00s`, and so do the mean and stdev then. Each percentile is followed
/// by its 95 % interval where `p` has them (`p99  1.15ms  (1.09ms – 1.22ms)`), and one that
/// `ci` says cannot be bounded prints its note in place of the number.
fn write_percentiles(
    out: &mut String,
    title: &str,
    p: Option<&Percentiles>,
    lower: &[String],
    ci: Option<&super::LatencyCi95>,
) {
    let _ = writeln!(out, "{title}");
    let Some(p) = p else {
        let _ = writeln!(out, "  n/a (no complete responses)\n");
        return;
    };
    let at_least = |name: &str, v: u64| {
        if lower.iter().any(|l| l == name) {
            format!("≥ {}", fmt_us(v))
        } else {
            fmt_us(v)
        }
    };
    let mean_bound = if lower.is_empty() { "" } else { "≥ " };
    let _ = writeln!(
        out,
        "  min {}  mean {mean_bound}{}  stdev {}  max {}",
        at_least("min", p.min),
        fmt_us(p.mean.round() as u64),
        fmt_us(p.stdev.round() as u64),
        at_least("max", p.max)
    );
    for (label, name, v) in [
        ("p50", "p50", p.p50),
        ("p75", "p75", p.p75),
        ("p90", "p90", p.p90),
        ("p95", "p95", p.p95),
        ("p99", "p99", p.p99),
        ("p99.9", "p999", p.p999),
        ("p99.99", "p9999", p.p9999),
    ] {
        let line = match super::interval_text(p, ci, name) {
            // An interval of a lower bound bounds the wrong figure: the number alone.
            _ if lower.iter().any(|l| l == name) => at_least(name, v),
            Some(Ok(interval)) => format!("{:<9} {interval}", fmt_us(v)),
            Some(Err(note)) => note.trim_start_matches(label).trim_start().to_string(),
            None => fmt_us(v),
        };
        let _ = writeln!(out, "  {label:>7}  {line}");
    }
    if p.ci95.is_some() {
        let how = match ci.map(|c| c.method.name) {
            Some(super::CiMethodName::WiderOfOrderStatisticsAndBlockBootstrap) => {
                "95 % intervals: the wider of order statistics and a block bootstrap over the seconds"
            }
            _ => "95 % intervals by order statistics (too few seconds for the bootstrap over them)",
        };
        let _ = writeln!(out, "  ({how})");
    }
    if !lower.is_empty() {
        let _ = writeln!(
            out,
            "  (≥: unfinished requests reach this figure; their true latency is longer)"
        );
    }
    let _ = writeln!(out);
}

/// The headless progress line of a run so far: req/s, p50, p99, max and errors.
pub fn progress_line(snap: &Snapshot) -> String {
    // The last finished second, not a tick ×10: a tick may carry two intervals of a
    // worker, or none (see tailscope_tui::ui::ThroughputPanel).
    let rate = snap
        .recent_seconds
        .last()
        .map_or("n/a".to_string(), |p| fmt_rate(p.requests as f64));
    match snap.phase {
        Phase::WarmingUp => format!("warming up, {:.1} s left", snap.warmup_left.as_secs_f64()),
        _ => format!(
            "{:>6.1} s  {:>12} req/s  p50 {:>8}  p99 {:>8}  max {:>8}  errors {}",
            snap.elapsed.as_secs_f64(),
            rate,
            fmt_us(snap.latency.p50),
            fmt_us(snap.latency.p99),
            fmt_us(snap.latency.max),
            fmt_count(snap.totals.error_total()),
        ),
    }
}

/// What became of one population of held connections, for the summary.
fn held_line(h: &tailscope_loadgen::conns::HeldReport) -> String {
    let k = &h.counters;
    let every = h
        .byte_interval_s
        .map_or(String::new(), |i| format!(" (a header byte every {i} s)"));
    format!(
        "{} asked{every}: {} opened, at most {} open at once, {} open at the end; {} closed by the server, {} failed, {} connects failed",
        fmt_count(h.asked),
        fmt_count(k.opened),
        fmt_count(h.peak_open),
        fmt_count(k.open_at_end),
        fmt_count(k.closed_by_server),
        fmt_count(k.failed),
        fmt_count(k.connect_failures)
    )
}
