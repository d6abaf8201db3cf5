//! Series selection: which of a Run record's series a forecast or check reads, pooled over CPUs,
//! with the periods the probe skipped put back (they are trials of the model too).

use super::evidence::{ComputeEvidence, LateSamples, ProbeEvidence};
use rtlab_core::{LatencyHistogram, Metric, Nanos, RunRecord, Series};

/// Which series a forecast or check reads.
#[derive(Clone, Debug)]
pub struct SeriesSelection {
    /// `class/metric`, and the CPUs pooled.
    pub label: String,
    pub histogram: LatencyHistogram,
    pub cpus: Vec<u32>,
    /// Missed periods put back into the histogram from the peaks (see [`add_missed_periods`]).
    pub missed_restored: u64,
    /// Missed periods whose latency the record cannot tell (more than its peaks cover).
    pub missed_unknown: u64,
}

/// Puts the periods a probe skipped back into a histogram, as cyclictest would have measured them.
///
/// A wake-up `L` late with `L ≥ t` makes the probe skip the periods it overslept; an application
/// with an absolute timer would instead have run them at once, `L − t`, `L − 2t`, … late. Those are
/// trials of the forecast's model too, and many of them fail, so leaving them out would flatter the
/// machine. They are rebuilt from the largest samples the series kept (`peaks`); `(restored,
/// unknown)` says how many were rebuilt and how many the peaks did not cover.
pub fn add_missed_periods(series: &Series, histogram: &mut LatencyHistogram) -> (u64, u64) {
    if series.missed == 0 {
        return (0, 0);
    }
    if series.period_ns == 0 {
        return (0, series.missed);
    }
    let mut restored = 0;
    for peak in &series.peaks {
        let mut latency = peak.value_ns;
        while latency >= series.period_ns && restored < series.missed {
            latency -= series.period_ns;
            histogram.record(latency);
            restored += 1;
        }
    }
    (restored, series.missed - restored)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectionError {
    #[error("'{0}' is not a series selector (expected CLASS/METRIC, e.g. rt-high/wakeup)")]
    BadSelector(String),
    #[error("the run has no series {wanted} (it has: {available})")]
    NoSuchSeries { wanted: String, available: String },
    #[error("the run has no rt-high wake-up series and several classes; pick one with --series (it has: {0})")]
    Ambiguous(String),
    #[error("series {label}: {message}")]
    Histogram { label: String, message: String },
}

/// Pools the series `CLASS/METRIC` over CPUs. Without a selector: `rt-high/wakeup`, or the only
/// class with wake-up series (e.g. an imported cyclictest run).
pub fn select_series(
    record: &RunRecord,
    selector: Option<&str>,
) -> Result<SeriesSelection, SelectionError> {
    let available = || {
        let mut labels: Vec<String> = record
            .series
            .iter()
            .map(|series| format!("{}/{}", series.class, series.metric))
            .collect();
        labels.sort();
        labels.dedup();
        if labels.is_empty() {
            "no series".to_owned()
        } else {
            labels.join(", ")
        }
    };
    let (class, metric) = match selector {
        Some(text) => {
            let (class, metric) = text
                .split_once('/')
                .ok_or_else(|| SelectionError::BadSelector(text.to_owned()))?;
            let metric: Metric = metric
                .parse()
                .map_err(|_| SelectionError::BadSelector(text.to_owned()))?;
            (class.to_owned(), metric)
        }
        None => {
            let mut classes: Vec<&str> = record
                .series
                .iter()
                .filter(|series| series.metric == Metric::Wakeup)
                .map(|series| series.class.as_str())
                .collect();
            classes.sort_unstable();
            classes.dedup();
            if classes.contains(&"rt-high") {
                ("rt-high".to_owned(), Metric::Wakeup)
            } else if classes.len() == 1 {
                (classes[0].to_owned(), Metric::Wakeup)
            } else if classes.is_empty() {
                return Err(SelectionError::NoSuchSeries {
                    wanted: "*/wakeup".to_owned(),
                    available: available(),
                });
            } else {
                return Err(SelectionError::Ambiguous(available()));
            }
        }
    };
    let label = format!("{class}/{metric}");
    let mut pooled = LatencyHistogram::new();
    let mut cpus = Vec::new();
    let (mut missed_restored, mut missed_unknown) = (0, 0);
    for series in record
        .series
        .iter()
        .filter(|series| series.class == class && series.metric == metric)
    {
        let histogram = series
            .histogram()
            .map_err(|error| SelectionError::Histogram {
                label: series.label(),
                message: error.to_string(),
            })?;
        let mut histogram = histogram;
        let (restored, unknown) = add_missed_periods(series, &mut histogram);
        missed_restored += restored;
        missed_unknown += unknown;
        pooled.add(&histogram);
        cpus.push(series.cpu);
    }
    if cpus.is_empty() {
        return Err(SelectionError::NoSuchSeries {
            wanted: label,
            available: available(),
        });
    }
    Ok(SeriesSelection {
        label,
        histogram: pooled,
        cpus,
        missed_restored,
        missed_unknown,
    })
}

/// The response model's evidence from a record: `class`'s wake-up series pooled over CPUs as
/// measured (one sample per stall, missed periods counted as probe time, not restored), and its
/// `response` series when the probe computed (`rtlab run --compute`). `None` when the record is
/// not one of rtlab's probe (no probe period in its settings), has no wake-up series of `class`
/// with a period, or one of them cannot be read.
pub fn probe_evidence(record: &RunRecord, class: &str) -> Option<ProbeEvidence> {
    // Only a record of rtlab's own probe says what its samples are (one per period, skipped
    // periods counted): an import or a hand-made record has no probe settings.
    record.config.period_ns?;
    let pool = |metric: Metric| {
        let mut pooled = LatencyHistogram::new();
        let (mut trials, mut cpus, mut period_ns) = (0u64, 0u32, 0u64);
        for series in record
            .series
            .iter()
            .filter(|series| series.class == class && series.metric == metric)
        {
            pooled.add(&series.histogram().ok()?);
            trials += series.count + series.missed;
            cpus += 1;
            period_ns = period_ns.max(series.period_ns);
        }
        Some((pooled, trials, cpus, period_ns))
    };
    let (wakeup, trials, cpus, period_ns) = pool(Metric::Wakeup)?;
    if cpus == 0 || period_ns == 0 || trials == 0 {
        return None;
    }
    let response = match record.config.compute_ns {
        Some(compute_ns) if compute_ns > 0 => pool(Metric::Response)
            .filter(|(histogram, _, cpus, _)| *cpus > 0 && histogram.count() > 0)
            .map(|(histogram, ..)| ComputeEvidence {
                histogram,
                compute: Nanos(compute_ns),
            }),
        _ => None,
    };
    // Every CPU's kept peaks with their times; complete above the largest latency one series
    // may have left out (the smallest peak of a series that kept fewer than all its samples).
    let mut late = LateSamples::default();
    for series in record
        .series
        .iter()
        .filter(|series| series.class == class && series.metric == Metric::Wakeup)
    {
        let kept = series.peaks.len() as u64;
        if kept < series.count {
            let smallest = series.peaks.iter().map(|peak| peak.value_ns).min();
            late.complete_above_ns = late.complete_above_ns.max(smallest.unwrap_or(u64::MAX));
        }
        late.samples
            .extend(series.peaks.iter().map(|peak| (peak.at_ns, peak.value_ns)));
    }
    Some(ProbeEvidence {
        wakeup,
        trials,
        cpus,
        period: Nanos(period_ns),
        response,
        late: Some(late),
    })
}
