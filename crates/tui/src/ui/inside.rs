//! "Server inside": what the server's threads did in the last second and in the last slow
//! second, side by side: the most sampled on-CPU frames (leaf ← caller) and the ways they
//! were off CPU (system call and state), each with its share.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};
use tailscope_targets::stacks::{LiveInside, SecondInside, Share};

use super::fit::Fields;
use super::format::fmt_count;
use super::theme::{bold, fg, panel, panel_fields, BAD, DIM, P50, P99};
use crate::app::App;

/// The server's stacks and waits, live.
pub struct InsidePanel<'a>(pub &'a App);

impl Widget for &InsidePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (sampling, why) = match &self.0.inside {
            None => (
                None,
                "n/a: waiting for the first second of the run to end".to_string(),
            ),
            Some(LiveInside::Unavailable(why)) => (None, format!("n/a: {why}")),
            Some(LiveInside::Sampling {
                off_cpu_source,
                last,
                last_slow,
            }) => (Some((off_cpu_source, last, last_slow)), String::new()),
        };
        let Some((source, last, last_slow)) = sampling else {
            // A reason is prose: wrapped at words, never cut.
            Paragraph::new(Line::from(Span::styled(why, fg(DIM))))
                .wrap(Wrap { trim: true })
                .block(panel("Server inside", area.width))
                .render(area, buf);
            return;
        };
        let [now, slow] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(area);
        let off_source = source.as_deref();
        second(
            last.as_ref(),
            "Server inside",
            "last second",
            "",
            off_source,
        )
        .render(now, buf);
        second(
            last_slow.as_ref(),
            "Last slow second",
            "",
            "no slow second so far",
            off_source,
        )
        .render(slow, buf);
    }
}

/// One second's panel.
struct SecondPanel<'a> {
    title: &'a str,
    subtitle: &'a str,
    second: Option<&'a SecondInside>,
    empty: &'a str,
    off_source: Option<&'a str>,
}

fn second<'a>(
    second: Option<&'a SecondInside>,
    title: &'a str,
    subtitle: &'a str,
    empty: &'a str,
    off_source: Option<&'a str>,
) -> SecondPanel<'a> {
    SecondPanel {
        title,
        subtitle,
        second,
        empty,
        off_source,
    }
}

impl SecondPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let at = self.second.map_or(String::new(), |s| {
            format!("{}–{} s", s.second, s.second + 1)
        });
        let mut title = Fields::new(" ").add(0, self.title);
        if !self.subtitle.is_empty() {
            title = title.add_lead(2, ": ", self.subtitle);
        }
        if !at.is_empty() {
            title = title.add_lead(1, " · ", at.as_str());
        }
        let block = panel_fields(title, area.width);
        let inner = block.inner(area);
        let width = usize::from(inner.width);
        let Some(s) = self.second else {
            Paragraph::new(Line::from(Span::styled(self.empty, fg(DIM))))
                .wrap(Wrap { trim: true })
                .block(block)
                .render(area, buf);
            return;
        };
        // Two headings; the rows left are shared between the two lists.
        let rows = usize::from(inner.height).saturating_sub(2) / 2;
        let mut lines = Vec::new();
        lines.push(
            Fields::new(" ")
                .add(0, Span::styled("On CPU", bold(P50)))
                .add_lead(1, " · ", format!("{} samples", fmt_count(s.samples)))
                .fit(width),
        );
        if s.on_cpu.is_empty() {
            lines.push(dim_line("no sample: nothing of the server ran"));
        }
        lines.extend(s.on_cpu.iter().take(rows).map(|sh| share_line(sh, width)));
        let source = self.off_source.unwrap_or("not seen");
        lines.push(
            Fields::new(" ")
                .add(0, Span::styled("Off CPU", bold(P99)))
                .add_lead(1, " · ", "of the threads' time")
                .add_lead(2, " · ", source)
                .fit(width),
        );
        match &s.off_cpu {
            None if self.off_source.is_none() => {
                lines.push(dim_line("n/a: off-CPU time is not seen"))
            }
            None => lines.push(dim_line("n/a: this second's looks were not read in time")),
            Some(list) if list.is_empty() => lines.push(dim_line("no thread was seen off CPU")),
            Some(list) => lines.extend(list.iter().take(rows).map(|sh| share_line(sh, width))),
        }
        // Not trimmed: the shares are right-aligned with spaces.
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block)
            .render(area, buf);
    }
}

/// ` 42 %  burn ← handle`: the share first; when the width runs short, the frames shortened
/// to their last path segment (`tailscope_server::burn` → `burn`), then the leaf alone.
fn share_line(share: &Share, width: usize) -> Line<'static> {
    let pct = format!("{:>3.0} %", share.share * 100.0);
    let mut parts = share.what.split(" ← ");
    let leaf = parts.next().unwrap_or(&share.what);
    let caller = parts.next();
    let last = |f: &str| last_segment(f).to_string();
    let mut forms = vec![share.what.clone()];
    if let Some(caller) = caller {
        forms.push(format!("{} ← {}", last(leaf), last(caller)));
    }
    forms.push(leaf.to_string());
    forms.push(last(leaf));
    let what = forms
        .into_iter()
        .find(|w| pct.len() + 2 + Line::from(w.as_str()).width() <= width);
    let colour = if share.share >= 0.5 { BAD } else { DIM };
    let mut fields = Fields::new("  ").add(0, Span::styled(pct, fg(colour)));
    if let Some(w) = what {
        fields = fields.add(1, w);
    }
    fields.fit(width)
}

/// A message: prose, wrapped at words by the paragraph, never cut.
fn dim_line(text: &str) -> Line<'static> {
    Line::from(Span::styled(text.to_string(), fg(DIM)))
}

/// The last `::` segment of a path outside any generic arguments:
/// `<core::result::Result<T, E> as Try>::branch` → `branch`, `a::b<c::D>` → `b<c::D>`.
fn last_segment(path: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = path.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && i > 0 && bytes[i - 1] == b':' => start = i + 1,
            _ => {}
        }
    }
    &path[start..]
}

#[cfg(test)]
mod tests {
    use super::last_segment;

    #[test]
    fn the_last_segment_is_outside_generic_arguments() {
        assert_eq!(last_segment("tailscope_server::worker::burn"), "burn");
        assert_eq!(
            last_segment("<core::result::Result<T, E> as core::ops::Try>::branch"),
            "branch"
        );
        assert_eq!(last_segment("a::from<c::Error>"), "from<c::Error>");
        assert_eq!(last_segment("_raw_spin_unlock_[k]"), "_raw_spin_unlock_[k]");
    }
}
