//! The glitch rate a periodic interferer causes, as a function of how its bursts line up with
//! the application's cycle (issue 35, item 2): an interference analysis of a known periodic task
//! with offsets.
//!
//! The interferer takes the application's CPU for `B` every `P` (it outranks the application);
//! the application releases a job every `t`, each needing `c`, and fails a job that ends more
//! than `(n − 1)·t` after its release. For a burst that starts `u` after a release, a small
//! simulation (jobs in order on one CPU, the burst taking the CPU) says how many jobs end late:
//! one at most for a program that restarts its cycle, every late one for a program that catches
//! up. Both clocks are timers, so burst `k` starts at `s + k·P` and meets the cycle at
//! `(s + k·P − a) mod t`, `a` the alignment of the two, fixed for a run: the rate over a
//! stretch `H` is the failures of its `H/P` bursts over `H`. Swept over every alignment `a` (and
//! the period within its uncertainty) it gives the least, median and most rate.
//!
//! Assumptions, said with every answer: the interferer's period is steady (else see
//! `interference::describe`), the application's clock runs on while the burst holds its CPU
//! (a device's; JACK's dummy driver's does not), and the application cannot move away from a
//! burst (every CPU it uses is taken at once; `hit_share` scales the bursts that reach it).

use super::find::PeriodicInterferer;
use crate::application::Counting;
use crate::forecast::BufferConfig;
use serde::Serialize;

/// Alignments tried across one application period.
const ALIGNMENTS: usize = 360;
/// Offsets at which one burst's cost is tabulated across one application period.
const OFFSETS: usize = 1_440;
/// Burst lengths tried across a burst known only within a range (`burst_ns..=burst_max_ns`).
const BURST_STEPS: u64 = 5;

/// The interferer's failures per second over the alignments, least to most.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AlignmentRates {
    pub least_per_s: f64,
    pub median_per_s: f64,
    pub most_per_s: f64,
    /// The stretch each alignment's rate is counted over, s (the run's length).
    pub horizon_s: f64,
}

/// When each job around a burst of `burst` starting `offset` after a release at 0 (offset in
/// `[0, t)`) ends, after its release, the CPU otherwise the application's: jobs from a few
/// periods before the burst until the backlog is worked off (`c < t`) or for as many periods as
/// the burst and a margin. With each, whether it woke at its release (the CPU free then: neither
/// the burst nor an earlier job's backlog held it).
fn responses(config: &BufferConfig, burst: u64, offset: u64) -> Vec<(u64, bool)> {
    let period = config.buffer_period.0;
    let compute = config.compute.0;
    if period == 0 {
        return Vec::new();
    }
    let (burst_start, burst_end) = (offset, offset + burst);
    let first: i64 = -(i64::from(config.buffers) + 2);
    let last = ((burst_end / period) as i64) + i64::from(config.buffers) + 4;
    let extra = if compute < period {
        burst.div_ceil(period - compute) as i64
    } else {
        (burst / period) as i64 + 64
    };
    let mut now: i64 = first * period as i64;
    let mut responses = Vec::new();
    for job in first..=last + extra {
        let release = job * period as i64;
        now = now.max(release);
        let woke = now == release && !(burst_start as i64 <= release && release < burst_end as i64);
        // Run `compute` of work from `now`, the CPU taken during [burst_start, burst_end).
        let mut work = compute as i64;
        while work > 0 {
            if now >= burst_start as i64 && now < burst_end as i64 {
                now = burst_end as i64;
                continue;
            }
            let until = if now < burst_start as i64 {
                burst_start as i64
            } else {
                i64::MAX
            };
            let step = work.min(until - now);
            now += step;
            work -= step;
        }
        // A job with no work still needs its CPU to wake: held until the burst ends.
        if compute == 0 && now >= burst_start as i64 && now < burst_end as i64 {
            now = burst_end as i64;
        }
        responses.push(((now - release) as u64, woke));
    }
    responses
}

/// The part of the application's tolerance (`(n − 1)·t`) a job may end after its release.
fn tolerance(config: &BufferConfig) -> u64 {
    u64::from(config.buffers.saturating_sub(1)) * config.buffer_period.0
}

/// Jobs that end late when a burst of `burst` starts `offset` after a release at 0 (offset in
/// `[0, t)`), the CPU otherwise the application's: delayed past the slack. Restart: at most one.
pub fn failures_of_burst(
    config: &BufferConfig,
    counting: Counting,
    burst: u64,
    offset: u64,
) -> u64 {
    let tolerance = tolerance(config);
    let late = responses(config, burst, offset)
        .into_iter()
        .filter(|(response, _)| *response > tolerance)
        .count() as u64;
    match counting {
        Counting::Restart => late.min(1),
        Counting::CatchUp => late,
    }
}

/// What a burst costs when the rest of the stalls can fail a job it delayed without failing it:
/// the burst took `d` of the job's slack, and a stall of the rest longer than what is left fails
/// the job where it alone would not. `extra(d)` is that added chance for one job (the rest's
/// chance of failing a job with `d` less slack, minus its chance with all of it; the rest's own
/// rate is counted apart). That chance is mostly the job's own wake-up latency (the probe's
/// wake-ups), so it is added only for a job that woke at its release and was then interrupted:
/// a job started from a backlog or at a burst's end did not wake through a timer (a catch-up
/// producer's queued periods; measured, adding it there made the forecast 1.46× its underruns at
/// n = 4 where it was 1.15×). The burst's own failures, plus, restarting (only while it failed
/// none), the chance that one of the jobs it delayed fails; catching up, each such job's chance.
fn cost_of_burst(
    config: &BufferConfig,
    counting: Counting,
    burst: u64,
    offset: u64,
    extra: &dyn Fn(u64) -> f64,
) -> f64 {
    let (tolerance, compute) = (tolerance(config), config.compute.0);
    let responses = responses(config, burst, offset);
    let late = responses
        .iter()
        .filter(|(response, _)| *response > tolerance)
        .count();
    let mut spared = 1.0;
    let mut chances = 0.0;
    for (response, _) in responses
        .iter()
        .filter(|(response, woke)| *woke && *response <= tolerance && *response > compute)
    {
        let chance = extra(response - compute).clamp(0.0, 1.0);
        spared *= 1.0 - chance;
        chances += chance;
    }
    match counting {
        Counting::Restart if late > 0 => 1.0,
        Counting::Restart => 1.0 - spared,
        Counting::CatchUp => late as f64 + chances,
    }
}

/// The interferer's failures per second for the application `config`, over alignments, counted
/// over `horizon_ns`; `hit_share` of its bursts reach the application (1 when it holds every CPU
/// the application uses at once). Each burst alone: see [`alignment_rates_with_rest`] for what
/// it adds to the rest of the stalls.
pub fn alignment_rates(
    interferer: &PeriodicInterferer,
    config: &BufferConfig,
    counting: Counting,
    horizon_ns: u64,
    hit_share: f64,
) -> AlignmentRates {
    alignment_rates_with_rest(interferer, config, counting, horizon_ns, hit_share, &|_| {
        0.0
    })
}

/// [`alignment_rates`] with what each burst adds to the rest of the stalls: a job a burst
/// delayed by `d` without failing it fails with the added chance `extra(d)` (see
/// `cost_of_burst`). A burst a little shorter than the slack leaves a job almost none, and an
/// ordinary wake-up latency then fails it.
pub fn alignment_rates_with_rest(
    interferer: &PeriodicInterferer,
    config: &BufferConfig,
    counting: Counting,
    horizon_ns: u64,
    hit_share: f64,
    extra: &dyn Fn(u64) -> f64,
) -> AlignmentRates {
    let period_app = config.buffer_period.0.max(1);
    // The burst's length as far as it is known: from `burst_ns` to `burst_max_ns` in
    // `BURST_STEPS` steps, each swept over every alignment (its rates all in the range and the
    // median).
    let (shortest, longest) = (
        interferer.burst_ns,
        interferer.burst_max_ns.max(interferer.burst_ns),
    );
    let lengths: Vec<u64> = if longest > shortest {
        (0..BURST_STEPS)
            .map(|step| shortest + (longest - shortest) * step / (BURST_STEPS - 1))
            .collect()
    } else {
        vec![shortest]
    };
    // One burst's cost at every offset within the application's period, per length.
    let tables: Vec<Vec<f64>> = lengths
        .iter()
        .map(|&burst| {
            (0..OFFSETS)
                .map(|index| {
                    let offset = (index as u128 * u128::from(period_app) / OFFSETS as u128) as u64;
                    cost_of_burst(config, counting, burst, offset, extra)
                })
                .collect()
        })
        .collect();
    let cost = |table: &[f64], offset: f64| {
        let index =
            ((offset.rem_euclid(period_app as f64) / period_app as f64) * OFFSETS as f64) as usize;
        table[index.min(OFFSETS - 1)]
    };
    let burst = shortest;
    let horizon = horizon_ns.max(interferer.period_ns.max(1)) as f64;
    // The period within what the fit can tell (the spread of one gap over the bursts seen).
    let uncertainty = interferer.jitter_ns as f64 / (interferer.bursts_seen.max(1) as f64).sqrt();
    let periods = [
        interferer.period_ns as f64 - uncertainty,
        interferer.period_ns as f64,
        interferer.period_ns as f64 + uncertainty,
    ];
    // Every member's bursts start `burst` before their fitted ends.
    let starts: Vec<f64> = interferer
        .members
        .iter()
        .map(|member| member.phase_ns as f64 - burst as f64)
        .collect();
    let mut at_nominal = Vec::with_capacity(ALIGNMENTS * tables.len());
    let (mut least, mut most) = (f64::INFINITY, 0.0f64);
    for table in &tables {
        for (which, period) in periods.iter().enumerate() {
            let bursts = (horizon / period).floor().max(1.0) as u64;
            for step in 0..ALIGNMENTS {
                let alignment = step as f64 * period_app as f64 / ALIGNMENTS as f64;
                let mut failures = 0.0;
                for start in &starts {
                    for burst_index in 0..bursts {
                        failures += cost(table, start + burst_index as f64 * period - alignment);
                    }
                }
                let rate = failures * hit_share / (bursts as f64 * period / 1e9);
                least = least.min(rate);
                most = most.max(rate);
                if which == 1 {
                    at_nominal.push(rate);
                }
            }
        }
    }
    at_nominal.sort_unstable_by(f64::total_cmp);
    AlignmentRates {
        least_per_s: least,
        median_per_s: at_nominal[at_nominal.len() / 2],
        most_per_s: most,
        horizon_s: horizon / 1e9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interference::Member;
    use rtlab_core::Nanos;

    fn config(buffers: u32, period: u64, compute: u64) -> BufferConfig {
        BufferConfig {
            buffers,
            buffer_period: Nanos(period),
            compute: Nanos(compute),
        }
    }

    fn interferer(period: u64, burst: u64) -> PeriodicInterferer {
        PeriodicInterferer {
            members: vec![Member {
                culprit: None,
                cpus: vec![0, 1],
                phase_ns: burst,
                bursts_seen: 400,
            }],
            period_ns: period,
            burst_ns: burst,
            burst_max_ns: burst,
            cpus: vec![0, 1],
            at_once: true,
            bursts_seen: 400,
            jitter_ns: 0,
            steady: true,
            burst_ends_ns: Vec::new(),
        }
    }

    /// The rates of bursts of `burst` every `period`, restarting, over `horizon_ns`, each burst
    /// reaching the application.
    fn restarting_rates(
        config: &BufferConfig,
        period: u64,
        burst: u64,
        horizon_ns: u64,
    ) -> AlignmentRates {
        alignment_rates(
            &interferer(period, burst),
            config,
            Counting::Restart,
            horizon_ns,
            1.0,
        )
    }

    #[test]
    fn a_burst_fails_a_job_when_it_covers_the_release_past_the_slack_or_lands_in_the_compute() {
        // 2 × 2.667 ms, c = 1.2 ms: slack 1.467 ms. A 2.6 ms burst fails the job whose release
        // it covers by more than the slack, or whose compute it lands in: offsets (relative to
        // the release) in (−(2.6 − 1.467), 1.2) ms, a window of 2.333 ms of the 2.667 ms period.
        let config = config(2, 2_666_667, 1_200_000);
        let failing = (0..2_666)
            .filter(|micros| {
                failures_of_burst(&config, Counting::Restart, 2_600_000, micros * 1_000) > 0
            })
            .count();
        assert!((2_300..=2_370).contains(&failing), "{failing} µs of 2 666");
        // A burst shorter than the slack that misses the compute fails nothing.
        assert_eq!(
            failures_of_burst(&config, Counting::Restart, 1_000_000, 1_500_000),
            0
        );
        // A long burst restarting is one failure; catching up it is every period it made late.
        assert_eq!(
            failures_of_burst(&config, Counting::Restart, 20_000_000, 0),
            1
        );
        assert!(failures_of_burst(&config, Counting::CatchUp, 20_000_000, 0) >= 7);
    }

    #[test]
    fn a_period_that_is_a_whole_multiple_of_the_cycle_meets_it_at_one_offset() {
        // 4 × the application's period: every burst meets the cycle at the same offset, so
        // some alignments fail every burst and others none.
        let config = config(2, 2_500_000, 500_000);
        let rates = restarting_rates(&config, 10_000_000, 2_200_000, 10_000_000_000);
        assert!((rates.most_per_s - 100.0).abs() < 1e-6, "{rates:?}");
        assert_eq!(rates.least_per_s, 0.0, "{rates:?}");
        // The window: a burst starting up to 0.2 ms before the release (2.2 ms past a 2 ms
        // slack) or in the 0.5 ms of compute: 0.7 of 2.5 ms of alignments fail every burst, the
        // median alignment none.
        assert_eq!(rates.median_per_s, 0.0, "{rates:?}");
    }

    #[test]
    fn a_period_that_walks_across_the_cycle_fails_the_same_share_at_every_alignment() {
        // 70 ms against 2.667 ms: 26.25 periods, so four offsets a quarter apart recur: every
        // alignment meets the failing window about equally; the range is narrow around
        // (window / t) / P.
        let config = config(2, 2_666_667, 1_200_000);
        let rates = restarting_rates(&config, 70_000_000, 2_600_000, 30_000_000_000);
        let uniform = (2_333_333.0 / 2_666_667.0) / 0.070;
        assert!(rates.least_per_s >= 0.7 * uniform, "{rates:?} vs {uniform}");
        assert!(rates.most_per_s <= 1.2 * uniform, "{rates:?} vs {uniform}");
        assert!(rates.least_per_s <= rates.median_per_s && rates.median_per_s <= rates.most_per_s);
    }
}
