//! The underrun model: a buffer configuration against a latency distribution gives `P(late)`, an
//! MTTF and their intervals (the model is described in the `forecast` module's doc).
//!
//! This is the one place that turns a histogram into a probability: the observed data with a
//! Garwood interval while the slack lies inside it, a [`TailModel`](super::TailModel) beyond it, and otherwise only
//! the bound the data supports. Everything else in `forecast` calls [`forecast`] per row.

use super::evidence::{BufferConfig, LatencyEvidence};
use super::outcome::{
    poisson_interval, zero_events_upper_bound, Basis, Forecast, ForecastError, Model,
};
use rtlab_core::Nanos;

impl Model {
    fn cycle(self, config: &BufferConfig) -> Nanos {
        match self {
            Model::PerPeriod | Model::Response => config.buffer_period,
            Model::Paper002 => config.buffering(),
        }
    }
}

/// Which of the model's cases a configuration falls in, before any tail is asked.
enum Path {
    /// The compute time alone does not fit.
    NoSlack,
    /// `late` wake-ups were later than the slack.
    Observed { late: u64, samples: u64 },
    /// No wake-up was later than `slack`: beyond the observed data.
    Beyond { slack: u64, samples: u64 },
}

fn path(evidence: LatencyEvidence<'_>, config: &BufferConfig) -> Result<Path, ForecastError> {
    if config.buffer_period.0 == 0 {
        return Err(ForecastError::ZeroPeriod);
    }
    if config.buffers < 2 {
        return Err(ForecastError::TooFewBuffers(config.buffers));
    }
    let samples = evidence.histogram.count();
    if samples == 0 {
        return Err(ForecastError::NoSamples);
    }
    let slack_ns = config.slack_ns();
    if slack_ns <= 0 {
        return Ok(Path::NoSlack);
    }
    let slack = slack_ns as u64;
    Ok(match evidence.histogram.count_above(slack) {
        0 => Path::Beyond { slack, samples },
        late => Path::Observed { late, samples },
    })
}

/// Forecasts the mean time to underrun of one buffer configuration.
pub fn forecast(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
) -> Result<Forecast, ForecastError> {
    if model == Model::Response {
        if let Some(response) = super::response::forecast_response(evidence, config) {
            return response;
        }
    }
    let path = path(evidence, &config)?;
    let slack_ns = config.slack_ns();
    let cycle_s = model.cycle(&config).as_secs_f64();
    let row = |p_late: Option<f64>,
               p_late_ci: Option<[f64; 2]>,
               mttf_ci_s: [Option<f64>; 2],
               basis: Basis| Forecast {
        buffers: config.buffers,
        buffer_period_ns: config.buffer_period.0,
        compute_ns: config.compute.0,
        slack_ns,
        p_late,
        p_late_ci,
        mttf_s: p_late.map(|probability| cycle_s / probability),
        mttf_ci_s,
        basis,
        model,
        backlog_underruns_per_s: super::backlog::expected_underruns_per_period(
            evidence.histogram,
            &config,
        )
        .map(|per_period| per_period / config.buffer_period.as_secs_f64()),
    };
    let mttf_of = |probability: f64| {
        if probability > 0.0 {
            Some(cycle_s / probability)
        } else {
            None
        }
    };
    let (slack, samples) = match path {
        Path::NoSlack => {
            return Ok(row(
                Some(1.0),
                Some([1.0, 1.0]),
                [Some(cycle_s), Some(cycle_s)],
                Basis::NoSlack,
            ))
        }
        Path::Observed { late, samples } => {
            let (lower, upper) = poisson_interval(late);
            let samples_f = samples as f64;
            let p_low = lower / samples_f;
            let p_high = (upper / samples_f).min(1.0);
            return Ok(row(
                Some(late as f64 / samples_f),
                Some([p_low, p_high]),
                [mttf_of(p_high), mttf_of(p_low)],
                Basis::Observed { late, samples },
            ));
        }
        Path::Beyond { slack, samples } => (slack, samples),
    };
    if let Some(tail) = evidence.tail {
        if let Some(exceedance) = tail.exceedance(slack) {
            if exceedance.probability > 0.0 {
                let (low, high) = exceedance.interval;
                return Ok(row(
                    Some(exceedance.probability),
                    Some([low, high]),
                    [mttf_of(high), mttf_of(low)],
                    Basis::TailProjection {
                        samples,
                        model: tail.describe(),
                    },
                ));
            }
        }
    }
    let p_high = (zero_events_upper_bound() / samples as f64).min(1.0);
    Ok(row(
        None,
        Some([0.0, p_high]),
        [mttf_of(p_high), None],
        Basis::BeyondData { samples },
    ))
}

/// A verdict's answer for one configuration, with no more of the forecast than it takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The tail projection's interval lies wholly on one side of what the class needs, so one
    /// exact test decided and the interval's ends were never computed: `suitable` with the
    /// point estimate of the MTTF, s.
    Decided { suitable: bool, mttf_s: f64 },
    /// Every other case: the whole forecast (cheap off the tail, or an interval that straddles
    /// the need, whose ends the verdict shows).
    Forecast(Forecast),
}

/// Whether `config` reaches an MTTF of `needed_s`, asking the tail projection only where the
/// class's limit lies against its interval (`TailModel::locate`): the verdict after every run
/// asks this of 15 classes, and both ends of every interval were most of what rtlab costs
/// after measuring (BENCHMARKS.md, probe cost). Decides exactly as [`forecast`]'s interval
/// would (test `decide_agrees_with_the_whole_forecast`).
pub fn decide(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
    needed_s: f64,
) -> Result<Decision, ForecastError> {
    if model == Model::Response && evidence.probe.is_some() {
        return forecast(evidence, config, model).map(Decision::Forecast);
    }
    if let (Path::Beyond { slack, .. }, Some(tail)) = (path(evidence, &config)?, evidence.tail) {
        let cycle_s = model.cycle(&config).as_secs_f64();
        // MTTF ≥ needed ⇔ P(late) ≤ cycle / needed.
        let limit = cycle_s / needed_s;
        if let Some(estimate) = tail.estimate(slack).filter(|estimate| *estimate > 0.0) {
            if let Some(side) = tail.locate(slack, limit).filter(|side| side.is_ne()) {
                return Ok(Decision::Decided {
                    suitable: side.is_gt(),
                    mttf_s: cycle_s / estimate,
                });
            }
        }
    }
    forecast(evidence, config, model).map(Decision::Forecast)
}
