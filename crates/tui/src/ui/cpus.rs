//! The CPUs panel: who runs where, and how busy each core is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::fit::{fit_columns, Fields};
use super::format::fmt_or_na;
use super::theme::{fg, panel_fields, Theme, BAD, DIM, OK, P50};
use tailscope_targets::procstat::CpuUsage;

use crate::app::App;

/// A bar per CPU: user, system and softirq shares, and who is pinned there.
pub struct CpusPanel<'a>(pub &'a App);

impl Widget for &CpusPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let block = panel_fields(
            Fields::new(" ")
                .add(0, "CPUs")
                .add(1, "(S server · G generator)"),
            area.width,
        );
        let inner = block.inner(area);
        block.render(area, buf);
        let width = usize::from(inner.width);
        let Some(cpus) = &app.cpus else {
            let line = Fields::new(" ")
                .add(0, "per-CPU usage n/a")
                .add(1, "(/proc/stat unreadable)")
                .fit(width);
            Paragraph::new(line).render(inner, buf);
            return;
        };
        let split = |c: &CpuUsage| {
            format!(
                "u{:<2.0} s{:<2.0} si{:<2.0}",
                c.user_pct,
                c.system_pct + c.irq_pct,
                c.softirq_pct
            )
        };
        let widest = |f: &dyn Fn(&CpuUsage) -> String| {
            cpus.iter().map(|c| f(c).chars().count()).max().unwrap_or(0)
        };
        let name_w = widest(&|c| cpu_name(c.cpu));
        let split_w = widest(&split);
        // Which core and how busy stay; the u/s/si split, then the roles, then the bar go
        // first, each whole (the bar only draws the numbers beside it).
        const MIN_BAR: usize = 4;
        let columns = [(0, name_w), (2, 2), (3, MIN_BAR), (0, 4), (1, split_w)];
        let [_, show_role, show_bar, _, show_split] = fit_columns(&columns, 1, width)[..] else {
            unreachable!("five columns in, five out")
        };
        let fixed: usize = columns
            .iter()
            .zip([true, show_role, false, true, show_split])
            .filter(|(_, kept)| *kept)
            .map(|((_, w), _)| w + 1)
            .sum();
        let bar_w = width.saturating_sub(fixed + 1).max(MIN_BAR);
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
            let mut spans = vec![Span::raw(format!("{:<name_w$}", cpu_name(c.cpu)))];
            if show_role {
                spans.push(Span::raw(format!(" {role}")));
            }
            if show_bar {
                let cells = |pct: f64| ((pct / 100.0) * bar_w as f64).round() as usize;
                let (u, sy, si) = (
                    cells(c.user_pct),
                    cells(c.system_pct + c.irq_pct),
                    cells(c.softirq_pct),
                );
                let used = (u + sy + si).min(bar_w);
                let [user, system, softirq] = bar_glyphs(app.theme);
                spans.extend([
                    Span::raw(" "),
                    Span::styled(user.repeat(u.min(bar_w)), fg(OK)),
                    Span::styled(system.repeat(sy.min(bar_w.saturating_sub(u))), fg(BAD)),
                    Span::styled(
                        softirq.repeat(si.min(bar_w.saturating_sub(u + sy))),
                        fg(P50),
                    ),
                    Span::styled("░".repeat(bar_w - used), fg(DIM)),
                ]);
            }
            spans.push(Span::raw(format!(" {:>3.0}%", c.busy_pct())));
            if show_split {
                spans.push(Span::raw(format!(" {}", split(c))));
            }
            lines.push(Line::from(spans));
        }
        if show_split {
            lines.push(legend(app.theme, width));
        }
        lines.extend(counter_lines(app, cpus, width));
        lines.push(listen_line(app, width));
        Paragraph::new(lines).render(inner, buf);
    }
}

/// A CPU's name in the panel, `cpu3 `.
fn cpu_name(cpu: usize) -> String {
    format!("cpu{cpu:<2}")
}

/// The profiler's counters per CPU (context switches, migrations, IPC), as many columns as fit.
fn counter_lines(app: &App, cpus: &[CpuUsage], width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    // The profiler's counters: "n/a" where this machine cannot count them (no PMU for
    // IPC, no perf permission), never a made-up zero.
    let counters = app.counters.as_ref();
    let rows: Vec<[String; 4]> = cpus
        .iter()
        .map(|c| {
            let get =
                |v: Option<&Vec<Option<f64>>>| v.and_then(|v| v.get(c.cpu).copied().flatten());
            let ctx = get(counters.map(|k| &k.context_switches_per_s));
            let migr = get(counters.map(|k| &k.migrations_per_s));
            let ipc = get(counters.map(|k| &k.ipc));
            [
                cpu_name(c.cpu),
                format!("ctx/s {}", fmt_or_na(ctx, 0)),
                format!("migr/s {}", fmt_or_na(migr, 0)),
                format!("IPC {}", fmt_or_na(ipc, 2)),
            ]
        })
        .collect();
    let counter_w: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let kept = fit_columns(
        &[
            (0, counter_w[0]),
            (1, counter_w[1]),
            (3, counter_w[2]),
            (2, counter_w[3]),
        ],
        1,
        width,
    );
    for row in &rows {
        let cells: Vec<String> = (0..4)
            .filter(|&i| kept[i])
            .map(|i| format!("{:<w$}", row[i], w = counter_w[i]))
            .collect();
        lines.push(Line::from(Span::styled(
            cells.join(" ").trim_end().to_string(),
            fg(DIM),
        )));
    }
    lines
}

/// The target's listen queue: its length, its backlog, and FULL when it overflowed.
fn listen_line(app: &App, width: usize) -> Line<'static> {
    // The target's own accept queue: full means new connections wait for SYN retransmits.
    let listen = match app.listen {
        Some(l) if l.full > 0 => Fields::new(" ")
            .add(
                0,
                Span::styled(format!("listen queue {}/{}", l.queue, l.backlog), fg(BAD)),
            )
            .add(0, Span::styled("FULL", fg(BAD))),
        Some(l) => Fields::new(" ").add(
            0,
            Span::styled(format!("listen queue {}/{}", l.queue, l.backlog), fg(DIM)),
        ),
        None => Fields::new(" ").add(0, Span::styled("listen queue n/a", fg(DIM))),
    };
    listen.fit(width)
}

/// A CPU bar's user, system+irq and softirq shares: one block in three colours, or without
/// colour three shades (the free part is `░` either way).
fn bar_glyphs(theme: Theme) -> [&'static str; 3] {
    ["█", theme.glyph("█", "▓"), theme.glyph("█", "▒")]
}

/// The key to the bars' shares and the split's letters. Without colour it names each share's
/// glyph too, the bar's only key; where that is too wide, without the letter (`▒ softirq`).
fn legend(theme: Theme, width: usize) -> Line<'static> {
    let mut legend = Fields::new(" · ");
    let shares = [("u", "user"), ("s", "system+irq"), ("si", "softirq")];
    for (i, ((letter, name), glyph)) in shares.into_iter().zip(bar_glyphs(theme)).enumerate() {
        let priority = i as u8;
        legend = match theme {
            Theme::Colour => {
                legend.add(priority, Span::styled(format!("{letter} {name}"), fg(DIM)))
            }
            Theme::Monochrome => legend.add_short(
                priority,
                Span::styled(format!("{glyph} {letter} {name}"), fg(DIM)),
                Span::styled(format!("{glyph} {name}"), fg(DIM)),
            ),
        };
    }
    legend.fit(width)
}
