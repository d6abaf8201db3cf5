//! rtlab trace file fixtures: `ok/` recordings of `sleep` made by both recorders on this machine
//! (`rtlab trace record --recorder bpf -o sleep-bpf.rtrace -- sleep 0.3`; `--recorder tracefs -D
//! 300ms … -- sleep 0.2`) read whole and name their recorder; every `err/` file (an `ok/` one
//! broken by hand: another version, cut in the header, an unknown block) fails with an error
//! naming the offset and the section.

use rtlab_apptrace::file::{FileError, TraceFile};
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
                if let rtlab_apptrace::EventKind::Name { comm, .. } = event.kind {
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
