//! The forecast's unit tests: hand-computed MTTFs, paper 002's examples, Garwood intervals, the
//! least-buffering search, verdicts, series selection, and a property over buffer counts.

use super::*;
use crate::classes::parse_rate;
use proptest::prelude::*;
use rtlab_core::{LatencyHistogram, Nanos, RunRecord};

/// 10^6 wake-ups: 999 000 at 100 µs, 900 at 2 ms, 90 at 5 ms, 10 at 20 ms.
fn constructed() -> LatencyHistogram {
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(100_000, 999_000);
    histogram.record_n(2_000_000, 900);
    histogram.record_n(5_000_000, 90);
    histogram.record_n(20_000_000, 10);
    histogram
}

fn evidence(histogram: &LatencyHistogram) -> LatencyEvidence<'_> {
    LatencyEvidence {
        histogram,
        tail: None,
        probe: None,
        chain: 1,
        counting: crate::forecast::Counting::Restart,
    }
}

fn config(buffers: u32, period_ms: u64, compute_us: u64) -> BufferConfig {
    BufferConfig {
        buffers,
        buffer_period: Nanos::from_millis(period_ms),
        compute: Nanos::from_micros(compute_us),
    }
}

#[test]
fn mttf_matches_hand_computed_values() {
    let histogram = constructed();
    // n=2, t=4 ms, c=1 ms: slack 3 ms; 100 of 10^6 are later (5 ms, 20 ms): P = 1e-4,
    // MTTF = 4 ms / 1e-4 = 40 s.
    let row = forecast(evidence(&histogram), config(2, 4, 1_000), Model::PerPeriod).unwrap();
    assert_eq!(row.slack_ns, 3_000_000);
    assert_eq!(
        row.basis,
        Basis::Observed {
            late: 100,
            samples: 1_000_000
        }
    );
    assert!((row.p_late.unwrap() - 1e-4).abs() < 1e-12);
    assert!((row.mttf_s.unwrap() - 40.0).abs() < 1e-9);
    let [low, high] = row.mttf_ci_s;
    assert!(low.unwrap() < 40.0 && 40.0 < high.unwrap());
    // n=3: slack 7 ms, only the 10 at 20 ms: P = 1e-5, MTTF = 400 s.
    let row = forecast(evidence(&histogram), config(3, 4, 1_000), Model::PerPeriod).unwrap();
    assert!((row.mttf_s.unwrap() - 400.0).abs() < 1e-6);
    // 002's method divides by (n−1)·t = 8 ms instead: 800 s.
    let row = forecast(evidence(&histogram), config(3, 4, 1_000), Model::Paper002).unwrap();
    assert!((row.mttf_s.unwrap() - 800.0).abs() < 1e-6);
    // Double buffering: both models agree.
    let per_period = forecast(evidence(&histogram), config(2, 4, 1_000), Model::PerPeriod).unwrap();
    let paper = forecast(evidence(&histogram), config(2, 4, 1_000), Model::Paper002).unwrap();
    assert_eq!(per_period.mttf_s, paper.mttf_s);
}

#[test]
fn reproduces_paper_002_audio_thread_example() {
    // 002 §4.3: a 16 ms latency once in 165 000 waits is "roughly once every 44 minutes" for
    // an audio thread with a 16 ms period; with the virus scanner, once in 1000 waits, "roughly
    // every 16 seconds".
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(1_000_000, 164_999);
    histogram.record_n(17_000_000, 1);
    let row = forecast(evidence(&histogram), config(2, 16, 0), Model::Paper002).unwrap();
    assert!(
        (row.mttf_s.unwrap() / 60.0 - 44.0).abs() < 0.01,
        "{:?}",
        row.mttf_s
    );
    let mut scanner = LatencyHistogram::new();
    scanner.record_n(1_000_000, 999);
    scanner.record_n(17_000_000, 1);
    let row = forecast(evidence(&scanner), config(2, 16, 0), Model::Paper002).unwrap();
    assert!((row.mttf_s.unwrap() - 16.0).abs() < 1e-9);
}

#[test]
fn poisson_interval_matches_tables() {
    // Garwood 90 % intervals: k=1 → (0.0513, 4.744); k=10 → (5.425, 17.00).
    let (low, high) = poisson_interval(1);
    assert!(
        (low - 0.05129).abs() < 1e-4 && (high - 4.7439).abs() < 1e-3,
        "{low} {high}"
    );
    let (low, high) = poisson_interval(10);
    assert!(
        (low - 5.4254).abs() < 1e-3 && (high - 16.962).abs() < 1e-2,
        "{low} {high}"
    );
    assert!((zero_events_upper_bound() - std::f64::consts::LN_10).abs() < 1e-12);
}

#[test]
fn beyond_the_data_gives_only_a_bound() {
    let histogram = constructed();
    // Slack 39 ms > the 20 ms maximum: no estimate, a lower bound of t·N/2.303.
    let row = forecast(evidence(&histogram), config(2, 40, 1_000), Model::PerPeriod).unwrap();
    assert_eq!(row.basis, Basis::BeyondData { samples: 1_000_000 });
    assert_eq!(row.p_late, None);
    assert_eq!(row.mttf_s, None);
    let bound = row.mttf_ci_s[0].unwrap();
    assert!(
        (bound - 0.040 * 1e6 / std::f64::consts::LN_10).abs() < 1e-6,
        "{bound}"
    );
    assert_eq!(row.mttf_ci_s[1], None);
    // The bound decides only when it reaches the target.
    assert_eq!(row.meets(parse_rate("1/hour").unwrap()), Some(true));
    assert_eq!(row.meets(parse_rate("1/week").unwrap()), None);
}

struct FixedTail;
impl TailModel for FixedTail {
    fn exceedance(&self, threshold_ns: u64) -> Option<Exceedance> {
        (threshold_ns > 20_000_000).then_some(Exceedance {
            probability: 1e-7,
            interval: (1e-8, 1e-6),
        })
    }
    fn describe(&self) -> String {
        "fixed".to_owned()
    }
}

#[test]
fn tail_projection_is_used_only_beyond_the_data() {
    let histogram = constructed();
    let with_tail = LatencyEvidence {
        histogram: &histogram,
        tail: Some(&FixedTail),
        probe: None,
        chain: 1,
        counting: crate::forecast::Counting::Restart,
    };
    let row = forecast(with_tail, config(2, 40, 1_000), Model::PerPeriod).unwrap();
    assert!(matches!(row.basis, Basis::TailProjection { .. }));
    assert!((row.mttf_s.unwrap() - 0.040 / 1e-7).abs() < 1e-3);
    assert_eq!(row.mttf_ci_s, [Some(0.040 / 1e-6), Some(0.040 / 1e-8)]);
    let inside = forecast(with_tail, config(2, 4, 1_000), Model::PerPeriod).unwrap();
    assert!(matches!(inside.basis, Basis::Observed { .. }));
}

#[test]
fn no_slack_fails_every_period() {
    let histogram = constructed();
    let row = forecast(evidence(&histogram), config(2, 1, 1_500), Model::PerPeriod).unwrap();
    assert_eq!(row.basis, Basis::NoSlack);
    assert_eq!(row.mttf_s, Some(0.001));
    assert!(forecast(evidence(&histogram), config(1, 1, 0), Model::PerPeriod).is_err());
    assert_eq!(
        forecast(
            evidence(&LatencyHistogram::new()),
            config(2, 1, 0),
            Model::PerPeriod
        ),
        Err(ForecastError::NoSamples)
    );
}

#[test]
fn least_buffering_finds_the_smallest_configuration() {
    let histogram = constructed();
    // 1/hour with t = 4 ms and c = 1 ms: n=2 → 40 s, n=3 → 400 s, n=6 (slack 19 ms) → 400 s,
    // n=7 (slack 23 ms) is beyond the data: bound 4 ms·10^6/2.303 = 1737 s < 3600 → can't tell.
    // So no configuration at t = 4 ms is known to reach 1/hour.
    let target = parse_rate("1/hour").unwrap();
    let found = least_buffering(
        evidence(&histogram),
        target,
        &[Nanos::from_millis(4)],
        Nanos::from_micros(1_000),
        16,
        Model::PerPeriod,
    )
    .unwrap();
    assert_eq!(found, None);
    // 1/5min is reached at n=3 (400 s).
    let found = least_buffering(
        evidence(&histogram),
        parse_rate("1/5min").unwrap(),
        &[Nanos::from_millis(4)],
        Nanos::from_micros(1_000),
        16,
        Model::PerPeriod,
    )
    .unwrap()
    .unwrap();
    assert_eq!(found.buffers, 3);
    // Over several periods, the least (n−1)·t wins: t = 8 ms, n = 2 (slack 7 ms, MTTF 800 s).
    let found = least_buffering(
        evidence(&histogram),
        parse_rate("1/5min").unwrap(),
        &[
            Nanos::from_millis(2),
            Nanos::from_millis(4),
            Nanos::from_millis(8),
        ],
        Nanos::from_micros(1_000),
        16,
        Model::PerPeriod,
    )
    .unwrap()
    .unwrap();
    assert_eq!((found.buffers, found.buffer_period_ns), (2, 8_000_000));
}

#[test]
fn verdicts_are_plain() {
    let histogram = constructed();
    let classes = crate::classes::builtin_classes();
    let modem = classes.iter().find(|class| class.name == "modem").unwrap();
    // Modem: 3 × 6 ms, c 1.5 ms → slack 10.5 ms → 10 late → MTTF 6 ms / 1e-5 = 600 s < 1 h.
    let row = forecast(
        evidence(&histogram),
        BufferConfig::of_class(modem),
        Model::PerPeriod,
    )
    .unwrap();
    // The sentence ("NOT suitable for soft modem …: one glitch every 10 min …") is the CLI's.
    assert_eq!(verdict_kind(modem, &row), VerdictKind::NotSuitable);
}

#[test]
fn selects_and_pools_series() {
    let mut record = test_record();
    let selection = select_series(&record, None).unwrap();
    assert_eq!(selection.label, "rt-high/wakeup");
    assert_eq!(selection.cpus, vec![0, 1]);
    assert_eq!(selection.histogram.count(), 300);
    assert!(select_series(&record, Some("normal/wakeup")).is_err());
    assert!(select_series(&record, Some("rt-high")).is_err());
    record.series[0].class = "mid".to_owned();
    record.series[1].class = "other".to_owned();
    let message = select_series(&record, None).unwrap_err().to_string();
    assert!(message.contains("several classes"), "{message}");
}

#[test]
fn missed_periods_are_restored_from_peaks() {
    let mut histogram = LatencyHistogram::new();
    histogram.record_n(10_000, 97);
    histogram.record(2_500_000);
    let peak = rtlab_core::Peak {
        at_ns: 5,
        value_ns: 2_500_000,
    };
    let mut series =
        rtlab_core::rt_high_wakeup_series(0, &histogram, 3, vec![], vec![peak]).unwrap();
    // 2.5 ms late with t = 1 ms skipped 2 periods: they would have been 1.5 ms and 0.5 ms late.
    // The record says 3 were missed: one is not covered by the peaks.
    let mut restored = series.histogram().unwrap();
    assert_eq!(add_missed_periods(&series, &mut restored), (2, 1));
    assert_eq!(restored.count(), 100);
    assert_eq!(restored.count_above(1_000_000), 2);
    series.period_ns = 0;
    assert_eq!(
        add_missed_periods(&series, &mut series.histogram().unwrap()),
        (0, 3)
    );
}

fn test_record() -> RunRecord {
    let series = |cpu: u32, count: u64| {
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(10_000, count);
        rtlab_core::rt_high_wakeup_series(cpu, &histogram, 0, vec![], vec![]).unwrap()
    };
    let mut record = RunRecord::new(
        "test",
        "2026-01-01T00:00:00Z",
        0,
        vec![series(0, 100), series(1, 200)],
    );
    record.tool_version = "test".to_owned();
    record
}

proptest! {
    #[test]
    fn more_buffering_never_lowers_the_mttf(
        values in proptest::collection::vec(1u64..50_000_000, 1..400),
        period_us in 100u64..20_000,
        compute_permille in 0u64..900,
        buffers in 2u32..12,
    ) {
        let mut histogram = LatencyHistogram::new();
        for value in &values {
            histogram.record(*value);
        }
        let period = Nanos::from_micros(period_us);
        let compute = Nanos(period.0 * compute_permille / 1000);
        let fewer = forecast(evidence(&histogram), BufferConfig { buffers, buffer_period: period, compute }, Model::PerPeriod).unwrap();
        let more = forecast(evidence(&histogram), BufferConfig { buffers: buffers + 1, buffer_period: period, compute }, Model::PerPeriod).unwrap();
        // Compare the lower ends, which always exist, and the estimates when both have one.
        prop_assert!(more.mttf_ci_s[0].unwrap() >= fewer.mttf_ci_s[0].unwrap() - 1e-12);
        if let (Some(a), Some(b)) = (fewer.mttf_s, more.mttf_s) {
            prop_assert!(b >= a - 1e-12);
        }
        prop_assert!(more.slack_ns > fewer.slack_ns);
    }
}
