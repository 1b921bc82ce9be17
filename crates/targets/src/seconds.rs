//! Lists of a run's seconds as people read them: consecutive seconds as one stretch
//! (`83–85`), and a long list cut to its first stretches with a count of the rest, so that a
//! diagnosis of an hour-long run says where its slow seconds are in a line, not a page (the
//! one-hour soak's text listed 356 seconds, three times over).

/// The stretches shown before the rest is counted.
const SHOWN: usize = 12;

/// `seconds` (ascending, as the rules collect them; sorted here anyway) as stretches:
/// `3, 7–9, 12`, and past [`SHOWN`] stretches `…, and 40 more seconds up to 3663`.
pub fn seconds_list(seconds: impl IntoIterator<Item = u64>) -> String {
    let mut all: Vec<u64> = seconds.into_iter().collect();
    all.sort_unstable();
    all.dedup();
    let mut stretches: Vec<(u64, u64)> = Vec::new();
    for s in &all {
        match stretches.last_mut() {
            Some((_, end)) if *end + 1 == *s => *end = *s,
            _ => stretches.push((*s, *s)),
        }
    }
    let text = |&(a, b): &(u64, u64)| match b - a {
        0 => a.to_string(),
        1 => format!("{a}, {b}"),
        _ => format!("{a}–{b}"),
    };
    let shown: Vec<String> = stretches.iter().take(SHOWN).map(text).collect();
    let mut out = shown.join(", ");
    if stretches.len() > SHOWN {
        let rest: u64 = stretches[SHOWN..].iter().map(|(a, b)| b - a + 1).sum();
        let last = stretches.last().map_or(0, |s| s.1);
        out += &format!(
            ", and {rest} more second(s) up to {last} ({} in all)",
            all.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_are_joined_and_a_long_list_is_cut() {
        assert_eq!(seconds_list([3, 7, 8, 9, 12]), "3, 7–9, 12");
        assert_eq!(seconds_list([1, 2]), "1, 2");
        assert_eq!(seconds_list([0, 1, 3]), "0, 1, 3");
        assert_eq!(seconds_list([]), "");
        // 30 seconds apart from each other: 12 shown, 18 counted.
        let spread: Vec<u64> = (0..30).map(|i| i * 10).collect();
        let text = seconds_list(spread);
        assert!(
            text.starts_with("0, 10, 20")
                && text.contains(", 110, and 18 more second(s) up to 290 (30 in all)"),
            "{text}"
        );
    }
}
