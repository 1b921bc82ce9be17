//! The keys overlay.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::theme::{fg, panel, DIM};

/// The keys.
pub struct HelpPanel;

impl Widget for &HelpPanel {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let lines = vec![
            Line::from("q, Ctrl-C       stop the load, print the summary"),
            Line::from("Esc             close the help, else stop as q"),
            Line::from("p               freeze / resume the display"),
            Line::from("+ / -           raise / lower the rate (open loop)"),
            Line::from("s               save the HTML report so far"),
            Line::from("Tab             next view"),
            Line::from("1 2 3 4 5       overview · latency · cores · inside"),
            Line::from("                · requests (a mix's, per name)"),
            Line::from("?               show / hide this help"),
            Line::from(""),
            Line::from(Span::styled(
                "The load goes on while frozen or in help.",
                fg(DIM),
            )),
        ];
        // Wrapped, not cut: on a narrow terminal a description goes on the next line whole.
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(panel("Keys", area.width))
            .render(area, buf);
    }
}
