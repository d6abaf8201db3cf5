//! What else the machine did while a run measured: how busy its CPUs were with work that was not
//! rtlab's, and how much time the hypervisor took.
//!
//! Two runs are only comparable when they were made under the same conditions. On a shared
//! machine the difference between two "idle" runs is often a compiler that ran during one of them:
//! a SCHED_OTHER measuring thread competes with it directly, and even real-time threads see its
//! interrupts and cache misses. The record keeps the totals so that `rtlab compare` can say so
//! instead of calling the difference a regression.

use serde::{Deserialize, Serialize};

/// CPU time on the whole machine between the start and the end of measurement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConditions {
    /// Wall time between the two readings, ns.
    pub elapsed_ns: u64,
    /// CPUs the machine has (every one is counted, measured or not).
    pub cpus: u32,
    /// Non-idle CPU time of every CPU (user, nice, system, irq, softirq), ns.
    pub busy_ns: u64,
    /// Time the hypervisor ran something else while a virtual CPU wanted to run, ns.
    pub steal_ns: u64,
    /// CPU time of rtlab itself (its measuring threads, its own stressors and the children it
    /// reaped), ns. A `--load-cmd` runs in its own process group and counts as other work.
    pub rtlab_cpu_ns: u64,
}

impl RunConditions {
    /// CPU time the machine had in the interval: `elapsed × cpus`.
    pub fn capacity_ns(&self) -> u64 {
        self.elapsed_ns.saturating_mul(u64::from(self.cpus.max(1)))
    }

    /// Share of the CPU time rtlab left free (capacity less rtlab's own, its load included)
    /// that other programs used, 0..=1. Measured against what rtlab left, so that a run under
    /// rtlab's own `--load`, which squeezes other programs, still reads like an idle run when
    /// nothing else ran.
    pub fn other_work_fraction(&self) -> f64 {
        let free = self.capacity_ns().saturating_sub(self.rtlab_cpu_ns);
        if free == 0 {
            return 0.0;
        }
        let other = self.busy_ns.saturating_sub(self.rtlab_cpu_ns);
        (other as f64 / free as f64).clamp(0.0, 1.0)
    }

    /// Share of the machine's CPU time the hypervisor took, 0..=1.
    pub fn steal_fraction(&self) -> f64 {
        let capacity = self.capacity_ns();
        if capacity == 0 {
            return 0.0;
        }
        (self.steal_ns as f64 / capacity as f64).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_work_is_busy_time_less_rtlab_over_capacity() {
        let conditions = RunConditions {
            elapsed_ns: 10_000_000_000,
            cpus: 2,
            busy_ns: 6_000_000_000,
            steal_ns: 200_000_000,
            rtlab_cpu_ns: 1_000_000_000,
        };
        assert_eq!(conditions.capacity_ns(), 20_000_000_000);
        // 5 s of other work in the 19 s rtlab left free.
        assert!((conditions.other_work_fraction() - 5.0 / 19.0).abs() < 1e-12);
        assert!((conditions.steal_fraction() - 0.01).abs() < 1e-12);
    }

    #[test]
    fn empty_or_inconsistent_readings_stay_in_range() {
        assert_eq!(RunConditions::default().other_work_fraction(), 0.0);
        let odd = RunConditions {
            elapsed_ns: 1,
            cpus: 1,
            busy_ns: 10,
            steal_ns: 10,
            rtlab_cpu_ns: 0,
        };
        assert_eq!(odd.other_work_fraction(), 1.0);
        assert_eq!(odd.steal_fraction(), 1.0);
    }
}
