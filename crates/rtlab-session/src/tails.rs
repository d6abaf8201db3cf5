//! Tail projection of a record's series: computed at the end of a run and, for records made
//! before projection existed (or imported ones), when a record is shown.

use rtlab_analysis::tail::{project, TailConfig, TailData, UsageModel};
use rtlab_core::RunRecord;
use serde_json::json;

/// The usage model a stored record was projected with (its `load.usage`), else continuous use.
pub fn usage_of_record(record: &RunRecord) -> UsageModel {
    let usage = record.load.as_ref().and_then(|load| load.get("usage"));
    match usage {
        Some(usage) => UsageModel {
            hours_per_day: usage["hours_per_day"].as_f64().unwrap_or(24.0),
            days_per_week: usage["days_per_week"].as_f64().unwrap_or(7.0),
        },
        None => UsageModel::CONTINUOUS,
    }
}

/// Computes and stores each series' `tail` (skipping series that already have one unless
/// `overwrite`). Series whose histogram cannot be decoded get `{"insufficient": …}`.
pub fn attach_tails(record: &mut RunRecord, usage: &UsageModel, overwrite: bool) {
    let config = TailConfig::default();
    let duration_ns = record.duration_ns;
    for series in &mut record.series {
        if series.tail.is_some() && !overwrite {
            continue;
        }
        let tail = match series.histogram() {
            Ok(histogram) => {
                let covered_ns = if series.max_per_second.is_empty() {
                    duration_ns
                } else {
                    (series.max_per_second.len() as u64 * 1_000_000_000)
                        .min(duration_ns.max(1_000_000_000))
                };
                let data = TailData {
                    histogram: &histogram,
                    max_per_second: &series.max_per_second,
                    covered_ns,
                    period_ns: series.period_ns,
                };
                let mut tail = project(&data, usage, &config).to_json();
                // Whether the record's `peaks` hold every exceedance of the fit (with its time),
                // so the projection can be redone and checked from the record alone.
                if let Some(threshold) = tail["fit"]["threshold_ns"].as_u64() {
                    let kept = series
                        .peaks
                        .iter()
                        .filter(|peak| peak.value_ns > threshold)
                        .count() as u64;
                    tail["fit"]["exceedances_kept_in_peaks"] =
                        json!(kept >= tail["fit"]["exceedances"].as_u64().unwrap_or(u64::MAX));
                }
                tail
            }
            Err(error) => json!({"insufficient": format!("the histogram cannot be read: {error}")}),
        };
        series.tail = Some(tail);
    }
}
