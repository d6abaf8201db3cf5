//! `rtlab tune --app COMM`: the program's own deadline misses in one round, counted as `rtlab
//! trace watch --comm COMM` counts them (its recording, windowed analysis and counting rule:
//! [`crate::watch::count_window`]). rtlab-tune runs one round beside each probe round and
//! judges the counts; the binary's `tune_app.rs` hands this to it as its `AppWatcher`.

use crate::analyze::report::LateActivation;
use crate::cycle_marker::CycleMarker;
use crate::live::DEFAULT_WINDOW_NS;
use crate::record::{RecordError, RecorderChoice, Target};
use crate::watch::{self, Markers, WatchConfig};
use rtlab_core::tune_report::AppRound;
use rtlab_core::watch_summary::WatchSummary;
use std::sync::atomic::AtomicBool;

/// Whether `comm` is a name `/proc/PID/comm` can hold: 1 to 15 bytes, no '/'.
pub fn valid_comm(comm: &str) -> bool {
    !comm.is_empty() && comm.len() <= 15 && !comm.contains('/')
}

/// A program watched round by round, by its name, with the cycle rule its marker gives
/// (inferred without one).
pub struct WatchedProgram {
    comm: String,
    cycle_marker: Option<CycleMarker>,
}

impl WatchedProgram {
    pub fn new(comm: String, cycle_marker: Option<CycleMarker>) -> WatchedProgram {
        WatchedProgram { comm, cycle_marker }
    }

    pub fn comm(&self) -> &str {
        &self.comm
    }

    /// True when a process of the program's name runs: a zombie (exited, not yet reaped)
    /// does not.
    pub fn running(&self) -> bool {
        process_running(&self.comm)
    }

    /// Records and counts the program's misses until `round_over`, each culprit counted under
    /// `label` (`rtlab_render::apptrace_words::culprit_label`).
    pub fn round(
        &self,
        round_over: &AtomicBool,
        label: impl Fn(&LateActivation) -> String,
    ) -> Result<AppRound, RecordError> {
        let mut summary = WatchSummary::default();
        let target = Target::Comm(self.comm.clone());
        let config = WatchConfig {
            target: &target,
            duration: None,
            window_ns: DEFAULT_WINDOW_NS,
            recorder: RecorderChoice::Auto,
            markers: Markers {
                cycle: self.cycle_marker.as_ref(),
                work_done: None,
            },
        };
        watch::watch_windows(&config, round_over, |report| {
            watch::count_window(&mut summary, &report, &label, |_, _, _| {})
        })?;
        Ok(AppRound {
            misses: summary.misses,
            seconds: summary.seconds(),
        })
    }
}

/// True when a process named `comm` runs: a zombie (exited, not yet reaped) does not.
fn process_running(comm: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        entry
            .file_name()
            .to_str()
            .is_some_and(|pid| pid.bytes().all(|byte| byte.is_ascii_digit()))
            && std::fs::read_to_string(path.join("comm")).is_ok_and(|name| name.trim_end() == comm)
            && std::fs::read_to_string(path.join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_found_by_its_name_and_a_zombie_is_not() {
        let own = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert!(process_running(own.trim_end()));
        assert!(!process_running("rtlab-no-such"));
        // A program of a name no other process has, exited and not yet reaped: a zombie.
        let directory = tempfile::tempdir().unwrap();
        let name = format!("rtlabz{}", std::process::id() % 1_000_000);
        let program = directory.path().join(&name);
        std::fs::copy("/bin/true", &program).unwrap();
        let mut child = std::process::Command::new(&program).spawn().unwrap();
        let pid = child.id();
        assert!(rtlab_testkit::eventually(
            std::time::Duration::from_secs(10),
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
        ));
        assert!(!process_running(&name));
        child.wait().unwrap();
    }

    #[test]
    fn a_name_proc_cannot_hold_is_not_valid() {
        for comm in ["", "a/b", "a_name_longer_than_15"] {
            assert!(!valid_comm(comm), "{comm}");
        }
        assert!(valid_comm("jackd"));
    }
}
