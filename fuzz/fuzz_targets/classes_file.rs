//! Fuzzes the application classes file parser (`rtlab forecast --classes-file`): no input may
//! panic, and every accepted class must be one a forecast can take (at least 2 buffers, a buffer
//! period above 0 with the compute time inside it, a positive acceptable rate). Run, seeded with
//! the fixtures:
//! `cargo +nightly fuzz run classes_file fuzz/corpus/classes_file crates/rtlab-analysis/test_data/classes/ok crates/rtlab-analysis/test_data/classes/err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_analysis::classes::parse_classes;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(classes) = parse_classes(text) else {
        return;
    };
    for class in &classes {
        assert!(!class.name.trim().is_empty());
        assert!(class.buffers >= 2);
        assert!(class.buffer_period.0 > 0 && class.compute < class.buffer_period);
        assert!(class.acceptable.mean_interval_s() > 0.0);
    }
});
