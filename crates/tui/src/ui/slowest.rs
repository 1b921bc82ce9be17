//! The slowest requests and where their time went.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::fit::{fit_columns, Fields};
use super::format::{fmt_secs, fmt_us};
use super::theme::{fg, panel, DIM, P99};
use tailscope_loadgen::SlowRequest;

use crate::app::App;

/// The slowest requests so far, with where their time went.
pub struct SlowestPanel<'a>(pub &'a App);

/// The split as fields: where space is short, the parts that took least time go first.
fn split_fields(parts: &[(u64, String)]) -> Fields<'static> {
    let mut by_time: Vec<usize> = (0..parts.len()).collect();
    by_time.sort_by_key(|&i| std::cmp::Reverse(parts[i].0));
    let mut fields = Fields::new(" ");
    for (i, (_, text)) in parts.iter().enumerate() {
        let rank = by_time.iter().position(|&j| j == i).unwrap_or(i);
        fields = fields.add(u8::try_from(rank).unwrap_or(u8::MAX), text.clone());
    }
    fields
}

/// How a slow request ended: its status, its error, or that it had not ended.
fn outcome(r: &SlowRequest) -> String {
    match (r.status, r.error) {
        (Some(c), _) => format!("[{c}]"),
        (None, Some(k)) => k.to_string(),
        (None, None) if r.unfinished => "unfinished".into(),
        _ => "?".into(),
    }
}

/// The table's columns in display order: header, priority (larger goes first), and
/// whether the values align right (numbers) or left (words).
const COLUMNS: [(&str, u8, bool); 6] = [
    ("latency", 0, true),
    ("status", 0, false),
    ("at", 2, true),
    ("conn", 4, true),
    ("worker", 5, true),
    ("split", 3, false),
];

/// A row of the table: its fixed cells, and the parts of its split.
type Row = ([String; 5], Vec<(u64, String)>);

/// Cells between columns.
const GAP: usize = 2;
/// The split's column, the one that can shrink.
const SPLIT: usize = 5;

impl Widget for &SlowestPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Slowest requests", area.width);
        let width = usize::from(block.inner(area).width);
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let rows: Vec<Row> = s
            .slowest
            .iter()
            .map(|r| {
                let cells = [
                    fmt_us(r.latency_us),
                    outcome(r),
                    fmt_secs(r.at_s, 2),
                    r.conn.to_string(),
                    r.worker.to_string(),
                ];
                (cells, r.phases())
            })
            .collect();
        let cell_width = |i: usize, row: &Row| match i {
            5 => split_fields(&row.1).fit_text(usize::MAX).chars().count(),
            _ => row.0[i].chars().count(),
        };
        let widths: Vec<usize> = (0..COLUMNS.len())
            .map(|i| {
                rows.iter()
                    .map(|r| cell_width(i, r))
                    .chain([COLUMNS[i].0.len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        // Whole columns go, least important first (worker, conn, the split, the time);
        // latency and status stay.
        let spec: Vec<(u8, usize)> = COLUMNS
            .iter()
            .zip(&widths)
            .map(|(c, w)| (c.1, *w))
            .collect();
        let mut kept = fit_columns(&spec, GAP, width);
        let mut split_w = widths[SPLIT];
        if !kept[SPLIT] {
            // The split did not fit whole (worker and conn went before it): it may still
            // fit in part, its longest parts first, in what the other columns leave.
            let used: usize = (0..COLUMNS.len())
                .filter(|&i| kept[i])
                .map(|i| widths[i] + GAP)
                .sum();
            let room = width.saturating_sub(used);
            let shown = rows
                .iter()
                .map(|r| split_fields(&r.1).fit_text(room).chars().count())
                .max()
                .unwrap_or(0);
            if shown > 0 && room >= COLUMNS[SPLIT].0.len() {
                kept[SPLIT] = true;
                split_w = room;
            }
        }
        let line = |cells: [&str; 6]| -> String {
            let cells: Vec<String> = (0..COLUMNS.len())
                .filter(|&i| kept[i])
                .map(|i| {
                    let w = if i == SPLIT { split_w } else { widths[i] };
                    if COLUMNS[i].2 {
                        format!("{:>w$}", cells[i])
                    } else {
                        format!("{:<w$}", cells[i])
                    }
                })
                .collect();
            cells.join(&" ".repeat(GAP)).trim_end().to_string()
        };
        let mut lines = vec![Line::from(Span::styled(
            line(COLUMNS.map(|c| c.0)),
            fg(DIM),
        ))];
        for (cells, split) in &rows {
            let split = split_fields(split).fit_text(split_w);
            let text = line([
                &cells[0], &cells[1], &cells[2], &cells[3], &cells[4], &split,
            ]);
            // The latency is the number that matters: it keeps its colour.
            let at = text
                .char_indices()
                .nth(widths[0])
                .map_or(text.len(), |(at, _)| at);
            lines.push(Line::from(vec![
                Span::styled(text[..at].to_string(), fg(P99)),
                Span::raw(text[at..].to_string()),
            ]));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
