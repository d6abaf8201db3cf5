//! A CPU idle state as rtlab reports it (the verdict's note on why the numbers differ from
//! cyclictest's). rtlab-sys reads them from sysfs (`rtlab_sys::cpuidle`).

/// One idle state of one CPU (`/sys/devices/system/cpu/cpuN/cpuidle/stateK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleState {
    /// `POLL`, `C1`, `C6`, `haltpoll`, …
    pub name: String,
    /// The driver's description (`MWAIT 0x20`, `default architecture idle`).
    pub description: String,
    /// Worst-case time to leave the state, µs, as the driver declares it.
    pub exit_latency_us: u64,
    /// Disabled by the administrator (`disable` = 1).
    pub disabled: bool,
}
