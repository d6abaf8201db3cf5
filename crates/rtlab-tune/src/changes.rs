//! Changing a setting and putting it back: each change is journalled before it is made, undone in
//! reverse order, and everything still changed is put back when [`Changes`] is dropped (normal
//! end, error, panic, or the stop flag's early end). What a SIGKILL skips the journal repairs at
//! the next start; the `cpu_dma_latency` request needs no journal, since it ends with the file
//! descriptor, which the kernel closes for a killed process.

use crate::catalogue::SettingName;
use crate::error::TuneError;
use crate::journal::{Journal, JournalLine};
use rtlab_sys::dma_latency::DmaLatencyGuard;
use rtlab_sys::tunables::Knob;
use std::collections::BTreeMap;

/// What applying a setting did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The value before, as the report shows it.
    pub before: String,
    /// What was tried, as the report shows it.
    pub tried: String,
}

/// Why a setting was not changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotApplied {
    /// Already at the value rtlab would try.
    AlreadySet { value: String },
    /// The setting does not exist here, or could not be read.
    Absent { reason: String },
    /// No CPU is left outside the measured ones to move IRQs or work to.
    NoHousekeepingCpu,
    /// The kernel refused every write.
    Refused { before: String, reason: String },
}

/// The settings changed so far, and the journal that lets a later start put them back.
#[derive(Debug)]
pub struct Changes {
    journal: Option<Journal>,
    /// Per setting, each knob changed with its old value, in the order changed.
    changed: BTreeMap<SettingName, Vec<(Knob, String)>>,
    dma_latency: Option<DmaLatencyGuard>,
}

/// `0-1 (24 IRQs)` or `mixed (24 IRQs)`.
fn summarise_affinities(values: &[(u32, String)]) -> String {
    let first = values
        .first()
        .map(|(_, value)| value.as_str())
        .unwrap_or("-");
    let same = values.iter().all(|(_, value)| value == first);
    format!(
        "{} ({} IRQs)",
        if same { first } else { "mixed" },
        values.len()
    )
}

fn cpu_list_text(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl Changes {
    pub fn new(journal: Journal) -> Changes {
        Changes {
            journal: Some(journal),
            changed: BTreeMap::new(),
            dma_latency: None,
        }
    }

    /// Changes `setting` to the value tried (see [`SettingName::tried_value`]).
    pub fn apply(
        &mut self,
        setting: SettingName,
        housekeeping_cpus: &[usize],
    ) -> Result<Result<Applied, NotApplied>, TuneError> {
        match setting {
            SettingName::Placebo => Ok(Ok(Applied {
                before: "-".into(),
                tried: "-".into(),
            })),
            SettingName::CpuDmaLatency => {
                let before = match rtlab_sys::dma_latency::current() {
                    Ok(value) => value,
                    Err(error) => {
                        return Ok(Err(NotApplied::Absent {
                            reason: format!("{}: {error}", rtlab_sys::dma_latency::PATH),
                        }))
                    }
                };
                if before == 0 {
                    return Ok(Err(NotApplied::AlreadySet {
                        value: "0 us".into(),
                    }));
                }
                let guard = DmaLatencyGuard::hold(0).map_err(|source| TuneError::Setting {
                    setting: setting.name().into(),
                    source,
                })?;
                self.dma_latency = Some(guard);
                Ok(Ok(Applied {
                    before: format!("{before} us"),
                    tried: "0 us (held)".into(),
                }))
            }
            SettingName::IrqAffinity => self.apply_irq_affinity(housekeeping_cpus),
            SettingName::File(knob) => {
                if knob == Knob::WorkqueueCpumask && housekeeping_cpus.is_empty() {
                    return Ok(Err(NotApplied::NoHousekeepingCpu));
                }
                let tried = setting
                    .tried_value(housekeeping_cpus)
                    .expect("a one-file setting");
                let before = match knob.read() {
                    Ok(value) => value,
                    Err(error) => {
                        return Ok(Err(NotApplied::Absent {
                            reason: error.to_string(),
                        }))
                    }
                };
                if before == tried {
                    return Ok(Err(NotApplied::AlreadySet { value: before }));
                }
                if let Err(error) = self.change(setting, knob, &before, &tried)? {
                    return Ok(Err(NotApplied::Refused {
                        before,
                        reason: error.to_string(),
                    }));
                }
                Ok(Ok(Applied { before, tried }))
            }
        }
    }

    /// Journals `knob`'s old value, then writes the new one; a refused write is un-journalled
    /// and returned as the inner error.
    fn change(
        &mut self,
        setting: SettingName,
        knob: Knob,
        before: &str,
        tried: &str,
    ) -> Result<Result<(), std::io::Error>, TuneError> {
        if !crate::journal::is_plain_value(before) {
            return Ok(Err(std::io::Error::other(format!(
                "its value '{before}' is not one the journal can hold"
            ))));
        }
        self.log(&JournalLine::Set {
            knob,
            old_value: before.to_owned(),
        })?;
        match knob.write(tried) {
            Ok(()) => {
                self.changed
                    .entry(setting)
                    .or_default()
                    .push((knob, before.to_owned()));
                Ok(Ok(()))
            }
            Err(error) => {
                self.log(&JournalLine::Reset(knob))?;
                Ok(Err(error))
            }
        }
    }

    fn apply_irq_affinity(
        &mut self,
        housekeeping_cpus: &[usize],
    ) -> Result<Result<Applied, NotApplied>, TuneError> {
        if housekeeping_cpus.is_empty() {
            return Ok(Err(NotApplied::NoHousekeepingCpu));
        }
        let irqs = match rtlab_sys::tunables::irqs() {
            Ok(irqs) if !irqs.is_empty() => irqs,
            Ok(_) => {
                return Ok(Err(NotApplied::Absent {
                    reason: "no IRQ has an affinity file in /proc/irq".into(),
                }))
            }
            Err(error) => {
                return Ok(Err(NotApplied::Absent {
                    reason: format!("/proc/irq: {error}"),
                }))
            }
        };
        let tried = cpu_list_text(housekeeping_cpus);
        let values: Vec<(u32, String)> = irqs
            .iter()
            .filter_map(|&irq| Some((irq, Knob::IrqAffinity(irq).read().ok()?)))
            .collect();
        let before = summarise_affinities(&values);
        let mut moved = 0;
        let mut refused = Vec::new();
        let mut already = 0;
        for (irq, value) in &values {
            if *value == tried {
                already += 1;
                continue;
            }
            match self.change(
                SettingName::IrqAffinity,
                Knob::IrqAffinity(*irq),
                value,
                &tried,
            )? {
                Ok(()) => moved += 1,
                Err(error) => refused.push(format!("{irq} ({})", error.kind())),
            }
        }
        if moved == 0 {
            return Ok(Err(if already == values.len() {
                NotApplied::AlreadySet {
                    value: format!("{tried} (every IRQ)"),
                }
            } else {
                NotApplied::Refused {
                    before,
                    reason: format!("every IRQ refused a new affinity: {}", refused.join(", ")),
                }
            }));
        }
        let mut tried_text = format!("{tried} ({moved} IRQs moved");
        if !refused.is_empty() {
            tried_text.push_str(&format!(", {} refused", refused.len()));
        }
        tried_text.push(')');
        Ok(Ok(Applied {
            before,
            tried: tried_text,
        }))
    }

    /// Puts `setting` back as it was (in reverse order of its changes).
    pub fn restore(&mut self, setting: SettingName) -> Result<(), TuneError> {
        if setting == SettingName::CpuDmaLatency {
            self.dma_latency = None;
            return Ok(());
        }
        let Some(knobs) = self.changed.remove(&setting) else {
            return Ok(());
        };
        let mut failed = Vec::new();
        for (knob, old_value) in knobs.into_iter().rev() {
            match knob.write(&old_value) {
                Ok(()) => self.log(&JournalLine::Reset(knob))?,
                Err(error) => failed.push(format!("{}: {error}", knob.id())),
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(TuneError::Restore(format!(
                "{} could not be put back ({}); the next rtlab tune --revert tries again",
                setting.name(),
                failed.join("; ")
            )))
        }
    }

    /// Puts every setting back; the journal goes when all are back (otherwise it stays for the
    /// next start to try again).
    pub fn restore_all(mut self) -> Result<(), TuneError> {
        let result = self.restore_everything();
        if result.is_ok() {
            if let Some(journal) = self.journal.take() {
                journal.finish();
            }
        }
        result
    }

    fn log(&mut self, line: &JournalLine) -> Result<(), TuneError> {
        match &mut self.journal {
            Some(journal) => journal.append(line),
            None => Err(TuneError::Restore(
                "a change after the journal was closed".into(),
            )),
        }
    }

    fn restore_everything(&mut self) -> Result<(), TuneError> {
        let settings: Vec<SettingName> = self.changed.keys().rev().copied().collect();
        let mut first_error = None;
        self.dma_latency = None;
        for setting in settings {
            if let Err(error) = self.restore(setting) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Changes {
    /// An error or a panic on the way: put everything back all the same.
    fn drop(&mut self) {
        let _ = self.restore_everything();
    }
}
