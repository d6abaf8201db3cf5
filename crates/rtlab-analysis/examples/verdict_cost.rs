//! Times what the verdict after a run computes on a record (the tail fit of the rt-high
//! wake-ups and one forecast per built-in class), both ways: every class's whole forecast
//! (`rtlab run --verbose`, the HTML report) and only the decision (`rtlab run`):
//! `verdict_cost RECORD.json [REPEATS]`.
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::select_series;
use rtlab_analysis::forecast::{
    decide, forecast, BufferConfig, Decision, LatencyEvidence, Model, TailModel,
};
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
    for whole in [true, false] {
        let started = std::time::Instant::now();
        let (mut rows, mut by_test) = (0, 0);
        for _ in 0..repeats {
            let tail = ProjectedTail::fit(&selection.histogram).ok();
            let evidence = LatencyEvidence {
                histogram: &selection.histogram,
                tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
                probe: None,
                chain: 1,
                counting: rtlab_analysis::forecast::Counting::Restart,
            };
            for class in &classes {
                let config = BufferConfig::of_class(class);
                if whole {
                    rows += usize::from(forecast(evidence, config, Model::PerPeriod).is_ok());
                } else {
                    let needed = class.acceptable.mean_interval_s();
                    match decide(evidence, config, Model::PerPeriod, needed) {
                        Ok(Decision::Decided { .. }) => {
                            rows += 1;
                            by_test += 1;
                        }
                        Ok(Decision::Forecast(_)) => rows += 1,
                        Err(_) => {}
                    }
                }
            }
        }
        let per = started.elapsed().as_secs_f64() * 1e3 / f64::from(repeats);
        if whole {
            println!("{per:.3} ms per verdict, whole forecasts ({rows} rows)");
        } else {
            println!(
                "{per:.3} ms per verdict, decisions only ({rows} rows, {by_test} decided by one test)"
            );
        }
    }
}
