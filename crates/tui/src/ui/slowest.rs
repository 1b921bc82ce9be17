//! The slowest requests and where their time went.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::format::fmt_us;
use super::theme::{fg, panel, DIM, P99};
use crate::app::App;

/// The slowest requests so far, with where their time went.
pub struct SlowestPanel<'a>(pub &'a App);

impl Widget for &SlowestPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Slowest requests");
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let mut lines = vec![Line::from(Span::styled(
            "  latency      at  conn  split",
            fg(DIM),
        ))];
        for r in &s.slowest {
            let outcome = match (r.status, r.error) {
                (Some(c), _) => c.to_string(),
                (None, Some(k)) => k.to_string(),
                (None, None) if r.unfinished => "unfinished".into(),
                _ => "?".into(),
            };
            let mut split = Vec::new();
            if let Some(q) = r.queued_us.filter(|q| *q > 0) {
                split.push(format!("queued {}", fmt_us(q)));
            }
            if let Some(c) = r.connect_us {
                split.push(format!("connect {}", fmt_us(c)));
            }
            if r.error.is_none() {
                split.push(format!("ttfb {}", fmt_us(r.ttfb_us)));
                split.push(format!("body {}", fmt_us(r.body_us)));
            }
            lines.push(Line::from(vec![
                Span::styled(format!("{:>9} ", fmt_us(r.latency_us)), fg(P99)),
                Span::raw(format!(
                    "{:>6.2}s {:>4}  {} [{outcome}]",
                    r.at_s,
                    r.conn,
                    split.join(" ")
                )),
            ]));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
