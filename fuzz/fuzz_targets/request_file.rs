//! Fuzzes the `rtlab plan` request-file parser, then plans whatever parses and has the independent
//! checker verify the result: no input may panic, and no accepted input may yield a broken plan.
//!
//! Run: `cargo +nightly fuzz run request_file`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_core::Nanos;
use rtlab_plan::{check, parse_requests, Planner};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(requests) = parse_requests(text) else {
        return;
    };
    let mut planner = Planner::new(2, Nanos::from_millis(1), 0.9).expect("valid planner");
    for request in requests.iter().take(64) {
        let _ = planner.reserve(request.owner.clone(), request.amount, request.period);
    }
    let violations = check::check(
        &planner.plan(),
        &planner.grants(),
        &[],
        planner.quantum(),
        planner.cap(),
    );
    assert!(violations.is_empty(), "{violations:?}");
});
