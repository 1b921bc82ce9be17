//! The spike causes named so far.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::fit::Fields;
use super::format::fmt_count;
use super::theme::{bold, fg, panel_fields, BAD, DIM};
use crate::app::App;

/// The spike causes the run so far supports, with their evidence.
pub struct SpikesPanel<'a>(pub &'a App);

impl Widget for &SpikesPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel_fields(
            Fields::new("").add(0, "Spikes").add(1, ": likely causes"),
            area.width,
        );
        let width = usize::from(block.inner(area).width);
        if self.0.diagnosis.is_empty() {
            // Requests failing with no cause named is said as such, not as "no spike".
            let errors = self
                .0
                .snapshot
                .as_ref()
                .map_or(0, |s| s.totals.error_total());
            let text = if tailscope_forensics::errors_unexplained(errors, &self.0.diagnosis) {
                format!(
                    "{} errors, no cause found so far (a cause is named only when its signature and its evidence are both there)",
                    fmt_count(errors)
                )
            } else {
                "no spike cause found so far (a cause is named only when its signature and its evidence are both there)".to_string()
            };
            Paragraph::new(Line::from(Span::styled(text, fg(DIM))))
                .wrap(Wrap { trim: true })
                .block(block)
                .render(area, buf);
            return;
        }
        let mut lines = Vec::new();
        for d in &self.0.diagnosis {
            let mut head = Fields::new(" ")
                .add(0, Span::styled(d.cause.to_string(), bold(BAD)))
                .add_lead(
                    1,
                    "  ",
                    format!("{} requests", fmt_count(d.requests_affected)),
                );
            if let Some(w) = d.window {
                head = head.add(2, format!("at {:.2}–{:.2} s", w.start_s, w.end_s));
            }
            lines.push(head.fit(width));
            // Evidence is prose: wrapped at word boundaries below, never cut.
            lines.push(Line::from(Span::raw(d.evidence.clone())));
            // In a mix: which requests its slow ones were (prose too).
            if let Some(requests) = d.requests_line() {
                lines.push(Line::from(Span::raw(format!("requests: {requests}"))));
            }
        }
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(block)
            .render(area, buf);
    }
}
