//! A mix's requests, one row per name: its requests, share, rate, errors and latency.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::fit::fit_columns;
use super::format::{fmt_count, fmt_si, fmt_us};
use super::theme::{fg, panel, BAD, DIM, P50, P99};
use crate::app::App;

/// The figures of each request name of a mix, as of the last finished second.
pub struct RequestsPanel<'a>(pub &'a App);

/// The columns in display order: header, priority (larger goes first), and whether the
/// values align right (numbers) or left (words). The name, the rate and the p99 stay
/// longest: they answer "which request is slow, and how much of it is there".
const COLUMNS: [(&str, u8, bool); 7] = [
    ("request", 0, false),
    ("requests", 2, true),
    ("share", 5, true),
    ("req/s", 1, true),
    ("errors", 3, true),
    ("p50", 4, true),
    ("p99", 0, true),
];

/// Cells between columns.
const GAP: usize = 2;
/// The name column's index: the one that is shortened (with `…`) where names are long.
const NAME: usize = 0;

/// `name` in at most `max` characters: whole, or its beginning and `…`.
fn shorten(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

impl Widget for &RequestsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Requests", area.width);
        let inner = block.inner(area);
        let width = usize::from(inner.width);
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        if s.by_request.is_empty() {
            Paragraph::new(Span::styled(
                "One request: a mix (--load FILE.toml, --urls-from-file FILE) has its figures per request here.",
                fg(DIM),
            ))
            .wrap(Wrap { trim: true })
            .block(block)
            .render(area, buf);
            return;
        }
        let total: u64 = s.by_request.iter().map(|r| r.requests).sum();
        let rows: Vec<[String; 7]> = s
            .by_request
            .iter()
            .map(|r| {
                let lat = |f: fn(&tailscope_loadgen::Percentiles) -> u64| {
                    r.latency.as_ref().map_or("n/a".into(), |p| fmt_us(f(p)))
                };
                [
                    r.name.to_string(),
                    fmt_count(r.requests),
                    if total == 0 {
                        "n/a".into()
                    } else {
                        format!("{:.1}%", 100.0 * r.requests as f64 / total as f64)
                    },
                    r.last_second.map_or("n/a".into(), |n| fmt_si(n as f64)),
                    fmt_count(r.errors),
                    lat(|p| p.p50),
                    lat(|p| p.p99),
                ]
            })
            .collect();
        let mut widths: Vec<usize> = (0..COLUMNS.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .chain([COLUMNS[i].0.len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        // A long name gives way to the numbers, down to the header's width plus a few
        // characters; then whole columns go, least important first.
        let others: usize = widths[1..].iter().map(|w| w + GAP).sum();
        let name_room = width.saturating_sub(others).max(COLUMNS[NAME].0.len() + 4);
        widths[NAME] = widths[NAME].min(name_room);
        let spec: Vec<(u8, usize)> = COLUMNS
            .iter()
            .zip(&widths)
            .map(|(c, w)| (c.1, *w))
            .collect();
        let kept = fit_columns(&spec, GAP, width);
        // A row as its kept columns' cells, padded: (column, text).
        let cells = |row: &[String; 7]| -> Vec<(usize, String)> {
            (0..COLUMNS.len())
                .filter(|&i| kept[i])
                .map(|i| {
                    let w = widths[i];
                    let text = if i == NAME {
                        format!("{:<w$}", shorten(&row[i], w))
                    } else if COLUMNS[i].2 {
                        format!("{:>w$}", row[i])
                    } else {
                        format!("{:<w$}", row[i])
                    };
                    (i, text)
                })
                .collect()
        };
        let header: Vec<String> = cells(&COLUMNS.map(|c| c.0.to_string()))
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let mut lines = vec![Line::from(Span::styled(
            header.join(&" ".repeat(GAP)).trim_end().to_string(),
            fg(DIM),
        ))];
        let room = usize::from(inner.height).saturating_sub(1);
        let shown = if rows.len() > room {
            room.saturating_sub(1)
        } else {
            rows.len()
        };
        for (row, live) in rows.iter().zip(&s.by_request).take(shown) {
            let mut spans = Vec::new();
            for (i, text) in cells(row) {
                if !spans.is_empty() {
                    spans.push(Span::raw(" ".repeat(GAP)));
                }
                // Errors red where there are any; the percentiles as the charts draw them.
                let style = match i {
                    4 if live.errors > 0 => fg(BAD),
                    5 => fg(P50),
                    6 => fg(P99),
                    _ => ratatui::style::Style::default(),
                };
                spans.push(Span::styled(text, style));
            }
            lines.push(Line::from(spans));
        }
        if shown < rows.len() {
            lines.push(Line::from(Span::styled(
                format!("… {} more requests", rows.len() - shown),
                fg(DIM),
            )));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
