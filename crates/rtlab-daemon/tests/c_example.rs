//! The C example (`crates/rtlab-client/examples/reserve.c`) compiled with the system's `cc` against
//! `librtlab_client.a` and run against a daemon: the C ABI end to end.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::TestDaemon;

/// `librtlab_client.a`, which cargo builds beside this test (in `deps/`) as a dependency.
fn static_library() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let library = deps.join("librtlab_client.a");
    assert!(library.exists(), "{} was not built", library.display());
    library
}

/// Compiles the example into `directory` with `cc -Wall -Wextra -Werror`.
pub fn compile_example(directory: &Path) -> PathBuf {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rtlab-client");
    let binary = directory.join("reserve");
    let output = Command::new("cc")
        .args([
            "-std=c11",
            "-D_POSIX_C_SOURCE=200809L",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
        ])
        .arg(&binary)
        .arg(client.join("examples/reserve.c"))
        .arg("-I")
        .arg(client.join("include"))
        .arg(static_library())
        .args(["-lpthread", "-ldl", "-lm"])
        .output()
        .expect("running cc (Debian: apt-get install gcc)");
    assert!(
        output.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

#[test]
fn the_c_example_reserves_constrains_and_releases_through_the_daemon() {
    let daemon = TestDaemon::start(|_| {});
    let binary = compile_example(daemon.directory.path());
    let output = Command::new(&binary)
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("1000000/10000000 ns granted"), "{stdout}");
    assert!(stdout.contains("backend deadline"), "{stdout}");
    assert!(stdout.contains("met its deadline"), "{stdout}");
    assert!(stdout.contains("released"), "{stdout}");
    let log = daemon.log.lock().unwrap();
    assert_eq!(log.released.len(), 1);
    assert!(log.managed.is_empty());
}

#[test]
fn the_c_example_without_a_daemon_says_how_to_start_one() {
    let directory = tempfile::tempdir().unwrap();
    let binary = compile_example(directory.path());
    let output = Command::new(&binary)
        .env("RTLAB_SOCKET", directory.path().join("none.sock"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rtlab_reserve: the rtlab daemon is not running"),
        "{stderr}"
    );
    assert!(stderr.contains("rtlab daemon"), "{stderr}");
}
