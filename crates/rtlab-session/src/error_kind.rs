//! Which of the session's errors (and the probe's beneath it) the caller's input caused, so a
//! program can tell "fix your settings" from "the system failed" without knowing every type.

use std::error::Error;

/// True when `cause` is one of this crate's errors, or the probe's, and the configuration is at
/// fault (a CPU that is not online, a too short period, an unknown API…), not the system.
#[cfg(target_os = "linux")]
pub fn is_input_error(cause: &(dyn Error + 'static)) -> bool {
    use crate::{buffer::BufferExperimentError, supply::VerifyError, timers::TimersError};
    cause
        .downcast_ref::<crate::SessionError>()
        .is_some_and(crate::SessionError::is_input)
        || cause
            .downcast_ref::<rtlab_probe::ProbeError>()
            .is_some_and(crate::probe_error_is_input)
        || cause
            .downcast_ref::<BufferExperimentError>()
            .is_some_and(BufferExperimentError::is_input)
        || cause
            .downcast_ref::<TimersError>()
            .is_some_and(TimersError::is_input)
        || cause
            .downcast_ref::<VerifyError>()
            .is_some_and(VerifyError::is_input)
}

/// True when `cause` is one of this crate's errors, or the probe's, and the configuration is at
/// fault (no class, a too short period, no such CPU…), not the system.
#[cfg(windows)]
pub fn is_input_error(cause: &(dyn Error + 'static)) -> bool {
    use crate::windows::WindowsSessionError;
    use rtlab_probe::windows::run::WindowsProbeError;
    cause
        .downcast_ref::<WindowsSessionError>()
        .is_some_and(WindowsSessionError::is_input)
        || cause
            .downcast_ref::<WindowsProbeError>()
            .is_some_and(WindowsProbeError::is_input)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn settings_are_input_and_the_system_is_not() {
        assert!(is_input_error(&rtlab_probe::ProbeError::NoClasses));
        let spawn = rtlab_probe::ProbeError::Spawn(std::io::Error::other("no threads"));
        assert!(!is_input_error(&spawn));
        assert!(!is_input_error(&std::io::Error::other("disk on fire")));
    }
}
