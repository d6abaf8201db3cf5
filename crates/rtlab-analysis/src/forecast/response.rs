//! The response model: an application fails a period when its response — woken through its
//! chain, its compute, and everything that interrupts the compute — passes its deadline; counted
//! per stall, the way an audio server counts xruns (issue 27; BENCHMARKS.md "forecast against
//! JACK").
//!
//! Measured against Debian's jackd2 the per-period model (`model.rs`) was optimistic 3–40×, for
//! reasons the probe's own series show:
//!
//! - **Rates, not per-wake-up probabilities.** A late wake-up is a stall that covered the
//!   wake-up; the probe sees each stall once (it skips the periods a stall swallows), so the
//!   count of late samples per second *is* the rate of stalls, whatever the probe's period. The
//!   per-period model divided a per-wake-up probability measured at the probe's 1 ms by the
//!   application's period `t`, which understates the rate by `t / 1 ms`. Here a sample of latency
//!   `L` stands for a stall of about `L + T/2` (`T` the probe's period, the stall's start being
//!   uniform within it), and an application woken every `t` meets that stall late by more than
//!   its slack `x` with probability `min(1, (L + T/2 − x)/t)`: the expected failures per second
//!   are that weight summed over the samples later than `x`, divided by the probe's time.
//! - **Stalls during the compute.** A stall that lands while the application computes delays its
//!   end by the stall's length. A probe that works `c_p` after each wake-up (`rtlab run
//!   --compute`, the `response` series) sees those stalls: the activations whose response minus
//!   `c_p` exceeds `x` while their wake-up did not are stalls of more than `x` during `c_p` of
//!   work. Per second of work they are a rate, and an application works `c/t` of each second.
//!   Without a response series this term is unknown and the forecast is an upper bound on the
//!   MTTF (it can only be shorter), which the words say.
//! - **The chain.** An application woken through a chain (JACK's driver thread wakes the client,
//!   which the scheduler puts on another CPU) fails when a stall covers the wake-up of any
//!   thread in the chain: on `k` CPUs whose stalls are independent (the probe's series of two
//!   CPUs rarely stall together: BENCHMARKS.md) the rate is `k` times one CPU's. The pooled
//!   series is the per-CPU average, multiplied by the chain's CPUs ([`LatencyEvidence::chain`],
//!   at most the CPUs measured).
//!
//! - **How the application counts.** A program that restarts its cycle ([`Counting::Restart`],
//!   JACK) loses one period per stall: the weight above, at most 1. A program that catches up
//!   ([`Counting::CatchUp`], a ring buffer fed by a timer) works through every period the stall
//!   covered, one per `c` while the device takes one per `t`, so a stall `S` past the slack `x`
//!   costs `(S − x)/(t − c)` periods on average over where it starts (`backlog.rs`' count, with
//!   no ceiling), and a stall during the compute at least one. Issue 35: a catch-up producer
//!   under stress-ng saw 41 underruns where 15 stalls were counted once each.
//!
//! Every term is a weighted count of Poisson events; the interval of the sum is the exact
//! (Garwood) interval of the effective count `m²/v` (mean `m`, variance `v` of the weighted sum),
//! scaled back — exact when every weight is equal.

use super::evidence::{BufferConfig, Counting, LateSamples, LatencyEvidence, ProbeEvidence};
use super::outcome::{
    poisson_interval, zero_events_upper_bound, Basis, Forecast, ForecastError, Model, ResponseTerms,
};

impl LateSamples {
    /// Stalls that covered a wake-up on any CPU, a stall seen on several CPUs at once counted
    /// once (its largest sample): samples whose stalls (`[at, at + latency]`) overlap are one.
    fn union_above(&self, floor_ns: u64) -> Vec<u64> {
        let mut spans: Vec<(u64, u64, u64)> = self
            .samples
            .iter()
            .filter(|(_, latency)| *latency > floor_ns)
            .map(|&(at, latency)| (at, at.saturating_add(latency), latency))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        let mut current: Option<(u64, u64)> = None;
        for (start, end, latency) in spans {
            current = match current {
                Some((current_end, largest)) if start <= current_end => {
                    Some((current_end.max(end), largest.max(latency)))
                }
                Some((_, largest)) => {
                    merged.push((0, largest));
                    Some((end, latency))
                }
                None => Some((end, latency)),
            };
        }
        if let Some((_, largest)) = current {
            merged.push((0, largest));
        }
        merged.into_iter().map(|(_, largest)| largest).collect()
    }
}

/// A weighted sum of Poisson counts: `Σ wᵢ·kᵢ`, its variance `Σ wᵢ²·kᵢ` and its largest weight.
#[derive(Default)]
struct WeightedCount {
    mean: f64,
    variance: f64,
    largest_weight: f64,
    events: u64,
}

impl WeightedCount {
    fn add(&mut self, weight: f64, count: u64) {
        if weight <= 0.0 || count == 0 {
            return;
        }
        self.mean += weight * count as f64;
        self.variance += weight * weight * count as f64;
        self.largest_weight = self.largest_weight.max(weight);
        self.events += count;
    }

    fn reach(&mut self, weight: f64) {
        self.largest_weight = self.largest_weight.max(weight);
    }

    /// The interval of the mean at `CONFIDENCE`: Garwood on the effective count.
    fn interval(&self) -> (f64, f64) {
        if self.mean <= 0.0 {
            return (0.0, zero_events_upper_bound() * self.largest_weight);
        }
        let effective = self.mean * self.mean / self.variance;
        let scale = self.variance / self.mean;
        let (low, high) = poisson_interval(effective.round().max(1.0) as u64);
        let rounding = effective / effective.round().max(1.0);
        (low * scale * rounding, high * scale * rounding)
    }
}

/// Failures per second with its interval, for `config` on `probe`.
pub fn response_rate(
    probe: &ProbeEvidence,
    config: &BufferConfig,
    chain: u32,
    counting: Counting,
) -> (f64, (f64, f64), ResponseTerms) {
    let slack = config.slack_ns().max(0) as f64;
    let period_probe = probe.period.0 as f64;
    let period_app = config.buffer_period.0 as f64;
    let chain_cpus = chain.clamp(1, probe.cpus.max(1));
    // Probe seconds per CPU.
    let probe_seconds =
        probe.trials as f64 * probe.period.as_secs_f64() / f64::from(probe.cpus.max(1));
    // A sample stands for a stall of `L + T/2` only where the slack is longer than the probe's
    // period (a stall longer than a period covers one of its wake-ups, at a uniform point); a
    // shorter slack is crossed by ordinary wake-up latencies, and there only a wake-up later
    // than the slack is a failure.
    let floor_of = if slack > period_probe {
        slack - period_probe / 2.0
    } else {
        slack
    };
    let floor = floor_of as u64;
    // What one period's catch-up gains on the device: `t − c` (at least 1 ns; a program with
    // `c ≥ t` never catches up, and its rate is capped at one failure per period below).
    let gain = (period_app - config.compute.0 as f64).max(1.0);
    let weight_of = |latency: u64| {
        if latency as f64 <= floor_of {
            return 0.0;
        }
        let stall = latency as f64 + period_probe / 2.0;
        match counting {
            Counting::Restart => ((stall - slack) / period_app).clamp(0.0, 1.0),
            Counting::CatchUp => ((stall - slack) / gain).max(0.0),
        }
    };
    let mut sum = WeightedCount::default();
    let mut late_wakeups = 0u64;
    let per_cpu_event = 1.0 / (probe_seconds * f64::from(probe.cpus.max(1))).max(f64::MIN_POSITIVE);
    for (value, count) in probe.wakeup.buckets() {
        let weight = weight_of(value);
        if weight > 0.0 {
            late_wakeups += count;
        }
    }
    // A chain on several CPUs meets a stall of any of them; a stall of all CPUs at once (a
    // competitor on every CPU, the whole VM descheduled) once. With every late sample's time
    // known, the stalls of all CPUs are merged; else they are taken as independent.
    let union = probe
        .late
        .as_ref()
        .filter(|late| chain_cpus > 1 && late.complete_above_ns <= floor)
        .map(|late| late.union_above(floor));
    match union {
        Some(union) if probe.cpus > 1 => {
            // Between one CPU (chain of 1) and every CPU (a chain as long as the CPUs).
            let share = f64::from(chain_cpus - 1) / f64::from(probe.cpus - 1);
            for (value, count) in probe.wakeup.buckets() {
                let weight = weight_of(value);
                if weight > 0.0 {
                    sum.add(weight * per_cpu_event * (1.0 - share), count);
                }
            }
            for latency in union {
                sum.add(
                    weight_of(latency) * share / probe_seconds.max(f64::MIN_POSITIVE),
                    1,
                );
            }
        }
        _ => {
            for (value, count) in probe.wakeup.buckets() {
                let weight = weight_of(value);
                if weight > 0.0 {
                    sum.add(weight * per_cpu_event * f64::from(chain_cpus), count);
                }
            }
        }
    }
    let per_event = f64::from(chain_cpus) * per_cpu_event;
    sum.reach(per_event);
    let wakeup_per_s = sum.mean;
    let (mut compute_per_s, mut late_computes) = (None, None);
    if let Some(response) = &probe.response {
        let threshold = slack as u64 + response.compute.0;
        let worked = response.histogram.count_above(threshold);
        let woke_late = probe.wakeup.count_above(slack as u64);
        let stalls = worked.saturating_sub(woke_late);
        // Per second of work, times the application's share of each second spent working.
        let work_seconds = response.histogram.count() as f64 * response.compute.as_secs_f64();
        let share = config.compute.0 as f64 / period_app;
        // A stall `S` during the compute fails the period it lands in; a program that catches
        // up loses `(S − x)/(t − c)` periods, at least that one: the mean over the activations
        // that ended late stands for the stalls behind them.
        let per_stall = match counting {
            Counting::Restart => 1.0,
            Counting::CatchUp => {
                let (mut periods, mut activations) = (0.0, 0u64);
                for (value, count) in response.histogram.buckets() {
                    if value > threshold {
                        let stall = value.saturating_sub(response.compute.0) as f64;
                        periods += ((stall - slack) / gain).max(1.0) * count as f64;
                        activations += count;
                    }
                }
                if activations == 0 {
                    1.0
                } else {
                    periods / activations as f64
                }
            }
        };
        let weight = share * per_stall / work_seconds.max(f64::MIN_POSITIVE);
        let before = sum.mean;
        if share > 0.0 {
            sum.add(weight, stalls);
            sum.reach(weight);
        }
        compute_per_s = Some(sum.mean - before);
        late_computes = Some(stalls);
    }
    let interval = sum.interval();
    (
        sum.mean,
        interval,
        ResponseTerms {
            wakeup_per_s,
            compute_per_s,
            late_wakeups,
            late_computes,
            chain_cpus,
        },
    )
}

/// The response model's forecast of one configuration (see the module doc); `None` when the
/// evidence carries no probe series.
pub(super) fn forecast_response(
    evidence: LatencyEvidence<'_>,
    config: BufferConfig,
) -> Option<Result<Forecast, ForecastError>> {
    let probe = evidence.probe?;
    if config.buffer_period.0 == 0 {
        return Some(Err(ForecastError::ZeroPeriod));
    }
    if config.buffers < 2 {
        return Some(Err(ForecastError::TooFewBuffers(config.buffers)));
    }
    if probe.trials == 0 || probe.period.0 == 0 {
        return Some(Err(ForecastError::NoSamples));
    }
    let period_s = config.buffer_period.as_secs_f64();
    let slack_ns = config.slack_ns();
    let base = Forecast {
        buffers: config.buffers,
        buffer_period_ns: config.buffer_period.0,
        compute_ns: config.compute.0,
        slack_ns,
        p_late: Some(1.0),
        p_late_ci: Some([1.0, 1.0]),
        mttf_s: Some(period_s),
        mttf_ci_s: [Some(period_s), Some(period_s)],
        basis: Basis::NoSlack,
        model: Model::Response,
        backlog_underruns_per_s: None,
    };
    if slack_ns <= 0 {
        return Some(Ok(base));
    }
    let (rate, (low, high), terms) =
        response_rate(probe, &config, evidence.chain, evidence.counting);
    // No program fails more than once a period (a catch-up program with `c ≥ t` that never
    // catches up after its first long stall reaches that).
    let per_period = 1.0 / period_s;
    let (rate, low, high) = (
        rate.min(per_period),
        low.min(per_period),
        high.min(per_period),
    );
    let mttf = |rate: f64| (rate > 0.0).then(|| 1.0 / rate);
    let compute_measured = terms.compute_per_s.is_some() || config.compute.0 == 0;
    Some(Ok(Forecast {
        p_late: Some((rate * period_s).min(1.0)),
        p_late_ci: Some([(low * period_s).min(1.0), (high * period_s).min(1.0)]),
        mttf_s: mttf(rate),
        mttf_ci_s: [mttf(high), mttf(low)],
        basis: Basis::Response {
            samples: probe.wakeup.count(),
            compute_measured,
            probe_compute_ns: probe.response.as_ref().map(|response| response.compute.0),
            counting: evidence.counting,
            terms: Box::new(terms),
        },
        ..base
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::evidence::ComputeEvidence;
    use rtlab_core::{LatencyHistogram, Nanos};

    fn histogram(values: &[(u64, u64)]) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::new();
        for &(value, count) in values {
            histogram.record_n(value, count);
        }
        histogram
    }

    fn config(compute_us: u64) -> BufferConfig {
        BufferConfig {
            buffers: 2,
            buffer_period: Nanos(2_666_667),
            compute: Nanos::from_micros(compute_us),
        }
    }

    /// 60 s of a 1 ms probe on 1 CPU whose 60 000 wake-ups are `wakeup`; nothing else measured.
    fn one_cpu_probe(wakeup: LatencyHistogram) -> ProbeEvidence {
        ProbeEvidence {
            wakeup,
            trials: 60_000,
            cpus: 1,
            period: Nanos::from_millis(1),
            response: None,
            late: None,
        }
    }

    fn probe(late: u64, response: Option<(u64, u64)>) -> ProbeEvidence {
        // 60 s of a 1 ms probe on 2 CPUs: 120 000 wake-ups, `late` of them 5 ms late (a stall
        // far longer than the slack: weight 1).
        let wakeup = histogram(&[(20_000, 120_000 - late), (5_000_000, late)]);
        ProbeEvidence {
            wakeup,
            trials: 120_000,
            cpus: 2,
            period: Nanos::from_millis(1),
            late: None,
            response: response.map(|(compute_us, stalls)| ComputeEvidence {
                histogram: histogram(&[
                    (20_000 + compute_us * 1_000, 120_000 - late - stalls),
                    (5_000_000 + compute_us * 1_000, late + stalls),
                ]),
                compute: Nanos::from_micros(compute_us),
            }),
        }
    }

    #[test]
    fn late_wake_ups_are_a_rate_per_second_whatever_the_period() {
        // 12 stalls in 60 s on 2 CPUs = 0.1 per second on one CPU, whatever t.
        let (rate, _, terms) = response_rate(&probe(12, None), &config(0), 1, Counting::Restart);
        assert!((rate - 0.1).abs() < 1e-9, "{rate}");
        assert_eq!(terms.late_wakeups, 12);
        // A chain of two threads on two CPUs meets both CPUs' stalls.
        let (rate, _, _) = response_rate(&probe(12, None), &config(0), 2, Counting::Restart);
        assert!((rate - 0.2).abs() < 1e-9, "{rate}");
        // A chain cannot span more CPUs than were measured.
        let (rate, _, terms) = response_rate(&probe(12, None), &config(0), 8, Counting::Restart);
        assert!((rate - 0.2).abs() < 1e-9, "{rate}");
        assert_eq!(terms.chain_cpus, 2);
    }

    #[test]
    fn stalls_during_the_work_scale_with_the_application_s_share_of_work() {
        // 6 stalls during 120 000 × 100 µs = 12 s of probe work: 0.5 per second of work; an
        // application working 30 % of each period meets 0.15 per second of them.
        let share = 0.3;
        let compute_us = (2_666.667 * share) as u64;
        let (rate, _, terms) = response_rate(
            &probe(0, Some((100, 6))),
            &config(compute_us),
            1,
            Counting::Restart,
        );
        let expected = 0.5 * compute_us as f64 / 2_666.667;
        assert!((rate - expected).abs() < 1e-3, "{rate} vs {expected}");
        assert_eq!(terms.late_computes, Some(6));
        assert_eq!(terms.late_wakeups, 0);
    }

    #[test]
    fn a_stall_of_every_cpu_at_once_fails_a_chain_once() {
        // 12 stalls on each of 2 CPUs; with their times, the same 12 on both CPUs are 12 stalls
        // for a chain on both, not 24; 12 on each at different times are 24.
        let mut evidence = probe(24, None);
        let at = |index: u64| index * 1_000_000_000;
        evidence.late = Some(LateSamples {
            samples: (0..12)
                .flat_map(|index| [(at(index), 5_000_000), (at(index) + 500_000, 5_000_000)])
                .collect(),
            complete_above_ns: 0,
        });
        let (together, _, _) = response_rate(&evidence, &config(0), 2, Counting::Restart);
        assert!((together - 0.2).abs() < 1e-9, "{together}");
        evidence.late = Some(LateSamples {
            samples: (0..24).map(|index| (at(index), 5_000_000)).collect(),
            complete_above_ns: 0,
        });
        let (apart, _, _) = response_rate(&evidence, &config(0), 2, Counting::Restart);
        assert!((apart - 0.4).abs() < 1e-9, "{apart}");
        // A chain of one thread meets one CPU's stalls either way.
        let (single, _, _) = response_rate(&evidence, &config(0), 1, Counting::Restart);
        assert!((single - 0.2).abs() < 1e-9, "{single}");
    }

    #[test]
    fn a_slack_shorter_than_the_probe_s_period_counts_only_the_wake_ups_later_than_it() {
        // 250 µs slack, 1 ms probe: the 20 µs wake-ups are no stalls; 12 of 400 µs are failures.
        let wakeup = histogram(&[(20_000, 59_988), (400_000, 12)]);
        let probe = one_cpu_probe(wakeup);
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos::from_micros(250),
            compute: Nanos::ZERO,
        };
        let (rate, _, terms) = response_rate(&probe, &config, 1, Counting::Restart);
        assert_eq!(terms.late_wakeups, 12);
        assert!((rate - 12.0 / 60.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn the_interval_is_garwood_s_when_weights_are_equal() {
        let (rate, (low, high), _) =
            response_rate(&probe(12, None), &config(0), 1, Counting::Restart);
        let (garwood_low, garwood_high) = poisson_interval(12);
        assert!((low - garwood_low / 120.0).abs() < 1e-9);
        assert!((high - garwood_high / 120.0).abs() < 1e-9);
        assert!(low < rate && rate < high);
        // No stall at all: only an upper bound, from one probe-time's worth of exposure.
        let (rate, (low, high), _) =
            response_rate(&probe(0, None), &config(0), 1, Counting::Restart);
        assert_eq!((rate, low), (0.0, 0.0));
        assert!((high - zero_events_upper_bound() / 120.0).abs() < 1e-9);
    }

    #[test]
    fn a_short_stall_fails_only_the_periods_whose_wake_up_it_covers_past_the_slack() {
        // A stall of 2.4 ms (a sample of 1.9 ms + half the 1 ms period) is 0.55 ms past a 1.85 ms
        // slack: a 2.667 ms period's wake-up falls in that last 0.55 ms with probability 0.206.
        // A sample of 1.3 ms, a stall of 1.8 ms, never reaches the slack.
        let wakeup = histogram(&[(20_000, 59_998), (1_300_000, 1), (1_900_000, 1)]);
        let probe = one_cpu_probe(wakeup);
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos(2_666_667),
            compute: Nanos(816_667),
        };
        assert_eq!(config.slack_ns(), 1_850_000);
        // 0.206 of one stall in 60 s (to the histogram's precision).
        let expected = 550_000.0 / 2_666_667.0 / 60.0;
        let (rate, _, _) = response_rate(&probe, &config, 1, Counting::Restart);
        assert!((rate / expected - 1.0).abs() < 0.01, "{rate} vs {expected}");
    }

    #[test]
    fn a_catch_up_program_loses_every_period_a_stall_made_late() {
        // 10 stalls of 5 ms (samples of 4.5 ms + half the 1 ms period) in 60 s on one CPU,
        // against 2 buffers of 1 ms with 100 µs of work: slack 0.9 ms. Restarting, each stall
        // is one failure; catching up, each costs (5 − 0.9)/(1 − 0.1) = 4.56 periods, what the
        // backlog model's simulated producer loses (4 or 5 by the stall's phase: `backlog.rs`).
        let wakeup = histogram(&[(20_000, 59_990), (4_500_000, 10)]);
        let probe = one_cpu_probe(wakeup);
        let config = BufferConfig {
            buffers: 2,
            buffer_period: Nanos::from_millis(1),
            compute: Nanos::from_micros(100),
        };
        let (restart, _, _) = response_rate(&probe, &config, 1, Counting::Restart);
        assert!((restart - 10.0 / 60.0).abs() < 1e-9, "{restart}");
        let (catch_up, (low, high), terms) = response_rate(&probe, &config, 1, Counting::CatchUp);
        assert_eq!(terms.late_wakeups, 10);
        let per_stall = catch_up * 60.0 / 10.0;
        // The histogram keeps 3 digits: 4.5 ms reads back within 0.1 %.
        assert!((per_stall - 4.1 / 0.9).abs() < 0.01, "{per_stall}");
        let simulated = crate::forecast::underruns_after_stall(&config, 5_000_000).unwrap();
        assert!(
            (simulated as f64 - 1.0..=simulated as f64).contains(&per_stall),
            "{per_stall} vs {simulated}"
        );
        // Ten events with equal weights: Garwood's interval on 10, scaled by the weight.
        assert!(low < catch_up && catch_up < high);
        // A stall shorter than the slack costs neither anything.
        let probe = one_cpu_probe(histogram(&[(20_000, 59_990), (300_000, 10)]));
        let (rate, _, _) = response_rate(&probe, &config, 1, Counting::CatchUp);
        assert_eq!(rate, 0.0);
    }

    #[test]
    fn a_catch_up_program_owes_the_periods_of_a_stall_during_its_compute_too() {
        // 6 stalls of 5 ms during 100 µs of probe work (wake-ups on time), an application
        // working 30 % of 2.667 ms: each is one failure restarting, (5 − x)/(t − c) catching up.
        let compute_us = 800;
        let mut evidence = probe(0, Some((100, 6)));
        let config = config(compute_us);
        let (restart, _, _) = response_rate(&evidence, &config, 1, Counting::Restart);
        let (catch_up, _, terms) = response_rate(&evidence, &config, 1, Counting::CatchUp);
        let slack = config.slack_ns() as f64;
        let gain = (2_666_667 - compute_us * 1_000) as f64;
        // The response series' stalls read 5 ms + 20 µs (the wake-up) past the work.
        let per_stall = (5_020_000.0 - slack) / gain;
        assert_eq!(terms.late_computes, Some(6));
        assert!(
            (catch_up / restart - per_stall).abs() < 0.01 * per_stall,
            "{catch_up} / {restart} vs {per_stall}"
        );
        evidence.response = None;
        let (without, _, _) = response_rate(&evidence, &config, 1, Counting::CatchUp);
        assert_eq!(without, 0.0);
    }
}
