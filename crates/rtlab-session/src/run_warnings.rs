//! The warnings a run's record carries on Linux and on Windows alike, in one wording: the same
//! machine facts deserve the same sentence whichever probe measured them.

use rtlab_core::{Host, Nanos};

/// A run shorter than this gets the "measure for hours" warning.
const SHORT_RUN_NS: u64 = 600_000_000_000;

/// The warning for a virtual machine, if `host` is one.
pub(crate) fn vm_warning(host: &Host) -> Option<String> {
    (host.virtualization != "none").then(|| format!(
        "running in a virtual machine ({}): expect multi-millisecond hiccups when the hypervisor deschedules a virtual CPU; they are real for software in this guest",
        host.virtualization
    ))
}

/// The warning for a run that measured less than [`SHORT_RUN_NS`], if it did.
pub(crate) fn short_run_warning(measured_ns: u64) -> Option<String> {
    (measured_ns < SHORT_RUN_NS).then(|| format!(
        "measured for {}: the worst case of a short run says little about the worst case of a day; measure for hours, under the load you care about",
        Nanos(measured_ns)
    ))
}
