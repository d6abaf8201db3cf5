//! Student's t quantile, for the interval of a mean over a handful of paired rounds (`rtlab tune
//! --app`: a program's deadline misses per round, a few A/B pairs).
//!
//! The t distribution's CDF is the regularized incomplete beta function
//! (`P(T ≤ t) = 1 − I_x(ν/2, 1/2) / 2` for `t ≥ 0`, `x = ν / (ν + t²)`), computed from its
//! continued fraction (Numerical Recipes §6.4, modified Lentz) with [`ln_gamma`]; the quantile is
//! found by bisection, which needs nothing but the CDF being monotone. Tests check it against
//! the tables' values.

use crate::chi_squared::ln_gamma;

const EPSILON: f64 = 1e-15;
const TINY: f64 = 1e-300;
const MAX_TERMS: usize = 10_000;

/// The continued fraction of the incomplete beta function (Numerical Recipes' `betacf`).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    let (sum, plus_one, minus_one) = (a + b, a + 1.0, a - 1.0);
    let guard = |value: f64| if value.abs() < TINY { TINY } else { value };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - sum * x / plus_one);
    let mut fraction = d;
    for term in 1..=MAX_TERMS {
        let m = term as f64;
        let even = m * (b - m) * x / ((minus_one + 2.0 * m) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        fraction *= d * c;
        let odd = -(a + m) * (sum + m) * x / ((a + 2.0 * m) * (plus_one + 2.0 * m));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        fraction *= step;
        if (step - 1.0).abs() < EPSILON {
            break;
        }
    }
    fraction
}

/// The regularized incomplete beta function `I_x(a, b)`, `0 ≤ x ≤ 1`.
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// `P(T ≤ t)` for Student's t with `degrees_of_freedom` (> 0).
pub fn cdf(t: f64, degrees_of_freedom: f64) -> f64 {
    let x = degrees_of_freedom / (degrees_of_freedom + t * t);
    let tail = 0.5 * regularized_incomplete_beta(degrees_of_freedom / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `probability` quantile (0 < probability < 1) of Student's t with `degrees_of_freedom`.
pub fn quantile(probability: f64, degrees_of_freedom: f64) -> f64 {
    assert!(
        probability > 0.0 && probability < 1.0 && degrees_of_freedom > 0.0,
        "a quantile in (0, 1) of a t with positive degrees of freedom"
    );
    if probability < 0.5 {
        return -quantile(1.0 - probability, degrees_of_freedom);
    }
    let mut high = 1.0;
    while cdf(high, degrees_of_freedom) < probability {
        high *= 2.0;
    }
    let mut low = 0.0;
    for _ in 0..200 {
        let middle = (low + high) / 2.0;
        if cdf(middle, degrees_of_freedom) < probability {
            low = middle;
        } else {
            high = middle;
        }
        if high - low < 1e-12 * high.max(1.0) {
            break;
        }
    }
    (low + high) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_the_tables() {
        // Two-sided 95 % and 99 % critical values (any statistics table; R's qt()).
        for (probability, freedom, expected) in [
            (0.975, 1.0, 12.706_204_736),
            (0.975, 2.0, 4.302_652_730),
            (0.975, 3.0, 3.182_446_305),
            (0.975, 5.0, 2.570_581_836),
            (0.975, 10.0, 2.228_138_852),
            (0.975, 30.0, 2.042_272_456),
            (0.995, 4.0, 4.604_094_871),
            (0.95, 7.0, 1.894_578_605),
            (0.5, 3.0, 0.0),
        ] {
            let got = quantile(probability, freedom);
            assert!(
                (got - expected).abs() < 1e-6,
                "t({probability}, {freedom}) = {got}, expected {expected}"
            );
        }
        assert!((quantile(0.025, 2.0) + 4.302_652_730).abs() < 1e-6);
    }

    #[test]
    fn the_cdf_is_symmetric_and_monotone() {
        let mut last = 0.0;
        for step in -100..=100 {
            let t = f64::from(step) / 10.0;
            let p = cdf(t, 3.0);
            assert!(p >= last, "{t}: {p} < {last}");
            assert!((p + cdf(-t, 3.0) - 1.0).abs() < 1e-12);
            last = p;
        }
    }
}
