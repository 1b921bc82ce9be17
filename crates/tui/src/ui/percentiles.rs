//! The live percentiles of the run, each with its 95 % interval, and of the last tick.
//!
//! The intervals are the report's order statistics of the run's histogram (Lancet's rank
//! interval, exact in the tails; `tailscope_report::stats::quantile_ci`), computed once per
//! snapshot by [`live_intervals`] (a pass over the histogram's buckets for each percentile),
//! not per frame. They take the samples as independent: the final report widens them by the
//! block bootstrap over seconds where the run's seconds say the samples were not, which a live
//! panel has too few seconds for. A percentile whose tail is too thin to be bounded says so
//! (`n/a: 23 above p99`), never a bare number beside bounded ones.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::fit::{fit_columns, Fields};
use super::format::{fmt_count, fmt_us};
use super::theme::{fg, panel, DIM, MAX, P50, P99};
use crate::app::App;
use tailscope_loadgen::snapshot::Snapshot;
use tailscope_report::stats::quantile_ci::{label, samples_above, Side};
use tailscope_report::stats::{quantile_ci, CONFIDENCE};

/// The percentiles the panel bounds, in its order: (quantile, the one below it, whose
/// tail count the note of a thin tail gives).
const BOUNDED: [(f64, f64); 4] = [(0.5, 0.5), (0.9, 0.5), (0.99, 0.9), (0.999, 0.99)];

/// A live percentile's 95 % interval, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveInterval {
    /// The interval `[low, high]` in µs.
    Bounds(u64, u64),
    /// The tail is too thin to bound it: `n/a: 23 above p99`.
    Unbounded(String),
}

/// The 95 % intervals of p50, p90, p99 and p99.9 of every response so far, by order
/// statistics of the snapshot's histogram; empty before the first response.
pub fn live_intervals(snapshot: &Snapshot) -> Vec<LiveInterval> {
    let h = &snapshot.histogram;
    if h.is_empty() {
        return Vec::new();
    }
    BOUNDED
        .iter()
        .map(|&(q, reference)| match quantile_ci(h, q, CONFIDENCE) {
            Ok(ci) => LiveInterval::Bounds(ci.low, ci.high),
            Err(cannot) if cannot.side == Side::Above && reference < q => {
                LiveInterval::Unbounded(format!(
                    "n/a: {} above {}",
                    samples_above(h, reference),
                    label(reference)
                ))
            }
            Err(cannot) => LiveInterval::Unbounded(format!("n/a: {} samples", cannot.samples)),
        })
        .collect()
}

/// `1.09–1.22ms`: the unit once where both ends share it.
fn interval_text(interval: &LiveInterval) -> String {
    match interval {
        LiveInterval::Bounds(low, high) => {
            let (low, high) = (fmt_us(*low), fmt_us(*high));
            let unit = |s: &str| {
                s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
                    .to_string()
            };
            if unit(&low) == unit(&high) {
                format!(
                    "{}–{high}",
                    low.trim_end_matches(|c: char| c.is_alphabetic())
                )
            } else {
                format!("{low}–{high}")
            }
        }
        LiveInterval::Unbounded(note) => note.clone(),
    }
}

/// Live percentiles, of the whole run and of the last tick.
pub struct PercentilesPanel<'a>(pub &'a App);

impl Widget for &PercentilesPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency", area.width);
        let width = usize::from(block.inner(area).width);
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("waiting for the first responses…")
                .wrap(Wrap { trim: true })
                .block(block)
                .render(area, buf);
            return;
        };
        let (all, tick) = (&s.latency, &s.last_tick_latency);
        let measured = s.totals.successes > 0;
        let intervals: Vec<String> = self.0.latency_ci.iter().map(interval_text).collect();
        let ci_width = intervals
            .iter()
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        // The run's column stays; the last tick's goes whole when the panel is narrow, then
        // the intervals' (the run's figures alone, as before intervals were shown).
        let [_, _, with_ci, with_tick] =
            fit_columns(&[(0, 6), (0, 8), (1, ci_width), (2, 9)], 2, width)[..]
        else {
            unreachable!("four columns in, four out")
        };
        let with_ci = with_ci && !intervals.is_empty();
        let mut header = "          run   ".to_string();
        if with_ci {
            header.push_str(&format!("  {:<ci_width$}", "95 % CI"));
        }
        if with_tick {
            header.push_str("  last tick");
        }
        let header = header.trim_end().to_string();
        let mut lines = vec![Line::from(Span::styled(header, fg(DIM)))];
        for (i, (name, a, t, color)) in [
            ("p50", all.p50, tick.p50, P50),
            ("p90", all.p90, tick.p90, P50),
            ("p99", all.p99, tick.p99, P99),
            ("p99.9", all.p999, tick.p999, P99),
            ("max", all.max, tick.max, MAX),
        ]
        .into_iter()
        .enumerate()
        {
            let show = |v: u64, any: bool| if any { fmt_us(v) } else { "n/a".into() };
            let mut row = format!("{:>8}", show(a, measured));
            if with_ci {
                // max is the largest sample, not an estimate: it has no interval.
                let ci = intervals.get(i).map_or("", String::as_str);
                row.push_str(&format!("  {ci:<ci_width$}"));
            }
            if with_tick {
                row.push_str(&format!("  {:>9}", show(t, s.last_tick.successes > 0)));
            }
            lines.push(Line::from(vec![
                Span::styled(format!("{name:>6}  "), Style::default().fg(color)),
                Span::raw(row),
            ]));
        }
        // "0 errors", never "0 error": each count goes with its word, or both go.
        let mut totals = Fields::new(" · ")
            .add(0, format!("{} requests", fmt_count(s.totals.requests())))
            .add(1, format!("{} errors", fmt_count(s.totals.error_total())))
            .add(2, format!("{} timeouts", fmt_count(s.totals.timeouts())));
        if s.totals.unfinished > 0 {
            totals = totals.add(3, format!("{} unfinished", fmt_count(s.totals.unfinished)));
        }
        let mut line = totals.fit(width.saturating_sub(2));
        line.spans.insert(0, Span::raw("  "));
        lines.push(line);
        Paragraph::new(lines).block(block).render(area, buf);
    }
}
