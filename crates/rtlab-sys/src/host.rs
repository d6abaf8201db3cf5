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

/// The hypervisor's name from CPUID leaf 0x40000000, or `none`.
pub fn virtualization() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let features = std::arch::x86_64::__cpuid(1);
        let has_hypervisor = features.ecx & (1 << 31) != 0;
        if !has_hypervisor {
            return "none".to_owned();
        }
        // With the hypervisor bit set, leaf 0x40000000 holds the hypervisor's vendor signature.
        let leaf = std::arch::x86_64::__cpuid(0x4000_0000);
        let mut signature = Vec::with_capacity(12);
        for register in [leaf.ebx, leaf.ecx, leaf.edx] {
            signature.extend_from_slice(&register.to_le_bytes());
        }
        return hypervisor_name(&signature);
    }
    #[allow(unreachable_code)]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        if cpuinfo.contains(" hypervisor") {
            "unknown hypervisor".to_owned()
        } else {
            "none".to_owned()
        }
    }
}

/// Names a CPUID hypervisor signature.
pub fn hypervisor_name(signature: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(signature)
        .trim_matches(char::from(0))
        .to_owned();
    match text.as_str() {
        text if text.starts_with("KVMKVMKVM") => "kvm".to_owned(),
        "Microsoft Hv" => "microsoft".to_owned(),
        "VMwareVMware" => "vmware".to_owned(),
        "XenVMMXenVMM" => "xen".to_owned(),
        "TCGTCGTCGTCG" => "qemu".to_owned(),
        "ACRNACRNACRN" => "acrn".to_owned(),
        "bhyve bhyve " => "bhyve".to_owned(),
        " lrpepyh  vr" => "parallels".to_owned(),
        "" => "unknown hypervisor".to_owned(),
        other => format!("hypervisor '{}'", other.trim()),
    }
}

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
    fn names_hypervisors() {
        assert_eq!(hypervisor_name(b"KVMKVMKVM\0\0\0"), "kvm");
        assert_eq!(hypervisor_name(b"Microsoft Hv"), "microsoft");
        assert_eq!(hypervisor_name(b"\0\0\0\0"), "unknown hypervisor");
    }

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
