//! Drawing: a pure function of the [`App`]. Each panel is a widget over a borrowed `App`;
//! nothing here changes state. Small terminals lose whole panels (lowest priority first),
//! never get them squeezed into garbage.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Clear, Dataset, Gauge, GraphType, Paragraph, Widget};
use ratatui::Frame;
use tailscope_loadgen::report::{fmt_count, fmt_us, log_buckets, Bucket};
use tailscope_loadgen::Phase;

use crate::app::{App, View};

const OK: Color = Color::Green;
const BAD: Color = Color::Red;
const P50: Color = Color::Cyan;
const P99: Color = Color::Yellow;
const MAX: Color = Color::Magenta;
const DIM: Color = Color::DarkGray;

/// A rate with an SI suffix: `950`, `12.3k`, `1.88M`.
pub fn fmt_si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A chart line in Braille dots.
fn line<'a>(name: &'a str, color: Color, data: &'a [(f64, f64)]) -> Dataset<'a> {
    Dataset::default()
        .name(name)
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(Style::default().fg(color))
        .data(data)
}

fn panel(title: &str) -> Block<'_> {
    Block::bordered().title(Span::styled(
        format!(" {title} "),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

/// Draws the whole screen.
pub fn render(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if area.width < 40 || area.height < 8 {
        let msg = format!(
            "terminal too small ({}×{}): need 40×8 — q quits",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(msg), area);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(&Header(app), header);
    frame.render_widget(&Footer(app), footer);
    match app.view {
        View::Overview => overview(app, frame, body),
        View::Latency => latency_view(app, frame, body),
        View::Cores => cores_view(app, frame, body),
    }
    if app.help {
        let w = 54.min(area.width);
        let h = 14.min(area.height);
        let popup = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        frame.render_widget(Clear, popup);
        frame.render_widget(&Help, popup);
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
    frame.render_widget(&Throughput(app), tp);
    frame.render_widget(&Percentiles(app), pct);
    if rows.len() == 3 {
        let [lat, hist] =
            Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)])
                .areas(rows[1]);
        frame.render_widget(&LatencyChart(app), lat);
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
            frame.render_widget(&Errors(app), e);
            frame.render_widget(&Cpus(app), c);
            frame.render_widget(&Slowest(app), s);
        } else {
            let [e, c] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(bottom);
            frame.render_widget(&Errors(app), e);
            frame.render_widget(&Cpus(app), c);
        }
    }
}

fn latency_view(app: &App, frame: &mut Frame, body: Rect) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
    let [chart, pct] =
        Layout::horizontal([Constraint::Percentage(70), Constraint::Percentage(30)]).areas(top);
    frame.render_widget(&LatencyChart(app), chart);
    frame.render_widget(&Percentiles(app), pct);
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
    frame.render_widget(&Cpus(app), cpus);
    frame.render_widget(&Errors(app), errors);
    frame.render_widget(&Spikes(app), middle);
    frame.render_widget(&Slowest(app), bottom);
}

/// The spike causes the run so far supports, with their evidence.
pub struct Spikes<'a>(pub &'a App);

impl Widget for &Spikes<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Spikes: likely causes");
        if self.0.diagnosis.is_empty() {
            Paragraph::new(Line::from(Span::styled(
                "no spike cause found so far (a cause is named only when its signature and its evidence are both there)",
                Style::default().fg(DIM),
            )))
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block)
            .render(area, buf);
            return;
        }
        let mut lines = Vec::new();
        for d in &self.0.diagnosis {
            let window = d.window.map_or(String::new(), |w| {
                format!(" at {:.2}–{:.2} s", w.start_s, w.end_s)
            });
            lines.push(Line::from(vec![
                Span::styled(
                    d.cause.clone(),
                    Style::default().fg(BAD).add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(
                    "  {} requests{window}",
                    fmt_count(d.requests_affected)
                )),
            ]));
            lines.push(Line::from(Span::raw(d.evidence.clone())));
        }
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block)
            .render(area, buf);
    }
}

/// Target, server, mode, progress and state.
pub struct Header<'a>(pub &'a App);

impl Widget for &Header<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let info = &app.info;
        let block = panel("tailscope");
        let inner = block.inner(area);
        block.render(area, buf);
        let server = info
            .server
            .as_ref()
            .map_or(String::new(), |s| format!("   server: {s}"));
        let cpus = if info.server_cpus.is_empty() && info.client_cpus.is_empty() {
            String::new()
        } else {
            format!(
                "   CPUs: server {} · generator {}",
                list(&info.server_cpus),
                list(&info.client_cpus)
            )
        };
        let line1 = Line::from(vec![
            Span::styled(
                info.target.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(server),
            Span::raw(cpus),
        ]);
        let mode = match app.rate {
            Some(r) => format!("open loop at {} req/s", fmt_si(r)),
            None => "closed loop".to_string(),
        };
        let (state, color) = match (app.snapshot.as_ref().map(|s| s.phase), app.quitting) {
            (Some(Phase::Done), _) => ("done", OK),
            (_, true) | (Some(Phase::Stopping), _) => ("stopping", P99),
            (Some(Phase::WarmingUp), _) => ("warming up", P50),
            (Some(Phase::Running), _) => ("running", OK),
            (None, _) => ("starting", DIM),
        };
        let frozen = if app.frozen { " FROZEN" } else { "" };
        let pipeline = if info.pipeline > 1 {
            format!(" · pipeline {}", info.pipeline)
        } else {
            String::new()
        };
        let left = format!(
            "{mode} · {} conn · {} thread{}{pipeline}",
            info.connections,
            info.threads,
            if info.threads == 1 { "" } else { "s" }
        );
        let [l, g] = Layout::horizontal([
            Constraint::Min(10),
            Constraint::Length(26.min(inner.width / 3)),
        ])
        .areas(Rect {
            y: inner.y + 1,
            height: 1,
            ..inner
        });
        Paragraph::new(line1).render(Rect { height: 1, ..inner }, buf);
        // State first: on a narrow terminal the end of the line is what gets cut.
        Paragraph::new(Line::from(vec![
            Span::styled(
                state,
                Style::default().fg(color).add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                frozen,
                Style::default().fg(P99).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(" · {left}")),
        ]))
        .render(l, buf);
        let snap = app.snapshot.as_deref();
        let (ratio, label) = match (info.duration, info.requests, snap) {
            (_, _, Some(s)) if s.phase == Phase::WarmingUp => (
                0.0,
                format!("warm-up {:.1} s left", s.warmup_left.as_secs_f64()),
            ),
            (Some(d), _, Some(s)) => {
                let done = s.elapsed.as_secs_f64().min(d.as_secs_f64());
                (
                    done / d.as_secs_f64().max(1e-9),
                    format!("{:.1} / {:.0} s", s.elapsed.as_secs_f64(), d.as_secs_f64()),
                )
            }
            (_, Some(n), Some(s)) => {
                let done = s.totals.requests();
                (
                    done as f64 / n.max(1) as f64,
                    format!("{} / {} req", fmt_count(done), fmt_count(n)),
                )
            }
            _ => (0.0, String::new()),
        };
        Gauge::default()
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label)
            .gauge_style(Style::default().fg(P50))
            .render(g, buf);
    }
}

fn list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "any".into();
    }
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Views and keys.
pub struct Footer<'a>(pub &'a App);

impl Widget for &Footer<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let mut spans = Vec::new();
        for v in View::ALL {
            let style = if v == app.view {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default().fg(DIM)
            };
            spans.push(Span::styled(format!(" {} ", v.title()), style));
        }
        spans.push(Span::raw(
            "  q quit · p freeze · +/- rate · Tab view · ? keys",
        ));
        if let Some(note) = &app.note {
            spans.push(Span::styled(format!("  {note}"), Style::default().fg(P99)));
        }
        Paragraph::new(Line::from(spans)).render(area, buf);
    }
}

/// Requests per second over time, successes and errors apart, one point per finished
/// second of the run.
///
/// Not per tick: workers hand over their intervals on their own clocks, so one 100 ms tick
/// of the aggregator can hold two intervals of a worker and the next none; a tick's count
/// ×10 drew rates that never happened (379 k req/s in a run that never passed 190 k). A
/// finished second holds exactly the requests that ended in it.
pub struct Throughput<'a>(pub &'a App);

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

impl Widget for &Throughput<'_> {
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
        let title = format!(
            "Throughput  last second {now} req/s · mean {} req/s",
            mean.map_or("n/a".to_string(), fmt_si)
        );
        let ok: Vec<(f64, f64)> = rates.iter().map(|&(t, ok, _)| (t, ok)).collect();
        let err: Vec<(f64, f64)> = rates.iter().map(|&(t, _, e)| (t, e)).collect();
        let top = rates
            .iter()
            .map(|&(_, ok, e)| ok.max(e))
            .fold(1.0, f64::max)
            * 1.1;
        let (x0, x1) = x_bounds(app);
        let mut sets = vec![line("ok", OK, &ok)];
        if err.iter().any(|(_, e)| *e > 0.0) {
            sets.push(line("errors", BAD, &err));
        }
        Chart::new(sets)
            .block(panel(&title))
            .x_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(vec![format!("{x0:.0}s"), format!("{x1:.0}s")])
                    .style(Style::default().fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, top])
                    .labels(vec!["0".to_string(), fmt_si(top / 2.0), fmt_si(top)])
                    .style(Style::default().fg(DIM)),
            )
            .render(area, buf);
    }
}

fn x_bounds(app: &App) -> (f64, f64) {
    let x1 = app.history.back().map_or(10.0, |p| p.t_s).max(1.0);
    let x0 = app
        .history
        .front()
        .map_or(0.0, |p| p.t_s)
        .min(x1 - 1.0)
        .max(0.0);
    (x0, x1)
}

/// Live percentiles, of the whole run and of the last tick.
pub struct Percentiles<'a>(pub &'a App);

impl Widget for &Percentiles<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency");
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("waiting for the first responses…")
                .block(block)
                .render(area, buf);
            return;
        };
        let (all, tick) = (&s.latency, &s.last_tick_latency);
        let measured = s.totals.successes > 0;
        let mut lines = vec![Line::from(Span::styled(
            "          run     last tick",
            Style::default().fg(DIM),
        ))];
        for (name, a, t, color) in [
            ("p50", all.p50, tick.p50, P50),
            ("p90", all.p90, tick.p90, P50),
            ("p99", all.p99, tick.p99, P99),
            ("p99.9", all.p999, tick.p999, P99),
            ("max", all.max, tick.max, MAX),
        ] {
            let show = |v: u64, any: bool| if any { fmt_us(v) } else { "n/a".into() };
            lines.push(Line::from(vec![
                Span::styled(format!("{name:>6}  "), Style::default().fg(color)),
                Span::raw(format!(
                    "{:>8}  {:>9}",
                    show(a, measured),
                    show(t, s.last_tick.successes > 0)
                )),
            ]));
        }
        let unfinished = if s.totals.unfinished > 0 {
            format!(" · {} unfinished", fmt_count(s.totals.unfinished))
        } else {
            String::new()
        };
        lines.push(Line::from(format!(
            "  {} requests · {} errors · {} timeouts{unfinished}",
            fmt_count(s.totals.requests()),
            fmt_count(s.totals.error_total()),
            fmt_count(s.totals.timeouts())
        )));
        Paragraph::new(lines).block(block).render(area, buf);
    }
}

/// p50, p99 and max per tick on a log scale, so a 1.6 s spike stands out from a 1 ms median.
pub struct LatencyChart<'a>(pub &'a App);

impl Widget for &LatencyChart<'_> {
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
            line("p50", P50, &p50),
            line("p99", P99, &p99),
            line("max", MAX, &max),
        ];
        Chart::new(sets)
            .block(panel("Latency per tick (log scale)"))
            .x_axis(
                Axis::default()
                    .bounds([x0, x1])
                    .labels(vec![format!("{x0:.0}s"), format!("{x1:.0}s")])
                    .style(Style::default().fg(DIM)),
            )
            .y_axis(
                Axis::default()
                    .bounds([lo, hi])
                    .labels(labels)
                    .style(Style::default().fg(DIM)),
            )
            .render(area, buf);
    }
}

/// The latency distribution in log buckets: a second mode shows as its own bars.
pub struct HistogramPanel<'a>(pub &'a App);

impl Widget for &HistogramPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Latency histogram");
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
        let label_w = 19usize;
        let bar_w = (inner.width as usize).saturating_sub(label_w + 8).max(1);
        let rows = fit_rows(&buckets, inner.height as usize);
        let lines: Vec<Line> = rows
            .iter()
            .map(|row| match row {
                None => Line::from(Span::styled("        ⋮ empty", Style::default().fg(DIM))),
                Some(b) => {
                    let n = if b.count == 0 {
                        0
                    } else {
                        ((b.count as f64 / most) * bar_w as f64).ceil() as usize
                    };
                    let color = if b.low_us >= s.latency.p99.max(1) {
                        P99
                    } else {
                        P50
                    };
                    Line::from(vec![
                        Span::raw(format!("{:>8}–{:<8} ", fmt_us(b.low_us), fmt_us(b.high_us))),
                        Span::styled("█".repeat(n.min(bar_w)), Style::default().fg(color)),
                        Span::raw(format!(" {:.1}%", 100.0 * b.count as f64 / total)),
                    ])
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

/// Status codes, error kinds and timeouts, with how recently each went up.
pub struct Errors<'a>(pub &'a App);

impl Widget for &Errors<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel("Status & errors");
        let Some(s) = app.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let mut lines = Vec::new();
        for (code, n) in &s.totals.status_codes {
            let color = if (200..300).contains(code) { OK } else { P99 };
            lines.push(Line::from(vec![
                Span::styled(format!("[{code}] "), Style::default().fg(color)),
                Span::raw(fmt_count(*n)),
            ]));
        }
        // A response is not a success because it arrived: non-2xx get their own line.
        let non2xx = s.totals.non2xx();
        if non2xx > 0 && s.totals.successes > 0 {
            lines.push(Line::from(Span::styled(
                format!(
                    "non-2xx: {} ({:.1} %)",
                    fmt_count(non2xx),
                    100.0 * non2xx as f64 / s.totals.successes as f64
                ),
                Style::default().fg(BAD),
            )));
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
                .map_or(String::new(), |(_, t)| {
                    format!("  last {:.1}s ago", (now - t).max(0.0))
                });
            lines.push(Line::from(vec![
                Span::styled(format!("{kind}: "), Style::default().fg(BAD)),
                Span::raw(fmt_count(n)),
                Span::styled(ago, Style::default().fg(DIM)),
            ]));
        }
        if !any {
            lines.push(Line::from(Span::styled(
                "no errors",
                Style::default().fg(OK),
            )));
        }
        if s.totals.reconnects > 0 {
            lines.push(Line::from(format!(
                "reconnects: {}",
                fmt_count(s.totals.reconnects)
            )));
        }
        if s.totals.late_sends > 0 {
            lines.push(Line::from(Span::styled(
                format!("late sends: {}", fmt_count(s.totals.late_sends)),
                Style::default().fg(P99),
            )));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}

/// A bar per CPU: user, system and softirq shares, and who is pinned there.
pub struct Cpus<'a>(pub &'a App);

impl Widget for &Cpus<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel("CPUs (S server · G generator)");
        let inner = block.inner(area);
        block.render(area, buf);
        let Some(cpus) = &app.cpus else {
            Paragraph::new("per-CPU usage n/a (/proc/stat unreadable)").render(inner, buf);
            return;
        };
        let bar_w = (inner.width as usize).saturating_sub(28).max(4);
        let mut lines = Vec::new();
        for c in cpus {
            let role = match (
                app.info.server_cpus.contains(&c.cpu),
                app.info.client_cpus.contains(&c.cpu),
            ) {
                (true, true) => "SG",
                (true, false) => "S ",
                (false, true) => " G",
                _ => "  ",
            };
            let cells = |pct: f64| ((pct / 100.0) * bar_w as f64).round() as usize;
            let (u, sy, si) = (
                cells(c.user_pct),
                cells(c.system_pct + c.irq_pct),
                cells(c.softirq_pct),
            );
            let used = (u + sy + si).min(bar_w);
            lines.push(Line::from(vec![
                Span::raw(format!("cpu{:<2} {role} ", c.cpu)),
                Span::styled("█".repeat(u.min(bar_w)), Style::default().fg(OK)),
                Span::styled(
                    "█".repeat(sy.min(bar_w.saturating_sub(u))),
                    Style::default().fg(BAD),
                ),
                Span::styled(
                    "█".repeat(si.min(bar_w.saturating_sub(u + sy))),
                    Style::default().fg(P50),
                ),
                Span::styled("░".repeat(bar_w - used), Style::default().fg(DIM)),
                Span::raw(format!(
                    " {:>3.0}% u{:<2.0} s{:<2.0} si{:<2.0}",
                    c.busy_pct(),
                    c.user_pct,
                    c.system_pct + c.irq_pct,
                    c.softirq_pct
                )),
            ]));
        }
        lines.push(Line::from(Span::styled(
            "u user · s system+irq · si softirq",
            Style::default().fg(DIM),
        )));
        // The profiler's counters: "n/a" where this machine cannot count them (no PMU for
        // IPC, no perf permission), never a made-up zero.
        let counters = app.counters.as_ref();
        for c in cpus {
            let get =
                |v: Option<&Vec<Option<f64>>>| v.and_then(|v| v.get(c.cpu).copied().flatten());
            let ctx = get(counters.map(|k| &k.context_switches_per_s));
            let migr = get(counters.map(|k| &k.migrations_per_s));
            let ipc = get(counters.map(|k| &k.ipc));
            lines.push(Line::from(Span::styled(
                format!(
                    "cpu{:<2} ctx/s {} migr/s {} IPC {}",
                    c.cpu,
                    ctx.map_or("n/a".into(), |v| format!("{v:.0}")),
                    migr.map_or("n/a".into(), |v| format!("{v:.0}")),
                    ipc.map_or("n/a".into(), |v| format!("{v:.2}"))
                ),
                Style::default().fg(DIM),
            )));
        }
        // The target's own accept queue: full means new connections wait for SYN retransmits.
        let (text, color) = match app.listen {
            Some(l) if l.full > 0 => (format!("listen queue {}/{} FULL", l.queue, l.backlog), BAD),
            Some(l) => (format!("listen queue {}/{}", l.queue, l.backlog), DIM),
            None => ("listen queue n/a".to_string(), DIM),
        };
        lines.push(Line::from(Span::styled(text, Style::default().fg(color))));
        Paragraph::new(lines).render(inner, buf);
    }
}

/// The slowest requests so far, with where their time went.
pub struct Slowest<'a>(pub &'a App);

impl Widget for &Slowest<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = panel("Slowest requests");
        let Some(s) = self.0.snapshot.as_deref() else {
            Paragraph::new("").block(block).render(area, buf);
            return;
        };
        let mut lines = vec![Line::from(Span::styled(
            "  latency      at  conn  split",
            Style::default().fg(DIM),
        ))];
        for r in &s.slowest {
            let outcome = match (r.status, r.error) {
                (Some(c), _) => c.to_string(),
                (None, Some(k)) => k.to_string(),
                (None, None) if r.unfinished => "unfinished".into(),
                _ => "?".into(),
            };
            let mut split = Vec::new();
            if let Some(q) = r.queued_us.filter(|q| *q > 0) {
                split.push(format!("queued {}", fmt_us(q)));
            }
            if let Some(c) = r.connect_us {
                split.push(format!("connect {}", fmt_us(c)));
            }
            if r.error.is_none() {
                split.push(format!("ttfb {}", fmt_us(r.ttfb_us)));
                split.push(format!("body {}", fmt_us(r.body_us)));
            }
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{:>9} ", fmt_us(r.latency_us)),
                    Style::default().fg(P99),
                ),
                Span::raw(format!(
                    "{:>6.2}s {:>4}  {} [{outcome}]",
                    r.at_s,
                    r.conn,
                    split.join(" ")
                )),
            ]));
        }
        Paragraph::new(lines).block(block).render(area, buf);
    }
}

/// The keys.
pub struct Help;

impl Widget for &Help {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let lines = vec![
            Line::from("q, Esc, Ctrl-C  stop the load, print the summary"),
            Line::from("p               freeze / resume the display"),
            Line::from("+ / -           raise / lower the rate (open loop)"),
            Line::from("Tab             next view"),
            Line::from("1 2 3           overview · latency · cores & spikes"),
            Line::from("?               show / hide this help"),
            Line::from(""),
            Line::from(Span::styled(
                "The load goes on while frozen or in help.",
                Style::default().fg(DIM),
            )),
        ];
        Paragraph::new(lines).block(panel("Keys")).render(area, buf);
    }
}
