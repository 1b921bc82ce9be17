//! Drawing: a pure function of the [`App`]. Each panel is a widget over a borrowed `App`, in
//! its own module; nothing here changes state. Small terminals lose whole panels (lowest
//! priority first), never get them squeezed into garbage; inside a panel every line is laid
//! out by [`fit`], which drops whole fields and columns and never cuts one. Colours live in
//! [`theme`], number formats in [`mod@format`].

mod conns;
mod cpus;
mod errors;
pub mod fit;
mod footer;
pub mod format;
mod header;
mod help;
mod histogram;
mod inside;
mod latency_chart;
mod percentiles;
mod requests;
mod slowest;
mod spikes;
pub mod theme;
mod throughput;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

pub use cpus::CpusPanel;
pub use errors::ErrorsPanel;
pub use footer::FooterPanel;
pub use header::HeaderPanel;
pub use help::HelpPanel;
pub use histogram::{fit_rows, HistogramPanel};
pub use inside::InsidePanel;
pub use latency_chart::LatencyChartPanel;
pub(crate) use latency_chart::LogLatencyChart;
pub use percentiles::{live_intervals, LiveInterval, PercentilesPanel};
pub use requests::RequestsPanel;
pub use slowest::SlowestPanel;
pub use spikes::SpikesPanel;
pub use throughput::{per_second_rates, ThroughputPanel};

use crate::app::{App, View};

/// Draws the whole screen, in the app's theme.
pub fn render(app: &App, frame: &mut Frame) {
    draw(app, frame);
    app.theme.finish(frame.buffer_mut());
}

/// Draws the panels that fit.
fn draw(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if area.width < 40 || area.height < 8 {
        let msg = format!(
            "terminal too small ({}×{}): need 40×8 — q quits",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(&HeaderPanel(app), header);
    frame.render_widget(&FooterPanel(app), footer);
    if app.help {
        // The keys take the body's place rather than float over it: panels half hidden
        // behind a popup are panels cut mid-word.
        let w = 54.min(body.width);
        let h = 14.min(body.height);
        let popup = Rect::new(
            body.x + (body.width - w) / 2,
            body.y + (body.height - h) / 2,
            w,
            h,
        );
        frame.render_widget(&HelpPanel, popup);
        return;
    }
    match app.view {
        View::Overview => overview(app, frame, body),
        View::Latency => latency_view(app, frame, body),
        View::Cores => cores_view(app, frame, body),
        View::Inside => frame.render_widget(&InsidePanel(app), body),
        View::Requests => frame.render_widget(&RequestsPanel(app), body),
    }
}

fn overview(app: &App, frame: &mut Frame, body: Rect) {
    // Rows by priority: throughput + percentiles always; errors/CPUs/slowest next; the
    // latency chart and histogram when there is room for them too.
    let rows: Vec<Rect> = if body.height >= 26 {
        Layout::vertical([
            Constraint::Percentage(34),
            Constraint::Percentage(36),
            Constraint::Percentage(30),
        ])
        .split(body)
        .to_vec()
    } else if body.height >= 14 {
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
            .split(body)
            .to_vec()
    } else {
        vec![body]
    };
    let [tp, pct] =
        Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(rows[0]);
    frame.render_widget(&ThroughputPanel(app), tp);
    frame.render_widget(&PercentilesPanel(app), pct);
    if rows.len() == 3 {
        let [lat, hist] =
            Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)])
                .areas(rows[1]);
        frame.render_widget(&LatencyChartPanel(app), lat);
        frame.render_widget(&HistogramPanel(app), hist);
    }
    if rows.len() >= 2 {
        let bottom = rows[rows.len() - 1];
        if bottom.width >= 110 {
            let [e, c, s] = Layout::horizontal([
                Constraint::Percentage(28),
                Constraint::Percentage(30),
                Constraint::Percentage(42),
            ])
            .areas(bottom);
            frame.render_widget(&ErrorsPanel(app), e);
            frame.render_widget(&CpusPanel(app), c);
            frame.render_widget(&SlowestPanel(app), s);
        } else {
            let [e, c] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(bottom);
            frame.render_widget(&ErrorsPanel(app), e);
            frame.render_widget(&CpusPanel(app), c);
        }
    }
}

fn latency_view(app: &App, frame: &mut Frame, body: Rect) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
    let [chart, pct] =
        Layout::horizontal([Constraint::Percentage(70), Constraint::Percentage(30)]).areas(top);
    frame.render_widget(&LatencyChartPanel(app), chart);
    frame.render_widget(&PercentilesPanel(app), pct);
    frame.render_widget(&HistogramPanel(app), bottom);
}

fn cores_view(app: &App, frame: &mut Frame, body: Rect) {
    let [top, middle, bottom] = Layout::vertical([
        Constraint::Percentage(36),
        Constraint::Percentage(30),
        Constraint::Percentage(34),
    ])
    .areas(body);
    let [cpus, errors] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(top);
    frame.render_widget(&CpusPanel(app), cpus);
    frame.render_widget(&ErrorsPanel(app), errors);
    frame.render_widget(&SpikesPanel(app), middle);
    frame.render_widget(&SlowestPanel(app), bottom);
}

/// The time axis shared by the charts: the history shown, at least one second wide.
pub(crate) fn x_bounds(app: &App) -> (f64, f64) {
    let x1 = app.history.back().map_or(10.0, |p| p.t_s).max(1.0);
    let x0 = app
        .history
        .front()
        .map_or(0.0, |p| p.t_s)
        .min(x1 - 1.0)
        .max(0.0);
    (x0, x1)
}

/// The y-axis labels a chart `height` rows tall (borders included) has room for: all when
/// each gets a row, else the lowest and the highest, else none. Labels that share a row are
/// drawn over each other ("1.36Mk" of "1.36M" and "679.0k").
pub(crate) fn y_labels(labels: Vec<String>, height: u16) -> Vec<String> {
    // Two borders, the x axis and its labels.
    let rows = usize::from(height.saturating_sub(4));
    if labels.len() <= rows {
        labels
    } else if rows >= 2 && labels.len() >= 2 {
        vec![labels[0].clone(), labels[labels.len() - 1].clone()]
    } else {
        Vec::new()
    }
}
