//! Period detection from activation times: the interval most activations repeat at.

/// `(period, jitter)` of activation `starts` (ascending): the intervals within 10 % of their
/// median must be at least 60 % of all intervals (at least 4 of them); the period is their mean
/// and the jitter their standard deviation. `None` for an aperiodic thread.
pub fn detect_period(starts: &[u64]) -> Option<(u64, u64)> {
    if starts.len() < 5 {
        return None;
    }
    let mut intervals: Vec<u64> = starts
        .windows(2)
        .map(|pair| pair[1].saturating_sub(pair[0]))
        .collect();
    intervals.sort_unstable();
    let median = intervals[intervals.len() / 2];
    if median == 0 {
        return None;
    }
    let tolerance = median / 10;
    let cluster: Vec<u64> = intervals
        .iter()
        .copied()
        .filter(|interval| interval.abs_diff(median) <= tolerance)
        .collect();
    if cluster.len() < 4 || cluster.len() * 10 < intervals.len() * 6 {
        return None;
    }
    let n = cluster.len() as f64;
    let mean = cluster.iter().map(|value| *value as f64).sum::<f64>() / n;
    let variance = cluster
        .iter()
        .map(|value| (*value as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Some((mean.round() as u64, variance.sqrt().round() as u64))
}

/// The `p`-th percentile (0..=100) of `values` (sorted in place), nearest rank.
pub fn percentile(values: &mut [u64], p: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_regular_series_with_outliers_keeps_its_period() {
        let mut starts = Vec::new();
        let mut time = 1_000u64;
        for index in 0..50u64 {
            starts.push(time);
            time += if index % 10 == 9 {
                37_000_000
            } else {
                10_000_000 + (index % 3) * 100_000
            };
        }
        let (period, jitter) = detect_period(&starts).unwrap();
        assert!(period.abs_diff(10_100_000) < 100_000, "{period}");
        assert!(jitter < 200_000);
    }

    #[test]
    fn random_times_are_aperiodic() {
        let starts = [0, 3, 50, 51, 400, 1000, 1003, 5000, 5100];
        assert_eq!(detect_period(&starts), None);
        assert_eq!(detect_period(&[0, 10, 20]), None);
    }

    proptest! {
        #[test]
        fn any_jittered_period_is_recovered_within_5_percent(
            period in 1_000_000u64..1_000_000_000,
            jitters in proptest::collection::vec(0u64..1000, 10..100),
        ) {
            let mut starts = Vec::new();
            for (index, jitter) in jitters.iter().enumerate() {
                // Up to ±2 % of the period around each nominal start.
                let offset = period * 2 / 100 * jitter / 1000;
                starts.push(period * (index as u64 + 1) + offset);
            }
            let (found, _) = detect_period(&starts).unwrap();
            prop_assert!(found.abs_diff(period) * 20 <= period, "{found} vs {period}");
        }
    }
}
