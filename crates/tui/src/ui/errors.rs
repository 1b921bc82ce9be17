//! The status & errors panel: every outcome counted, and how recently each error went up.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::fit::Fields;
use super::format::{fmt_count, fmt_secs};
use super::theme::{fg, panel, BAD, DIM, OK, P99};
use crate::app::App;
use tailscope_loadgen::recorder::Counters;

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
            lines.push(late_causes(&s.totals, width));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}

/// Why the late sends left late, under their total: the generator's thread waiting for a
/// CPU (`n/a` where its run-queue wait cannot be read, never 0), no free connection, and the
/// generator's own. The causes keep the report's order; when the panel is narrow they all
/// take their short forms, then the smallest counts go first (the largest is the answer).
/// One form for the whole line: [`Fields::fit`] alone gave a long form back to whichever
/// field a dropped one made room for (`CPU 725 · no free conn 125,799`, its `gen 17` gone,
/// beside `CPU 1,230 · no conn 14,101` elsewhere).
fn late_causes(totals: &Counters, width: usize) -> Line<'static> {
    let cpu = totals
        .late_waited_for_cpu
        .map_or_else(|| "n/a".to_string(), fmt_count);
    let causes = [
        (
            totals.late_waited_for_cpu,
            format!("CPU wait {cpu}"),
            format!("CPU {cpu}"),
        ),
        (
            Some(totals.late_no_free_connection),
            format!("no free conn {}", fmt_count(totals.late_no_free_connection)),
            format!("no conn {}", fmt_count(totals.late_no_free_connection)),
        ),
        (
            Some(totals.late_generator),
            format!("generator {}", fmt_count(totals.late_generator)),
            format!("gen {}", fmt_count(totals.late_generator)),
        ),
    ];
    // Priority by rank of count, largest first; an unreadable count ranks last.
    let mut order: Vec<usize> = (0..causes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(causes[i].0.map(|n| n + 1).unwrap_or(0)));
    let max = width.saturating_sub(1);
    let full_width = causes.iter().map(|c| c.1.chars().count()).sum::<usize>()
        + " · ".chars().count() * (causes.len() - 1);
    let mut line = Fields::new(" · ");
    for (i, (_, full, short)) in causes.into_iter().enumerate() {
        let rank = order.iter().position(|&j| j == i).unwrap_or(i) as u8;
        line = line.add(rank, if full_width <= max { full } else { short });
    }
    // Indented under the total; the first field kept has no lead.
    let mut out = line.fit(max);
    out.spans.insert(0, Span::raw(" "));
    out.style = fg(DIM);
    out
}
