//! Every field whole at every size: a run with every value at its longest drawn in each view
//! at 80×24 up to 200×60, each field either shown whole or dropped whole (never cut), with
//! insta snapshots of each.

mod common;

use common::*;
use std::time::Duration;
use tailscope_forensics::{Cause, Diagnosis, Window};
use tailscope_loadgen::conns::{Gauge, Gauges, HeldCounters, HeldKind};
use tailscope_loadgen::ErrorKind;
use tailscope_targets::listen::ListenSample;
use tailscope_targets::profile::TickCounters;
use tailscope_targets::stacks::{LiveInside, SecondInside, Share};
use tailscope_tui::app::{Action, App, RunInfo, View};
use tailscope_tui::ui::fit::cut_fields;

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
        stages: Vec::new(),
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
        // Ramping up beside 20,000 idle and 1,234 slow connections the server keeps closing.
        snap.conns = Gauges {
            load: Gauge {
                open: 9_876,
                peak_open: 9_876,
                opening: 124,
                peak_opening: 124,
            },
            held: [
                Gauge {
                    open: 20_000,
                    peak_open: 20_000,
                    opening: 0,
                    peak_opening: 0,
                },
                Gauge {
                    open: 1_234,
                    peak_open: 1_300,
                    opening: 5,
                    peak_opening: 5,
                },
            ],
            serving: 9_876,
        };
        snap.conns_peak = snap.conns;
        // A mix of 40 names, one of them 70 characters long, every figure at its longest.
        let long_name = format!("GET {}?expand=1", long_url());
        let mut names: Vec<(&str, u64, u64, u64, u64, u64)> = vec![(
            &long_name,
            123_456_789,
            1_234_567,
            1_600_000,
            12_345_678,
            1_234_567,
        )];
        let short: Vec<String> = (1..40).map(|i| format!("endpoint_{i}")).collect();
        names.extend(
            short
                .iter()
                .map(|n| (n.as_str(), 1_234_567, 0, 250, 1_600_000, 12_345)),
        );
        snap.by_request = mix(&names);
        snap.totals.connect_failures = 1_234;
        snap.totals.held[HeldKind::Idle.index()].opened = 20_000;
        snap.totals.held[HeldKind::Slow.index()] = HeldCounters {
            opened: 5_000,
            closed_by_server: 3_766,
            ..HeldCounters::default()
        };
        app.update(Action::Snapshot(std::sync::Arc::new(snap), Some(cpus())));
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
        requests: Vec::new(),
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
        "5 Requests",
        "5 Req",
        "2 Lat",
        "Requests",
        "requests",
        "share",
        "errors",
        "endpoint_12",
        "123,456,789",
        "1,234,567",
        "12.35s",
        "1.23M",
        "more requests",
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
        "connections: 9,876 open",
        "124 opening",
        "1,234 failed",
        "idle: 20,000 open",
        "slow: 1,234 open",
        "server closed 3,766",
        "0 failed",
        "5 opening",
    ]
    .map(String::from)
    .to_vec();
    fields.push(format!("GET {}", long_url()));
    for line in [
        "q, Ctrl-C stop the load, print the summary",
        "Esc close the help, else stop as q",
        "freeze / resume the display",
        "raise / lower the rate (open loop)",
        "Tab next view",
        "overview · latency · cores · inside",
        "· requests (a mix's, per name)",
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

fn views() -> [(&'static str, View, bool); 6] {
    [
        ("overview", View::Overview, false),
        ("latency", View::Latency, false),
        ("cores", View::Cores, false),
        ("inside", View::Inside, false),
        ("requests", View::Requests, false),
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
        "connections: 9,876 open · 124 opening · 1,234 failed",
        "idle: 20,000 open",
        "slow: 1,234 open · server closed 3,766",
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

#[test]
fn late_send_causes_are_never_cut_and_the_largest_stays() {
    // Seven-digit counts, the CPU wait unreadable: the longest the causes line gets.
    let mut app = app_with_data(Some(1_234_567.0));
    let mut snap = snapshot(41);
    snap.totals.late_sends = 1_234_567;
    snap.totals.late_waited_for_cpu = None;
    snap.totals.late_no_free_connection = 1_230_000;
    snap.totals.late_generator = 4_567;
    app.update(Action::Snapshot(std::sync::Arc::new(snap), Some(cpus())));
    let fields: Vec<String> = [
        "late sends: 1,234,567",
        "CPU wait n/a",
        "CPU n/a",
        "no free conn 1,230,000",
        "no conn 1,230,000",
        "generator 4,567",
        "gen 4,567",
    ]
    .map(String::from)
    .to_vec();
    for (width, height) in SIZES {
        let text = screen(&app, width, height);
        let what = format!("overview at {width}×{height}");
        assert_nothing_cut(&text, &fields, &what);
        assert!(text.contains("late sends: 1,234,567"), "{what}\n{text}");
        assert!(text.contains("conn 1,230,000"), "{what}\n{text}");
    }
}

/// The newest plotted column of the chart whose title starts with `title` on `screen`: the
/// cells just inside its right border, between its title row and its x axis.
fn newest_column(screen: &str, title: &str) -> String {
    let rows: Vec<Vec<char>> = screen
        .lines()
        .map(|l| l.trim_matches('"').chars().collect())
        .collect();
    let (top, start) = rows
        .iter()
        .enumerate()
        .find_map(|(y, r)| {
            let line: String = r.iter().collect();
            line.find(&format!("┌ {title}"))
                .map(|byte| (y, line[..byte].chars().count()))
        })
        .unwrap_or_else(|| panic!("no {title:?} panel in\n{screen}"));
    let right = start + rows[top][start..].iter().position(|&c| c == '┐').unwrap();
    rows[top + 1..]
        .iter()
        .take_while(|r| r.get(right - 1) != Some(&'─'))
        .map(|r| r[right - 1])
        .collect()
}

#[test]
fn no_legend_covers_the_newest_seconds() {
    let braille = |c: char| ('\u{2801}'..='\u{28ff}').contains(&c);
    let boxed = |c: char| ('\u{2500}'..='\u{257f}').contains(&c);
    // The rate the run holds is drawn at the top right, where ratatui puts its legend.
    let text = screen(&long_app(), 100, 30);
    let newest = newest_column(&text, "Throughput");
    assert!(
        newest.chars().any(braille) && !newest.chars().any(boxed),
        "{newest:?} in\n{text}"
    );
    let mut app = long_app();
    app.update(Action::Show(View::Latency));
    for (width, height) in SIZES {
        let text = screen(&app, width, height);
        if !text.contains("┌ Latency per tick") {
            continue;
        }
        let newest = newest_column(&text, "Latency per tick");
        assert!(!newest.chars().any(boxed), "{newest:?} in\n{text}");
    }
}
