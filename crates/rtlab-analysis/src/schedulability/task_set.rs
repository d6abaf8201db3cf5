//! The task-set file: TOML `[[task]]` tables (period, compute, deadline, a SCHED_FIFO priority or
//! a reservation, CPU) read into [`Task`]s for the analysis.
//!
//! It reads a user's file, so it is untrusted input: every error names the line and the field
//! (through `toml::Spanned`), and it has `{ok,err}` fixtures under `test_data/tasks` and a
//! cargo-fuzz target (`fuzz/fuzz_targets/task_set.rs`).

use super::{Scheduling, Task};
use rtlab_core::parse_duration;
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TaskSetError {
    #[error("{0}")]
    Toml(String),
    #[error("line {line}: task '{task}': field '{field}': {message}")]
    Field {
        line: usize,
        task: String,
        field: &'static str,
        message: String,
    },
    #[error("the task set has no [[task]] entries")]
    Empty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSetFile {
    #[serde(default)]
    task: Vec<Spanned<RawTask>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: String,
    period: Spanned<String>,
    compute: Spanned<String>,
    #[serde(default)]
    deadline: Option<Spanned<String>>,
    #[serde(default)]
    priority: Option<Spanned<i32>>,
    #[serde(default)]
    reservation: Option<Spanned<RawReservation>>,
    #[serde(default)]
    cpu: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReservation {
    runtime: Spanned<String>,
    period: Spanned<String>,
    #[serde(default)]
    deadline: Option<Spanned<String>>,
}

/// Parses a task-set file; every error names the line and the field.
///
/// ```toml
/// [[task]]
/// name = "audio"
/// period = "5ms"
/// compute = "1ms"
/// deadline = "5ms"   # optional, default = period
/// priority = 90      # SCHED_FIFO priority, or instead:
/// # reservation = { runtime = "1.2ms", period = "5ms" }   # SCHED_DEADLINE / CBS
/// cpu = 0
/// ```
pub fn parse_task_set(text: &str) -> Result<Vec<Task>, TaskSetError> {
    let file: TaskSetFile =
        toml::from_str(text).map_err(|error| TaskSetError::Toml(error.to_string()))?;
    if file.task.is_empty() {
        return Err(TaskSetError::Empty);
    }
    let line_of = |offset: usize| crate::classes::line_of(text, offset);
    let mut tasks = Vec::new();
    for spanned in file.task {
        let task_line = line_of(spanned.span().start);
        let raw = spanned.into_inner();
        let name = raw.name.clone();
        let error = |line: usize, field: &'static str, message: String| TaskSetError::Field {
            line,
            task: name.clone(),
            field,
            message,
        };
        let duration = |value: &Spanned<String>, field: &'static str| {
            let parsed = parse_duration(value.get_ref()).map_err(|problem| {
                error(line_of(value.span().start), field, problem.to_string())
            })?;
            if parsed.0 == 0 {
                return Err(error(
                    line_of(value.span().start),
                    field,
                    "must be longer than 0".to_owned(),
                ));
            }
            Ok(parsed)
        };
        if raw.name.trim().is_empty() {
            return Err(error(task_line, "name", "must not be empty".to_owned()));
        }
        let period = duration(&raw.period, "period")?;
        let compute = duration(&raw.compute, "compute")?;
        let deadline = match &raw.deadline {
            Some(value) => duration(value, "deadline")?,
            None => period,
        };
        if deadline > period {
            let line = raw
                .deadline
                .as_ref()
                .map_or(task_line, |value| line_of(value.span().start));
            return Err(error(
                line,
                "deadline",
                format!("{deadline} is longer than the period {period} (only constrained deadlines are analysed)"),
            ));
        }
        if compute > deadline {
            return Err(error(
                line_of(raw.compute.span().start),
                "compute",
                format!("{compute} does not fit before the deadline {deadline}"),
            ));
        }
        let scheduling = match (&raw.priority, &raw.reservation) {
            (Some(_), Some(reservation)) => {
                return Err(error(
                    line_of(reservation.span().start),
                    "reservation",
                    "a task has either a priority or a reservation, not both".to_owned(),
                ))
            }
            (None, None) => return Err(error(
                task_line,
                "priority",
                "missing: give `priority = N` (SCHED_FIFO) or `reservation = { runtime, period }`"
                    .to_owned(),
            )),
            (Some(priority), None) => {
                let value = *priority.get_ref();
                if !(1..=99).contains(&value) {
                    return Err(error(
                        line_of(priority.span().start),
                        "priority",
                        format!("{value} is not a SCHED_FIFO priority (1-99)"),
                    ));
                }
                Scheduling::FixedPriority(value)
            }
            (None, Some(reservation)) => {
                let reservation = reservation.get_ref();
                let runtime = duration(&reservation.runtime, "reservation.runtime")?;
                let reservation_period = duration(&reservation.period, "reservation.period")?;
                let reservation_deadline = match &reservation.deadline {
                    Some(value) => duration(value, "reservation.deadline")?,
                    None => reservation_period,
                };
                if !(runtime <= reservation_deadline && reservation_deadline <= reservation_period)
                {
                    return Err(error(
                        line_of(reservation.runtime.span().start),
                        "reservation",
                        format!(
                            "needs runtime ≤ deadline ≤ period (got {runtime}, {reservation_deadline}, {reservation_period})"
                        ),
                    ));
                }
                Scheduling::Reservation {
                    runtime,
                    period: reservation_period,
                    deadline: reservation_deadline,
                }
            }
        };
        tasks.push(Task {
            name: raw.name,
            period,
            compute,
            deadline,
            scheduling,
            cpu: raw.cpu,
            line: task_line,
        });
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_files_parse_and_errors_name_line_and_field() {
        let text = r#"
[[task]]
name = "audio"
period = "5ms"
compute = "1ms"
priority = 90

[[task]]
name = "video"
period = "33ms"
compute = "5ms"
reservation = { runtime = "6ms", period = "33ms" }
cpu = 1
"#;
        let tasks = parse_task_set(text).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].scheduling, Scheduling::FixedPriority(90));
        assert_eq!(tasks[1].cpu, 1);
        assert_eq!(tasks[1].line, 8);

        let cases = [
            ("[[task]]\nname = \"a\"\nperiod = \"5\"\ncompute = \"1ms\"\npriority = 9\n", "line 3: task 'a': field 'period'"),
            ("[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"6ms\"\npriority = 9\n", "line 4: task 'a': field 'compute'"),
            ("[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"1ms\"\npriority = 200\n", "line 5: task 'a': field 'priority'"),
            ("[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"1ms\"\n", "line 1: task 'a': field 'priority'"),
            ("[[task]]\nname = \"a\"\nperiod = \"5ms\"\ncompute = \"1ms\"\ndeadline = \"6ms\"\npriority = 9\n", "line 5: task 'a': field 'deadline'"),
        ];
        for (text, expected) in cases {
            let message = parse_task_set(text).unwrap_err().to_string();
            assert!(
                message.starts_with(expected),
                "{message} (expected {expected})"
            );
        }
        let message = parse_task_set("[[task]]\nname = \"a\"\nperiod = 5\n")
            .unwrap_err()
            .to_string();
        assert!(message.contains("line 3"), "{message}");
        assert_eq!(parse_task_set(""), Err(TaskSetError::Empty));
    }
}
