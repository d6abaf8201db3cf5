//! Any bytes given to `rtlab show FILE` (or any command reading a Run record) must give a record
//! or an error, never a panic. Run: `cargo fuzz run run_record`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = rtlab_core::RunRecord::from_json(text);
        let _ = rtlab_core::parse_duration(text);
    }
});
