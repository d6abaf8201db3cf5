//! Times the pieces of a run's end that are not the tail fits or the verdict (`tail_cost`,
//! `verdict_cost`): writing the record as JSON (its packed arrays deflated), decoding and
//! encoding the series' histograms, the cyclictest histfile, `validate`.
//! `end_of_run_cost RECORD.json [REPEATS]` (BENCHMARKS.md, probe cost).
use rtlab_core::RunRecord;
use std::time::Instant;

fn time(name: &str, repeats: u32, mut work: impl FnMut()) {
    let started = Instant::now();
    for _ in 0..repeats {
        work();
    }
    println!(
        "{name}: {:.3} ms",
        started.elapsed().as_secs_f64() * 1e3 / f64::from(repeats)
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: end_of_run_cost RECORD.json [REPEATS]");
    let repeats: u32 = args
        .next()
        .map_or(20, |text| text.parse().expect("REPEATS"));
    let record = RunRecord::from_json(&std::fs::read_to_string(&path).expect("readable"))
        .expect("a Run record");
    println!(
        "{} series, {} bytes of JSON",
        record.series.len(),
        record.to_json_pretty().len()
    );
    time("record as JSON", repeats, || {
        std::hint::black_box(record.to_json_pretty());
    });
    time("decode every histogram", repeats, || {
        for series in &record.series {
            std::hint::black_box(series.histogram().expect("a valid record"));
        }
    });
    let histograms: Vec<_> = record
        .series
        .iter()
        .map(|series| series.histogram().expect("a valid record"))
        .collect();
    time("encode every histogram", repeats, || {
        for histogram in &histograms {
            std::hint::black_box(histogram.to_base64().expect("encodable"));
        }
    });
    time("histfile, 20000 buckets", repeats, || {
        std::hint::black_box(
            rtlab_core::export::record_histfile(&record, 20_000).expect("a valid record"),
        );
    });
    time("validate", repeats, || {
        std::hint::black_box(&record)
            .validate()
            .expect("a valid record");
    });
}
