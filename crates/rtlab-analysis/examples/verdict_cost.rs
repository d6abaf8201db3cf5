//! Times what the verdict after a run computes on a record (the tail fit of the rt-high
//! wake-ups and one forecast per built-in class): `verdict_cost RECORD.json [REPEATS]`.
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::select_series;
use rtlab_analysis::forecast::{forecast, BufferConfig, LatencyEvidence, Model, TailModel};
use rtlab_analysis::projection::ProjectedTail;
use rtlab_core::RunRecord;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: verdict_cost RECORD.json [REPEATS]");
    let repeats: u32 = args
        .next()
        .map_or(10, |text| text.parse().expect("REPEATS"));
    let record = RunRecord::from_json(&std::fs::read_to_string(&path).expect("readable"))
        .expect("a Run record");
    let selection = select_series(&record, None).expect("a series");
    let classes = builtin_classes();
    let started = std::time::Instant::now();
    let mut rows = 0;
    for _ in 0..repeats {
        let tail = ProjectedTail::fit(&selection.histogram).ok();
        let evidence = LatencyEvidence {
            histogram: &selection.histogram,
            tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
        };
        for class in &classes {
            rows += usize::from(
                forecast(evidence, BufferConfig::of_class(class), Model::PerPeriod).is_ok(),
            );
        }
    }
    println!(
        "{:.3} ms per verdict ({rows} rows)",
        started.elapsed().as_secs_f64() * 1e3 / f64::from(repeats)
    );
}
