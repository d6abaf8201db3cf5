//! Fuzzes the rtlab trace file reader (header JSON, deflate blocks, records, trailer) and the
//! analyses it feeds: any bytes give events or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_trace::analyze::{AnalysisConfig, Analyzer};
use rtlab_trace::file::TraceFile;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut file) = TraceFile::open(data) {
        let mut analyzer = Analyzer::new(AnalysisConfig::default());
        let _ = file.for_each_event(|event| analyzer.push(event));
    }
});
