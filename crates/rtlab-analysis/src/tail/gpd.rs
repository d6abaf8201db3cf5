//! The Generalized Pareto distribution: maximum-likelihood fit and profile-likelihood intervals.
//!
//! Pickands–Balkema–de Haan: above a high enough threshold `u`, the excesses `y = x − u` of almost
//! any distribution follow a GPD with scale σ and shape ξ, `P(Y > y) = (1 + ξy/σ)^(−1/ξ)`
//! (`exp(−y/σ)` at ξ = 0). ξ > 0 is a heavy (Pareto-like) tail, ξ = 0 exponential-like, ξ < 0 a
//! bounded one. Data are weighted (value, count) pairs because they come from a histogram.
//!
//! The fit maximises the likelihood through Grimshaw's (1993) reduction to one dimension: for
//! θ = ξ/σ the best ξ is the mean of ln(1 + θy), so only θ is searched. The confidence interval
//! of a quantile is the profile-likelihood interval (Coles 2001, §4.3.3): the set of quantile
//! values whose best likelihood, re-fitting ξ with σ tied to the quantile, stays within
//! χ²₁(1 − α)/2 of the maximum. It is asymmetric, as extrapolated quantiles are, and it can be
//! unbounded above, which the caller reports instead of a number.

/// Smallest and largest shape the fit considers. Below −0.5 the MLE is not regular (Smith 1985);
/// above 2 the tail has no mean and extrapolation is meaningless.
pub const XI_MIN: f64 = -0.5;
pub const XI_MAX: f64 = 2.0;
const XI_ZERO: f64 = 1e-9;

/// Excesses over a threshold, sorted ascending, with their multiplicities.
#[derive(Clone, Debug, PartialEq)]
pub struct Excesses {
    pub values: Vec<f64>,
    pub counts: Vec<f64>,
    pub total: f64,
    pub mean: f64,
    pub max: f64,
}

impl Excesses {
    /// From `(excess, count)` pairs with excess > 0 (any order); None when empty.
    pub fn new(mut pairs: Vec<(f64, f64)>) -> Option<Excesses> {
        pairs.retain(|(value, count)| *value > 0.0 && *count > 0.0 && value.is_finite());
        if pairs.is_empty() {
            return None;
        }
        pairs.sort_by(|left, right| left.0.total_cmp(&right.0));
        let total: f64 = pairs.iter().map(|(_, count)| count).sum();
        let mean = pairs
            .iter()
            .map(|(value, count)| value * count)
            .sum::<f64>()
            / total;
        let max = pairs.last().map(|(value, _)| *value).unwrap_or(0.0);
        let (values, counts) = pairs.into_iter().unzip();
        Some(Excesses {
            values,
            counts,
            total,
            mean,
            max,
        })
    }
}

/// A fitted GPD.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpdFit {
    pub sigma: f64,
    pub xi: f64,
    pub log_likelihood: f64,
}

/// `P(Y ≤ y)` for the GPD.
pub fn cdf(y: f64, sigma: f64, xi: f64) -> f64 {
    if y <= 0.0 {
        return 0.0;
    }
    if xi.abs() < XI_ZERO {
        return -(-y / sigma).exp_m1();
    }
    let base = 1.0 + xi * y / sigma;
    if base <= 0.0 {
        return 1.0;
    }
    1.0 - base.powf(-1.0 / xi)
}

/// `P(Y > y)` for the GPD, computed without cancellation.
pub fn survival(y: f64, sigma: f64, xi: f64) -> f64 {
    if y <= 0.0 {
        return 1.0;
    }
    if xi.abs() < XI_ZERO {
        return (-y / sigma).exp();
    }
    let base = 1.0 + xi * y / sigma;
    if base <= 0.0 {
        return 0.0;
    }
    base.powf(-1.0 / xi)
}

/// The excess exceeded with probability `tail_probability` (conditional on exceeding the threshold).
pub fn excess_quantile(tail_probability: f64, sigma: f64, xi: f64) -> f64 {
    if xi.abs() < XI_ZERO {
        return sigma * (1.0 / tail_probability).ln();
    }
    sigma / xi * (tail_probability.powf(-xi) - 1.0)
}

/// Weighted log-likelihood; −∞ outside the parameter space or the support.
pub fn log_likelihood(data: &Excesses, sigma: f64, xi: f64) -> f64 {
    if sigma.is_nan() || sigma <= 0.0 || !sigma.is_finite() {
        return f64::NEG_INFINITY;
    }
    if xi < 0.0 && data.max >= -sigma / xi {
        return f64::NEG_INFINITY;
    }
    let log_sigma = sigma.ln();
    if xi.abs() < XI_ZERO {
        return -data.total * log_sigma - data.mean * data.total / sigma;
    }
    let factor = 1.0 + 1.0 / xi;
    -data.total * log_sigma - factor * sum_log_1p(data, xi / sigma)
}

/// Terms of [`sum_log_1p`] multiplied together before one logarithm is taken.
const LOG_GROUP: usize = 8;

/// `Σ countᵢ · ln(1 + r·yᵢ)`, the sum every likelihood evaluation makes, with one `ln_1p` per
/// `LOG_GROUP` (8) terms instead of one per term: the interval searches evaluate it tens of
/// thousands of times per run, and `ln_1p` was two thirds of their time (BENCHMARKS.md, probe
/// cost). A group is carried as `u = Π(1 + r·yᵢ)^countᵢ − 1` (see `times_m1`), whose updates
/// add parts of one sign, so nothing cancels and small terms keep their relative precision as
/// `ln_1p` does; a group is closed when `1 + u` falls to one half (its logarithm would start
/// to lose digits) or grows past 1e64, and a term whose power alone would do either is taken
/// on its own.
pub fn sum_log_1p(data: &Excesses, ratio: f64) -> f64 {
    // LANES groups run side by side over interleaved terms: each update waits for the last one
    // of its own group only, so the additions overlap instead of queueing.
    let mut sum = 0.0;
    let mut groups = [0.0_f64; LANES];
    let mut members = 0usize;
    let mut values = data.values.chunks_exact(LANES);
    let mut counts = data.counts.chunks_exact(LANES);
    for (values, counts) in (&mut values).zip(&mut counts) {
        for lane in 0..LANES {
            let term = ratio * values[lane];
            let count = counts[lane];
            // The common case first: a single sample, inside the support.
            if count == 1.0 && term > -1.0 && term <= 1e64 {
                groups[lane] = times_m1(groups[lane], term);
                continue;
            }
            let power = power_m1(term, count);
            if keeps_precision(power) {
                groups[lane] = times_m1(groups[lane], power);
            } else {
                sum += count * term.ln_1p();
            }
        }
        members += 1;
        for group in &mut groups {
            if members == LOG_GROUP || !keeps_precision(*group) {
                sum += group.ln_1p();
                *group = 0.0;
            }
        }
        if members == LOG_GROUP {
            members = 0;
        }
    }
    for (value, count) in values.remainder().iter().zip(counts.remainder()) {
        sum += count * (ratio * value).ln_1p();
    }
    sum + groups.iter().map(|group| group.ln_1p()).sum::<f64>()
}

/// Whether a group `u` may take another term: `1 + u` at least one half (its logarithm keeps
/// its digits) and `u` at most 1e64 (the product stays far from overflow).
fn keeps_precision(u: f64) -> bool {
    (-0.5..=1e64).contains(&u)
}

/// Independent groups [`sum_log_1p`] interleaves.
const LANES: usize = 4;

/// `(1 + u)(1 + v) − 1` without forming `1 + u`: `u + v·(1 + u)`, both parts of `v`'s sign
/// when `u` and `v` share theirs (all terms of one sum do: the sign of `r`).
fn times_m1(u: f64, v: f64) -> f64 {
    u + v * (1.0 + u)
}

/// `(1 + t)^count − 1` by squaring in the same form (`(1 + v)² − 1 = v·(2 + v)`); NaN for a
/// count that is not a small whole number or a term at or below −1 (outside the support), which
/// sends the term to `ln_1p` as before.
fn power_m1(term: f64, count: f64) -> f64 {
    if term.is_nan() || term <= -1.0 {
        return f64::NAN;
    }
    let exponent = count as u64;
    if !((1.0..=1e6).contains(&count) && exponent as f64 == count) {
        return f64::NAN;
    }
    let mut exponent = exponent;
    let mut base = term;
    let mut result = 0.0;
    while exponent > 0 {
        if exponent & 1 == 1 {
            result = times_m1(result, base);
        }
        exponent >>= 1;
        if exponent > 0 {
            base *= 2.0 + base;
        }
    }
    result
}

/// ξ(θ) = mean ln(1 + θy) and the profile log-likelihood at θ (Grimshaw).
fn grimshaw_profile(data: &Excesses, theta: f64) -> Option<(f64, f64)> {
    grimshaw_point(data, theta).ok()
}

/// Why [`grimshaw_point`] has no value at θ: `Beyond` when every θ farther from 0 on the same
/// side has none either (ξ(θ) grows with θ, so ξ past `XI_MAX` above 0, or below `XI_MIN` or
/// out of the support below 0, stays there farther out).
#[derive(Clone, Copy, Debug, PartialEq)]
enum NoProfile {
    Beyond,
    Inadmissible,
}

/// [`grimshaw_profile`], saying when θ's farther out on the same side need not be tried.
fn grimshaw_point(data: &Excesses, theta: f64) -> Result<(f64, f64), NoProfile> {
    if theta.abs() < 1e-12 / data.mean {
        return Ok((0.0, -data.total * data.mean.ln() - data.total));
    }
    if theta * data.max <= -1.0 {
        return Err(NoProfile::Beyond);
    }
    let xi = sum_log_1p(data, theta) / data.total;
    if (theta > 0.0 && xi > XI_MAX) || (theta < 0.0 && xi < XI_MIN) {
        return Err(NoProfile::Beyond);
    }
    let sigma = xi / theta;
    if sigma.is_nan() || sigma <= 0.0 || !(XI_MIN..=XI_MAX).contains(&xi) {
        return Err(NoProfile::Inadmissible);
    }
    Ok((xi, -data.total * sigma.ln() - data.total * (1.0 + xi)))
}

/// The profile at every point of the sorted θ `grid` (None where it has none), walking out from
/// 0 on either side and stopping where [`NoProfile::Beyond`] says the rest of that side has none:
/// about half the grid of a light or exponential tail is skipped, with the same values.
fn profile_on_grid(data: &Excesses, grid: &[f64]) -> Vec<Option<f64>> {
    let mut values = vec![None; grid.len()];
    let split = grid.partition_point(|theta| *theta < 0.0);
    for index in split..grid.len() {
        match grimshaw_point(data, grid[index]) {
            Ok((_, value)) => values[index] = Some(value),
            Err(NoProfile::Beyond) => break,
            Err(NoProfile::Inadmissible) => {}
        }
    }
    for index in (0..split).rev() {
        match grimshaw_point(data, grid[index]) {
            Ok((_, value)) => values[index] = Some(value),
            Err(NoProfile::Beyond) => break,
            Err(NoProfile::Inadmissible) => {}
        }
    }
    values
}

/// Golden-section maximisation of `objective` on [low, high].
fn golden_maximum(
    mut low: f64,
    mut high: f64,
    iterations: usize,
    objective: impl Fn(f64) -> f64,
) -> (f64, f64) {
    const RATIO: f64 = 0.618_033_988_749_894_8;
    let mut left = high - RATIO * (high - low);
    let mut right = low + RATIO * (high - low);
    let mut left_value = objective(left);
    let mut right_value = objective(right);
    for _ in 0..iterations {
        if left_value >= right_value {
            high = right;
            right = left;
            right_value = left_value;
            left = high - RATIO * (high - low);
            left_value = objective(left);
        } else {
            low = left;
            left = right;
            left_value = right_value;
            right = low + RATIO * (high - low);
            right_value = objective(right);
        }
    }
    if left_value >= right_value {
        (left, left_value)
    } else {
        (right, right_value)
    }
}

/// Maximum-likelihood GPD fit; None when no admissible parameters exist (e.g. all excesses equal).
pub fn fit(data: &Excesses) -> Option<GpdFit> {
    if data.total < 2.0 || data.max <= 0.0 {
        return None;
    }
    let grid = theta_grid(data);
    let mut best: Option<(usize, f64)> = None;
    for (index, value) in profile_on_grid(data, &grid).into_iter().enumerate() {
        if let Some(value) = value {
            if best.is_none_or(|(_, best_value)| value > best_value) {
                best = Some((index, value));
            }
        }
    }
    let (index, grid_value) = best?;
    let low = grid[index.saturating_sub(1)];
    let high = grid[(index + 1).min(grid.len() - 1)];
    let profile =
        |theta: f64| grimshaw_profile(data, theta).map_or(f64::NEG_INFINITY, |(_, value)| value);
    let refined = if high > low {
        golden_maximum(low, high, 60, profile)
    } else {
        (grid[index], grid_value)
    };
    // The better of the refined θ and the best grid point (the grid point on a tie), from the
    // values already computed.
    let theta = if grid_value.total_cmp(&refined.1).is_ge() {
        grid[index]
    } else {
        refined.0
    };
    fit_at(data, theta)
}

/// The θ grid a fit starts from: the negative side approaches −1/max (bounded tails), the
/// positive side spans heavy tails; sorted.
fn theta_grid(data: &Excesses) -> Vec<f64> {
    let mut grid: Vec<f64> = Vec::with_capacity(64);
    for step in 0..24 {
        let fraction = 1.0 - 10f64.powf(-0.125 * f64::from(step + 1));
        grid.push(-fraction / data.max);
    }
    for step in 0..12 {
        grid.push(-(10f64.powf(-3.0 + 0.25 * f64::from(step))) / data.max);
    }
    grid.push(0.0);
    for step in 0..33 {
        grid.push(10f64.powf(-3.0 + 0.25 * f64::from(step)) / data.mean);
    }
    grid.sort_by(f64::total_cmp);
    grid
}

/// The fit at θ (Grimshaw's reduction: ξ from θ's profile, σ = ξ/θ); None when the likelihood
/// there is not finite.
fn fit_at(data: &Excesses, theta: f64) -> Option<GpdFit> {
    let (xi, _) = grimshaw_profile(data, theta)?;
    let sigma = if theta.abs() < 1e-12 / data.mean {
        data.mean
    } else {
        xi / theta
    };
    let log_likelihood = log_likelihood(data, sigma, xi);
    if !log_likelihood.is_finite() {
        return None;
    }
    Some(GpdFit {
        sigma,
        xi,
        log_likelihood,
    })
}

/// σ that makes `excess` the quantile of conditional tail probability `tail_probability`.
fn sigma_for_quantile(excess: f64, tail_probability: f64, xi: f64) -> f64 {
    if xi.abs() < XI_ZERO {
        excess / (1.0 / tail_probability).ln()
    } else {
        xi * excess / (tail_probability.powf(-xi) - 1.0)
    }
}

/// Steps of the ξ grid a profile likelihood starts from (the grid has one more point).
const PROFILE_GRID_STEPS: usize = 30;

/// ξ at grid point `step` of a profile likelihood.
fn profile_grid_xi(step: usize) -> f64 {
    XI_MIN + (XI_MAX - XI_MIN) / PROFILE_GRID_STEPS as f64 * step as f64
}

/// Best log-likelihood with the quantile of conditional tail probability `tail_probability` fixed
/// at `excess` (ξ re-fitted over [XI_MIN, XI_MAX]).
pub fn profile_log_likelihood(data: &Excesses, excess: f64, tail_probability: f64) -> f64 {
    let objective =
        |xi: f64| log_likelihood(data, sigma_for_quantile(excess, tail_probability, xi), xi);
    let mut grid = [f64::NEG_INFINITY; PROFILE_GRID_STEPS + 1];
    for (step, value) in grid.iter_mut().enumerate() {
        *value = objective(profile_grid_xi(step));
    }
    refine_profile(&grid, objective)
}

/// The profile's maximum from its values on the grid: the best grid point, refined by 20
/// golden steps between its neighbours.
fn refine_profile(grid: &[f64], objective: impl Fn(f64) -> f64) -> f64 {
    let mut best = (0usize, f64::NEG_INFINITY);
    for (step, value) in grid.iter().enumerate() {
        if *value > best.1 {
            best = (step, *value);
        }
    }
    if !best.1.is_finite() {
        return f64::NEG_INFINITY;
    }
    let width = (XI_MAX - XI_MIN) / PROFILE_GRID_STEPS as f64;
    let center = profile_grid_xi(best.0);
    let low = (center - width).max(XI_MIN);
    let high = (center + width).min(XI_MAX);
    // 20 golden steps narrow the bracket (two grid steps, 0.17) to 1e-5 in ξ, where the
    // likelihood is flat to far below the interval's cut-off precision.
    let (_, refined) = golden_maximum(low, high, 20, objective);
    refined.max(best.1)
}

/// Whether `profile_log_likelihood(data, excess, tail_probability) >= cutoff`, always with the
/// same answer, but cheaper: the grid is walked outward from the grid point nearest `near_xi`
/// (the fitted ξ, where the profile of a quantile inside the interval peaks), and the first
/// grid value at or above the cut-off decides (the profile's maximum is at least every grid
/// value). Only a quantile outside the interval pays for the whole grid and the refinement.
/// An interval's bisection asks this about 45 times per quantile, half of them inside, and the
/// projection at the end of a run was most of rtlab's fixed cost (BENCHMARKS.md, probe cost).
pub fn profile_reaches(
    data: &Excesses,
    excess: f64,
    tail_probability: f64,
    cutoff: f64,
    near_xi: f64,
) -> bool {
    let objective =
        |xi: f64| log_likelihood(data, sigma_for_quantile(excess, tail_probability, xi), xi);
    let width = (XI_MAX - XI_MIN) / PROFILE_GRID_STEPS as f64;
    let start = ((near_xi - XI_MIN) / width)
        .round()
        .clamp(0.0, PROFILE_GRID_STEPS as f64) as usize;
    let mut grid = [f64::NEG_INFINITY; PROFILE_GRID_STEPS + 1];
    for distance in 0..=PROFILE_GRID_STEPS {
        let below = start.checked_sub(distance);
        let above =
            Some(start + distance).filter(|step| distance > 0 && *step <= PROFILE_GRID_STEPS);
        for step in [below, above].into_iter().flatten() {
            let value = objective(profile_grid_xi(step));
            if value >= cutoff {
                return true;
            }
            grid[step] = value;
        }
    }
    refine_profile(&grid, objective) >= cutoff
}

/// A quantile estimate with its interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileInterval {
    pub excess: f64,
    pub low: f64,
    /// None when the likelihood does not bound the quantile from above.
    pub high: Option<f64>,
}

/// χ²₁ quantile for a two-sided interval at `confidence` (0.90, 0.95, 0.99 supported exactly;
/// others by the Wilson–Hilferty approximation).
pub fn chi_square_one(confidence: f64) -> f64 {
    if (confidence - 0.95).abs() < 1e-9 {
        3.841_458_820_694_124
    } else if (confidence - 0.90).abs() < 1e-9 {
        2.705_543_454_095_404
    } else if (confidence - 0.99).abs() < 1e-9 {
        6.634_896_601_021_214
    } else {
        let z = super::normal_quantile(0.5 + confidence / 2.0);
        z * z
    }
}

/// How closely the interval's ends are bisected, in log space: 1e-6 is a relative error of 1e-4 %,
/// far below what is printed or what the data support. Each step costs a profile likelihood (61
/// likelihood evaluations over every excess), and a run's projection is most of what rtlab costs
/// after measuring, so no step is spent beyond this (BENCHMARKS.md, probe cost).
const INTERVAL_LOG_TOLERANCE: f64 = 1e-6;

/// Answers a bisection's "inside the interval?" questions about one end of an interval, from
/// the exact test where needed and from earlier answers where they settle it: the set is an
/// interval around the estimate, so a point no farther out than a point known inside is inside
/// and one no nearer than a point known outside is outside. Fed with the test's answers at two
/// points close around the end (see [`locate_edge`]), a bisection of 25 steps then asks the
/// exact test once or twice instead of 25 times, and ends where it always did: each of its
/// steps gets the answer the exact test would give, as long as the set is an interval (test
/// `edge_search_equals_plain_bisection`).
pub struct EdgeOracle<F> {
    inside: f64,
    outside: f64,
    /// +1 when the end is above the known inside point, −1 when below.
    direction: f64,
    test: F,
}

impl<F: FnMut(f64) -> bool> EdgeOracle<F> {
    /// `inside` is a point known inside (the estimate); the end lies in `direction` (±1) from it.
    pub fn new(inside: f64, direction: f64, test: F) -> EdgeOracle<F> {
        EdgeOracle {
            inside,
            outside: direction * f64::INFINITY,
            direction,
            test,
        }
    }

    /// Whether `point` is inside, from what is known or else from the exact test.
    pub fn is_inside(&mut self, point: f64) -> bool {
        if (point - self.inside) * self.direction <= 0.0 {
            return true;
        }
        if (point - self.outside) * self.direction >= 0.0 {
            return false;
        }
        let answer = (self.test)(point);
        if answer {
            self.inside = point;
        } else {
            self.outside = point;
        }
        answer
    }

    /// Asks the exact test just inside and just outside `guess` (± `width`, widened 16-fold
    /// while the answer is not the expected one, up to 5 times), so that later questions away
    /// from the end are answered without it.
    pub fn settle_near(&mut self, guess: Option<f64>, width: f64) {
        if let Some(guess) = guess.filter(|guess| guess.is_finite()) {
            let mut reach = width;
            for _ in 0..6 {
                if self.is_inside(guess - self.direction * reach) {
                    break;
                }
                reach *= 16.0;
            }
            reach = width;
            for _ in 0..6 {
                if !self.is_inside(guess + self.direction * reach) {
                    break;
                }
                reach *= 16.0;
            }
        }
    }
}

/// The boundary between `outside` (not in the set) and `inside_point` (in it), bisected until
/// the two are at most `tolerance` apart; the last point found inside. With `inside` answered
/// by an [`EdgeOracle`], each step costs a test only near the boundary.
pub fn bisect_boundary(
    outside: f64,
    inside_point: f64,
    tolerance: f64,
    inside: &mut dyn FnMut(f64) -> bool,
) -> f64 {
    let (mut out, mut within) = (outside, inside_point);
    while (out - within).abs() > tolerance {
        let middle = 0.5 * (out + within);
        if inside(middle) {
            within = middle;
        } else {
            out = middle;
        }
    }
    within
}

/// How far [`locate_edge`] narrows an end before handing it to the exact test: a tenth of the
/// bisections' final step, so that the two exact answers around it settle all but the last one
/// or two steps.
const EDGE_LOCATE_TOLERANCE: f64 = 1e-7;

/// At most this many regula falsi steps in [`locate_edge`]: a stand-in that converges slowly
/// leaves the rest to the exact test, which is what it would cost without the hint.
const LOCATE_STEPS: usize = 16;

/// Where `gap` (a continuous stand-in for "how far inside": ≥ 0 inside, < 0 or NaN outside)
/// changes sign, searched outward from `start` (inside) in `direction`, at most `reach` away.
/// Steps out by doubling until outside, then Illinois regula falsi (bisecting while the outer
/// value is not finite). None when no outside point is within reach. This is only a hint for
/// [`EdgeOracle::settle_near`]: a poor one costs exact tests, never a different answer.
pub fn locate_edge(
    start: f64,
    direction: f64,
    reach: f64,
    mut gap: impl FnMut(f64) -> f64,
) -> Option<f64> {
    let mut inner = (start, gap(start));
    if !gap_is_inside(inner.1) {
        return None;
    }
    let mut step = 0.05;
    let mut outer = loop {
        if step > reach {
            return None;
        }
        let point = start + direction * step;
        let value = gap(point);
        if !gap_is_inside(value) {
            break (point, value);
        }
        inner = (point, value);
        step *= 2.0;
    };
    let mut kept_outer = 0u32;
    for _ in 0..LOCATE_STEPS {
        if (outer.0 - inner.0).abs() <= EDGE_LOCATE_TOLERANCE {
            break;
        }
        let point = if outer.1.is_finite() && outer.1 < inner.1 {
            let secant = inner.0 - inner.1 * (outer.0 - inner.0) / (outer.1 - inner.1);
            let (low, high) = if inner.0 < outer.0 {
                (inner.0, outer.0)
            } else {
                (outer.0, inner.0)
            };
            if secant > low && secant < high {
                secant
            } else {
                0.5 * (inner.0 + outer.0)
            }
        } else {
            0.5 * (inner.0 + outer.0)
        };
        let value = gap(point);
        if value >= 0.0 {
            inner = (point, value);
            kept_outer += 1;
            if kept_outer >= 2 && outer.1.is_finite() {
                outer.1 *= 0.5;
            }
        } else {
            outer = (point, value);
            kept_outer = 0;
        }
    }
    Some(0.5 * (inner.0 + outer.0))
}

/// A `gap` value of [`locate_edge`] inside the interval (NaN is not).
fn gap_is_inside(value: f64) -> bool {
    value >= 0.0
}

/// A continuous, cheap stand-in for [`profile_log_likelihood`] while searching an end: the best
/// log-likelihood over ξ near `warm_xi` (20 golden steps over ±0.15), which it moves to the best
/// ξ found, as the profile's peak moves slowly along the quantile.
pub fn profile_near(data: &Excesses, excess: f64, tail_probability: f64, warm_xi: &mut f64) -> f64 {
    let objective =
        |xi: f64| log_likelihood(data, sigma_for_quantile(excess, tail_probability, xi), xi);
    let low = (*warm_xi - 0.15).max(XI_MIN);
    let high = (*warm_xi + 0.15).min(XI_MAX);
    let (xi, value) = golden_maximum(low, high, 20, objective);
    if value.is_finite() {
        *warm_xi = xi;
    }
    value
}

/// The quantile of conditional tail probability `tail_probability` and its profile-likelihood
/// interval at `confidence`. Each end is bisected in log space as it always was, with the
/// answers given by an [`EdgeOracle`] settled around the end that [`locate_edge`] finds on
/// [`profile_near`], so most steps need no profile likelihood (BENCHMARKS.md, probe cost).
pub fn quantile_interval(
    data: &Excesses,
    fitted: &GpdFit,
    tail_probability: f64,
    confidence: f64,
) -> QuantileInterval {
    let (estimate, cutoff, exact) = interval_test(data, fitted, tail_probability, confidence);
    let mut warm_xi = fitted.xi;
    let mut gap = |log_excess: f64| {
        profile_near(data, log_excess.exp(), tail_probability, &mut warm_xi) - cutoff
    };
    let top = estimate.ln();
    // Lower end: between a vanishing excess (likelihood → −∞) and the estimate, in log space.
    let mut lower = EdgeOracle::new(top, -1.0, exact);
    let floor = (estimate * 1e-9).ln();
    lower.settle_near(
        locate_edge(top, -1.0, top - floor, &mut gap),
        EDGE_LOCATE_TOLERANCE,
    );
    // Upper end: found the same way, with the profile warm-started afresh from the fitted ξ.
    warm_xi = fitted.xi;
    let mut upper = EdgeOracle::new(top, 1.0, exact);
    let reach = 24.0 * std::f64::consts::LN_2;
    upper.settle_near(
        locate_edge(top, 1.0, reach, |log_excess: f64| {
            profile_near(data, log_excess.exp(), tail_probability, &mut warm_xi) - cutoff
        }),
        EDGE_LOCATE_TOLERANCE,
    );
    bisect_interval(
        estimate,
        |log_excess| lower.is_inside(log_excess),
        |log_excess| upper.is_inside(log_excess),
    )
}

/// The quantile's estimate, the profile log-likelihood cut-off of its interval at `confidence`,
/// and the exact test of whether a log excess lies inside that interval.
fn interval_test<'a>(
    data: &'a Excesses,
    fitted: &'a GpdFit,
    tail_probability: f64,
    confidence: f64,
) -> (f64, f64, impl Fn(f64) -> bool + Copy + 'a) {
    let estimate = excess_quantile(tail_probability, fitted.sigma, fitted.xi);
    let cutoff = fitted.log_likelihood - chi_square_one(confidence) / 2.0;
    let exact = move |log_excess: f64| {
        profile_reaches(data, log_excess.exp(), tail_probability, cutoff, fitted.xi)
    };
    (estimate, cutoff, exact)
}

/// Both ends of a quantile's interval, bisected in log space: the lower end between a vanishing
/// excess (1e-9 of the estimate; the likelihood → −∞) and the estimate; the upper end doubled
/// until outside, then bisected, giving up beyond 2^24 times the estimate. `lower_inside` and
/// `upper_inside` say whether a log excess lies inside the interval.
fn bisect_interval(
    estimate: f64,
    mut lower_inside: impl FnMut(f64) -> bool,
    mut upper_inside: impl FnMut(f64) -> bool,
) -> QuantileInterval {
    let mut below = (estimate * 1e-9).ln();
    let mut above = estimate.ln();
    while above - below > INTERVAL_LOG_TOLERANCE {
        let middle = 0.5 * (below + above);
        if lower_inside(middle) {
            above = middle;
        } else {
            below = middle;
        }
    }
    let low = above.exp();
    let mut inner = estimate.ln();
    let mut outer = None;
    for doubling in 1..=24 {
        let candidate = estimate.ln() + f64::from(doubling) * std::f64::consts::LN_2;
        if !upper_inside(candidate) {
            outer = Some(candidate);
            break;
        }
        inner = candidate;
    }
    let high = outer.map(|mut outer| {
        while outer - inner > INTERVAL_LOG_TOLERANCE {
            let middle = 0.5 * (inner + outer);
            if upper_inside(middle) {
                inner = middle;
            } else {
                outer = middle;
            }
        }
        inner.exp()
    });
    QuantileInterval {
        excess: estimate,
        low: low.min(estimate),
        high: high.map(|high| high.max(estimate)),
    }
}

/// The interval as it was computed before [`EdgeOracle`]: every bisection step asks the exact
/// test. Kept as the reference the faster search is tested against.
#[cfg(test)]
fn quantile_interval_plain(
    data: &Excesses,
    fitted: &GpdFit,
    tail_probability: f64,
    confidence: f64,
) -> QuantileInterval {
    let (estimate, _, inside) = interval_test(data, fitted, tail_probability, confidence);
    bisect_interval(estimate, inside, inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_values(values: &[f64]) -> Excesses {
        Excesses::new(values.iter().map(|value| (*value, 1.0)).collect()).unwrap()
    }

    /// Deterministic GPD sample by inverse CDF at evenly spaced probabilities.
    fn gpd_sample(count: usize, sigma: f64, xi: f64) -> Excesses {
        let values: Vec<f64> = (0..count)
            .map(|index| {
                let probability = (index as f64 + 0.5) / count as f64;
                excess_quantile(1.0 - probability, sigma, xi)
            })
            .collect();
        from_values(&values)
    }

    #[test]
    fn recovers_parameters_of_ideal_samples() {
        for (sigma, xi) in [(2.0, 0.3), (1.0, 0.0), (5.0, -0.2), (1.0, 0.8)] {
            let fitted = fit(&gpd_sample(4000, sigma, xi)).unwrap();
            assert!((fitted.xi - xi).abs() < 0.03, "xi {} vs {xi}", fitted.xi);
            assert!(
                (fitted.sigma / sigma - 1.0).abs() < 0.05,
                "sigma {} vs {sigma}",
                fitted.sigma
            );
        }
    }

    #[test]
    fn mle_is_a_maximum() {
        let data = gpd_sample(500, 3.0, 0.2);
        let fitted = fit(&data).unwrap();
        for (delta_sigma, delta_xi) in [(0.05, 0.0), (-0.05, 0.0), (0.0, 0.02), (0.0, -0.02)] {
            let nearby = log_likelihood(
                &data,
                fitted.sigma * (1.0 + delta_sigma),
                fitted.xi + delta_xi,
            );
            assert!(nearby <= fitted.log_likelihood + 1e-6);
        }
    }

    #[test]
    fn distribution_functions_agree() {
        for xi in [-0.3, 0.0, 0.4] {
            let y = excess_quantile(0.01, 2.0, xi);
            assert!((survival(y, 2.0, xi) - 0.01).abs() < 1e-12);
            assert!((cdf(y, 2.0, xi) - 0.99).abs() < 1e-12);
        }
        assert_eq!(survival(100.0, 1.0, -0.5), 0.0);
    }

    #[test]
    fn interval_contains_the_estimate_and_narrows_with_data() {
        let small = gpd_sample(100, 1.0, 0.1);
        let large = gpd_sample(3000, 1.0, 0.1);
        let width = |data: &Excesses| {
            let fitted = fit(data).unwrap();
            let interval = quantile_interval(data, &fitted, 1e-3, 0.95);
            assert!(interval.low <= interval.excess);
            let high = interval.high.expect("bounded");
            assert!(high >= interval.excess);
            high - interval.low
        };
        assert!(width(&large) < width(&small));
    }

    /// The cheap test answers exactly what the full profile likelihood does, inside the
    /// interval, outside it and at its edges, for light, exponential and heavy tails.
    #[test]
    fn profile_reaches_agrees_with_the_full_profile() {
        let mut checked = (0, 0);
        for (sigma, xi) in [(2.0, 0.3), (1.0, 0.0), (5.0, -0.2), (1.0, 0.8)] {
            let data = gpd_sample(300, sigma, xi);
            let fitted = fit(&data).unwrap();
            for probability in [0.5, 1e-2, 1e-4, 1e-7] {
                let estimate = excess_quantile(probability, fitted.sigma, fitted.xi);
                for confidence in [0.90, 0.95, 0.99] {
                    let cutoff = fitted.log_likelihood - chi_square_one(confidence) / 2.0;
                    for step in -40..=40 {
                        let excess = estimate * (f64::from(step) * 0.05).exp();
                        let full = profile_log_likelihood(&data, excess, probability) >= cutoff;
                        for near_xi in [fitted.xi, XI_MIN, XI_MAX, 0.0] {
                            assert_eq!(
                                profile_reaches(&data, excess, probability, cutoff, near_xi),
                                full,
                                "sigma {sigma} xi {xi} p {probability} excess {excess}"
                            );
                        }
                        if full {
                            checked.0 += 1;
                        } else {
                            checked.1 += 1;
                        }
                    }
                }
            }
        }
        assert!(checked.0 > 100 && checked.1 > 100, "{checked:?}");
    }

    /// The term-by-term sum `sum_log_1p` replaces.
    fn sum_log_1p_plain(data: &Excesses, ratio: f64) -> f64 {
        data.values
            .iter()
            .zip(&data.counts)
            .map(|(value, count)| count * (ratio * value).ln_1p())
            .sum()
    }

    proptest::proptest! {
        /// Grouping the logarithms changes the sum by rounding only: within 1e-12 of the sum of
        /// the terms' sizes, for heavy and light tails, repeated values, and ratios up to the
        /// edge of the support (where single terms come close to −1).
        #[test]
        fn grouped_logarithms_equal_the_plain_sum(
            values in proptest::collection::vec((1.0f64..1e6, proptest::sample::select(vec![1.0, 1.0, 1.0, 2.0, 3.0, 17.0, 1000.0])), 1..400),
            reach in -0.999_999f64..1.0,
            scale in proptest::sample::select(vec![1e-12, 1e-6, 1e-3, 1.0, 1e3]),
        ) {
            let data = Excesses::new(values).unwrap();
            // Negative ratios stay inside the support (r·max > −1); positive ones span scales.
            let ratio = if reach < 0.0 { reach / data.max } else { reach * scale / data.max * 1e3 };
            let grouped = sum_log_1p(&data, ratio);
            let plain = sum_log_1p_plain(&data, ratio);
            let size: f64 = data.values.iter().zip(&data.counts)
                .map(|(value, count)| (count * (ratio * value).ln_1p()).abs())
                .sum();
            proptest::prop_assert!(
                (grouped - plain).abs() <= 1e-12 * size + 1e-300,
                "grouped {grouped} plain {plain} (ratio {ratio})"
            );
        }
    }

    #[test]
    fn grouped_logarithms_keep_the_edge_cases() {
        let data = Excesses::new(vec![(1.0, 1.0), (2.0, 3.0), (4.0, 1.0)]).unwrap();
        assert_eq!(sum_log_1p(&data, 0.0), 0.0);
        // At the edge of the support the plain sum is −∞, beyond it NaN; so is the grouped one.
        assert_eq!(sum_log_1p_plain(&data, -0.25), f64::NEG_INFINITY);
        assert_eq!(sum_log_1p(&data, -0.25), f64::NEG_INFINITY);
        assert!(sum_log_1p_plain(&data, -0.5).is_nan());
        assert!(sum_log_1p(&data, -0.5).is_nan());
    }

    /// Random GPD-like samples as a run makes them: values rounded to whole ns (a histogram's
    /// buckets), so many are tied and carry counts.
    fn random_excesses(random: &mut rand::rngs::StdRng) -> Excesses {
        use rand::Rng as _;
        let count = random.gen_range(30..3000);
        let sigma = random.gen_range(200.0..20_000.0);
        let xi = random.gen_range(-0.45..1.2);
        let step = [1.0, 10.0, 100.0][random.gen_range(0..3)];
        let pairs = (0..count)
            .map(|_| {
                let uniform: f64 = random.gen_range(1e-9..1.0);
                let value = excess_quantile(uniform, sigma, xi);
                (((value / step).floor() + 1.0) * step, 1.0)
            })
            .collect();
        Excesses::new(pairs).unwrap()
    }

    /// The fit as it was before the grid walk stopped early: every grid point evaluated, the
    /// candidates compared by evaluating the profile again.
    fn fit_plain(data: &Excesses) -> Option<GpdFit> {
        if data.total < 2.0 || data.max <= 0.0 {
            return None;
        }
        let grid = theta_grid(data);
        let mut best: Option<(usize, f64)> = None;
        for (index, theta) in grid.iter().enumerate() {
            if let Some((_, value)) = grimshaw_profile(data, *theta) {
                if best.is_none_or(|(_, best_value)| value > best_value) {
                    best = Some((index, value));
                }
            }
        }
        let (index, _) = best?;
        let low = grid[index.saturating_sub(1)];
        let high = grid[(index + 1).min(grid.len() - 1)];
        let profile = |theta: f64| {
            grimshaw_profile(data, theta).map_or(f64::NEG_INFINITY, |(_, value)| value)
        };
        let (theta, _) = if high > low {
            golden_maximum(low, high, 60, profile)
        } else {
            (grid[index], profile(grid[index]))
        };
        let candidates = [theta, grid[index]];
        let theta = candidates
            .into_iter()
            .max_by(|left, right| profile(*left).total_cmp(&profile(*right)))
            .unwrap_or(theta);
        fit_at(data, theta)
    }

    /// The fit that skips the grid points beyond ξ's range is bit for bit the one that
    /// evaluated them all, over random tails of every shape (and data no GPD fits).
    #[test]
    fn fit_equals_the_full_grid_fit() {
        use rand::SeedableRng as _;
        let mut random = rand::rngs::StdRng::seed_from_u64(13);
        let mut fitted = 0;
        for _ in 0..300 {
            let data = random_excesses(&mut random);
            let new = fit(&data);
            assert_eq!(new, fit_plain(&data), "{data:?}");
            fitted += usize::from(new.is_some());
        }
        for data in [from_values(&[1.0, 1.0, 1.0]), from_values(&[1.0, 2.0])] {
            assert_eq!(fit(&data), fit_plain(&data));
        }
        assert!(fitted > 250, "{fitted}");
    }

    /// The interval with its ends settled by `EdgeOracle` is bit for bit the one every bisection
    /// step used to ask the full test for, over random light, exponential and heavy tails,
    /// tail probabilities and confidences: the projected figures do not move.
    #[test]
    fn edge_search_equals_plain_bisection() {
        use rand::{Rng as _, SeedableRng as _};
        let mut random = rand::rngs::StdRng::seed_from_u64(10);
        let mut compared = 0;
        for _ in 0..150 {
            let data = random_excesses(&mut random);
            let Some(fitted) = fit(&data) else { continue };
            let probability = 10f64.powf(random.gen_range(-9.0..-0.3));
            let confidence = [0.90, 0.95, 0.99][random.gen_range(0..3)];
            assert_eq!(
                quantile_interval(&data, &fitted, probability, confidence),
                quantile_interval_plain(&data, &fitted, probability, confidence),
                "{} excesses, sigma {} xi {} p {probability} confidence {confidence}",
                data.total,
                fitted.sigma,
                fitted.xi
            );
            compared += 1;
        }
        assert!(compared > 100, "{compared}");
    }

    /// For any interval-shaped set, any hint (good, poor or absent) leaves a bisection's end
    /// where asking the test at every step puts it.
    #[test]
    fn edge_oracle_answers_as_the_test_for_an_interval() {
        use rand::{Rng as _, SeedableRng as _};
        let mut random = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..2000 {
            let direction = if random.gen_bool(0.5) { 1.0 } else { -1.0 };
            let edge: f64 = direction * random.gen_range(0.0..30.0);
            let test = |point: f64| (point - edge) * direction <= 0.0;
            let far = direction * 30.0;
            let bisect = |inside: &mut dyn FnMut(f64) -> bool| {
                bisect_boundary(far, 0.0, INTERVAL_LOG_TOLERANCE, inside)
            };
            let plain = bisect(&mut |point| test(point));
            let kind = random.gen_range(0..3);
            let hint = match kind {
                0 => None,
                1 => Some(edge + random.gen_range(-1e-7..1e-7)),
                _ => Some(edge + random.gen_range(-5.0..5.0)),
            };
            let mut asked = 0;
            let mut oracle = EdgeOracle::new(0.0, direction, |point| {
                asked += 1;
                test(point)
            });
            oracle.settle_near(hint, EDGE_LOCATE_TOLERANCE);
            assert_eq!(bisect(&mut |point| oracle.is_inside(point)), plain);
            if kind == 1 {
                // A close hint leaves at most one of the 25 steps to the test.
                assert!(asked <= 3, "{asked} tests for a close hint");
            }
        }
    }

    #[test]
    fn degenerate_data_do_not_fit() {
        assert!(Excesses::new(vec![]).is_none());
        assert!(fit(&from_values(&[1.0])).is_none());
    }
}
