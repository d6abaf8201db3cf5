//! The buffer experiment as text (`rtlab buffer-experiment`): the producer's wake-up latency and
//! the underruns counted for each buffer count.

use crate::micros;
use rtlab_core::buffer_experiment::ExperimentResult;
use rtlab_core::Nanos;
use std::fmt::Write;

/// One line for the run, one per buffer count.
pub fn outcome(result: &ExperimentResult, period: Nanos, compute: Nanos) -> String {
    crate::to_text(|out| {
        writeln!(
            out,
            "{} periods of {} ms, compute {} µs, producer {} — wake-up p99 {} µs, max {} µs",
            result.periods,
            period.0 as f64 / 1e6,
            compute.0 / 1_000,
            result.producer_policy.name(),
            micros(result.wakeup.value_at_quantile(0.99)),
            micros(result.wakeup.max()),
        )?;
        for (buffers, checked, underruns) in &result.underruns {
            writeln!(
                out,
                "n = {buffers}: {underruns} underruns in {checked} buffers"
            )?;
        }
        Ok(())
    })
}
