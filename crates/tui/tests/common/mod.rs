//! The fixed run the dashboard tests draw: its info, snapshots, seconds and CPUs.
#![allow(dead_code)]

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;
use tailscope_loadgen::conns::{Gauge, Gauges};
use tailscope_loadgen::recorder::{
    new_histogram, Counters, Percentiles, Phase, SlowRequest, Snapshot, TimePoint,
};
use tailscope_loadgen::{ErrorKind, RequestLive};
use tailscope_targets::listen::ListenSample;
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::TickCounters;
use tailscope_tui::app::{Action, App, RunInfo};
use tailscope_tui::ui::{self};

pub fn info(rate: Option<f64>) -> RunInfo {
    RunInfo {
        target: "GET http://127.0.0.1:8080/plaintext".into(),
        server: Some("embedded (pid 4242)".into()),
        rate,
        pipeline: 1,
        connections: 64,
        threads: 1,
        duration: Some(Duration::from_secs(10)),
        requests: None,
        server_cpus: vec![0],
        stages: Vec::new(),
        client_cpus: vec![1],
    }
}

/// A run 4 s in: a fast mode around 250 µs and a slow mode at 1.6 s (a stall), with timeouts.
pub fn snapshot(tick: u64) -> Snapshot {
    let mut histogram = new_histogram(Duration::from_secs(60));
    for i in 0..10_000u64 {
        histogram.record(200 + i % 100).unwrap();
    }
    for _ in 0..40 {
        histogram.record(1_600_000).unwrap();
    }
    let mut totals = Counters {
        successes: 10_040 + tick * 100,
        ..Counters::default()
    };
    totals.errors[ErrorKind::Timeout.index()] = 3 + tick;
    totals.status_codes = vec![(200, 10_000 + tick * 100), (503, 40)];
    let mut last_tick = Counters {
        successes: 350,
        ..Counters::default()
    };
    last_tick.errors[ErrorKind::Timeout.index()] = if tick % 5 == 0 { 1 } else { 0 };
    let spike = tick == 20;
    let p = Percentiles {
        min: 200,
        mean: 260.0,
        stdev: 30.0,
        p50: 250,
        p75: 270,
        p90: 290,
        p95: 295,
        p99: if spike { 1_600_000 } else { 299 },
        p999: 1_600_000,
        p9999: 1_600_000,
        max: 1_600_000,
        ci95: None,
    };
    Snapshot {
        phase: Phase::Running,
        elapsed: Duration::from_millis(100 * tick),
        warmup_left: Duration::ZERO,
        totals,
        last_tick,
        tick: Duration::from_millis(100),
        latency: p,
        last_tick_latency: Percentiles {
            max: if spike { 1_600_000 } else { 400 },
            ..p
        },
        histogram,
        slowest: vec![SlowRequest {
            at_s: 2.0,
            latency_us: 1_600_000,
            ttfb_us: 1_599_000,
            body_us: 1_000,
            connect_us: Some(1_000_000),
            first_on_connection: true,
            conn: 7,
            status: Some(200),
            ..SlowRequest::default()
        }],
        // The finished seconds: 3,500 req/s, 2 of them timeouts each.
        recent_seconds: (1..=tick / 10)
            .map(|s| second(s as f64, 3_500, 2))
            .collect(),
        spike_counts: Default::default(),
        // Every one of info()'s 64 connections open: no connections line.
        conns: steady(64),
        conns_peak: steady(64),
        by_request: Vec::new(),
        seconds_closed: (tick / 10) as usize,
        new_second_histograms: Vec::new(),
        checkpoint: None,
    }
}

/// `open` load connections, none opening, no held ones.
pub fn steady(open: u64) -> Gauges {
    Gauges {
        load: Gauge {
            open,
            peak_open: open,
            opening: 0,
            peak_opening: 0,
        },
        ..Gauges::default()
    }
}

pub fn second(t_s: f64, requests: u64, errors: u64) -> TimePoint {
    TimePoint {
        t_s,
        partial: false,
        requests,
        errors,
        timeouts: errors,
        unfinished: 0,
        retransmits: 0,
        p50_us: 250,
        p99_us: 299,
        max_us: 400,
        outliers: 0,
        generator_lag_us: 0,
        cpu_busy_pct: Vec::new(),
        connections: Default::default(),
    }
}

pub fn cpus() -> Vec<CpuUsage> {
    vec![
        CpuUsage {
            cpu: 0,
            user_pct: 5.0,
            system_pct: 60.0,
            irq_pct: 0.0,
            softirq_pct: 30.0,
            steal_pct: 0.0,
            idle_pct: 5.0,
        },
        CpuUsage {
            cpu: 1,
            user_pct: 10.0,
            system_pct: 40.0,
            irq_pct: 0.0,
            softirq_pct: 40.0,
            steal_pct: 0.0,
            idle_pct: 10.0,
        },
    ]
}

pub fn app_with_data(rate: Option<f64>) -> App {
    let mut app = App::new(info(rate));
    for tick in 1..=40 {
        app.update(Action::Snapshot(
            std::sync::Arc::new(snapshot(tick)),
            Some(cpus()),
        ));
        // Software counters counted, hardware ones not (a VM without a PMU): IPC is n/a.
        app.update(Action::Counters(TickCounters {
            context_switches_per_s: vec![Some(1961.0), Some(153.0)],
            migrations_per_s: vec![Some(2.0), Some(1.0)],
            ipc: vec![None, None],
        }));
        // The target's listener, filling up in the last ticks.
        app.update(Action::ListenQueue(Some(ListenSample {
            sockets: 1,
            queue: if tick > 38 { 128 } else { 2 },
            backlog: 128,
            full: usize::from(tick > 38),
        })));
    }
    app
}

/// A mix's names as the dashboard gets them: `(name, requests, errors, p50, p99, last
/// second's requests)`.
pub fn mix(names: &[(&str, u64, u64, u64, u64, u64)]) -> Vec<RequestLive> {
    names
        .iter()
        .map(|&(name, requests, errors, p50, p99, last)| RequestLive {
            name: name.into(),
            requests,
            errors,
            latency: Some(Percentiles {
                min: p50 / 2,
                mean: p50 as f64,
                stdev: 1.0,
                p50,
                p75: p50,
                p90: p99,
                p95: p99,
                p99,
                p999: p99,
                p9999: p99,
                max: p99,
                ci95: None,
            }),
            last_second: Some(last),
        })
        .collect()
}

pub fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| ui::render(app, f)).unwrap();
    terminal.backend().to_string()
}
