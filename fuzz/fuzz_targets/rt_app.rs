//! Fuzzes the rt-app JSON reader of `rtlab workload`: no input may panic, and whatever parses is
//! a runnable periodic task set (every thread periodic, every lock index valid, the model's own
//! check passes). Run, seeded with the fixtures:
//! `cargo +nightly fuzz run rt_app fuzz/corpus/rt_app crates/rtlab-workload/test_data/rt-app/ok crates/rtlab-workload/test_data/rt-app/err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_workload::model::Trigger;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(workload) = rtlab_workload::rt_app::parse_rt_app(text, "fuzz") else {
        return;
    };
    workload
        .check()
        .expect("a parsed task set passes the model's check");
    assert!(!workload.threads.is_empty());
    for thread in &workload.threads {
        assert!(matches!(thread.trigger, Trigger::Period { period, .. } if period.0 > 0));
        if let Some(section) = thread.critical_section {
            assert!(section.lock < workload.locks.len() && section.critical.0 > 0);
        }
    }
});
