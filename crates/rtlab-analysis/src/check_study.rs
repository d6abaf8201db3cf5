//! A whole schedulability check (what `rtlab check` shows): a task set analysed with the OS
//! latency of a measured run (if any) folded in as paper 002's pseudo worst case at a permitted
//! miss rate, beyond the data from the run's tail projection. Pure: a function of its inputs.

use crate::classes::Rate;
use crate::forecast::{select_series, SelectionError, TailModel};
use crate::projection::ProjectedTail;
use crate::schedulability::{
    analyse, pseudo_worst_case, AnalysisOptions, PseudoBasis, PseudoWorstCase, Task, TaskResult,
};
use rtlab_core::{Nanos, RunRecord};
use serde::Serialize;

/// What the check found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckStudy {
    /// The task-set file's name.
    pub taskset: String,
    pub run_id: Option<String>,
    pub series: Option<String>,
    pub miss_rate_per_s: Option<f64>,
    pub schedulable: bool,
    pub tasks: Vec<TaskResult>,
}

/// Checks `tasks` (from the file named `taskset`), with the OS latency of `run`'s `series`
/// (default: rt-high/wakeup pooled) met at `miss_rate`, reservations bounded by `options`.
pub fn check(
    taskset: &str,
    tasks: &[Task],
    run: Option<(&RunRecord, Option<&str>)>,
    miss_rate: Rate,
    options: AnalysisOptions,
) -> Result<CheckStudy, SelectionError> {
    let selection = run
        .map(|(record, series)| select_series(record, series))
        .transpose()?;
    // Beyond the run's data, the tail projection (when its fit is accepted) gives the quantile.
    let tail = selection
        .as_ref()
        .and_then(|selection| ProjectedTail::fit(&selection.histogram).ok());
    let latency_of = |task: &Task| match &selection {
        Some(selection) => pseudo_worst_case(
            &selection.histogram,
            tail.as_ref().map(|tail| tail as &dyn TailModel),
            task.period,
            miss_rate,
        ),
        None => PseudoWorstCase {
            latency: Nanos::ZERO,
            per_activation: 0.0,
            basis: PseudoBasis::None,
        },
    };
    let results = analyse(tasks, options, &latency_of);
    Ok(CheckStudy {
        taskset: taskset.to_owned(),
        run_id: run.map(|(record, _)| record.id.clone()),
        series: selection.as_ref().map(|selection| selection.label.clone()),
        miss_rate_per_s: selection.as_ref().map(|_| miss_rate.per_second()),
        schedulable: results.iter().all(|result| result.schedulable),
        tasks: results,
    })
}
