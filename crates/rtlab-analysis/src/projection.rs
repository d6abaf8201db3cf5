//! The tail projection as a forecast input: `P(latency > slack)` beyond the observed data.
//!
//! A forecast inside the data counts late wake-ups; beyond the largest one the histogram is silent.
//! The peaks-over-threshold fit of [`crate::tail`] (a Generalized Pareto distribution above a
//! threshold chosen by the Anderson–Darling test) extends it: `P(X > x) = ζ · S(x − u)` with `ζ` the
//! fraction of samples above the threshold `u` and `S` the GPD survival function. The interval is
//! the profile-likelihood interval of the conditional tail probability at that `x` (the set of
//! probabilities whose constrained fit stays within the χ²₁ cutoff of the best fit), scaled by `ζ`;
//! the binomial uncertainty of `ζ` itself is small beside it and is not added. Where the fit is
//! refused, the forecast gets no projection and says the slack is beyond what the data supports.

use crate::forecast::{Exceedance, TailModel, CONFIDENCE};
use crate::tail::gpd;
use crate::tail::{fit_tail, PotFit, TailConfig};
use rtlab_core::LatencyHistogram;
use std::cmp::Ordering;

/// A fitted tail, ready to answer exceedance questions.
#[derive(Clone, Debug)]
pub struct ProjectedTail {
    fit: PotFit,
}

impl ProjectedTail {
    /// Fits the tail of `histogram`; the error says why no projection is possible.
    pub fn fit(histogram: &LatencyHistogram) -> Result<ProjectedTail, String> {
        let config = TailConfig {
            confidence: CONFIDENCE,
            ..TailConfig::default()
        };
        fit_tail(histogram, &config).map(|fit| ProjectedTail { fit })
    }

    pub fn pot_fit(&self) -> &PotFit {
        &self.fit
    }

    /// The excess over the threshold and the conditional tail probability there, or `None`
    /// where the projection does not apply: below the threshold, or beyond the fitted
    /// distribution's upper end point (where the fit claims "never", more than it can know).
    fn conditional(&self, threshold_ns: u64) -> Option<(f64, f64)> {
        let excess = threshold_ns as f64 - self.fit.threshold_ns;
        if excess <= 0.0 {
            return None;
        }
        let conditional = gpd::survival(excess, self.fit.gpd.sigma, self.fit.gpd.xi);
        (conditional > 0.0 && conditional < 1.0).then_some((excess, conditional))
    }
}

/// The log likelihood a probability's constrained fit must reach to be inside the interval.
fn cutoff(fit: &PotFit) -> f64 {
    fit.gpd.log_likelihood - gpd::chi_square_one(CONFIDENCE) / 2.0
}

/// Where an interval's ends are searched, in log conditional probability around the estimate
/// `centre`: down to 10^-12 of it (inside there means "not bounded below"), up to just below 1.
fn search_limits(centre: f64) -> (f64, f64) {
    (
        centre - 12.0 * std::f64::consts::LN_10,
        (1.0 - 1e-9_f64).ln(),
    )
}

impl TailModel for ProjectedTail {
    fn exceedance(&self, threshold_ns: u64) -> Option<Exceedance> {
        let (excess, conditional) = self.conditional(threshold_ns)?;
        let rate = self.fit.exceedance_rate();
        let (low, high) = probability_interval(&self.fit, excess, conditional);
        Some(Exceedance {
            probability: rate * conditional,
            interval: (rate * low.min(conditional), rate * high.max(conditional)),
        })
    }

    fn estimate(&self, threshold_ns: u64) -> Option<f64> {
        let (_, conditional) = self.conditional(threshold_ns)?;
        Some(self.fit.exceedance_rate() * conditional)
    }

    /// One exact test of the profile likelihood at `probability` (clamped to the range the
    /// interval's ends are searched in, so that the answer is the one both ends would give).
    fn locate(&self, threshold_ns: u64, probability: f64) -> Option<Ordering> {
        let (excess, conditional) = self.conditional(threshold_ns)?;
        let rate = self.fit.exceedance_rate();
        let centre = conditional.ln();
        let point = (probability / rate).ln();
        if point.is_nan() {
            return None;
        }
        let (low_limit, high_limit) = search_limits(centre);
        let inside = |log_probability: f64| {
            gpd::profile_reaches(
                &self.fit.excesses,
                excess,
                log_probability.exp(),
                cutoff(&self.fit),
                self.fit.gpd.xi,
            )
        };
        let outside = if point > centre {
            // Beyond the upper end's search, that end is 1 (so `rate`) when the limit is inside.
            if point > high_limit {
                !inside(high_limit) || probability > rate
            } else {
                !inside(point)
            }
        } else if point < centre {
            // Below the lower end's search, that end is 0 when the limit is inside.
            !inside(point.max(low_limit))
        } else {
            false
        };
        Some(match (outside, point > centre) {
            (false, _) => Ordering::Equal,
            (true, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        })
    }

    fn describe(&self) -> String {
        format!(
            "tail projection: GPD fit to {} samples over {:.1} µs (ξ = {:.3}, σ = {:.1} µs, Anderson–Darling p = {:.2}); {:.0} % profile-likelihood intervals",
            self.fit.excesses.total.round() as u64,
            self.fit.threshold_ns / 1_000.0,
            self.fit.gpd.xi,
            self.fit.gpd.sigma / 1_000.0,
            self.fit.ad_p_value,
            CONFIDENCE * 100.0
        )
    }
}

/// The profile-likelihood interval of the conditional tail probability `conditional` of
/// exceeding `excess` over the threshold (0 or 1 where the data do not bound it). Each end is
/// bisected in log probability as it always was, its steps answered by a
/// [`gpd::EdgeOracle`] settled around the end that [`gpd::locate_edge`] finds on
/// [`gpd::profile_near`]: the same ends at a fraction of the profile likelihoods (test
/// `settled_interval_equals_plain_bisection`).
fn probability_interval(fit: &PotFit, excess: f64, conditional: f64) -> (f64, f64) {
    let data = &fit.excesses;
    let xi = fit.gpd.xi;
    let cutoff = cutoff(fit);
    let centre = conditional.ln();
    // One end: bisected between `limit` and the estimate unless `limit` itself is inside.
    let end = |limit: f64, unbounded: f64| {
        let direction = (limit - centre).signum();
        let mut oracle = gpd::EdgeOracle::new(centre, direction, |log_probability: f64| {
            gpd::profile_reaches(data, excess, log_probability.exp(), cutoff, xi)
        });
        let mut warm_xi = xi;
        oracle.settle_near(
            gpd::locate_edge(centre, direction, (limit - centre).abs(), |point: f64| {
                gpd::profile_near(data, excess, point.exp(), &mut warm_xi) - cutoff
            }),
            EDGE_WIDTH,
        );
        if oracle.is_inside(limit) {
            unbounded
        } else {
            bisect(limit, centre, &mut |point| oracle.is_inside(point)).exp()
        }
    };
    let (low_limit, high_limit) = search_limits(centre);
    let low = end(low_limit, 0.0);
    let high = end(high_limit, 1.0);
    (low, high)
}

/// How far either side of a located end the exact test is asked: a tenth of a bisection's
/// last step.
const EDGE_WIDTH: f64 = 1e-7;

/// How closely `bisect` finds a boundary, in log probability: 1e-6 is a relative error of
/// 1e-4 % in the probability, far below what a verdict or an MTTF shows. Each step costs a
/// profile likelihood, and the verdict after every run asks for one interval per application
/// class, so this is most of what rtlab costs after measuring (BENCHMARKS.md, probe cost); the
/// 40 fixed steps used before resolved 2.5e-11, to no one's benefit.
const LOG_PROBABILITY_TOLERANCE: f64 = 1e-6;

/// The boundary between `outside` (not in the set) and `inside_point` (in it), bisected to
/// [`LOG_PROBABILITY_TOLERANCE`] ([`gpd::bisect_boundary`]).
fn bisect(outside: f64, inside_point: f64, inside: &mut dyn FnMut(f64) -> bool) -> f64 {
    gpd::bisect_boundary(outside, inside_point, LOG_PROBABILITY_TOLERANCE, inside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::{forecast, Basis, BufferConfig, LatencyEvidence, Model};
    use rand::SeedableRng as _;
    use rand_distr::Distribution as _;
    use rtlab_core::Nanos;

    /// 200 000 wake-ups: 50 µs plus an exponential tail of mean 20 µs (a GPD with ξ = 0).
    fn exponential_tail() -> LatencyHistogram {
        let mut random = rand::rngs::StdRng::seed_from_u64(7);
        let exponential = rand_distr::Exp::new(1.0 / 20_000.0).unwrap();
        let mut histogram = LatencyHistogram::new();
        for _ in 0..200_000 {
            histogram.record(50_000 + exponential.sample(&mut random) as u64);
        }
        histogram
    }

    /// 200 000 wake-ups: 50 µs plus a GPD tail with ξ = 0.2 and σ = 15 µs (heavier than
    /// exponential).
    fn heavy_tail() -> LatencyHistogram {
        let mut random = rand::rngs::StdRng::seed_from_u64(11);
        let uniform = rand_distr::Uniform::new(0.0_f64, 1.0);
        let mut histogram = LatencyHistogram::new();
        for _ in 0..200_000 {
            let u: f64 = 1.0 - uniform.sample(&mut random);
            histogram.record(50_000 + (15_000.0 * (u.powf(-0.2) - 1.0) / 0.2) as u64);
        }
        histogram
    }

    /// `decide` answers with one exact test where the whole interval is on one side of the
    /// need, and hands back the whole forecast where it is not; either way the verdict (and its
    /// point MTTF) is the one the whole forecast gives, on both sides and across the line.
    #[test]
    fn decide_agrees_with_the_whole_forecast() {
        use crate::forecast::{decide, Decision};
        let (mut suitable, mut unsuitable, mut straddling) = (0, 0, 0);
        for histogram in [exponential_tail(), heavy_tail()] {
            let tail = ProjectedTail::fit(&histogram).unwrap();
            let evidence = LatencyEvidence {
                histogram: &histogram,
                tail: Some(&tail),
                probe: None,
                chain: 1,
                counting: crate::forecast::Counting::Restart,
            };
            let beyond = histogram.max() + 1_000;
            for slack_ns in [beyond, beyond * 3 / 2, beyond * 2, beyond * 4, beyond * 10] {
                let config = BufferConfig {
                    buffers: 2,
                    buffer_period: Nanos(slack_ns),
                    compute: Nanos(0),
                };
                let full = forecast(evidence, config, Model::PerPeriod).unwrap();
                for needed_s in [1.0, 60.0, 3_600.0, 86_400.0, 604_800.0, 3.15e7, 3.15e9] {
                    // The rule of the verdict at the end of a run (rtlab-render's verdict).
                    let expected = match full.mttf_ci_s {
                        [Some(lower), _] if lower >= needed_s => Some(true),
                        [_, Some(upper)] if upper < needed_s => Some(false),
                        _ => None,
                    };
                    match decide(evidence, config, Model::PerPeriod, needed_s).unwrap() {
                        Decision::Decided {
                            suitable: yes,
                            mttf_s,
                        } => {
                            assert_eq!(Some(yes), expected, "slack {slack_ns}, need {needed_s}");
                            assert_eq!(Some(mttf_s), full.mttf_s);
                            if yes {
                                suitable += 1;
                            } else {
                                unsuitable += 1;
                            }
                        }
                        Decision::Forecast(row) => {
                            assert_eq!(row, full);
                            if matches!(row.basis, Basis::TailProjection { .. }) {
                                assert_eq!(expected, None, "slack {slack_ns}, need {needed_s}");
                                straddling += 1;
                            }
                        }
                    }
                }
            }
        }
        // Every branch was taken.
        assert!(
            suitable > 0 && unsuitable > 0 && straddling > 0,
            "{suitable} {unsuitable} {straddling}"
        );
    }

    /// The interval as it was computed before the edge search: every step asks the full test.
    fn probability_interval_plain(fit: &PotFit, excess: f64, conditional: f64) -> (f64, f64) {
        let cutoff = fit.gpd.log_likelihood - gpd::chi_square_one(CONFIDENCE) / 2.0;
        let inside = |log_probability: f64| {
            gpd::profile_reaches(
                &fit.excesses,
                excess,
                log_probability.exp(),
                cutoff,
                fit.gpd.xi,
            )
        };
        let mut inside = inside;
        let centre = conditional.ln();
        let floor = centre - 12.0 * std::f64::consts::LN_10;
        let low = if inside(floor) {
            0.0
        } else {
            bisect(floor, centre, &mut inside).exp()
        };
        let ceiling = (1.0 - 1e-9_f64).ln();
        let high = if inside(ceiling) {
            1.0
        } else {
            bisect(ceiling, centre, &mut inside).exp()
        };
        (low, high)
    }

    /// The settled search gives bit for bit the ends of the plain bisection, for tails of
    /// every shape and thresholds from just above the fit's threshold to far beyond the data.
    #[test]
    fn settled_interval_equals_plain_bisection() {
        use rand::Rng as _;
        let mut random = rand::rngs::StdRng::seed_from_u64(12);
        let mut compared = 0;
        for _ in 0..12 {
            let xi = random.gen_range(-0.4..1.0);
            let sigma = random.gen_range(2_000.0..30_000.0);
            let count = random.gen_range(20_000..200_000);
            let mut histogram = LatencyHistogram::new();
            for _ in 0..count {
                let uniform: f64 = random.gen_range(1e-9..1.0);
                histogram.record(20_000 + gpd::excess_quantile(uniform, sigma, xi) as u64);
            }
            let Ok(tail) = ProjectedTail::fit(&histogram) else {
                continue;
            };
            let fit = tail.pot_fit();
            for _ in 0..8 {
                let excess = fit.excesses.max * 10f64.powf(random.gen_range(-2.0..1.5));
                let conditional = gpd::survival(excess, fit.gpd.sigma, fit.gpd.xi);
                if !(conditional > 0.0 && conditional < 1.0) {
                    continue;
                }
                assert_eq!(
                    probability_interval(fit, excess, conditional),
                    probability_interval_plain(fit, excess, conditional),
                    "xi {xi} sigma {sigma} excess {excess}"
                );
                compared += 1;
            }
        }
        assert!(compared > 40, "{compared}");
    }

    #[test]
    fn projects_an_exponential_tail_beyond_the_data() {
        let histogram = exponential_tail();
        let tail = ProjectedTail::fit(&histogram).expect("an exponential tail fits");
        // True P(X > 50 µs + 400 µs) = e^-20 = 2.06e-9, far beyond 200 000 samples.
        let slack = 450_000;
        assert_eq!(histogram.count_above(slack), 0);
        let exceedance = tail.exceedance(slack).expect("beyond the threshold");
        let truth = (-20.0f64).exp();
        let (low, high) = exceedance.interval;
        assert!(low <= exceedance.probability && exceedance.probability <= high);
        assert!(
            low < truth && truth < high,
            "{low:e} < {truth:e} < {high:e}"
        );
        assert!(tail.describe().contains("GPD fit"));
        // Through the forecast: the basis says where the number came from.
        let evidence = LatencyEvidence {
            histogram: &histogram,
            tail: Some(&tail),
            probe: None,
            chain: 1,
            counting: crate::forecast::Counting::Restart,
        };
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos(slack),
            compute: Nanos::ZERO,
        };
        let row = forecast(evidence, config, Model::PerPeriod).unwrap();
        assert!(
            matches!(row.basis, Basis::TailProjection { .. }),
            "{:?}",
            row.basis
        );
        assert!(row.mttf_s.unwrap() > 0.45e-3 / 1e-6);
    }

    #[test]
    fn below_the_threshold_there_is_no_projection() {
        let histogram = exponential_tail();
        let tail = ProjectedTail::fit(&histogram).unwrap();
        assert!(tail.exceedance(1_000).is_none());
    }

    #[test]
    fn too_little_data_is_refused() {
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(10_000, 50);
        assert!(ProjectedTail::fit(&histogram).is_err());
    }
}
