//! The latency chart: p50, p99 and max over time.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Axis, Chart, LegendPosition, Widget};

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
        let (lo, hi) = if lo > hi {
            (1.0, 4.0)
        } else {
            (lo.floor(), hi.ceil().max(lo.floor() + 1.0))
        };
        let labels: Vec<String> = (lo as i32..=hi as i32)
            .map(|d| fmt_us(10u64.pow(d.max(0) as u32)))
            .collect();
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
        // Top left, over the oldest ticks: top right (ratatui's default) hid the newest
        // spike under the legend.
        Chart::new(sets)
            .legend_position(Some(LegendPosition::TopLeft))
            .block(panel_fields(title, area.width))
            .x_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(vec![fmt_secs(x0, 0), fmt_secs(x1, 0)])
                    .style(fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([lo, hi])
                    .labels(y_labels(labels, area.height))
                    .style(fg(DIM)),
            )
            .render(area, buf);
    }
}
