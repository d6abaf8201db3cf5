//! `rtlab tune --app COMM`: the program's own deadline misses in each round, counted as `rtlab
//! trace watch --comm COMM` counts them (its recording, windowed analysis and counting rule:
//! `rtlab_trace::watch::count_window`). rtlab-tune runs one [`AppWatcher::watch`] beside
//! each probe round and judges the counts.

use rtlab_core::tune_report::AppRound;
use rtlab_core::watch_summary::WatchSummary;
use rtlab_trace::live::DEFAULT_WINDOW_NS;
use rtlab_trace::record::{RecorderChoice, Target};
use rtlab_trace::watch::{self, Markers, WatchConfig};
use rtlab_tune::AppWatcher;
use std::sync::atomic::AtomicBool;

/// The program `--app` names, with the cycle rule `--cycle-marker` chose (inferred without it).
pub struct WatchedApp {
    comm: String,
    cycle_marker: Option<rtlab_trace::cycle_marker::CycleMarker>,
}

impl WatchedApp {
    /// `--app COMM` (a name as `/proc/PID/comm` holds it: at most 15 bytes) and `--cycle-marker`.
    pub fn new(comm: &str, cycle_marker: Option<&str>) -> anyhow::Result<WatchedApp> {
        if comm.is_empty() || comm.len() > 15 || comm.contains('/') {
            return Err(crate::exit::input(format!(
                "--app {comm:?}: give a program's name as /proc/PID/comm holds it (1 to 15 bytes, no '/')"
            )));
        }
        Ok(WatchedApp {
            comm: comm.to_owned(),
            cycle_marker: super::trace_markers::cycle_marker_flag(cycle_marker)?,
        })
    }
}

impl AppWatcher for WatchedApp {
    fn comm(&self) -> &str {
        &self.comm
    }

    fn running(&self) -> bool {
        process_running(&self.comm)
    }

    fn watch(&self, round_over: &AtomicBool) -> Result<AppRound, String> {
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
            let label = rtlab_render::apptrace_words::culprit_label;
            watch::count_window(&mut summary, &report, label, |_, _, _| {})
        })
        .map_err(|error| format!("{:#}", super::trace_markers::record_error(error)))?;
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
    fn a_name_proc_cannot_hold_is_an_input_error() {
        for comm in ["", "a/b", "a_name_longer_than_15"] {
            let error = WatchedApp::new(comm, None).err().expect("refused");
            assert!(error.to_string().contains("--app"), "{error}");
        }
    }
}
