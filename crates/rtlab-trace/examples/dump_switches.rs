//! Diagnostic: prints every switch in and out of the given threads, and their wake-ups, as
//! `ns in|out|wake tid state-or-waker` (used to compare JACK's xruns with late activations
//! burst by burst: `cargo run -p rtlab-trace --example dump_switches -- TRACE TID...`).
use rtlab_trace::source::TraceSource;
use rtlab_trace::EventKind;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tids: Vec<i32> = args[2..].iter().map(|tid| tid.parse().unwrap()).collect();
    let mut source = TraceSource::open(std::path::Path::new(&args[1])).unwrap();
    source
        .for_each_event(|event| match event.kind {
            EventKind::Switch {
                prev_tid,
                prev_state,
                next_tid,
                ..
            } => {
                if tids.contains(&prev_tid) {
                    println!("{} out {} {}", event.timestamp_ns, prev_tid, prev_state);
                }
                if tids.contains(&next_tid) {
                    println!("{} in {} 0", event.timestamp_ns, next_tid);
                }
            }
            EventKind::Waking { tid, waker, .. } if tids.contains(&tid) => {
                println!("{} wake {} {}", event.timestamp_ns, tid, waker);
            }
            _ => {}
        })
        .unwrap();
}
