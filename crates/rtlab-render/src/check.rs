//! `rtlab check`'s table.

use crate::summary::micros;
use rtlab_analysis::check_study::CheckStudy;
use rtlab_analysis::classes::Rate;
use rtlab_analysis::schedulability::{PseudoBasis, Scheduling, Task};

/// The check table as text: [`write_table`].
pub fn table(output: &CheckStudy, tasks: &[Task], miss_rate: &Rate) -> String {
    crate::to_text(|out| write_table(out, output, tasks, miss_rate))
}

/// The check table: one line per task with its response time, slack and verdict.
pub fn write_table(
    out: &mut impl std::fmt::Write,
    output: &CheckStudy,
    tasks: &[Task],
    miss_rate: &Rate,
) -> std::fmt::Result {
    match (&output.run_id, &output.series) {
        (Some(run), Some(series)) => writeln!(
            out,
            "OS latency from run {run}, series {series}: the pseudo worst case each task meets at {} misses (paper 002 §5.2), as release jitter",
            miss_rate
        )?,
        _ => writeln!(
            out,
            "no run given: OS latency taken as zero (give --run to fold in this machine's measured latency)"
        )?,
    }
    writeln!(
        out,
        "times in µs; latency = the OS latency budgeted as release jitter"
    )?;
    writeln!(
        out,
        "{:<16} {:>3} {:<14} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}  verdict",
        "task",
        "cpu",
        "scheduling",
        "period",
        "compute",
        "deadline",
        "latency",
        "response",
        "slack"
    )?;
    for (task, result) in tasks.iter().zip(&output.tasks) {
        let scheduling = match task.scheduling {
            Scheduling::FixedPriority(priority) => format!("FIFO {priority}"),
            Scheduling::Reservation {
                runtime, period, ..
            } => {
                format!("DL {}/{}", runtime, period)
            }
        };
        let latency = match result.os_latency.basis {
            PseudoBasis::None => "-".to_owned(),
            PseudoBasis::ObservedMaximum => format!("≥{}", micros(result.os_latency.latency.0)),
            _ => micros(result.os_latency.latency.0),
        };
        let response = result
            .response_ns
            .map(micros)
            .unwrap_or_else(|| format!(">{}", micros(task.deadline.0)));
        let slack = result
            .slack_ns
            .map(|slack| format!("{:.1}", slack as f64 / 1_000.0))
            .unwrap_or_else(|| "-".to_owned());
        writeln!(
            out,
            "{:<16} {:>3} {:<14} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}  {}",
            task.name,
            task.cpu,
            scheduling,
            micros(task.period.0),
            micros(task.compute.0),
            micros(task.deadline.0),
            latency,
            response,
            slack,
            if result.schedulable {
                "schedulable"
            } else {
                "NOT schedulable"
            }
        )?;
        if let Some(note) = &result.note {
            writeln!(out, "{:<16} {note}", "")?;
        }
    }
    writeln!(
        out,
        "\n{}",
        if output.schedulable {
            "all tasks meet their deadlines"
        } else {
            "some tasks miss their deadlines (exit 1)"
        }
    )?;
    Ok(())
}
