//! The footer: the views as tabs, the keys, and the last note.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Widget};

use super::fit::{sentences, Fields};
use super::theme::{fg, DIM, P99};
use crate::app::{App, View};

/// Views and keys.
pub struct FooterPanel<'a>(pub &'a App);

impl Widget for &FooterPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        // The tabs stay; then the note (it answers the key just pressed); then the keys,
        // in the order a new user needs them, so the line loses its end first.
        let mut fields = Fields::new(" · ");
        for v in View::ALL {
            let style = if v == app.view {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                fg(DIM)
            };
            fields = fields.add_lead(0, "", Span::styled(format!(" {} ", v.title()), style));
            if v.short_title() != v.title() {
                fields = fields.or_short(Span::styled(format!(" {} ", v.short_title()), style));
            }
        }
        for (i, key) in KEYS.iter().enumerate() {
            let lead = if i == 0 { "  " } else { " · " };
            fields = fields.add_lead(2 + i as u8, lead, *key);
        }
        let width = usize::from(area.width);
        if let Some(note) = &app.note {
            // Room for the note once the tabs are there (short): whole sentences, or none.
            let tabs: usize = View::ALL.iter().map(|v| v.short_title().len() + 2).sum();
            let note = sentences(note, width.saturating_sub(tabs + 2));
            if !note.is_empty() {
                fields = fields.add_lead(1, "  ", Span::styled(note, fg(P99)));
            }
        }
        Paragraph::new(fields.fit(width)).render(area, buf);
    }
}

/// The key hints, most needed first.
const KEYS: [&str; 5] = ["q quit", "p freeze", "+/- rate", "Tab view", "? keys"];
