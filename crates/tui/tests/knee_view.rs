//! The find-max dashboard: its state changes, its keys, and whole screens of a fixed search
//! (TestBackend + insta), at 120x40 and at 80x24.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tailscope_report::knee::{Call, KneeStep};
use tailscope_tui::knee::{key_action, view, KneeAction, KneeApp, KneeEffect, SearchInfo};

fn info() -> SearchInfo {
    SearchInfo {
        target: "GET http://127.0.0.1:8080/delay/5".into(),
        slos: vec!["p99<50ms".into()],
        latency_limits: vec![("p99<50ms".into(), 50_000.0)],
        connections: 20,
        step: Duration::from_secs(4),
        rates: (1000.0, 4400.0),
        server: None,
    }
}

/// A judged step at `rate`: the server answered `answered` of it, with these percentiles.
fn step(
    index: usize,
    phase: &str,
    rate: f64,
    answered: f64,
    p50: u64,
    p99: u64,
    call: Call,
) -> KneeStep {
    KneeStep {
        index,
        phase: phase.into(),
        offered_rps: rate,
        answered_rps: answered * rate,
        backlog_end: 0,
        unsent_end: 0,
        requests: (rate * 4.0) as u64,
        errors: 0,
        error_rate: 0.0,
        seconds: 4,
        p50_us: Some(p50),
        p99_us: Some(p99),
        p999_us: Some(p99 * 2),
        late_no_free_connection: 0,
        late_waited_for_cpu: 0,
        slos: Vec::new(),
        call,
    }
}

/// A search five steps in: three passes, a fail, and that fail being confirmed now.
fn searching() -> KneeApp {
    let mut app = KneeApp::new(info());
    let steps = [
        step(0, "climb", 1000.0, 1.0, 5_400, 9_000, Call::Pass),
        step(1, "climb", 2000.0, 1.0, 5_600, 12_000, Call::Pass),
        step(2, "climb", 4000.0, 0.9, 90_000, 210_000, Call::Fail),
        step(3, "bisect", 2828.0, 1.0, 6_100, 31_000, Call::Pass),
        step(4, "bisect", 3364.0, 0.99, 9_000, 72_000, Call::Fail),
    ];
    for (i, s) in steps.into_iter().enumerate() {
        app.update(KneeAction::StepStarted {
            index: i,
            rate: s.offered_rps,
            phase: s.phase.clone(),
            length: Duration::from_secs(4),
        });
        app.update(KneeAction::StepDone(Box::new(s)));
        if i == 2 {
            app.update(KneeAction::Bounds {
                pass: Some(2000.0),
                fail: Some(4000.0),
            });
        }
        if i == 3 {
            app.update(KneeAction::Bounds {
                pass: Some(2828.0),
                fail: Some(4000.0),
            });
        }
    }
    app.update(KneeAction::StepStarted {
        index: 5,
        rate: 3364.0,
        phase: "confirm".into(),
        length: Duration::from_secs(4),
    });
    app.update(KneeAction::Progress {
        elapsed: Duration::from_millis(2500),
        warmup_left: Duration::ZERO,
        answered_rps: Some(3310.0),
        p99_us: Some(64_000),
    });
    app
}

fn screen(app: &KneeApp, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| view::render(app, f)).unwrap();
    terminal.backend().to_string()
}

#[test]
fn knee_search_120x40() {
    insta::assert_snapshot!(screen(&searching(), 120, 40));
}

#[test]
fn knee_search_80x24() {
    let text = screen(&searching(), 80, 24);
    // What the brief of the view asks for is there whole at the smallest size.
    for needed in [
        "best pass 2,828 req/s",
        "lowest fail 4,000 req/s",
        "step 6: 3,364 req/s",
        "confirming",
        "2.5 s of 4 s",
        "p99<50ms",
        "FAIL (fell behind), confirming",
        "q stop the search",
    ] {
        assert!(text.contains(needed), "{needed:?} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn the_step_being_confirmed_is_the_last_fail_at_the_rate_running() {
    let app = searching();
    assert!(app.being_rerun(4));
    assert!(!app.being_rerun(2), "an earlier fail is not being re-run");
    let mut done = app.clone();
    done.update(KneeAction::StepDone(Box::new(step(
        5,
        "confirm",
        3364.0,
        0.99,
        9_000,
        70_000,
        Call::Fail,
    ))));
    assert!(done.running.is_none());
    assert!(!done.being_rerun(4), "nothing runs any more");
}

#[test]
fn q_and_ctrl_c_stop_the_search_once() {
    let key = |c: KeyCode, m: KeyModifiers| key_action(KeyEvent::new(c, m));
    assert_eq!(
        key(KeyCode::Char('q'), KeyModifiers::NONE),
        Some(KneeAction::Quit)
    );
    assert_eq!(
        key(KeyCode::Char('c'), KeyModifiers::CONTROL),
        Some(KneeAction::Quit)
    );
    assert_eq!(key(KeyCode::Char('c'), KeyModifiers::NONE), None);
    assert_eq!(key(KeyCode::Char('+'), KeyModifiers::NONE), None);
    let mut app = searching();
    assert_eq!(app.update(KneeAction::Quit), Some(KneeEffect::Stop));
    assert!(app.stopping);
    assert_eq!(
        app.update(KneeAction::Quit),
        None,
        "a second q asks nothing more"
    );
    assert!(screen(&app, 120, 40).contains("Stopping"));
}

#[test]
fn an_empty_search_draws_without_figures() {
    let app = KneeApp::new(info());
    let text = screen(&app, 80, 24);
    assert!(text.contains("starting"), "{text}");
    assert!(text.contains("best pass none yet"), "{text}");
    // Nothing measured yet is not a zero.
    assert!(!text.contains(" 0 req/s"), "{text}");
}

/// The confirmation on the dashboard: the step line says it is running and what it holds,
/// a run that missed says it did not hold, and once one holds the header says the rate.
#[test]
fn the_confirmation_says_it_runs_and_which_rate_held() {
    let mut app = searching();
    app.update(KneeAction::StepDone(Box::new(step(
        5,
        "confirm",
        3364.0,
        0.99,
        9_000,
        70_000,
        Call::Fail,
    ))));
    let hold = |app: &mut KneeApp, index, rate: f64, call| {
        app.update(KneeAction::StepStarted {
            index,
            rate,
            phase: "hold".into(),
            length: Duration::from_secs(10),
        });
        let text = screen(app, 120, 40);
        assert!(
            text.contains("confirmation: holding the rate found for 10s"),
            "{text}"
        );
        assert!(
            !text.contains(", confirming"),
            "a hold is no fail's re-run: {text}"
        );
        app.update(KneeAction::StepDone(Box::new(step(
            index, "hold", rate, 1.0, 6_000, 40_000, call,
        ))));
    };
    hold(&mut app, 6, 2828.0, Call::Fail);
    let text = screen(&app, 120, 40);
    assert!(text.contains(") (did not hold)"), "{text}");
    // The curve is the search's: the same hold with far other figures draws the same charts
    // (the rows above the steps' table).
    let mut other = app.clone();
    let last = other.steps.last_mut().unwrap();
    (last.p50_us, last.p99_us, last.answered_rps) = (Some(400_000), Some(900_000), 100.0);
    let charts = |t: &str| {
        t.lines()
            .skip(4)
            .take_while(|l| !l.contains("Steps"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let drawn = screen(&other, 120, 40);
    assert_ne!(drawn, text, "the table shows the other figures");
    assert_eq!(charts(&drawn), charts(&text), "{drawn}");
    assert!(!text.contains("holds 10s"), "nothing held yet: {text}");
    hold(&mut app, 7, 2694.0, Call::Pass);
    let text = screen(&app, 120, 40);
    assert!(text.contains("pass (held)"), "{text}");
    assert!(text.contains("holds 10s 2,694 req/s"), "{text}");
}
