//! CPU idle states (cpuidle) from sysfs: which states a CPU may enter and how long leaving each
//! takes. A wake-up that finds its CPU in a deep state pays that exit latency; cyclictest avoids it
//! by holding `/dev/cpu_dma_latency` at 0, rtlab by default measures the machine as configured, so
//! reports name these states to explain the difference.

use std::path::Path;

pub use rtlab_core::cpuidle::IdleState;

/// The idle driver and the states of CPU `cpu`; `None` when the kernel has no cpuidle for it.
pub fn idle_states(cpu: usize) -> Option<(String, Vec<IdleState>)> {
    read_idle_states(Path::new("/sys/devices/system/cpu"), cpu)
}

/// [`idle_states`] under another sysfs root (tests).
pub fn read_idle_states(root: &Path, cpu: usize) -> Option<(String, Vec<IdleState>)> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
    };
    let driver = read(&root.join("cpuidle/current_driver")).unwrap_or_else(|| "none".to_owned());
    let directory = root.join(format!("cpu{cpu}/cpuidle"));
    let mut states = Vec::new();
    for index in 0.. {
        let state = directory.join(format!("state{index}"));
        let Some(name) = read(&state.join("name")) else {
            break;
        };
        states.push(IdleState {
            name,
            description: read(&state.join("desc")).unwrap_or_default(),
            exit_latency_us: read(&state.join("latency"))
                .and_then(|text| text.parse().ok())
                .unwrap_or(0),
            disabled: read(&state.join("disable")).as_deref() == Some("1"),
        });
    }
    if states.is_empty() {
        None
    } else {
        Some((driver, states))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_states_in_order_with_latency_and_disable() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("cpuidle")).unwrap();
        std::fs::write(root.path().join("cpuidle/current_driver"), "intel_idle\n").unwrap();
        for (index, (name, latency, disable)) in
            [("POLL", "0", "0"), ("C6", "170", "1")].iter().enumerate()
        {
            let state = root.path().join(format!("cpu1/cpuidle/state{index}"));
            std::fs::create_dir_all(&state).unwrap();
            std::fs::write(state.join("name"), format!("{name}\n")).unwrap();
            std::fs::write(state.join("desc"), "some state\n").unwrap();
            std::fs::write(state.join("latency"), format!("{latency}\n")).unwrap();
            std::fs::write(state.join("disable"), format!("{disable}\n")).unwrap();
        }
        let (driver, states) = read_idle_states(root.path(), 1).unwrap();
        assert_eq!(driver, "intel_idle");
        assert_eq!(states.len(), 2);
        assert_eq!(states[1].name, "C6");
        assert_eq!(states[1].exit_latency_us, 170);
        assert!(states[1].disabled && !states[0].disabled);
        assert_eq!(read_idle_states(root.path(), 0), None);
    }
}
