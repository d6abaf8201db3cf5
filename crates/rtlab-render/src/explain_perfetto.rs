//! Episodes as a Chrome trace-event JSON document, the format ui.perfetto.dev, chrome://tracing
//! and speedscope open.
//!
//! A table of causes says *what* took a late wake-up's time; a trace viewer shows *when*, next to
//! the other episodes of the run. Each measured CPU is a process ("CPU 1"), each series a thread
//! in it ("rt-high/wakeup@1"), each episode a slice from the intended to the actual wake time with
//! its timeline (IRQ, softirq, task, timer, switch, unaccounted) as slices nested inside. Times are
//! relative to the start of measurement, in µs as the format wants.

use rtlab_core::{Episode, RunRecord};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn micros(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// The trace-event process id of a CPU (0 is avoided: viewers treat it as the idle task).
fn process_id(cpu: u32) -> u64 {
    u64::from(cpu) + 1
}

/// The Chrome trace-event document for a run's episodes.
pub fn chrome_trace(record: &RunRecord) -> Value {
    let mut thread_ids: BTreeMap<(u32, &str), u64> = BTreeMap::new();
    for episode in &record.episodes {
        let next = thread_ids.len() as u64 + 1;
        thread_ids
            .entry((episode.cpu, episode.series.as_str()))
            .or_insert(next);
    }
    let mut events = Vec::new();
    let mut named_cpus = std::collections::BTreeSet::new();
    for ((cpu, series), tid) in &thread_ids {
        if named_cpus.insert(*cpu) {
            events.push(json!({
                "name": "process_name", "ph": "M", "pid": process_id(*cpu),
                "args": {"name": format!("CPU {cpu}")},
            }));
            events.push(json!({
                "name": "process_sort_index", "ph": "M", "pid": process_id(*cpu),
                "args": {"sort_index": cpu},
            }));
        }
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": process_id(*cpu), "tid": tid,
            "args": {"name": series},
        }));
    }
    for episode in &record.episodes {
        let tid = thread_ids[&(episode.cpu, episode.series.as_str())];
        events.push(episode_slice(episode, tid));
        for segment in &episode.timeline {
            let mut args = json!({"ns": segment.ns, "kind": segment.kind.as_str()});
            if let Some(pid) = segment.pid {
                args["pid"] = json!(pid);
            }
            events.push(json!({
                "name": format!("{} {}", segment.kind.as_str(), segment.name),
                "cat": segment.kind.as_str(),
                "ph": "X",
                "ts": micros(episode.at_ns + segment.start_ns),
                "dur": micros(segment.ns),
                "pid": process_id(episode.cpu),
                "tid": tid,
                "args": args,
            }));
        }
    }
    json!({
        "displayTimeUnit": "ns",
        "traceEvents": events,
        "otherData": {
            "producer": format!("rtlab {}", record.tool_version),
            "run_id": record.id,
            "started_at": record.started_at,
            "host": record.host.hostname,
        },
    })
}

fn episode_slice(episode: &Episode, tid: u64) -> Value {
    let causes: Vec<Value> = episode
        .causes
        .iter()
        .map(|cause| {
            json!({
                "kind": cause.kind.as_str(),
                "name": cause.name,
                "pid": cause.pid,
                "ns": cause.ns,
                "detail": cause.detail,
            })
        })
        .collect();
    let mut args = json!({
        "series": episode.series,
        "latency_ns": episode.latency_ns,
        "causes": causes,
    });
    if let Some(steal) = episode.steal_ns {
        args["steal_ns"] = json!(steal);
    }
    if let Some(stack) = &episode.stack {
        args["stack"] = json!(stack);
    }
    json!({
        "name": format!("late wake-up {:.1} µs", micros(episode.latency_ns)),
        "cat": "episode",
        "ph": "X",
        "ts": micros(episode.at_ns),
        "dur": micros(episode.latency_ns),
        "pid": process_id(episode.cpu),
        "tid": tid,
        "args": args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::{Cause, CauseKind, Segment};

    fn record_with(episodes: Vec<Episode>) -> RunRecord {
        let mut record = RunRecord::new("0123456789abcdef", "2026-11-22T05:00:00Z", 1, Vec::new());
        record.episodes = episodes;
        record
    }

    fn episode(series: &str, cpu: u32, at_ns: u64, timeline: Vec<Segment>) -> Episode {
        let latency_ns = timeline
            .iter()
            .map(|segment| segment.ns)
            .sum::<u64>()
            .max(1_000);
        Episode {
            series: series.into(),
            cpu,
            at_ns,
            latency_ns,
            causes: vec![Cause {
                kind: CauseKind::Task,
                name: "spin95".into(),
                pid: Some(7),
                ns: latency_ns,
                detail: None,
            }],
            steal_ns: Some(0),
            stack: None,
            timeline,
        }
    }

    fn segment(start_ns: u64, ns: u64, kind: CauseKind, name: &str) -> Segment {
        Segment {
            start_ns,
            ns,
            kind,
            name: name.into(),
            pid: None,
        }
    }

    #[test]
    fn episodes_become_slices_with_their_timeline_nested_inside() {
        let record = record_with(vec![
            episode(
                "rt-high/wakeup@1",
                1,
                2_000_000,
                vec![
                    segment(0, 300_000, CauseKind::Timer, "timer fired late"),
                    segment(300_000, 700_000, CauseKind::Task, "spin95"),
                ],
            ),
            // An older record's episode: causes but no timeline.
            episode("normal/wakeup@0", 0, 5_000_000, Vec::new()),
        ]);
        let document = chrome_trace(&record);
        let events = document["traceEvents"].as_array().unwrap();
        let slices: Vec<&Value> = events.iter().filter(|event| event["ph"] == "X").collect();
        assert_eq!(slices.len(), 2 + 2, "two episodes and two segments");
        let first = slices
            .iter()
            .find(|slice| slice["cat"] == "episode" && slice["pid"] == 2)
            .unwrap();
        assert_eq!(first["ts"], 2_000.0);
        assert_eq!(first["dur"], 1_000.0);
        assert_eq!(first["name"], "late wake-up 1000.0 µs");
        let spinner = slices
            .iter()
            .find(|slice| slice["name"] == "task spin95")
            .unwrap();
        assert_eq!(spinner["ts"], 2_300.0);
        assert_eq!(spinner["dur"], 700.0);
        assert_eq!(spinner["tid"], first["tid"]);
        // Every segment lies inside its episode's slice.
        for slice in slices.iter().filter(|slice| slice["cat"] != "episode") {
            let start = slice["ts"].as_f64().unwrap();
            let end = start + slice["dur"].as_f64().unwrap();
            assert!(start >= 2_000.0 && end <= 3_000.0, "{slice}");
        }
        let names: Vec<&Value> = events
            .iter()
            .filter(|event| event["ph"] == "M")
            .map(|event| &event["args"]["name"])
            .filter(|name| !name.is_null())
            .collect();
        assert!(names.contains(&&json!("CPU 0")) && names.contains(&&json!("CPU 1")));
        assert!(names.contains(&&json!("rt-high/wakeup@1")));
        assert_eq!(document["otherData"]["run_id"], "0123456789abcdef");
    }

    #[test]
    fn a_run_without_episodes_is_an_empty_trace() {
        let document = chrome_trace(&record_with(Vec::new()));
        assert_eq!(document["traceEvents"], json!([]));
    }
}
