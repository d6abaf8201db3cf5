//! Compiles rtlab-client's `examples/reserve.c` with the system's `cc` against
//! `librtlab_client.a`, for the tests that run it: against the fake daemon in
//! `rtlab-daemon/tests`, against the real one in `rtlab/tests/daemon_cli.rs`; [`compile`] by the
//! hostile-client test too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `librtlab_client.a`, which cargo builds in the same `deps/` directory as the test binary when
/// the test's crate depends on rtlab-client (this crate does not: a test that compiles the
/// example names rtlab-client among its crate's dev-dependencies).
pub fn static_library() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let library = deps.join("librtlab_client.a");
    assert!(library.exists(), "{} was not built", library.display());
    library
}

/// Compiles the example into `directory` with `cc -Wall -Wextra -Werror` and returns the binary.
pub fn compile_example(directory: &Path) -> PathBuf {
    // This crate's directory: `crates/rtlab-testkit`, beside `crates/rtlab-client`.
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rtlab-client");
    let binary = directory.join("reserve");
    let mut command = Command::new("cc");
    command
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
        .args(["-lpthread", "-ldl", "-lm"]);
    compile(&mut command);
    binary
}

/// Runs the C compiler `command` (`cc …`); fails the test with the compiler's messages when it
/// does not succeed.
pub fn compile(command: &mut Command) {
    let output = command
        .output()
        .expect("running cc (Debian: apt-get install gcc)");
    assert!(
        output.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
