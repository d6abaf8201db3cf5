//! The forecast beside a periodic interferer (issue 35, items 2 and 3), through
//! `forecast_study::study` on records built with known bursts: the range over alignments has a
//! known answer; an unsteady period and a clock that stops with the CPUs get no number.
use rtlab_analysis::application::AppClock;
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::Model;
use rtlab_analysis::forecast_study::{study, ForecastRequest};
use rtlab_core::{LatencyHistogram, Peak, RunRecord};

/// 30 s of a 1 ms rt-high probe on CPUs 0 and 1 with 20 µs wake-ups, and bursts of 2.6 ms
/// that end every `gap(k)` on both CPUs at once: each burst is one late sample per CPU,
/// `2.6 ms − u` late (`u` the wake-up's place in the probe's period).
fn record_with_bursts(gap: impl Fn(u64) -> u64) -> RunRecord {
    record_with_bursts_on(gap, 2)
}

/// [`record_with_bursts`] with the bursts on the first `cpus_with_bursts` CPUs only.
fn record_with_bursts_on(gap: impl Fn(u64) -> u64, cpus_with_bursts: u32) -> RunRecord {
    let mut seed = 17u64;
    let mut uniform = || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut series = Vec::new();
    let mut ends = Vec::new();
    let mut end = 5_000_000u64;
    let mut index = 0;
    while end < 29_900_000_000 {
        ends.push(end);
        end += gap(index);
        index += 1;
    }
    for cpu in 0..2 {
        let mut histogram = LatencyHistogram::new();
        let mut peaks = Vec::new();
        let bursts = if cpu < cpus_with_bursts {
            ends.len() as u64
        } else {
            0
        };
        for end in ends.iter().take(bursts as usize) {
            let latency = 2_600_000 - (uniform() * 1_000_000.0) as u64;
            histogram.record(latency);
            peaks.push(Peak {
                at_ns: end - latency,
                value_ns: latency,
            });
        }
        histogram.record_n(20_000, 30_000 - 3 * bursts);
        series.push(
            rtlab_core::rt_high_wakeup_series(cpu, &histogram, 2 * bursts, Vec::new(), peaks)
                .unwrap(),
        );
    }
    let mut record = RunRecord::new("periodic", "2026-12-06T00:00:00Z", 30_000_000_000, series);
    record.config.period_ns = Some(1_000_000);
    record
}

fn request(clock: Option<AppClock>) -> ForecastRequest {
    ForecastRequest {
        series: None,
        model: Model::Response,
        classes: builtin_classes(),
        class: Some("pro-audio-48k-128x2".to_owned()),
        buffer_period: None,
        buffers: None,
        compute: None,
        target: None,
        chain: None,
        counting: None,
        clock,
    }
}

#[test]
fn a_steady_interferer_gives_a_range_over_alignments_with_a_known_answer() {
    // 70 ms against 128 frames (2.667 ms): 26.25 cycles, so four offsets a quarter cycle
    // apart recur. The class's client computes 0.8 ms with a slack of 1.867 ms: a 2.6 ms
    // burst fails a cycle whose release lies in a window of 2.6 − 1.867 + 0.8 = 1.533 ms,
    // 57.5 % of the cycle: 2 or 3 of every 4 bursts by the alignment, one glitch each.
    let record = record_with_bursts(|_| 70_000_000);
    let output = study(&record, &request(None)).unwrap();
    assert_eq!(output.periodic.len(), 1, "{:?}", output.periodic);
    let text = &output.periodic[0].text;
    assert!(
        text.starts_with("an unnamed task (`rtlab run --explain` names it) holds the CPU for 2.6 ms every 70.0 ms on both CPUs"),
        "{text}"
    );
    let row = &output.rows[0];
    let alignment = row.alignment.as_ref().expect("a range over alignments");
    assert!(row.refused.is_none());
    let rate = |mttf: Option<f64>| 1.0 / mttf.unwrap();
    let (worst, best) = (3.0 / 4.0 / 0.070, 2.0 / 4.0 / 0.070);
    assert!(
        (rate(alignment.least_mttf_s) / worst - 1.0).abs() < 0.05,
        "{alignment:?} vs {worst}"
    );
    assert!(
        (rate(alignment.most_mttf_s) / best - 1.0).abs() < 0.05,
        "{alignment:?} vs {best}"
    );
    // Every late sample was the interferer's: nothing independent is left.
    assert_eq!(alignment.independent_mttf_s, None);
    assert_eq!(row.forecast.mttf_s, alignment.median_mttf_s);
    let json = serde_json::to_value(row).unwrap();
    for field in ["least_mttf_s", "median_mttf_s", "most_mttf_s"] {
        assert!(json["alignment"][field].is_number(), "{json}");
    }
    let verdict = row.verdict.as_ref().unwrap();
    assert!(
        verdict
            .text
            .contains("depending on how the unnamed task's bursts line up"),
        "{}",
        verdict.text
    );
    assert!(
        verdict.text.contains("one glitch per stall"),
        "{}",
        verdict.text
    );
}

#[test]
fn an_unsteady_interferer_gets_no_number_and_the_reason() {
    // 60–80 ms between bursts.
    let record = record_with_bursts(|index| 60_000_000 + (index * 7_919_000) % 20_000_000);
    let output = study(&record, &request(None)).unwrap();
    let row = &output.rows[0];
    let refused = row.refused.as_ref().expect("refused");
    assert_eq!(refused.assumption, "steady-period");
    assert!(
        refused.text.contains("but not steadily"),
        "{}",
        refused.text
    );
    assert_eq!(row.forecast.mttf_s, None);
    assert_eq!(row.forecast.mttf_ci_s, [None, None]);
    assert!(row.alignment.is_none());
}

#[test]
fn a_clock_that_stops_with_the_cpus_gets_no_number_and_the_reason() {
    let record = record_with_bursts(|_| 70_000_000);
    let output = study(&record, &request(Some(AppClock::StopsWithCpus))).unwrap();
    let refused = output.rows[0].refused.as_ref().expect("refused");
    assert_eq!(refused.assumption, "clock-runs-on");
    assert!(
        refused
            .text
            .contains("holds every CPU at once for 2.6 ms every 70.0 ms"),
        "{}",
        refused.text
    );
    assert_eq!(output.rows[0].forecast.mttf_s, None);
}

#[test]
fn bursts_that_leave_a_cpu_free_get_no_number_and_the_reason() {
    let record = record_with_bursts_on(|_| 70_000_000, 1);
    let output = study(&record, &request(None)).unwrap();
    let refused = output.rows[0].refused.as_ref().expect("refused");
    assert_eq!(refused.assumption, "no-free-cpu");
    assert!(
        refused.text.contains("leave a CPU free"),
        "{}",
        refused.text
    );
    assert_eq!(output.rows[0].forecast.mttf_s, None);
}
