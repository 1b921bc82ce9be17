//! The dashboard without colour (`NO_COLOR`): every view drawn from the fixed run has no
//! colour left in any cell, says everything it says in colour, and tells apart by modifiers
//! and glyphs what colour told apart (a CPU bar's shares, the histogram's tail, the chart's
//! lines, bad news from warnings).

mod common;

use common::*;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;
use tailscope_tui::app::{Action, App, View};
use tailscope_tui::ui::{self, theme::Theme};

fn buffer(app: &App, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| ui::render(app, f)).unwrap();
    terminal.backend().buffer().clone()
}

fn text(buf: &Buffer) -> String {
    let width = usize::from(buf.area.width);
    buf.content
        .chunks(width)
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
        .collect()
}

/// The cells with a colour of their own (foreground or background).
fn coloured(buf: &Buffer) -> usize {
    buf.content
        .iter()
        .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
        .count()
}

/// The modifiers of the first cell of the first `word` on the screen.
fn modifier_of(buf: &Buffer, word: &str) -> Modifier {
    let screen: Vec<&str> = buf.content.iter().map(|c| c.symbol()).collect();
    let letters: Vec<&str> = word.split("").filter(|s| !s.is_empty()).collect();
    let at = screen
        .windows(letters.len())
        .position(|w| w == letters.as_slice())
        .unwrap_or_else(|| panic!("{word} is on the screen"));
    buf.content[at].modifier
}

fn views() -> [View; 5] {
    [
        View::Overview,
        View::Latency,
        View::Cores,
        View::Inside,
        View::Requests,
    ]
}

#[test]
fn no_view_keeps_a_colour_and_every_word_of_it_stays() {
    for view in views() {
        let mut app = app_with_data(None);
        app.update(Action::Show(view));
        // Roomy enough for the longer legends without colour (`▒ si softirq`); narrower,
        // they lose the split's letters (below).
        let colour = buffer(&app, 160, 48);
        // The check can fail: in colour the same screen has colours.
        assert!(coloured(&colour) > 0, "{view:?} in colour has colours");
        app.theme = Theme::Monochrome;
        let mono = buffer(&app, 160, 48);
        assert_eq!(coloured(&mono), 0, "{view:?}:\n{}", text(&mono));
        // Every word of the coloured screen is there without colour (the glyphs of bars and
        // chart lines apart, which change on purpose).
        // Borders, bars and chart dots separate words: a glyph before a legend's word
        // (`█ u user`) is not a change of the word.
        let graphic = |c: char| {
            c.is_whitespace()
                || ('\u{2500}'..='\u{259F}').contains(&c)
                || ('\u{2800}'..='\u{28FF}').contains(&c)
                || c == '•'
        };
        let words = |buf: &Buffer| -> Vec<String> {
            text(buf)
                .split(graphic)
                .filter(|w| w.chars().any(char::is_alphanumeric))
                .map(String::from)
                .collect()
        };
        let mono_words = words(&mono);
        for word in words(&colour) {
            assert!(
                mono_words.contains(&word),
                "{view:?}: {word:?} missing without colour:\n{}",
                text(&mono)
            );
        }
    }
}

#[test]
fn without_colour_glyphs_and_modifiers_tell_apart_what_colour_did() {
    let mut app = app_with_data(None);
    app.theme = Theme::Monochrome;
    app.update(Action::Show(View::Cores));
    let cores = buffer(&app, 120, 40);
    let screen = text(&cores);
    // The CPU bars' shares in three shades, each named by the legend; the free part dim.
    assert!(screen.contains("█ u user"), "{screen}");
    assert!(screen.contains("▓ s system+irq"), "{screen}");
    assert!(screen.contains("▒ si softirq"), "{screen}");
    let bar_line = screen
        .lines()
        .find(|l| l.contains("cpu1   G"))
        .expect("cpu1's bar");
    for glyph in ['█', '▓', '▒'] {
        assert!(bar_line.contains(glyph), "{glyph} in {bar_line}");
    }
    // Server and generator CPUs by their letters, as in colour.
    assert!(screen.contains("cpu0  S") && screen.contains("cpu1   G"));
    // A full listen queue is bad news: bold and underlined; the state is bold.
    let full = modifier_of(&cores, "FULL");
    assert!(
        full.contains(Modifier::BOLD | Modifier::UNDERLINED),
        "{full:?}"
    );
    assert!(modifier_of(&cores, "running").contains(Modifier::BOLD));
    // Labels are dim.
    assert!(modifier_of(&cores, "ctx/s").contains(Modifier::DIM));

    // The overview's narrow CPUs panel keeps every share's glyph and name.
    app.update(Action::Show(View::Overview));
    let overview = text(&buffer(&app, 120, 40));
    assert!(
        overview.contains("█ user · ▓ system+irq · ▒ softirq"),
        "{overview}"
    );

    app.update(Action::Show(View::Latency));
    let latency = buffer(&app, 120, 40);
    let screen = text(&latency);
    // The histogram's tail (at and past p99) in another shade than its body.
    let tail = screen
        .lines()
        .find(|l| l.contains("1.00s–2.00s"))
        .expect("the 1.6 s mode's bar");
    assert!(tail.contains('▓') && !tail.contains('█'), "{tail}");
    // The chart's lines in three markers, which its title names.
    assert!(
        screen.contains("Latency per tick (log scale)  p50 ⠒ · p99 • · max ▀"),
        "{screen}"
    );
    // Where the lines part, each shows in its marker: the max's half blocks, beside the
    // p50's Braille dots (the fixture's p99 is never apart from both).
    let chart: String = screen.lines().skip(5).take(18).collect();
    assert!(chart.contains('▀') || chart.contains('▄'), "{screen}");
    assert!(
        chart.contains(|c| ('\u{2801}'..='\u{28FF}').contains(&c)),
        "{screen}"
    );
    // The gauge's filled part under its label is reversed, not coloured.
    assert!(modifier_of(&latency, "4.0 /").contains(Modifier::REVERSED));
}

#[test]
fn in_colour_the_glyphs_are_the_usual_ones() {
    // The insta snapshots of views.rs pin the coloured screens' text; here, none of the
    // monochrome glyphs or legends shows in colour.
    let mut app = app_with_data(None);
    for view in [View::Latency, View::Cores] {
        app.update(Action::Show(view));
        let screen = text(&buffer(&app, 120, 40));
        for mono_only in ["▓", "▒", "p99 •", "█ u user", "•", "▀", "▄"] {
            assert!(
                !screen.contains(mono_only),
                "{mono_only}:
{screen}"
            );
        }
    }
}
