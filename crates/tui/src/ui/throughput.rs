//! Throughput over time.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Axis, Chart, LegendPosition, Widget};

use super::fit::Fields;
use super::format::{fmt_secs, fmt_si};
use super::theme::{fg, panel_fields, BAD, DIM, OK};
use crate::app::App;

use super::{x_bounds, y_labels};

/// Requests per second over time, successes and errors apart, one point per finished
/// second of the run.
///
/// Not per tick: workers hand over their intervals on their own clocks, so one 100 ms tick
/// of the aggregator can hold two intervals of a worker and the next none; a tick's count
/// ×10 drew rates that never happened (379 k req/s in a run that never passed 190 k). A
/// finished second holds exactly the requests that ended in it.
pub struct ThroughputPanel<'a>(pub &'a App);

/// Successes and errors per second of each finished second: `(t_s, ok/s, errors/s)`.
pub fn per_second_rates(app: &App) -> Vec<(f64, f64, f64)> {
    let Some(s) = app.snapshot.as_deref() else {
        return Vec::new();
    };
    s.recent_seconds
        .iter()
        .map(|p| {
            // A partial last second covers only part of a second; the others one whole.
            let span = if p.partial {
                (p.t_s - (p.t_s - 1e-9).floor()).max(1e-3)
            } else {
                1.0
            };
            let ok = p.requests.saturating_sub(p.errors) as f64 / span;
            (p.t_s, ok, p.errors as f64 / span)
        })
        .collect()
}

/// The open-loop rate planned over each finished second (its middle's), the live `+`/`-`
/// from their press on; empty in closed loop.
fn planned_rates(app: &App, rates: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    rates
        .iter()
        .filter_map(|&(t, _, _)| {
            let middle = (t - 0.5).max(0.0);
            let set = app.rate_set.iter().rev().find(|(at, _)| *at <= middle);
            let rate = match set {
                Some(&(_, r)) => Some(r),
                None => app.info.planned_rate_at(middle),
            };
            rate.map(|r| (t, r))
        })
        .collect()
}

/// `stage 2/4 → 5k/s`: which of `--stages` runs now, and where it goes.
fn stage_now(app: &App) -> Option<String> {
    let t = app.snapshot.as_deref()?.elapsed.as_secs_f64();
    let i = app.info.stage_at(t)?;
    if !app.rate_set.is_empty() {
        return Some("stages left (+/-)".into());
    }
    let to = match app.info.stages[i].target {
        tailscope_loadgen::plan::StageTarget::Rate(r) => format!("{}/s", fmt_si(r)),
        tailscope_loadgen::plan::StageTarget::Connections(c) => format!("c={c}"),
    };
    Some(format!("stage {}/{} → {to}", i + 1, app.info.stages.len()))
}

impl Widget for &ThroughputPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let rates = per_second_rates(app);
        // Before the first second has finished there is no rate to show yet.
        let now = rates
            .last()
            .map_or("n/a".to_string(), |(_, ok, err)| fmt_si(ok + err));
        let mean = app.snapshot.as_deref().and_then(|s| {
            let secs = s.elapsed.as_secs_f64();
            (secs > 0.0).then(|| s.totals.requests() as f64 / secs)
        });
        let mean = mean.map_or("n/a".to_string(), fmt_si);
        let mut title = Fields::new(" · ")
            .add(0, "Throughput")
            .add_lead(1, "  ", format!("last second {now} req/s"))
            .or_short(format!("last second {now} r/s"))
            .add(2, format!("mean {mean} req/s"))
            .or_short(format!("mean {mean} r/s"));
        let ok: Vec<(f64, f64)> = rates.iter().map(|&(t, ok, _)| (t, ok)).collect();
        let err: Vec<(f64, f64)> = rates.iter().map(|&(t, _, e)| (t, e)).collect();
        let top = rates
            .iter()
            .map(|&(_, ok, e)| ok.max(e))
            .fold(1.0, f64::max)
            * 1.1;
        let (x0, x1) = x_bounds(app);
        let planned = planned_rates(app, &rates);
        let top = planned.iter().map(|&(_, r)| r * 1.1).fold(top, f64::max);
        let mut sets = Vec::new();
        let mut lines = Vec::new();
        // Under the measured line (drawn first): the rate the schedule asked for.
        if !planned.is_empty() {
            sets.push(app.theme.line("planned", DIM, &planned));
            lines.push(("planned", DIM));
        }
        if let Some(stage) = stage_now(app) {
            title = title.add(4, stage);
        }
        sets.push(app.theme.line("ok", OK, &ok));
        lines.push(("ok", OK));
        let errors = err.iter().any(|(_, e)| *e > 0.0);
        if errors {
            sets.push(app.theme.line("errors", BAD, &err));
            lines.push(("errors", BAD));
        }
        if let Some(key) = app.theme.key(&lines) {
            title = title.add_lead(3, "  ", key);
        }
        // ratatui's legend sits top right, over the newest seconds at the rate the run holds
        // (the top of the axis is 1.1× the highest): one line needs no legend, and two have
        // it over the oldest seconds.
        let legend = errors.then_some(LegendPosition::TopLeft);
        Chart::new(sets)
            .legend_position(legend)
            .block(panel_fields(title, area.width))
            .x_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(vec![fmt_secs(x0, 0), fmt_secs(x1, 0)])
                    .style(fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, top])
                    .labels(y_labels(
                        vec!["0".to_string(), fmt_si(top / 2.0), fmt_si(top)],
                        area.height,
                    ))
                    .style(fg(DIM)),
            )
            .render(area, buf);
    }
}
