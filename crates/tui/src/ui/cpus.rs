//! The CPUs panel: who runs where, and how busy each core is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::theme::{fg, panel, BAD, DIM, OK, P50};
use crate::app::App;

/// A bar per CPU: user, system and softirq shares, and who is pinned there.
pub struct CpusPanel<'a>(pub &'a App);

impl Widget for &CpusPanel<'_> {
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
                Span::styled("█".repeat(u.min(bar_w)), fg(OK)),
                Span::styled("█".repeat(sy.min(bar_w.saturating_sub(u))), fg(BAD)),
                Span::styled("█".repeat(si.min(bar_w.saturating_sub(u + sy))), fg(P50)),
                Span::styled("░".repeat(bar_w - used), fg(DIM)),
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
            fg(DIM),
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
                fg(DIM),
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
