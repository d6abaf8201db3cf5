//! The `--perfetto` output: Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing) with the
//! same content as the SVG — every thread's running / runnable / blocked spans, and the findings
//! (inversions, hangs, starvation) as spans on the threads they concern. Times in µs.

use rtlab_core::apptrace_report::TraceReport;
use rtlab_core::apptrace_timeline::Span;
use serde_json::{json, Value};
use std::collections::HashMap;

fn micros(ns: u64, first: u64) -> f64 {
    ns.saturating_sub(first) as f64 / 1000.0
}

/// Renders the trace-event JSON.
pub fn render(report: &TraceReport, spans: &[Span]) -> String {
    let first = report.first_ns;
    let process_of: HashMap<i32, i32> = report
        .threads
        .iter()
        .map(|row| (row.tid, row.tgid.unwrap_or(0)))
        .collect();
    let pid = |tid: i32| process_of.get(&tid).copied().unwrap_or(0);
    let mut events: Vec<Value> = Vec::new();
    for row in &report.threads {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid(row.tid), "tid": row.tid,
            "args": {"name": format!("{} ({} {})", row.name, row.policy.split('|').next().unwrap_or(""), row.priority)}}));
        events.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": pid(row.tid), "tid": row.tid,
            "args": {"sort_index": row.kernel_prio}}),
        );
    }
    for span in spans {
        events.push(json!({
            "ph": "X", "cat": "sched", "name": crate::apptrace_words::span_state(span.state),
            "pid": pid(span.tid), "tid": span.tid,
            "ts": micros(span.start_ns, first),
            "dur": span.end_ns.saturating_sub(span.start_ns) as f64 / 1000.0,
        }));
    }
    for inversion in &report.inversions {
        events.push(json!({
            "ph": "X", "cat": "finding", "name": "priority inversion",
            "pid": pid(inversion.high.tid), "tid": inversion.high.tid,
            "ts": micros(inversion.at_ns, first), "dur": inversion.duration_ns as f64 / 1000.0,
            "args": {"high": inversion.high, "low": inversion.low, "middle": inversion.middle, "futex": inversion.futex},
        }));
    }
    for hang in &report.hangs {
        let end = hang.ended_ns.unwrap_or(report.last_ns);
        for thread in &hang.threads {
            events.push(json!({
                "ph": "X", "cat": "finding", "name": if hang.cycle { "deadlock" } else { "hang" },
                "pid": pid(thread.tid), "tid": thread.tid,
                "ts": micros(hang.since_ns, first), "dur": end.saturating_sub(hang.since_ns) as f64 / 1000.0,
                "args": {"futex": thread.futex, "owner": thread.owner, "threads": hang.threads},
            }));
        }
    }
    for starved in &report.starvation {
        events.push(json!({
            "ph": "X", "cat": "finding", "name": "starvation",
            "pid": pid(starved.thread.tid), "tid": starved.thread.tid,
            "ts": micros(starved.since_ns, first), "dur": starved.runnable_ns as f64 / 1000.0,
            "args": {"ran": starved.ran},
        }));
    }
    let document = json!({
        "displayTimeUnit": "ms",
        "otherData": {"source": report.source.path, "schema": report.header.schema},
        "traceEvents": events,
    });
    serde_json::to_string(&document).expect("JSON values serialise") + "\n"
}
