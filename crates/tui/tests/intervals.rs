//! The latency panel's 95 % intervals: the report's order statistics of the run's histogram,
//! computed once per snapshot, and a tail too thin to bound said as such, never a bare number.

mod common;

use common::*;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;
use std::sync::Arc;
use tailscope_loadgen::recorder::new_histogram;
use tailscope_report::stats::{quantile_ci, CONFIDENCE};
use tailscope_tui::app::{Action, App};
use tailscope_tui::ui::{self, LiveInterval};

/// The panel drawn at `width`×9, as lines of text.
fn panel(app: &App, width: u16) -> Vec<String> {
    let area = Rect::new(0, 0, width, 9);
    let mut buf = Buffer::empty(area);
    (&ui::PercentilesPanel(app)).render(area, &mut buf);
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

#[test]
fn each_percentile_has_the_reports_interval_and_a_thin_tail_says_so() {
    // 1,000 responses: p50 to p99 can be bounded, p99.9 cannot (about 3,700 are needed).
    let mut snap = snapshot(25);
    let mut h = new_histogram(std::time::Duration::from_secs(60));
    for i in 0..1_000u64 {
        h.record(1_000 + i * 10).unwrap();
    }
    snap.histogram = h.clone();
    let mut app = App::new(info(None));
    app.update(Action::Snapshot(Arc::new(snap), None));

    // The same bounds as the report's order statistics of the same histogram.
    for (i, q) in [0.5, 0.9, 0.99].into_iter().enumerate() {
        let ci = quantile_ci(&h, q, CONFIDENCE).unwrap();
        assert_eq!(
            app.latency_ci[i],
            LiveInterval::Bounds(ci.low, ci.high),
            "{q}"
        );
    }
    let above_p99 = 1_000 - h.count_between(0, h.value_at_quantile(0.99));
    assert_eq!(
        app.latency_ci[3],
        LiveInterval::Unbounded(format!("n/a: {above_p99} above p99"))
    );

    let lines = panel(&app, 60);
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.trim_start_matches('│').trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {lines:#?}"))
            .clone()
    };
    assert!(lines[1].contains("95 % CI"), "{lines:#?}");
    let ci = quantile_ci(&h, 0.99, CONFIDENCE).unwrap();
    let (low, high) = (ci.low as f64 / 1e3, ci.high as f64 / 1e3);
    assert!(
        row("p99 ").contains(&format!("{low:.2}–{high:.2}ms")),
        "{}",
        row("p99 ")
    );
    assert!(
        row("p99.9").contains(&format!("n/a: {above_p99} above p99")),
        "{}",
        row("p99.9")
    );
    // The maximum is one sample: no interval beside it.
    assert!(!row("max").contains('–'), "{}", row("max"));

    // Narrow, the intervals go whole (after the last tick's column), never cut.
    let narrow = panel(&app, 30);
    assert!(
        narrow
            .iter()
            .all(|l| !l.contains("n/a:") && !l.contains('–')),
        "{narrow:#?}"
    );
}

#[test]
fn no_interval_before_the_first_response() {
    let mut snap = snapshot(1);
    snap.histogram.reset();
    let mut app = App::new(info(None));
    app.update(Action::Snapshot(Arc::new(snap), None));
    assert!(app.latency_ci.is_empty());
}
