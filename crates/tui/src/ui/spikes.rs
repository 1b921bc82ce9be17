//! The spike causes named so far.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::format::fmt_count;
use super::theme::{bold, fg, panel, BAD, DIM};
use crate::app::App;

/// The spike causes the run so far supports, with their evidence.
pub struct SpikesPanel<'a>(pub &'a App);

impl Widget for &SpikesPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Spikes: likely causes");
        if self.0.diagnosis.is_empty() {
            Paragraph::new(Line::from(Span::styled(
                "no spike cause found so far (a cause is named only when its signature and its evidence are both there)",
                fg(DIM),
            )))
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block)
            .render(area, buf);
            return;
        }
        let mut lines = Vec::new();
        for d in &self.0.diagnosis {
            let window = d.window.map_or(String::new(), |w| {
                format!(" at {:.2}–{:.2} s", w.start_s, w.end_s)
            });
            lines.push(Line::from(vec![
                Span::styled(d.cause.clone(), bold(BAD)),
                Span::raw(format!(
                    "  {} requests{window}",
                    fmt_count(d.requests_affected)
                )),
            ]));
            lines.push(Line::from(Span::raw(d.evidence.clone())));
        }
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block)
            .render(area, buf);
    }
}
