//! Terminal text helpers shared by the renderers: 80 columns, words wrapped (textwrap) with a
//! hanging indent, long names cut with an ellipsis.

/// The width every renderer keeps to.
pub const WIDTH: usize = 80;

/// `first` + `text` wrapped to [`WIDTH`], continuation lines indented by `indent` spaces.
pub fn wrapped(first: &str, text: &str, indent: usize) -> String {
    let subsequent = " ".repeat(indent);
    let options = textwrap::Options::new(WIDTH)
        .initial_indent(first)
        .subsequent_indent(&subsequent)
        .break_words(true);
    textwrap::fill(text, options)
}

/// `text` with the space between a number and its unit made non-breaking (`70 s`, `4.2 min`), so
/// wrapping never leaves a unit alone at the start of a line.
pub fn keep_units(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut previous: Option<char> = None;
    let mut characters = text.chars().peekable();
    while let Some(character) = characters.next() {
        let next_is_unit = characters
            .peek()
            .is_some_and(|next| next.is_alphabetic() || *next == 'µ' || *next == '%');
        if character == ' ' && previous.is_some_and(|last| last.is_ascii_digit()) && next_is_unit {
            kept.push('\u{a0}');
        } else {
            kept.push(character);
        }
        previous = Some(character);
    }
    kept
}

/// `text` cut to `width` characters, the last one an ellipsis when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else {
        let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_to_eighty_columns_with_a_hanging_indent() {
        let text = "word ".repeat(40);
        let wrapped = wrapped("verdict: ", text.trim(), 9);
        assert!(wrapped.starts_with("verdict: word"));
        for line in wrapped.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
        assert!(wrapped.lines().nth(1).unwrap().starts_with("         word"));
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(
            keep_units("every 70 s, 3 CPUs"),
            "every 70\u{a0}s, 3\u{a0}CPUs"
        );
    }
}
