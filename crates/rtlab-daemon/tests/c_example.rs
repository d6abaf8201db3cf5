//! The C example (`crates/rtlab-client/examples/reserve.c`) compiled with the system's `cc` against
//! `librtlab_client.a` and run against a daemon: the C ABI end to end.

mod support;

use rtlab_testkit::c_example::compile_example;
use std::process::Command;
use support::TestDaemon;

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
