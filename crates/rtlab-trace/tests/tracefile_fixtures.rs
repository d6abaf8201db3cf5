//! rtlab trace file fixtures: `ok/` recordings of `sleep` made by both recorders on this machine
//! (`rtlab trace record --recorder bpf -o sleep-bpf.rtrace -- sleep 0.3`; `--recorder tracefs -D
//! 300ms … -- sleep 0.2`) read whole and name their recorder; every `err/` file (an `ok/` one
//! broken by hand: another version, cut in the header, an unknown block) fails with an error
//! naming the offset and the section. The `cycle-markers-*` recordings are of a JACK client
//! (`bench/jack/xrun_client -l 30` on `jackd -d dummy -p 128`) with both markers, one per
//! recorder (`rtlab trace record --recorder R --cycle-marker jack --work-done-marker
//! BIN/xrun_client:process --pid CLIENT -D 300ms`): read whole, they judge the client's
//! process thread by jackd's cycle.

mod support;

use rtlab_trace::analyze::report::DeadlineSource;
use rtlab_trace::analyze::AnalysisConfig;
use rtlab_trace::file::{FileError, TraceFile};
use rtlab_trace::EventKind;
use std::path::Path;

fn fixture(kind: &str, name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("test_data/tracefile")
            .join(kind)
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_recordings_of_both_recorders_read_whole() {
    for (name, recorder) in [
        ("sleep-bpf.rtrace", "bpf"),
        ("sleep-tracefs.rtrace", "tracefs"),
    ] {
        let bytes = fixture("ok", name);
        let mut file = TraceFile::open(&bytes[..]).unwrap();
        assert_eq!(file.header.recorder.as_deref(), Some(recorder), "{name}");
        assert!(file
            .header
            .events
            .contains(&"syscalls:sys_enter_futex".to_owned()));
        let mut sleep_named = false;
        let read = file
            .for_each_event(|event| {
                if let rtlab_trace::EventKind::Name { comm, .. } = event.kind {
                    sleep_named |= comm.to_string() == "sleep";
                }
            })
            .unwrap();
        let trailer = read.trailer.clone().expect("a complete recording");
        assert_eq!(trailer.n_events, read.n_events, "{name}");
        assert!(read.n_events > 50 && sleep_named, "{name}: {read:?}");
    }
}

#[test]
fn recordings_with_cycle_markers_judge_the_client_by_jacks_cycle() {
    for (name, recorder) in [
        ("cycle-markers-bpf.rtrace", "bpf"),
        ("cycle-markers-tracefs.rtrace", "tracefs"),
    ] {
        let bytes = fixture("ok", name);
        let mut file = TraceFile::open(&bytes[..]).unwrap();
        assert_eq!(file.header.recorder.as_deref(), Some(recorder), "{name}");
        let (mut cycle_markers, mut work_done) = (0, 0);
        file.for_each_event(|event| match event.kind {
            EventKind::CycleMarker { .. } => cycle_markers += 1,
            EventKind::WorkDone { .. } => work_done += 1,
            _ => {}
        })
        .unwrap();
        assert!(
            cycle_markers >= 20 && work_done >= 20,
            "{name}: {cycle_markers} cycle markers, {work_done} work-done"
        );
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let header = support::test_header("rtlab.trace/1");
        let (report, _) =
            rtlab_trace::source::analyze_path(&path, AnalysisConfig::default(), header).unwrap();
        assert_eq!(
            report.deadline_source,
            DeadlineSource::CycleMarker,
            "{name}"
        );
        let markers = report.cycle_markers.as_ref().expect("cycle markers");
        assert_eq!(markers.thread.name, "jackd", "{name}");
        let period = markers.period_ns.expect("the markers' period");
        assert!(period.abs_diff(2_666_667) < 50_000, "{name}: {period}");
        // The client's process thread (SCHED_FIFO, woken by jackd each cycle) is judged by them.
        let client = report
            .threads
            .iter()
            .find(|row| row.name == "xrun_client" && row.deadline_source.is_some())
            .unwrap_or_else(|| panic!("{name}: the client's process thread is not judged"));
        assert_eq!(
            client.deadline_source,
            Some(DeadlineSource::CycleMarker),
            "{name}"
        );
    }
}

#[test]
fn broken_files_fail_naming_offset_and_section() {
    for (name, offset, section, message) in [
        ("version-2.rtrace", 8, "file header", "version 2"),
        ("cut-in-header.rtrace", 16, "header", "the file ends inside"),
        (
            "unknown-block.rtrace",
            767,
            "block",
            "unknown block tag 0x5a",
        ),
    ] {
        let bytes = fixture("err", name);
        let error = match TraceFile::open(&bytes[..]) {
            Err(error) => error,
            Ok(mut file) => file.for_each_event(|_| {}).expect_err(name),
        };
        let FileError::Malformed {
            offset: at,
            section: in_section,
            message: text,
        } = &error
        else {
            panic!("{name}: {error}");
        };
        assert_eq!(*at, offset, "{name}: {error}");
        assert_eq!(*in_section, section, "{name}: {error}");
        assert!(text.contains(message), "{name}: {error}");
    }
}
