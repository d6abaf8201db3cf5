//! Fuzzes the binary ring-buffer page decoder and the event decoder behind it: any bytes must give
//! records or an error, never a panic or an out-of-bounds read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_explain::event::EventDecoder;
use rtlab_explain::format::parse_event_format;
use rtlab_explain::page::PageDecoder;
use std::sync::OnceLock;

const SCHED_SWITCH: &str =
    include_str!("../../crates/rtlab-explain/test_data/format/ok/sched__sched_switch.format");
const IRQ_ENTRY: &str =
    include_str!("../../crates/rtlab-explain/test_data/format/ok/irq__irq_handler_entry.format");
const PRINT: &str =
    include_str!("../../crates/rtlab-explain/test_data/format/ok/ftrace__print.format");

fn event_decoder() -> &'static EventDecoder {
    static DECODER: OnceLock<EventDecoder> = OnceLock::new();
    DECODER.get_or_init(|| {
        let mut decoder = EventDecoder::default();
        for (system, text) in [
            ("sched", SCHED_SWITCH),
            ("irq", IRQ_ENTRY),
            ("ftrace", PRINT),
        ] {
            let format = parse_event_format(system, text).expect("fixture formats parse");
            decoder.add(&format).expect("fixture formats are usable");
        }
        decoder
    })
}

fuzz_target!(|page: &[u8]| {
    let decoder = event_decoder();
    let _ = PageDecoder::default().decode(page, |record| {
        let _ = decoder.decode(0, record.timestamp_ns, record.payload);
    });
});
