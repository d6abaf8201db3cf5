//! Tail projection of a record's series: computed at the end of a run and, for records made
//! before projection existed (or imported ones), when a record is shown.

use rtlab_analysis::tail::{project, TailConfig, TailData, UsageModel};
use rtlab_core::{RunRecord, Tail, TailFit};

/// The usage model a stored record was projected with (its `load.usage`), else continuous use.
pub fn usage_of_record(record: &RunRecord) -> UsageModel {
    match &record.load {
        Some(load) => UsageModel {
            hours_per_day: load.usage.hours_per_day,
            days_per_week: load.usage.days_per_week,
        },
        None => UsageModel::CONTINUOUS,
    }
}

/// Computes and stores each series' `tail` (skipping series that already have one unless
/// `overwrite`). Series whose histogram cannot be decoded get only `insufficient`.
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
                let mut tail = project(&data, usage, &config).to_tail();
                // Whether the record's `peaks` hold every exceedance of the fit (with its time),
                // so the projection can be redone and checked from the record alone.
                if let Some(TailFit::Fitted(fit)) = &mut tail.fit {
                    let kept = series
                        .peaks
                        .iter()
                        .filter(|peak| peak.value_ns > fit.threshold_ns)
                        .count() as u64;
                    fit.exceedances_kept_in_peaks = Some(kept >= fit.exceedances);
                }
                tail
            }
            Err(error) => Tail::insufficient(format!("the histogram cannot be read: {error}")),
        };
        series.tail = Some(tail);
    }
}
