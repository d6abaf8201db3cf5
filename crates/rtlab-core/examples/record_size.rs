//! How big a Run record is as written (issue 10: ≤ 500 KB for a default 60 s run, ≤ 5 MB for 8 h).
//!
//! Reads a record (e.g. one `rtlab run --json FILE` wrote), writes it again through the real
//! encoder and prints both sizes; then prints the size of a **synthetic** long-run version of it:
//! every series' `max_per_second` stretched to the given duration by drawing (deterministically)
//! from the series' own measured per-second maxima, and the peaks' times spread over the
//! duration. Histograms, tails and everything else stay as measured (an HDR histogram does not
//! grow with the run).
//!
//! ```text
//! cargo run --release -p rtlab-core --example record_size -- run.json 8h
//! ```

use rtlab_core::{parse_duration, RunRecord};

/// xorshift64*: a fixed, dependency-free sequence so the synthetic record is the same every time.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(duration)) = (arguments.first(), arguments.get(1)) else {
        eprintln!("usage: record_size RECORD.json DURATION (e.g. 8h)");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).expect("reading the record");
    let record = RunRecord::from_json(&text).expect("a valid record");
    let written = record.to_json_pretty();
    let seconds = parse_duration(duration).expect("a duration").as_u64() / 1_000_000_000;
    println!(
        "{path}: {} series, {} s measured; file {} bytes, written now {} bytes",
        record.series.len(),
        record.duration_ns / 1_000_000_000,
        text.len(),
        written.len()
    );
    let mut long = record.clone();
    let stretch = (seconds * 1_000_000_000) as f64 / record.duration_ns.max(1) as f64;
    let mut sequence = Sequence(0x9e37_79b9_7f4a_7c15);
    for series in &mut long.series {
        let measured = series.max_per_second.clone();
        if measured.is_empty() {
            continue;
        }
        series.max_per_second = (0..seconds)
            .map(|_| measured[(sequence.next() % measured.len() as u64) as usize])
            .collect();
        for peak in &mut series.peaks {
            // Keep the times on the series' own grid (multiples of the period from a phase).
            let periods = ((peak.at_ns / series.period_ns.max(1)) as f64 * stretch) as u64;
            peak.at_ns = periods * series.period_ns + peak.at_ns % series.period_ns.max(1);
        }
    }
    long.duration_ns = seconds * 1_000_000_000;
    let long_written = long.to_json_pretty();
    RunRecord::from_json(&long_written).expect("the synthetic record reads back");
    println!(
        "synthetic {duration} version ({} per-second maxima a series): {} bytes",
        seconds,
        long_written.len()
    );
}
