//! The forecast beside a periodic interferer (issue 35, items 2 and 3), through
//! `forecast_study::study` on records built with known bursts: the range over alignments has a
//! known answer; an unsteady period and a clock that stops with the CPUs get no number.
use rtlab_analysis::application::{AppClock, Counting};
use rtlab_analysis::classes::builtin_classes;
use rtlab_analysis::forecast::{BufferConfig, Model};
use rtlab_analysis::forecast_study::{study, ForecastRequest};
use rtlab_analysis::interference::{alignment_rates, PeriodicInterferer};
use rtlab_core::{LatencyHistogram, Nanos, Peak, RunRecord};

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

#[test]
fn a_burst_met_at_one_point_of_the_probes_period_is_ranged_over_its_unknown_length() {
    // 1.2 ms every 25 ms on CPU 0 and 1 at once, 25 ms a whole multiple of the probe's 1 ms: every
    // burst met the probe's wake-ups 0.6 ms before its end, so every sample is 0.6 ms and the
    // burst could be anything from 0.6 to 1.6 ms. (Measured beside JACK, 2026-12-07: one real
    // 1.2 ms spinner was taken for 0.6, 0.9, 1.6 ms in three runs.)
    let mut series = Vec::new();
    let ends: Vec<u64> = (0..1_190u64).map(|k| 5_000_000 + k * 25_000_000).collect();
    for cpu in 0..2 {
        let mut histogram = LatencyHistogram::new();
        let mut peaks = Vec::new();
        for end in &ends {
            histogram.record(600_000);
            peaks.push(Peak {
                at_ns: end - 600_000,
                value_ns: 600_000,
            });
        }
        histogram.record_n(20_000, 30_000 - ends.len() as u64);
        series.push(
            rtlab_core::rt_high_wakeup_series(cpu, &histogram, 0, Vec::new(), peaks).unwrap(),
        );
    }
    let mut record = RunRecord::new("locked", "2026-12-07T00:00:00Z", 30_000_000_000, series);
    record.config.period_ns = Some(1_000_000);
    // 2 × 2.667 ms with 1.6 ms of compute (slack 1.067 ms): a 1.2 ms burst fails the cycles whose
    // compute it lands in (1.6 + 1.2 > 2.667) or whose release it covers by more than the slack;
    // a 0.6 ms one fails none.
    let config = BufferConfig {
        buffers: 2,
        buffer_period: Nanos(2_666_667),
        compute: Nanos(1_600_000),
    };
    let request = ForecastRequest {
        class: None,
        buffer_period: Some(config.buffer_period),
        buffers: Some(config.buffers),
        compute: Some(config.compute),
        ..request(Some(AppClock::Device))
    };
    let output = study(&record, &request).unwrap();
    assert_eq!(output.periodic.len(), 1, "{:?}", output.periodic);
    let text = &output.periodic[0].text;
    assert!(text.contains("for 0.6–1.6 ms every 25.0 ms"), "{text}");
    let found = &output.periodic[0];
    let alignment = output.rows[0]
        .alignment
        .as_ref()
        .expect("a range over alignments");
    // The truth: the rates of the real 1.2 ms burst over its alignments (the bursts at once on
    // both CPUs are one sequence).
    let mut truth = PeriodicInterferer {
        burst_ns: 1_200_000,
        burst_max_ns: 1_200_000,
        ..found.interferer.clone()
    };
    truth.members.truncate(1);
    let rates = alignment_rates(&truth, &config, Counting::Restart, 30_000_000_000, 1.0);
    assert!(rates.median_per_s > 10.0, "{rates:?}");
    let rate = |mttf: Option<f64>| mttf.map_or(0.0, |mttf| 1.0 / mttf);
    assert!(
        rate(alignment.most_mttf_s) <= rates.median_per_s
            && rates.median_per_s <= rate(alignment.least_mttf_s),
        "the range {alignment:?} misses the real burst's median {rates:?}"
    );
}
