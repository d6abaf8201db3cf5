//! A timer study as text (`rtlab timers`, on Linux and on Windows): the table per requested
//! interval, the multimedia timer's 100 µs bins (Windows), what was not measured, the findings;
//! the change experiment's table; the audits of the settings that change everyone's timing.
//! One renderer for both platforms: the record's `host.windows` says which columns apply.

use crate::svg_timers::millis_label;
use rtlab_analysis::timers::change_findings;
use rtlab_analysis::timers::windows::{interval_bins, windows_change_findings};
use rtlab_core::timer_audit::{AuditReport, WindowsAudit};
use rtlab_core::timer_change::ChangeConfig;
use rtlab_core::timer_study::{ChangeExperiment, TimerStudy};
use rtlab_core::{Nanos, RunRecord};
use std::fmt::Write;

fn micros(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The progress bar's message while a cell is measured: `clock_nanosleep (relative) in rt-high at
/// 1ms`, the API's function and mode, the class and the requested interval.
pub fn cell_progress(function: &str, mode: &str, class: &str, interval: Nanos) -> String {
    format!(
        "{function} ({mode}) in {class} at {}",
        millis_label(interval.0)
    )
}

/// The study's text (or, for a change experiment, its table), warnings last.
pub fn study(record: &RunRecord) -> String {
    crate::to_text(|out| write_study(out, record))
}

/// What the change experiment will hold, said before it starts: `holding 7 settings for 3s
/// each: nothing changed, cpu_dma_latency 99 µs, …`.
pub fn change_plan(config: &ChangeConfig) -> String {
    let settings: Vec<String> = config
        .settings
        .iter()
        .map(|setting| setting.describe())
        .collect();
    format!(
        "holding {} settings for {} each: {}\n",
        settings.len(),
        config.hold,
        settings.join(", ")
    )
}

/// The audit's text.
pub fn audit(report: &AuditReport) -> String {
    crate::to_text(|out| write_audit(out, report))
}

/// The Windows audit's text (`rtlab timers --audit` on Windows).
pub fn windows_audit(audit: &WindowsAudit) -> String {
    crate::to_text(|out| write_windows_audit(out, audit))
}

/// The study's table per interval, what was not measured, and the findings.
fn write_study(out: &mut impl Write, record: &RunRecord) -> std::fmt::Result {
    let Some(study) = &record.timers else {
        return Ok(());
    };
    let windows = record.host.windows.is_some();
    if let Some(experiment) = &study.change_experiment {
        return write_change_experiment(out, record, study, experiment);
    }
    writeln!(
        out,
        "timer study {}  started {}  on CPU {}  {}{}{}",
        record.id.chars().take(8).collect::<String>(),
        record.started_at,
        study.cpu,
        if windows { "" } else { "kernel " },
        record.host.kernel,
        crate::summary::interrupted_note(record)
    )?;
    let mut intervals: Vec<u64> = study.rows.iter().map(|row| row.requested_ns).collect();
    intervals.sort_unstable();
    intervals.dedup();
    for requested in intervals {
        writeln!(out)?;
        writeln!(
            out,
            "requested {}: times between returns (µs); drift = mean against {}",
            millis_label(requested),
            if windows {
                "what the call was given"
            } else {
                "the request"
            }
        )?;
        // Windows rounds most waits to whole ms: the `given` column says what the call got.
        let given = |text: &str| {
            if windows {
                format!(" {text:>7}")
            } else {
                String::new()
            }
        };
        writeln!(
            out,
            "{:<23} {:<9} {:<16}{} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
            "api",
            "mode",
            "class",
            given("given"),
            "count",
            "mean",
            "drift",
            "p50",
            "p99",
            "max",
            "catchup",
            "skipped"
        )?;
        for row in study
            .rows
            .iter()
            .filter(|row| row.requested_ns == requested)
        {
            writeln!(
                out,
                "{:<23} {:<9} {:<16}{} {:>6} {:>9} {:>8.2}% {:>9} {:>9} {:>9} {:>7} {:>7}",
                row.api,
                row.mode,
                row.class,
                given(&millis_label(row.asked_ns)),
                row.count,
                micros(row.mean_ns),
                row.drift_ppm / 1e4,
                micros(row.p50_ns as f64),
                micros(row.p99_ns as f64),
                micros(row.max_ns as f64),
                row.catchups,
                format!(
                    "{}{}",
                    row.skipped,
                    if row.skipped_from == "reported" {
                        "r"
                    } else {
                        ""
                    }
                ),
            )?;
        }
    }
    writeln!(
        out,
        "\ncatchup: returns less than a quarter period after the previous one; skipped: periods with no return (r: the API's own overrun count)"
    )?;
    write_bins(out, study)?;
    write_unavailable(out, study)?;
    write_findings(out, &study.findings)?;
    if !record.warnings.is_empty() {
        writeln!(out)?;
        write_warnings(out, &record.warnings)?;
    }
    Ok(())
}

/// The multimedia timer's intervals in paper 000's 100 µs bins (Tables 1-3); only Windows
/// studies have timeSetEvent rows.
fn write_bins(out: &mut impl Write, study: &TimerStudy) -> std::fmt::Result {
    for row in study
        .rows
        .iter()
        .filter(|row| row.api == "timeSetEvent" && row.count > 0)
    {
        let Some(bins) = interval_bins(row) else {
            continue;
        };
        writeln!(
            out,
            "\ntimeSetEvent({}) in {}: intervals between callbacks in 100 µs bins (paper 000, Tables 1-3)",
            millis_label(row.asked_ns),
            row.class
        )?;
        for (lower, count) in bins {
            let bin = format!(
                "{:.1}-{:.1} ms",
                lower as f64 / 1e6,
                (lower + 100_000) as f64 / 1e6
            );
            writeln!(out, "  {bin:>16} {count:>8}")?;
        }
    }
    Ok(())
}

/// The APIs not measured in one class for one reason.
struct UnavailableGroup<'a> {
    class: &'a str,
    reason: &'a str,
    /// Each API as `api (mode)`.
    names: Vec<String>,
}

/// One line per class and reason (without root, rt-high fails the same way for all).
fn write_unavailable(out: &mut impl Write, study: &TimerStudy) -> std::fmt::Result {
    if study.unavailable.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nnot measured:")?;
    let mut groups: Vec<UnavailableGroup> = Vec::new();
    for cell in &study.unavailable {
        let class = cell.class.as_deref().unwrap_or("any class");
        let name = format!("{} ({})", cell.api, cell.mode);
        match groups
            .iter_mut()
            .find(|group| group.class == class && group.reason == cell.reason)
        {
            Some(group) => group.names.push(name),
            None => groups.push(UnavailableGroup {
                class,
                reason: &cell.reason,
                names: vec![name],
            }),
        }
    }
    let mut every_api: Vec<(&str, &str)> = study
        .rows
        .iter()
        .map(|row| (row.api.as_str(), row.mode.as_str()))
        .chain(
            study
                .unavailable
                .iter()
                .map(|cell| (cell.api.as_str(), cell.mode.as_str())),
        )
        .collect();
    every_api.sort_unstable();
    every_api.dedup();
    for UnavailableGroup {
        class,
        reason,
        names,
    } in groups
    {
        let which = if names.len() == every_api.len() && names.len() > 1 {
            "every API".to_owned()
        } else {
            names.join(", ")
        };
        writeln!(out, "  {which} in {class}: {reason}")?;
    }
    Ok(())
}

fn write_findings(out: &mut impl Write, findings: &[String]) -> std::fmt::Result {
    if !findings.is_empty() {
        writeln!(out, "\nfindings:")?;
        for finding in findings {
            writeln!(out, "  - {finding}")?;
        }
    }
    Ok(())
}

fn write_warnings(out: &mut impl Write, warnings: &[String]) -> std::fmt::Result {
    for warning in warnings {
        writeln!(out, "warning: {warning}")?;
    }
    Ok(())
}

fn write_change_experiment(
    out: &mut impl Write,
    record: &RunRecord,
    study: &TimerStudy,
    experiment: &ChangeExperiment,
) -> std::fmt::Result {
    // The experiment's findings, worked out again (records before they were stored), then
    // whatever else the study found.
    let mut findings = if record.host.windows.is_some() {
        write_windows_change_table(out, experiment)?;
        windows_change_findings(experiment)
    } else {
        write_linux_change_table(out, experiment)?;
        change_findings(experiment)
    };
    for finding in &study.findings {
        if !findings.contains(finding) {
            findings.push(finding.clone());
        }
    }
    write_findings(out, &findings)?;
    if record.host.windows.is_none() {
        write_restored(out, experiment)?;
    }
    write_warnings(out, &record.warnings)
}

/// Paper 004 on Linux: cpu_dma_latency and timer slack changed by the other process.
fn write_linux_change_table(
    out: &mut impl Write,
    experiment: &ChangeExperiment,
) -> std::fmt::Result {
    writeln!(
        out,
        "change experiment: another process changes a setting, this {} thread measures its {} sleeps (µs; FIFO: a SCHED_FIFO 90 thread's wake-ups on another CPU)",
        experiment.policy,
        millis_label(experiment.sleep_ns)
    )?;
    writeln!(
        out,
        "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "setting",
        "in force",
        "slack",
        "count",
        "wake p50",
        "wake p99",
        "wake max",
        "sleep p50",
        "sleep p99",
        "FIFO p50",
        "FIFO p99"
    )?;
    for step in &experiment.steps {
        writeln!(
            out,
            "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            step.setting,
            match step.cpu_dma_latency_in_force_us {
                Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
                Some(value) => format!("{value} µs"),
                None => "?".to_owned(),
            },
            format!("{}", Nanos(step.timer_slack_ns)),
            step.wakeup.count,
            micros(step.wakeup.p50_ns as f64),
            micros(step.wakeup.p99_ns as f64),
            micros(step.wakeup.max_ns as f64),
            micros(step.sleep.p50_ns as f64),
            micros(step.sleep.p99_ns as f64),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p50_ns as f64)),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p99_ns as f64)),
        )?;
    }
    Ok(())
}

/// What the other process held when the experiment ended, and what was put back.
fn write_restored(out: &mut impl Write, experiment: &ChangeExperiment) -> std::fmt::Result {
    let restored = &experiment.restored;
    let dma = |value: Option<i64>| match value {
        Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
        Some(value) => format!("{value} µs"),
        None => "unreadable".to_owned(),
    };
    writeln!(
        out,
        "\nrestored: timer slack {} (was {}), cpu_dma_latency in force {} (was {}), changer process {}",
        Nanos(restored.timer_slack_ns_after),
        Nanos(restored.timer_slack_ns_before),
        dma(restored.cpu_dma_latency_after_us),
        dma(restored.cpu_dma_latency_before_us),
        if restored.changer_exited { "exited" } else { "STILL RUNNING" }
    )?;
    Ok(())
}

/// Dawson's pair on Windows: the other process cycles timeBeginPeriod, this one sleeps 1 ms.
fn write_windows_change_table(
    out: &mut impl Write,
    experiment: &ChangeExperiment,
) -> std::fmt::Result {
    writeln!(
        out,
        "change experiment: another process changes its timeBeginPeriod request, this one measures Sleep(1) (µs)"
    )?;
    writeln!(
        out,
        "{:<40} {:>7} {:>10} {:>10} {:>10}",
        "setting (resolution in force)", "count", "sleep p50", "sleep p99", "sleep max"
    )?;
    for step in &experiment.steps {
        writeln!(
            out,
            "{:<40} {:>7} {:>10} {:>10} {:>10}",
            step.setting,
            step.sleep.count,
            micros(step.sleep.p50_ns as f64),
            micros(step.sleep.p99_ns as f64),
            micros(step.sleep.max_ns as f64)
        )?;
    }
    Ok(())
}

fn write_audit(out: &mut impl Write, report: &AuditReport) -> std::fmt::Result {
    writeln!(
        out,
        "settings that change everyone's timing on {} (kernel {})",
        report.host.hostname, report.host.kernel
    )?;
    let mut topic = "";
    for item in &report.items {
        if item.topic != topic {
            topic = &item.topic;
            writeln!(out, "\n{topic}")?;
        }
        writeln!(
            out,
            "  [{:<7}] {}: {}",
            item.effect.as_str(),
            item.setting,
            item.value
        )?;
        writeln!(out, "            {} (set by: {})", item.why, item.set_by)?;
    }
    if !report.skipped.is_empty() {
        writeln!(out, "\nnot known:")?;
        for line in &report.skipped {
            writeln!(out, "  - {line}")?;
        }
    }
    Ok(())
}

fn write_windows_audit(out: &mut impl Write, audit: &WindowsAudit) -> std::fmt::Result {
    let resolution =
        |value: Option<u64>| value.map_or("unreadable".to_owned(), |ns| Nanos(ns).to_string());
    writeln!(out, "Windows {}", audit.version)?;
    if let Some(wine) = &audit.wine {
        writeln!(
            out,
            "running under Wine {wine}: these are Wine's answers, not a Windows kernel's"
        )?;
    }
    writeln!(
        out,
        "timer resolution in force   {}",
        resolution(audit.timer_resolution_ns)
    )?;
    writeln!(
        out,
        "finest a process can ask    {}",
        resolution(audit.timer_resolution_finest_ns)
    )?;
    writeln!(
        out,
        "default (coarsest)          {}",
        resolution(audit.timer_resolution_coarsest_ns)
    )?;
    match audit.multimedia_period_range_ms {
        Some((low, high)) => writeln!(out, "timeBeginPeriod range       {low}..{high} ms")?,
        None => writeln!(
            out,
            "timeBeginPeriod range       unreadable (timeGetDevCaps failed)"
        )?,
    }
    writeln!(
        out,
        "power plan                  {}",
        audit
            .power_plan
            .as_deref()
            .unwrap_or("unreadable (PowerGetActiveScheme failed)")
    )?;
    writeln!(out, "who asked for the resolution: {}", audit.requesters)?;
    if let (Some(now), Some(coarsest)) = (
        audit.timer_resolution_ns,
        audit.timer_resolution_coarsest_ns,
    ) {
        if now < coarsest {
            writeln!(
                out,
                "\nsome process holds a timeBeginPeriod request: the clock interrupt runs every {} instead of {} (more wake-ups, more power; since Windows 10 2004 it speeds up only the processes that asked)",
                Nanos(now),
                Nanos(coarsest)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::timer_audit::{AuditFacts, AuditItem, Effect};
    use rtlab_core::timer_study::{ChangeStep, DelayStats, Restoration, UnavailableCell};

    #[test]
    fn the_change_experiment_says_what_it_will_hold() {
        use rtlab_core::timer_change::Setting;
        let config = ChangeConfig {
            settings: vec![
                Setting::Untouched,
                Setting::DmaLatency(0),
                Setting::TimerSlack(1),
            ],
            hold: Nanos::from_secs(3),
            sleep: Nanos::from_millis(1),
            cpu: 1,
            rt_cpu: None,
        };
        assert_eq!(
            change_plan(&config),
            "holding 3 settings for 3s each: nothing changed, cpu_dma_latency 0 µs, timer slack 1ns\n"
        );
    }

    fn row(api: &str, class: &str, intervals: &[u64]) -> rtlab_core::timer_study::TimerRow {
        crate::svg_timers::tests::sched_other_row(api, "absolute", class, intervals)
    }

    fn linux_record(study: TimerStudy) -> RunRecord {
        let mut record = RunRecord::new("0123456789abcdef", "2026-11-23T10:00:00Z", 1, Vec::new());
        record.host.kernel = "6.18.0".into();
        record.warnings = vec!["running in a virtual machine (kvm)".into()];
        record.timers = Some(study);
        record
    }

    fn windows_record(study: TimerStudy) -> RunRecord {
        let mut record = linux_record(study);
        record.host.kernel = "10.0.22631 (Windows 11 Pro 23H2)".into();
        record.host.windows = Some(rtlab_core::WindowsHost {
            version: "10.0.22631 (Windows 11 Pro 23H2)".into(),
            ..rtlab_core::WindowsHost::default()
        });
        record
    }

    fn experiment() -> ChangeExperiment {
        let stats = |p50, p99| DelayStats {
            count: 100,
            p50_ns: p50,
            p99_ns: p99,
            max_ns: p99 + 10_000,
            ..DelayStats::default()
        };
        ChangeExperiment {
            hold_ns: 1_000_000_000,
            sleep_ns: 1_000_000,
            policy: "SCHED_OTHER".into(),
            steps: vec![
                ChangeStep {
                    setting: "nothing changed".into(),
                    timer_slack_ns: 50_000,
                    wakeup: stats(60_000, 90_000),
                    sleep: stats(1_060_000, 1_090_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "timer slack 1ms".into(),
                    timer_slack_ns: 1_000_000,
                    cpu_dma_latency_in_force_us: Some(2_000_000_000),
                    wakeup: stats(1_010_000, 1_050_000),
                    sleep: stats(2_010_000, 2_050_000),
                    ..ChangeStep::default()
                },
            ],
            restored: Restoration {
                timer_slack_ns_before: 50_000,
                timer_slack_ns_after: 50_000,
                changer_exited: true,
                ..Restoration::default()
            },
        }
    }

    #[test]
    fn a_linux_study_matches_its_snapshot() {
        let study = TimerStudy {
            cpu: 1,
            rows: vec![
                row("clock_nanosleep", "normal", &[1_060_000; 50]),
                row(
                    "clock_nanosleep",
                    "rt-high",
                    &[1_000_000, 1_010_000, 990_000],
                ),
            ],
            unavailable: ["timerfd", "poll"]
                .iter()
                .map(|api| UnavailableCell {
                    api: (*api).into(),
                    mode: "relative".into(),
                    class: Some("rt-high".into()),
                    reason: "not root".into(),
                })
                .collect(),
            findings: vec!["clock_nanosleep drifts least".into()],
            ..TimerStudy::default()
        };
        insta::assert_snapshot!(study_text(&linux_record(study)));
    }

    fn study_text(record: &RunRecord) -> String {
        study(record)
    }

    #[test]
    fn a_windows_study_shows_what_each_call_was_given_and_the_bins() {
        let text = std::fs::read_to_string(format!(
            "{}/test_data/records/wine-timers.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let record = RunRecord::from_json(&text).unwrap();
        let rendered = study(&record);
        assert!(rendered.contains("100 µs bins"), "{rendered}");
        insta::assert_snapshot!(rendered);
    }

    #[test]
    fn the_change_experiments_match_their_snapshots() {
        let study = TimerStudy {
            change_experiment: Some(experiment()),
            findings: vec!["after the changer quit, the resolution in force was 1ms".into()],
            ..TimerStudy::default()
        };
        insta::assert_snapshot!("linux_change", study_text(&linux_record(study.clone())));
        let mut windows = experiment();
        windows.steps[0].setting = "no request, in force 15.625ms".into();
        windows.steps[1].setting = "timeBeginPeriod(1), in force 1ms".into();
        let study = TimerStudy {
            change_experiment: Some(windows),
            ..study
        };
        insta::assert_snapshot!("windows_change", study_text(&windows_record(study)));
    }

    #[test]
    fn the_audits_match_their_snapshots() {
        let report = AuditReport {
            schema: rtlab_core::timer_audit::AUDIT_SCHEMA.into(),
            tool_version: "0.1.0".into(),
            cmdline: Vec::new(),
            started_at: "2026-11-23T10:00:00Z".into(),
            host: rtlab_core::Host {
                hostname: "box".into(),
                kernel: "6.18.0".into(),
                ..rtlab_core::Host::default()
            },
            items: vec![AuditItem {
                topic: "cpu_dma_latency".into(),
                setting: "held by pid 812 (tuned)".into(),
                value: "0 µs".into(),
                set_by: "pid 812 (tuned)".into(),
                effect: Effect::Helps,
                why: "CPUs stay out of deep idle states".into(),
            }],
            skipped: vec!["not root".into()],
            facts: AuditFacts::default(),
        };
        insta::assert_snapshot!("linux_audit", audit(&report));
        let windows = WindowsAudit {
            version: "6.1.7601 (Microsoft Windows 7)".into(),
            wine: Some("8.0".into()),
            timer_resolution_ns: Some(1_000_000),
            timer_resolution_finest_ns: Some(500_000),
            timer_resolution_coarsest_ns: Some(15_625_000),
            multimedia_period_range_ms: Some((1, 1_000_000)),
            power_plan: None,
            requesters: "not readable without administrator rights".into(),
        };
        insta::assert_snapshot!("windows_audit", windows_audit(&windows));
    }
}
