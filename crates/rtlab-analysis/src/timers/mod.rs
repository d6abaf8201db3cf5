//! The timer study's statistics and plain-word findings (`rtlab timers`): pure functions of the
//! measured intervals, so every sentence printed is derived from this machine's data and tested
//! on made-up data. `audit` judges the settings the audit read; `change` says what the change
//! experiment's settings did.

pub mod audit;
pub mod change;
pub mod windows;

pub use audit::judge_audit;
pub use change::change_findings;

use rtlab_core::timer_study::TimerRow;
use rtlab_core::LatencyHistogram;
use std::collections::BTreeMap;

/// What one cell measured, to be summarised into a [`TimerRow`].
#[derive(Clone, Debug)]
pub struct CellInput<'a> {
    pub api: &'a str,
    pub mode: &'a str,
    pub class: &'a str,
    pub policy: &'a str,
    pub priority: i32,
    pub timer_slack_ns: u64,
    pub requested_ns: u64,
    /// What the call was really given (rounded to its unit).
    pub asked_ns: u64,
    /// Times between consecutive returns, ns.
    pub intervals: &'a [u64],
    /// The API's overrun count, when the API reports one.
    pub reported_overruns: Option<u64>,
}

/// Periods missing from `intervals`: an interval of about k periods counts k − 1.
pub fn gaps(intervals: &[u64], requested_ns: u64) -> u64 {
    let period = requested_ns.max(1) as f64;
    intervals
        .iter()
        .map(|&interval| ((interval as f64 / period).round() as u64).saturating_sub(1))
        .sum()
}

/// Intervals shorter than a quarter period: a timer firing again at once to catch up.
pub fn catchups(intervals: &[u64], requested_ns: u64) -> u64 {
    intervals
        .iter()
        .filter(|&&interval| interval.saturating_mul(4) < requested_ns)
        .count() as u64
}

/// Summarises one cell.
pub fn timer_row(input: &CellInput<'_>) -> TimerRow {
    let mut histogram = LatencyHistogram::new();
    for &interval in input.intervals {
        histogram.record(interval);
    }
    let summary = histogram.summary();
    let count = input.intervals.len() as u64;
    let mean_ns = if count == 0 {
        0.0
    } else {
        input
            .intervals
            .iter()
            .map(|&value| value as f64)
            .sum::<f64>()
            / count as f64
    };
    let requested = input.requested_ns.max(1) as f64;
    let (skipped, skipped_from) = match input.reported_overruns {
        Some(overruns) => (overruns, "reported"),
        // A late return followed by quick ones to catch up loses no period.
        None => (
            gaps(input.intervals, input.requested_ns)
                .saturating_sub(catchups(input.intervals, input.requested_ns)),
            "gaps",
        ),
    };
    TimerRow {
        api: input.api.to_owned(),
        mode: input.mode.to_owned(),
        class: input.class.to_owned(),
        policy: input.policy.to_owned(),
        priority: input.priority,
        timer_slack_ns: input.timer_slack_ns,
        requested_ns: input.requested_ns,
        asked_ns: input.asked_ns,
        count,
        mean_ns,
        min_ns: summary.min_ns,
        p50_ns: summary.percentiles.get("50").copied().unwrap_or(0),
        p99_ns: summary.percentiles.get("99").copied().unwrap_or(0),
        max_ns: summary.max_ns,
        drift_ppm: if count == 0 {
            0.0
        } else {
            (mean_ns - requested) / requested * 1e6
        },
        catchups: catchups(input.intervals, input.requested_ns),
        skipped,
        skipped_from: skipped_from.to_owned(),
        hdr: histogram.to_base64().unwrap_or_default(),
    }
}

pub(crate) fn ms(ns: u64) -> String {
    let text = format!("{:.3}", ns as f64 / 1e6);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} ms")
}

pub(crate) fn us(ns: f64) -> String {
    format!("{:.0}", ns / 1e3)
}

/// (p50 − requested) / requested, in %: how fast a loop on it typically drifts.
fn median_drift_percent(row: &TimerRow) -> f64 {
    (row.p50_ns as f64 - row.requested_ns as f64) / row.requested_ns.max(1) as f64 * 100.0
}

/// How much longer than it was asked to wait the call typically ran.
fn excess(row: &TimerRow) -> f64 {
    let asked = if row.asked_ns == 0 {
        row.requested_ns
    } else {
        row.asked_ns
    };
    row.p50_ns as f64 - asked as f64
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn range(values: &[f64]) -> String {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if us(low) == us(high) {
        format!("{} µs", us(low))
    } else if low < 0.0 {
        format!("{} to {} µs", us(low), us(high))
    } else {
        format!("{}-{} µs", us(low), us(high))
    }
}

fn join_names(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `api` alone when it has one mode in the study, else `api (mode)`.
fn api_label(rows: &[TimerRow], row: &TimerRow) -> String {
    let modes: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter(|other| other.api == row.api)
        .map(|other| other.mode.as_str())
        .collect();
    if modes.len() > 1 {
        format!("{} ({})", row.api, row.mode)
    } else {
        row.api.clone()
    }
}

/// Plain-word findings, each derived from the rows (nothing is said that the numbers do not show).
pub fn findings(rows: &[TimerRow]) -> Vec<String> {
    let measured: Vec<&TimerRow> = rows.iter().filter(|row| row.count > 0).collect();
    let mut lines = Vec::new();
    whole_millisecond_rounding(rows, &measured, &mut lines);
    timer_slack(rows, &measured, &mut lines);
    no_slack_for_rt_threads(&measured, &mut lines);
    drift_at_the_shortest_interval(rows, &measured, &mut lines);
    catch_ups(rows, &measured, &mut lines);
    skipped_periods(rows, &measured, &mut lines);
    lines
}

/// Says which APIs round a request up to whole milliseconds, seen where no slack blurs it
/// (rt-high, else slack 1 ns).
fn whole_millisecond_rounding(rows: &[TimerRow], measured: &[&TimerRow], lines: &mut Vec<String>) {
    for row in measured {
        let preferred = if measured.iter().any(|other| other.class == "rt-high") {
            "rt-high"
        } else {
            "normal-slack1ns"
        };
        if row.class != preferred || row.requested_ns % 1_000_000 == 0 {
            continue;
        }
        let whole = row.requested_ns.div_ceil(1_000_000) * 1_000_000;
        let p50 = row.p50_ns;
        if whole - row.requested_ns >= 100_000
            && p50 + 20_000 >= whole
            && p50 < whole + (whole - row.requested_ns) / 2
        {
            let hertz = 1e9 / row.requested_ns as f64;
            lines.push(format!(
                "{} rounds {} up to {}: a {:.0} Hz loop built on it drifts by {:.1} %",
                api_label(rows, row),
                ms(row.requested_ns),
                ms(whole),
                hertz,
                median_drift_percent(row)
            ));
        }
    }
}

/// Says which APIs the timer slack delays: SCHED_OTHER with the default slack against 1 ns, same
/// API and interval.
fn timer_slack(rows: &[TimerRow], measured: &[&TimerRow], lines: &mut Vec<String>) {
    let find = |api: &str, mode: &str, class: &str, requested: u64| {
        measured.iter().copied().find(|row| {
            row.api == api
                && row.mode == mode
                && row.class == class
                && row.requested_ns == requested
        })
    };
    // Keys (api, mode) in the order the rows came.
    let mut keys: Vec<(String, String)> = Vec::new();
    for row in measured {
        let key = (row.api.clone(), row.mode.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }

    let mut slack_apis = Vec::new();
    let mut slack_excess = Vec::new();
    let mut slack1_excess = Vec::new();
    let mut slack_immune = Vec::new();
    let mut immune_excess = Vec::new();
    let mut default_slack = None;
    for (api, mode) in keys
        .iter()
        .filter(|(_, mode)| mode == "relative" || mode == "rearmed")
    {
        let mut normal = Vec::new();
        let mut slack1 = Vec::new();
        for row in measured
            .iter()
            .filter(|row| &row.api == api && &row.mode == mode)
        {
            if row.class != "normal" {
                continue;
            }
            if let Some(low) = find(api, mode, "normal-slack1ns", row.requested_ns) {
                normal.push(excess(row));
                slack1.push(excess(low));
                default_slack.get_or_insert(row.timer_slack_ns);
            }
        }
        if normal.is_empty() {
            continue;
        }
        let differences: Vec<f64> = normal.iter().zip(&slack1).map(|(a, b)| a - b).collect();
        // Over the intervals, the typical difference decides (one noisy cell does not).
        let typical = median(&differences);
        let row = measured
            .iter()
            .find(|row| &row.api == api && &row.mode == mode)
            .expect("a key comes from a row");
        if typical >= 20_000.0 {
            slack_apis.push(api_label(rows, row));
            slack_excess.extend(normal);
            slack1_excess.extend(differences);
        } else if typical.abs() < 10_000.0 {
            slack_immune.push(api_label(rows, row));
            immune_excess.extend(normal);
        }
    }
    if !slack_apis.is_empty() {
        let slack = default_slack.unwrap_or(0);
        let (verb, pronoun) = if slack_apis.len() == 1 {
            ("runs", "it runs")
        } else {
            ("run", "they run")
        };
        let _ = pronoun;
        lines.push(format!(
            "{} in SCHED_OTHER {verb} {} long (median): the default timer slack ({} µs), {} more than with PR_SET_TIMERSLACK 1 ns",
            join_names(&slack_apis),
            range(&slack_excess),
            slack / 1_000,
            range(&slack1_excess)
        ));
        if !slack_immune.is_empty() {
            lines.push(format!(
                "{} ignore{} the timer slack: {} long in SCHED_OTHER (median) with either slack",
                join_names(&slack_immune),
                if slack_immune.len() == 1 { "s" } else { "" },
                range(&immune_excess)
            ));
        }
    }
}

/// Says that RT threads get no slack, when the rows show it.
fn no_slack_for_rt_threads(measured: &[&TimerRow], lines: &mut Vec<String>) {
    let rt_rows: Vec<&&TimerRow> = measured
        .iter()
        .filter(|row| row.class == "rt-high")
        .collect();
    if !rt_rows.is_empty()
        && rt_rows.iter().all(|row| row.timer_slack_ns == 0)
        && measured
            .iter()
            .any(|row| row.class == "normal" && row.timer_slack_ns > 0)
    {
        lines.push(
            "SCHED_FIFO threads get no timer slack (the kernel reports 0 for them), so rt-high shows each API's own overhead".to_owned(),
        );
    }
}

/// Says which loops that ask for one period each time fall behind, at the shortest interval
/// (where the per-call overhead weighs most), from the median so one long delay does not decide it.
fn drift_at_the_shortest_interval(
    rows: &[TimerRow],
    measured: &[&TimerRow],
    lines: &mut Vec<String>,
) {
    let drift_class = if measured.iter().any(|row| row.class == "rt-high") {
        "rt-high"
    } else {
        "normal-slack1ns"
    };
    if let Some(shortest) = measured
        .iter()
        .filter(|row| row.class == drift_class)
        .map(|row| row.requested_ns)
        .min()
    {
        let mut drifting: Vec<(String, f64)> = Vec::new();
        let mut steady = Vec::new();
        for row in measured
            .iter()
            .filter(|row| row.class == drift_class && row.requested_ns == shortest)
        {
            if row.mode == "relative" || row.mode == "rearmed" {
                let percent = median_drift_percent(row);
                if percent.abs() >= 0.1 {
                    drifting.push((api_label(rows, row), percent));
                }
            } else {
                // Absolute deadlines and kernel-periodic timers: the time per period,
                // skipped periods included, stays the request.
                let periods = (row.count + row.skipped) as f64;
                let per_period = row.mean_ns * row.count as f64 / periods.max(1.0);
                if (per_period / row.requested_ns as f64 - 1.0).abs() < 0.001 {
                    steady.push(api_label(rows, row));
                }
            }
        }
        drifting
            .sort_by(|(_, percent_a), (_, percent_b)| percent_b.abs().total_cmp(&percent_a.abs()));
        if !drifting.is_empty() {
            let named: Vec<String> = drifting
                .iter()
                .map(|(label, percent)| format!("{label} {percent:+.1} %"))
                .collect();
            lines.push(format!(
                "at {} a loop that waits one period at a time falls behind ({drift_class}, median interval): {}{}",
                ms(shortest),
                named.join(", "),
                if steady.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} keep the period (within 0.1 %)",
                        join_names(&steady)
                    )
                }
            ));
        }
    }
}

/// One API's catch-ups over every cell that had some.
struct CatchUps<'a> {
    /// The API as the findings name it ([`api_label`]).
    label: String,
    mode: &'a str,
    /// Catch-ups summed over its cells.
    count: u64,
    /// The cells that had some, as `class at interval`.
    cells: Vec<String>,
}

/// Says which APIs returned less than a quarter period after the previous return, and why.
fn catch_ups(rows: &[TimerRow], measured: &[&TimerRow], lines: &mut Vec<String>) {
    let mut caught_up: Vec<CatchUps> = Vec::new();
    for row in measured.iter().filter(|row| row.catchups > 0) {
        let label = api_label(rows, row);
        let cell = format!("{} at {}", row.class, ms(row.requested_ns));
        match caught_up.iter_mut().find(|api| api.label == label) {
            Some(api) => {
                api.count += row.catchups;
                api.cells.push(cell);
            }
            None => caught_up.push(CatchUps {
                label,
                mode: row.mode.as_str(),
                count: row.catchups,
                cells: vec![cell],
            }),
        }
    }
    for CatchUps {
        label,
        mode,
        count,
        cells,
    } in caught_up
    {
        let why = match mode {
            "absolute" => "after a late return it returns at once for every deadline it missed, as NT's multimedia timer did",
            "periodic" => "the return after a late one comes early, on the timer's schedule (periods missed beyond that are overruns, not extra returns)",
            _ => "a late wake-up and a prompt one in a row",
        };
        lines.push(format!(
            "{label} returned {count} time{} less than a quarter period after the previous return ({}): {why}",
            if count == 1 { "" } else { "s" },
            cells.join(", ")
        ));
    }
}

/// Says which APIs skipped periods: those that reported them, then those counted from gaps.
fn skipped_periods(rows: &[TimerRow], measured: &[&TimerRow], lines: &mut Vec<String>) {
    let mut reported: BTreeMap<String, u64> = BTreeMap::new();
    let mut silent: BTreeMap<String, u64> = BTreeMap::new();
    for row in measured.iter().filter(|row| row.skipped > 0) {
        let target = if row.skipped_from == "reported" {
            &mut reported
        } else {
            &mut silent
        };
        *target.entry(api_label(rows, row)).or_insert(0) += row.skipped;
    }
    for (label, skipped) in reported {
        lines.push(format!(
            "{label} skipped {skipped} periods and said so (its overrun count): it never fires twice to catch up"
        ));
    }
    if !silent.is_empty() {
        let mut counted: Vec<(String, u64)> = silent.into_iter().collect();
        counted.sort_by(|(label_a, skipped_a), (label_b, skipped_b)| {
            skipped_b.cmp(skipped_a).then_with(|| label_a.cmp(label_b))
        });
        let named: Vec<String> = counted
            .iter()
            .map(|(label, skipped)| format!("{label} {skipped}"))
            .collect();
        lines.push(format!(
            "periods that passed with no return (a late one spanning two or more), which these APIs do not report: {}",
            named.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        api: &str,
        mode: &str,
        class: &str,
        requested: u64,
        intervals: &[u64],
        slack: u64,
    ) -> TimerRow {
        timer_row(&CellInput {
            api,
            mode,
            class,
            policy: if class == "rt-high" {
                "SCHED_FIFO"
            } else {
                "SCHED_OTHER"
            },
            priority: 0,
            timer_slack_ns: slack,
            requested_ns: requested,
            asked_ns: requested,
            intervals,
            reported_overruns: None,
        })
    }

    #[test]
    fn gaps_and_catchups_follow_their_definitions() {
        let intervals = [1_000_000, 2_000_000, 100_000, 3_100_000, 200_000];
        assert_eq!(gaps(&intervals, 1_000_000), 1 + 2);
        assert_eq!(catchups(&intervals, 1_000_000), 2);
        let counted = row(
            "nanosleep",
            "relative",
            "normal",
            1_000_000,
            &intervals,
            50_000,
        );
        assert_eq!(
            (counted.skipped, counted.skipped_from.as_str()),
            (1, "gaps")
        );
        let reported = timer_row(&CellInput {
            reported_overruns: Some(7),
            ..CellInput {
                api: "timerfd",
                mode: "periodic",
                class: "rt-high",
                policy: "SCHED_FIFO",
                priority: 90,
                timer_slack_ns: 0,
                requested_ns: 1_000_000,
                asked_ns: 1_000_000,
                intervals: &intervals,
                reported_overruns: None,
            }
        });
        assert_eq!(
            (reported.skipped, reported.skipped_from.as_str()),
            (7, "reported")
        );
    }

    #[test]
    fn whole_millisecond_rounding_is_found_with_its_drift() {
        let rows = vec![row(
            "epoll_wait",
            "relative",
            "rt-high",
            16_666_667,
            &[17_005_000; 20],
            0,
        )];
        let found = findings(&rows);
        assert!(
            found.iter().any(|line| line.starts_with(
                "epoll_wait rounds 16.667 ms up to 17 ms: a 60 Hz loop built on it drifts by 2.0 %"
            )),
            "{found:?}"
        );
        // A select of the same request does not round: no such finding.
        let rows = vec![row(
            "select",
            "relative",
            "rt-high",
            16_666_667,
            &[16_672_000; 20],
            0,
        )];
        assert!(!findings(&rows).iter().any(|line| line.contains("rounds")));
    }

    #[test]
    fn timer_slack_is_found_from_the_two_normal_classes() {
        let rows = vec![
            row(
                "nanosleep",
                "relative",
                "normal",
                1_000_000,
                &[1_055_000; 20],
                50_000,
            ),
            row(
                "nanosleep",
                "relative",
                "normal-slack1ns",
                1_000_000,
                &[1_006_000; 20],
                1,
            ),
            row(
                "io_uring",
                "relative",
                "normal",
                1_000_000,
                &[1_007_000; 20],
                50_000,
            ),
            row(
                "io_uring",
                "relative",
                "normal-slack1ns",
                1_000_000,
                &[1_006_000; 20],
                1,
            ),
            row(
                "nanosleep",
                "relative",
                "rt-high",
                1_000_000,
                &[1_005_000; 20],
                0,
            ),
            row(
                "clock_nanosleep_abs",
                "absolute",
                "rt-high",
                1_000_000,
                &[990_000, 1_010_000],
                0,
            ),
        ];
        let found = findings(&rows);
        assert!(
            found.iter().any(|line| line.starts_with("nanosleep in SCHED_OTHER runs 55 µs long (median): the default timer slack (50 µs), 49 µs more than with PR_SET_TIMERSLACK 1 ns")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|line| line.starts_with("io_uring ignores the timer slack")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|line| line.starts_with("SCHED_FIFO threads get no timer slack")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|line| line
                .starts_with("at 1 ms a loop that waits one period at a time falls behind")
                && line.contains("nanosleep +0.5 %")
                && line.ends_with("; clock_nanosleep_abs keep the period (within 0.1 %)")),
            "{found:?}"
        );
    }

    #[test]
    fn slack_is_measured_from_what_the_call_was_asked_and_gaps_are_listed_together() {
        let mut rows = vec![
            row(
                "epoll_wait",
                "relative",
                "normal",
                16_666_667,
                &[17_056_000; 9],
                50_000,
            ),
            row(
                "epoll_wait",
                "relative",
                "normal-slack1ns",
                16_666_667,
                &[17_004_000; 9],
                1,
            ),
            row(
                "poll",
                "relative",
                "normal",
                1_000_000,
                &[1_000_000, 3_000_000, 1_000_000],
                50_000,
            ),
            row(
                "select",
                "relative",
                "normal",
                1_000_000,
                &[2_000_000],
                50_000,
            ),
        ];
        for row in rows.iter_mut().filter(|row| row.api == "epoll_wait") {
            row.asked_ns = 17_000_000;
        }
        let found = findings(&rows);
        assert!(
            found
                .iter()
                .any(|line| line.starts_with("epoll_wait in SCHED_OTHER runs 56 µs long (median)")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|line| line.ends_with("which these APIs do not report: poll 2, select 1")),
            "{found:?}"
        );
    }

    #[test]
    fn no_data_no_findings() {
        assert!(findings(&[]).is_empty());
        let empty = row("poll", "relative", "rt-high", 1_000_000, &[], 0);
        assert_eq!(empty.count, 0);
        assert!(findings(&[empty]).is_empty());
    }
}
