//! Fuzzes the tracefs `format`, `header_page` and `header_event` parsers: any text must parse or
//! give an error naming the line, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_explain::event::EventDecoder;
use rtlab_explain::format::{parse_event_format, parse_header_event, parse_header_page};

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(format) = parse_event_format("sched", &text) {
        let _ = EventDecoder::default().add(&format);
    }
    let _ = parse_header_page(&text);
    let _ = parse_header_event(&text);
});
