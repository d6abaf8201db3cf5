//! Helpers shared by rtlab's CLI integration tests, so each test file says what it checks rather
//! than how to start the binary, read its exit code and output, or build a record by hand.
//!
//! Cargo builds every `tests/*.rs` file as its own crate and each pulls this module in with
//! `mod common;`; living in `common/mod.rs` keeps it from being built as a test crate itself.

// Each test crate uses only some of these helpers, and in a crate the rest would be dead code:
// without this allow, `cargo clippy --all-targets -- -D warnings` fails on every test crate that
// does not use all of them.
#![allow(dead_code)]

/// jackd2, a JACK client that counts its xruns and a FIFO competitor (issue 26).
#[cfg(target_os = "linux")]
pub mod jack;

/// A private PipeWire server, a JACK client through pw-jack and pw-profiler (issue 40).
#[cfg(target_os = "linux")]
pub mod pipewire;

/// A private dbus-daemon configured as a system bus.
#[cfg(target_os = "linux")]
pub mod dbus;

/// `rtlab daemon` on a socket in the sandbox.
#[cfg(target_os = "linux")]
pub mod daemon;

/// `rtlab monitor`'s Prometheus export, read over loopback HTTP.
pub mod monitor;

/// Waiting until a condition holds or a deadline passes: the one copy, which other crates' tests
/// include by path.
pub mod wait;

// Each test crate uses only some of them (see the `dead_code` allow above).
#[allow(unused_imports)]
pub use wait::{eventually, poll, wait_for, wait_until};

use rtlab_core::{LatencyHistogram, RunRecord};
use serde_json::Value;
use std::ffi::OsStr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

/// `rtlab run` for one second after a 100 ms warm-up, nothing stored: the suite's shortest real
/// measurement, for the caller to add flags to.
pub const SHORT_RUN: [&str; 6] = ["run", "--duration", "1s", "--warmup", "100ms", "--no-store"];

/// `rtlab run` of the rt-high class doing 100 µs of work after each wake-up (which adds a
/// response series), measuring from the first sample (no warm-up), nothing stored; the caller
/// adds the duration and where the record goes.
pub const RT_HIGH_WITH_100US_OF_WORK: [&str; 8] = [
    "run",
    "--classes",
    "rt-high",
    "--compute",
    "100us",
    "--warmup",
    "0s",
    "--no-store",
];

/// Puts the calling test thread at SCHED_OTHER, nice 0, so that every process and thread it starts
/// from now on begins at the default priority.
///
/// A machine may run everything raised: this one's init and every shell under it run at nice -10,
/// and a test's children inherit that. A sleeper that starts at nice -10 already looks raised, and
/// the tests that check a thread was put back to where it started would read the runner's nice as
/// the daemon's doing. Nice is per thread on Linux; a test's helpers are spawned from its own
/// thread, so setting it here covers them. Raising the nice value needs no privilege.
pub fn start_at_the_default_priority() {
    rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Other { nice: 0 })
        .expect("put the test thread at SCHED_OTHER, nice 0");
}

/// A fresh temporary directory that is the `RTLAB_HOME` of every rtlab it starts and the place
/// the test writes its input files; removed, with the run store in it, when dropped.
///
/// Each test gets its own so that tests running in parallel never share a run store, and none
/// reads a store left by an earlier run of the suite.
pub struct Sandbox {
    directory: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        start_at_the_default_priority();
        Sandbox {
            directory: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    pub fn path(&self) -> &Path {
        self.directory.path()
    }

    /// The path of `name` inside the sandbox (not created).
    pub fn file(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// Writes `contents` to `name` inside the sandbox, replacing what was there, and returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        path
    }

    /// Writes `record` as the JSON rtlab reads to `name` inside the sandbox and returns its path.
    pub fn write_record(&self, name: &str, record: &RunRecord) -> PathBuf {
        self.write(name, record.to_json_pretty())
    }

    /// The rtlab binary under test with this sandbox as its `RTLAB_HOME`, for tests that add an
    /// environment or spawn it rather than wait for it.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rtlab"));
        command.env("RTLAB_HOME", self.path());
        command
    }

    /// Runs rtlab with `args` to completion and returns what it printed and how it exited,
    /// without judging either.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command()
            .args(args)
            .output()
            .expect("start the rtlab binary")
    }

    /// Runs rtlab with `args` and asserts it exited with `code` (see [`assert_exit_code`]).
    #[track_caller]
    pub fn run_expecting<I, S>(&self, code: i32, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = self.run(args);
        assert_exit_code(&output, code);
        output
    }
}

/// A spawned rtlab that is killed and reaped when dropped, so a failing assertion does not leave
/// it measuring at real-time priority until its own deadline.
pub struct KillOnDrop(pub Child);

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Both fail harmlessly when the test already waited for it.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ends `child` the way a user would: SIGTERM, up to `grace` to exit on its own (and undo what it
/// changed), then SIGKILL; reaps it. Nothing happens to a child that has already exited.
pub fn end(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .stderr(std::process::Stdio::null())
        .status();
    if !eventually(grace, || matches!(child.try_wait(), Ok(Some(_)))) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// The lock through which the root tests of one test binary take turns, when running at once
/// they would disturb each other (daemons sharing the kernel's deadline bandwidth and the top
/// cpuset, canaries owning the same CPUs). Each test binary has its own copy of this module.
#[cfg(target_os = "linux")]
static ROOT_TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Fails the test unless it runs as root, then waits for its turn among the binary's root tests
/// (see [`ROOT_TURNS`]); the turn lasts as long as the guard.
#[cfg(target_os = "linux")]
#[track_caller]
pub fn require_root_taking_turns() -> std::sync::MutexGuard<'static, ()> {
    assert!(
        rtlab_sys::proc_thread::current_uid() == 0,
        "this test needs root: run it as root (CI does, with --include-ignored)"
    );
    ROOT_TURNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Fails the test unless it runs as root with tracefs mounted.
#[cfg(target_os = "linux")]
#[track_caller]
pub fn require_root_and_tracefs() {
    assert!(
        rtlab_sys::proc_thread::current_uid() == 0,
        "this test needs root (SCHED_FIFO and tracefs)"
    );
    if let Err(error) = rtlab_sys::tracefs::Tracefs::open() {
        panic!("this test needs tracefs: {error}");
    }
}

/// Asserts that rtlab exited with `code`; when it did not, the message shows its stderr and
/// stdout, which say why.
#[track_caller]
pub fn assert_exit_code(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "rtlab exited with {}\nstderr: {}\nstdout: {}",
        output.status,
        stderr_text(output),
        stdout_text(output)
    );
}

/// Asserts that rtlab rejected its input (exit 2) with an error message containing `expected`.
#[track_caller]
pub fn assert_input_error(output: &Output, expected: &str) {
    assert_exit_code(output, 2);
    let stderr = stderr_text(output);
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
}

pub fn stdout_text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr_text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output parsed as JSON; a panic showing the text when it is not JSON.
#[track_caller]
pub fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stdout is not JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Standard output parsed as a Run record, which must be UTF-8 and validate.
#[track_caller]
pub fn stdout_record(output: &Output) -> RunRecord {
    let text = std::str::from_utf8(&output.stdout).expect("stdout is UTF-8");
    RunRecord::from_json(text).expect("stdout is a valid Run record")
}

/// The Run record written at `path`, which must exist and validate.
#[track_caller]
pub fn read_record(path: &Path) -> RunRecord {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    RunRecord::from_json(&text).expect("record validates")
}

/// A record of rt-high wake-up latencies (SCHED_FIFO 90, 1 ms period, nothing missed or lost),
/// one series per `(cpu, histogram)`: input whose every figure a test can work out by hand.
pub fn rt_high_wakeup_record(
    id: &str,
    duration_ns: u64,
    histograms_by_cpu: &[(u32, &LatencyHistogram)],
) -> RunRecord {
    let series = histograms_by_cpu
        .iter()
        .map(|(cpu, histogram)| {
            rtlab_core::rt_high_wakeup_series(*cpu, histogram, 0, vec![], vec![])
                .expect("a series from a valid histogram")
        })
        .collect();
    RunRecord::new(id, "2026-01-01T00:00:00Z", duration_ns, series)
}

/// One rt-high wake-up series on CPU 0 with a single 20 µs sample: the least a valid record holds.
pub fn minimal_series() -> rtlab_core::Series {
    let mut histogram = LatencyHistogram::new();
    histogram.record(20_000);
    rt_high_wakeup_record("minimal", 1_000_000_000, &[(0, &histogram)])
        .series
        .remove(0)
}
