//! The end of `rtlab run`: `--quiet` prints only the verdict block, `--for CLASS` judges one class
//! and sets the exit code by it, every line fits 80 columns.

mod common;

use common::{stdout_text, Sandbox, SHORT_RUN};

/// [`SHORT_RUN`] with `--no-handoff`, then `more`.
fn short_run<'a>(more: &'a [&'a str]) -> impl Iterator<Item = &'a str> {
    SHORT_RUN
        .iter()
        .copied()
        .chain(["--no-handoff"])
        .chain(more.iter().copied())
}

#[test]
fn quiet_prints_only_the_verdict_block_in_80_columns() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_expecting(0, short_run(&["--quiet"]));
    let text = stdout_text(&output);
    assert!(text.contains("VERDICT ("), "{text}");
    assert!(text.contains("pro-audio-48k-128x2"), "{text}");
    assert!(text.contains("vs cyclictest:"), "{text}");
    assert!(
        !text.contains("wake-up latency:"),
        "tables printed with --quiet: {text}"
    );
    assert!(!text.contains("stored as run"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
}

#[test]
fn default_output_fits_80_columns_and_ends_with_the_verdict() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_expecting(0, short_run(&[]));
    let text = stdout_text(&output);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
    let verdict_at = text.find("VERDICT (").expect("a verdict block");
    assert!(text.find("wake-up latency").unwrap() < verdict_at, "{text}");
}

#[test]
fn for_class_judges_one_class_and_its_exit_code_follows_the_mark() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(short_run(&["--quiet", "--for", "fieldbus-250us"]));
    let text = stdout_text(&output);
    let class_lines: Vec<&str> = text
        .lines()
        .filter(|line| {
            line.starts_with("  ✔ ") || line.starts_with("  ✘ ") || line.starts_with("  ? ")
        })
        .collect();
    assert_eq!(class_lines.len(), 1, "{text}");
    assert!(class_lines[0].contains("fieldbus-250us"), "{text}");
    let expected = if class_lines[0].starts_with("  ✘ ") {
        1
    } else {
        0
    };
    common::assert_exit_code(&output, expected);

    let output = sandbox.run(short_run(&["--for", "no-such-class"]));
    common::assert_exit_code(&output, 2);
    assert!(common::stderr_text(&output).contains("no-such-class"));
}
