//! The status & errors panel: every outcome counted, and how recently each error went up.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::format::fmt_count;
use super::theme::{fg, panel, BAD, DIM, OK, P99};
use crate::app::App;

/// Status codes, error kinds and timeouts, with how recently each went up.
pub struct ErrorsPanel<'a>(pub &'a App);

impl Widget for &ErrorsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel("Status & errors");
        let Some(s) = app.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let mut lines = Vec::new();
        for (code, n) in &s.totals.status_codes {
            let color = if (200..300).contains(code) { OK } else { P99 };
            lines.push(Line::from(vec![
                Span::styled(format!("[{code}] "), Style::default().fg(color)),
                Span::raw(fmt_count(*n)),
            ]));
        }
        // A response is not a success because it arrived: non-2xx get their own line.
        let non2xx = s.totals.non2xx();
        if non2xx > 0 && s.totals.successes > 0 {
            lines.push(Line::from(Span::styled(
                format!(
                    "non-2xx: {} ({:.1} %)",
                    fmt_count(non2xx),
                    100.0 * non2xx as f64 / s.totals.successes as f64
                ),
                fg(BAD),
            )));
        }
        let now = s.elapsed.as_secs_f64();
        let mut any = false;
        for kind in tailscope_loadgen::ErrorKind::ALL {
            let n = s.totals.errors[kind.index()];
            if n == 0 {
                continue;
            }
            any = true;
            let ago = app
                .error_seen
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(String::new(), |(_, t)| {
                    format!("  last {:.1}s ago", (now - t).max(0.0))
                });
            lines.push(Line::from(vec![
                Span::styled(format!("{kind}: "), fg(BAD)),
                Span::raw(fmt_count(n)),
                Span::styled(ago, fg(DIM)),
            ]));
        }
        if !any {
            lines.push(Line::from(Span::styled("no errors", fg(OK))));
        }
        if s.totals.reconnects > 0 {
            lines.push(Line::from(format!(
                "reconnects: {}",
                fmt_count(s.totals.reconnects)
            )));
        }
        if s.totals.late_sends > 0 {
            lines.push(Line::from(Span::styled(
                format!("late sends: {}", fmt_count(s.totals.late_sends)),
                fg(P99),
            )));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
