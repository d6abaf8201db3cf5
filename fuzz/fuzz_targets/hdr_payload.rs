//! The `hdr` field of a series is decoded from untrusted files: hostile HdrHistogram payloads
//! (huge declared sizes, deflate bombs, bad counts) must give an error, never a panic or an
//! unbounded allocation. Run: `cargo fuzz run hdr_payload`.
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Raw bytes, base64-encoded as they would stand in a record, and the bytes as text.
    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
    let _ = rtlab_core::LatencyHistogram::from_base64(&encoded);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = rtlab_core::LatencyHistogram::from_base64(text);
    }
});
