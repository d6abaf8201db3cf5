//! The run history's one-line summary of a record (platform-free: Linux and Windows runs alike).

use rtlab_core::{Metric, RunRecord};

/// One line for the run history: the worst wake-up p99 and max of the first class measured.
pub fn summary_line(record: &RunRecord) -> String {
    let micros = |nanos: u64| format!("{:.1}", nanos as f64 / 1_000.0);
    let wakeups: Vec<_> = record
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup)
        .collect();
    let Some(first_class) = wakeups.first().map(|series| series.class.clone()) else {
        return "no wake-up series".to_owned();
    };
    let class_series: Vec<_> = wakeups
        .iter()
        .filter(|series| series.class == first_class)
        .collect();
    let p99 = class_series
        .iter()
        .filter_map(|series| series.percentiles.get("99"))
        .max()
        .copied()
        .unwrap_or(0);
    let max = class_series
        .iter()
        .map(|series| series.max_ns)
        .max()
        .unwrap_or(0);
    format!(
        "{first_class} wakeup p99 {} us, max {} us on {} CPUs",
        micros(p99),
        micros(max),
        class_series.len()
    )
}
