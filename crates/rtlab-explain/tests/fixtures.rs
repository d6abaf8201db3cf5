//! Data-driven parser tests: every file under `test_data/<format>/ok` parses, every file under
//! `test_data/<format>/err` is an error (never a panic), a page captured from this kernel decodes
//! into the events it holds, and random or mutated input never panics.

use proptest::prelude::*;
use rtlab_explain::event::{EventDecoder, EventKind};
use rtlab_explain::format::{parse_event_format, parse_header_event, parse_header_page};
use rtlab_explain::page::PageDecoder;
use std::path::{Path, PathBuf};

fn test_data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data")
        .join(relative)
}

fn files(relative: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(test_data(relative))
        .unwrap_or_else(|error| panic!("test_data/{relative}: {error}"))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "test_data/{relative} has no fixtures");
    paths
}

/// Parses a format-like fixture by its name: `header_page*`, `header_event*`, or
/// `<system>__<event>.format`. Returns the error text on failure.
fn parse_format_fixture(path: &Path) -> Result<(), String> {
    let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    let name = path.file_name().unwrap().to_string_lossy();
    if name.starts_with("header_page") {
        parse_header_page(&text)
            .map(drop)
            .map_err(|error| error.to_string())
    } else if name.starts_with("header_event") {
        parse_header_event(&text)
            .map(drop)
            .map_err(|error| error.to_string())
    } else {
        let system = name.split("__").next().unwrap_or("unknown");
        parse_event_format(system, &text)
            .map(drop)
            .map_err(|error| error.to_string())
    }
}

#[test]
fn format_fixtures_parse_or_fail_as_filed() {
    for path in files("format/ok") {
        if let Err(error) = parse_format_fixture(&path) {
            panic!("{}: {error}", path.display());
        }
    }
    for path in files("format/err") {
        match parse_format_fixture(&path) {
            Ok(()) => panic!("{} parsed but is filed under err", path.display()),
            Err(error) => assert!(!error.is_empty()),
        }
    }
}

fn decode_page(bytes: &[u8]) -> Result<Vec<(u64, usize)>, String> {
    let mut records = Vec::new();
    PageDecoder::default()
        .decode(bytes, |record| {
            records.push((record.timestamp_ns, record.payload.len()))
        })
        .map_err(|error| error.to_string())?;
    Ok(records)
}

#[test]
fn page_fixtures_decode_or_fail_as_filed() {
    for path in files("page/ok") {
        let records = decode_page(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name != "empty.page" {
            assert!(!records.is_empty(), "{name}: no records");
        }
        assert!(
            records.windows(2).all(|pair| pair[0].0 <= pair[1].0),
            "{name}: time goes backwards"
        );
    }
    for path in files("page/err") {
        if decode_page(&std::fs::read(&path).unwrap()).is_ok() {
            panic!("{} decoded but is filed under err", path.display());
        }
    }
}

#[test]
fn specific_page_fixtures_have_the_expected_times() {
    let times = |name: &str| -> Vec<u64> {
        decode_page(&std::fs::read(test_data(&format!("page/ok/{name}"))).unwrap())
            .unwrap()
            .into_iter()
            .map(|(time, _)| time)
            .collect()
    };
    assert_eq!(times("two_events.page"), vec![1_005, 1_012]);
    assert_eq!(times("time_extend.page"), vec![1_000 + (2 << 27) + 3 + 1]);
    assert_eq!(times("absolute_timestamp.page"), vec![(40 << 27) + 2]);
    assert_eq!(times("discarded_padding.page"), vec![1_003]);
    let long = decode_page(&std::fs::read(test_data("page/ok/long_event.page")).unwrap()).unwrap();
    assert_eq!(long, vec![(1_004, 200)]);
}

fn capture_decoder() -> EventDecoder {
    let mut decoder = EventDecoder::default();
    for path in files("capture") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".format") else {
            continue;
        };
        let system = stem.split("__").next().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let format =
            parse_event_format(system, &text).unwrap_or_else(|error| panic!("{name}: {error}"));
        decoder
            .add(&format)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
    }
    decoder
}

#[test]
fn a_page_captured_from_a_real_kernel_decodes_into_its_events() {
    let decoder = capture_decoder();
    let mut n_switches = 0;
    let mut n_events = 0;
    for path in files("capture") {
        if path.extension().is_none_or(|extension| extension != "page") {
            continue;
        }
        let page = std::fs::read(&path).unwrap();
        PageDecoder::default()
            .decode(&page, |record| {
                let event = decoder
                    .decode(0, record.timestamp_ns, record.payload)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
                    .expect("every captured event type has its format");
                n_events += 1;
                if let EventKind::Switch { next_comm, .. } = &event.kind {
                    assert!(!next_comm.as_str().is_empty());
                    n_switches += 1;
                }
            })
            .unwrap();
    }
    assert!(n_events > 10, "only {n_events} events in the capture");
    assert!(
        n_switches > 0,
        "no sched_switch in {n_events} captured events"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn random_pages_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
        let _ = decode_page(&bytes);
    }

    #[test]
    fn mutated_real_pages_never_panic(position in 0usize..4096, value in any::<u8>(), length in 0usize..4097) {
        let mut page = std::fs::read(test_data("page/ok/real-cpu0.page")).unwrap();
        page[position] = value;
        page.truncate(length);
        let decoder = capture_decoder();
        let _ = PageDecoder::default().decode(&page, |record| {
            let _ = decoder.decode(0, record.timestamp_ns, record.payload);
        });
    }

    #[test]
    fn random_format_text_never_panics(text in "(name: [a-z_]{0,8}\n|ID: [0-9]{0,6}\n|\tfield:[a-z_ \\[\\]0-9]{0,30};\toffset:[0-9x]{0,4};\tsize:[0-9]{0,3};\tsigned:[01];\n|print fmt: .{0,10}\n|.{0,20}\n){0,12}") {
        let _ = parse_event_format("sched", &text);
        let _ = parse_header_page(&text);
        let _ = parse_header_event(&text);
    }

    #[test]
    fn arbitrary_field_declarations_never_panic(declaration in "\\PC{0,40}", size in 0usize..20) {
        let text = format!("name: x\nID: 3\n\tfield:{declaration};\toffset:0;\tsize:{size};\tsigned:0;\n");
        if let Ok(format) = parse_event_format("sched", &text) {
            let mut decoder = EventDecoder::default();
            let _ = decoder.add(&format);
        }
    }

    #[test]
    fn random_perf_records_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = rtlab_explain::stacks::parse_record(&bytes);
    }
}
