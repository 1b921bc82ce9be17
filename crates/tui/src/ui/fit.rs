//! Fitting text into a width without cutting anything.
//!
//! A terminal cell cut off a line turns `[200]` into `[2` and `0 errors` into `0 error`: a
//! different number, a broken word. So no panel hands ratatui a line wider than its area.
//! A line is built as [`Fields`] (pieces with a priority, some with a shorter form) and
//! [`Fields::fit`] keeps what fits: first every shorter form is used (least important field
//! first), then whole fields are dropped, least important first, and full forms come back
//! where the dropping made room. A table keeps whole columns
//! the same way with [`fit_columns`]. Long messages keep whole sentences with [`sentences`].
//!
//! Priorities: 0 is the most important; a larger number is dropped sooner. Among equals the
//! field further right goes first, so a line loses its end before its middle.

use ratatui::text::{Line, Span};

/// One piece of a line.
#[derive(Debug, Clone)]
struct Field<'a> {
    priority: u8,
    /// Printed before the field unless it is the first one kept.
    lead: Option<&'a str>,
    full: Vec<Span<'a>>,
    short: Option<Vec<Span<'a>>>,
}

/// A line made of fields that are kept whole or dropped whole.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    separator: &'a str,
    fields: Vec<Field<'a>>,
}

fn width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}

impl<'a> Fields<'a> {
    /// An empty line whose fields are joined by `separator`.
    pub fn new(separator: &'a str) -> Self {
        Fields {
            separator,
            fields: Vec::new(),
        }
    }

    /// Adds a field.
    pub fn add(self, priority: u8, text: impl Into<Line<'a>>) -> Self {
        self.add_field(priority, None, text.into().spans, None)
    }

    /// Adds a field that, when space runs short, is shown as `short` before anything is
    /// dropped (`req/s` → `r/s`).
    pub fn add_short(
        self,
        priority: u8,
        text: impl Into<Line<'a>>,
        short: impl Into<Line<'a>>,
    ) -> Self {
        self.add_field(priority, None, text.into().spans, Some(short.into().spans))
    }

    /// Adds a field preceded by `lead` instead of the separator.
    pub fn add_lead(self, priority: u8, lead: &'a str, text: impl Into<Line<'a>>) -> Self {
        self.add_field(priority, Some(lead), text.into().spans, None)
    }

    /// Gives the field added last a shorter form, used before anything is dropped.
    pub fn or_short(mut self, short: impl Into<Line<'a>>) -> Self {
        if let Some(last) = self.fields.last_mut() {
            last.short = Some(short.into().spans);
        }
        self
    }

    fn add_field(
        mut self,
        priority: u8,
        lead: Option<&'a str>,
        full: Vec<Span<'a>>,
        short: Option<Vec<Span<'a>>>,
    ) -> Self {
        self.fields.push(Field {
            priority,
            lead,
            full,
            short,
        });
        self
    }

    /// The line as wide as it can be within `max` cells, and nothing cut.
    pub fn fit(self, max: usize) -> Line<'a> {
        let n = self.fields.len();
        let mut kept = vec![true; n];
        let mut short = vec![false; n];
        let total = |kept: &[bool], short: &[bool]| -> usize {
            let mut w = 0;
            let mut first = true;
            for (i, f) in self.fields.iter().enumerate() {
                if !kept[i] {
                    continue;
                }
                if !first {
                    w += f.lead.unwrap_or(self.separator).chars().count();
                }
                first = false;
                w += match (&f.short, short[i]) {
                    (Some(s), true) => width(s),
                    _ => width(&f.full),
                };
            }
            w
        };
        // The least important of the fields `candidate` allows: highest priority number,
        // rightmost among equals.
        let least = |candidate: &dyn Fn(usize) -> bool| {
            (0..n)
                .filter(|&i| candidate(i))
                .max_by_key(|&i| (self.fields[i].priority, i))
        };
        while total(&kept, &short) > max {
            let shorten = least(&|i| kept[i] && !short[i] && self.fields[i].short.is_some());
            if let Some(i) = shorten {
                short[i] = true;
            } else if let Some(i) = least(&|i| kept[i]) {
                kept[i] = false;
            } else {
                break;
            }
        }
        // Dropping a field may have made room for a full form again: most important first.
        let mut shortened: Vec<usize> = (0..n).filter(|&i| kept[i] && short[i]).collect();
        shortened.sort_by_key(|&i| (self.fields[i].priority, i));
        for i in shortened {
            short[i] = false;
            if total(&kept, &short) > max {
                short[i] = true;
            }
        }
        let mut spans = Vec::new();
        let mut first = true;
        for (i, f) in self.fields.into_iter().enumerate() {
            if !kept[i] {
                continue;
            }
            if !first {
                spans.push(Span::raw(f.lead.unwrap_or(self.separator)));
            }
            first = false;
            match (f.short, short[i]) {
                (Some(s), true) => spans.extend(s),
                _ => spans.extend(f.full),
            }
        }
        Line::from(spans)
    }
}

impl Fields<'_> {
    /// [`Fields::fit`] as plain text, for what takes a string (titles, gauge labels).
    pub fn fit_text(self, max: usize) -> String {
        let line = self.fit(max);
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }
}

/// Which columns of a table fit `max` cells: each column has its width (widest cell) and a
/// priority; columns are `gap` cells apart. The least important columns go first, whole.
pub fn fit_columns(columns: &[(u8, usize)], gap: usize, max: usize) -> Vec<bool> {
    let mut kept = vec![true; columns.len()];
    loop {
        let shown: Vec<usize> = (0..columns.len()).filter(|&i| kept[i]).collect();
        let total: usize = shown.iter().map(|&i| columns[i].1).sum::<usize>()
            + gap * shown.len().saturating_sub(1);
        if total <= max {
            return kept;
        }
        match shown.iter().max_by_key(|&&i| (columns[i].0, i)) {
            Some(&i) => kept[i] = false,
            None => return kept,
        }
    }
}

/// A message as whole sentences, at most `max` cells: the first sentences that fit, or
/// nothing when even the first one does not. A sentence ends with `. ` (or the text).
pub fn sentences(message: &str, max: usize) -> String {
    let mut out = String::new();
    for sentence in message.split_inclusive(". ") {
        let candidate = format!("{out}{sentence}");
        if candidate.trim_end().chars().count() > max {
            break;
        }
        out = candidate;
    }
    out.trim_end().to_string()
}

/// A field shown in part on a drawn screen: which field, the beginning that shows, the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The field as it should read.
    pub field: String,
    /// The beginning of it that the screen shows.
    pub shown: String,
    /// The screen's row it is on.
    pub row: String,
}

/// The fields that `screen` (rows of text, as a test backend or `tmux capture-pane` gives
/// them) shows only in part: some beginning of the field, two characters or more, ends
/// exactly where an area ends, at a border or the end of the row. A field shown whole or not
/// at all is fine. For the tests of this rule, here and end to end.
///
/// A beginning that ends in a space is not looked at: it cannot be told apart from a whole
/// field and the padding every panel has ("Latency ─", "250µs │"), so a cut just after a
/// space is missed; a cut inside a word or a number is not. A beginning that is itself one
/// of `fields` is whole ("p99", the chart's legend, is not "p99.9" cut).
pub fn cut_fields(screen: &str, fields: &[String]) -> Vec<Cut> {
    let mut cuts = Vec::new();
    for row in screen.lines() {
        for field in fields {
            let chars: Vec<char> = field.chars().collect();
            for k in 2..chars.len() {
                if chars[k - 1] == ' ' {
                    continue;
                }
                let shown: String = chars[..k].iter().collect();
                if fields.contains(&shown) {
                    continue;
                }
                let at_edge = row.match_indices(&shown).any(|(at, _)| {
                    let next = row[at + shown.len()..].chars().next();
                    matches!(next, None | Some('│' | '┐' | '┘' | '┤' | '─'))
                });
                if at_edge {
                    cuts.push(Cut {
                        field: field.clone(),
                        shown,
                        row: row.to_string(),
                    });
                }
            }
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn fields_are_shortened_then_dropped_least_important_first() {
        let line = || {
            Fields::new(" · ")
                .add(0, "running")
                .add_short(1, "166.2k req/s", "166.2k r/s")
                .add(2, "64 conn")
                .add(3, "1 thread")
        };
        assert_eq!(
            text(&line().fit(80)),
            "running · 166.2k req/s · 64 conn · 1 thread"
        );
        // 42 cells: "1 thread" does not fit, but "r/s" would save it: shortening comes first.
        assert_eq!(
            text(&line().fit(41)),
            "running · 166.2k r/s · 64 conn · 1 thread"
        );
        // "1 thread" gone, "req/s" comes back.
        assert_eq!(text(&line().fit(40)), "running · 166.2k req/s · 64 conn");
        assert_eq!(text(&line().fit(20)), "running · 166.2k r/s");
        // Once "64 conn" has gone, the full form fits again.
        assert_eq!(text(&line().fit(22)), "running · 166.2k req/s");
        assert_eq!(text(&line().fit(8)), "running");
        assert_eq!(
            text(&line().fit(3)),
            "",
            "a field too wide alone is not cut either"
        );
    }

    #[test]
    fn a_lead_replaces_the_separator_and_is_dropped_with_the_first_field() {
        let line = Fields::new(" · ")
            .add(1, "a")
            .add_lead(0, "  ", "b")
            .add(0, "c");
        assert_eq!(text(&line.clone().fit(20)), "a  b · c");
        assert_eq!(text(&line.fit(5)), "b · c");
    }

    #[test]
    fn columns_go_whole_least_important_first() {
        // latency, status, split, conn, worker
        let cols = [(0, 9), (0, 5), (2, 30), (3, 4), (4, 3)];
        let t = true;
        // 51 cells of columns and 4 gaps.
        assert_eq!(fit_columns(&cols, 1, 55), [t, t, t, t, t]);
        assert_eq!(fit_columns(&cols, 1, 54), [t, t, t, t, false]);
        assert_eq!(fit_columns(&cols, 1, 50), [t, t, t, false, false]);
        assert_eq!(fit_columns(&cols, 1, 20), [t, t, false, false, false]);
    }

    #[test]
    fn a_field_ending_at_a_border_is_cut_and_a_whole_one_is_not() {
        let fields = [
            "0 errors".to_string(),
            "[200]".to_string(),
            "p99".to_string(),
        ];
        let cuts = cut_fields("│3 requests · 0 error│\n│[2│", &fields);
        let shown: Vec<&str> = cuts.iter().map(|c| c.shown.as_str()).collect();
        assert_eq!(shown, ["0 error", "[2"]);
        let whole = "│0 errors   │\n│[200]│p99│";
        assert_eq!(cut_fields(whole, &fields), []);
    }

    #[test]
    fn messages_keep_whole_sentences() {
        let note = "+/- need open loop. Run with -q RATE.";
        assert_eq!(sentences(note, 80), note);
        assert_eq!(sentences(note, 30), "+/- need open loop.");
        assert_eq!(sentences(note, 10), "");
    }
}
