//! An error with its causes in one line, `outer: cause: root cause`, each cause once: the loaders'
//! and the enforcement's outer messages alone say little ("failed to load program"), the root
//! cause says why ("Operation not permitted").

/// `error` and its `source()` chain as `a: b: c`, skipping a cause whose text the line already
/// holds (many errors repeat their source in their own message).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;
    use std::fmt;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|inner| inner as _)
        }
    }

    #[test]
    fn every_cause_is_joined_once() {
        let root = Layer("Operation not permitted (os error 1)", None);
        let middle = Layer("loading sched_switch", Some(Box::new(root)));
        let outer = Layer(
            "failed to load the explain recorder",
            Some(Box::new(middle)),
        );
        assert_eq!(
            error_chain(&outer),
            "failed to load the explain recorder: loading sched_switch: Operation not permitted (os error 1)"
        );
    }

    #[test]
    fn a_cause_the_message_already_names_is_not_repeated() {
        let root = Layer("No such file", None);
        let outer = Layer("open /x: No such file", Some(Box::new(root)));
        assert_eq!(error_chain(&outer), "open /x: No such file");
    }
}
