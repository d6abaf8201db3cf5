//! Empirical estimates where the run covers the window: block maxima and order statistics.
//!
//! When a run is at least six windows long, the worst case of a window needs no model: cut the
//! run into windows, take each one's maximum (from the per-second maxima the record keeps), and
//! report their median with a distribution-free order-statistic interval (the number of block
//! maxima below the true median is Binomial(m, ½)). Six blocks is the fewest for which the
//! widest such interval, [min, max], reaches 95 %.

/// Maxima of consecutive blocks of `block_seconds` seconds; an incomplete last block is dropped.
pub fn block_maxima(max_per_second: &[u64], block_seconds: usize) -> Vec<u64> {
    if block_seconds == 0 {
        return Vec::new();
    }
    max_per_second
        .chunks_exact(block_seconds)
        .map(|block| block.iter().copied().max().unwrap_or(0))
        .collect()
}

/// `P(Binomial(trials, ½) ≤ successes)`.
pub fn binomial_half_cdf(trials: u64, successes: u64) -> f64 {
    if successes >= trials {
        return 1.0;
    }
    let log_half = 0.5f64.ln() * trials as f64;
    let mut log_choose = 0.0f64;
    let mut total = 0.0;
    for index in 0..=successes {
        if index > 0 {
            log_choose += ((trials - index + 1) as f64).ln() - (index as f64).ln();
        }
        total += (log_choose + log_half).exp();
    }
    total.min(1.0)
}

/// A median with a distribution-free interval around it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianInterval {
    pub median: f64,
    pub low: u64,
    pub high: u64,
    /// The coverage the interval achieves (at least the confidence asked for).
    pub coverage: f64,
}

/// The median of `values` with the narrowest symmetric order-statistic interval whose coverage
/// is at least `confidence`. None below 6 values or when even [min, max] does not reach
/// `confidence`.
pub fn median_with_interval(values: &[u64], confidence: f64) -> Option<MedianInterval> {
    let count = values.len();
    if count < 6 {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let median = (sorted[(count - 1) / 2] as f64 + sorted[count / 2] as f64) / 2.0;
    // Interval [x_(j), x_(m+1−j)] (1-based) covers the median with 1 − 2·P(B ≤ j − 1).
    let mut best = None;
    for lower_rank in 1..=count / 2 {
        let coverage = 1.0 - 2.0 * binomial_half_cdf(count as u64, lower_rank as u64 - 1);
        if coverage >= confidence {
            best = Some((lower_rank, coverage));
        } else {
            break;
        }
    }
    let (lower_rank, coverage) = best?;
    Some(MedianInterval {
        median,
        low: sorted[lower_rank - 1],
        high: sorted[count - lower_rank],
        coverage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_maxima_drop_the_incomplete_block() {
        let per_second = [1, 5, 2, 8, 3, 3, 9];
        assert_eq!(block_maxima(&per_second, 2), vec![5, 8, 3]);
        assert_eq!(block_maxima(&per_second, 7), vec![9]);
        assert!(block_maxima(&per_second, 8).is_empty());
        assert!(block_maxima(&per_second, 0).is_empty());
    }

    #[test]
    fn binomial_matches_hand_values() {
        assert!((binomial_half_cdf(6, 0) - 1.0 / 64.0).abs() < 1e-12);
        assert!((binomial_half_cdf(4, 2) - 11.0 / 16.0).abs() < 1e-12);
        assert_eq!(binomial_half_cdf(3, 3), 1.0);
    }

    #[test]
    fn median_interval_needs_six_values() {
        assert!(median_with_interval(&[1, 2, 3, 4, 5], 0.95).is_none());
        let MedianInterval {
            median,
            low,
            high,
            coverage,
        } = median_with_interval(&[6, 1, 5, 2, 4, 3], 0.95).unwrap();
        assert_eq!(median, 3.5);
        assert_eq!((low, high), (1, 6));
        assert!((coverage - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        let many: Vec<u64> = (1..=100).collect();
        let MedianInterval {
            low,
            high,
            coverage,
            ..
        } = median_with_interval(&many, 0.95).unwrap();
        assert!(
            coverage >= 0.95 && low > 30 && high < 70,
            "{low} {high} {coverage}"
        );
    }
}
