//! The dashboard drawn from fixed data: widgets against exact buffers, whole views as insta
//! snapshots at a roomy and at the smallest supported size, and key handling through
//! `App::update`.

mod common;

use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;
use std::time::Duration;
use tailscope_forensics::{Cause, Diagnosis, Window};
use tailscope_loadgen::ErrorKind;
use tailscope_tui::app::{key_action, Action, App, Effect, View};
use tailscope_tui::ui::{self, FooterPanel};

#[test]
fn throughput_is_drawn_per_finished_second_not_per_tick() {
    // One tick that brought two intervals of a worker (700 responses in 100 ms, "7,000/s")
    // must not show: the panel shows the last finished second, 3,500 req/s.
    let mut app = App::new(info(None));
    let mut snap = snapshot(25);
    snap.last_tick.successes = 700;
    app.update(Action::Snapshot(std::sync::Arc::new(snap), None));
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
    app.update(Action::Snapshot(std::sync::Arc::new(snapshot(5)), None));
    let mut buf = Buffer::empty(area);
    (&ui::ThroughputPanel(&app)).render(area, &mut buf);
    let text: String = (0..area.width)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect();
    assert!(text.contains("last second n/a"), "{text}");
}

/// `run --agent`: the header names where the server is read, the agent's host (and the
/// server the agent launched, when it did), in place of a local server.
#[test]
fn the_header_names_the_agent_the_server_is_read_through() {
    let plan = tailscope_loadgen::Plan::new("http://10.0.0.5:8080/").unwrap();
    let mut app =
        App::new(tailscope_tui::app::RunInfo::new(&plan, None).through_agent("srv-1", None));
    app.update(Action::Snapshot(std::sync::Arc::new(snapshot(5)), None));
    let text = screen(&app, 120, 40);
    let header = text.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(header.contains("server: agent srv-1"), "{header}");
    let info = tailscope_tui::app::RunInfo::new(&plan, None)
        .through_agent("srv-1", Some(("my-server", 4242)));
    let text = screen(&App::new(info), 120, 40);
    let header = text.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(
        header.contains("server: my-server (pid 4242) via agent srv-1"),
        "{header}"
    );
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

/// The app of [`app_with_data`] running a three-request mix ("delay" slow and failing).
fn app_with_mix() -> App {
    let mut app = app_with_data(None);
    let mut snap = snapshot(41);
    snap.by_request = mix(&[
        ("plaintext", 7_000, 0, 120, 450, 2_450),
        ("json", 2_000, 0, 150, 600, 700),
        ("delay", 1_040, 43, 5_100, 1_600_000, 350),
    ]);
    app.update(Action::Snapshot(std::sync::Arc::new(snap), None));
    app
}

#[test]
fn requests_view_has_a_row_per_name_at_120x40_and_80x24() {
    let mut app = app_with_mix();
    app.update(Action::Show(View::Requests));
    let roomy = screen(&app, 120, 40);
    for row in ["plaintext", "json", "delay", "69.7%", "1.60s", "5.10ms"] {
        assert!(roomy.contains(row), "{row}\n{roomy}");
    }
    insta::assert_snapshot!("requests_view_120x40", roomy);
    let small = screen(&app, 80, 24);
    assert!(
        small.contains("delay") && small.contains("1.60s"),
        "{small}"
    );
    insta::assert_snapshot!("requests_view_80x24", small);
    // A single request has no rows, and says where they come from.
    let mut single = app_with_data(None);
    single.update(Action::Show(View::Requests));
    let text = screen(&single, 80, 24);
    assert!(text.contains("--load FILE.toml"), "{text}");
    // A cause in a mix says which requests its slow ones were, on the spikes panel.
    let mut app = app_with_mix();
    let share = |name: &str, slow| tailscope_forensics::RequestShare {
        name: name.into(),
        slow,
        of: 4,
        share: slow as f64 / 4.0,
    };
    app.update(Action::Diagnosis(vec![Diagnosis {
        cause: Cause::ServerStall,
        evidence: "60 requests released together".into(),
        requests_affected: 60,
        window: None,
        inside: None,
        requests: vec![share("delay", 3), share("json", 1)],
    }]));
    app.update(Action::Show(View::Cores));
    let text = screen(&app, 120, 40);
    assert!(
        text.contains("requests: 75 % of the 4 slowest of the run were delay; the others: 1 json"),
        "{text}"
    );
    assert_eq!(
        key_action(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE))
            .map(|a| matches!(a, Action::Show(View::Requests))),
        Some(true)
    );
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
        requests: Vec::new(),
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
    use tailscope_report::document::Bucket;
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
        " 1 Overview  2 Lat  3 Cores  4 Inside  5 Req   q quit · p freeze · +/- rate  ",
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
        Some(Action::Back)
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

/// Esc closes the help first (a newcomer pressed `?` then Esc and stopped the run); without
/// the help it stops the run as q does.
#[test]
fn esc_closes_the_help_before_it_stops_the_run() {
    let mut app = App::new(info(None));
    app.update(Action::ToggleHelp);
    assert!(app.help);
    assert!(app.update(Action::Back).is_none());
    assert!(!app.help && !app.quitting);
    assert!(matches!(app.update(Action::Back), Some(Effect::Stop)));
    assert!(app.quitting);
}

#[test]
fn s_asks_the_run_for_a_report_once_there_is_something_to_save() {
    let mut app = App::new(info(None));
    assert_eq!(app.update(Action::SaveReport), None, "nothing measured yet");
    assert_eq!(app.note.as_deref(), Some("Nothing to save yet."));
    app.update(Action::Snapshot(std::sync::Arc::new(snapshot(1)), None));
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
    assert_eq!(app.view, View::Requests);
    app.update(Action::NextView);
    assert_eq!(app.view, View::Overview, "Tab wraps around");
    assert_eq!(app.update(Action::RateUp), Some(Effect::SetRate(1250.0)));
    assert_eq!(app.update(Action::RateDown), Some(Effect::SetRate(1000.0)));

    app.update(Action::Snapshot(std::sync::Arc::new(snapshot(1)), None));
    app.update(Action::ToggleFreeze);
    app.update(Action::Snapshot(
        std::sync::Arc::new(snapshot(2)),
        Some(cpus()),
    ));
    assert_eq!(
        app.snapshot.as_ref().unwrap().elapsed,
        Duration::from_millis(100),
        "frozen: the display holds"
    );
    assert_eq!(app.history.len(), 1);
    app.update(Action::ToggleFreeze);
    app.update(Action::Snapshot(
        std::sync::Arc::new(snapshot(3)),
        Some(cpus()),
    ));
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

/// The app of [`app_with_data`] in open loop at 5,000 req/s, 1,234 of its sends late:
/// `cpu` of them while the generator waited for a CPU (`None`: not readable).
fn app_with_late_sends(cpu: Option<u64>) -> App {
    let mut app = app_with_data(Some(5_000.0));
    let mut snap = snapshot(41);
    snap.totals.late_sends = 1_234;
    snap.totals.late_waited_for_cpu = cpu;
    snap.totals.late_generator = 4;
    snap.totals.late_no_free_connection = 1_234 - 4 - cpu.unwrap_or(0);
    app.update(Action::Snapshot(std::sync::Arc::new(snap), Some(cpus())));
    app
}

/// The errors panel drawn `width` cells wide, its rows as text.
fn errors_rows(app: &App, width: u16) -> Vec<String> {
    let area = Rect::new(0, 0, width, 12);
    let mut buf = Buffer::empty(area);
    (&ui::ErrorsPanel(app)).render(area, &mut buf);
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

#[test]
fn the_errors_panel_says_why_sends_were_late() {
    // Roomy: every cause in full, in the report's order, under the total.
    let rows = errors_rows(&app_with_late_sends(Some(30)), 60);
    let at = rows
        .iter()
        .position(|r| r.contains("late sends: 1,234"))
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert_eq!(
        rows[at + 1].trim_matches(|c| c == '│' || c == ' '),
        "CPU wait 30 · no free conn 1,200 · generator 4",
        "{rows:#?}"
    );
    // The generator's CPU wait unreadable: n/a, never 0.
    let rows = errors_rows(&app_with_late_sends(None), 60);
    let at = rows.iter().position(|r| r.contains("late sends")).unwrap();
    assert_eq!(
        rows[at + 1].trim_matches(|c| c == '│' || c == ' '),
        "CPU wait n/a · no free conn 1,230 · generator 4",
        "{rows:#?}"
    );
    // The overview's narrowest panel (32 cells inside): short forms, nothing dropped.
    let rows = errors_rows(&app_with_late_sends(None), 34);
    let at = rows.iter().position(|r| r.contains("late sends")).unwrap();
    assert_eq!(
        rows[at + 1].trim_matches(|c| c == '│' || c == ' '),
        "CPU n/a · no conn 1,230 · gen 4",
        "{rows:#?}"
    );
    // Narrower still: the smallest causes go, the largest stays whole.
    let rows = errors_rows(&app_with_late_sends(Some(30)), 25);
    let at = rows.iter().position(|r| r.contains("late sends")).unwrap();
    assert_eq!(
        rows[at + 1].trim_matches(|c| c == '│' || c == ' '),
        "CPU 30 · no conn 1,200",
        "{rows:#?}"
    );
    // One form for the whole line: all short before any is dropped, and none back to its
    // long form once one is (a newcomer's 80×24 read `CPU 146 · no free conn 7,326 · gen 22`,
    // the overview `CPU 725 · no free conn 125,799` with `gen 17` gone).
    let causes = |cpu: u64, no_conn: u64, generator: u64, width: u16| {
        let mut app = app_with_data(Some(5_000.0));
        let mut snap = snapshot(41);
        snap.totals.late_sends = cpu + no_conn + generator;
        snap.totals.late_waited_for_cpu = Some(cpu);
        snap.totals.late_no_free_connection = no_conn;
        snap.totals.late_generator = generator;
        app.update(Action::Snapshot(std::sync::Arc::new(snap), Some(cpus())));
        let rows = errors_rows(&app, width);
        let at = rows.iter().position(|r| r.contains("late sends")).unwrap();
        rows[at + 1]
            .trim_matches(|c| c == '│' || c == ' ')
            .to_string()
    };
    assert_eq!(
        causes(146, 7_326, 22, 40),
        "CPU 146 · no conn 7,326 · gen 22"
    );
    assert_eq!(causes(725, 125_799, 17, 34), "CPU 725 · no conn 125,799");
    assert_eq!(
        causes(725, 125_799, 17, 60),
        "CPU wait 725 · no free conn 125,799 · generator 17"
    );
    // Closed loop (no late sends): no late lines at all.
    let rows = errors_rows(&app_with_data(None), 60);
    assert!(!rows.iter().any(|r| r.contains("late")), "{rows:#?}");
}

#[test]
fn overview_open_loop_with_late_sends_120x40() {
    insta::assert_snapshot!(screen(&app_with_late_sends(Some(30)), 120, 40));
}

#[test]
fn with_stages_the_throughput_panel_names_the_stage_and_plus_starts_from_the_planned_rate() {
    // 2 s ramping to 4,000/s, then 2 s ramping down to 1,000/s; snapshot(25) is 2.5 s in.
    let mut run = info(Some(4000.0));
    run.stages = tailscope_loadgen::plan::parse_stages("2s:4000,2s:1000").unwrap();
    let mut app = App::new(run);
    app.update(Action::Snapshot(std::sync::Arc::new(snapshot(25)), None));
    let area = Rect::new(0, 0, 120, 12);
    let mut buf = Buffer::empty(area);
    (&ui::ThroughputPanel(&app)).render(area, &mut buf);
    let title: String = (0..area.width)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect();
    assert!(title.contains("stage 2/2 → 1.0k/s"), "{title}");
    // Planned now: 4,000 − 3,000 × 0.25 = 3,250/s; `+` goes up a step from there (×1.25),
    // not from the highest stage's 4,000.
    let effect = app.update(Action::RateUp);
    match effect {
        Some(Effect::SetRate(r)) => assert!((r - 3250.0 * 1.25).abs() < 1e-6, "{r}"),
        other => panic!("{other:?}"),
    }
}
