//! The settings `rtlab tune` can change at run time: their names (what `--only`/`--skip` take),
//! why each matters, and the value it tries. One table, so the names, the help and the order
//! cannot drift apart.

use crate::error::TuneError;
use rtlab_sys::tunables::Knob;

/// A setting `rtlab tune` changes and measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SettingName {
    CpuDmaLatency,
    TimerMigration,
    SchedRtRuntime,
    ThpEnabled,
    ThpDefrag,
    KhugepagedDefrag,
    StatInterval,
    NmiWatchdog,
    Swappiness,
    IrqAffinity,
    WorkqueueCpumask,
    /// Changes nothing: measured like the others, to show how often noise alone gets kept.
    Placebo,
}

/// One row of the table.
struct Entry {
    setting: SettingName,
    name: &'static str,
    why: &'static str,
}

const TABLE: [Entry; 12] = [
    Entry {
        setting: SettingName::CpuDmaLatency,
        name: "cpu_dma_latency",
        why: "idle states save power but take time to leave: a CPU woken from one runs the timer late (cyclictest holds /dev/cpu_dma_latency at 0 by default)",
    },
    Entry {
        setting: SettingName::TimerMigration,
        name: "timer_migration",
        why: "lets the kernel move timers to another (busy) CPU; 0 keeps a timer where it was armed",
    },
    Entry {
        setting: SettingName::SchedRtRuntime,
        name: "sched_rt_runtime_us",
        why: "RT throttling: real-time tasks stop for the rest of each second once they used this much of it; -1 turns it off (a runaway RT task then owns its CPU)",
    },
    Entry {
        setting: SettingName::ThpEnabled,
        name: "thp_enabled",
        why: "transparent hugepages: a fault may compact memory synchronously; never avoids those stalls",
    },
    Entry {
        setting: SettingName::ThpDefrag,
        name: "thp_defrag",
        why: "whether a hugepage fault waits for defragmentation; never avoids the wait",
    },
    Entry {
        setting: SettingName::KhugepagedDefrag,
        name: "khugepaged_defrag",
        why: "khugepaged collapses pages in the background, taking locks and CPU time; 0 stops its defragmentation",
    },
    Entry {
        setting: SettingName::StatInterval,
        name: "stat_interval",
        why: "vm.stat_interval: how often every CPU folds its memory statistics (vmstat work); 10 s makes it rarer",
    },
    Entry {
        setting: SettingName::NmiWatchdog,
        name: "nmi_watchdog",
        why: "the NMI watchdog interrupts every CPU periodically with a non-maskable interrupt",
    },
    Entry {
        setting: SettingName::Swappiness,
        name: "swappiness",
        why: "how eagerly anonymous memory is swapped; a swapped-in page is a long fault (locked memory is safe either way)",
    },
    Entry {
        setting: SettingName::IrqAffinity,
        name: "irq_affinity",
        why: "device interrupts handled on a measured CPU delay its thread; moving them to the housekeeping CPUs keeps them away",
    },
    Entry {
        setting: SettingName::WorkqueueCpumask,
        name: "workqueue_cpumask",
        why: "unbound kernel work items run on any CPU in this mask; leaving the measured CPUs out keeps them away",
    },
    Entry {
        setting: SettingName::Placebo,
        name: "placebo",
        why: "changes nothing: measured like the others, so a kept placebo shows the noise",
    },
];

fn entry(setting: SettingName) -> &'static Entry {
    TABLE
        .iter()
        .find(|entry| entry.setting == setting)
        .expect("every setting is in the table")
}

impl SettingName {
    /// Every setting, in the order they are measured.
    pub fn all() -> Vec<SettingName> {
        TABLE.iter().map(|entry| entry.setting).collect()
    }

    pub fn name(self) -> &'static str {
        entry(self).name
    }

    pub fn why(self) -> &'static str {
        entry(self).why
    }

    /// The knob of a setting that is one file (not cpu_dma_latency, IRQs or the placebo).
    pub fn knob(self) -> Option<Knob> {
        Some(match self {
            SettingName::TimerMigration => Knob::TimerMigration,
            SettingName::SchedRtRuntime => Knob::SchedRtRuntime,
            SettingName::ThpEnabled => Knob::ThpEnabled,
            SettingName::ThpDefrag => Knob::ThpDefrag,
            SettingName::KhugepagedDefrag => Knob::KhugepagedDefrag,
            SettingName::StatInterval => Knob::StatInterval,
            SettingName::NmiWatchdog => Knob::NmiWatchdog,
            SettingName::Swappiness => Knob::Swappiness,
            SettingName::WorkqueueCpumask => Knob::WorkqueueCpumask,
            SettingName::CpuDmaLatency | SettingName::IrqAffinity | SettingName::Placebo => {
                return None
            }
        })
    }

    /// The value tried for a one-file setting; the workqueue mask needs the housekeeping CPUs.
    pub fn tried_value(self, housekeeping_cpus: &[usize]) -> Option<String> {
        Some(match self {
            SettingName::TimerMigration
            | SettingName::KhugepagedDefrag
            | SettingName::NmiWatchdog => "0".into(),
            SettingName::SchedRtRuntime => "-1".into(),
            SettingName::ThpEnabled | SettingName::ThpDefrag => "never".into(),
            SettingName::StatInterval => "10".into(),
            SettingName::Swappiness => "10".into(),
            SettingName::WorkqueueCpumask => rtlab_sys::tunables::cpu_mask_hex(housekeeping_cpus),
            SettingName::CpuDmaLatency | SettingName::IrqAffinity | SettingName::Placebo => {
                return None
            }
        })
    }

    /// The setting called `name`.
    pub fn parse(name: &str) -> Result<SettingName, TuneError> {
        TABLE
            .iter()
            .find(|entry| entry.name == name.trim())
            .map(|entry| entry.setting)
            .ok_or_else(|| TuneError::UnknownSetting {
                name: name.trim().to_owned(),
                known: TABLE
                    .iter()
                    .map(|entry| entry.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// The settings to measure: `only` (every setting when empty) without `skip`, in table order.
pub fn select(only: &[String], skip: &[String]) -> Result<Vec<SettingName>, TuneError> {
    let only: Vec<SettingName> = only
        .iter()
        .map(|name| SettingName::parse(name))
        .collect::<Result<_, _>>()?;
    let skip: Vec<SettingName> = skip
        .iter()
        .map(|name| SettingName::parse(name))
        .collect::<Result<_, _>>()?;
    Ok(SettingName::all()
        .into_iter()
        .filter(|setting| only.is_empty() || only.contains(setting))
        .filter(|setting| !skip.contains(setting))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_setting() {
        for setting in SettingName::all() {
            assert_eq!(SettingName::parse(setting.name()).unwrap(), setting);
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_known_ones() {
        let error = select(&["swapiness".into()], &[]).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("unknown setting 'swapiness'"), "{text}");
        assert!(text.contains("swappiness"), "{text}");
        assert!(error.is_input());
        assert!(select(&[], &["nope".into()]).is_err());
    }

    #[test]
    fn only_and_skip_select_in_table_order() {
        let chosen = select(
            &[
                "placebo".into(),
                "timer_migration".into(),
                "swappiness".into(),
            ],
            &["swappiness".into()],
        )
        .unwrap();
        assert_eq!(
            chosen,
            vec![SettingName::TimerMigration, SettingName::Placebo]
        );
        assert_eq!(select(&[], &[]).unwrap().len(), 12);
    }
}
