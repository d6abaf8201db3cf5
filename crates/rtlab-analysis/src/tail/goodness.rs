//! Goodness of fit of a GPD: the Anderson–Darling test with both parameters estimated.
//!
//! Anderson–Darling weighs the tails of the distribution most, which is where a latency forecast
//! lives. With σ and ξ estimated from the same data the statistic's null distribution is not the
//! textbook one; it depends (weakly) on ξ only (Choulakian & Stephens 2001). [`AD_CRITICAL`] holds
//! its upper quantiles on a ξ grid, computed by Monte Carlo with this crate's own MLE so the test
//! matches the estimator it judges (`tests/tail_ad_table.rs` regenerates and checks them).

use super::gpd::{cdf, Excesses, GpdFit};

/// Upper-tail levels of the table columns: P(A² ≤ column value) under the null.
pub const AD_LEVELS: [f64; 6] = [0.50, 0.75, 0.90, 0.95, 0.975, 0.99];

/// ξ of the table rows.
pub const AD_XI: [f64; 8] = [-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5];

/// A² quantiles at [`AD_LEVELS`] for each ξ of [`AD_XI`] (samples of 200, 20 000 replications,
/// seed 2026; see `tests/tail_ad_table.rs`).
pub const AD_CRITICAL: [[f64; 6]; 8] = [
    [0.4821, 0.7121, 1.0361, 1.2872, 1.5397, 1.9227], // ξ = -0.5
    [0.4221, 0.6174, 0.8720, 1.0723, 1.2747, 1.5522], // ξ = -0.25
    [0.3913, 0.5630, 0.7907, 0.9668, 1.1532, 1.4185], // ξ = 0
    [0.3710, 0.5285, 0.7326, 0.8932, 1.0530, 1.2843], // ξ = 0.25
    [0.3553, 0.4997, 0.6915, 0.8282, 0.9829, 1.1814], // ξ = 0.5
    [0.3433, 0.4785, 0.6547, 0.7970, 0.9331, 1.1230], // ξ = 0.75
    [0.3402, 0.4707, 0.6395, 0.7629, 0.9022, 1.0552], // ξ = 1
    [0.3261, 0.4523, 0.6119, 0.7381, 0.8583, 1.0592], // ξ = 1.5
];

/// The Anderson–Darling statistic A² of weighted, tied data against a fitted GPD.
///
/// Ties (histogram buckets) are expanded exactly: a value of multiplicity c at ranks a+1..a+c
/// contributes Σ(2i−1) = (a+c)² − a² to the lower-tail term and the matching reversed weights to
/// the upper-tail term, so the cost is linear in the number of distinct values.
pub fn anderson_darling(data: &Excesses, fitted: &GpdFit) -> f64 {
    let total = data.total;
    let mut rank_before = 0.0f64;
    let mut sum = 0.0;
    for (value, count) in data.values.iter().zip(&data.counts) {
        let probability = cdf(*value, fitted.sigma, fitted.xi).clamp(1e-300, 1.0 - 1e-16);
        let after = rank_before + count;
        let lower_weight = after * after - rank_before * rank_before;
        // Σ over ranks j in (a, a+c] of (2n + 1 − 2j) = c(2n+1) − ((a+c)(a+c+1) − a(a+1)).
        let upper_weight = count * (2.0 * total + 1.0)
            - (after * (after + 1.0) - rank_before * (rank_before + 1.0));
        sum += lower_weight * probability.ln() + upper_weight * (-probability).ln_1p();
        rank_before = after;
    }
    -total - sum / total
}

/// The table row for `xi`, interpolated linearly between grid points (clamped at the ends).
pub fn critical_row(xi: f64) -> [f64; 6] {
    let xi = xi.clamp(AD_XI[0], AD_XI[AD_XI.len() - 1]);
    let upper = AD_XI
        .iter()
        .position(|grid| *grid >= xi)
        .unwrap_or(AD_XI.len() - 1);
    if upper == 0 {
        return AD_CRITICAL[0];
    }
    let lower = upper - 1;
    let weight = (xi - AD_XI[lower]) / (AD_XI[upper] - AD_XI[lower]);
    let mut row = [0.0; 6];
    for (column, cell) in row.iter_mut().enumerate() {
        *cell = AD_CRITICAL[lower][column] * (1.0 - weight) + AD_CRITICAL[upper][column] * weight;
    }
    row
}

/// Approximate p-value of A² for a fit with shape `xi`, clamped to [0.01, 0.5]: interpolated
/// linearly in A² against ln(1 − level) between the table's columns.
pub fn p_value(statistic: f64, xi: f64) -> f64 {
    let row = critical_row(xi);
    if statistic <= row[0] {
        return 0.5;
    }
    for column in 1..row.len() {
        if statistic <= row[column] {
            let weight = (statistic - row[column - 1]) / (row[column] - row[column - 1]);
            let low = (1.0 - AD_LEVELS[column - 1]).ln();
            let high = (1.0 - AD_LEVELS[column]).ln();
            return (low + weight * (high - low)).exp();
        }
    }
    0.01
}

/// True when the fit is rejected at level `alpha` (only 0.10, 0.05, 0.025, 0.01 are tabled).
pub fn rejects(statistic: f64, xi: f64, alpha: f64) -> bool {
    let row = critical_row(xi);
    let column = AD_LEVELS
        .iter()
        .position(|level| (1.0 - level - alpha).abs() < 1e-9)
        .unwrap_or(3);
    statistic > row[column]
}

#[cfg(test)]
mod tests {
    use super::super::gpd::{excess_quantile, fit};
    use super::*;

    fn ideal(count: usize, sigma: f64, xi: f64) -> Excesses {
        Excesses::new(
            (0..count)
                .map(|index| {
                    let probability = (index as f64 + 0.5) / count as f64;
                    (excess_quantile(1.0 - probability, sigma, xi), 1.0)
                })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn ties_give_the_same_statistic_as_expanded_data() {
        let expanded = Excesses::new(vec![
            (1.0, 1.0),
            (1.0, 1.0),
            (2.0, 1.0),
            (3.0, 1.0),
            (3.0, 1.0),
            (3.0, 1.0),
        ])
        .unwrap();
        let tied = Excesses::new(vec![(1.0, 2.0), (2.0, 1.0), (3.0, 3.0)]).unwrap();
        let fitted = GpdFit {
            sigma: 2.0,
            xi: 0.1,
            log_likelihood: 0.0,
        };
        // Expanded by hand with the textbook formula.
        let n = 6.0;
        let values = [1.0, 1.0, 2.0, 3.0, 3.0, 3.0];
        let mut sum = 0.0;
        for (index, value) in values.iter().enumerate() {
            let i = index as f64 + 1.0;
            let reverse = values[values.len() - 1 - index];
            sum += (2.0 * i - 1.0)
                * (cdf(*value, 2.0, 0.1).ln() + (1.0 - cdf(reverse, 2.0, 0.1)).ln());
        }
        let textbook = -n - sum / n;
        assert!((anderson_darling(&tied, &fitted) - textbook).abs() < 1e-9);
        assert!((anderson_darling(&expanded, &fitted) - textbook).abs() < 1e-9);
    }

    #[test]
    fn ideal_gpd_data_pass_and_a_wrong_shape_fails() {
        let data = ideal(500, 1.0, 0.2);
        let fitted = fit(&data).unwrap();
        let statistic = anderson_darling(&data, &fitted);
        assert!(!rejects(statistic, fitted.xi, 0.05), "A² {statistic}");
        assert!(p_value(statistic, fitted.xi) >= 0.5);
        let wrong = GpdFit {
            sigma: 1.0,
            xi: -0.4,
            log_likelihood: 0.0,
        };
        let statistic = anderson_darling(&data, &wrong);
        assert!(rejects(statistic, 0.2, 0.05), "A² {statistic}");
        assert_eq!(p_value(statistic, 0.2), 0.01);
    }

    #[test]
    fn table_rows_increase_and_interpolate() {
        for row in AD_CRITICAL {
            assert!(row.windows(2).all(|pair| pair[0] < pair[1]), "{row:?}");
        }
        let middle = critical_row(0.125);
        for column in 0..6 {
            let expected = (AD_CRITICAL[2][column] + AD_CRITICAL[3][column]) / 2.0;
            assert!((middle[column] - expected).abs() < 1e-12);
        }
        assert_eq!(critical_row(-3.0), AD_CRITICAL[0]);
        assert_eq!(critical_row(9.0), AD_CRITICAL[7]);
    }
}
