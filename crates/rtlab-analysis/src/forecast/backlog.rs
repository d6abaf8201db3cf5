//! The backlog model: how many underruns one stall costs a producer that must also do the
//! backlog's work.
//!
//! The per-period model ([`super::Model::PerPeriod`]) counts one failure per wake-up later than
//! the slack `t·(n − 1) − c`; a stall of `S` seen by a probe that restores its missed periods is
//! about `(S − slack)/t` late wake-ups, so about that many underruns. A producer that must produce
//! every buffer — a decoder working through a stream, buffers that belong to their period — does
//! not recover at the end of the stall: it works through the buffers it owes, one per `c`, while
//! the device keeps taking one per `t`, so its lateness falls by only `t − c` per buffer. Every
//! buffer finished later than its slack is an underrun:
//!
//! ```text
//! underruns(S) = ceil((S − slack) / (t − c))      for S > slack, c < t
//! ```
//!
//! With `c` near `t/2` that is about `2·(S − slack)/t`, twice the per-period count; with `c ≥ t`
//! the producer never catches up. [`expected_underruns_per_period`] applies it to a latency
//! histogram whose samples are stalls (one sample per stall: a wake-up latency series without
//! restored missed periods).
//!
//! Which model fits depends on what the device does with a buffer finished after its slot. A
//! sound card does not drop it: on an underrun ALSA stops the stream (an xrun) until the
//! application refills and restarts it, and the data is played late, so every silent period
//! shifts the schedule by one period and the backlog costs nothing more — the per-period count
//! is the sound card's (the second property test below, against a simulated sound card; and
//! `rtlab workload`'s device, which plays a late buffer at its next boundary, measured that in
//! BENCHMARKS.md's sweep). This model is for devices whose buffers belong to their slot (a
//! late buffer is dropped: a network jitter buffer, a video frame, a control output).

use super::evidence::BufferConfig;
use rtlab_core::LatencyHistogram;

/// Underruns one stall of `stall_ns` costs a producer that must produce every buffer; `None` when
/// it never catches up (`c ≥ t`) after a stall longer than the slack.
pub fn underruns_after_stall(config: &BufferConfig, stall_ns: u64) -> Option<u64> {
    let slack = config.slack_ns();
    let excess = i128::from(stall_ns) - i128::from(slack);
    if excess <= 0 {
        return Some(0);
    }
    let period = config.buffer_period.0;
    let gain = period
        .checked_sub(config.compute.0)
        .filter(|gain| *gain > 0)?;
    Some((excess as u128).div_ceil(u128::from(gain)) as u64)
}

/// The per-period model's count for the same stall: the late wake-ups a periodic probe shows
/// (`S`, `S − t`, `S − 2t`, … above the slack).
pub fn per_period_underruns(config: &BufferConfig, stall_ns: u64) -> u64 {
    let excess = i128::from(stall_ns) - i128::from(config.slack_ns());
    if excess <= 0 || config.buffer_period.0 == 0 {
        return 0;
    }
    (excess as u128).div_ceil(u128::from(config.buffer_period.0)) as u64
}

/// Expected underruns per buffer period under the backlog model, each sample of `histogram`
/// taken as one stall; `None` when the histogram is empty or a stall never recovers (`c ≥ t`).
pub fn expected_underruns_per_period(
    histogram: &LatencyHistogram,
    config: &BufferConfig,
) -> Option<f64> {
    let samples = histogram.count();
    if samples == 0 {
        return None;
    }
    let slack = config.slack_ns().max(0) as u64;
    let mut underruns = 0u128;
    for (value, count) in histogram.buckets() {
        if value <= slack {
            continue;
        }
        underruns += u128::from(underruns_after_stall(config, value)?) * u128::from(count);
    }
    Some(underruns as f64 / samples as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rtlab_core::Nanos;

    /// When a job of `work` started at `now` ends, the CPU taken away during the stall.
    fn finish(mut now: u64, mut work: u64, stall_at: u64, stall: u64) -> u64 {
        while work > 0 {
            if now >= stall_at && now < stall_at + stall {
                now = stall_at + stall;
                continue;
            }
            let until = if now < stall_at { stall_at } else { u64::MAX };
            let step = work.min(until - now);
            now += step;
            work -= step;
        }
        now
    }

    /// A periodic producer (job `j` released at `j·t`, `c` of work, jobs in order, one CPU)
    /// stalled for `stall` from `stall_at`; buffer `j` is due at `j·t + (n − 1)·t`. Counts the
    /// buffers finished after they were due. Written from the definition, not from the formula.
    fn simulate(n: u64, t: u64, c: u64, stall_at: u64, stall: u64) -> u64 {
        let mut now = 0u64;
        let mut late = 0;
        let jobs = (stall_at + stall) / t + 4 * (stall / (t - c) + n + 4);
        for job in 0..jobs {
            now = now.max(job * t);
            now = finish(now, c, stall_at, stall);
            if now > job * t + (n - 1) * t {
                late += 1;
            }
        }
        late
    }

    /// The same producer feeding a sound card: buffer `j` is played at the first period
    /// boundary (`k·t`, the first at `(n − 1)·t`) after it is finished and after buffer
    /// `j − 1`'s; a boundary with no buffer plays silence and nothing is dropped (ALSA: an xrun
    /// stops the stream until it is refilled, the data is played late). Counts the silent
    /// boundaries. Written from the definition, not from the formula.
    fn simulate_sound_card(n: u64, t: u64, c: u64, stall_at: u64, stall: u64) -> u64 {
        let mut now = 0u64;
        let mut played_at: Option<u64> = None;
        let mut silent = 0;
        let jobs = (stall_at + stall) / t + 4 * (stall / (t - c) + n + 4);
        for job in 0..jobs {
            now = now.max(job * t);
            now = finish(now, c, stall_at, stall);
            let first_boundary = now.div_ceil(t).max(n - 1) * t;
            let boundary = match played_at {
                Some(previous) => first_boundary.max(previous + t),
                None => first_boundary,
            };
            if let Some(previous) = played_at {
                silent += (boundary - previous) / t - 1;
            }
            played_at = Some(boundary);
        }
        silent
    }

    fn config(n: u32, t: u64, c: u64) -> BufferConfig {
        BufferConfig {
            buffers: n,
            buffer_period: Nanos(t),
            compute: Nanos(c),
        }
    }

    #[test]
    fn half_the_period_of_compute_doubles_the_per_period_count() {
        // n = 2, t = 10 ms, c = 5 ms: slack 5 ms; a 105 ms stall.
        let config = config(2, 10_000_000, 5_000_000);
        assert_eq!(per_period_underruns(&config, 105_000_000), 10);
        assert_eq!(underruns_after_stall(&config, 105_000_000), Some(20));
        assert_eq!(underruns_after_stall(&config, 5_000_000), Some(0));
        // The simulators: a device that drops late buffers loses 20, a sound card 10.
        let (t, c) = (10_000_000, 5_000_000);
        assert_eq!(simulate(2, t, c, 500_000_000, 105_000_000), 20);
        assert_eq!(simulate_sound_card(2, t, c, 500_000_000, 105_000_000), 10);
        assert_eq!(simulate_sound_card(2, t, c, 500_000_000, 0), 0);
        assert_eq!(
            underruns_after_stall(&self::config(2, 10, 10), 100),
            None,
            "c = t never catches up"
        );
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(1_000, 98);
        histogram.record_n(105_000_000, 2);
        let expected = expected_underruns_per_period(&histogram, &config).unwrap();
        // Two stalls of 105 ms (a bucket's value is its upper edge, 105.x ms: 20 or 21 each) in
        // 100 periods.
        assert!((0.40..=0.42).contains(&expected), "{expected}");
    }

    /// A producer of `n` buffers of period `t` computing `c` each, and the stall of `stall` ns
    /// at `stall_at` that hits it.
    #[derive(Debug, Clone, Copy)]
    struct StalledProducer {
        n: u64,
        t: u64,
        c: u64,
        stall_at: u64,
        stall: u64,
    }

    prop_compose! {
        fn stalled_producer()(
            n in 2u64..6,
            t_ms in 2u64..20,
            c_permille in 50u64..950,
            stall_ms in 0u64..400,
            phase_permille in 0u64..1000,
        ) -> StalledProducer {
            let t = t_ms * 1_000_000;
            // The stall starts in steady state (long after the first job), at any phase.
            StalledProducer {
                n,
                t,
                c: t * c_permille / 1000,
                stall_at: 50 * t + t * phase_permille / 1000,
                stall: stall_ms * 1_000_000,
            }
        }
    }

    proptest! {
        /// The closed form against the simulator: equal up to the one buffer the stall's phase
        /// within a period decides.
        #[test]
        fn the_backlog_model_agrees_with_a_simulated_producer(case in stalled_producer()) {
            let StalledProducer { n, t, c, stall_at, stall } = case;
            let simulated = simulate(n, t, c, stall_at, stall);
            let model = underruns_after_stall(&config(n as u32, t, c), stall).unwrap();
            prop_assert!(
                simulated.abs_diff(model) <= 1,
                "n {} t {} c {} stall {}: simulated {} model {}", n, t, c, stall, simulated, model
            );
        }

        /// A sound card plays late data late instead of dropping it, so after a stall the
        /// producer's backlog costs nothing: the per-period count is the sound card's, up to
        /// the one buffer the stall's phase decides, at every c < t — what `rtlab workload`'s
        /// device (which plays a late buffer at its next boundary) counted in BENCHMARKS.md's
        /// sweep.
        #[test]
        fn the_per_period_model_agrees_with_a_simulated_sound_card(case in stalled_producer()) {
            let StalledProducer { n, t, c, stall_at, stall } = case;
            let simulated = simulate_sound_card(n, t, c, stall_at, stall);
            let model = per_period_underruns(&config(n as u32, t, c), stall);
            prop_assert!(
                simulated.abs_diff(model) <= 1,
                "n {} t {} c {} stall {}: simulated {} model {}", n, t, c, stall, simulated, model
            );
        }
    }
}
