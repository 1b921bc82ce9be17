//! The footer: the views as tabs, the keys, and the last note.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::theme::{fg, DIM, P99};
use crate::app::{App, View};

/// Views and keys.
pub struct FooterPanel<'a>(pub &'a App);

impl Widget for &FooterPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let mut spans = Vec::new();
        for v in View::ALL {
            let style = if v == app.view {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                fg(DIM)
            };
            spans.push(Span::styled(format!(" {} ", v.title()), style));
        }
        spans.push(Span::raw(
            "  q quit · p freeze · +/- rate · Tab view · ? keys",
        ));
        if let Some(note) = &app.note {
            spans.push(Span::styled(format!("  {note}"), fg(P99)));
        }
        Paragraph::new(Line::from(spans)).render(area, buf);
    }
}
