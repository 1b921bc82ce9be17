//! The dashboard drawn from fixed data: widgets against exact buffers, whole views as insta
//! snapshots at a roomy and at the smallest supported size, and key handling through
//! `App::update`.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;
use ratatui::Terminal;
use tailscope_forensics::{Cause, Diagnosis, Window};
use tailscope_loadgen::recorder::{
    new_histogram, Counters, Percentiles, Phase, SlowRequest, Snapshot, TimePoint,
};
use tailscope_loadgen::ErrorKind;
use tailscope_targets::listen::ListenSample;
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::TickCounters;
use tailscope_targets::stacks::{LiveInside, SecondInside, Share};
use tailscope_tui::app::{key_action, Action, App, Effect, RunInfo, View};
use tailscope_tui::ui::fit::cut_fields;
use tailscope_tui::ui::{self, FooterPanel};

fn info(rate: Option<f64>) -> RunInfo {
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
        client_cpus: vec![1],
    }
}

/// A run 4 s in: a fast mode around 250 µs and a slow mode at 1.6 s (a stall), with timeouts.
fn snapshot(tick: u64) -> Snapshot {
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
            tls_us: None,
            queued_us: None,
            first_on_connection: true,
            conn: 7,
            worker: 0,
            status: Some(200),
            error: None,
            unfinished: false,
            stage: None,
            retransmits: None,
            rtt_us: None,
            rto_us: None,
        }],
        // The finished seconds: 3,500 req/s, 2 of them timeouts each.
        recent_seconds: (1..=tick / 10)
            .map(|s| second(s as f64, 3_500, 2))
            .collect(),
        spike_counts: Default::default(),
    }
}

fn second(t_s: f64, requests: u64, errors: u64) -> TimePoint {
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
    }
}

#[test]
fn throughput_is_drawn_per_finished_second_not_per_tick() {
    // One tick that brought two intervals of a worker (700 responses in 100 ms, "7,000/s")
    // must not show: the panel shows the last finished second, 3,500 req/s.
    let mut app = App::new(info(None));
    let mut snap = snapshot(25);
    snap.last_tick.successes = 700;
    app.update(Action::Snapshot(Box::new(snap), None));
    let rates = tailscope_tui::ui::per_second_rates(&app);
    assert_eq!(rates.len(), 2);
    assert_eq!(rates[1], (2.0, 3_498.0, 2.0));
    let area = Rect::new(0, 0, 70, 12);
    let mut buf = Buffer::empty(area);
    (&ui::ThroughputPanel(&app)).render(area, &mut buf);
    let text: String = (0..area.width)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect();
    assert!(text.contains("last second 3.5k req/s"), "{text}");
    assert!(!text.contains("7.0k"), "{text}");
    // Before any second has finished there is no rate to show.
    let mut app = App::new(info(None));
    app.update(Action::Snapshot(Box::new(snapshot(5)), None));
    let mut buf = Buffer::empty(area);
    (&ui::ThroughputPanel(&app)).render(area, &mut buf);
    let text: String = (0..area.width)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect();
    assert!(text.contains("last second n/a"), "{text}");
}

fn cpus() -> Vec<CpuUsage> {
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

fn app_with_data(rate: Option<f64>) -> App {
    let mut app = App::new(info(rate));
    for tick in 1..=40 {
        app.update(Action::Snapshot(Box::new(snapshot(tick)), Some(cpus())));
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

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| ui::render(app, f)).unwrap();
    terminal.backend().to_string()
}

#[test]
fn overview_120x40() {
    insta::assert_snapshot!(screen(&app_with_data(None), 120, 40));
}

#[test]
fn overview_80x24_hides_panels_instead_of_garbling() {
    let text = screen(&app_with_data(None), 80, 24);
    assert!(
        !text.contains("Latency per tick"),
        "the latency chart is dropped at 80×24"
    );
    assert!(text.contains("Throughput") && text.contains("Status & errors"));
    insta::assert_snapshot!(text);
}

#[test]
fn latency_view_120x40() {
    let mut app = app_with_data(None);
    app.update(Action::Show(View::Latency));
    let text = screen(&app, 120, 40);
    assert!(
        text.contains("1.00s–2.00s"),
        "the 1.6 s mode has its own bar"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn cores_view_120x40() {
    let mut app = app_with_data(None);
    app.update(Action::Diagnosis(vec![Diagnosis {
        cause: Cause::AcceptQueueOverflow,
        evidence: "40 requests on new connections took ~1 s (40): SYN retransmits after the listen queue overflowed (ListenOverflows +52)".into(),
        requests_affected: 40,
        window: Some(Window {
            start_s: 2.0,
            end_s: 3.02,
            open_ended: false,
        }),
        inside: None,
    }]));
    app.update(Action::Show(View::Cores));
    let text = screen(&app, 120, 40);
    assert!(text.contains("cpu0  S") && text.contains("cpu1   G"));
    assert!(
        text.contains("cpu0  ctx/s 1961 migr/s 2 IPC n/a"),
        "counters, and n/a where not counted"
    );
    assert!(
        text.contains("connect 1.00s"),
        "the slow request's split is shown"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn help_overlay_and_a_tiny_terminal() {
    let mut app = app_with_data(Some(1000.0));
    app.update(Action::ToggleHelp);
    insta::assert_snapshot!(screen(&app, 80, 24));
    assert!(screen(&app, 30, 6).contains("terminal too small"));
}

#[test]
fn histogram_rows_keep_the_modes_when_space_runs_short() {
    use tailscope_loadgen::report::Bucket;
    use tailscope_tui::ui::fit_rows;
    let b = |low: u64, count: u64| Bucket {
        low_us: low,
        high_us: low * 2,
        count,
    };
    let buckets = [
        b(100, 900),
        b(200, 80),
        b(500, 0),
        b(1000, 0),
        b(2000, 0),
        b(5000, 0),
        b(10000, 15),
    ];
    let counts =
        |rows: Vec<Option<&Bucket>>| rows.iter().map(|r| r.map(|b| b.count)).collect::<Vec<_>>();
    assert_eq!(fit_rows(&buckets, 10).len(), 7, "everything fits");
    assert_eq!(
        counts(fit_rows(&buckets, 4)),
        vec![Some(900), Some(80), None, Some(15)],
        "the gap is folded"
    );
    assert_eq!(
        counts(fit_rows(&buckets, 2)),
        vec![Some(900), Some(80)],
        "the fullest stay, in order"
    );
}

#[test]
fn footer_widget_marks_the_current_view() {
    let mut app = App::new(info(None));
    app.update(Action::Show(View::Latency));
    let area = Rect::new(0, 0, 77, 1);
    let mut buf = Buffer::empty(area);
    (&FooterPanel(&app)).render(area, &mut buf);
    // Short of room, the long tab titles take their short forms before a key is dropped.
    let mut want = Buffer::with_lines([
        " 1 Overview  2 Latency  3 Cores  4 Inside   q quit · p freeze · +/- rate     ",
    ]);
    // Styles are checked separately: only the current view is reversed.
    want.set_style(area, buf.cell((0, 0)).unwrap().style());
    assert_eq!(
        buf.content.iter().map(|c| c.symbol()).collect::<String>(),
        want.content.iter().map(|c| c.symbol()).collect::<String>()
    );
    let reversed = |x: u16| {
        buf.cell((x, 0))
            .unwrap()
            .modifier
            .contains(ratatui::style::Modifier::REVERSED)
    };
    assert!(reversed(14), "'2 Latency' is highlighted");
    assert!(!reversed(3), "'1 Overview' is not");
}

#[test]
fn keys_map_to_actions() {
    let key = |c: KeyCode, m: KeyModifiers| key_action(KeyEvent::new(c, m));
    assert!(matches!(
        key(KeyCode::Char('q'), KeyModifiers::NONE),
        Some(Action::Quit)
    ));
    assert!(matches!(
        key(KeyCode::Esc, KeyModifiers::NONE),
        Some(Action::Quit)
    ));
    assert!(matches!(
        key(KeyCode::Char('c'), KeyModifiers::CONTROL),
        Some(Action::Quit)
    ));
    assert!(key(KeyCode::Char('c'), KeyModifiers::NONE).is_none());
    assert!(matches!(
        key(KeyCode::Tab, KeyModifiers::NONE),
        Some(Action::NextView)
    ));
    assert!(matches!(
        key(KeyCode::Char('3'), KeyModifiers::NONE),
        Some(Action::Show(View::Cores))
    ));
    assert!(matches!(
        key(KeyCode::Char('4'), KeyModifiers::NONE),
        Some(Action::Show(View::Inside))
    ));
    assert!(matches!(
        key(KeyCode::Char('+'), KeyModifiers::NONE),
        Some(Action::RateUp)
    ));
    assert!(matches!(
        key(KeyCode::Char('?'), KeyModifiers::NONE),
        Some(Action::ToggleHelp)
    ));
    assert!(matches!(
        key(KeyCode::Char('s'), KeyModifiers::NONE),
        Some(Action::SaveReport)
    ));
}

#[test]
fn s_asks_the_run_for_a_report_once_there_is_something_to_save() {
    let mut app = App::new(info(None));
    assert_eq!(app.update(Action::SaveReport), None, "nothing measured yet");
    assert_eq!(app.note.as_deref(), Some("Nothing to save yet."));
    app.update(Action::Snapshot(Box::new(snapshot(1)), None));
    assert_eq!(app.update(Action::SaveReport), Some(Effect::SaveReport));
    app.update(Action::Note("saved /tmp/r-at-3s.html".into()));
    assert_eq!(app.note.as_deref(), Some("saved /tmp/r-at-3s.html"));
}

#[test]
fn update_is_the_only_place_state_changes() {
    let mut app = App::new(info(Some(1000.0)));
    assert_eq!(app.update(Action::Quit), Some(Effect::Stop));
    assert!(app.quitting);
    assert_eq!(app.update(Action::NextView), None);
    assert_eq!(app.view, View::Latency);
    app.update(Action::NextView);
    app.update(Action::NextView);
    assert_eq!(app.view, View::Inside);
    app.update(Action::NextView);
    assert_eq!(app.view, View::Overview, "Tab wraps around");
    assert_eq!(app.update(Action::RateUp), Some(Effect::SetRate(1250.0)));
    assert_eq!(app.update(Action::RateDown), Some(Effect::SetRate(1000.0)));

    app.update(Action::Snapshot(Box::new(snapshot(1)), None));
    app.update(Action::ToggleFreeze);
    app.update(Action::Snapshot(Box::new(snapshot(2)), Some(cpus())));
    assert_eq!(
        app.snapshot.as_ref().unwrap().elapsed,
        Duration::from_millis(100),
        "frozen: the display holds"
    );
    assert_eq!(app.history.len(), 1);
    app.update(Action::ToggleFreeze);
    app.update(Action::Snapshot(Box::new(snapshot(3)), Some(cpus())));
    assert_eq!(
        app.snapshot.as_ref().unwrap().elapsed,
        Duration::from_millis(300)
    );
    assert_eq!(
        app.error_seen,
        vec![(ErrorKind::Timeout, 0.3)],
        "timeouts went up at 0.3 s"
    );
    assert!(app.cpus.is_some());

    let mut closed = App::new(info(None));
    assert_eq!(
        closed.update(Action::RateUp),
        None,
        "no rate to change in closed loop"
    );
    assert!(closed.note.as_deref().unwrap().contains("open loop"));
}

/// The sizes every view is drawn at: the smallest usual terminal up to a large one.
const SIZES: [(u16, u16); 4] = [(80, 24), (100, 30), (120, 40), (200, 60)];

/// A 60-character URL.
fn long_url() -> String {
    let url = "http://127.0.0.1:8080/api/v1/accounts/123456/transactions/99";
    assert_eq!(url.len(), 60);
    url.to_string()
}

/// A run with every value at its longest: a 60-character URL, a rate of seven digits, a
/// nine-digit request count, `connect_timeout` errors, CPU ranges, a pipelined many-thread
/// load, a spike diagnosis, and a note in the footer.
fn long_app() -> App {
    let mut app = App::new(RunInfo {
        target: format!("GET {}", long_url()),
        server: Some("embedded (pid 4242)".into()),
        rate: Some(1_234_567.0),
        pipeline: 16,
        connections: 10_000,
        threads: 16,
        duration: Some(Duration::from_secs(600)),
        requests: None,
        server_cpus: vec![0, 1, 2, 3],
        client_cpus: vec![4, 5, 6, 7],
    });
    for tick in 1..=40 {
        let mut snap = snapshot(tick);
        snap.totals.errors[ErrorKind::ConnectTimeout.index()] = 1_234_567 + tick;
        // 123,456,789 requests in all, errors included.
        snap.totals.successes = 123_456_789 - snap.totals.error_total();
        snap.totals.status_codes = vec![(200, 123_450_000), (503, 6_789)];
        snap.recent_seconds = (1..=tick / 10)
            .map(|s| second(s as f64, 1_234_567, 0))
            .collect();
        snap.slowest[0].conn = 9_999;
        snap.slowest[0].worker = 15;
        snap.slowest[0].queued_us = Some(12_345);
        app.update(Action::Snapshot(Box::new(snap), Some(cpus())));
        app.update(Action::Counters(TickCounters {
            context_switches_per_s: vec![Some(1_234_567.0), Some(153.0)],
            migrations_per_s: vec![Some(2.0), Some(1.0)],
            ipc: vec![None, Some(1.25)],
        }));
        app.update(Action::ListenQueue(Some(ListenSample {
            sockets: 1,
            queue: 4096,
            backlog: 4096,
            full: 1,
        })));
    }
    app.update(Action::Diagnosis(vec![Diagnosis {
        cause: Cause::AcceptQueueOverflow,
        evidence: "40 requests on new connections took ~1 s (40): SYN retransmits after the listen queue overflowed (ListenOverflows +52)".into(),
        requests_affected: 123_456,
        window: Some(Window {
            start_s: 2.0,
            end_s: 3.02,
            open_ended: false,
        }),
        inside: None,
    }]));
    app.update(Action::Inside(Box::new(long_inside())));
    app.update(Action::RateUp);
    app
}

/// A second from inside with long Rust frame names and both lists full.
fn long_second(second: u32, burn: f64) -> SecondInside {
    let share = |what: &str, share: f64| Share {
        what: what.into(),
        share,
    };
    SecondInside {
        second,
        samples: 123_456,
        on_cpu: [
            share(
                "tailscope_server::worker::burn_cpu_on_purpose ← tailscope_server::worker::Worker::tick",
                burn,
            ),
            share("_raw_spin_unlock_irqrestore_[k] ← sock_def_readable_[k]", 0.12),
            share("<T as core::convert::TryInto<U>>::try_into", 0.05),
        ]
        .into_iter()
        .chain((0..6).map(|i| share(&format!("frame_{i} ← caller_{i}"), 0.01)))
        .collect(),
        off_cpu: Some(vec![
            share("futex (S)", 0.33),
            share("io_uring_enter (S)", 0.18),
            share("fsync (D)", 0.02),
        ]),
    }
}

fn long_inside() -> LiveInside {
    LiveInside::Sampling {
        off_cpu_source: Some("/proc thread states".into()),
        last: Some(long_second(1_234, 0.31)),
        last_slow: Some(long_second(1_232, 0.62)),
    }
}

/// What the widgets mean to show of [`long_app`], each a unit a reader must see whole:
/// labels, numbers with their words, statuses. Prose that wraps is listed word by word.
fn long_fields() -> Vec<String> {
    let mut fields: Vec<String> = [
        "CPUs: server 0-3 · generator 4-7",
        "server: embedded (pid 4242)",
        "running",
        "open loop at 1.54M req/s",
        "open loop at 1.54M r/s",
        "10000 conn",
        "16 threads",
        "pipeline 16",
        "1 Overview",
        "2 Latency",
        "3 Cores & spikes",
        "q quit",
        "p freeze",
        "+/- rate",
        "Tab view",
        "? keys",
        "rate set to 1543209 req/s",
        "Throughput",
        "last second 1.23M req/s",
        "last second 1.23M r/s",
        "req/s",
        "Latency per tick",
        "(log scale)",
        "Latency histogram",
        "last tick",
        "run",
        "p99.9",
        "p99",
        "p50",
        "123,456,789 requests",
        "1,234,650 errors",
        "43 timeouts",
        "Status & errors",
        "[200] 123,450,000",
        "[503] 6,789",
        "non-2xx: 6,789",
        "connect_timeout: 1,234,607",
        "timeout: 43",
        "CPUs",
        "(S server · G generator)",
        "u user",
        "s system+irq",
        "si softirq",
        "ctx/s 1234567",
        "migr/s 2",
        "IPC n/a",
        "IPC 1.25",
        "listen queue 4096/4096",
        "FULL",
        "Slowest requests",
        "latency",
        "status",
        "worker",
        "queued 12.35ms",
        "connect 1.00s",
        "ttfb 1.60s",
        "body 1.00ms",
        "[200]",
        "Spikes",
        "accept_queue_overflow",
        "123,456 requests",
        "at 2.00–3.02 s",
        "ListenOverflows",
        "retransmits",
        "Keys",
        "4 Server inside",
        "4 Inside",
        "3 Cores",
        "Server inside",
        "last second",
        "1234–1235 s",
        "Last slow second",
        "1232–1233 s",
        "On CPU",
        "123,456 samples",
        "Off CPU",
        "of the threads' time",
        "/proc thread states",
        "futex (S)",
        "io_uring_enter (S)",
        "31 %",
        "62 %",
        "burn_cpu_on_purpose",
        "tailscope_server::worker::Worker::tick",
        "<T as core::convert::TryInto<U>>::try_into",
    ]
    .map(String::from)
    .to_vec();
    fields.push(format!("GET {}", long_url()));
    for line in [
        "q, Esc, Ctrl-C stop the load, print the summary",
        "freeze / resume the display",
        "raise / lower the rate (open loop)",
        "Tab next view",
        "overview · latency · cores · inside",
        "show / hide this help",
        "The load goes on while frozen or in help.",
    ] {
        fields.extend(line.split(' ').filter(|w| w.len() > 1).map(String::from));
    }
    fields
}

/// Panics where a field shows only in part (see [`cut_fields`]).
fn assert_nothing_cut(screen: &str, fields: &[String], what: &str) {
    // TestBackend quotes each row.
    let rows: String = screen
        .lines()
        .map(|row| format!("{}\n", row.trim_matches('"')))
        .collect();
    let cuts = cut_fields(&rows, fields);
    assert!(cuts.is_empty(), "{what}: cut fields {cuts:#?}\n{screen}");
}

fn views() -> [(&'static str, View, bool); 5] {
    [
        ("overview", View::Overview, false),
        ("latency", View::Latency, false),
        ("cores", View::Cores, false),
        ("inside", View::Inside, false),
        ("help", View::Overview, true),
    ]
}

#[test]
fn no_field_is_cut_in_any_view_at_any_size() {
    let fields = long_fields();
    for (name, view, help) in views() {
        for (width, height) in SIZES {
            let mut app = long_app();
            app.update(Action::Show(view));
            if help {
                app.update(Action::ToggleHelp);
            }
            let text = screen(&app, width, height);
            let what = format!("{name} at {width}×{height}");
            assert_nothing_cut(&text, &fields, &what);
            // What stays at every size, so the check above has something to look at.
            for always in ["running", "1 Overview", "q quit"] {
                assert!(
                    text.contains(always),
                    "{what}: {always:?} is missing\n{text}"
                );
            }
            insta::assert_snapshot!(format!("long_{name}_{width}x{height}"), text);
        }
    }
}

#[test]
fn a_roomy_terminal_shows_every_field_whole() {
    let mut app = long_app();
    let overview = screen(&app, 200, 60);
    for field in [
        "CPUs: server 0-3 · generator 4-7",
        "server: embedded (pid 4242)",
        "open loop at 1.54M req/s",
        "pipeline 16",
        "last second 1.23M req/s",
        "123,456,789 requests",
        "1,234,650 errors",
        "connect_timeout: 1,234,607",
        "queued 12.35ms",
        "[200]",
        "rate set to 1543209 req/s",
    ] {
        assert!(
            overview.contains(field),
            "{field:?} missing at 200×60\n{overview}"
        );
    }
    app.update(Action::Show(View::Cores));
    let cores = screen(&app, 200, 60);
    for field in [
        "ctx/s 1234567",
        "IPC 1.25",
        "listen queue 4096/4096 FULL",
        "123,456 requests",
    ] {
        assert!(
            cores.contains(field),
            "{field:?} missing at 200×60\n{cores}"
        );
    }
}

#[test]
fn the_closed_loop_note_keeps_whole_sentences() {
    let mut app = app_with_data(None);
    app.update(Action::RateUp);
    let wide = screen(&app, 120, 40);
    assert!(
        wide.contains("+/- need open loop. Start the run with -q RATE."),
        "{wide}"
    );
    let narrow = screen(&app, 80, 24);
    assert!(!narrow.contains("(-q RATE"), "{narrow}");
    assert_nothing_cut(
        &narrow,
        &[
            "+/- need open loop.".into(),
            "Start the run with -q RATE.".into(),
        ],
        "note at 80×24",
    );
}

#[test]
fn the_smallest_supported_terminal_cuts_nothing_either() {
    let fields = long_fields();
    for (name, view, help) in views() {
        let mut app = long_app();
        app.update(Action::Show(view));
        if help {
            app.update(Action::ToggleHelp);
        }
        let text = screen(&app, 40, 8);
        assert!(
            text.contains("tailscope"),
            "{name} at 40×8 is drawn\n{text}"
        );
        assert_nothing_cut(&text, &fields, &format!("{name} at 40×8"));
    }
}

#[test]
fn server_inside_says_why_it_has_nothing_to_show() {
    let mut app = app_with_data(None);
    app.update(Action::Show(View::Inside));
    let before = screen(&app, 80, 24);
    assert!(
        before.contains("n/a: waiting for the first second of the run to"),
        "{before}"
    );
    app.update(Action::Inside(Box::new(LiveInside::Unavailable(
        "no server to sample: give --target or --pid".into(),
    ))));
    let off = screen(&app, 80, 24);
    assert!(
        off.contains("n/a: no server to sample: give --target or --pid"),
        "{off}"
    );
    app.update(Action::Inside(Box::new(LiveInside::Sampling {
        off_cpu_source: None,
        last: Some(SecondInside {
            second: 3,
            samples: 0,
            on_cpu: Vec::new(),
            off_cpu: None,
        }),
        last_slow: None,
    })));
    let quiet = screen(&app, 120, 40);
    for said in [
        "3–4 s",
        "0 samples",
        "no sample: nothing of the server ran",
        "n/a: off-CPU time is not seen",
        "no slow second so far",
    ] {
        assert!(quiet.contains(said), "{said:?} missing\n{quiet}");
    }
}
