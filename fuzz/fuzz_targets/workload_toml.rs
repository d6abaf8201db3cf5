//! Fuzzes the workload file parser of `rtlab workload`: no input may panic, and whatever parses
//! must keep the model's promises (it passes `Workload::check`, every index resolves, every
//! ring has at least one buffer). Run, seeded with the fixtures:
//! `cargo +nightly fuzz run workload_toml fuzz/corpus/workload_toml crates/rtlab-workload/test_data/workload/ok crates/rtlab-workload/test_data/workload/err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_workload::model::Trigger;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(workload) = rtlab_workload::toml_file::parse_workload_toml(text, "fuzz") else {
        return;
    };
    workload
        .check()
        .expect("a parsed workload passes its own check");
    assert!(!workload.threads.is_empty());
    for (index, thread) in workload.threads.iter().enumerate() {
        for ring in [thread.produces, thread.consumes].into_iter().flatten() {
            assert!(ring < workload.rings.len());
        }
        for &target in &thread.wakes {
            assert!(target < workload.threads.len());
        }
        if let Trigger::WokenBy(waker) = thread.trigger {
            assert!(waker < workload.threads.len());
        }
        if let Some(section) = thread.critical_section {
            assert!(section.lock < workload.locks.len());
        }
        assert!(workload.nominal_period(index).0 > 0);
    }
    for ring in &workload.rings {
        assert!(ring.buffers >= 1 && ring.prefill <= ring.buffers && ring.period.0 > 0);
    }
});
