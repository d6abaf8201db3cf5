//! What machine is this: kernel, preemption model, CPU, hypervisor, clocksource. Every Run
//! record carries it, because a latency figure without its machine means nothing.

#[cfg(target_os = "linux")]
use rtlab_core::Host;

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// The preemption model: from debugfs when mounted (`none voluntary (full) lazy`: the one in
/// parentheses), else /sys/kernel/realtime, else the kernel version string.
pub fn preemption_model() -> String {
    if let Some(text) = read_trimmed("/sys/kernel/debug/sched/preempt") {
        if let Some(current) = text
            .split_whitespace()
            .find(|word| word.starts_with('(') && word.ends_with(')'))
        {
            return current.trim_matches(|c| c == '(' || c == ')').to_owned();
        }
    }
    if read_trimmed("/sys/kernel/realtime").as_deref() == Some("1") {
        return "rt".to_owned();
    }
    let version = read_trimmed("/proc/sys/kernel/version").unwrap_or_default();
    preemption_from_version(&version)
}

/// Maps a `uname -v` string to a preemption model.
pub fn preemption_from_version(version: &str) -> String {
    if version.contains("PREEMPT_RT") {
        "rt".to_owned()
    } else if version.contains("PREEMPT_DYNAMIC") {
        "dynamic (mode not visible without debugfs)".to_owned()
    } else if version.contains("PREEMPT") {
        "full".to_owned()
    } else {
        "none or voluntary".to_owned()
    }
}

pub use crate::hypervisor::{hypervisor_name, virtualization};

#[cfg(target_os = "linux")]
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(windows)]
pub use crate::windows::host::describe;

/// Gathers the host description. `cpu_dma_latency_us` is what rtlab holds, if anything.
#[cfg(target_os = "linux")]
pub fn describe(cpu_dma_latency_us: Option<i32>) -> Host {
    Host {
        hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        preemption: preemption_model(),
        cpu_model: cpu_model(),
        cpu_count: crate::cpu::online_cpus()
            .map(|cpus| cpus.len() as u32)
            .unwrap_or(0),
        virtualization: virtualization(),
        clocksource: read_trimmed(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_else(|| "unknown".into()),
        cpu_dma_latency_us,
        windows: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_version_strings() {
        assert_eq!(preemption_from_version("#1 SMP PREEMPT_RT Tue"), "rt");
        assert_eq!(preemption_from_version("#1 SMP PREEMPT Tue"), "full");
        assert!(preemption_from_version("#1 SMP PREEMPT_DYNAMIC @0").starts_with("dynamic"));
        assert_eq!(
            preemption_from_version("#1 SMP Debian"),
            "none or voluntary"
        );
    }

    #[test]
    fn describes_this_host() {
        let host = describe(None);
        assert!(host.cpu_count >= 1);
        assert_ne!(host.kernel, "unknown");
    }
}
