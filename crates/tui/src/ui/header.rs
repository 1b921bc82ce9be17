//! The header: what is loaded, by whom, how, and how far the run is.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph, Widget};
use tailscope_loadgen::Phase;

use super::format::{fmt_count, fmt_cpus, fmt_si};
use super::theme::{bold, fg, panel, DIM, OK, P50, P99};
use crate::app::App;

/// Target, server, mode, progress and state.
pub struct HeaderPanel<'a>(pub &'a App);

impl Widget for &HeaderPanel<'_> {
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
                fmt_cpus(&info.server_cpus),
                fmt_cpus(&info.client_cpus)
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
            Span::styled(frozen, bold(P99)),
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
            .gauge_style(fg(P50))
            .render(g, buf);
    }
}
