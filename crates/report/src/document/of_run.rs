//! [`Report::new`]: the report of a finished run, from its plan and its totals.

use base64::Engine as _;

use super::{
    by_request, confidence, encoded, lower_bounds, percentiles, ratio, stage_figures, stage_plans,
    Config, LateSendsByCause, LittlesLaw, Report, Summary, Tool, SCHEMA_VERSION,
};
use crate::sections::RunSections;
use tailscope_loadgen::conns::Connections;
use tailscope_loadgen::error::ErrorKind;
use tailscope_loadgen::plan::{Arrival, Pace, Plan, Stop};
use tailscope_loadgen::snapshot::RunTotals;

impl Report {
    /// The report of a finished run.
    pub fn new(plan: &Plan, totals: &RunTotals) -> Report {
        let c = &totals.counters;
        let latency = confidence::latency(
            &totals.histograms.latency,
            &decode_seconds(&totals.second_histograms),
        );
        let mut report = Report {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: "tailscope".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            config: config(plan, totals),
            target: None,
            summary: summary(plan, totals),
            latency_us: latency.as_ref().map(|(p, _)| *p),
            latency_ci95: latency.map(|(_, ci)| ci),
            latency_lower_bound: lower_bounds(&totals.histograms.latency, c.unfinished_min_us),
            littles_law: match plan.pace {
                Pace::Max if c.connection_us > 0 => Some(LittlesLaw {
                    connection_s: c.connection_us as f64 / 1e6,
                    accounted_s: c.accounted_us as f64 / 1e6,
                    unaccounted_pct: 100.0
                        * (1.0 - c.accounted_us as f64 / c.connection_us as f64).max(0.0),
                }),
                _ => None,
            },
            latency_uncorrected_us: match plan.pace {
                Pace::Rate(_) => percentiles(&totals.histograms.latency_uncorrected),
                Pace::Max => None,
            },
            connect_us: percentiles(&totals.histograms.connect),
            tls_us: percentiles(&totals.histograms.tls),
            status_codes: c
                .status_codes
                .iter()
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            errors: ErrorKind::ALL
                .iter()
                .map(|k| (k.as_str().to_string(), c.errors[k.index()]))
                .collect(),
            by_request: by_request::by_request(plan, totals),
            timeseries: totals.timeseries.clone(),
            connections: Some(Connections::of(plan, totals)),
            rate_changes: totals.rate_changes.clone(),
            until: None,
            warmup_auto: None,
            stages: Vec::new(),
            interrupted: totals.stopped_early,
            signal: None,
            warnings: Vec::new(),
            slowest: totals.slowest.clone(),
            histogram: encoded(&totals.histograms.latency),
            connect_histogram: Some(encoded(&totals.histograms.connect)),
            tls_histogram: plan.tls.as_ref().map(|_| encoded(&totals.histograms.tls)),
            latency_uncorrected_histogram: match plan.pace {
                Pace::Rate(_) => Some(encoded(&totals.histograms.latency_uncorrected)),
                Pace::Max => None,
            },
            // Already V2-deflate serialized by the aggregator: only base64 is added here.
            second_histograms: totals
                .second_histograms
                .iter()
                .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
                .collect(),
            generator: None,
            merged: None,
            sections: RunSections::default(),
        };
        report.stages = stage_figures(plan, &report.timeseries, &report.second_histograms);
        report.warnings = report.compute_warnings();
        report
    }
}

/// The run's settings as the report records them.
fn config(plan: &Plan, totals: &RunTotals) -> Config {
    Config {
        url: plan.url.clone(),
        method: plan.method.clone(),
        connections: plan.connections,
        threads: plan.effective_threads(),
        pipeline: plan.pipeline,
        mode: plan.mode().into(),
        rate: match plan.pace {
            Pace::Rate(r) => Some(r),
            Pace::Max => None,
        },
        arrival: match plan.pace {
            Pace::Rate(_) => Some(plan.arrival.name().into()),
            Pace::Max => None,
        },
        burst: match plan.arrival {
            Arrival::Burst { size, every } => Some((size, every.as_secs_f64())),
            _ => None,
        },
        stages: stage_plans(&plan.stages),
        duration_s: match plan.stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Requests(_) => None,
        },
        requests: match plan.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration(_) => None,
        },
        warmup_s: plan.warmup.as_secs_f64(),
        timeout_s: plan.timeout.as_secs_f64(),
        connect_timeout_s: plan.connect_timeout.as_secs_f64(),
        keepalive: plan.keepalive,
        cpus: plan.cpus.clone(),
        engine: totals.engine.clone(),
        spin_before_sleep: (totals.engine.name == "tokio")
            .then(|| plan.spin_before_sleep.to_string()),
        connect_rate: plan.connect_rate,
        source_addrs: plan
            .source_ips()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect(),
        idle_conns: plan.idle_conns,
        slow_conns: plan.slow_conns,
        slow_interval_s: (plan.slow_conns > 0).then_some(plan.slow_interval.as_secs_f64()),
        protocol: plan.protocol().into(),
        streams: plan.http2.then_some(plan.streams),
        tls: plan
            .tls
            .as_ref()
            .map(tailscope_loadgen::transport::TlsConfig::of),
    }
}

/// The run's counters as the report sums them up.
fn summary(plan: &Plan, totals: &RunTotals) -> Summary {
    let c = &totals.counters;
    let requests = c.requests();
    let duration_s = totals.duration.as_secs_f64();
    Summary {
        requests,
        successes: c.successes,
        errors: c.error_total(),
        timeouts: c.timeouts(),
        duration_s,
        grace_s: totals.grace.as_secs_f64(),
        rps: if duration_s > 0.0 {
            requests as f64 / duration_s
        } else {
            0.0
        },
        bytes_read: c.bytes_read,
        late_sends: c.late_sends,
        late_sends_by_cause: matches!(plan.pace, Pace::Rate(_)).then(|| LateSendsByCause::of(c)),
        reconnects: c.reconnects,
        aborted: c.aborted,
        still_connecting: c.still_connecting,
        connections_opened: c.connects,
        connect_failures: c.connect_failures,
        unfinished: c.unfinished,
        unfinished_unsent: c.unfinished_unsent,
        unfinished_min_us: c.unfinished_min_us,
        unfinished_max_us: c.unfinished_max_us,
        retransmits: (c.tcp_info_reads > 0).then_some(c.retransmits),
        syn_retransmits: (c.tcp_info_reads > 0).then_some(c.syn_retransmits),
        transport: (plan.tls.is_some() || plan.http2 || c.transport.tls_answers > 0)
            .then(|| c.transport.clone()),
        error_rate: ratio(c.error_total(), requests),
        non2xx: c.non2xx(),
        non2xx_rate: ratio(c.non2xx(), requests),
    }
}

/// The per-second histograms as the aggregator serialized them (V2 deflate), decoded one at a
/// time into what they recorded and gathered as read into the bootstrap's units (a full
/// histogram each, all at once, took ~500 MB at the end of a 40-minute run; the seconds as
/// recorded, all at once, 370 MB at the end of a 6-hour one); one that cannot be read (never,
/// from our own aggregator) is left out.
fn decode_seconds(seconds: &[Vec<u8>]) -> crate::stats::bootstrap::Units {
    let mut decoder = hdrhistogram::serialization::Deserializer::new();
    let mut units = crate::stats::bootstrap::Units::for_run(seconds.len());
    for b in seconds {
        if let Ok(h) = decoder.deserialize::<u64, _>(&mut b.as_slice()) {
            units.push(crate::stats::bootstrap::Second::of(&h));
        }
    }
    units
}
