//! Data-driven tests of the two file parsers users feed rtlab-analysis: every file under
//! `test_data/<format>/ok` parses to exactly what its `.expect` lists (one task or class a line),
//! every file under `test_data/<format>/err` is rejected with a message that starts with the first
//! line of its `.expect` (line and field included) and contains each further line. Formats: `tasks` (`rtlab check`'s task-set file) and
//! `classes` (`rtlab forecast --classes-file`).

use rtlab_testkit::fixture_files;

use rtlab_analysis::classes::{parse_classes, ApplicationClass};
use rtlab_analysis::schedulability::{parse_task_set, Scheduling, Task};
use std::path::{Path, PathBuf};

/// The fixtures of one format and kind, each with the text of its `.expect`, sorted by name.
fn fixtures(format: &str, kind: &str) -> Vec<(PathBuf, String, String)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data")
        .join(format)
        .join(kind);
    fixture_files::files_with_extension(&folder, "toml")
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            let expect = fixture_files::expectation(&path);
            (path, text, expect)
        })
        .collect()
}

fn expected_lines(expect: &str) -> Vec<String> {
    expect
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One task as its `.expect` line spells it.
fn describe_task(task: &Task) -> String {
    let scheduling = match task.scheduling {
        Scheduling::FixedPriority(priority) => format!("fifo {priority}"),
        Scheduling::Reservation {
            runtime,
            period,
            deadline,
        } => format!(
            "reservation {}/{}/{}",
            runtime.as_u64(),
            period.as_u64(),
            deadline.as_u64()
        ),
    };
    format!(
        "{:?} cpu {} period {} compute {} deadline {} {scheduling} line {}",
        task.name,
        task.cpu,
        task.period.as_u64(),
        task.compute.as_u64(),
        task.deadline.as_u64(),
        task.line
    )
}

/// One class as its `.expect` line spells it.
fn describe_class(class: &ApplicationClass) -> String {
    format!(
        "{:?} buffers {} buffer {} compute {} acceptable_s {} counts {} clock {} {:?} {:?}",
        class.name,
        class.buffers,
        class.buffer_period.as_u64(),
        class.compute.as_u64(),
        class.acceptable.mean_interval_s(),
        class.counting.as_str(),
        class.clock.as_str(),
        class.description,
        class.source
    )
}

/// Parses `text` as `format`: what it yields, one line per item, or the error message.
fn parse(format: &str, text: &str) -> Result<Vec<String>, String> {
    match format {
        "tasks" => parse_task_set(text)
            .map(|tasks| tasks.iter().map(describe_task).collect())
            .map_err(|error| error.to_string()),
        "classes" => parse_classes(text)
            .map(|classes| classes.iter().map(describe_class).collect())
            .map_err(|error| error.to_string()),
        other => panic!("unknown fixture format {other}"),
    }
}

#[test]
fn ok_fixtures_parse_to_what_they_expect() {
    for format in ["tasks", "classes"] {
        for (path, text, expect) in fixtures(format, "ok") {
            let parsed =
                parse(format, &text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            assert_eq!(parsed, expected_lines(&expect), "{}", path.display());
        }
    }
}

#[test]
fn err_fixtures_are_rejected_with_their_line_and_field() {
    for format in ["tasks", "classes"] {
        for (path, text, expect) in fixtures(format, "err") {
            let error = match parse(format, &text) {
                Ok(parsed) => panic!(
                    "{}: parsed to {parsed:?}, expected an error",
                    path.display()
                ),
                Err(error) => error,
            };
            let expected = expected_lines(&expect);
            let Some((start, rest)) = expected.split_first() else {
                panic!("{}: empty .expect", path.display());
            };
            assert!(
                error.starts_with(start.as_str()),
                "{}: got '{error}', expected it to start with '{start}'",
                path.display()
            );
            for part in rest {
                assert!(
                    error.contains(part.as_str()),
                    "{}: got '{error}', expected it to contain '{part}'",
                    path.display()
                );
            }
        }
    }
}
