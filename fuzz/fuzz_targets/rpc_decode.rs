//! The daemon's protocol decoder on arbitrary bytes: it must never panic, and whatever it accepts
//! must re-encode to a line that decodes to the same request. The response decoder (the client's
//! side) must never panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_core::rpc::{decode_request, decode_response, encode_request};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = decode_request(data) {
        let line = encode_request(&request);
        assert_eq!(decode_request(line.as_bytes()).as_ref(), Ok(&request));
    }
    let _ = decode_response(data);
});
