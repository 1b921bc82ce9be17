//! The page of one run: header, key figures, charts, tables of the slowest requests and of the
//! profile, and the diagnosis.

mod by_request;
mod server;

use std::fmt::Write as _;

use crate::document::{
    decode_histogram, fmt_asked_rate, fmt_bytes, fmt_count, fmt_rate, fmt_us, interval_text,
    log_buckets, CiMethodName, Report,
};
use tailscope_forensics::Diagnosis;

use crate::chart::{bar_chart, line_chart, Bar, LineChart, Scale, Series};
use crate::chart_style::*;
use crate::page::{document, escape, footer, kpis, table};

fn cpu_role(report: &Report, cpu: usize) -> &'static str {
    let server = report
        .target
        .as_ref()
        .is_some_and(|t| t.server_cpus.contains(&cpu));
    let generator = report.config.cpus.contains(&cpu);
    match (server, generator) {
        (true, true) => " (server + generator)",
        (true, false) => " (server)",
        (false, true) => " (generator)",
        _ => "",
    }
}

fn header(report: &Report) -> String {
    let c = &report.config;
    let mut out = String::new();
    let _ = writeln!(out, "<h1>{} {}</h1>", escape(&c.method), escape(&c.url));
    let mode = match c.rate {
        Some(r) => format!("open loop at {} req/s", fmt_asked_rate(r)),
        None => "closed loop".into(),
    };
    let mut facts = vec![format!(
        "{mode}, {} connection{}, {} thread{}, pipeline {}",
        fmt_count(c.connections as u64),
        if c.connections == 1 { "" } else { "s" },
        c.threads,
        if c.threads == 1 { "" } else { "s" },
        c.pipeline
    )];
    if let Some(t) = &report.target {
        let pid = t.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        facts.push(format!("server: {}{pid}", t.name));
    }
    // Where the load came from: not the server's host when an agent reads it, one of several
    // with --segment.
    if let Some(host) = report.generator.as_ref().and_then(|g| g.host.as_deref()) {
        facts.push(format!("generator on host {host}"));
    }
    if let Some(a) = report
        .sections
        .findings
        .as_ref()
        .and_then(|f| f.profile.agent.as_ref())
    {
        // The server side came from another host: whose clock, and from when it is missing.
        facts.push(format!(
            "server side read by the agent on {} at {} (clock offset {:+.3} ms ± {:.3} ms){}",
            a.host,
            a.address,
            a.clock_offset_ms,
            a.clock_uncertainty_ms,
            a.lost_at_s.map_or_else(String::new, |at| format!(
                "; lost {at:.1} s into the run: the server side is missing from then on"
            ))
        ));
    }
    facts.push(format!("{} {}", report.tool.name, report.tool.version));
    let _ = writeln!(out, "<p class=\"sub\">{}</p>", escape(&facts.join(" · ")));
    out
}

/// A latency figure, marked `≥` when unfinished requests reach it (a lower bound).
fn latency_figure(report: &Report, name: &str, v: Option<u64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if report.latency_lower_bound.iter().any(|l| l == name) => {
            format!("≥ {}", fmt_us(v))
        }
        Some(v) => fmt_us(v),
    }
}

fn summary(report: &Report) -> String {
    let s = &report.summary;
    let p = report.latency_us.as_ref();
    let lat = |name: &str, v: Option<u64>| latency_figure(report, name, v);
    let mut items = vec![
        ("requests/s", fmt_rate(s.rps)),
        ("requests", fmt_count(s.requests)),
        ("duration", format!("{:.2} s", s.duration_s)),
        ("p50", lat("p50", p.map(|p| p.p50))),
        ("p99", lat("p99", p.map(|p| p.p99))),
        ("p99.9", lat("p999", p.map(|p| p.p999))),
        ("max", lat("max", p.map(|p| p.max))),
        ("errors", fmt_count(s.errors)),
        ("timeouts", fmt_count(s.timeouts)),
        ("non-2xx", fmt_count(s.non2xx)),
        ("transfer", fmt_bytes(s.bytes_read as f64)),
    ];
    if s.unfinished > 0 {
        items.insert(2, ("unfinished", fmt_count(s.unfinished)));
    }
    let mut out = kpis(&items);
    let mut notes: Vec<String> = Vec::new();
    if report.interrupted {
        notes.push(format!(
            "The run was interrupted{} before its end.",
            report
                .signal
                .as_deref()
                .map_or(String::new(), |sig| format!(" by {sig}"))
        ));
    }
    if s.unfinished > 0 {
        notes.push(format!(
            "{} requests were still waiting when the run ended (up to {}): they are in every latency figure at their wait so far, so the figures marked ≥ are lower bounds.",
            fmt_count(s.unfinished),
            s.unfinished_max_us.map_or("n/a".into(), fmt_us)
        ));
    }
    notes.extend(report.warnings.iter().cloned());
    // Reports since the Little's-law warning went into `warnings` have it there already;
    // older ones have only the figures.
    let said = report
        .warnings
        .iter()
        .any(|w| w.contains("is in no request"));
    if let Some(l) = report
        .littles_law
        .as_ref()
        .filter(|l| l.generator_lost_time() && !said)
    {
        notes.push(format!(
            "{:.1} % of the connections' time is in no request: the generator lost time between requests (saturated, or a bug).",
            l.unaccounted_pct
        ));
    }
    for n in notes {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", escape(&n));
    }
    out
}

/// Whether a second of the run's series was one of the load's: the seconds after the load
/// window (the grace period, when only the responses still in flight came back) and a
/// partial last second are no load rate.
fn in_load(report: &Report, p: &tailscope_loadgen::TimePoint) -> bool {
    !p.partial && p.t_s <= report.summary.duration_s + 1e-3
}

/// A chart of lines over the run's seconds (one point a second); `y` is the axis'
/// description, scale and format.
fn over_time(
    id: &str,
    title: &str,
    y: (&str, Scale, &dyn Fn(f64) -> String),
    series: Vec<crate::chart::Series>,
) -> String {
    line_chart(&LineChart {
        id,
        title,
        x_desc: "seconds into the run",
        y_desc: y.0,
        x_scale: Scale::Linear,
        y_scale: y.1,
        x_fmt: &seconds,
        per_second: true,
        y_fmt: y.2,
        series,
    })
}

fn charts(report: &Report, so_far: bool) -> String {
    let ts = &report.timeseries;
    let mut out = String::new();
    let per_second = |f: fn(&tailscope_loadgen::TimePoint) -> u64| -> Vec<(f64, f64)> {
        ts.iter().map(|p| (p.t_s, f(p) as f64)).collect()
    };
    let rates = ts
        .iter()
        .filter(|p| in_load(report, p))
        .map(|p| (p.t_s, p.requests as f64))
        .collect();
    out.push_str(&over_time(
        "throughput",
        "Throughput (requests finished per second)",
        ("requests/s", Scale::Linear, &count_axis),
        vec![series("requests/s", BLUE, rates)],
    ));
    out.push_str(&over_time(
        "latency-over-time",
        "Latency per second (log scale)",
        ("latency", Scale::Log, &us_axis),
        vec![
            series("p50", P50, per_second(|p| p.p50_us)),
            series("p99", P99, per_second(|p| p.p99_us)),
            series("max", MAX, per_second(|p| p.max_us)),
        ],
    ));
    out.push_str(&by_request::charts(report));
    out.push_str(&latency_distribution_charts(report));
    out.push_str(&cpu_busy_chart(report, so_far));
    out.push_str(&over_time(
        "errors-over-time",
        "Errors and timeouts per second",
        ("requests", Scale::Linear, &count_axis),
        vec![
            series("errors", MAX, per_second(|p| p.errors)),
            series("timeouts", P99, per_second(|p| p.timeouts)),
        ],
    ));
    out
}

/// The percentile spectrum and the log-bucketed histogram of the run's latency.
fn latency_distribution_charts(report: &Report) -> String {
    let mut out = String::new();
    let histogram = decode_histogram(&report.histogram).filter(|h| !h.is_empty());
    out.push_str(&spectrum_chart(
        "percentile-spectrum",
        "Percentile spectrum (latency by percentile, log scales)",
        vec![series(
            "latency",
            BLUE,
            histogram.as_ref().map(spectrum).unwrap_or_default(),
        )],
    ));
    let bars: Vec<Bar> = histogram
        .as_ref()
        .map(log_buckets)
        .unwrap_or_default()
        .iter()
        .map(|b| Bar {
            label: fmt_us(b.low_us),
            value: b.count as f64,
            tooltip: format!(
                "{} – {}: {} requests",
                fmt_us(b.low_us),
                fmt_us(b.high_us),
                fmt_count(b.count)
            ),
            whisker: None,
            color: None,
        })
        .collect();
    out.push_str(&bar_chart(
        "histogram",
        "Latency histogram (log buckets)",
        "requests",
        &bars,
        &count_axis,
    ));
    out
}

/// Each CPU's busy share per second, the server's and the generator's marked; while the run
/// goes on, a placeholder until a whole second was measured.
fn cpu_busy_chart(report: &Report, so_far: bool) -> String {
    let ts = &report.timeseries;
    let mut out = String::new();
    let cpus = ts.iter().map(|p| p.cpu_busy_pct.len()).max().unwrap_or(0);
    let mut cpu_series: Vec<Series> = (0..cpus)
        .map(|i| {
            let role = cpu_role(report, i);
            Series {
                // The generator's CPUs dashed, so that a server CPU busy at the same
                // figure (both at 100 %) still shows under or over it.
                dashed: role.contains("generator") && !role.contains("server"),
                ..series(
                    &format!("cpu{i}{role}"),
                    PALETTE[i % PALETTE.len()],
                    ts.iter()
                        .filter_map(|p| p.cpu_busy_pct.get(i).map(|b| (p.t_s, *b)))
                        .collect(),
                )
            }
        })
        .collect();
    // The server's CPUs drawn last, over the others.
    cpu_series.sort_by_key(|s| s.name.contains("server"));
    const CPU_TITLE: &str = "CPU busy per second (server and generator CPUs marked)";
    if so_far && cpu_series.iter().all(|s| s.points.is_empty()) {
        out.push_str(&crate::chart::empty(
            "cpu-busy",
            CPU_TITLE,
            "no whole second of per-CPU busy measured yet (the dashboard shows it live)",
        ));
    } else {
        out.push_str(&over_time(
            "cpu-busy",
            CPU_TITLE,
            ("busy %", Scale::Linear, &|v| format!("{v:.0}%")),
            cpu_series,
        ));
    }
    out
}

/// How the intervals of the latency table were obtained, in a sentence.
fn ci_method_note(report: &Report) -> Option<String> {
    let how = report.latency_ci95.as_ref()?;
    Some(match how.method.name {
        CiMethodName::WiderOfOrderStatisticsAndBlockBootstrap => format!(
            "95 % intervals: the wider of order statistics of the run's histogram and a circular block bootstrap over its {} seconds (blocks of {} s): the seconds of a load test are not independent.",
            how.method.seconds,
            how.method.block_seconds.map_or("n/a".into(), |b| b.to_string())
        ),
        CiMethodName::OrderStatistics => "95 % intervals by order statistics of the run's histogram, which take requests as independent (the run has too few seconds for the bootstrap over them, which does not): read them as a lower bound of the uncertainty.".into(),
    })
}

fn tables(report: &Report) -> String {
    let mut out = String::new();
    if let Some(p) = &report.latency_us {
        out.push_str("<h2>Latency percentiles</h2>\n");
        let rows: Vec<Vec<String>> = [
            ("min", p.min),
            ("p50", p.p50),
            ("p90", p.p90),
            ("p99", p.p99),
            ("p99.9", p.p999),
            ("p99.99", p.p9999),
            ("max", p.max),
        ]
        .iter()
        .map(|(k, v)| {
            let name = match *k {
                "p99.9" => "p999",
                "p99.99" => "p9999",
                other => other,
            };
            let interval = match interval_text(p, report.latency_ci95.as_ref(), name) {
                _ if report.latency_lower_bound.iter().any(|l| l == name) => String::new(),
                Some(Ok(interval)) => interval,
                // The note names its percentile (`p99.99 n/a: …`), which the row already
                // does: twice, it read as a second p99.99 row (a newcomer's finding).
                Some(Err(note)) => note
                    .strip_prefix(&format!("{k} "))
                    .map_or(note.clone(), str::to_string),
                None => String::new(),
            };
            vec![
                (*k).to_string(),
                latency_figure(report, name, Some(*v)),
                interval,
            ]
        })
        .collect();
        out.push_str(&table(&["", "latency", "95 % interval"], &rows));
        if let Some(how) = ci_method_note(report) {
            let _ = writeln!(out, "<p class=\"sub\">{}</p>", escape(&how));
        }
    }
    out.push_str("<h2>Status codes and errors</h2>\n");
    let mut rows: Vec<Vec<String>> = report
        .status_codes
        .iter()
        .map(|(code, n)| vec![format!("[{code}]"), fmt_count(*n)])
        .collect();
    rows.extend(
        report
            .errors
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| vec![kind.clone(), fmt_count(*n)]),
    );
    if rows.is_empty() {
        out.push_str("<p class=\"empty\">no responses and no errors</p>\n");
    } else {
        out.push_str(&table(&["outcome", "requests"], &rows));
    }
    out.push_str(&by_request::table(report));
    out.push_str("<h2>Slowest requests</h2>\n");
    if let Some(line) = report.slowest_by_name() {
        out.push_str(&format!("<p>{}</p>\n", escape(&line)));
    }
    let rows: Vec<Vec<String>> = report
        .slowest
        .iter()
        .map(|r| {
            let mut split: Vec<String> = r.phases().into_iter().map(|(_, p)| p).collect();
            if let Some(name) = &r.request {
                split.insert(0, name.to_string());
            }
            vec![
                if r.unfinished {
                    format!("≥ {}", fmt_us(r.latency_us))
                } else {
                    fmt_us(r.latency_us)
                },
                format!("{:.3} s", r.at_s),
                match (r.status, r.error) {
                    (Some(c), _) => format!("[{c}]"),
                    (None, Some(k)) => k.to_string(),
                    _ if r.unfinished => "unfinished".into(),
                    _ => "?".into(),
                },
                split.join(", "),
                r.retransmits.map_or("n/a".into(), |n| n.to_string()),
                format!("{} / {}", r.worker, r.conn),
            ]
        })
        .collect();
    if rows.is_empty() {
        out.push_str("<p class=\"empty\">none</p>\n");
    } else {
        out.push_str(&table(
            &[
                "latency",
                "began at",
                "outcome",
                "where the time went",
                "retransmits",
                "worker / conn",
            ],
            &rows,
        ));
    }
    out
}

fn diagnosis(report: &Report, so_far: bool) -> String {
    let mut out = String::from("<h2>Diagnosis</h2>\n");
    let Some(findings) = &report.sections.findings else {
        out.push_str(if so_far {
            "<p class=\"empty\">the diagnosis comes at the end of the run (the dashboard's spikes view shows the causes found so far)</p>\n"
        } else {
            "<p class=\"empty\">the run was not diagnosed</p>\n"
        });
        return out;
    };
    if tailscope_forensics::errors_unexplained(report.summary.errors, &findings.diagnosis) {
        out.push_str(&format!(
            "<p>{}.</p>\n",
            escape(&tailscope_forensics::unexplained(report.summary.errors))
        ));
    } else if findings.diagnosis.is_empty() && findings.diagnosis_held_back.is_empty() {
        out.push_str(
            "<p>No spike cause found: no rule's signature and evidence were both there.</p>\n",
        );
    } else if findings.diagnosis.is_empty() {
        out.push_str("<p>No spike cause found: a signature was there, and what held its cause back is said below.</p>\n");
    }
    for d in &findings.diagnosis {
        out.push_str(&cause(d));
    }
    for h in &findings.diagnosis_held_back {
        out.push_str(&format!(
            "<p class=\"held-back\">held back: <b>{}</b>: {}</p>\n",
            h.cause,
            escape(&h.why)
        ));
    }
    out
}

/// One named cause: what, how many requests, when, the evidence, and what the server was
/// doing inside its window when its stacks were sampled.
fn cause(d: &Diagnosis) -> String {
    let window = d
        .window
        .map_or(String::new(), |w| format!(", {}", w.describe()));
    let mut inside = d.requests_line().map_or(String::new(), |r| {
        format!("<div class=\"inside\">requests: {}</div>", escape(&r))
    });
    if let Some(i) = &d.inside {
        inside.push_str(&format!(
            "<div class=\"inside\">inside: {}</div>",
            escape(i)
        ));
    }
    format!(
        "<div class=\"cause\" data-cause=\"{0}\"><strong>{0}</strong> ({1} request{3}{window}): {2}{inside}</div>\n",
        d.cause,
        fmt_count(d.requests_affected),
        escape(&d.evidence),
        if d.requests_affected == 1 { "" } else { "s" }
    )
}

/// The HTML page of a run's report.
pub fn run_page(report: &Report) -> String {
    page_of_run(report, false)
}

/// The HTML page of a run still going (the dashboard's `s`): what only the end of the run
/// brings (the per-CPU busy per second, the diagnosis) is said to come then, not to be
/// missing.
pub fn run_page_so_far(report: &Report) -> String {
    page_of_run(report, true)
}

fn page_of_run(report: &Report, so_far: bool) -> String {
    let mut body = header(report);
    body.push_str(&summary(report));
    body.push_str("<h2>Over time and by percentile</h2>\n");
    body.push_str(&charts(report, so_far));
    body.push_str(&diagnosis(report, so_far));
    body.push_str(&server::section(report));
    body.push_str(&tables(report));
    body.push_str(&footer(&format!(
        "{} {} from its JSON report (schema {})",
        report.tool.name, report.tool.version, report.schema_version
    )));
    document(
        &format!("tailscope: {} {}", report.config.method, report.config.url),
        &body,
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hdrhistogram::Histogram;

    /// The report of a run of `duration_s` with these seconds and one response of 100 µs.
    pub(crate) fn report_of(
        duration_s: u64,
        timeseries: Vec<tailscope_loadgen::TimePoint>,
    ) -> Report {
        let mut latency = Histogram::<u64>::new(3).unwrap();
        latency.record(100).unwrap();
        let totals = tailscope_loadgen::RunTotals {
            duration: std::time::Duration::from_secs(duration_s),
            counters: Default::default(),
            histograms: tailscope_loadgen::recorder::Histograms {
                latency: latency.clone(),
                latency_uncorrected: latency,
                connect: Histogram::new(3).unwrap(),
                tls: Histogram::new(3).unwrap(),
                first_request: Histogram::new(3).unwrap(),
                body: Histogram::new(3).unwrap(),
            },
            timeseries,
            second_histograms: Vec::new(),
            slowest: Vec::new(),
            by_request: Vec::new(),
            request_series: Vec::new(),
            grace: std::time::Duration::ZERO,
            rate_changes: Vec::new(),
            stopped_early: false,
            notes: Vec::new(),
            engine: Default::default(),
            conns_peak: Default::default(),
        };
        let plan = tailscope_loadgen::Plan::new("http://127.0.0.1:1/").unwrap();
        Report::new(&plan, &totals)
    }

    #[test]
    fn a_percentile_without_an_interval_is_named_once() {
        let report = report_of(2, Vec::new());
        let html = tables(&report);
        assert!(html.contains("n/a"), "{html}");
        for label in ["p99.9", "p99.99"] {
            assert!(!html.contains(&format!("{label} n/a")), "{html}");
            assert_eq!(html.matches(&format!(">{label}<")).count(), 1, "{html}");
        }
    }

    #[test]
    fn a_page_saved_during_the_run_says_what_comes_at_the_end() {
        let report = report_of(
            2,
            vec![tailscope_loadgen::TimePoint {
                t_s: 1.0,
                requests: 1,
                ..Default::default()
            }],
        );
        let so_far = run_page_so_far(&report);
        assert!(so_far.contains("no whole second of per-CPU busy measured yet"));
        assert!(so_far.contains("the diagnosis comes at the end of the run"));
        let cpu = &so_far[so_far.find("data-chart=\"cpu-busy\"").unwrap()..];
        let cpu = &cpu[..cpu.find("</figure>").unwrap()];
        assert!(!cpu.contains("nothing was measured"), "{cpu}");
        let finished = run_page(&report);
        assert!(!finished.contains("comes at the end of the run"));
    }

    #[test]
    fn a_cause_shows_what_the_server_was_doing_inside_it() {
        let mut d = Diagnosis {
            cause: tailscope_forensics::Cause::ServerStall,
            evidence: "3 s <with> no response".into(),
            requests_affected: 1200,
            window: None,
            inside: Some("futex_wait in worker (<92 %> of the off-CPU time)".into()),
            requests: Vec::new(),
        };
        let html = cause(&d);
        assert!(html.contains("1,200 requests"), "{html}");
        assert!(html.contains("3 s &lt;with&gt; no response"), "{html}");
        assert!(
            html.contains("<div class=\"inside\">inside: futex_wait in worker (&lt;92 %&gt; of the off-CPU time)</div>"),
            "{html}"
        );
        d.inside = None;
        assert!(!cause(&d).contains("inside"));
    }

    /// The header says on which host the generator ran (the report's `generator.host`).
    #[test]
    fn the_page_names_the_generators_host() {
        let mut report = report_of(2, Vec::new());
        assert!(!header(&report).contains("generator on host"));
        report.generator = Some(crate::document::Generator {
            host: Some("load-1".into()),
            segment: None,
            started_at: "2026-11-28T14:00:00Z".into(),
            started_unix_s: 1_795_874_400.0,
            ended_at: "2026-11-28T14:00:02Z".into(),
            ended_unix_s: 1_795_874_402.0,
            start_at: None,
        });
        let html = header(&report);
        assert!(html.contains("generator on host load-1"), "{html}");
    }

    #[test]
    fn the_page_names_the_agent_that_read_the_server_and_when_it_was_lost() {
        let mut report = report_of(2, Vec::new());
        assert!(!header(&report).contains("agent"));
        let sections = serde_json::json!({
            "profile": {"interval_ms": 100, "duration_s": 3.0, "cpus": [], "target": null,
                        "generator": null, "tcp": null, "notes": [], "source": "agent db-1",
                        "agent": {"address": "10.0.0.5:7070", "host": "db-1",
                                  "clock_offset_ms": -1.25, "clock_uncertainty_ms": 0.5,
                                  "clock_round_trips": 8, "fingerprint": "ab", "pinned": true,
                                  "lost_at_s": 1.5, "lost_because": "closed"}},
            "diagnosis": [],
            "diagnosis_held_back": [],
        });
        report.sections.findings = Some(serde_json::from_value(sections).unwrap());
        let html = header(&report);
        assert!(
            html.contains("server side read by the agent on db-1 at 10.0.0.5:7070 (clock offset -1.250 ms ± 0.500 ms); lost 1.5 s into the run"),
            "{html}"
        );
    }

    /// The page has the server's processes, their CPU and service demand, and the
    /// generator's, as the text summary does (it had none); a URL-only run says why not.
    #[test]
    fn the_page_shows_the_server_processes_cpu_and_service_demand() {
        let mut report = report_of(2, Vec::new());
        let process = |pid: u32, cmd: &str, cpu: f64, alive: bool| {
            serde_json::json!({"pid": pid, "ppid": 1, "comm": "nginx", "command": cmd,
                "user_s": cpu / 2.0, "system_s": cpu / 2.0, "cpu_time_s": cpu,
                "service_demand_us": cpu * 100.0, "voluntary_ctx_switches": 5,
                "involuntary_ctx_switches": 1, "threads": 1, "max_rss_kb": 900,
                "alive_at_end": alive})
        };
        let sections = serde_json::json!({
            "profile": {"interval_ms": 100, "duration_s": 3.0, "cpus": [],
                        "target": {"pid": 10, "root_pid": 10, "cpu_time_s": 1.5, "user_s": 0.5,
                                   "system_s": 1.0, "service_demand_us": 150.0,
                                   "voluntary_ctx_switches": 10, "involuntary_ctx_switches": 2,
                                   "max_rss_kb": 900, "rss_sum_kb": 2700, "threads": 3,
                                   "cpus_allowed": [0], "processes_seen": 3,
                                   "processes_alive_at_end": 2, "exited_cpu_s": 0.25,
                                   "processes": [process(11, "nginx: worker <process>", 1.0, true),
                                                 process(12, "nginx: worker process", 0.25, false),
                                                 process(10, "nginx: master process", 0.25, true)]},
                        "generator": {"cpu_time_s": 0.8, "cpu_us_per_request": 80.0},
                        "tcp": null, "notes": []},
            "diagnosis": [],
            "diagnosis_held_back": [],
        });
        report.sections.findings = Some(serde_json::from_value(sections).unwrap());
        let html = run_page(&report);
        let section = &html[html
            .find("<h2>Server processes</h2>")
            .expect("a server section")..];
        assert!(
            section
                .contains("1.50 s CPU (user 0.50 s, system 1.00 s) = <b>150.00 µs per request</b>"),
            "{section}"
        );
        assert!(
            section.contains("nginx: worker &lt;process&gt;"),
            "{section}"
        );
        assert!(section.contains("exited"), "{section}");
        assert!(
            section.contains("Generator: 0.80 s CPU = 80.00 µs per request"),
            "{section}"
        );
        // A URL alone: said, not a blank.
        let mut url_only = report_of(2, Vec::new());
        let sections = serde_json::json!({
            "profile": {"interval_ms": 100, "duration_s": 3.0, "cpus": [], "target": null,
                        "generator": null, "tcp": null, "notes": []},
            "diagnosis": [],
            "diagnosis_held_back": [],
        });
        url_only.sections.findings = Some(serde_json::from_value(sections).unwrap());
        assert!(run_page(&url_only).contains("Not profiled: a URL alone names no process"));
        // A server named but its processes not in the report (a killed run's rebuild): the
        // notes say why, not that no process was named.
        let mut killed = url_only.clone();
        killed.target = Some(crate::document::TargetInfo {
            kind: "external".into(),
            name: "nginx".into(),
            pid: Some(10),
            command: None,
            server_cpus: Vec::new(),
        });
        let note = "no profile was written before it stopped (the journal writes one a minute)";
        killed.sections.findings.as_mut().unwrap().profile.notes = vec![note.into()];
        let page = run_page(&killed);
        assert!(!page.contains("a URL alone names no process"), "{page}");
        assert!(page.contains(note), "{page}");
    }

    #[test]
    fn a_held_back_cause_is_said_with_its_veto() {
        let mut report = report_of(2, Vec::new());
        let sections = serde_json::json!({
            "profile": {"interval_ms": 100, "duration_s": 3.0, "cpus": [], "target": null,
                        "generator": null, "tcp": null, "notes": []},
            "diagnosis": [],
            "diagnosis_held_back": [{"cause": "server_stall", "why": "a stall <cannot> be told; add --pid"}],
        });
        report.sections.findings = Some(serde_json::from_value(sections).unwrap());
        let html = diagnosis(&report, false);
        assert!(
            html.contains(
                "held back: <b>server_stall</b>: a stall &lt;cannot&gt; be told; add --pid"
            ),
            "{html}"
        );
        assert!(!html.contains("no rule's signature"), "{html}");
        let findings = report.sections.findings.as_mut().unwrap();
        findings.diagnosis_held_back.clear();
        assert!(diagnosis(&report, false).contains("no rule's signature"));
        // Errors no rule explained are the news, not "no spike".
        report.summary.errors = 58_418;
        let html = diagnosis(&report, false);
        assert!(html.contains("58,418 errors, no cause found"), "{html}");
        assert!(!html.contains("No spike cause found"), "{html}");
    }

    /// The latency table gives each percentile's interval, or why it has none, and says how
    /// the intervals were obtained.
    #[test]
    fn the_latency_table_has_each_percentiles_interval_or_why_not() {
        let one = run_page(&report_of(2, Vec::new()));
        assert!(one.contains("95 % interval"), "no interval column");
        assert!(one.contains("n/a: "), "one sample bounds nothing");
        assert!(
            !one.contains("p50 n/a: "),
            "the row names its percentile once"
        );
        let mut latency = Histogram::<u64>::new(3).unwrap();
        for i in 0..10_000u64 {
            latency.record(100 + i % 300).unwrap();
        }
        let totals = tailscope_loadgen::RunTotals::of_latency(
            std::time::Duration::from_secs(2),
            Default::default(),
            latency,
        );
        let plan = tailscope_loadgen::Plan::new("http://127.0.0.1:9/").unwrap();
        let page = run_page(&Report::new(&plan, &totals));
        let p = Report::new(&plan, &totals).latency_us.unwrap();
        let [low, high] = p.ci95.unwrap().p99.unwrap();
        let cell = escape(&format!("({} – {})", fmt_us(low), fmt_us(high)));
        assert!(page.contains(&cell), "no {cell} in the page");
        assert!(page.contains("95 % intervals by order statistics"));
    }
}
