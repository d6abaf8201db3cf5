//! The chi-squared quantile, for the exact (Garwood) Poisson interval of a forecast.
//!
//! rtlab needs one special function: the inverse CDF of the chi-squared distribution (`χ²(2k)/2`
//! is the Gamma(k, 1) distribution, whose quantiles bound a Poisson mean after k events). It was
//! `statrs`, which brought `nalgebra` and some twenty crates for this one call; here it is the
//! textbook way: the regularized lower incomplete gamma function `P(a, x)` from its series below
//! `a + 1` and its continued fraction above (Numerical Recipes §6.2, modified Lentz), `ln Γ` by
//! Lanczos' approximation (g = 7, 9 terms, ~1e-15 relative), and the quantile by Newton's method
//! on `P`, kept inside a bisection bracket. Tests check it against values computed with mpmath
//! at 40 digits, from 2 to 2,000,000 degrees of freedom.

/// Relative accuracy the series and the continued fraction stop at.
const EPSILON: f64 = 1e-16;
/// Guard against a series or fraction that does not converge (it takes ~ √a terms near the mean).
const MAX_TERMS: usize = 10_000_000;

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, n = 9).
pub fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (index, coefficient) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += coefficient / (x + index as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularized lower incomplete gamma function `P(a, x) = γ(a, x) / Γ(a)`, for `a > 0`.
pub fn regularized_lower_gamma(a: f64, x: f64) -> f64 {
    let (lower, upper) = regularized_gamma_pair(a, x);
    lower.unwrap_or(1.0 - upper.unwrap_or(0.0))
}

/// `Q(a, x) = 1 − P(a, x)`, computed directly where `P` is near 1 (so the upper tail keeps its
/// relative accuracy).
pub fn regularized_upper_gamma(a: f64, x: f64) -> f64 {
    let (lower, upper) = regularized_gamma_pair(a, x);
    upper.unwrap_or(1.0 - lower.unwrap_or(0.0))
}

/// `P(a, x)` from the series below `a + 1`, or `Q(a, x)` from the continued fraction above:
/// whichever of the two is computed directly (the other is `None`).
fn regularized_gamma_pair(a: f64, x: f64) -> (Option<f64>, Option<f64>) {
    if x <= 0.0 {
        return (Some(0.0), None);
    }
    let log_prefactor = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        // Series: P = e^{−x} x^a / Γ(a) · Σ x^n / (a (a+1) … (a+n)).
        let mut denominator = a;
        let mut term = 1.0 / a;
        let mut sum = term;
        for _ in 0..MAX_TERMS {
            denominator += 1.0;
            term *= x / denominator;
            sum += term;
            if term.abs() < sum.abs() * EPSILON {
                break;
            }
        }
        (Some((sum.ln() + log_prefactor).exp().min(1.0)), None)
    } else {
        // Continued fraction for Q = 1 − P (modified Lentz).
        const TINY: f64 = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut fraction = d;
        for index in 1..MAX_TERMS {
            let an = -(index as f64) * (index as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < TINY {
                d = TINY;
            }
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            let step = d * c;
            fraction *= step;
            if (step - 1.0).abs() < EPSILON {
                break;
            }
        }
        (None, Some((fraction.ln() + log_prefactor).exp().min(1.0)))
    }
}

/// The `probability` quantile of the Gamma(shape, 1) distribution: the `x` with
/// `P(shape, x) = probability`, for `shape > 0` and `0 < probability < 1`.
pub fn gamma_quantile(shape: f64, probability: f64) -> f64 {
    assert!(shape > 0.0, "the shape must be positive");
    assert!(
        probability > 0.0 && probability < 1.0,
        "the probability must be inside (0, 1)"
    );
    // Wilson–Hilferty's normal approximation as the start, then Newton inside a bracket.
    // Only the starting point of the Newton steps: its accuracy does not limit theirs.
    let z = crate::tail::normal_quantile(probability);
    let cube = 1.0 - 1.0 / (9.0 * shape) + z / (3.0 * shape.sqrt());
    let mut x = if cube > 0.0 {
        shape * cube * cube * cube
    } else {
        // Small shapes far in the lower tail: P(a, x) ≈ x^a / Γ(a + 1).
        (probability.ln() + ln_gamma(shape + 1.0))
            .exp()
            .powf(1.0 / shape)
    };
    let (mut low, mut high) = (0.0_f64, f64::INFINITY);
    for _ in 0..200 {
        // P(x) − p, from Q in the upper half so that 1 − p keeps its digits.
        let value = if probability > 0.5 {
            (1.0 - probability) - regularized_upper_gamma(shape, x)
        } else {
            regularized_lower_gamma(shape, x) - probability
        };
        if value == 0.0 {
            return x;
        }
        if value < 0.0 {
            low = low.max(x);
        } else {
            high = high.min(x);
        }
        let density = ((shape - 1.0) * x.ln() - x - ln_gamma(shape)).exp();
        let mut next = x - value / density;
        if !next.is_finite() || next <= low || next >= high {
            // Newton left the bracket: bisect (or grow the bracket while it is open above).
            next = if high.is_finite() {
                0.5 * (low + high)
            } else {
                2.0 * x.max(1.0)
            };
        }
        if (next - x).abs() <= 4.0 * f64::EPSILON * x.abs() {
            return next;
        }
        x = next;
    }
    x
}

/// The `probability` quantile of the chi-squared distribution with `degrees_of_freedom` (> 0).
pub fn chi_squared_quantile(degrees_of_freedom: f64, probability: f64) -> f64 {
    2.0 * gamma_quantile(degrees_of_freedom / 2.0, probability)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantiles computed with mpmath (40 digits: bisection on `gammainc(a, 0, x,
    /// regularized=True)`), as (degrees of freedom, probability, χ² quantile).
    #[allow(clippy::excessive_precision)] // the digits as mpmath printed them
    const REFERENCE: &[(f64, f64, f64)] = &[
        (2.0, 0.05, 0.102_586_588_775_101_07),
        (2.0, 0.95, 5.991_464_547_107_980_2),
        (4.0, 0.05, 0.710_723_021_397_324_1),
        (4.0, 0.95, 9.487_729_036_781_154_6),
        (20.0, 0.05, 10.850_811_394_182_585),
        (20.0, 0.95, 31.410_432_844_230_923),
        (22.0, 0.05, 12.338_014_578_790_645),
        (22.0, 0.95, 33.924_438_471_443_799),
        (200.0, 0.05, 168.278_554_436_628_4),
        (200.0, 0.95, 233.994_268_892_324_92),
        (2000.0, 0.05, 1_897.119_698_767_302_3),
        (2000.0, 0.95, 2_105.154_236_164_641_1),
        (2_000_000.0, 0.05, 1_996_711.430_167_435_6),
        (2_000_000.0, 0.95, 2_003_290.843_890_380_2),
    ];

    #[test]
    fn quantiles_match_mpmath() {
        for &(degrees, probability, expected) in REFERENCE {
            let got = chi_squared_quantile(degrees, probability);
            assert!(
                ((got - expected) / expected).abs() < 1e-10,
                "χ²({degrees}) quantile {probability}: {got}, expected {expected}"
            );
        }
    }

    #[test]
    fn two_degrees_of_freedom_are_an_exponential() {
        // χ²(2) is Exp(1/2): the quantile is −2 ln(1 − p), for any p.
        for probability in [1e-9_f64, 0.001, 0.05, 0.5, 0.95, 0.999, 1.0 - 1e-9] {
            let expected = -2.0 * (-probability).ln_1p();
            let got = chi_squared_quantile(2.0, probability);
            assert!(
                ((got - expected) / expected).abs() < 1e-9,
                "p {probability}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn the_incomplete_gamma_function_is_the_poisson_tail_for_integer_shapes() {
        // P(k, x) = P(Poisson(x) ≥ k) = 1 − e^{−x} Σ_{i<k} x^i / i!.
        for k in [1_u32, 2, 5, 17, 60] {
            for x in [0.3, 1.0, 4.5, 16.0, 42.0, 75.0] {
                let mut term = 1.0;
                let mut sum = 0.0;
                for i in 0..k {
                    if i > 0 {
                        term *= x / f64::from(i);
                    }
                    sum += term;
                }
                let expected = 1.0 - (-x).exp() * sum;
                let got = regularized_lower_gamma(f64::from(k), x);
                assert!(
                    (got - expected).abs() < 1e-12,
                    "P({k}, {x}): {got} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut factorial = 1.0_f64;
        for n in 1..30_u32 {
            factorial *= f64::from(n);
            let got = ln_gamma(f64::from(n) + 1.0);
            assert!(
                (got - factorial.ln()).abs() < 1e-12 * factorial.ln().max(1.0),
                "{n}"
            );
        }
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-14);
    }
}
