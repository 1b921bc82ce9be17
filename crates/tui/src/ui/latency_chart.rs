//! The latency chart: p50, p99 and max over time.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Axis, Chart, Dataset, LegendPosition, Widget};

use super::fit::Fields;
use super::format::{fmt_secs, fmt_us};
use super::theme::{fg, panel_fields, DIM, MAX, P50, P99};
use crate::app::App;

use super::{x_bounds, y_labels};

/// p50, p99 and max per tick on a log scale, so a 1.6 s spike stands out from a 1 ms median.
pub struct LatencyChartPanel<'a>(pub &'a App);

impl Widget for &LatencyChartPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let log = |v: u64| (v.max(1) as f64).log10();
        let pick = |f: fn(&crate::app::TickPoint) -> u64| -> Vec<(f64, f64)> {
            app.history
                .iter()
                .filter(|p| p.max_us > 0)
                .map(|p| (p.t_s, log(f(p))))
                .collect()
        };
        let (p50, p99, max) = (pick(|p| p.p50_us), pick(|p| p.p99_us), pick(|p| p.max_us));
        let lo = p50.iter().map(|(_, y)| *y).fold(f64::MAX, f64::min);
        let hi = max.iter().map(|(_, y)| *y).fold(f64::MIN, f64::max);
        let (x0, x1) = x_bounds(app);
        let sets = vec![
            app.theme.line("p50", P50, &p50),
            app.theme.line("p99", P99, &p99),
            app.theme.line("max", MAX, &max),
        ];
        let mut title = Fields::new(" ")
            .add(0, "Latency per tick")
            .add(1, "(log scale)");
        if let Some(key) = app.theme.key(&[("p50", P50), ("p99", P99), ("max", MAX)]) {
            title = title.add_lead(2, "  ", key);
        }
        LogLatencyChart {
            sets,
            title,
            x: ([x0, x1], vec![fmt_secs(x0, 0), fmt_secs(x1, 0)]),
            y: (lo, hi),
            empty: (1.0, 4.0),
        }
        .chart(area)
        .render(area, buf);
    }
}

/// A chart of latencies on a log scale (its y values are log10 of µs) with its legend top
/// left: the run's latency per tick, and find-max's curve ([`crate::knee::view`]).
pub(crate) struct LogLatencyChart<'a> {
    /// The lines.
    pub sets: Vec<Dataset<'a>>,
    /// The panel's title.
    pub title: Fields<'a>,
    /// The x axis' bounds and labels.
    pub x: ([f64; 2], Vec<String>),
    /// The lowest and highest y drawn (log10 µs); the axis spans the whole decades around
    /// them.
    pub y: (f64, f64),
    /// The decades spanned when there is nothing to draw (`y` empty: lowest above highest).
    pub empty: (f64, f64),
}

impl<'a> LogLatencyChart<'a> {
    /// The chart for a panel of `area`, its y axis labelled a decade a line (as many as fit).
    pub(crate) fn chart(self, area: Rect) -> Chart<'a> {
        let (lo, hi) = if self.y.0 > self.y.1 {
            self.empty
        } else {
            (
                self.y.0.floor(),
                self.y.1.ceil().max(self.y.0.floor() + 1.0),
            )
        };
        let labels: Vec<String> = (lo as i32..=hi as i32)
            .map(|d| fmt_us(10u64.pow(d.max(0) as u32)))
            .collect();
        // Top left, over the oldest ticks: top right (ratatui's default) hid the newest
        // spike under the legend.
        Chart::new(self.sets)
            .legend_position(Some(LegendPosition::TopLeft))
            .block(panel_fields(self.title, area.width))
            .x_axis(
                Axis::default()
                    .bounds(self.x.0)
                    .labels(self.x.1)
                    .style(fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([lo, hi])
                    .labels(y_labels(labels, area.height))
                    .style(fg(DIM)),
            )
    }
}
