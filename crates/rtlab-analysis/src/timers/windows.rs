//! The Windows timer study's findings (`rtlab timers` on Windows, papers 000 and 004): pure
//! functions of the rows, so they are tested here on made-up rows on any platform.
//!
//! The rows' classes are `normal` (no timeBeginPeriod from rtlab) and `period-1ms` (rtlab held
//! timeBeginPeriod(1) while measuring); the APIs are `Sleep`, `WaitForSingleObject`,
//! `SetWaitableTimer` (`relative`, `high-res`) and `timeSetEvent` (`periodic`).

use super::{ms, us};
use rtlab_core::timer_study::{ChangeExperiment, TimerRow};
use rtlab_core::LatencyHistogram;

/// Paper 000's bins: 100 µs.
pub const INTERVAL_BIN_NS: u64 = 100_000;

/// Counts of a row's intervals in 100 µs bins (non-empty bins only, ascending): paper 000's
/// Tables 1-3. None if the row's histogram does not decode.
pub fn interval_bins(row: &TimerRow) -> Option<Vec<(u64, u64)>> {
    let histogram = LatencyHistogram::from_base64(&row.hdr).ok()?;
    let mut bins: Vec<(u64, u64)> = Vec::new();
    for (value_ns, count) in histogram.buckets() {
        let bin = value_ns / INTERVAL_BIN_NS * INTERVAL_BIN_NS;
        match bins.last_mut() {
            Some((last, total)) if *last == bin => *total += count,
            _ => bins.push((bin, count)),
        }
    }
    Some(bins)
}

fn call(row: &TimerRow) -> String {
    match (row.api.as_str(), row.mode.as_str()) {
        ("SetWaitableTimer", "high-res") => {
            format!("a high-resolution waitable timer of {}", ms(row.asked_ns))
        }
        ("SetWaitableTimer", _) => format!("a waitable timer of {}", ms(row.asked_ns)),
        ("timeSetEvent", _) => format!("timeSetEvent({})", ms(row.asked_ns)),
        (api, _) => format!("{api}({})", row.asked_ns / 1_000_000),
    }
}

/// Plain sentences about what the rows show.
pub fn windows_findings(rows: &[TimerRow]) -> Vec<String> {
    let measured: Vec<&TimerRow> = rows.iter().filter(|row| row.count > 0).collect();
    let mut lines = Vec::new();
    // 1. What timeBeginPeriod(1) changes, per API and interval (paper 004).
    for row in measured.iter().filter(|row| row.class == "normal") {
        let Some(with) = measured.iter().find(|other| {
            other.class == "period-1ms"
                && other.api == row.api
                && other.mode == row.mode
                && other.requested_ns == row.requested_ns
        }) else {
            continue;
        };
        let before = row.p50_ns as f64;
        let after = with.p50_ns as f64;
        let change = after - before;
        if change.abs() >= 200_000.0 && change.abs() >= 0.2 * before {
            lines.push(format!(
                "{} returns every {} µs (median) without timeBeginPeriod(1) and every {} µs with it: it waits for the next clock interrupt, and the clock runs only as fast as some process asked",
                call(row),
                us(before),
                us(after)
            ));
        } else if row.api == "Sleep" {
            lines.push(format!(
                "{} returns every {} µs (median) with or without this process's timeBeginPeriod(1): the resolution in force was already fine (another process asked for it, or this is not Windows' own timer)",
                call(row),
                us(before)
            ));
        }
    }
    // 2. Catch-up bursts of the periodic multimedia timer (paper 000).
    for row in measured
        .iter()
        .filter(|row| row.api == "timeSetEvent" && row.catchups > 0)
    {
        lines.push(format!(
            "{} in {} fired {} times less than a quarter period after the previous callback: after a late expiry it catches up in a burst, so a callback count is not a clock",
            call(row),
            row.class,
            row.catchups
        ));
    }
    // 3. The high-resolution flag against the ordinary waitable timer.
    for row in measured
        .iter()
        .filter(|row| row.api == "SetWaitableTimer" && row.mode == "relative")
    {
        if let Some(high) = measured.iter().find(|other| {
            other.api == "SetWaitableTimer"
                && other.mode == "high-res"
                && other.class == row.class
                && other.requested_ns == row.requested_ns
        }) {
            let ordinary = row.p50_ns as f64 - row.asked_ns as f64;
            let fine = high.p50_ns as f64 - high.asked_ns as f64;
            if ordinary - fine >= 200_000.0 {
                lines.push(format!(
                    "in {}, a waitable timer of {} runs {} µs long (median) without CREATE_WAITABLE_TIMER_HIGH_RESOLUTION and {} µs with it",
                    row.class,
                    ms(row.asked_ns),
                    us(ordinary),
                    us(fine)
                ));
            }
        }
    }
    lines
}

/// What the other process's timeBeginPeriod requests did to this process's Sleep(1), against the
/// first step (no request): Dawson's experiment (paper 004).
pub fn windows_change_findings(experiment: &ChangeExperiment) -> Vec<String> {
    let Some(baseline) = experiment.steps.first() else {
        return Vec::new();
    };
    if baseline.sleep.count == 0 {
        return Vec::new();
    }
    let before = baseline.sleep.p50_ns as f64;
    let mut changed = Vec::new();
    let mut unchanged = Vec::new();
    for step in experiment
        .steps
        .iter()
        .skip(1)
        .filter(|step| step.sleep.count > 0)
    {
        let after = step.sleep.p50_ns as f64;
        let difference = after - before;
        if difference.abs() >= 200_000.0 && difference.abs() >= 0.2 * before {
            changed.push(format!(
                "while the other process held {}, this process's Sleep(1) took {} µs (median) instead of {} µs",
                step.setting,
                us(after),
                us(before)
            ));
        } else {
            unchanged.push(
                step.setting
                    .split(',')
                    .next()
                    .unwrap_or(&step.setting)
                    .to_owned(),
            );
        }
    }
    if !unchanged.is_empty() {
        changed.push(format!(
            "{} in the other process changed nothing measurable in this one (Sleep(1) median {} µs without any request): the timer resolution is per process here, or was already fine",
            unchanged.join(", "),
            us(before)
        ));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timers::{timer_row, CellInput};

    fn row(api: &str, mode: &str, class: &str, asked_ns: u64, intervals: &[u64]) -> TimerRow {
        timer_row(&CellInput {
            api,
            mode,
            class,
            policy: "NORMAL/NORMAL",
            priority: 8,
            timer_slack_ns: 0,
            requested_ns: 1_000_000,
            asked_ns,
            intervals,
            reported_overruns: None,
        })
    }

    #[test]
    fn says_what_time_begin_period_changed() {
        let rows = vec![
            row("Sleep", "ms", "normal", 1_000_000, &[15_625_000; 50]),
            row("Sleep", "ms", "period-1ms", 1_000_000, &[1_950_000; 50]),
        ];
        let lines = windows_findings(&rows);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("Sleep(1) returns every 15625 µs"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("every 1950 µs with it"));
    }

    #[test]
    fn says_when_it_changed_nothing() {
        let rows = vec![
            row("Sleep", "ms", "normal", 1_000_000, &[1_100_000; 50]),
            row("Sleep", "ms", "period-1ms", 1_000_000, &[1_090_000; 50]),
        ];
        let lines = windows_findings(&rows);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("with or without"), "{}", lines[0]);
    }

    #[test]
    fn counts_catch_up_bursts() {
        let mut intervals = vec![1_000_000u64; 40];
        intervals.extend([8_000_000, 10_000, 12_000, 9_000]);
        let rows = vec![row(
            "timeSetEvent",
            "periodic",
            "normal",
            1_000_000,
            &intervals,
        )];
        let lines = windows_findings(&rows);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("fired 3 times"), "{}", lines[0]);
    }

    fn step(setting: &str, sleeps: &[u64]) -> rtlab_core::timer_study::ChangeStep {
        let mut histogram = LatencyHistogram::new();
        for &sleep in sleeps {
            histogram.record(sleep);
        }
        rtlab_core::timer_study::ChangeStep {
            setting: setting.to_owned(),
            sleep: rtlab_core::timer_study::DelayStats {
                count: histogram.count(),
                p50_ns: histogram.value_at_quantile(0.5),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn says_which_requests_changed_sleep() {
        let experiment = ChangeExperiment {
            steps: vec![
                step("no request", &[15_600_000; 20]),
                step("timeBeginPeriod(1), in force 1ms", &[1_990_000; 20]),
                step("timeBeginPeriod(15), in force 15.6ms", &[15_600_000; 20]),
            ],
            ..ChangeExperiment::default()
        };
        let lines = windows_change_findings(&experiment);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains(
                "held timeBeginPeriod(1), in force 1ms, this process's Sleep(1) took 1990 µs"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("timeBeginPeriod(15) in the other process changed nothing"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn bins_intervals_by_100_microseconds() {
        let rows = [row(
            "timeSetEvent",
            "periodic",
            "normal",
            1_000_000,
            &[950_000, 1_020_000, 1_050_000, 1_990_000],
        )];
        let bins = interval_bins(&rows[0]).unwrap();
        assert_eq!(bins, vec![(900_000, 1), (1_000_000, 2), (1_900_000, 1)]);
    }
}
