//! Colours and the few styled building blocks every panel shares, so a panel says what it
//! shows ("a p99 value", "a bad thing") and the look is decided here once.
//!
//! Without colour ([`Theme::Monochrome`], when `NO_COLOR` is set: no-color.org) the panels
//! draw as they do in colour and [`Theme::finish`] then turns each colour into what it meant
//! in type (bad news bold and underlined, the tail bold, labels dim, a coloured background
//! reversed); where colour alone told things apart, the panels ask the theme for a glyph
//! ([`Theme::glyph`]: a CPU bar's user, system and softirq shares) or a chart marker
//! ([`Theme::line`]: p50, p99 and max).

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
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

/// How the dashboard draws what colour shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Theme {
    /// In colour.
    #[default]
    Colour,
    /// Without colour (`NO_COLOR`): modifiers and glyphs instead.
    Monochrome,
}

impl Theme {
    /// [`Theme::Monochrome`] when the `NO_COLOR` environment variable is set and not empty,
    /// as no-color.org asks (and as clap's help and errors read it).
    pub fn from_env() -> Theme {
        if anstyle_query::no_color() {
            Theme::Monochrome
        } else {
            Theme::Colour
        }
    }

    /// `in_colour` in colour, `in_mono` without: the glyph of a bar's share that only its
    /// colour told apart from the share beside it.
    pub fn glyph(self, in_colour: &'static str, in_mono: &'static str) -> &'static str {
        match self {
            Theme::Colour => in_colour,
            Theme::Monochrome => in_mono,
        }
    }

    /// A chart line in `color`, in Braille dots; without colour, the tail's and the bad
    /// lines in other markers ([`Theme::key`] names them).
    pub fn line<'a>(self, name: &'a str, color: Color, data: &'a [(f64, f64)]) -> Dataset<'a> {
        Dataset::default()
            .name(name)
            .marker(self.marker(color).0)
            .graph_type(GraphType::Line)
            .style(fg(color))
            .data(data)
    }

    /// Without colour, which marker draws which line (`p50 ⠒ · p99 • · max ▀`), for the
    /// chart's title: the chart's own legend only shows where the chart is large. In colour,
    /// none (the colours are those of the figures beside the chart).
    pub fn key(self, lines: &[(&str, Color)]) -> Option<String> {
        (self == Theme::Monochrome).then(|| {
            lines
                .iter()
                .map(|(name, color)| format!("{name} {}", self.marker(*color).1))
                .collect::<Vec<_>>()
                .join(" · ")
        })
    }

    /// The marker of a line in `color`, and the glyph that shows it in a key.
    fn marker(self, color: Color) -> (Marker, &'static str) {
        match (self, color) {
            (Theme::Monochrome, P99 | BAD) => (Marker::Dot, "•"),
            (Theme::Monochrome, MAX) => (Marker::HalfBlock, "▀"),
            _ => (Marker::Braille, "⠒"),
        }
    }

    /// Turns the colours drawn into `buf` into modifiers, without colour; in colour, leaves
    /// it as it is. What each colour means stays: bad news bold and underlined, the tail and
    /// warnings bold, the slowest bold italic, labels dim, a coloured background (the
    /// gauge's filled part, under its label) reversed.
    pub fn finish(self, buf: &mut Buffer) {
        if self == Theme::Colour {
            return;
        }
        for cell in &mut buf.content {
            let mut modifier = cell.modifier
                | match cell.fg {
                    BAD => Modifier::BOLD | Modifier::UNDERLINED,
                    P99 => Modifier::BOLD,
                    MAX => Modifier::BOLD | Modifier::ITALIC,
                    DIM => Modifier::DIM,
                    _ => Modifier::empty(),
                };
            if cell.bg != Color::Reset {
                modifier |= Modifier::REVERSED;
            }
            // Every colour (foreground, background, underline) back to the terminal's own.
            cell.set_style(Style::reset());
            cell.modifier = modifier;
        }
    }
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
