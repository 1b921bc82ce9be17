//! The latency histogram: the distribution in log buckets.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};
use tailscope_report::document::{log_buckets, Bucket};

use super::fit::fit_columns;
use super::format::fmt_us;
use super::theme::{fg, panel, DIM, P50, P99};
use crate::app::App;

/// The latency distribution in log buckets: a second mode shows as its own bars.
pub struct HistogramPanel<'a>(pub &'a App);

impl Widget for &HistogramPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency histogram", area.width);
        let inner = block.inner(area);
        block.render(area, buf);
        let Some(s) = self.0.snapshot.as_deref() else {
            return;
        };
        let buckets = log_buckets(&s.histogram);
        if buckets.is_empty() {
            Paragraph::new("no responses yet").render(inner, buf);
            return;
        }
        let total = s.histogram.len().max(1) as f64;
        let most = buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64;
        // The bucket's range stays, then its share, then the bar (which only shows the
        // share again): a narrow panel loses the bar before the number.
        let width = usize::from(inner.width);
        let [_, show_bar, show_pct] = fit_columns(&[(0, 18), (2, 2), (1, 7)], 0, width)[..] else {
            unreachable!("three columns in, three out")
        };
        let bar_w = width.saturating_sub(27).max(1);
        let rows = fit_rows(&buckets, inner.height as usize);
        let lines: Vec<Line> = rows
            .iter()
            .map(|row| match row {
                None => Line::from(Span::styled("        ⋮ empty", fg(DIM))),
                Some(b) => {
                    let n = if b.count == 0 {
                        0
                    } else {
                        ((b.count as f64 / most) * bar_w as f64).ceil() as usize
                    };
                    // The tail's bars in another shade where no colour tells them apart.
                    let (color, glyph) = if b.low_us >= s.latency.p99.max(1) {
                        (P99, self.0.theme.glyph("█", "▓"))
                    } else {
                        (P50, "█")
                    };
                    let mut spans = vec![Span::raw(format!(
                        "{:>8}–{:<8}",
                        fmt_us(b.low_us),
                        fmt_us(b.high_us)
                    ))];
                    if show_bar {
                        spans.push(Span::raw(" "));
                        spans.push(Span::styled(glyph.repeat(n.min(bar_w)), fg(color)));
                    }
                    if show_pct {
                        spans.push(Span::raw(format!(
                            " {:.1}%",
                            100.0 * b.count as f64 / total
                        )));
                    }
                    Line::from(spans)
                }
            })
            .collect();
        Paragraph::new(lines).render(inner, buf);
    }
}

/// The histogram rows that fit `height` lines: every bucket when they fit; otherwise every
/// non-empty bucket with each run of empty ones folded into one `None` line; and if even that
/// is too long, the fullest non-empty buckets, in order. The modes are what must stay.
pub fn fit_rows(buckets: &[Bucket], height: usize) -> Vec<Option<&Bucket>> {
    if buckets.len() <= height {
        return buckets.iter().map(Some).collect();
    }
    let mut folded: Vec<Option<&Bucket>> = Vec::new();
    for b in buckets {
        if b.count > 0 {
            folded.push(Some(b));
        } else if folded.last().is_some_and(Option::is_some) {
            folded.push(None);
        }
    }
    if folded.last().is_some_and(Option::is_none) {
        folded.pop();
    }
    if folded.len() <= height {
        return folded;
    }
    let mut fullest: Vec<&Bucket> = buckets.iter().filter(|b| b.count > 0).collect();
    fullest.sort_by_key(|b| std::cmp::Reverse(b.count));
    fullest.truncate(height);
    buckets
        .iter()
        .filter(|b| fullest.iter().any(|f| std::ptr::eq(*f, *b)))
        .map(Some)
        .collect()
}
