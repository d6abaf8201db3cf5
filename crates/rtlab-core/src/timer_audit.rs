//! `rtlab timers --audit`: the machine-wide and per-process settings that change everyone's
//! timing. [`AuditFacts`] is what `rtlab-sys` read (raw, nothing judged); [`AuditReport`] is what
//! `rtlab-analysis` made of it (each setting with its value, who set it, and whether it helps or
//! hurts real-time work). Both are plain data so the judging is tested without a machine.

use serde::{Deserialize, Serialize};

pub const AUDIT_SCHEMA: &str = "rtlab.timer-audit/1";

/// A process, as the audit names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessName {
    pub pid: u32,
    pub comm: String,
    /// The command line (arguments joined by spaces); empty for kernel threads.
    pub cmdline: String,
}

/// A process with /dev/cpu_dma_latency open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyHolder {
    pub process: ProcessName,
    /// File descriptors it has open on the device (each is one request; an open without a
    /// write requests "no limit"). What each asked for is not visible: the device does not
    /// advance the file position, and fdinfo shows nothing else.
    pub descriptors: u32,
}

/// A process whose main thread's timer slack was read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackFact {
    pub process: ProcessName,
    pub timer_slack_ns: u64,
    /// RT tasks get no slack whatever the setting (Linux ≥ 6.7 reports 0 for them).
    pub realtime: bool,
}

/// One cpuidle state (of CPU 0; states are the same on every CPU of one driver).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleStateFact {
    pub name: String,
    pub exit_latency_us: u64,
    pub disabled: bool,
}

/// One interrupt line and where it may run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqFact {
    pub irq: u32,
    /// The handler names from /proc/interrupts.
    pub name: String,
    pub affinity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_affinity: Option<String>,
}

/// A threaded interrupt handler (`irq/N-name`) and its scheduling.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqThreadFact {
    pub pid: u32,
    pub comm: String,
    pub policy: String,
    pub priority: i32,
}

/// The fair server of one CPU (Linux ≥ 6.12): CFS's guaranteed share beside RT tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairServerFact {
    pub cpu: u32,
    pub runtime_ns: u64,
    pub period_ns: u64,
}

/// Everything the audit read, unjudged. `None` means "could not be read" (the reason is in
/// `skipped`); an empty list means "read, and there was none".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditFacts {
    pub as_root: bool,
    pub cpu_dma_latency_in_force_us: Option<i64>,
    pub cpu_dma_latency_holders: Vec<LatencyHolder>,
    /// Processes whose descriptors could not be read (without root: everyone else's).
    pub processes_not_scanned: u32,
    /// Only the processes whose slack is not the default (50 µs, or 0 for RT tasks).
    pub unusual_timer_slack: Vec<SlackFact>,
    pub timer_slack_default_count: u32,
    pub timer_slack_unreadable: u32,
    pub sched_rt_runtime_us: Option<i64>,
    pub sched_rt_period_us: Option<i64>,
    pub fair_servers: Option<Vec<FairServerFact>>,
    /// Per CPU, its governor (`cpu0: performance`).
    pub cpufreq_governors: Vec<(u32, String)>,
    pub cpufreq_driver: Option<String>,
    /// `/sys/devices/system/cpu/cpufreq/boost` (1 = on).
    pub cpufreq_boost: Option<String>,
    /// `/sys/devices/system/cpu/intel_pstate/no_turbo`.
    pub intel_no_turbo: Option<String>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    pub idle_states: Vec<IdleStateFact>,
    pub clocksource: Option<String>,
    pub available_clocksources: Vec<String>,
    /// `CONFIG_HZ` from /proc/config.gz or /boot/config-*.
    pub config_hz: Option<u32>,
    /// `idle`, `full` or `periodic` from the kernel configuration.
    pub config_no_hz: Option<String>,
    pub preemption: String,
    /// The preemption model the kernel was built with (`CONFIG_PREEMPT_*`), which a
    /// PREEMPT_DYNAMIC kernel uses unless `preempt=` is on its command line.
    pub config_preemption: Option<String>,
    pub kernel_cmdline: Option<String>,
    pub isolated_cpus: Option<String>,
    pub nohz_full_cpus: Option<String>,
    pub online_cpus: Option<String>,
    pub irqs: Vec<IrqFact>,
    pub irq_threads: Vec<IrqThreadFact>,
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    pub khugepaged_defrag: Option<String>,
    pub khugepaged_scan_sleep_ms: Option<u64>,
    pub ksm_run: Option<String>,
    pub ksm_pages_sharing: Option<u64>,
    /// Lines of /proc/swaps after the header.
    pub swap_devices: Option<Vec<String>>,
    pub swappiness: Option<u64>,
    /// What could not be read and why, one plain sentence each.
    pub skipped: Vec<String>,
}

/// Whether a setting helps or hurts real-time work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Helps,
    Hurts,
    Neutral,
    Unknown,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Helps => "helps",
            Effect::Hurts => "hurts",
            Effect::Neutral => "neutral",
            Effect::Unknown => "unknown",
        }
    }
}

/// One judged setting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditItem {
    /// Short topic (`cpu_dma_latency`, `timer slack`, `cpuidle`, …).
    pub topic: String,
    /// What exactly (`held by pid 812 (tuned)`, `state C6`, `IRQ 24 virtio0`).
    pub setting: String,
    pub value: String,
    /// Who set it, where that can be known (`kernel command line`, `the kernel's build
    /// configuration`, `pid 812 (tuned)`), else `unknown`.
    pub set_by: String,
    pub effect: Effect,
    /// Why, in a sentence.
    pub why: String,
}

/// The audit's output file (`--audit --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    pub schema: String,
    pub tool_version: String,
    pub cmdline: Vec<String>,
    pub started_at: String,
    pub host: crate::Host,
    pub items: Vec<AuditItem>,
    /// What could not be read or known, and why.
    pub skipped: Vec<String>,
    pub facts: AuditFacts,
}

/// The schema of `rtlab timers --audit --json` on Windows.
pub const WINDOWS_AUDIT_SCHEMA: &str = "rtlab.timer-audit-windows/1";

/// What `rtlab timers --audit` reports on Windows: the timer resolution in force, its limits,
/// the power plan, and where to find who asked for the resolution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowsAudit {
    pub version: String,
    pub wine: Option<String>,
    pub timer_resolution_ns: Option<u64>,
    pub timer_resolution_finest_ns: Option<u64>,
    pub timer_resolution_coarsest_ns: Option<u64>,
    pub multimedia_period_range_ms: Option<(u32, u32)>,
    pub power_plan: Option<String>,
    /// Who asked for the resolution in force, or why that cannot be read.
    pub requesters: String,
}
