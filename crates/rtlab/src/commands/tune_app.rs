//! `rtlab tune --app COMM`: the flags' program handed to rtlab-tune as its [`AppWatcher`]; the
//! count of each round is `rtlab_trace::watch_app`'s (as `rtlab trace watch --comm COMM` counts),
//! the culprits' words rtlab-render's.

use rtlab_core::tune_report::AppRound;
use rtlab_trace::watch_app::{self, WatchedProgram};
use rtlab_tune::AppWatcher;
use std::sync::atomic::AtomicBool;

/// The program `--app` names, with the cycle rule `--cycle-marker` chose (inferred without it).
pub struct WatchedApp(WatchedProgram);

impl WatchedApp {
    /// `--app COMM` (a name as `/proc/PID/comm` holds it: at most 15 bytes) and `--cycle-marker`.
    pub fn new(comm: &str, cycle_marker: Option<&str>) -> anyhow::Result<WatchedApp> {
        if !watch_app::valid_comm(comm) {
            return Err(crate::exit::input(format!(
                "--app {comm:?}: give a program's name as /proc/PID/comm holds it (1 to 15 bytes, no '/')"
            )));
        }
        let cycle_marker = super::trace_markers::cycle_marker_flag(cycle_marker)?;
        Ok(WatchedApp(WatchedProgram::new(
            comm.to_owned(),
            cycle_marker,
        )))
    }
}

impl AppWatcher for WatchedApp {
    fn comm(&self) -> &str {
        self.0.comm()
    }

    fn running(&self) -> bool {
        self.0.running()
    }

    fn watch(&self, round_over: &AtomicBool) -> Result<AppRound, String> {
        let label = rtlab_render::apptrace_words::culprit_label;
        self.0
            .round(round_over, label)
            .map_err(|error| format!("{:#}", super::trace_markers::record_error(error)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_proc_cannot_hold_is_an_input_error() {
        for comm in ["", "a/b", "a_name_longer_than_15"] {
            let error = WatchedApp::new(comm, None).err().expect("refused");
            assert!(error.to_string().contains("--app"), "{error}");
        }
    }
}
