//! The kernel settings `rtlab tune` reads, changes for a measurement and puts back: sysctls,
//! transparent hugepages, the workqueue cpumask and each IRQ's affinity.
//!
//! Each one is a [`Knob`] with one file; its identifier ([`Knob::id`]) is what the tune journal
//! stores, so a journal line can only ever name one of these files, never an arbitrary path.
//! Files whose value is a list with the selected word in brackets (`always [madvise] never`)
//! read as the selected word and are written as one word.

use std::io;
use std::path::PathBuf;

/// One run-time tunable of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    /// `kernel.timer_migration`: timers may move to a busy CPU.
    TimerMigration,
    /// `kernel.sched_rt_runtime_us`: RT throttling (-1 = off).
    SchedRtRuntime,
    /// Transparent hugepages: `enabled`.
    ThpEnabled,
    /// Transparent hugepages: `defrag`.
    ThpDefrag,
    /// khugepaged's defragmentation (0/1).
    KhugepagedDefrag,
    /// `vm.stat_interval` (seconds).
    StatInterval,
    /// `kernel.nmi_watchdog` (0/1).
    NmiWatchdog,
    /// `vm.swappiness`.
    Swappiness,
    /// The CPUs unbound workqueues may run on (hex mask).
    WorkqueueCpumask,
    /// One IRQ's `smp_affinity_list`.
    IrqAffinity(u32),
}

impl Knob {
    /// Every knob but the per-IRQ ones.
    pub const GLOBAL: [Knob; 9] = [
        Knob::TimerMigration,
        Knob::SchedRtRuntime,
        Knob::ThpEnabled,
        Knob::ThpDefrag,
        Knob::KhugepagedDefrag,
        Knob::StatInterval,
        Knob::NmiWatchdog,
        Knob::Swappiness,
        Knob::WorkqueueCpumask,
    ];

    /// The file that holds it.
    pub fn path(self) -> PathBuf {
        PathBuf::from(match self {
            Knob::TimerMigration => "/proc/sys/kernel/timer_migration".to_owned(),
            Knob::SchedRtRuntime => "/proc/sys/kernel/sched_rt_runtime_us".to_owned(),
            Knob::ThpEnabled => "/sys/kernel/mm/transparent_hugepage/enabled".to_owned(),
            Knob::ThpDefrag => "/sys/kernel/mm/transparent_hugepage/defrag".to_owned(),
            Knob::KhugepagedDefrag => {
                "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag".to_owned()
            }
            Knob::StatInterval => "/proc/sys/vm/stat_interval".to_owned(),
            Knob::NmiWatchdog => "/proc/sys/kernel/nmi_watchdog".to_owned(),
            Knob::Swappiness => "/proc/sys/vm/swappiness".to_owned(),
            Knob::WorkqueueCpumask => "/sys/devices/virtual/workqueue/cpumask".to_owned(),
            Knob::IrqAffinity(irq) => format!("/proc/irq/{irq}/smp_affinity_list"),
        })
    }

    /// The sysctl key of a knob that is a sysctl (`kernel.timer_migration`), else `None`.
    pub fn sysctl_key(self) -> Option<String> {
        let path = self.path();
        let relative = path.strip_prefix("/proc/sys").ok()?;
        Some(
            relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("."),
        )
    }

    /// The name a journal line uses: `timer_migration`, …, `irq/24`.
    pub fn id(self) -> String {
        match self {
            Knob::IrqAffinity(irq) => format!("irq/{irq}"),
            global => global
                .global_id()
                .expect("every knob but an IRQ's is global")
                .into(),
        }
    }

    /// A [`GLOBAL`](Knob::GLOBAL) knob's [`id`](Knob::id), which is also the name `rtlab tune`
    /// gives the setting; `None` for an IRQ's.
    pub fn global_id(self) -> Option<&'static str> {
        Some(match self {
            Knob::TimerMigration => "timer_migration",
            Knob::SchedRtRuntime => "sched_rt_runtime_us",
            Knob::ThpEnabled => "thp_enabled",
            Knob::ThpDefrag => "thp_defrag",
            Knob::KhugepagedDefrag => "khugepaged_defrag",
            Knob::StatInterval => "stat_interval",
            Knob::NmiWatchdog => "nmi_watchdog",
            Knob::Swappiness => "swappiness",
            Knob::WorkqueueCpumask => "workqueue_cpumask",
            Knob::IrqAffinity(_) => return None,
        })
    }

    /// The knob an [`id`](Knob::id) names; `None` for anything else.
    pub fn from_id(id: &str) -> Option<Knob> {
        if let Some(number) = id.strip_prefix("irq/") {
            return number.parse().ok().map(Knob::IrqAffinity);
        }
        Knob::GLOBAL.into_iter().find(|knob| knob.id() == id)
    }

    /// The value in force (the bracketed word of a choice list).
    pub fn read(self) -> io::Result<String> {
        let path = self.path();
        let text = std::fs::read_to_string(&path).map_err(|error| with_path(error, &path))?;
        Ok(selected_value(&text))
    }

    /// Writes `value` (one line, no newline needed).
    pub fn write(self, value: &str) -> io::Result<()> {
        let path = self.path();
        std::fs::write(&path, value).map_err(|error| with_path(error, &path))
    }
}

/// `always [madvise] never` → `madvise`; anything else trimmed.
pub fn selected_value(text: &str) -> String {
    let text = text.trim();
    if let (Some(open), Some(close)) = (text.find('['), text.find(']')) {
        if open < close {
            return text[open + 1..close].to_owned();
        }
    }
    text.to_owned()
}

fn with_path(error: io::Error, path: &std::path::Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// The IRQs that have an affinity file, in order.
pub fn irqs() -> io::Result<Vec<u32>> {
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|irq| Knob::IrqAffinity(*irq).path().exists())
        .collect();
    irqs.sort_unstable();
    Ok(irqs)
}

/// A resource limit of this process: (soft, hard), `None` meaning unlimited.
pub type Limit = (Option<u64>, Option<u64>);

/// RLIMIT_RTPRIO and RLIMIT_MEMLOCK (bytes) of this process.
pub fn realtime_limits() -> io::Result<(Limit, Limit)> {
    Ok((
        resource_limit(libc::RLIMIT_RTPRIO)?,
        resource_limit(libc::RLIMIT_MEMLOCK)?,
    ))
}

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn resource_limit(resource: Resource) -> io::Result<Limit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit the kernel fills.
    if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let finite = |value: libc::rlim_t| (value != libc::RLIM_INFINITY).then_some(value);
    Ok((finite(limit.rlim_cur), finite(limit.rlim_max)))
}

/// CPU 0's energy-performance preference (intel_pstate / amd-pstate), when the driver has one.
pub fn energy_performance_preference() -> Option<String> {
    read_optional("/sys/devices/system/cpu/cpu0/cpufreq/energy_performance_preference")
}

/// SMT's state (`on`, `off`, `forceoff`, `notsupported`, `notimplemented`), when the kernel says.
pub fn smt_control() -> Option<String> {
    read_optional("/sys/devices/system/cpu/smt/control")
}

fn read_optional(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
}

/// A CPU list as the hex mask sysfs cpumask files take (`0,1` → `3`).
pub fn cpu_mask_hex(cpus: &[usize]) -> String {
    let mut words: Vec<u32> = vec![0; cpus.iter().max().map_or(1, |max| max / 32 + 1)];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|word| format!("{word:x}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_list_reads_as_its_selected_word() {
        assert_eq!(selected_value("always [madvise] never\n"), "madvise");
        assert_eq!(selected_value("1\n"), "1");
        assert_eq!(selected_value("0-1\n"), "0-1");
    }

    #[test]
    fn every_id_names_its_own_knob_and_nothing_else_is_one() {
        for knob in Knob::GLOBAL.into_iter().chain([Knob::IrqAffinity(24)]) {
            assert_eq!(Knob::from_id(&knob.id()), Some(knob));
        }
        for id in ["", "irq/", "irq/x", "/etc/passwd", "swappines"] {
            assert_eq!(Knob::from_id(id), None, "{id}");
        }
    }

    #[test]
    fn cpu_lists_become_hex_masks() {
        assert_eq!(cpu_mask_hex(&[0]), "1");
        assert_eq!(cpu_mask_hex(&[0, 1]), "3");
        assert_eq!(cpu_mask_hex(&[33]), "2,0");
    }
}
