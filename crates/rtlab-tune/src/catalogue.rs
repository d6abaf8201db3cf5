//! The settings `rtlab tune` can change at run time: their names (what `--only`/`--skip` take),
//! why each matters, and the value it tries. One table, so the names, the help and the order
//! cannot drift apart. A setting that is one kernel file is a `rtlab_sys::tunables::Knob`, which
//! defines its file and its name (the journal's id) once; this table adds why and the value tried.

use crate::error::TuneError;
use rtlab_sys::tunables::Knob;

/// A setting `rtlab tune` changes and measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SettingName {
    CpuDmaLatency,
    /// A setting that is one kernel file: one of [`Knob::GLOBAL`], whose definition (file and
    /// name) is rtlab-sys's.
    File(Knob),
    /// Every IRQ's affinity at once.
    IrqAffinity,
    /// Changes nothing: measured like the others, to show how often noise alone gets kept.
    Placebo,
}

/// One row of the table.
struct Entry {
    setting: SettingName,
    why: &'static str,
}

const TABLE: [Entry; 12] = [
    Entry {
        setting: SettingName::CpuDmaLatency,
        why: "idle states save power but take time to leave: a CPU woken from one runs the timer late (cyclictest holds /dev/cpu_dma_latency at 0 by default)",
    },
    Entry {
        setting: SettingName::File(Knob::TimerMigration),
        why: "lets the kernel move timers to another (busy) CPU; 0 keeps a timer where it was armed",
    },
    Entry {
        setting: SettingName::File(Knob::SchedRtRuntime),
        why: "RT throttling: real-time tasks stop for the rest of each second once they used this much of it; -1 turns it off (a runaway RT task then owns its CPU)",
    },
    Entry {
        setting: SettingName::File(Knob::ThpEnabled),
        why: "transparent hugepages: a fault may compact memory synchronously; never avoids those stalls",
    },
    Entry {
        setting: SettingName::File(Knob::ThpDefrag),
        why: "whether a hugepage fault waits for defragmentation; never avoids the wait",
    },
    Entry {
        setting: SettingName::File(Knob::KhugepagedDefrag),
        why: "khugepaged collapses pages in the background, taking locks and CPU time; 0 stops its defragmentation",
    },
    Entry {
        setting: SettingName::File(Knob::StatInterval),
        why: "vm.stat_interval: how often every CPU folds its memory statistics (vmstat work); 10 s makes it rarer",
    },
    Entry {
        setting: SettingName::File(Knob::NmiWatchdog),
        why: "the NMI watchdog interrupts every CPU periodically with a non-maskable interrupt",
    },
    Entry {
        setting: SettingName::File(Knob::Swappiness),
        why: "how eagerly anonymous memory is swapped; a swapped-in page is a long fault (locked memory is safe either way)",
    },
    Entry {
        setting: SettingName::IrqAffinity,
        why: "device interrupts handled on a measured CPU delay its thread; moving them to the housekeeping CPUs keeps them away",
    },
    Entry {
        setting: SettingName::File(Knob::WorkqueueCpumask),
        why: "unbound kernel work items run on any CPU in this mask; leaving the measured CPUs out keeps them away",
    },
    Entry {
        setting: SettingName::Placebo,
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

    /// What `--only`/`--skip` call it: a one-file setting's knob id, or its own name.
    pub fn name(self) -> &'static str {
        match self {
            SettingName::CpuDmaLatency => "cpu_dma_latency",
            SettingName::File(knob) => knob
                .global_id()
                .expect("a one-file setting is a global knob"),
            SettingName::IrqAffinity => "irq_affinity",
            SettingName::Placebo => "placebo",
        }
    }

    pub fn why(self) -> &'static str {
        entry(self).why
    }

    /// The knob of a setting that is one file (not cpu_dma_latency, IRQs or the placebo).
    pub fn knob(self) -> Option<Knob> {
        match self {
            SettingName::File(knob) => Some(knob),
            SettingName::CpuDmaLatency | SettingName::IrqAffinity | SettingName::Placebo => None,
        }
    }

    /// The value tried for a one-file setting; the workqueue mask needs the housekeeping CPUs.
    pub fn tried_value(self, housekeeping_cpus: &[usize]) -> Option<String> {
        Some(match self.knob()? {
            Knob::TimerMigration | Knob::KhugepagedDefrag | Knob::NmiWatchdog => "0".into(),
            Knob::SchedRtRuntime => "-1".into(),
            Knob::ThpEnabled | Knob::ThpDefrag => "never".into(),
            Knob::StatInterval => "10".into(),
            Knob::Swappiness => "10".into(),
            Knob::WorkqueueCpumask => rtlab_sys::tunables::cpu_mask_hex(housekeeping_cpus),
            Knob::IrqAffinity(_) => return None,
        })
    }

    /// The setting called `name`.
    pub fn parse(name: &str) -> Result<SettingName, TuneError> {
        TABLE
            .iter()
            .map(|entry| entry.setting)
            .find(|setting| setting.name() == name.trim())
            .ok_or_else(|| TuneError::UnknownSetting {
                name: name.trim().to_owned(),
                known: TABLE
                    .iter()
                    .map(|entry| entry.setting.name())
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
    fn every_global_knob_is_one_setting_named_by_its_journal_id() {
        for knob in Knob::GLOBAL {
            let setting = SettingName::File(knob);
            let rows = SettingName::all()
                .into_iter()
                .filter(|each| *each == setting)
                .count();
            assert_eq!(rows, 1, "{knob:?}");
            assert_eq!(SettingName::parse(&knob.id()).unwrap(), setting);
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
            vec![
                SettingName::File(Knob::TimerMigration),
                SettingName::Placebo
            ]
        );
        assert_eq!(select(&[], &[]).unwrap().len(), 12);
    }
}
