//! The live percentiles of the run and of the last tick.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::format::{fmt_count, fmt_us};
use super::theme::{fg, panel, DIM, MAX, P50, P99};
use crate::app::App;

/// Live percentiles, of the whole run and of the last tick.
pub struct PercentilesPanel<'a>(pub &'a App);

impl Widget for &PercentilesPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency");
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("waiting for the first responses…")
                .block(block)
                .render(area, buf);
            return;
        };
        let (all, tick) = (&s.latency, &s.last_tick_latency);
        let measured = s.totals.successes > 0;
        let mut lines = vec![Line::from(Span::styled(
            "          run     last tick",
            fg(DIM),
        ))];
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
                Span::raw(format!(
                    "{:>8}  {:>9}",
                    show(a, measured),
                    show(t, s.last_tick.successes > 0)
                )),
            ]));
        }
        let unfinished = if s.totals.unfinished > 0 {
            format!(" · {} unfinished", fmt_count(s.totals.unfinished))
        } else {
            String::new()
        };
        lines.push(Line::from(format!(
            "  {} requests · {} errors · {} timeouts{unfinished}",
            fmt_count(s.totals.requests()),
            fmt_count(s.totals.error_total()),
            fmt_count(s.totals.timeouts())
        )));
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
