//! `rtlab trace record`'s words: the spinner's line while recording and what the recording did
//! (`rtlab_core::trace_record`, filled by rtlab-trace's `record`), both printed on stderr.

use rtlab_core::trace_record::{RecordProgress, RecordSummary};
use std::path::Path;

/// The spinner's message: the target, the time since the start, threads, events, bytes, and
/// the events lost so far.
pub fn progress(target: &str, elapsed_s: f64, progress: &RecordProgress) -> String {
    format!(
        "{target}: {elapsed_s:.1} s, {} threads, {} events, {:.1} MB{}",
        progress.n_threads,
        progress.n_events,
        progress.bytes_written as f64 / 1e6,
        if progress.lost_events > 0 {
            format!(", {} LOST", progress.lost_events)
        } else {
            String::new()
        }
    )
}

/// The markers a recording took, each described (`CycleMarker::describe`), when asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct MarkersAsked<'a> {
    pub cycle: Option<&'a str>,
    pub work_done: Option<&'a str>,
}

/// The lines after a recording: the recorder's fallback, the markers counted, and what was
/// written to `output` (`file_bytes` long).
pub fn recorded(
    summary: &RecordSummary,
    target: &str,
    markers: MarkersAsked<'_>,
    output: &Path,
    file_bytes: u64,
) -> String {
    let mut text = String::new();
    if let Some(reason) = &summary.bpf_unavailable {
        text.push_str(&format!("rtlab: recorded through tracefs: {reason}\n"));
    }
    if let Some(marker) = markers.cycle {
        text.push_str(&format!(
            "rtlab: {} cycle markers at {marker}\n",
            summary.cycle_markers
        ));
    }
    if let Some(marker) = markers.work_done {
        text.push_str(&format!(
            "rtlab: {} work-done markers at the return of {marker}\n",
            summary.work_done_markers
        ));
    }
    let progress = &summary.progress;
    text.push_str(&format!(
        "rtlab: recorded {} events of {target} ({} threads, {}) in {:.1} s to {} ({:.1} MB, {:.1} bytes/event){}{}\n",
        progress.n_events,
        progress.n_threads,
        summary.recorder,
        progress.elapsed_ns as f64 / 1e9,
        output.display(),
        file_bytes as f64 / 1e6,
        file_bytes as f64 / progress.n_events.max(1) as f64,
        if progress.lost_events > 0 {
            format!("; {} events LOST (a full ring: try --buffer-kb)", progress.lost_events)
        } else {
            String::new()
        },
        if summary.removed_stale_instances.is_empty() {
            String::new()
        } else {
            format!(
                "; removed tracing instances and probes of killed rtlab runs: {}",
                summary.removed_stale_instances.join(", ")
            )
        }
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_says_its_fallback_markers_and_losses() {
        let summary = RecordSummary {
            progress: RecordProgress {
                elapsed_ns: 2_500_000_000,
                n_events: 1000,
                bytes_written: 32_000,
                lost_events: 3,
                n_threads: 4,
            },
            recorder: "tracefs".into(),
            bpf_unavailable: Some("cycle markers were asked for".into()),
            cycle_markers: 7,
            ..RecordSummary::default()
        };
        let markers = MarkersAsked {
            cycle: Some("f in /bin/x"),
            work_done: None,
        };
        let text = recorded(&summary, "comm x", markers, Path::new("x.rtt"), 32_000);
        assert_eq!(
            text,
            "rtlab: recorded through tracefs: cycle markers were asked for\n\
             rtlab: 7 cycle markers at f in /bin/x\n\
             rtlab: recorded 1000 events of comm x (4 threads, tracefs) in 2.5 s to x.rtt \
             (0.0 MB, 32.0 bytes/event); 3 events LOST (a full ring: try --buffer-kb)\n"
        );
        assert_eq!(
            progress("comm x", 1.5, &summary.progress),
            "comm x: 1.5 s, 4 threads, 1000 events, 0.0 MB, 3 LOST"
        );
    }
}
