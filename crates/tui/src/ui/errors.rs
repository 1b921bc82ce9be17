//! The status & errors panel: every outcome counted, and how recently each error went up.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::fit::Fields;
use super::format::{fmt_count, fmt_secs};
use super::theme::{fg, panel, BAD, DIM, OK, P99};
use crate::app::App;

/// Status codes, error kinds and timeouts, with how recently each went up.
pub struct ErrorsPanel<'a>(pub &'a App);

impl Widget for &ErrorsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel("Status & errors", area.width);
        let width = usize::from(block.inner(area).width);
        let Some(s) = app.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let mut lines = Vec::new();
        for (code, n) in &s.totals.status_codes {
            let color = if (200..300).contains(code) { OK } else { P99 };
            lines.push(
                Fields::new(" ")
                    .add(
                        0,
                        vec![
                            Span::styled(format!("[{code}] "), fg(color)),
                            Span::raw(fmt_count(*n)),
                        ],
                    )
                    .fit(width),
            );
        }
        // A response is not a success because it arrived: non-2xx get their own line.
        let non2xx = s.totals.non2xx();
        if non2xx > 0 && s.totals.successes > 0 {
            let share = 100.0 * non2xx as f64 / s.totals.successes as f64;
            lines.push(
                Fields::new(" ")
                    .add(
                        0,
                        Span::styled(format!("non-2xx: {}", fmt_count(non2xx)), fg(BAD)),
                    )
                    .add(1, Span::styled(format!("({share:.1} %)"), fg(BAD)))
                    .fit(width),
            );
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
                .map(|(_, t)| format!("last {} ago", fmt_secs((now - t).max(0.0), 1)));
            let mut line = Fields::new("  ").add(
                0,
                vec![
                    Span::styled(format!("{kind}: "), fg(BAD)),
                    Span::raw(fmt_count(n)),
                ],
            );
            if let Some(ago) = ago {
                line = line.add(1, Span::styled(ago, fg(DIM)));
            }
            lines.push(line.fit(width));
        }
        if !any {
            lines.push(Line::from(Span::styled("no errors", fg(OK))));
        }
        if s.totals.reconnects > 0 {
            lines.push(
                Fields::new(" ")
                    .add(0, format!("reconnects: {}", fmt_count(s.totals.reconnects)))
                    .fit(width),
            );
        }
        lines.extend(super::conns::lines(s, app.info.connections, width));
        if s.totals.late_sends > 0 {
            lines.push(
                Fields::new(" ")
                    .add(
                        0,
                        Span::styled(
                            format!("late sends: {}", fmt_count(s.totals.late_sends)),
                            fg(P99),
                        ),
                    )
                    .fit(width),
            );
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
