//! `rtlab tune --app COMM`: beside the probe, each round counts a running program's own deadline
//! misses, and a setting's effect on them is judged over the A/B pairs.
//!
//! The counting is `rtlab trace watch`'s (rtlab-trace's `watch_app::WatchedProgram`, which the
//! binary hands over as an [`AppWatcher`]), so this crate does not depend on the tracing crates. The statistic: misses per minute watched,
//! one figure per round; the effect is the mean of the pairs' differences (changed − as it
//! was) with Student's t interval over the pairs. Rounds, not misses, are the independent
//! units: misses come in bursts (one stall costs several periods), so an interval that took each
//! miss as independent (a Poisson interval on the total) would be too narrow; pairing the
//! rounds as measured (ABBA) takes a drift out of the difference, as the probe's pair rule does.

use rtlab_core::tune_report::{AppEffect, AppRound};
use std::sync::atomic::AtomicBool;

/// A running program whose deadline misses a round counts.
pub trait AppWatcher: Sync {
    /// Its name (`/proc/PID/comm`).
    fn comm(&self) -> &str;
    /// True while a process of that name runs.
    fn running(&self) -> bool;
    /// Records the program until `round_over` is set, and counts its deadline misses; the error
    /// in words (tracing unavailable, …).
    fn watch(&self, round_over: &AtomicBool) -> Result<AppRound, String>;
}

/// How a setting changed the program's misses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppChange {
    /// The interval lies below 0 and every pair had fewer misses.
    Fewer,
    /// The interval lies above 0.
    More,
    /// The interval holds 0 (or some pair disagrees).
    Same,
    /// One pair: no interval.
    TooFewPairs,
}

/// The effect on the program's misses of arm B (`after`, changed) against arm A (`before`), the
/// rounds paired in the order measured.
pub fn judge_app(
    comm: &str,
    before: Vec<AppRound>,
    after: Vec<AppRound>,
    confidence: f64,
) -> (AppEffect, AppChange) {
    let mean = |values: &[f64]| {
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        }
    };
    let rates = |rounds: &[AppRound]| rounds.iter().map(AppRound::per_minute).collect::<Vec<_>>();
    let differences: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(a, b)| b.per_minute() - a.per_minute())
        .collect();
    let pairs = differences.len();
    let difference = mean(&differences);
    let interval = (pairs >= 2).then(|| {
        let variance = differences
            .iter()
            .map(|value| (value - difference).powi(2))
            .sum::<f64>()
            / (pairs - 1) as f64;
        let half = rtlab_analysis::student_t::quantile(0.5 + confidence / 2.0, (pairs - 1) as f64)
            * (variance / pairs as f64).sqrt();
        [difference - half, difference + half]
    });
    let pairs_fewer = differences.iter().filter(|value| **value < 0.0).count();
    let change = match interval {
        None => AppChange::TooFewPairs,
        Some([_, high]) if high < 0.0 && pairs_fewer == pairs => AppChange::Fewer,
        Some([low, _]) if low > 0.0 => AppChange::More,
        Some(_) => AppChange::Same,
    };
    let effect = AppEffect {
        comm: comm.to_owned(),
        per_minute_before: mean(&rates(&before)),
        per_minute_after: mean(&rates(&after)),
        rounds_before: before,
        rounds_after: after,
        difference_per_minute: difference,
        difference_ci_per_minute: interval,
        pairs_fewer: pairs_fewer as u32,
        pairs: pairs as u32,
    };
    (effect, change)
}

/// Whether a setting is kept, from the probe's judgement and the program's: kept when one of the
/// two is better beyond noise and the other is not worse beyond noise. Returns the decision and
/// the reason, `probe_reason` (the probe's own) within it; the figures are in the [`AppEffect`].
pub fn decide(
    probe_better: bool,
    probe_worse: bool,
    probe_reason: &str,
    app: AppChange,
    app_effect: &AppEffect,
) -> (bool, String) {
    let comm = &app_effect.comm;
    let app_words = match app {
        AppChange::Fewer => format!(
            "{comm}'s deadline misses fewer beyond noise, in {} of {} pairs",
            app_effect.pairs_fewer, app_effect.pairs
        ),
        AppChange::More => format!("{comm}'s deadline misses more beyond noise"),
        AppChange::Same => format!("{comm}'s deadline misses within noise"),
        AppChange::TooFewPairs => format!("{comm}'s deadline misses not judged (one pair)"),
    };
    match (probe_better, app) {
        (true, AppChange::More) => (
            false,
            format!("put back: {app_words} (the probe: {probe_reason})"),
        ),
        (false, AppChange::Fewer) if !probe_worse => (
            true,
            format!("kept: {app_words} (the probe: {probe_reason})"),
        ),
        (better, _) => (better, format!("{probe_reason}; {app_words}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(misses: &[u64]) -> Vec<AppRound> {
        misses
            .iter()
            .map(|misses| AppRound {
                misses: *misses,
                seconds: 60.0,
            })
            .collect()
    }

    #[test]
    fn fewer_misses_in_every_pair_beyond_the_interval_are_fewer() {
        let (effect, change) = judge_app("jackd", rounds(&[30, 34, 28]), rounds(&[3, 5, 2]), 0.95);
        assert_eq!(change, AppChange::Fewer, "{effect:?}");
        assert_eq!(effect.pairs, 3);
        assert_eq!(effect.pairs_fewer, 3);
        assert!((effect.per_minute_before - 92.0 / 3.0).abs() < 1e-9);
        assert!((effect.difference_per_minute + 82.0 / 3.0).abs() < 1e-9);
        let [low, high] = effect.difference_ci_per_minute.unwrap();
        // mean -27.33, sd 1.528, t(0.975, 2) = 4.303: half-width 3.795.
        assert!((high - (-27.333 + 3.795)).abs() < 0.01, "{low} {high}");
        assert!((low - (-27.333 - 3.795)).abs() < 0.01, "{low} {high}");
    }

    #[test]
    fn noise_is_the_same_and_one_pair_is_not_judged() {
        let (_, change) = judge_app("jackd", rounds(&[10, 2, 7]), rounds(&[3, 9, 6]), 0.95);
        assert_eq!(change, AppChange::Same);
        let (_, change) = judge_app("jackd", rounds(&[0, 0, 0]), rounds(&[0, 0, 0]), 0.95);
        assert_eq!(change, AppChange::Same);
        let (effect, change) = judge_app("jackd", rounds(&[30]), rounds(&[0]), 0.95);
        assert_eq!(change, AppChange::TooFewPairs);
        assert_eq!(effect.difference_ci_per_minute, None);
        let (_, change) = judge_app("jackd", rounds(&[3, 5, 2]), rounds(&[30, 34, 28]), 0.95);
        assert_eq!(change, AppChange::More);
    }

    #[test]
    fn a_wide_interval_below_0_with_a_pair_against_is_not_fewer() {
        // Mean difference below 0 with a pair that went the other way.
        let (effect, change) = judge_app(
            "jackd",
            rounds(&[100, 100, 100, 100, 100]),
            rounds(&[0, 0, 0, 0, 101]),
            0.5,
        );
        assert_eq!(effect.pairs_fewer, 4);
        assert_ne!(change, AppChange::Fewer);
    }

    #[test]
    fn the_decision_needs_one_figure_better_and_neither_worse() {
        let (effect, _) = judge_app("jackd", rounds(&[30, 34, 28]), rounds(&[3, 5, 2]), 0.95);
        let probe = "put back: within noise";
        assert!(decide(true, false, probe, AppChange::Same, &effect).0);
        assert!(!decide(true, false, probe, AppChange::More, &effect).0);
        assert!(decide(false, false, probe, AppChange::Fewer, &effect).0);
        assert!(!decide(false, true, probe, AppChange::Fewer, &effect).0);
        assert!(!decide(false, false, probe, AppChange::Same, &effect).0);
        let (kept, reason) = decide(false, false, probe, AppChange::Fewer, &effect);
        assert!(kept);
        assert_eq!(
            reason,
            "kept: jackd's deadline misses fewer beyond noise, in 3 of 3 pairs (the probe: put \
             back: within noise)"
        );
    }

    #[test]
    fn rounds_with_nothing_watched_count_as_no_misses_per_minute() {
        let round = AppRound {
            misses: 4,
            seconds: 0.0,
        };
        assert_eq!(round.per_minute(), 0.0);
    }
}
