//! Fuzzes every importer: any bytes, detected or forced into each format, must give a value or an
//! error, never a panic. Run, seeded with the fixtures:
//! `cargo +nightly fuzz run parse fuzz/corpus/parse crates/rtlab-import/test_data/*/ok crates/rtlab-import/test_data/*/err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_import::{parse, Format, ImportOptions, ValueUnit};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [
        None,
        Some(Format::Cyclictest),
        Some(Format::RtlaTimerlat),
        Some(Format::HdrLog),
        Some(Format::Csv),
    ] {
        let options = ImportOptions {
            format,
            value_unit: Some(ValueUnit::Microseconds),
            ..ImportOptions::default()
        };
        let _ = parse(text, &options);
    }
});
