//! A forecast row beside a periodic interferer (issue 35, items 2 and 3): the interferer's
//! glitches as a range over how its bursts line up with the application's cycle
//! (`interference::alignment_rates`), plus the rest of the stalls (the response model on the
//! probe's series without the interferer's samples); or, where an assumption of that analysis
//! fails, which one, instead of a number.
//!
//! Between `forecast_study` (which calls it per row) and the models: the model's own forecast is
//! computed as before and then either widened into the range or withdrawn.

use crate::application::{AppClock, Counting};
use crate::forecast::{
    describe_seconds, forecast, BufferConfig, Forecast, LatencyEvidence, Model, ProbeEvidence,
};
use crate::interference::{alignment_rates_with_rest, describe, name_of, PeriodicInterferer};
use rtlab_core::LatencyHistogram;
use serde::Serialize;

/// The range over alignments, MTTF in s (the interferer's rate at that alignment plus the rest's
/// point estimate); `None` is "none over the horizon".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Alignment {
    /// The worst alignment: the interferer's most glitches.
    pub least_mttf_s: Option<f64>,
    pub median_mttf_s: Option<f64>,
    /// The best alignment.
    pub most_mttf_s: Option<f64>,
    /// The rest of the stalls alone (the response model without the interferer's samples),
    /// with its interval.
    pub independent_mttf_s: Option<f64>,
    pub independent_mttf_ci_s: [Option<f64>; 2],
    /// The stretch each alignment's rate was counted over (the run's length), s.
    pub horizon_s: f64,
    /// Share of the interferer's bursts that reach the application (1: it holds every CPU at
    /// once).
    pub hit_share: f64,
    pub interferer: String,
}

/// An assumption the periodic analysis needs that the run shows false.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refusal {
    /// `steady-period`, `clock-runs-on` or `no-free-cpu`.
    pub assumption: &'static str,
    pub text: String,
}

/// What the periodic analysis made of one row.
#[derive(Clone, Debug, PartialEq)]
pub enum PeriodicAnswer {
    Alignment(Alignment),
    Refused(Refusal),
}

/// What a row's periodic analysis reads beyond the row's own evidence.
pub struct PeriodicContext<'a> {
    pub interferer: &'a PeriodicInterferer,
    /// The CPUs the run measured.
    pub measured: &'a [u32],
    pub clock: AppClock,
    /// The run's length, ns: the horizon of each alignment's rate.
    pub horizon_ns: u64,
}

/// Whether the interferer holds every measured CPU at once.
fn holds_every_cpu(interferer: &PeriodicInterferer, measured: &[u32]) -> bool {
    interferer.at_once && measured.iter().all(|cpu| interferer.cpus.contains(cpu))
}

/// The probe's evidence without the interferer's samples: the late samples whose stall ended
/// within 100 µs of one of its bursts' ends, out of the wake-up histogram and the late list, and
/// their activations out of the response series (a wake-up `L` late ended its work at least
/// `L + c_p` after the deadline: the lowest such response goes with it). Left in the response
/// series, they would be activations that ended late after waking on time: stalls during the
/// compute, counted again in the rest.
fn without_interferer(probe: &ProbeEvidence, interferer: &PeriodicInterferer) -> ProbeEvidence {
    const MATCH_NS: u64 = 100_000;
    let ends = &interferer.burst_ends_ns;
    let is_its = |end: u64| {
        let index = ends.partition_point(|burst_end| *burst_end + MATCH_NS < end);
        ends.get(index)
            .is_some_and(|burst_end| burst_end.abs_diff(end) <= MATCH_NS)
    };
    let mut rest = probe.clone();
    let Some(late) = &probe.late else {
        return rest;
    };
    // `(intended wake-up, latency)` of every late sample, the interferer's and the rest.
    let (theirs, kept): (Vec<_>, Vec<_>) = late
        .samples
        .iter()
        .copied()
        .partition(|(at, latency)| is_its(at + latency));
    // The histogram without those values (each removed from its bucket).
    let histogram = probe.wakeup.inner();
    let mut buckets: Vec<(u64, u64)> = probe.wakeup.buckets();
    for (_, latency) in &theirs {
        let bucket = histogram.highest_equivalent(*latency);
        if let Some((_, count)) = buckets.iter_mut().find(|(value, _)| *value == bucket) {
            *count = count.saturating_sub(1);
        }
    }
    let mut wakeup = LatencyHistogram::new();
    for (value, count) in buckets {
        wakeup.record_n(value, count);
    }
    rest.wakeup = wakeup;
    if let Some(response) = &mut rest.response {
        let histogram = response.histogram.inner();
        let mut buckets: Vec<(u64, u64)> = response.histogram.buckets();
        for (_, latency) in &theirs {
            let least = histogram.lowest_equivalent(latency.saturating_add(response.compute.0));
            let entry = match buckets
                .iter()
                .position(|(value, count)| *value >= least && *count > 0)
            {
                Some(index) => Some(index),
                None => buckets.iter().rposition(|(_, count)| *count > 0),
            };
            if let Some(index) = entry {
                let (_, count) = &mut buckets[index];
                *count -= 1;
            }
        }
        let mut kept = LatencyHistogram::new();
        for (value, count) in buckets {
            kept.record_n(value, count);
        }
        response.histogram = kept;
    }
    if let Some(late) = &mut rest.late {
        late.samples = kept;
    }
    rest
}

/// Steps of the slack a burst can take from a job, tabulated for [`SlackTaken`].
const SLACK_STEPS: u64 = 64;

/// The rest of the stalls against a job a burst delayed by `d` without failing it: the rest's
/// chance of failing one job whose slack is `d` shorter, less its chance with the whole slack,
/// by `d` in steps of the slack (a burst a little shorter than the slack leaves the job only
/// what an ordinary wake-up latency takes). The chance per job is the rest's rate times the
/// application's period (at most 1), from the same model on the same evidence, with the compute
/// `c + d` (the slack `x − d`).
struct SlackTaken {
    step_ns: u64,
    added: Vec<f64>,
}

impl SlackTaken {
    /// The added chance for a job delayed by `taken`: the step at or below it.
    fn added(&self, taken: u64) -> f64 {
        if self.step_ns == 0 {
            return 0.0;
        }
        let index = (taken / self.step_ns) as usize;
        self.added
            .get(index)
            .or(self.added.last())
            .copied()
            .unwrap_or(0.0)
    }
}

fn slack_taken(evidence: LatencyEvidence<'_>, config: BufferConfig, model: Model) -> SlackTaken {
    let slack = config.slack_ns().max(0) as u64;
    let period_s = config.buffer_period.as_secs_f64();
    let chance = |taken: u64| {
        let shorter = BufferConfig {
            compute: rtlab_core::Nanos(config.compute.0 + taken),
            ..config
        };
        forecast(evidence, shorter, model)
            .ok()
            .and_then(|row| row.mttf_s)
            .map_or(0.0, |mttf| (period_s / mttf).min(1.0))
    };
    let step_ns = slack / SLACK_STEPS;
    if step_ns == 0 {
        return SlackTaken {
            step_ns: 0,
            added: Vec::new(),
        };
    }
    let whole = chance(0);
    let added = (0..=SLACK_STEPS)
        .map(|step| (chance(step * step_ns) - whole).max(0.0))
        .collect();
    SlackTaken { step_ns, added }
}

/// The periodic analysis of one row: `row` is the model's forecast of `config` on `evidence`.
pub fn periodic_answer(
    context: &PeriodicContext<'_>,
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
    model: Model,
) -> PeriodicAnswer {
    let interferer = context.interferer;
    let name = name_of(interferer);
    if !interferer.steady {
        return PeriodicAnswer::Refused(Refusal {
            assumption: "steady-period",
            text: format!(
                "no number: {} — how its bursts line up with the application's cycle is neither fixed for a run nor random, so neither the range over alignments nor a rate of independent stalls holds",
                describe(interferer, context.measured)
            ),
        });
    }
    let every_cpu = holds_every_cpu(interferer, context.measured);
    if context.clock == AppClock::StopsWithCpus && every_cpu {
        return PeriodicAnswer::Refused(Refusal {
            assumption: "clock-runs-on",
            text: format!(
                "no number: {name} holds every CPU at once for {:.1} ms every {:.1} ms, and the application's clock (kept by a thread, as JACK's dummy driver's) stops with them, so whether a burst costs a glitch depends on how the program resumes, not on the latency",
                interferer.burst_ns as f64 / 1e6,
                interferer.period_ns as f64 / 1e6
            ),
        });
    }
    // Bursts that leave a CPU free: a real-time thread is pushed to the free CPU, which the
    // analysis does not model (measured: spinners of 2.2 ms every 50 ms, one CPU at a time,
    // gave JACK 0.15 glitches/s where every burst counted made 48/s).
    if !every_cpu && context.measured.len() > 1 {
        return PeriodicAnswer::Refused(Refusal {
            assumption: "no-free-cpu",
            text: format!(
                "no number: {name}'s bursts leave a CPU free ({}), and a real-time thread moves to a free CPU, which the analysis of its bursts does not model",
                if interferer.at_once {
                    "they do not take every CPU"
                } else {
                    "they take one CPU at a time"
                }
            ),
        });
    }
    // Bursts at once are one sequence, and reach the application on every CPU.
    let mut sequence = interferer.clone();
    sequence.members.truncate(1);
    let hit_share = 1.0;
    let rest_probe = evidence
        .probe
        .map(|probe| without_interferer(probe, interferer));
    let rest_evidence = LatencyEvidence {
        probe: rest_probe.as_ref(),
        ..evidence
    };
    let rest = forecast(rest_evidence, config, model).ok();
    let extra = slack_taken(rest_evidence, config, model);
    let rates = alignment_rates_with_rest(
        &sequence,
        &config,
        evidence.counting,
        context.horizon_ns,
        hit_share,
        &|taken| extra.added(taken),
    );
    let rest_rate = rest
        .as_ref()
        .and_then(|row| row.mttf_s)
        .map_or(0.0, |mttf| 1.0 / mttf);
    let mttf = |rate: f64| (rate > 0.0).then(|| 1.0 / rate);
    PeriodicAnswer::Alignment(Alignment {
        least_mttf_s: mttf(rates.most_per_s + rest_rate),
        median_mttf_s: mttf(rates.median_per_s + rest_rate),
        most_mttf_s: mttf(rates.least_per_s + rest_rate),
        independent_mttf_s: rest.as_ref().and_then(|row| row.mttf_s),
        independent_mttf_ci_s: rest.as_ref().map_or([None, None], |row| row.mttf_ci_s),
        horizon_s: rates.horizon_s,
        hit_share,
        interferer: name,
    })
}

/// The row's numbers under the answer: the median alignment's MTTF, the interval from the worst
/// alignment with the rest's upper rate to the best with its lower; withdrawn when refused.
pub fn apply(row: &mut Forecast, answer: &PeriodicAnswer) {
    let period_s = row.buffer_period_ns as f64 / 1e9;
    match answer {
        PeriodicAnswer::Refused(_) => {
            row.p_late = None;
            row.p_late_ci = None;
            row.mttf_s = None;
            row.mttf_ci_s = [None, None];
        }
        PeriodicAnswer::Alignment(alignment) => {
            let rate = |mttf: Option<f64>| mttf.map_or(0.0, |mttf| 1.0 / mttf);
            let rest = rate(alignment.independent_mttf_s);
            let interferer_of = |total: Option<f64>| (rate(total) - rest).max(0.0);
            let [rest_low_mttf, rest_high_mttf] = alignment.independent_mttf_ci_s;
            let worst = interferer_of(alignment.least_mttf_s) + rate(rest_low_mttf);
            let best = interferer_of(alignment.most_mttf_s)
                + rest_high_mttf.map_or(0.0, |mttf| 1.0 / mttf);
            let mttf = |rate: f64| (rate > 0.0).then(|| 1.0 / rate);
            row.mttf_s = alignment.median_mttf_s;
            row.mttf_ci_s = [mttf(worst), mttf(best)];
            row.p_late = Some((rate(alignment.median_mttf_s) * period_s).min(1.0));
            row.p_late_ci = Some([(best * period_s).min(1.0), (worst * period_s).min(1.0)]);
        }
    }
}

/// The answer in words for a verdict: "between one glitch every 0.4 s and none in 30 s,
/// depending on how qhog7's 70.0 ms period lines up with the application's cycle; median one
/// every 6 s (the other stalls alone: one every 2 min)", or the refusal.
pub fn describe_answer(answer: &PeriodicAnswer, event: &str, counting: Counting) -> String {
    match answer {
        PeriodicAnswer::Refused(refusal) => refusal.text.clone(),
        PeriodicAnswer::Alignment(alignment) => {
            let horizon = describe_seconds(alignment.horizon_s);
            let every = |mttf: Option<f64>| match mttf {
                Some(mttf) => format!("one {event} every {}", describe_seconds(mttf)),
                None => format!("none in {horizon}"),
            };
            let rest = match alignment.independent_mttf_s {
                Some(mttf) => format!("one every {}", describe_seconds(mttf)),
                None => "none seen".to_owned(),
            };
            // Within 5 % of each other the alignment hardly matters.
            let narrow = match (alignment.least_mttf_s, alignment.most_mttf_s) {
                (Some(least), Some(most)) => most <= 1.05 * least,
                (None, None) => true,
                _ => false,
            };
            let whose = if alignment.interferer.starts_with("an unnamed") {
                "the unnamed task".to_owned()
            } else {
                alignment.interferer.clone()
            };
            let range = if narrow {
                format!(
                    "{} whatever the alignment of {whose}'s bursts with the application's cycle",
                    every(alignment.median_mttf_s)
                )
            } else {
                format!(
                    "between {} and {}, depending on how {whose}'s bursts line up with the application's cycle; median {}",
                    every(alignment.least_mttf_s),
                    every(alignment.most_mttf_s),
                    every(alignment.median_mttf_s)
                )
            };
            format!(
                "{range} (over {horizon}, as long as this run; the other stalls alone: {rest}); counting {}",
                counting.describe(event)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::{ComputeEvidence, LateSamples};
    use crate::interference::Member;
    use rtlab_core::Nanos;

    /// 20 s of a 1 ms probe on CPU 1 that computed 100 µs after each wake-up, beside bursts of
    /// 1.2 ms every 25 ms: each burst made one wake-up late (ending with the burst) and that
    /// activation's response late by as much; nothing else was late.
    fn probe_beside_bursts() -> (ProbeEvidence, PeriodicInterferer) {
        let (mut wakeup, mut response) = (LatencyHistogram::new(), LatencyHistogram::new());
        let (mut samples, mut ends) = (Vec::new(), Vec::new());
        let bursts = 800u64;
        for burst in 0..bursts {
            let end = 5_000_000 + burst * 25_000_000;
            // The wake-up's place in the burst walks over the probe's period.
            let latency = 1_200_000 - (burst * 37_000) % 1_000_000;
            wakeup.record(latency);
            response.record(latency + 100_000);
            samples.push((end - latency, latency));
            ends.push(end);
        }
        wakeup.record_n(20_000, 20_000 - bursts);
        response.record_n(120_000, 20_000 - bursts);
        let probe = ProbeEvidence {
            wakeup,
            trials: 20_000,
            cpus: 1,
            period: Nanos::from_millis(1),
            response: Some(ComputeEvidence {
                histogram: response,
                compute: Nanos::from_micros(100),
            }),
            late: Some(LateSamples {
                samples,
                complete_above_ns: 500_000,
            }),
        };
        let interferer = PeriodicInterferer {
            members: vec![Member {
                culprit: None,
                cpus: vec![1],
                phase_ns: 5_000_000,
                bursts_seen: bursts,
            }],
            period_ns: 25_000_000,
            burst_ns: 1_200_000,
            burst_max_ns: 1_200_000,
            cpus: vec![1],
            at_once: true,
            bursts_seen: bursts,
            jitter_ns: 0,
            steady: true,
            burst_ends_ns: ends,
        };
        (probe, interferer)
    }

    #[test]
    fn a_burst_shorter_than_the_slack_leaves_the_job_it_delays_to_the_rest_of_the_stalls() {
        // 256 frames × 2 at 48 kHz, c = 60 %: slack 2.133 ms. Bursts of 1.2 ms every 25 ms
        // cannot fail a job alone, and the rest of the stalls (1.0 ms, ten a second, seen by a
        // 1 ms probe without a compute, as issue 35's pinned cells ran it) cannot fail one with
        // its whole slack; but a job the burst delayed by 1.2 ms has 0.933 ms left, and a 1.0 ms
        // stall then fails it (JACK: 0.59 glitches/s in the validation's cell where this
        // forecast said 0.11). By hand: a 1.0 ms sample stands for a stall of 1.5 ms, which
        // fails a job with 0.933 ms of slack when it starts within 0.567 ms before its wake-up:
        // 10/s × 0.567/5.333 = 1.06/s, a chance of 0.0057 per job; 60 % of the bursts land in a
        // job's 3.2 ms of compute and delay it by the whole 1.2 ms (the rest cover the next
        // job's release: it did not wake through a timer, and is left to the burst alone):
        // 40/s × 0.6 × 0.0057 = 0.14/s.
        let (mut wakeup, mut samples, mut ends) = (LatencyHistogram::new(), Vec::new(), Vec::new());
        let bursts = 800u64;
        for burst in 0..bursts {
            let end = 5_000_000 + burst * 25_000_000;
            let latency = 1_200_000 - 700_000;
            wakeup.record(latency);
            samples.push((end - latency, latency));
            ends.push(end);
        }
        for stall in 0..200u64 {
            // Between the bursts: 100 ms apart, 12.5 ms after a burst's end.
            let at = 17_500_000 + stall * 100_000_000;
            wakeup.record(1_000_000);
            samples.push((at, 1_000_000));
        }
        samples.sort_unstable();
        wakeup.record_n(20_000, 20_000 - bursts - 200);
        let probe = ProbeEvidence {
            wakeup,
            trials: 20_000,
            cpus: 1,
            period: Nanos::from_millis(1),
            response: None,
            late: Some(LateSamples {
                samples,
                complete_above_ns: 200_000,
            }),
        };
        let interferer = PeriodicInterferer {
            members: vec![Member {
                culprit: None,
                cpus: vec![1],
                phase_ns: 5_000_000,
                bursts_seen: bursts,
            }],
            period_ns: 25_000_000,
            burst_ns: 1_200_000,
            burst_max_ns: 1_200_000,
            cpus: vec![1],
            at_once: true,
            bursts_seen: bursts,
            jitter_ns: 0,
            steady: true,
            burst_ends_ns: ends,
        };
        let histogram = probe.wakeup.clone();
        let evidence = LatencyEvidence {
            probe: Some(&probe),
            ..LatencyEvidence::of_histogram(&histogram)
        };
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos(5_333_333),
            compute: Nanos(3_200_000),
        };
        let context = PeriodicContext {
            interferer: &interferer,
            measured: &[1],
            clock: AppClock::Device,
            horizon_ns: 20_000_000_000,
        };
        let PeriodicAnswer::Alignment(alignment) =
            periodic_answer(&context, evidence, config, Model::Response)
        else {
            panic!("refused");
        };
        // The rest alone fails nothing with the whole slack.
        assert_eq!(alignment.independent_mttf_s, None, "{alignment:?}");
        let median = alignment.median_mttf_s.map_or(0.0, |mttf| 1.0 / mttf);
        assert!((0.11..=0.17).contains(&median), "{median}/s: {alignment:?}");
    }

    #[test]
    fn the_rest_of_a_computing_probe_keeps_none_of_the_interferers_activations() {
        let (probe, interferer) = probe_beside_bursts();
        let rest = without_interferer(&probe, &interferer);
        assert_eq!(rest.wakeup.count_above(200_000), 0);
        let response = rest.response.as_ref().unwrap();
        assert_eq!(response.histogram.count_above(300_000), 0);
        assert_eq!(response.histogram.count(), rest.wakeup.count());
        // Through the forecast: every late activation was the interferer's, so the rest of the
        // stalls (slack 1.067 ms at 2 × 2.667 ms, c = 1.6 ms) fail nothing.
        let histogram = probe.wakeup.clone();
        let evidence = LatencyEvidence {
            probe: Some(&probe),
            ..LatencyEvidence::of_histogram(&histogram)
        };
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos(2_666_667),
            compute: Nanos(1_600_000),
        };
        let context = PeriodicContext {
            interferer: &interferer,
            measured: &[1],
            clock: AppClock::Device,
            horizon_ns: 20_000_000_000,
        };
        let PeriodicAnswer::Alignment(alignment) =
            periodic_answer(&context, evidence, config, Model::Response)
        else {
            panic!("refused");
        };
        assert_eq!(alignment.independent_mttf_s, None, "{alignment:?}");
    }
}
