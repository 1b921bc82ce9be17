//! Colours and the few styled building blocks every panel shares, so a panel says what it
//! shows ("a p99 value", "a bad thing") and the look is decided here once.

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use ratatui::text::Span;
use ratatui::widgets::{Block, Dataset, GraphType};

use super::fit::Fields;

/// Good news: 2xx, "running", "no errors", user CPU time.
pub const OK: Color = Color::Green;
/// Bad news: errors, system CPU time, a full listen queue.
pub const BAD: Color = Color::Red;
/// The median, and the calm part of a distribution.
pub const P50: Color = Color::Cyan;
/// The tail (p99 and beyond), warnings and notes.
pub const P99: Color = Color::Yellow;
/// The slowest request.
pub const MAX: Color = Color::Magenta;
/// Labels, axes and legends: what frames the numbers.
pub const DIM: Color = Color::DarkGray;

/// A style in `color`.
pub fn fg(color: Color) -> Style {
    Style::default().fg(color)
}

/// A style in `color`, bold.
pub fn bold(color: Color) -> Style {
    fg(color).add_modifier(Modifier::BOLD)
}

/// A chart line in Braille dots.
pub fn line<'a>(name: &'a str, color: Color, data: &'a [(f64, f64)]) -> Dataset<'a> {
    Dataset::default()
        .name(name)
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(fg(color))
        .data(data)
}

/// A bordered panel titled `title`, or untitled where the title does not fit whole.
pub fn panel(title: &str, width: u16) -> Block<'_> {
    panel_fields(Fields::new(" ").add(0, title), width)
}

/// A bordered panel titled with the fields of `title` that fit between its corners.
pub fn panel_fields(title: Fields<'_>, width: u16) -> Block<'_> {
    // Two corners and the space either side of the title.
    let text = title.fit_text(usize::from(width.saturating_sub(4)));
    if text.is_empty() {
        return Block::bordered();
    }
    Block::bordered().title(Span::styled(
        format!(" {text} "),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}
