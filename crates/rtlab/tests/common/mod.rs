//! Helpers shared by rtlab's CLI integration tests, so each test file says what it checks rather
//! than how to start the binary, read its exit code and output, or build a record by hand.
//!
//! Cargo builds every `tests/*.rs` file as its own crate and each pulls this module in with
//! `mod common;`; living in `common/mod.rs` keeps it from being built as a test crate itself. The
//! helpers every crate's tests share (waits, root checks, processes that end) are in the
//! workspace's test kit, `rtlab-testkit`, re-exported here so a CLI test names one module.

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

// The test kit's helpers; each test crate uses only some of them.
#[allow(unused_imports)]
pub use rtlab_testkit::wait::{eventually, poll, wait_for, wait_until};
#[allow(unused_imports)]
pub use rtlab_testkit::{end, wait, KillOnDrop};
#[cfg(target_os = "linux")]
#[allow(unused_imports)]
pub use rtlab_testkit::{
    require_root_and_tracefs, require_root_taking_turns, start_at_the_default_priority,
};

use rtlab_core::{LatencyHistogram, RunRecord};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
