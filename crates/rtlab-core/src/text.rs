//! Text for markup: the one escape every SVG, HTML and XML writer in rtlab uses (the HTML report,
//! its plots, the timer pictures, the application trace's pictures).

/// `text` made safe inside an element or a quoted attribute of HTML, SVG or XML: `&`, `<`, `>`,
/// `"` and `'` become entities; everything else is kept as it is.
pub fn escape_markup(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_markup_characters_become_entities_and_nothing_else_changes() {
        assert_eq!(
            escape_markup(r#"a & b < c > d "e" 'f'"#),
            "a &amp; b &lt; c &gt; d &quot;e&quot; &#39;f&#39;"
        );
        assert_eq!(escape_markup("&amp;"), "&amp;amp;");
        assert_eq!(escape_markup("µs 90 % ✔"), "µs 90 % ✔");
        assert_eq!(escape_markup(""), "");
    }
}
