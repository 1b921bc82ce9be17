//! The header: what is loaded, by whom, how, and how far the run is.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Gauge, Paragraph, Widget};
use tailscope_loadgen::Phase;

use super::fit::Fields;
use super::format::{fmt_count, fmt_cpus, fmt_si};
use super::theme::{bold, fg, panel, DIM, OK, P50, P99};
use crate::app::App;

/// Target, server, mode, progress and state.
pub struct HeaderPanel<'a>(pub &'a App);

impl Widget for &HeaderPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let info = &app.info;
        let block = panel("tailscope", area.width);
        let inner = block.inner(area);
        block.render(area, buf);
        let width = usize::from(inner.width);
        // What is loaded comes first; the pinning before the server's name, which the user
        // typed themselves. Each part is one unit: "CPUs: server 0 · generator 1" whole.
        let mut line1 = Fields::new("   ").add(0, Span::styled(info.target.clone(), bold_plain()));
        if !(info.server_cpus.is_empty() && info.client_cpus.is_empty()) {
            line1 = line1.add(
                1,
                format!(
                    "CPUs: server {} · generator {}",
                    fmt_cpus(&info.server_cpus),
                    fmt_cpus(&info.client_cpus)
                ),
            );
        }
        if let Some(server) = &info.server {
            line1 = line1.add(2, format!("server: {server}"));
        }
        Paragraph::new(line1.fit(width)).render(Rect { height: 1, ..inner }, buf);

        let (state, color) = match (app.snapshot.as_ref().map(|s| s.phase), app.quitting) {
            (Some(Phase::Done), _) => ("done", OK),
            (_, true) | (Some(Phase::Stopping), _) => ("stopping", P99),
            (Some(Phase::WarmingUp), _) => ("warming up", P50),
            (Some(Phase::Running), _) => ("running", OK),
            (None, _) => ("starting", DIM),
        };
        let mut state_field = vec![Span::styled(state, bold(color))];
        if app.frozen {
            state_field.push(Span::styled(" FROZEN", bold(P99)));
        }
        let mut line2 = Fields::new(" · ").add(0, state_field);
        line2 = match app.rate {
            Some(r) => line2.add_short(
                1,
                format!("open loop at {} req/s", fmt_si(r)),
                format!("open loop at {} r/s", fmt_si(r)),
            ),
            None => line2.add(1, "closed loop"),
        };
        line2 = line2
            .add(2, format!("{} conn", fmt_count(info.connections as u64)))
            .add(
                3,
                format!(
                    "{} thread{}",
                    info.threads,
                    if info.threads == 1 { "" } else { "s" }
                ),
            );
        if info.pipeline > 1 {
            line2 = line2.add(4, format!("pipeline {}", info.pipeline));
        }
        // A column apart: at 80 columns the line's last field ran into the gauge's bar.
        let [l, g] = Layout::horizontal([
            Constraint::Min(10),
            Constraint::Length(26.min(inner.width / 3)),
        ])
        .spacing(1)
        .areas(Rect {
            y: inner.y + 1,
            height: 1,
            ..inner
        });
        Paragraph::new(line2.fit(usize::from(l.width))).render(l, buf);

        let snap = app.snapshot.as_deref();
        let (ratio, label) = match (info.duration, info.requests, snap) {
            (_, _, Some(s)) if s.phase == Phase::WarmingUp => (
                0.0,
                Fields::new(" ")
                    .add(1, "warm-up")
                    .add(0, format!("{:.1} s", s.warmup_left.as_secs_f64()))
                    .add(2, "left"),
            ),
            (Some(d), _, Some(s)) => {
                let done = s.elapsed.as_secs_f64().min(d.as_secs_f64());
                (
                    done / d.as_secs_f64().max(1e-9),
                    Fields::new(" ")
                        .add(0, format!("{:.1}", s.elapsed.as_secs_f64()))
                        .add(1, format!("/ {:.0} s", d.as_secs_f64())),
                )
            }
            (_, Some(n), Some(s)) => {
                let done = s.totals.requests();
                (
                    done as f64 / n.max(1) as f64,
                    Fields::new(" ")
                        .add(0, fmt_count(done))
                        .add(1, format!("/ {}", fmt_count(n)))
                        .add(2, "req"),
                )
            }
            _ => (0.0, Fields::new(" ")),
        };
        Gauge::default()
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label.fit_text(usize::from(g.width)))
            .gauge_style(fg(P50))
            .render(g, buf);
    }
}

/// Bold in the terminal's own colour: the target, which is what the user typed.
fn bold_plain() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}
