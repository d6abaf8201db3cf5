//! Tail projection: the expected worst case per hour, day and week of use (paper 002, Table 3).
//!
//! Paper 002 reported, per workload class, the worst latency to expect in an hour of continuous
//! use, in a "day" and in a "week" of use by a heavy user (a usage model: 6–8 h a day, 5 days a
//! week for office work, …). A run rarely lasts a week, so rtlab projects:
//!
//! * **Definition.** The worst case of a window is the *median of the largest latency in one
//!   window*: half the hours of use see a worse wake-up, half a better one. With `n` wake-ups in a
//!   window this is the latency exceeded by one wake-up with probability `p = 1 − 2^(−1/n)`.
//! * **Inside the run** (the run covers the window at least six times): empirical block maxima,
//!   the median of the windows' maxima with a distribution-free order-statistic interval.
//! * **Beyond the run**: peaks over threshold. Excesses over a high threshold are fitted with a
//!   Generalized Pareto distribution by maximum likelihood ([`gpd`]); the threshold is the lowest
//!   candidate (from the top 5 % of samples, at most 4 000, down to 50 exceedances) at which the
//!   Anderson–Darling test ([`goodness`]) does not reject the fit at 5 % — the sequential
//!   procedure of Choulakian & Stephens (2001). The interval is the profile-likelihood interval.
//! * **Refusal.** With too few samples, no acceptable threshold, a window more than 1000 times
//!   longer than the run, an interval the likelihood cannot bound (or that reaches past a minute),
//!   or a projection more than 100 times the largest latency measured, the projection says why
//!   (`{"insufficient": reason}`) instead of printing a number.
//!
//! Everything is a pure function of what a Run record keeps — the HDR histogram, the per-second
//! maxima and the measured duration — so a stored run can be re-projected with another usage
//! model. Exceedances come from the histogram at its 3-significant-digit resolution.

/// Beyond this mean time between failures a number only misleads: "practically never".
pub const PRACTICALLY_NEVER_S: f64 = 100.0 * 365.25 * 86_400.0;
pub mod empirical;
pub mod goodness;
pub mod gpd;

use gpd::{Excesses, GpdFit};
use rtlab_core::{
    EstimateValue, FitSummary, LatencyHistogram, Tail, TailFit, TailUsage, WindowEstimate, Windows,
};
use serde_json::{json, Value};

/// Hours of use in a day and days in a week (paper 002, section 3.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsageModel {
    pub hours_per_day: f64,
    pub days_per_week: f64,
}

impl UsageModel {
    /// An always-on machine: 24 h a day, 7 days a week.
    pub const CONTINUOUS: UsageModel = UsageModel {
        hours_per_day: 24.0,
        days_per_week: 7.0,
    };

    /// The three windows: (`per_hour` | `per_day` | `per_week`, length in seconds of use).
    pub fn windows(&self) -> [(&'static str, f64); 3] {
        let day = self.hours_per_day * 3600.0;
        [
            ("per_hour", 3600.0),
            ("per_day", day),
            ("per_week", day * self.days_per_week),
        ]
    }

    pub fn to_json(&self) -> Value {
        json!({"hours_per_day": self.hours_per_day, "days_per_week": self.days_per_week})
    }
}

impl std::fmt::Display for UsageModel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{}h/day,{}d/week",
            self.hours_per_day, self.days_per_week
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad usage model '{text}': {reason} (expected e.g. 6h/day,5d/week)")]
pub struct UsageError {
    pub text: String,
    pub reason: String,
}

impl std::str::FromStr for UsageModel {
    type Err = UsageError;

    /// Parses `6h/day,5d/week` (either part may be given alone; the other then keeps 24 h or 7 d).
    fn from_str(text: &str) -> Result<UsageModel, UsageError> {
        let bad = |reason: &str| UsageError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let mut model = UsageModel::CONTINUOUS;
        let (mut hours_seen, mut days_seen) = (false, false);
        for part in text.split(',') {
            let part = part.trim().to_ascii_lowercase();
            if let Some(hours) = part.strip_suffix("h/day") {
                let hours: f64 = hours
                    .trim()
                    .parse()
                    .map_err(|_| bad("hours per day is not a number"))?;
                if !(hours > 0.0 && hours <= 24.0) || hours_seen {
                    return Err(bad("hours per day must be given once, in (0, 24]"));
                }
                model.hours_per_day = hours;
                hours_seen = true;
            } else if let Some(days) = part.strip_suffix("d/week") {
                let days: f64 = days
                    .trim()
                    .parse()
                    .map_err(|_| bad("days per week is not a number"))?;
                if !(days > 0.0 && days <= 7.0) || days_seen {
                    return Err(bad("days per week must be given once, in (0, 7]"));
                }
                model.days_per_week = days;
                days_seen = true;
            } else {
                return Err(bad(&format!("'{part}' is neither Nh/day nor Nd/week")));
            }
        }
        Ok(model)
    }
}

/// Limits of what the projection will claim.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TailConfig {
    /// Confidence of the reported intervals.
    pub confidence: f64,
    /// Level at which the Anderson–Darling test rejects a threshold.
    pub goodness_alpha: f64,
    /// Fewest samples for any projection.
    pub min_samples: u64,
    /// Fewest exceedances a threshold may leave.
    pub min_exceedances: u64,
    /// Most exceedances a threshold may leave: no more than a Run record keeps as `peaks` (4096
    /// by default), so the exceedances of the chosen threshold are stored with their times.
    pub max_exceedances: u64,
    /// Largest ratio of wake-ups in a window to wake-ups measured.
    pub max_extrapolation: f64,
}

impl Default for TailConfig {
    fn default() -> Self {
        TailConfig {
            confidence: 0.95,
            goodness_alpha: 0.05,
            min_samples: 1_000,
            min_exceedances: 50,
            max_exceedances: 4_000,
            max_extrapolation: 1_000.0,
        }
    }
}

/// How an estimate was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Empirical,
    Gpd,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Empirical => "empirical",
            Method::Gpd => "gpd",
        }
    }
}

/// A projected latency with its interval, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub enum Estimate {
    Value {
        estimate_ns: f64,
        ci_low_ns: f64,
        ci_high_ns: f64,
        confidence: f64,
        method: Method,
    },
    Insufficient(String),
}

impl Estimate {
    /// The record's form of the estimate (ns rounded outwards, confidence to 4 digits).
    pub fn to_window_estimate(&self) -> WindowEstimate {
        match self {
            Estimate::Value {
                estimate_ns,
                ci_low_ns,
                ci_high_ns,
                confidence,
                method,
            } => WindowEstimate::Value(EstimateValue {
                estimate_ns: estimate_ns.round() as u64,
                ci_low_ns: ci_low_ns.floor() as u64,
                ci_high_ns: ci_high_ns.ceil() as u64,
                confidence: (confidence * 1e4).round() / 1e4,
                method: method.as_str().to_owned(),
            }),
            Estimate::Insufficient(reason) => WindowEstimate::Insufficient {
                insufficient: reason.clone(),
            },
        }
    }
}

/// A peaks-over-threshold fit.
#[derive(Clone, Debug, PartialEq)]
pub struct PotFit {
    pub threshold_ns: f64,
    pub sample_count: u64,
    pub excesses: Excesses,
    pub gpd: GpdFit,
    pub ad_statistic: f64,
    pub ad_p_value: f64,
    /// Thresholds examined before (and including) the accepted one.
    pub thresholds_tested: usize,
}

impl PotFit {
    /// Fraction of samples above the threshold.
    pub fn exceedance_rate(&self) -> f64 {
        self.excesses.total / self.sample_count as f64
    }

    /// `P(X > value_ns)` under the fit (valid above the threshold).
    pub fn tail_probability(&self, value_ns: f64) -> f64 {
        self.exceedance_rate()
            * gpd::survival(value_ns - self.threshold_ns, self.gpd.sigma, self.gpd.xi)
    }

    /// The value exceeded with (unconditional) probability `probability`, with its interval.
    /// Valid for probabilities below the exceedance rate.
    pub fn quantile(&self, probability: f64, confidence: f64) -> Estimate {
        let conditional = probability / self.exceedance_rate();
        if !(conditional > 0.0 && conditional < 1.0) {
            return Estimate::Insufficient(format!(
                "probability {probability:e} is not inside the fitted tail (above the threshold)"
            ));
        }
        let interval = gpd::quantile_interval(&self.excesses, &self.gpd, conditional, confidence);
        match interval.high {
            Some(high) => Estimate::Value {
                estimate_ns: self.threshold_ns + interval.excess,
                ci_low_ns: self.threshold_ns + interval.low,
                ci_high_ns: self.threshold_ns + high,
                confidence,
                method: Method::Gpd,
            },
            None => Estimate::Insufficient(
                "the data do not bound the upper confidence limit (tail too heavy for this little data)"
                    .to_owned(),
            ),
        }
    }

    /// The record's summary of the fit.
    pub fn to_summary(&self) -> FitSummary {
        FitSummary {
            threshold_ns: self.threshold_ns.round() as u64,
            exceedances: self.excesses.total.round() as u64,
            samples: self.sample_count,
            sigma_ns: (self.gpd.sigma * 100.0).round() / 100.0,
            xi: (self.gpd.xi * 1e4).round() / 1e4,
            ad_statistic: (self.ad_statistic * 1e4).round() / 1e4,
            ad_p_value: (self.ad_p_value * 1e4).round() / 1e4,
            thresholds_tested: self.thresholds_tested as u64,
            exceedances_kept_in_peaks: None,
        }
    }
}

/// `(value, count)` of every non-empty bucket at the bucket's middle, ascending.
fn weighted_values(histogram: &LatencyHistogram) -> Vec<(f64, u64)> {
    let inner = histogram.inner();
    inner
        .iter_recorded()
        .map(|bucket| {
            let value = bucket.value_iterated_to();
            (
                inner.median_equivalent(value) as f64,
                bucket.count_at_value(),
            )
        })
        .collect()
}

/// Fits the tail of a histogram: sequential threshold choice with the Anderson–Darling test.
pub fn fit_tail(histogram: &LatencyHistogram, config: &TailConfig) -> Result<PotFit, String> {
    let sample_count = histogram.count();
    if sample_count < config.min_samples {
        return Err(format!(
            "only {sample_count} samples (a tail fit needs at least {})",
            config.min_samples
        ));
    }
    let values = weighted_values(histogram);
    // Count strictly above each distinct value.
    let mut above = vec![0u64; values.len()];
    let mut running = 0u64;
    for index in (0..values.len()).rev() {
        above[index] = running;
        running += values[index].1;
    }
    let largest = (sample_count / 20).min(config.max_exceedances);
    if largest < config.min_exceedances {
        return Err(format!(
            "only {sample_count} samples: the top 5 % holds fewer than {} exceedances",
            config.min_exceedances
        ));
    }
    let mut candidates: Vec<usize> = Vec::new();
    let mut target = largest as f64;
    while target >= config.min_exceedances as f64 {
        // Largest distinct value with at least `target` samples above it.
        if let Some(index) = (0..values.len())
            .rev()
            .find(|index| above[*index] as f64 >= target)
        {
            if candidates.last() != Some(&index) && above[index] >= config.min_exceedances {
                candidates.push(index);
            }
        }
        target *= 0.75;
    }
    if candidates.is_empty() {
        return Err(format!(
            "fewer than {} samples stand above any threshold (the largest values are all tied)",
            config.min_exceedances
        ));
    }
    let mut last_reason = String::new();
    for (tested, index) in candidates.iter().enumerate() {
        let threshold = values[*index].0;
        let pairs: Vec<(f64, f64)> = values[index + 1..]
            .iter()
            .map(|(value, count)| (value - threshold, *count as f64))
            .collect();
        let Some(excesses) = Excesses::new(pairs) else {
            continue;
        };
        let Some(fitted) = gpd::fit(&excesses) else {
            last_reason = "no admissible GPD parameters".to_owned();
            continue;
        };
        let statistic = goodness::anderson_darling(&excesses, &fitted);
        let p_value = goodness::p_value(statistic, fitted.xi);
        if goodness::rejects(statistic, fitted.xi, config.goodness_alpha) {
            last_reason = format!("A² = {statistic:.2}, p ≈ {p_value:.2}");
            continue;
        }
        return Ok(PotFit {
            threshold_ns: threshold,
            sample_count,
            excesses,
            gpd: fitted,
            ad_statistic: statistic,
            ad_p_value: p_value,
            thresholds_tested: tested + 1,
        });
    }
    Err(format!(
        "the GPD fit is rejected by the Anderson-Darling test at all {} thresholds tried, from {} \
         down to {} exceedances (last: {last_reason})",
        candidates.len(),
        above[candidates[0]],
        above[*candidates.last().unwrap_or(&0)]
    ))
}

/// What a projection needs from a series.
#[derive(Clone, Copy, Debug)]
pub struct TailData<'a> {
    pub histogram: &'a LatencyHistogram,
    /// Largest sample of each second of measurement (may be empty for imported records).
    pub max_per_second: &'a [u64],
    /// Measured time the samples cover, ns.
    pub covered_ns: u64,
    /// Nominal period of the series, ns (0 when not periodic): used to phrase the `rare` lines.
    pub period_ns: u64,
}

/// The projection of one series.
#[derive(Clone, Debug, PartialEq)]
pub struct TailProjection {
    pub usage: UsageModel,
    /// (`per_hour` | `per_day` | `per_week`, window seconds, estimate).
    pub windows: Vec<(&'static str, f64, Estimate)>,
    pub fit: Result<PotFit, String>,
    pub rare: Vec<String>,
}

/// Latencies the projection will not report: an interval reaching past a minute (the histogram's
/// range) is a hang, not a latency, and says only that the data cannot bound the tail.
const HIGHEST_CREDIBLE_NS: f64 = 60e9;
/// Largest ratio of a projected worst case to the largest latency actually measured.
const MAX_PROJECTION_RATIO: f64 = 100.0;

/// Wake-ups per window and the per-wake-up probability whose quantile is the window's median max.
fn window_probability(samples_per_second: f64, window_seconds: f64) -> (f64, f64) {
    let wakeups = samples_per_second * window_seconds;
    let probability = -(-std::f64::consts::LN_2 / wakeups).exp_m1();
    (wakeups, probability)
}

/// Empirical quantile exceeded with probability `probability`, with a binomial (normal
/// approximation) rank interval: used when the window's quantile lies below the fit threshold.
fn empirical_quantile(histogram: &LatencyHistogram, probability: f64, confidence: f64) -> Estimate {
    let count = histogram.count() as f64;
    let expected_above = count * probability;
    let z = normal_quantile(0.5 + confidence / 2.0);
    let spread = z * expected_above.sqrt();
    if expected_above - spread < 1.0 {
        return Estimate::Insufficient(
            "too few samples above this level for an empirical interval".to_owned(),
        );
    }
    let at = |above: f64| histogram.value_at_quantile((1.0 - above / count).clamp(0.0, 1.0)) as f64;
    Estimate::Value {
        estimate_ns: at(expected_above),
        ci_low_ns: at(expected_above + spread),
        ci_high_ns: at(expected_above - spread),
        confidence,
        method: Method::Empirical,
    }
}

/// Projects the worst case per hour, day and week of use, and the `rare` lines.
pub fn project(data: &TailData<'_>, usage: &UsageModel, config: &TailConfig) -> TailProjection {
    let sample_count = data.histogram.count();
    let covered_seconds = data.covered_ns as f64 / 1e9;
    let fit = fit_tail(data.histogram, config);
    let mut windows = Vec::new();
    for (name, window_seconds) in usage.windows() {
        let estimate = if sample_count < config.min_samples || covered_seconds <= 0.0 {
            Estimate::Insufficient(format!(
                "only {sample_count} samples over {covered_seconds:.0} s (needs at least {})",
                config.min_samples
            ))
        } else {
            project_window(data, &fit, window_seconds, config)
        };
        windows.push((name, window_seconds, estimate));
    }
    let rare = rare_lines(data, fit.as_ref().ok());
    TailProjection {
        usage: *usage,
        windows,
        fit,
        rare,
    }
}

fn project_window(
    data: &TailData<'_>,
    fit: &Result<PotFit, String>,
    window_seconds: f64,
    config: &TailConfig,
) -> Estimate {
    let block_seconds = window_seconds.round() as usize;
    let blocks = empirical::block_maxima(data.max_per_second, block_seconds.max(1));
    if blocks.len() >= 6 {
        if let Some(empirical::MedianInterval {
            median,
            low,
            high,
            coverage,
        }) = empirical::median_with_interval(&blocks, config.confidence)
        {
            return Estimate::Value {
                estimate_ns: median,
                ci_low_ns: low as f64,
                ci_high_ns: high as f64,
                confidence: coverage,
                method: Method::Empirical,
            };
        }
    }
    let sample_count = data.histogram.count() as f64;
    let samples_per_second = sample_count / (data.covered_ns as f64 / 1e9);
    let (wakeups, probability) = window_probability(samples_per_second, window_seconds);
    if wakeups > config.max_extrapolation * sample_count {
        return Estimate::Insufficient(format!(
            "the window holds {:.0}× more wake-ups than were measured (the limit is {:.0}×): \
             measure longer",
            wakeups / sample_count,
            config.max_extrapolation
        ));
    }
    match fit {
        Ok(fit) if probability < fit.exceedance_rate() => {
            let estimate = fit.quantile(probability, config.confidence);
            let observed_max = data.histogram.max() as f64;
            match estimate {
                Estimate::Value { ci_high_ns, .. } if ci_high_ns > HIGHEST_CREDIBLE_NS => {
                    Estimate::Insufficient(format!(
                        "the interval reaches {} (ξ = {:.2}): beyond any latency worth projecting; measure longer",
                        format_latency(ci_high_ns),
                        fit.gpd.xi
                    ))
                }
                Estimate::Value { estimate_ns, .. }
                    if observed_max > 0.0 && estimate_ns > MAX_PROJECTION_RATIO * observed_max =>
                {
                    Estimate::Insufficient(format!(
                        "the projection ({}) is more than {MAX_PROJECTION_RATIO:.0}× the largest latency measured ({}): measure longer",
                        format_latency(estimate_ns),
                        format_latency(observed_max)
                    ))
                }
                other => other,
            }
        }
        Ok(_) => empirical_quantile(data.histogram, probability, config.confidence),
        Err(reason) => Estimate::Insufficient(reason.clone()),
    }
}

/// `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn format_latency(nanos: f64) -> String {
    if nanos < 1e6 {
        format!("{:.1} µs", nanos / 1e3)
    } else if nanos < 1e9 {
        format!("{:.2} ms", nanos / 1e6)
    } else {
        format!("{:.2} s", nanos / 1e9)
    }
}

/// `45 s`, `12 min`, `3.2 h`, `5.1 days`, `2.3 years`.
pub fn format_span(seconds: f64) -> String {
    if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else if seconds < 7_200.0 {
        format!("{:.0} min", seconds / 60.0)
    } else if seconds < 172_800.0 {
        format!("{:.1} h", seconds / 3_600.0)
    } else if seconds < 2.0 * 31_557_600.0 {
        format!("{:.1} days", seconds / 86_400.0)
    } else {
        format!("{:.1} years", seconds / 31_557_600.0)
    }
}

/// Levels on a 1-2-5 ladder (in ns) from just above the 99.99th percentile, at most four, each
/// phrased as "expected once every N wake-ups (≈ every T at this period)".
fn rare_lines(data: &TailData<'_>, fit: Option<&PotFit>) -> Vec<String> {
    let histogram = data.histogram;
    let count = histogram.count();
    if count == 0 || data.covered_ns == 0 {
        return Vec::new();
    }
    let seconds_per_sample = if data.period_ns > 0 {
        data.period_ns as f64 / 1e9
    } else {
        data.covered_ns as f64 / 1e9 / count as f64
    };
    let period_text = if data.period_ns > 0 {
        format!("at this period ({})", format_latency(data.period_ns as f64))
    } else {
        "at this sample rate".to_owned()
    };
    let start = histogram.value_at_quantile(0.9999).max(1) as f64;
    let mut ladder = Vec::new();
    let mut decade = 10f64.powf(start.log10().floor());
    'outer: while decade < 1e12 {
        for step in [1.0, 2.0, 5.0] {
            let level = decade * step;
            if level > start {
                ladder.push(level);
                if ladder.len() == 4 {
                    break 'outer;
                }
            }
        }
        decade *= 10.0;
    }
    let mut lines = Vec::new();
    for level in ladder {
        let observed = histogram.count_above(level as u64 - 1);
        let probability = if observed >= 10 {
            Some(observed as f64 / count as f64)
        } else {
            fit.filter(|fit| level > fit.threshold_ns)
                .map(|fit| fit.tail_probability(level))
        };
        let Some(probability) = probability else {
            lines.push(format!(
                "a latency ≥ {} was seen {observed} times in {count} wake-ups (no tail fit to say more)",
                format_latency(level)
            ));
            break;
        };
        if probability <= 0.0 {
            lines.push(format!(
                "a latency ≥ {} is not expected: beyond the fitted tail's upper end point",
                format_latency(level)
            ));
            break;
        }
        let every = 1.0 / probability;
        if every * seconds_per_sample > PRACTICALLY_NEVER_S {
            lines.push(format!(
                "a latency ≥ {} is practically never expected (less than once in a century {period_text})",
                format_latency(level)
            ));
            break;
        }
        lines.push(format!(
            "a latency ≥ {} is expected once every {} wake-ups (≈ every {} {period_text})",
            format_latency(level),
            format_count(every),
            format_span(every * seconds_per_sample)
        ));
    }
    lines
}

/// `950`, `12 000`, `3.4e6`.
fn format_count(value: f64) -> String {
    if value < 1e5 {
        let rounded = value.round() as u64;
        let text = rounded.to_string();
        let mut grouped = String::new();
        for (index, digit) in text.chars().enumerate() {
            if index > 0 && (text.len() - index).is_multiple_of(3) {
                grouped.push(' ');
            }
            grouped.push(digit);
        }
        grouped
    } else {
        format!("{value:.1e}")
    }
}

impl TailProjection {
    /// The `tail` stored on each series.
    pub fn to_tail(&self) -> Tail {
        let mut tail = Tail {
            definition: "median of the largest latency in one window of use".to_owned(),
            usage: Some(TailUsage {
                hours_per_day: self.usage.hours_per_day,
                days_per_week: self.usage.days_per_week,
            }),
            fit: Some(match &self.fit {
                Ok(fit) => TailFit::Fitted(fit.to_summary()),
                Err(reason) => TailFit::Insufficient {
                    insufficient: reason.clone(),
                },
            }),
            rare: self.rare.clone(),
            ..Tail::default()
        };
        let mut window_seconds = Windows::default();
        for (name, seconds, estimate) in &self.windows {
            let (slot, seconds_slot) = match *name {
                "per_hour" => (&mut tail.per_hour, &mut window_seconds.per_hour),
                "per_day" => (&mut tail.per_day, &mut window_seconds.per_day),
                _ => (&mut tail.per_week, &mut window_seconds.per_week),
            };
            *slot = Some(estimate.to_window_estimate());
            *seconds_slot = seconds.round() as u64;
        }
        tail.window_seconds = Some(window_seconds);
        tail
    }

    /// [`TailProjection::to_tail`] as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.to_tail()).expect("a tail serialises")
    }
}

/// Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9).
pub fn normal_quantile(probability: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let probability = probability.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.024_25;
    if probability < low {
        let q = (-2.0 * probability.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if probability <= 1.0 - low {
        let q = probability - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - probability)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_models_parse_and_reject() {
        let model: UsageModel = "6h/day,5d/week".parse().unwrap();
        assert_eq!(
            model,
            UsageModel {
                hours_per_day: 6.0,
                days_per_week: 5.0
            }
        );
        assert_eq!(model.windows()[2].1, 6.0 * 3600.0 * 5.0);
        let model: UsageModel = " 3.5H/day ".parse().unwrap();
        assert_eq!(model.days_per_week, 7.0);
        assert_eq!(model.to_string().parse::<UsageModel>().unwrap(), model);
        for bad in [
            "",
            "25h/day",
            "6h/day,8d/week",
            "6h/day,6h/day",
            "6 hours",
            "xh/day",
        ] {
            let error = bad.parse::<UsageModel>().unwrap_err().to_string();
            assert!(
                error.contains("expected e.g. 6h/day,5d/week"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn normal_quantiles_match_tables() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.001) + 3.090_232).abs() < 1e-5);
    }

    #[test]
    fn window_probability_gives_the_median_of_the_maximum() {
        // With n wake-ups, P(max ≤ q) = (1 − p)^n must be ½.
        let (wakeups, probability) = window_probability(1000.0, 3600.0);
        assert_eq!(wakeups, 3.6e6);
        assert!(((1.0 - probability).powf(wakeups) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn formats_are_readable() {
        assert_eq!(format_latency(12_345.0), "12.3 µs");
        assert_eq!(format_latency(4_560_000.0), "4.56 ms");
        assert_eq!(format_span(30.0), "30 s");
        assert_eq!(format_span(5_400.0), "90 min");
        assert_eq!(format_span(86_400.0 * 3.0), "3.0 days");
        assert_eq!(format_count(12_000.0), "12 000");
        assert_eq!(format_count(3.4e6), "3.4e6");
    }

    /// Seven hours of an exponential latency (5 µs + mean 2 µs): two million samples from its
    /// quantile function (deterministic) and per-second maxima of 1000 draws each. Hours are covered
    /// six times over (empirical), days are not (gpd).
    #[test]
    fn covered_windows_are_empirical_and_longer_ones_are_projected() {
        let mut histogram = LatencyHistogram::new();
        let samples = 2_000_000u64;
        for index in 0..samples {
            let probability = (index as f64 + 0.5) / samples as f64;
            histogram.record((5_000.0 - 2_000.0 * (1.0 - probability).ln()).round() as u64);
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let max_per_second: Vec<u64> = (0..7 * 3600)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let uniform = (state >> 11) as f64 / (1u64 << 53) as f64;
                // Max of 1000 exponentials: 5 µs + 2 µs·(ln 1000 + Gumbel).
                (5_000.0 + 2_000.0 * (1000f64.ln() - (-uniform.max(1e-12).ln()).ln())) as u64
            })
            .collect();
        let data = TailData {
            histogram: &histogram,
            max_per_second: &max_per_second,
            covered_ns: 7 * 3_600_000_000_000,
            period_ns: 1_000_000,
        };
        let usage = UsageModel {
            hours_per_day: 8.0,
            days_per_week: 5.0,
        };
        let projection = project(&data, &usage, &TailConfig::default());
        let json = projection.to_json();
        let hour = &json["per_hour"];
        assert_eq!(hour["method"], "empirical", "{json:#}");
        assert!(hour["confidence"].as_f64().unwrap() >= 0.95);
        let day = &json["per_day"];
        assert_eq!(day["method"], "gpd", "{json:#}");
        for window in [hour, day, &json["per_week"]] {
            let low = window["ci_low_ns"].as_u64().unwrap();
            let estimate = window["estimate_ns"].as_u64().unwrap();
            let high = window["ci_high_ns"].as_u64().unwrap();
            assert!(low <= estimate && estimate <= high, "{window}");
        }
        // The histogram's rate is 2e6 samples in 7 h: a day of 8 h holds n = 2.286e6 of them and
        // the median of their maximum is 5 µs + 2 µs·ln(n / ln 2) ≈ 35.0 µs.
        let day_estimate = day["estimate_ns"].as_f64().unwrap();
        assert!(
            (day_estimate / 35_000.0 - 1.0).abs() < 0.05,
            "{day_estimate}"
        );
        let week_estimate = json["per_week"]["estimate_ns"].as_f64().unwrap();
        assert!(week_estimate > day_estimate);
        assert_eq!(json["usage"]["hours_per_day"], 8.0);
        assert_eq!(json["window_seconds"]["per_week"], 144_000);
        assert!(json["fit"]["xi"].as_f64().unwrap().abs() < 0.1, "{json:#}");
        let rare = json["rare"].as_array().unwrap();
        assert!(!rare.is_empty());
        assert!(
            rare[0].as_str().unwrap().contains("expected once every"),
            "{rare:?}"
        );
    }

    #[test]
    fn too_little_data_is_refused_with_a_reason() {
        let mut histogram = LatencyHistogram::new();
        for value in 0..500u64 {
            histogram.record(1_000 + value);
        }
        let data = TailData {
            histogram: &histogram,
            max_per_second: &[],
            covered_ns: 1_000_000_000,
            period_ns: 1_000_000,
        };
        let projection = project(&data, &UsageModel::CONTINUOUS, &TailConfig::default());
        for (_, _, estimate) in &projection.windows {
            match estimate {
                Estimate::Insufficient(reason) => {
                    assert!(reason.contains("500 samples"), "{reason}")
                }
                other => panic!("expected insufficient, got {other:?}"),
            }
        }
        let json = projection.to_json();
        assert!(json["per_week"]["insufficient"].is_string());
        assert!(json["fit"]["insufficient"].is_string());
    }
}
