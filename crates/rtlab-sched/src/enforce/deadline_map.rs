//! From a grant "X in every window of Y" to SCHED_DEADLINE (runtime, deadline, period) that keeps
//! it *at this kernel's enforcement granularity*.
//!
//! Without HRTICK_DL the kernel notices an exhausted budget only at the next scheduler tick (or
//! switch) on that CPU, so a job overruns its runtime by up to one tick `T`; the overrun is then
//! owed and taken from the next period's budget (`runtime += Q` on replenishment). With
//! runtime `Q`, period = deadline `P`, and a thread that is always runnable and never waits for
//! another deadline task (at most one deadline reservation per CPU, see [`DeadlineAdmission`]):
//!
//! - each period's job starts at its release (the replenishment timer is a precise hrtimer) and
//!   runs `L_n = Q − e_{n−1} + e_n`, where `e_n ∈ [0, T)` is the overrun at the tick that
//!   throttled it; so `L_n > Q − T` and, when `Q + T ≤ P`, the job ends inside its period;
//! - a window of length `P` that starts where job `n−1` ended holds `min(L_n, L_{n−1}) > Q − T`
//!   of CPU (job `n` starts `P − L_{n−1}` into it), and every other window holds at least that.
//!
//! Hence `Q = X + T`, `P = D = Y`, which needs `Y ≥ X + 2T` (for `Q + T ≤ P`). Shorter periods
//! `P = Y/k` cost the same bandwidth `(X + T)/Y` and need *more* room (`Y ≥ X + (k + 1)T`), so
//! `k = 1` is used. The mapping is checked against [`super::cbs_sim`] in a property test.

use rtlab_core::Nanos;

use super::DeadlineParams;

/// How finely the kernel enforces SCHED_DEADLINE budgets on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granularity {
    /// The scheduler tick, 1/HZ.
    pub tick: Nanos,
    /// Whether HRTICK_DL is on (budgets enforced by an hrtimer instead of the tick); `None` when
    /// the scheduler's feature flags are not readable here (then the tick is assumed).
    pub hrtick_dl: Option<bool>,
}

/// The overrun assumed under HRTICK_DL: the hrtimer's expiry plus the switch, generously.
pub const HRTICK_OVERRUN: Nanos = Nanos(100_000);

impl Granularity {
    /// The longest a job can run past its budget before the kernel throttles it.
    pub fn overrun(&self) -> Nanos {
        if self.hrtick_dl == Some(true) {
            HRTICK_OVERRUN
        } else {
            self.tick
        }
    }

    /// A sentence for reports: "4 ms tick (HZ=250), HRTICK_DL off".
    pub fn describe(&self) -> String {
        let hz = 1_000_000_000 / self.tick.0.max(1);
        let hrtick = match self.hrtick_dl {
            Some(true) => "HRTICK_DL on",
            Some(false) => "HRTICK_DL off",
            None => "HRTICK_DL not visible (assumed off)",
        };
        format!("{} tick (HZ={hz}), {hrtick}", self.tick)
    }
}

/// Why a grant cannot be mapped to SCHED_DEADLINE parameters here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingRefused {
    #[error(
        "a window of {period} cannot be guaranteed {amount}: budgets are enforced at {overrun} granularity \
         here, so the period must be at least amount + 2 x {overrun} = {needed} (use the dispatch backend, \
         or a longer period)"
    )]
    PeriodTooShort {
        amount: Nanos,
        period: Nanos,
        overrun: Nanos,
        needed: Nanos,
    },
}

/// The SCHED_DEADLINE parameters that keep `amount` in every window of `period` (see the module
/// docs), or why none do.
pub fn deadline_params(
    amount: Nanos,
    period: Nanos,
    granularity: Granularity,
) -> Result<DeadlineParams, MappingRefused> {
    let overrun = granularity.overrun();
    let needed = Nanos(amount.0.saturating_add(overrun.0.saturating_mul(2)));
    if period < needed {
        return Err(MappingRefused::PeriodTooShort {
            amount,
            period,
            overrun,
            needed,
        });
    }
    Ok(DeadlineParams {
        runtime: Nanos(amount.0 + overrun.0),
        deadline: period,
        period,
    })
}

/// The deadline backend's own admission, beside the planner's.
///
/// The mapping needs each deadline thread's job to start at its release, which global EDF gives
/// when there are no more deadline reservations than CPUs (each always finds a CPU not running an
/// earlier deadline of ours), and a partition of one CPU gives when it holds one reservation. The
/// bandwidth actually asked of the kernel is `(X + T)/Y` per reservation, more than the planner's
/// `X/Y`. Per CPU the kernel admits `kernel_limit` (0.95) and counts its fair server's share (0.05)
/// in it; so each reservation, and the sum per CPU, must stay under
/// `min(cap, kernel_limit − fair_server_share)` (the kernel's own answer is reported beside).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAdmission {
    pub n_cpus: usize,
    pub cap: f64,
    /// `sched_rt_runtime_us / sched_rt_period_us`.
    pub kernel_limit: f64,
    /// The fair server's share of each CPU, which the kernel counts as deadline bandwidth.
    pub fair_server_share: f64,
}

impl DeadlineAdmission {
    /// Whether one more reservation with `params` fits beside `existing`; the reason if not.
    pub fn admit(&self, existing: &[DeadlineParams], params: DeadlineParams) -> Result<(), String> {
        if existing.len() >= self.n_cpus {
            return Err(format!(
                "{} deadline reservations already hold the {} CPUs; a tick-enforced budget is only \
                 guaranteed to a thread that never waits for another deadline thread",
                existing.len(),
                self.n_cpus
            ));
        }
        let bandwidth = |p: &DeadlineParams| p.runtime.0 as f64 / p.period.0 as f64;
        let per_cpu = self.per_cpu_limit();
        if bandwidth(&params) > per_cpu + 1e-9 {
            return Err(format!(
                "the kernel would be asked for {:.3} of one CPU (runtime includes one tick of \
                 overrun per period), above what one CPU admits: {per_cpu:.3} (the cap {:.2}, or \
                 the kernel's {:.2} less its fair server's {:.2})",
                bandwidth(&params),
                self.cap,
                self.kernel_limit,
                self.fair_server_share
            ));
        }
        let total: f64 = existing.iter().map(bandwidth).sum::<f64>() + bandwidth(&params);
        let limit = per_cpu * self.n_cpus as f64;
        if total > limit + 1e-9 {
            return Err(format!(
                "the kernel would be asked for {total:.3} CPUs of SCHED_DEADLINE bandwidth (runtime \
                 includes one tick of overrun per period), above {limit:.3} ({per_cpu:.3} per CPU)"
            ));
        }
        Ok(())
    }

    /// What one CPU admits for rtlab's deadline reservations.
    pub fn per_cpu_limit(&self) -> f64 {
        self.cap
            .min(self.kernel_limit - self.fair_server_share)
            .max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK_4MS: Granularity = Granularity {
        tick: Nanos(4_000_000),
        hrtick_dl: Some(false),
    };

    #[test]
    fn two_of_ten_at_a_4ms_tick_is_six_of_ten() {
        let params =
            deadline_params(Nanos::from_millis(2), Nanos::from_millis(10), TICK_4MS).unwrap();
        assert_eq!(params.runtime, Nanos::from_millis(6));
        assert_eq!(params.period, Nanos::from_millis(10));
        assert_eq!(params.deadline, Nanos::from_millis(10));
    }

    #[test]
    fn a_short_period_is_refused_with_the_reason() {
        let refused =
            deadline_params(Nanos::from_micros(500), Nanos::from_millis(2), TICK_4MS).unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("8.5ms") || text.contains("8500"), "{text}");
    }

    #[test]
    fn hrtick_makes_short_periods_possible() {
        let granularity = Granularity {
            tick: Nanos(4_000_000),
            hrtick_dl: Some(true),
        };
        let params =
            deadline_params(Nanos::from_micros(500), Nanos::from_millis(2), granularity).unwrap();
        assert_eq!(params.runtime, Nanos::from_micros(600));
    }

    #[test]
    fn admission_counts_cpus_and_bandwidth() {
        let admission = DeadlineAdmission {
            n_cpus: 2,
            cap: 0.9,
            kernel_limit: 0.95,
            fair_server_share: 0.05,
        };
        let six_of_ten = DeadlineParams {
            runtime: Nanos::from_millis(6),
            deadline: Nanos::from_millis(10),
            period: Nanos::from_millis(10),
        };
        assert!(admission.admit(&[], six_of_ten).is_ok());
        assert!(admission.admit(&[six_of_ten], six_of_ten).is_ok());
        assert!(admission
            .admit(&[six_of_ten, six_of_ten], six_of_ten)
            .unwrap_err()
            .contains("already hold"));
        let nine_of_ten = DeadlineParams {
            runtime: Nanos::from_micros(9_500),
            ..six_of_ten
        };
        assert!(admission
            .admit(&[], nine_of_ten)
            .unwrap_err()
            .contains("fair server"));
        let eight_of_ten = DeadlineParams {
            runtime: Nanos::from_millis(8),
            ..six_of_ten
        };
        assert!(admission.admit(&[eight_of_ten], eight_of_ten).is_ok());
        // With the kernel admitting 0.9 per CPU, its fair server leaves 0.85 for rtlab.
        let strict = DeadlineAdmission {
            kernel_limit: 0.9,
            ..admission
        };
        assert!(strict.admit(&[], eight_of_ten).is_ok());
        let nine = DeadlineParams {
            runtime: Nanos::from_millis(9),
            ..six_of_ten
        };
        assert!(strict.admit(&[], nine).unwrap_err().contains("0.850"));
    }
}
