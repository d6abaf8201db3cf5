//! The timer study's statistics and plain-word findings, the audit's judgements and the change
//! experiment's effects: pure functions of measured numbers and read settings, so every sentence
//! `rtlab timers` prints is derived from this machine's data and tested on made-up data.

use rtlab_core::timer_audit::{AuditFacts, AuditItem, Effect};
use rtlab_core::timer_study::{ChangeExperiment, TimerRow};
use rtlab_core::{LatencyHistogram, Nanos};
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

fn ms(ns: u64) -> String {
    let text = format!("{:.3}", ns as f64 / 1e6);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} ms")
}

fn us(ns: f64) -> String {
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
    for row in &measured {
        let key = (row.api.clone(), row.mode.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }

    // 1. Whole-millisecond rounding, seen where no slack blurs it (rt-high, else slack 1 ns).
    for row in &measured {
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

    // 2. Timer slack: SCHED_OTHER with the default slack against 1 ns, same API and interval.
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

    // 3. RT threads get no slack.
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

    // 4. Drift of loops that ask for one period each time, at the shortest interval (where the
    // per-call overhead weighs most), from the median so one long delay does not decide it.
    let drift_class = if rt_rows.is_empty() {
        "normal-slack1ns"
    } else {
        "rt-high"
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
        drifting.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
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

    // 5. Catch-ups and skipped periods.
    let mut caught_up: Vec<(String, u64, Vec<String>)> = Vec::new();
    for row in measured.iter().filter(|row| row.catchups > 0) {
        let label = api_label(rows, row);
        let cell = format!("{} at {}", row.class, ms(row.requested_ns));
        match caught_up.iter_mut().find(|(name, _, _)| *name == label) {
            Some((_, count, cells)) => {
                *count += row.catchups;
                cells.push(cell);
            }
            None => caught_up.push((label, row.catchups, vec![cell])),
        }
    }
    for (label, count, cells) in caught_up {
        lines.push(format!(
            "{label} returned {count} time{} less than a quarter period after the previous return ({}): after a late return it catches up at once, as NT's multimedia timer did",
            if count == 1 { "" } else { "s" },
            cells.join(", ")
        ));
    }
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
        counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let named: Vec<String> = counted
            .iter()
            .map(|(label, skipped)| format!("{label} {skipped}"))
            .collect();
        lines.push(format!(
            "periods that passed with no return (a late one spanning two or more), which these APIs do not report: {}",
            named.join(", ")
        ));
    }
    lines
}

/// Judges every audited setting: its value, who set it, whether it helps or hurts RT work.
pub fn judge_audit(facts: &AuditFacts) -> Vec<AuditItem> {
    let mut items = Vec::new();
    let mut push =
        |topic: &str, setting: String, value: String, set_by: &str, effect, why: String| {
            items.push(AuditItem {
                topic: topic.to_owned(),
                setting,
                value,
                set_by: set_by.to_owned(),
                effect,
                why,
            })
        };
    // cpu_dma_latency
    const NO_LIMIT_US: i64 = 2_000_000_000;
    let in_force = facts.cpu_dma_latency_in_force_us;
    let held = in_force.is_some_and(|value| value < NO_LIMIT_US);
    let in_force_text = match in_force {
        Some(value) if value >= NO_LIMIT_US => "no limit".to_owned(),
        Some(value) => format!("{value} µs"),
        None => "unreadable".to_owned(),
    };
    push(
        "cpu_dma_latency",
        "value in force (the least of every holder's)".to_owned(),
        in_force_text.clone(),
        if facts.cpu_dma_latency_holders.is_empty() {
            "nobody"
        } else {
            "its holders, below"
        },
        if held { Effect::Helps } else { Effect::Neutral },
        if held {
            "CPUs stay out of idle states slower to leave than this, so every thread wakes sooner (and the machine draws more power)".to_owned()
        } else {
            "no limit: CPUs may enter their deepest idle states, whose exit latency adds to wake-ups".to_owned()
        },
    );
    for holder in &facts.cpu_dma_latency_holders {
        let value = match facts.cpu_dma_latency_holders.len() {
            1 if held => format!("{in_force_text} (the only holder, so the value in force is its own)"),
            1 => "no limit (the only holder, and no limit is in force)".to_owned(),
            _ if held => format!("unknown: the kernel shows only the least of all holders' values ({in_force_text}, held by at least one of them)"),
            _ => "no limit (no limit is in force, so no holder asked for one)".to_owned(),
        };
        push(
            "cpu_dma_latency",
            format!(
                "held by pid {} ({})",
                holder.process.pid, holder.process.comm
            ),
            value,
            &format!(
                "pid {} ({}){}",
                holder.process.pid,
                holder.process.comm,
                if holder.process.cmdline.is_empty() {
                    String::new()
                } else {
                    format!(": {}", holder.process.cmdline)
                }
            ),
            Effect::Helps,
            "a global setting any root process can hold: it changes every other thread's wake-up latency while held".to_owned(),
        );
    }
    // timer slack
    for fact in &facts.unusual_timer_slack {
        let slack = fact.timer_slack_ns;
        push(
            "timer slack",
            format!("pid {} ({})", fact.process.pid, fact.process.comm),
            format!("{}", Nanos(slack)),
            &format!(
                "pid {} itself, or the parent it inherited from",
                fact.process.pid
            ),
            if slack > 50_000 {
                Effect::Hurts
            } else {
                Effect::Helps
            },
            if slack > 50_000 {
                format!(
                    "its timers may fire up to {} late (the default is 50 µs)",
                    Nanos(slack)
                )
            } else {
                "tighter than the 50 µs default: its SCHED_OTHER sleeps end closer to the request"
                    .to_owned()
            },
        );
    }
    if facts.timer_slack_default_count > 0 {
        push(
            "timer slack",
            "every other readable process".to_owned(),
            format!("default ({} processes)", facts.timer_slack_default_count),
            "kernel default",
            Effect::Neutral,
            "SCHED_OTHER sleeps may end up to 50 µs late; RT threads get none".to_owned(),
        );
    }
    // RT throttling and the fair server
    if let Some(runtime) = facts.sched_rt_runtime_us {
        let period = facts.sched_rt_period_us.unwrap_or(1_000_000);
        let (effect, why) = if runtime < 0 {
            (Effect::Helps, "RT threads may take all CPU time: nothing throttles a real-time thread (a runaway one can hang the CPU)".to_owned())
        } else {
            (
                Effect::Hurts,
                format!(
                    "RT threads together may use {:.0} % of each {} period; past it they are stopped until the next period",
                    runtime as f64 / period.max(1) as f64 * 100.0,
                    Nanos(period as u64 * 1_000)
                ),
            )
        };
        push(
            "RT throttling",
            "sched_rt_runtime_us / sched_rt_period_us".to_owned(),
            format!("{runtime} / {period}"),
            "sysctl kernel.sched_rt_runtime_us (default 950000)",
            effect,
            why,
        );
    }
    if let Some(servers) = &facts.fair_servers {
        for server in servers {
            let share = server.runtime_ns as f64 / server.period_ns.max(1) as f64 * 100.0;
            push(
                "fair server",
                format!("CPU {}", server.cpu),
                format!("{} of {} ({share:.0} %)", Nanos(server.runtime_ns), Nanos(server.period_ns)),
                "debugfs sched/fair_server (default 50 ms of 1 s)",
                if server.runtime_ns > 0 { Effect::Hurts } else { Effect::Helps },
                "SCHED_OTHER tasks are guaranteed this share even beside busy RT threads, which may delay an RT thread by up to the runtime".to_owned(),
            );
        }
    }
    // cpufreq
    let mut governors: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (cpu, governor) in &facts.cpufreq_governors {
        governors.entry(governor.as_str()).or_default().push(*cpu);
    }
    for (governor, cpus) in governors {
        let performance = governor == "performance";
        push(
            "cpufreq",
            format!("governor of CPUs {}", compact_list(&cpus)),
            governor.to_owned(),
            "the distribution's default or a tuning daemon",
            if performance {
                Effect::Helps
            } else {
                Effect::Hurts
            },
            if performance {
                "frequency stays high: a wake-up never starts at a low clock".to_owned()
            } else {
                "frequency follows load: a thread that wakes on an idle CPU starts slowly, and changes stall briefly".to_owned()
            },
        );
    }
    if let Some(boost) = &facts.cpufreq_boost {
        push(
            "cpufreq",
            "boost".to_owned(),
            boost.clone(),
            "firmware or /sys/devices/system/cpu/cpufreq/boost",
            if boost == "1" { Effect::Hurts } else { Effect::Helps },
            "turbo frequencies depend on temperature and other cores' load, so the same work takes varying time".to_owned(),
        );
    }
    if let Some(no_turbo) = &facts.intel_no_turbo {
        push(
            "cpufreq",
            "intel_pstate no_turbo".to_owned(),
            no_turbo.clone(),
            "/sys/devices/system/cpu/intel_pstate/no_turbo",
            if no_turbo == "1" {
                Effect::Helps
            } else {
                Effect::Hurts
            },
            "turbo makes execution time vary with temperature and other cores' load".to_owned(),
        );
    }
    // cpuidle
    if let Some(driver) = &facts.cpuidle_driver {
        push(
            "cpuidle",
            "driver / governor".to_owned(),
            format!(
                "{driver} / {}",
                facts.cpuidle_governor.as_deref().unwrap_or("unknown")
            ),
            "kernel (cpuidle.governor= on the command line)",
            Effect::Neutral,
            "picks the idle state each idle CPU enters".to_owned(),
        );
    }
    for state in &facts.idle_states {
        let deep = state.exit_latency_us >= 10;
        push(
            "cpuidle",
            format!("state {}", state.name),
            format!(
                "exit latency {} µs{}",
                state.exit_latency_us,
                if state.disabled { ", disabled" } else { "" }
            ),
            if state.disabled {
                "someone wrote its disable file"
            } else {
                "the idle driver"
            },
            if state.disabled || state.exit_latency_us == 0 {
                Effect::Neutral
            } else if deep {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            format!(
                "a thread woken on a CPU in this state waits {} µs more before it runs{}",
                state.exit_latency_us,
                if state.exit_latency_us > 0 {
                    format!(
                        " (cpu_dma_latency below {} keeps CPUs out of it)",
                        state.exit_latency_us
                    )
                } else {
                    String::new()
                }
            ),
        );
    }
    // clocksource
    if let Some(clocksource) = &facts.clocksource {
        let good = matches!(
            clocksource.as_str(),
            "tsc" | "arch_sys_counter" | "kvm-clock"
        );
        push(
            "clocksource",
            format!(
                "current (also available: {})",
                facts.available_clocksources.join(", ")
            ),
            clocksource.clone(),
            "the kernel's rating, or clocksource= on the command line",
            if good { Effect::Helps } else { Effect::Hurts },
            if good {
                "read in user space through the vDSO: a clock read costs tens of ns".to_owned()
            } else {
                "not readable from the vDSO: every clock read is a system call (µs), and hpet/acpi_pm are slow to read".to_owned()
            },
        );
    }
    // tick
    if let Some(hz) = facts.config_hz {
        push(
            "tick",
            "HZ".to_owned(),
            format!("{hz} ({} per tick)", Nanos(1_000_000_000 / hz.max(1) as u64)),
            "the kernel's build configuration",
            Effect::Neutral,
            "high-resolution timers do not wait for the tick; jiffies-based timeouts (some drivers, sched ticks) have this granularity".to_owned(),
        );
    }
    if let Some(no_hz) = &facts.config_no_hz {
        let (effect, why) = match no_hz.as_str() {
            "full" => (
                Effect::Helps,
                "nohz_full CPUs can run one task with no tick at all",
            ),
            "idle" => (
                Effect::Neutral,
                "the tick stops on idle CPUs only: a busy CPU is interrupted every tick",
            ),
            _ => (
                Effect::Hurts,
                "the tick never stops: every CPU is interrupted HZ times a second",
            ),
        };
        push(
            "tick",
            "NO_HZ mode".to_owned(),
            no_hz.clone(),
            "the kernel's build configuration",
            effect,
            why.to_owned(),
        );
    }
    let boot_choice = facts
        .kernel_cmdline
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .find_map(|word| word.strip_prefix("preempt="));
    let (preemption, preemption_source) = match (facts.preemption.as_str(), boot_choice, facts.config_preemption.as_deref()) {
        (model, _, _) if !model.starts_with("dynamic") && !model.is_empty() => {
            (model.to_owned(), "the running kernel")
        }
        (_, Some(choice), _) => (choice.to_owned(), "preempt= on the kernel command line"),
        (_, None, Some(built)) => (
            built.to_owned(),
            "the kernel's build configuration (a PREEMPT_DYNAMIC kernel: debugfs sched/preempt can change it at run time)",
        ),
        (model, None, None) => (model.to_owned(), "unknown"),
    };
    let preemption = preemption.as_str();
    push(
        "preemption",
        "model".to_owned(),
        preemption.to_owned(),
        preemption_source,
        match preemption {
            "rt" | "full" => Effect::Helps,
            "none" | "voluntary" => Effect::Hurts,
            _ => Effect::Neutral,
        },
        match preemption {
            "rt" => "PREEMPT_RT: interrupts run as threads and nearly all kernel code is preemptible",
            "full" => "kernel code is preemptible outside critical sections",
            "lazy" => "preempts at once only for RT tasks; SCHED_OTHER waits for the tick",
            "none" => "a woken RT thread waits until the running kernel code returns or reschedules: milliseconds possible",
            "voluntary" => "kernel code yields only at explicit points: long kernel paths delay wake-ups",
            _ => "unknown model",
        }
        .to_owned(),
    );
    // isolation
    let cmdline = facts.kernel_cmdline.as_deref().unwrap_or("");
    for parameter in [
        "isolcpus",
        "nohz_full",
        "rcu_nocbs",
        "irqaffinity",
        "idle",
        "processor.max_cstate",
        "intel_idle.max_cstate",
    ] {
        let value = cmdline.split_whitespace().find_map(|word| {
            word.strip_prefix(parameter)
                .and_then(|rest| rest.strip_prefix('='))
        });
        if let Some(value) = value {
            push(
                "isolation",
                parameter.to_owned(),
                value.to_owned(),
                "kernel command line",
                Effect::Helps,
                match parameter {
                    "isolcpus" => "the scheduler keeps other tasks off these CPUs",
                    "nohz_full" => "no tick on these CPUs while one task runs",
                    "rcu_nocbs" => "RCU callbacks run elsewhere",
                    "irqaffinity" => "interrupts default to these CPUs only",
                    _ => "limits idle states: shorter wake-ups, more power",
                }
                .to_owned(),
            );
        }
    }
    if !cmdline.is_empty()
        && !["isolcpus=", "nohz_full=", "rcu_nocbs="]
            .iter()
            .any(|parameter| cmdline.contains(parameter))
    {
        push(
            "isolation",
            "isolcpus / nohz_full / rcu_nocbs".to_owned(),
            "none".to_owned(),
            "kernel command line",
            Effect::Neutral,
            "no CPU is set aside: RT threads share every CPU with everything else".to_owned(),
        );
    }
    // IRQs
    let online = facts.online_cpus.as_deref().unwrap_or("");
    let mut pinned = 0;
    for irq in &facts.irqs {
        if irq.affinity != online && !online.is_empty() {
            pinned += 1;
            push(
                "IRQ affinity",
                format!("IRQ {} {}", irq.irq, irq.name),
                format!(
                    "CPUs {}{}",
                    irq.affinity,
                    irq.effective_affinity
                        .as_ref()
                        .map(|effective| format!(" (effective {effective})"))
                        .unwrap_or_default()
                ),
                "a driver, irqbalance or /proc/irq/N/smp_affinity",
                Effect::Neutral,
                "its handler runs only there: keep RT threads elsewhere or expect its time in their latency".to_owned(),
            );
        }
    }
    if !facts.irqs.is_empty() {
        push(
            "IRQ affinity",
            "all other IRQs".to_owned(),
            format!(
                "{} of {} may run on every online CPU ({online})",
                facts.irqs.len() - pinned,
                facts.irqs.len()
            ),
            "kernel default",
            Effect::Neutral,
            "any CPU may be interrupted by them".to_owned(),
        );
    }
    for thread in &facts.irq_threads {
        push(
            "threaded IRQ",
            format!("pid {} {}", thread.pid, thread.comm),
            format!("{} {}", thread.policy, thread.priority),
            "the kernel (50 by default), or chrt",
            Effect::Neutral,
            "an RT thread above this priority preempts the handler; one below waits for it"
                .to_owned(),
        );
    }
    // memory
    if let Some(thp) = &facts.thp_enabled {
        let mode = selected(thp);
        push(
            "memory",
            "transparent hugepages".to_owned(),
            mode.clone(),
            "the kernel's build configuration or /sys/kernel/mm/transparent_hugepage/enabled",
            if mode == "always" { Effect::Hurts } else { Effect::Neutral },
            "'always' lets a page fault compact memory synchronously, and khugepaged merges pages under running programs".to_owned(),
        );
    }
    if let Some(defrag) = &facts.thp_defrag {
        let mode = selected(defrag);
        push(
            "memory",
            "hugepage defrag".to_owned(),
            mode.clone(),
            "/sys/kernel/mm/transparent_hugepage/defrag",
            if mode == "always" {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            "'always' stalls a faulting thread while memory is compacted".to_owned(),
        );
    }
    if let (Some(defrag), Some(sleep)) = (&facts.khugepaged_defrag, facts.khugepaged_scan_sleep_ms)
    {
        push(
            "memory",
            "khugepaged".to_owned(),
            format!("defrag {defrag}, scans every {sleep} ms"),
            "/sys/kernel/mm/transparent_hugepage/khugepaged",
            Effect::Neutral,
            "collapses pages in the background, taking the mm lock of the processes it scans"
                .to_owned(),
        );
    }
    if let Some(run) = &facts.ksm_run {
        let running = run == "1";
        push(
            "memory",
            "KSM (same-page merging)".to_owned(),
            format!(
                "{}{}",
                if running { "running" } else { "stopped" },
                facts
                    .ksm_pages_sharing
                    .map(|pages| format!(", {pages} pages sharing"))
                    .unwrap_or_default()
            ),
            "/sys/kernel/mm/ksm/run (often set by a VM host's tools)",
            if running {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            "merged pages are copied on the next write: a write fault where none was expected"
                .to_owned(),
        );
    }
    if let Some(devices) = &facts.swap_devices {
        push(
            "memory",
            "swap".to_owned(),
            if devices.is_empty() {
                "none".to_owned()
            } else {
                format!(
                    "{} device(s), swappiness {}",
                    devices.len(),
                    facts.swappiness.map(|value| value.to_string()).unwrap_or_default()
                )
            },
            "/etc/fstab or swapon",
            if devices.is_empty() { Effect::Neutral } else { Effect::Hurts },
            "a page of an RT program that is not mlock()ed can be swapped out, and its next touch waits for the disk".to_owned(),
        );
    }
    items
}

/// The bracketed choice in a sysfs selector (`always [madvise] never` → `madvise`).
fn selected(text: &str) -> String {
    text.split_whitespace()
        .find_map(|word| {
            word.strip_prefix('[')
                .and_then(|word| word.strip_suffix(']'))
        })
        .unwrap_or(text)
        .to_owned()
}

fn compact_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut index = 0;
    while index < cpus.len() {
        let start = cpus[index];
        let mut end = start;
        while index + 1 < cpus.len() && cpus[index + 1] == end + 1 {
            index += 1;
            end = cpus[index];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        index += 1;
    }
    parts.join(",")
}

/// What each setting did to the measuring process, against the first (untouched) step.
pub fn change_findings(experiment: &ChangeExperiment) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(baseline) = experiment.steps.first() else {
        return lines;
    };
    let sleep = experiment.sleep_ns as f64;
    for step in experiment.steps.iter().skip(1) {
        if step.wakeup.count == 0 || baseline.wakeup.count == 0 {
            continue;
        }
        let wake_before = baseline.wakeup.p50_ns as f64;
        let wake_after = step.wakeup.p50_ns as f64;
        let sleep_before = baseline.sleep.p50_ns as f64 - sleep;
        let sleep_after = step.sleep.p50_ns as f64 - sleep;
        let wake_change = wake_after - wake_before;
        let sleep_change = sleep_after - sleep_before;
        let significant =
            |change: f64, base: f64| change.abs() >= 5_000.0 && change.abs() >= 0.2 * base.abs();
        let fifo = match (&baseline.rt_wakeup, &step.rt_wakeup) {
            (Some(before), Some(after)) if before.count > 0 && after.count > 0 => {
                let change = after.p50_ns as f64 - before.p50_ns as f64;
                if significant(change, before.p50_ns as f64) {
                    format!(
                        "; a SCHED_FIFO thread's wake-ups came {} µs {} (p50 {} → {} µs)",
                        us(change.abs()),
                        if change < 0.0 { "sooner" } else { "later" },
                        us(before.p50_ns as f64),
                        us(after.p50_ns as f64)
                    )
                } else {
                    format!(
                        "; a SCHED_FIFO thread's wake-ups did not change (p50 {} → {} µs)",
                        us(before.p50_ns as f64),
                        us(after.p50_ns as f64)
                    )
                }
            }
            _ => String::new(),
        };
        if significant(wake_change, wake_before) || significant(sleep_change, sleep_before) {
            lines.push(format!(
                "while another process set {}, this process's wake-ups came {} µs {} (p50 {} → {} µs) and its {} sleeps ran {} µs long instead of {} µs{fifo}",
                step.setting,
                us(wake_change.abs()),
                if wake_change < 0.0 { "sooner" } else { "later" },
                us(wake_before),
                us(wake_after),
                ms(experiment.sleep_ns),
                us(sleep_after),
                us(sleep_before)
            ));
        } else {
            lines.push(format!(
                "{} changed nothing measurable in the SCHED_OTHER thread (wake-up p50 {} → {} µs){fifo}",
                step.setting,
                us(wake_before),
                us(wake_after)
            ));
        }
    }
    lines
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

    #[test]
    fn a_lone_holder_is_credited_with_the_value_in_force_and_several_are_not() {
        use rtlab_core::timer_audit::{LatencyHolder, ProcessName};
        let holder = |pid| LatencyHolder {
            process: ProcessName {
                pid,
                comm: "sleep".into(),
                cmdline: "sleep 60".into(),
            },
            descriptors: 1,
        };
        let mut facts = AuditFacts {
            cpu_dma_latency_in_force_us: Some(42),
            cpu_dma_latency_holders: vec![holder(7)],
            preemption: "none".into(),
            ..AuditFacts::default()
        };
        let items = judge_audit(&facts);
        let item = items
            .iter()
            .find(|item| item.setting == "held by pid 7 (sleep)")
            .unwrap();
        assert!(item.value.starts_with("42 µs"), "{item:?}");
        facts.cpu_dma_latency_holders.push(holder(8));
        let items = judge_audit(&facts);
        let item = items
            .iter()
            .find(|item| item.setting == "held by pid 8 (sleep)")
            .unwrap();
        assert!(item.value.starts_with("unknown"), "{item:?}");
        assert!(items
            .iter()
            .any(|item| item.topic == "preemption" && item.effect == Effect::Hurts));
    }

    #[test]
    fn selectors_and_cpu_lists_read_plainly() {
        assert_eq!(selected("always [madvise] never"), "madvise");
        assert_eq!(compact_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn the_change_experiment_names_what_moved() {
        use rtlab_core::timer_study::{ChangeStep, DelayStats};
        let stats = |p50| DelayStats {
            count: 100,
            p50_ns: p50,
            ..DelayStats::default()
        };
        let experiment = ChangeExperiment {
            sleep_ns: 1_000_000,
            steps: vec![
                ChangeStep {
                    setting: "nothing changed".into(),
                    wakeup: stats(60_000),
                    sleep: stats(1_060_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "cpu_dma_latency 0 µs".into(),
                    wakeup: stats(20_000),
                    sleep: stats(1_058_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "cpu_dma_latency 100 µs".into(),
                    wakeup: stats(61_000),
                    sleep: stats(1_060_000),
                    ..ChangeStep::default()
                },
            ],
            ..ChangeExperiment::default()
        };
        let found = change_findings(&experiment);
        assert!(found[0].starts_with("while another process set cpu_dma_latency 0 µs, this process's wake-ups came 40 µs sooner"), "{found:?}");
        assert!(found[1].contains("changed nothing measurable"), "{found:?}");
    }
}
