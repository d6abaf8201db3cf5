//! Rounding a requested "X of every Y" to a granted "X' of every P'" whose period is a power-of-two
//! multiple of the quantum, so that the *continuous* guarantee still holds.
//!
//! Why this needs care: giving X' per aligned window of a shorter period P' does not by itself put X
//! into every *sliding* window of length Y. For any layout that repeats with period P' and gives X' in
//! each period, a window of length Y = m·P' + r (m ≥ 1, 0 ≤ r < P') contains m whole periods' worth of
//! service (m·X') plus, in the remaining length r, at least r − (P' − X') (a length-r piece of one period
//! can hold at most P' − X' of idle time). So the worst window receives
//!
//! ```text
//! f(X') = m·X' + max(0, X' − (P' − r))
//! ```
//!
//! and a single contiguous slot per period attains it (the window that starts where the slot ends).
//! [`minimal_amount`] returns the least X' with f(X') ≥ X. Because m·P' ≤ Y, X'/P' ≥ X/Y always: the
//! fraction reserved is never below the fraction asked, as in Rialto/NT.

/// The longest power-of-two exponent the planner uses: periods are at most `quantum · 2^40`. Longer
/// requested periods are rounded down to that, which only over-reserves. Keeping the exponent small
/// lets utilisation be summed exactly in `u128`.
pub const MAX_LEVEL: u32 = 40;

/// One way to grant a request: period `quantum << level` with `amount` per period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounding {
    pub level: u32,
    pub period: u64,
    pub amount: u64,
}

impl Rounding {
    /// This rounding's utilisation in units of `1 / (quantum · 2^MAX_LEVEL)`, exact.
    pub fn load(&self) -> u128 {
        u128::from(self.amount) << (MAX_LEVEL - self.level)
    }
}

/// The largest level `k` with `quantum · 2^k ≤ period`, capped at [`MAX_LEVEL`]; `None` when the
/// period is shorter than the quantum.
pub fn top_level(quantum: u64, period: u64) -> Option<u32> {
    if quantum == 0 || period < quantum {
        return None;
    }
    let ratio = period / quantum;
    Some((63 - ratio.leading_zeros()).min(MAX_LEVEL))
}

/// The least per-period amount at `granted_period` that guarantees `amount` in every sliding window of
/// length `requested_period` (see the module docs). `None` when even the whole period would not do,
/// or when `granted_period` is zero or longer than `requested_period`.
pub fn minimal_amount(amount: u64, requested_period: u64, granted_period: u64) -> Option<u64> {
    if granted_period == 0 || granted_period > requested_period {
        return None;
    }
    let whole_periods = u128::from(requested_period / granted_period);
    let remainder = requested_period % granted_period;
    let idle_allowance = u128::from(granted_period - remainder);
    let amount_wide = u128::from(amount);
    let needed = if whole_periods * idle_allowance >= amount_wide {
        amount_wide.div_ceil(whole_periods)
    } else {
        (amount_wide + idle_allowance).div_ceil(whole_periods + 1)
    };
    let needed = u64::try_from(needed).ok()?;
    (needed <= granted_period).then_some(needed)
}

/// Every admissible rounding of a request, longest period first (levels from [`top_level`] down to 0).
pub fn candidates(quantum: u64, amount: u64, period: u64) -> Vec<Rounding> {
    let Some(top) = top_level(quantum, period) else {
        return Vec::new();
    };
    (0..=top)
        .rev()
        .filter_map(|level| {
            let granted_period = quantum << level;
            minimal_amount(amount, period, granted_period).map(|granted_amount| Rounding {
                level,
                period: granted_period,
                amount: granted_amount,
            })
        })
        .collect()
}

/// How many of the longest candidate periods are compared when choosing the preferred rounding.
/// Shorter periods approach the requested fraction but multiply context switches, so they are used
/// only when the preferred rounding does not fit.
pub const PREFERRED_SPAN: usize = 3;

/// Whether `left` reserves a strictly smaller fraction of the CPU than `right`.
pub fn smaller_fraction(left: &Rounding, right: &Rounding) -> bool {
    u128::from(left.amount) * u128::from(right.period)
        < u128::from(right.amount) * u128::from(left.period)
}

/// The preferred rounding: among the [`PREFERRED_SPAN`] longest candidates, the smallest fraction;
/// ties go to the longer period.
pub fn preferred(candidates: &[Rounding]) -> Option<Rounding> {
    let mut best: Option<Rounding> = None;
    for candidate in candidates.iter().take(PREFERRED_SPAN) {
        match best {
            Some(current) if !smaller_fraction(candidate, &current) => {}
            _ => best = Some(*candidate),
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_rounds_down() {
        assert_eq!(top_level(1_000_000, 16_000_000), Some(4));
        assert_eq!(top_level(1_000_000, 10_000_000), Some(3));
        assert_eq!(top_level(1_000_000, 999_999), None);
        assert_eq!(top_level(1, u64::MAX), Some(MAX_LEVEL));
    }

    #[test]
    fn exact_power_of_two_keeps_the_amount() {
        assert_eq!(
            minimal_amount(1_000_000, 16_000_000, 16_000_000),
            Some(1_000_000)
        );
    }

    #[test]
    fn fraction_preserving_rounding_is_not_enough_and_is_corrected() {
        // 3 of every 12 at period 8: fraction-preserving would give 2, but the window starting at the
        // end of the slot, [2, 14), gets only 2. The least amount is 3 (m = 1, r = 4, idle allowance 4).
        assert_eq!(minimal_amount(3, 12, 8), Some(3));
        // 7 of every 12 at period 8: f(X') = X' + max(0, X' − 4) ≥ 7 needs X' = 6 (6 + 2 = 8 ≥ 7; 5 + 1 = 6).
        assert_eq!(minimal_amount(7, 12, 8), Some(6));
        // Two whole periods: 1 of every 10 at period 4: m = 2, r = 2, 2·2 ≥ 1 so ceil(1/2) = 1.
        assert_eq!(minimal_amount(1, 10, 4), Some(1));
    }

    #[test]
    fn the_whole_period_always_suffices_and_longer_periods_never_do() {
        // A fully busy CPU serves every window completely.
        assert_eq!(minimal_amount(12, 12, 8), Some(8));
        assert_eq!(minimal_amount(1, 4, 8), None);
    }

    #[test]
    fn preferred_takes_the_smallest_fraction_among_the_longest_three() {
        let all = candidates(1_000_000, 500_000, 10_000_000);
        assert_eq!(all[0].period, 8_000_000);
        let chosen = preferred(&all).expect("a candidate");
        // 2 ms period: 5 whole periods fit in 10 ms, 100 us each = exactly 5 %.
        assert_eq!((chosen.period, chosen.amount), (2_000_000, 100_000));
    }
}
