//! One arm of an A/B comparison as one Run record: the rt-high wake-up series of every round and
//! every measured CPU pooled into one series, so `rtlab compare`'s bootstrap
//! (`rtlab_analysis::compare`) judges the arm as a whole.
//!
//! Rounds are laid end to end: each round's seconds follow the previous round's, and its peaks
//! move with them, so the block bootstrap resamples whole seconds of any round. A round keeps
//! only its largest peaks, so the pooled peaks are cut at the highest of the rounds' smallest
//! kept peak: above it every sample of every round is present, as the bootstrap requires.

use rtlab_core::{LatencyHistogram, Metric, Peak, RunRecord, Series};

/// The class `rtlab tune` measures.
pub const CLASS: &str = "rt-high";

/// The rt-high wake-up series of `rounds` pooled into one record (CPU 0 standing for all), or
/// `None` when no round has such a series.
pub fn pool(rounds: &[RunRecord]) -> Result<Option<RunRecord>, rtlab_core::HistogramError> {
    let mut histogram = LatencyHistogram::new();
    let mut template: Option<Series> = None;
    let mut max_per_second: Vec<u64> = Vec::new();
    let mut peaks: Vec<Peak> = Vec::new();
    let mut peak_floor = 0u64;
    let (mut count, mut missed, mut lost) = (0u64, 0u64, 0u64);
    let mut duration_ns = 0;
    for round in rounds {
        let series: Vec<&Series> = round
            .series
            .iter()
            .filter(|series| series.metric == Metric::Wakeup && series.class == CLASS)
            .collect();
        let seconds = series
            .iter()
            .map(|series| series.max_per_second.len())
            .max()
            .unwrap_or(0);
        let offset_ns = max_per_second.len() as u64 * 1_000_000_000;
        let mut round_maxima = vec![0u64; seconds];
        for one in &series {
            histogram.add(&one.histogram()?);
            count += one.count;
            missed += one.missed;
            lost += one.lost;
            for (second, value) in one.max_per_second.iter().enumerate() {
                round_maxima[second] = round_maxima[second].max(*value);
            }
            if let Some(smallest) = one.peaks.iter().map(|peak| peak.value_ns).min() {
                peak_floor = peak_floor.max(smallest);
            }
            peaks.extend(one.peaks.iter().map(|peak| Peak {
                at_ns: (peak.at_ns + offset_ns).min(offset_ns + seconds as u64 * 1_000_000_000),
                value_ns: peak.value_ns,
            }));
            if template.is_none() {
                template = Some((*one).clone());
            }
        }
        max_per_second.extend(round_maxima);
        duration_ns += round.duration_ns;
    }
    let Some(mut series) = template else {
        return Ok(None);
    };
    peaks.retain(|peak| peak.value_ns >= peak_floor);
    peaks.sort_by_key(|peak| std::cmp::Reverse(peak.value_ns));
    let summary = histogram.summary();
    series.cpu = 0;
    series.count = count;
    series.missed = missed;
    series.lost = lost;
    series.min_ns = summary.min_ns;
    series.max_ns = summary.max_ns;
    series.mean_ns = summary.mean_ns;
    series.stddev_ns = summary.stddev_ns;
    series.percentiles = summary.percentiles;
    series.hdr = histogram.to_base64()?;
    series.max_per_second = max_per_second;
    series.peaks = peaks;
    series.tail = None;
    let mut record = rounds[0].clone();
    record.series = vec![series];
    record.episodes.clear();
    record.duration_ns = duration_ns;
    record.conditions = None;
    Ok(Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(values: &[u64], cpu: u32) -> RunRecord {
        let mut histogram = LatencyHistogram::new();
        for value in values {
            histogram.record(*value);
        }
        let peaks = values
            .iter()
            .map(|value| Peak {
                at_ns: 1_500_000_000,
                value_ns: *value,
            })
            .collect();
        let maximum = *values.iter().max().unwrap();
        let series =
            rtlab_core::rt_high_wakeup_series(cpu, &histogram, 0, vec![maximum; 2], peaks).unwrap();
        RunRecord::new("round", "2026-12-06T17:00:00Z", 2_000_000_000, vec![series])
    }

    #[test]
    fn rounds_and_cpus_pool_into_one_series_laid_end_to_end() {
        let pooled = pool(&[round(&[10_000, 20_000], 0), round(&[30_000, 40_000], 1)])
            .unwrap()
            .unwrap();
        let series = &pooled.series[0];
        assert_eq!(series.count, 4);
        assert_eq!(series.histogram().unwrap().count(), 4);
        assert_eq!(series.max_per_second.len(), 4);
        assert_eq!(pooled.duration_ns, 4_000_000_000);
        // Cut at the higher round's smallest peak; the second round's peaks are 2 s later.
        assert_eq!(
            series.peaks,
            vec![
                Peak {
                    at_ns: 3_500_000_000,
                    value_ns: 40_000
                },
                Peak {
                    at_ns: 3_500_000_000,
                    value_ns: 30_000
                },
            ]
        );
        assert!(pool(&[]).unwrap().is_none());
    }
}
