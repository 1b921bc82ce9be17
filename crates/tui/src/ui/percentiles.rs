//! The live percentiles of the run and of the last tick.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::fit::{fit_columns, Fields};
use super::format::{fmt_count, fmt_us};
use super::theme::{fg, panel, DIM, MAX, P50, P99};
use crate::app::App;

/// Live percentiles, of the whole run and of the last tick.
pub struct PercentilesPanel<'a>(pub &'a App);

impl Widget for &PercentilesPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency", area.width);
        let width = usize::from(block.inner(area).width);
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("waiting for the first responses…")
                .wrap(Wrap { trim: true })
                .block(block)
                .render(area, buf);
            return;
        };
        let (all, tick) = (&s.latency, &s.last_tick_latency);
        let measured = s.totals.successes > 0;
        // The run's column stays; the last tick's goes whole when the panel is narrow.
        let [_, _, with_tick] = fit_columns(&[(0, 6), (0, 8), (1, 9)], 2, width)[..] else {
            unreachable!("three columns in, three out")
        };
        let header = if with_tick {
            "          run     last tick"
        } else {
            "          run"
        };
        let mut lines = vec![Line::from(Span::styled(header, fg(DIM)))];
        for (name, a, t, color) in [
            ("p50", all.p50, tick.p50, P50),
            ("p90", all.p90, tick.p90, P50),
            ("p99", all.p99, tick.p99, P99),
            ("p99.9", all.p999, tick.p999, P99),
            ("max", all.max, tick.max, MAX),
        ] {
            let show = |v: u64, any: bool| if any { fmt_us(v) } else { "n/a".into() };
            lines.push(Line::from(vec![
                Span::styled(format!("{name:>6}  "), Style::default().fg(color)),
                Span::raw(if with_tick {
                    format!(
                        "{:>8}  {:>9}",
                        show(a, measured),
                        show(t, s.last_tick.successes > 0)
                    )
                } else {
                    format!("{:>8}", show(a, measured))
                }),
            ]));
        }
        // "0 errors", never "0 error": each count goes with its word, or both go.
        let mut totals = Fields::new(" · ")
            .add(0, format!("{} requests", fmt_count(s.totals.requests())))
            .add(1, format!("{} errors", fmt_count(s.totals.error_total())))
            .add(2, format!("{} timeouts", fmt_count(s.totals.timeouts())));
        if s.totals.unfinished > 0 {
            totals = totals.add(3, format!("{} unfinished", fmt_count(s.totals.unfinished)));
        }
        let mut line = totals.fit(width.saturating_sub(2));
        line.spans.insert(0, Span::raw("  "));
        lines.push(line);
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
