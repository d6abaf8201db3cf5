//! The workspace's one "wait until a condition holds or a deadline passes" for tests.
//!
//! A limit here is a bound for a busy machine (CI beside other builds), never a timing under
//! test: a test that waits asserts what happened, not how soon.

use std::time::{Duration, Instant};

/// How often a condition is checked again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Calls `probe` every [`POLL_INTERVAL`] until it returns a value, and returns that value; `None`
/// once `limit` has passed (`probe` is called once more at the deadline, so a slow machine that
/// overslept still gets its last look).
pub fn poll<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Whether `condition` held within `limit`, checked every [`POLL_INTERVAL`].
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    poll(limit, || condition().then_some(())).is_some()
}

/// The first value `probe` returns within `limit`; fails the test naming `what` when none came.
#[track_caller]
pub fn wait_for<T>(limit: Duration, what: &str, probe: impl FnMut() -> Option<T>) -> T {
    match poll(limit, probe) {
        Some(value) => value,
        None => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Waits until `condition` holds; fails the test naming `what` when it has not within `limit`.
#[track_caller]
pub fn wait_until(limit: Duration, what: &str, condition: impl FnMut() -> bool) {
    assert!(
        eventually(limit, condition),
        "timed out after {limit:?} waiting until {what}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_returns_the_first_value_the_probe_gives() {
        let mut calls = 0;
        let found = poll(Duration::from_secs(60), || {
            calls += 1;
            (calls == 3).then_some(calls)
        });
        assert_eq!(found, Some(3));
    }

    #[test]
    fn poll_gives_up_at_its_limit_after_one_last_look() {
        let mut calls = 0;
        let found: Option<()> = poll(Duration::ZERO, || {
            calls += 1;
            None
        });
        assert_eq!((found, calls), (None, 1));
        assert!(!eventually(Duration::ZERO, || false));
    }

    #[test]
    #[should_panic(expected = "waiting until the impossible")]
    fn wait_until_fails_the_test_naming_what_it_waited_for() {
        wait_until(Duration::ZERO, "the impossible", || false);
    }
}
