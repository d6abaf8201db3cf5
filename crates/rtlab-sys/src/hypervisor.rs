//! Which hypervisor, if any, this machine runs under (CPUID): a host fact both platforms'
//! descriptions carry (`host.rs` on Linux, `windows/host.rs`), in a module below both.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_hypervisors() {
        assert_eq!(hypervisor_name(b"KVMKVMKVM\0\0\0"), "kvm");
        assert_eq!(hypervisor_name(b"Microsoft Hv"), "microsoft");
        assert_eq!(hypervisor_name(b"\0\0\0\0"), "unknown hypervisor");
    }
}
