//! Fuzzes the trace.dat reader (v6 and v7, compressed sections and chunks, page and payload
//! decoding) and the analyses behind it: any bytes give events or an error, never a panic. Starts
//! from the head of a real capture, so the fuzzer gets past the magic and the header sections.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_trace::analyze::{AnalysisConfig, Analyzer};
use rtlab_trace::tracedat::TraceDat;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut dat) = TraceDat::open(data.to_vec()) {
        let mut analyzer = Analyzer::new(AnalysisConfig::default());
        let _ = dat.for_each_event(|event| analyzer.push(event));
    }
});
