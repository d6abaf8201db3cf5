//! Times the tail projection a run attaches to its record: `tail_cost RECORD.json [REPEATS]`;
//! with `RTLAB_PRINT_TAILS=1` it also prints each series' tail as JSON, to compare builds.
use rtlab_core::RunRecord;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: tail_cost RECORD.json [REPEATS]");
    let repeats: u32 = args
        .next()
        .map_or(10, |text| text.parse().expect("REPEATS"));
    let record = RunRecord::from_json(&std::fs::read_to_string(&path).expect("readable"))
        .expect("a Run record");
    let usage = rtlab_session::usage_of_record(&record);
    let started = std::time::Instant::now();
    for _ in 0..repeats {
        let mut copy = record.clone();
        rtlab_session::attach_tails(&mut copy, &usage, true);
    }
    println!(
        "{:.3} ms per record ({} series)",
        started.elapsed().as_secs_f64() * 1e3 / f64::from(repeats),
        record.series.len()
    );
    if std::env::var_os("RTLAB_PRINT_TAILS").is_some() {
        let mut copy = record.clone();
        rtlab_session::attach_tails(&mut copy, &usage, true);
        for series in &copy.series {
            println!(
                "{}",
                serde_json::to_string(&series.tail).expect("serialisable")
            );
        }
    }
}
