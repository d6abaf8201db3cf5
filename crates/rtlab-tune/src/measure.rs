//! One round of measurement (the `rtlab run` probe's rt-high class, through `rtlab_session`) and
//! the judgement of two arms with `rtlab compare`'s bootstrap (`rtlab_analysis::compare`).

use crate::error::TuneError;
use rtlab_analysis::compare::{compare, Change, CompareOptions};
use rtlab_core::tune_report::SettingEffect;
use rtlab_core::{Nanos, RunRecord};
use rtlab_probe::{Class, ProbeConfig};
use rtlab_session::{LoadRequest, Observer, RunConfig, Session, SessionProgress};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The figure each setting is judged on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    P50,
    P90,
    P99,
    P99_9,
}

impl Figure {
    /// `p99`, as the flag and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Figure::P50 => "p50",
            Figure::P90 => "p90",
            Figure::P99 => "p99",
            Figure::P99_9 => "p99.9",
        }
    }

    /// The key `rtlab_analysis::compare` uses.
    fn key(self) -> &'static str {
        &self.name()[1..]
    }

    pub fn parse(text: &str) -> Result<Figure, String> {
        [Figure::P50, Figure::P90, Figure::P99, Figure::P99_9]
            .into_iter()
            .find(|figure| figure.name() == text.trim())
            .ok_or_else(|| format!("'{text}': give p50, p90, p99 or p99.9"))
    }
}

/// How a round is measured.
#[derive(Clone, Debug)]
pub struct RoundConfig {
    pub cpus: Vec<usize>,
    pub round: Nanos,
    pub warmup: Nanos,
    pub period: Nanos,
    pub cmdline: Vec<String>,
}

/// Forwards the session's progress with the round's place in the whole.
struct RoundObserver<'a> {
    offset_ns: u64,
    forward: &'a mut dyn FnMut(u64),
}

impl Observer for RoundObserver<'_> {
    fn progress(&mut self, progress: &SessionProgress) {
        (self.forward)(self.offset_ns + progress.elapsed_ns);
    }
}

/// Measures one round: the rt-high probe on `config.cpus`; `progress` gets the time since the
/// start of the whole (`offset_ns` plus this round's).
pub fn measure_round(
    config: &RoundConfig,
    stop: &Arc<AtomicBool>,
    offset_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<RunRecord, TuneError> {
    let session = Session::new(RunConfig {
        probe: ProbeConfig {
            cpus: config.cpus.clone(),
            classes: vec![Class::RtHigh],
            period: config.period,
            duration: config.round,
            warmup: config.warmup,
            handoff: false,
            peaks_per_series: 4096,
            cpu_dma_latency_us: None,
            compute: None,
        },
        load: LoadRequest::default(),
        explain: None,
        cmdline: config.cmdline.clone(),
    })?
    .with_stop_flag(Arc::clone(stop));
    let mut observer = RoundObserver {
        offset_ns,
        forward: progress,
    };
    Ok(session.run(&mut observer)?)
}

/// How one setting's arms compare.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub effect: Option<SettingEffect>,
    /// Better beyond noise (the interval below 0 and more than compare's negligible change).
    pub better: bool,
    /// Worse beyond noise (the interval above 0 by more than the negligible change).
    pub worse: bool,
    pub reason: String,
}

fn micros(nanos: i64) -> String {
    format!("{:.1}", nanos as f64 / 1000.0)
}

/// Judges arm B (changed) against arm A (as it was) on `figure` at `confidence`.
pub fn judge(
    before: &RunRecord,
    after: &RunRecord,
    figure: Figure,
    confidence: f64,
    seed: u64,
) -> Result<Judgement, TuneError> {
    let options = CompareOptions {
        confidence,
        seed,
        ..CompareOptions::default()
    };
    let comparison = compare(before, after, &options)?;
    let difference = comparison
        .series
        .iter()
        .find(|series| series.metric == rtlab_core::Metric::Wakeup)
        .and_then(|series| series.percentile(figure.key()));
    let Some(difference) = difference else {
        return Ok(Judgement {
            effect: None,
            better: false,
            worse: false,
            reason: "no wake-up series to compare: not kept".into(),
        });
    };
    let (samples_before, samples_after) = (before.series[0].count, after.series[0].count);
    let effect = SettingEffect {
        figure: figure.name().into(),
        before_ns: difference.a_ns,
        after_ns: difference.b_ns,
        difference_ns: difference.difference_ns,
        difference_ci_ns: difference.difference_ci_ns,
        relative: difference.relative,
        relative_ci: difference.relative_ci,
        samples_before,
        samples_after,
    };
    let percent = (confidence * 100.0).round();
    let interval = difference
        .difference_ci_ns
        .map(|[low, high]| format!("[{}, {}] us", micros(low), micros(high)))
        .unwrap_or_default();
    let (better, reason) = match difference.change {
        Change::Better => (
            true,
            format!(
                "kept: {} {} us lower, {percent}% interval {interval} below 0",
                figure.name(),
                micros(-difference.difference_ns)
            ),
        ),
        Change::Worse => (
            false,
            format!(
                "put back: worse, {} {} us higher, {percent}% interval {interval}",
                figure.name(),
                micros(difference.difference_ns)
            ),
        ),
        Change::Same => (
            false,
            format!("put back: within noise, {percent}% interval {interval} holds 0 or a change under 5%"),
        ),
        Change::TooFewSamples => (
            false,
            format!(
                "put back: too few samples beyond {} to judge (longer rounds: --round)",
                figure.name()
            ),
        ),
    };
    Ok(Judgement {
        effect: Some(effect),
        better,
        worse: difference.change == Change::Worse,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::{LatencyHistogram, Peak};

    fn arm(scale: u64, seed: u64) -> RunRecord {
        let mut histogram = LatencyHistogram::new();
        let mut state = seed;
        let mut peaks = Vec::new();
        for index in 0..20_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let value = scale + (state >> 40) % (scale / 2);
            histogram.record(value);
            peaks.push(Peak {
                at_ns: index * 1_000_000,
                value_ns: value,
            });
        }
        peaks.sort_by_key(|peak| std::cmp::Reverse(peak.value_ns));
        peaks.truncate(4096);
        let series =
            rtlab_core::rt_high_wakeup_series(0, &histogram, 0, vec![scale * 2; 20], peaks)
                .unwrap();
        RunRecord::new("arm", "2026-12-06T17:00:00Z", 20_000_000_000, vec![series])
    }

    #[test]
    fn a_large_improvement_is_better_and_the_same_machine_is_not() {
        let judged = judge(&arm(100_000, 1), &arm(40_000, 2), Figure::P99, 0.95, 7).unwrap();
        assert!(judged.better, "{judged:?}");
        assert!(judged.reason.starts_with("kept"), "{}", judged.reason);
        let effect = judged.effect.unwrap();
        assert!(effect.difference_ci_ns.unwrap()[1] < 0);
        let same = judge(&arm(100_000, 1), &arm(100_000, 3), Figure::P99, 0.95, 7).unwrap();
        assert!(!same.better, "{same:?}");
        let worse = judge(&arm(40_000, 1), &arm(100_000, 2), Figure::P99, 0.95, 7).unwrap();
        assert!(!worse.better && worse.reason.contains("worse"), "{worse:?}");
    }

    #[test]
    fn figures_parse_by_their_names() {
        assert_eq!(Figure::parse("p99.9").unwrap(), Figure::P99_9);
        assert_eq!(Figure::P99.key(), "99");
        assert!(Figure::parse("p95").is_err());
    }
}
