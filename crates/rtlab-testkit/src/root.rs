//! The checks a root-only test starts with, and taking turns among a test binary's root tests.
//!
//! Tests that need root, tracefs or real-time classes are `#[ignore = "needs root…"]`: without
//! root they are skipped, and counted so. Run with `--run-ignored all` (CI does, as root) without
//! what they need, they fail here saying what is missing; they never pass without testing.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Fails the test unless it runs as root (uid 0); `needs` says what for.
#[track_caller]
pub fn require_root(needs: &str) {
    assert!(
        rtlab_sys::proc_thread::current_uid() == 0,
        "this test needs root ({needs}): run it as root (CI does, with --run-ignored all)"
    );
}

/// Fails the test unless this process may use real-time policies (root, or CAP_SYS_NICE: tried
/// for real, [`rtlab_sys::sched::realtime_permitted`]); `needs` says what for.
#[track_caller]
pub fn require_realtime(needs: &str) {
    assert!(
        rtlab_sys::sched::realtime_permitted(),
        "this test needs root or CAP_SYS_NICE ({needs}): run it as root (CI does, with --run-ignored all)"
    );
}

/// Fails the test unless tracefs is mounted, or can be ([`rtlab_sys::tracefs::Tracefs::open`]).
#[track_caller]
pub fn require_tracefs() {
    if let Err(error) = rtlab_sys::tracefs::Tracefs::open() {
        panic!("this test needs tracefs: {error}");
    }
}

/// Fails the test unless it runs as root with tracefs.
#[track_caller]
pub fn require_root_and_tracefs() {
    require_root("SCHED_FIFO and tracefs");
    require_tracefs();
}

/// Fails the test unless `path` opens for writing (a device such as `/dev/cpu_dma_latency`, which
/// only root may write).
#[track_caller]
pub fn require_writable(path: &str) {
    if let Err(error) = std::fs::OpenOptions::new().write(true).open(path) {
        panic!(
            "this test needs {path}, writable ({error}): run it as root (CI does, with --run-ignored all)"
        );
    }
}

/// Waits for `turns`, the lock through which some of a test binary's tests run one at a time, and
/// holds it as long as the guard; a test that failed holding it does not stop the others.
///
/// The lock reaches only the tests of one process: under `cargo test`, the tests of one binary.
/// nextest runs each test in its own process and serialises the tests that must not overlap
/// itself (`.config/nextest.toml`).
pub fn take_turns(turns: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    turns.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lock through which the root tests of one test binary take turns, when running at once
/// they would disturb each other (daemons sharing the kernel's deadline bandwidth and the top
/// cpuset, canaries owning the same CPUs). Each test binary links this crate once, so each has
/// its own.
static ROOT_TURNS: Mutex<()> = Mutex::new(());

/// Fails the test unless it runs as root, then waits for its turn among the binary's root tests
/// (see [`ROOT_TURNS`]); the turn lasts as long as the guard.
#[track_caller]
pub fn require_root_taking_turns() -> MutexGuard<'static, ()> {
    require_root_for_turns("it changes scheduling")
}

/// [`require_root_taking_turns`] saying what the test needs root for.
#[track_caller]
pub fn require_root_for_turns(needs: &str) -> MutexGuard<'static, ()> {
    require_root(needs);
    take_turns(&ROOT_TURNS)
}

/// Fails the test unless it runs as root with tracefs ([`require_root_and_tracefs`]), then waits
/// for its turn among the binary's root tests; the turn lasts as long as the guard.
#[track_caller]
pub fn require_root_and_tracefs_taking_turns() -> MutexGuard<'static, ()> {
    require_root_and_tracefs();
    take_turns(&ROOT_TURNS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_taken_after_a_test_failed_holding_it() {
        static TURNS: Mutex<()> = Mutex::new(());
        let failed = std::thread::spawn(|| {
            let _turn = take_turns(&TURNS);
            panic!("a test fails during its turn");
        })
        .join();
        assert!(failed.is_err() && TURNS.is_poisoned());
        drop(take_turns(&TURNS));
    }
}
