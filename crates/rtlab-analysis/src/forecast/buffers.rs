//! Buffer tables and the least buffering for a target: many forecasts of one distribution, over
//! buffer counts (002's Figures 6-7) or over buffer periods and counts (what to configure).

use super::evidence::{BufferConfig, LatencyEvidence};
use super::model::forecast;
use super::outcome::{Forecast, ForecastError, Model};
use crate::classes::Rate;
use rtlab_core::Nanos;

/// Forecasts for `n = 2..=max_buffers` buffers of one period: the table of 002's Figures 6-7.
pub fn buffer_table(
    evidence: LatencyEvidence<'_>,
    buffer_period: Nanos,
    compute: Nanos,
    max_buffers: u32,
    model: Model,
) -> Result<Vec<Forecast>, ForecastError> {
    (2..=max_buffers.max(2))
        .map(|buffers| {
            forecast(
                evidence,
                BufferConfig {
                    buffers,
                    buffer_period,
                    compute,
                },
                model,
            )
        })
        .collect()
}

/// The buffer periods searched when the question leaves `t` open: 125 µs to 128 ms, doubling.
pub fn default_periods() -> Vec<Nanos> {
    (0..=10).map(|step| Nanos(125_000u64 << step)).collect()
}

/// The least buffering `(n − 1)·t` among `periods` × `2..=max_buffers` whose MTTF meets `target`.
///
/// Ties in buffering go to the larger `t` (fewer wake-ups). Configurations whose compute time does
/// not fit a period are skipped. `None` when nothing searched reaches the target, or the data can't
/// tell for any configuration that would.
pub fn least_buffering(
    evidence: LatencyEvidence<'_>,
    target: Rate,
    periods: &[Nanos],
    compute: Nanos,
    max_buffers: u32,
    model: Model,
) -> Result<Option<Forecast>, ForecastError> {
    let mut best: Option<Forecast> = None;
    for &buffer_period in periods {
        if compute >= buffer_period {
            continue;
        }
        for buffers in 2..=max_buffers.max(2) {
            let config = BufferConfig {
                buffers,
                buffer_period,
                compute,
            };
            let row = forecast(evidence, config, model)?;
            if row.meets(target) != Some(true) {
                continue;
            }
            let better = match &best {
                None => true,
                Some(current) => {
                    let (mine, theirs) = (config.buffering(), current.config().buffering());
                    mine < theirs || (mine == theirs && buffer_period.0 > current.buffer_period_ns)
                }
            };
            if better {
                best = Some(row);
            }
            // More buffers at this period only add buffering.
            break;
        }
    }
    Ok(best)
}
