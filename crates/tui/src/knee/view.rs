//! Drawing the knee dashboard: a pure function of [`KneeApp`], one widget per panel, in the
//! run dashboard's style (its theme, panels, formats and log-scale latency chart).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Gauge, LegendPosition, Paragraph, Widget};
use ratatui::Frame;
use tailscope_report::knee::{verdict, Call, KneeStep};

use super::{KneeApp, Running};
use crate::ui::fit::{sentences, Fields};
use crate::ui::format::{fmt_count, fmt_si, fmt_us};
use crate::ui::theme::{bold, fg, panel, BAD, DIM, OK, P50, P99};
use crate::ui::y_labels;
use crate::ui::LogLatencyChart;

/// Draws the whole screen.
pub fn render(app: &KneeApp, frame: &mut Frame) {
    let area = frame.area();
    // The table as tall as its steps (and its border and head), up to a dozen; the charts
    // take the rest.
    let table_rows = (app.steps.len() as u16 + 3).clamp(5, 12);
    let [header, step, charts, table, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(2),
        Constraint::Min(8),
        Constraint::Length(table_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    let buf = frame.buffer_mut();
    (&HeaderPanel(app)).render(header, buf);
    (&StepPanel(app)).render(step, buf);
    let [curve, rates] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(charts);
    (&CurvePanel(app)).render(curve, buf);
    (&RatePanel(app)).render(rates, buf);
    (&StepsPanel(app)).render(table, buf);
    (&FooterPanel(app)).render(footer, buf);
    app.theme.finish(buf);
}

/// What is searched, under which SLOs, and where the search stands.
pub struct HeaderPanel<'a>(pub &'a KneeApp);

impl Widget for &HeaderPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let i = &app.info;
        let width = usize::from(area.width);
        let mut first = Fields::new(" · ")
            .add(0, Span::styled("find-max", bold(P99)))
            .add(0, i.target.clone())
            .add(1, format!("SLO {}", i.slos.join(", ")))
            .add(2, format!("{} conns", fmt_count(i.connections as u64)))
            .add(3, format!("{:?} steps", i.step));
        if let Some(server) = &i.server {
            first = first.add(4, server.clone());
        }
        let first = first.fit(width);
        let rate = |r: Option<f64>| {
            r.map_or("none yet".into(), |r| {
                format!("{} req/s", fmt_count(r.round() as u64))
            })
        };
        let mut second = Fields::new("   ")
            .add(
                0,
                Line::from(vec![
                    Span::styled("best pass ", fg(DIM)),
                    Span::styled(rate(app.best_pass), bold(OK)),
                ]),
            )
            .add(
                0,
                Line::from(vec![
                    Span::styled("lowest fail ", fg(DIM)),
                    Span::styled(rate(app.lowest_fail), bold(BAD)),
                ]),
            );
        if let (Some(p), Some(f)) = (app.best_pass, app.lowest_fail) {
            second = second.add(1, format!("gap {:.1} %", (f / p - 1.0) * 100.0));
        }
        if let Some(h) = app.held {
            second = second.add(
                0,
                Line::from(vec![
                    Span::styled(format!("holds {:?} ", h.length), fg(DIM)),
                    Span::styled(rate(Some(h.rate)), bold(OK)),
                ]),
            );
        }
        second = second.add(
            2,
            format!(
                "{} step{} run",
                app.steps.len(),
                if app.steps.len() == 1 { "" } else { "s" }
            ),
        );
        Paragraph::new(vec![first, second.fit(width)]).render(area, buf);
    }
}

/// The step running: its rate and phase, its progress, what it has answered so far.
pub struct StepPanel<'a>(pub &'a KneeApp);

impl Widget for &StepPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let width = usize::from(area.width);
        let [text, gauge] =
            Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
        let Some(r) = &app.running else {
            let idle = if app.stopping {
                "stopping…"
            } else if app.steps.is_empty() {
                "starting…"
            } else {
                "between steps…"
            };
            Paragraph::new(Span::styled(idle, fg(DIM))).render(text, buf);
            return;
        };
        let hold;
        let what = match r.phase.as_str() {
            "confirm" => "confirming a fail",
            "repeat" => "repeating an unsure step, twice as long",
            tailscope_report::knee::HOLD => {
                hold = format!(
                    "confirmation: holding the rate found for {:?}, measured from its start",
                    r.length
                );
                &hold
            }
            p => p,
        };
        let line = Fields::new(" · ")
            .add(
                0,
                Span::styled(
                    format!(
                        "step {}: {} req/s",
                        r.index + 1,
                        fmt_count(r.rate.round() as u64)
                    ),
                    bold(P99),
                ),
            )
            .add(1, what.to_string())
            .add(
                2,
                format!("answered {}/s", r.answered_rps.map_or("n/a".into(), fmt_si)),
            )
            .add(
                3,
                format!("p99 so far {}", r.p99_us.map_or("n/a".into(), fmt_us)),
            )
            .fit(width);
        Paragraph::new(line).render(text, buf);
        progress(r).render(gauge, buf);
    }
}

/// The step's progress: its warm-up, then its measured seconds.
fn progress(r: &Running) -> Gauge<'static> {
    let (ratio, label) = if r.warmup_left > std::time::Duration::ZERO {
        (
            0.0,
            format!("warming up, {:.1} s left", r.warmup_left.as_secs_f64()),
        )
    } else {
        let done = r.elapsed.as_secs_f64();
        let of = r.length.as_secs_f64().max(f64::MIN_POSITIVE);
        (
            (done / of).clamp(0.0, 1.0),
            format!("{done:.1} s of {of:.0} s"),
        )
    };
    Gauge::default()
        .ratio(ratio)
        .label(label)
        .gauge_style(fg(P50))
}

/// The rates drawn: every step's, the running one's, and the search's range.
fn x_bounds(app: &KneeApp) -> (f64, f64) {
    let rates = app
        .steps
        .iter()
        .map(|s| s.offered_rps)
        .chain(app.running.as_ref().map(|r| r.rate));
    let (lo, hi) = rates.fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(r), hi.max(r)));
    if lo > hi {
        let start = app.info.rates.0.max(1.0);
        (0.0, start * 2.0)
    } else {
        (0.0, hi * 1.1)
    }
}

/// The search's steps sorted by offered rate, each as `(offered, f(step))` where `f` has a
/// value. The confirmation's runs are not on the curve (as on the page): a 10 s run from a
/// cold start beside a step at the same rate would draw a spike that is no rate's.
fn by_rate(app: &KneeApp, f: impl Fn(&KneeStep) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = app
        .steps
        .iter()
        .filter(|s| s.phase != tailscope_report::knee::HOLD)
        .filter_map(|s| f(s).map(|v| (s.offered_rps, v)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// Latency against the offered rate: each step's p50 and p99 on a log scale, and the
/// latency SLOs' limits across.
pub struct CurvePanel<'a>(pub &'a KneeApp);

impl Widget for &CurvePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let log = |v: u64| (v.max(1) as f64).log10();
        let p50 = by_rate(app, |s| s.p50_us.map(log));
        let p99 = by_rate(app, |s| s.p99_us.map(log));
        let (x0, x1) = x_bounds(app);
        let limits: Vec<(String, [(f64, f64); 2])> = app
            .info
            .latency_limits
            .iter()
            .map(|(name, us)| {
                let y = us.max(1.0).log10();
                (name.clone(), [(x0, y), (x1, y)])
            })
            .collect();
        let ys = p50
            .iter()
            .chain(&p99)
            .map(|p| p.1)
            .chain(limits.iter().map(|l| l.1[0].1));
        let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
        let mut sets = vec![
            app.theme.line("p50", P50, &p50),
            app.theme.line("p99", P99, &p99),
        ];
        for (name, line) in &limits {
            sets.push(app.theme.line(name, BAD, line));
        }
        let mut title = Fields::new(" ")
            .add(0, "Latency by offered rate")
            .add(1, "(log)");
        if let Some(key) = app.theme.key(&[("p50", P50), ("p99", P99), ("SLO", BAD)]) {
            title = title.add_lead(2, "  ", key);
        }
        LogLatencyChart {
            sets,
            title,
            x: ([x0, x1], vec![fmt_si(x0), fmt_si(x1)]),
            y: (lo, hi),
            empty: (2.0, 5.0),
        }
        .chart(area)
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
        .render(area, buf);
    }
}

/// The answered rate against the offered one, with the line where they are equal: a step
/// below it is one the server fell behind in.
pub struct RatePanel<'a>(pub &'a KneeApp);

impl Widget for &RatePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let answered = by_rate(app, |s| Some(s.answered_rps));
        let (x0, x1) = x_bounds(app);
        let equal = [(x0, x0), (x1, x1)];
        let sets = vec![
            app.theme.line("answered", P50, &answered),
            app.theme.line("offered", DIM, &equal),
        ];
        Chart::new(sets)
            .legend_position(Some(LegendPosition::TopLeft))
            .block(panel("Answered by offered rate", area.width))
            .x_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(vec![fmt_si(x0), fmt_si(x1)])
                    .style(fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(y_labels(vec![fmt_si(x0), fmt_si(x1)], area.height))
                    .style(fg(DIM)),
            )
            .render(area, buf);
    }
}

/// Every step in the order they ran (the latest where the panel is short), with its
/// verdict; the one being confirmed or repeated says so.
pub struct StepsPanel<'a>(pub &'a KneeApp);

impl Widget for &StepsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel("Steps", area.width);
        let inner = block.inner(area);
        block.render(area, buf);
        let rows = usize::from(inner.height).saturating_sub(1);
        let head = Line::styled(
            format!(
                "{:>3} {:>9} {:>10} {:>9} {:>9}  {}",
                "#", "offered/s", "answered/s", "p50", "p99", "verdict"
            ),
            fg(DIM).add_modifier(Modifier::BOLD),
        );
        let skip = app.steps.len().saturating_sub(rows);
        let mut lines = vec![head];
        for (i, s) in app.steps.iter().enumerate().skip(skip) {
            let mut word = verdict(s);
            if s.phase == tailscope_report::knee::HOLD {
                word.push_str(if s.call == Call::Pass {
                    " (held)"
                } else {
                    " (did not hold)"
                });
            }
            if app.being_rerun(i) {
                let running = app.running.as_ref().map(|r| r.phase.as_str());
                word.push_str(match running {
                    Some("repeat") => ", repeating",
                    _ => ", confirming",
                });
            }
            let style = match s.call {
                Call::Pass => fg(OK),
                Call::Fail => fg(BAD),
                Call::Unsure => fg(P99),
            };
            lines.push(Line::from(vec![
                Span::raw(format!(
                    "{:>3} {:>9} {:>10} {:>9} {:>9}  ",
                    s.index + 1,
                    fmt_count(s.offered_rps.round() as u64),
                    fmt_count(s.answered_rps.round() as u64),
                    s.p50_us.map_or("n/a".into(), fmt_us),
                    s.p99_us.map_or("n/a".into(), fmt_us),
                )),
                Span::styled(word, style),
            ]));
        }
        Paragraph::new(lines).render(inner, buf);
    }
}

/// The keys, and the last thing the search said.
pub struct FooterPanel<'a>(pub &'a KneeApp);

impl Widget for &FooterPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let width = usize::from(area.width);
        let keys = "q stop the search (keeps what it found)";
        let mut fields = Fields::new("  ").add(0, Span::styled(keys, fg(DIM)));
        if let Some(note) = &app.note {
            let note = sentences(note, width.saturating_sub(keys.len() + 2));
            if !note.is_empty() {
                fields = fields.add(1, Span::styled(note, Style::default().fg(P99)));
            }
        }
        Paragraph::new(fields.fit(width)).render(area, buf);
    }
}
