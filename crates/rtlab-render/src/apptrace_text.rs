//! The text report of `rtlab trace analyze`: the thread table (003's Table 3-1), wake-up chains,
//! then each kind of finding, worst first. Times in ms / µs.

use rtlab_core::apptrace_report::{Counted, DeadlineSource, ThreadRow, TraceReport};
use std::fmt::Write as _;

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn us(ns: u64) -> String {
    format!("{:.0}", ns as f64 / 1e3)
}

fn top(list: &[Counted]) -> String {
    list.first()
        .map(|first| format!("{} ({}×)", first.name, first.count))
        .unwrap_or_else(|| "-".into())
}

/// How many threads the table shows when the recording did not say which are the target's.
pub const DEFAULT_ROWS: usize = 25;

/// Renders the report; `all_threads` lists every thread, not just the target's (or the busiest).
pub fn render(report: &TraceReport, all_threads: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {}, {} events over {} s{}",
        report.source.path,
        report.source.format,
        report.n_events,
        ms(report.duration_ns / 1000),
        if report.lost_events > 0 {
            format!(", {} LOST", report.lost_events)
        } else {
            String::new()
        }
    );
    let rows = shown_rows(report, all_threads);
    write_thread_table(&mut out, report, &rows, all_threads);
    write_wakeup_chains(&mut out, report, &rows);
    write_inversions(&mut out, report);
    write_hangs(&mut out, report);
    write_starvation(&mut out, report);
    write_late_activations(&mut out, report);
    for warning in &report.warnings {
        let _ = writeln!(out, "\nwarning: {warning}");
    }
    out
}

/// True when the recording said which threads are the target's.
fn any_target(report: &TraceReport) -> bool {
    report.threads.iter().any(|row| row.target)
}

/// The rows the thread table shows: the target's threads, every thread, or the busiest.
fn shown_rows(report: &TraceReport, all_threads: bool) -> Vec<&ThreadRow> {
    let any_target = any_target(report);
    let mut rows: Vec<_> = report
        .threads
        .iter()
        .filter(|row| all_threads || !any_target || row.target)
        .collect();
    if !all_threads && !any_target {
        rows.sort_by_key(|row| std::cmp::Reverse(row.cpu_ns));
        rows.truncate(DEFAULT_ROWS);
        rows.sort_by(|a, b| a.kernel_prio.cmp(&b.kernel_prio).then(a.tid.cmp(&b.tid)));
    }
    rows
}

/// The thread table (003's Table 3-1).
fn write_thread_table(
    out: &mut String,
    report: &TraceReport,
    rows: &[&ThreadRow],
    all_threads: bool,
) {
    let any_target = any_target(report);
    let _ = writeln!(
        out,
        "\nThreads{}:",
        if !all_threads && !any_target {
            format!(" (the {DEFAULT_ROWS} busiest; --all-threads for every one)")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  {:>7}  {:<16} {:<12} {:>4} {:>6} {:>10} {:>9} {:>9} {:>9} {:>6}  woken by",
        "tid",
        "name",
        "policy",
        "prio",
        "acts",
        "period ms",
        "jitter µs",
        "cpu µs",
        "p99 µs",
        "cpu %",
    );
    for row in rows {
        let policy = row.policy.replace("SCHED_", "");
        let _ = writeln!(
            out,
            "  {:>7}  {:<16} {:<12} {:>4} {:>6} {:>10} {:>9} {:>9} {:>9} {:>6.2}  {}",
            row.tid,
            row.name,
            policy,
            row.priority,
            row.activations,
            row.period_ns.map(ms).unwrap_or_else(|| "-".into()),
            row.period_jitter_ns.map(us).unwrap_or_else(|| "-".into()),
            us(row.cpu_per_activation_ns.mean),
            us(row.cpu_per_activation_ns.p99),
            row.cpu_share * 100.0,
            top(&row.wakers),
        );
    }
}

/// Wake-up chains: follow each thread's usual waker back to an interrupt or a thread outside.
fn write_wakeup_chains(out: &mut String, report: &TraceReport, rows: &[&ThreadRow]) {
    let shown: std::collections::HashMap<i32, &str> = rows
        .iter()
        .map(|row| (row.tid, row.name.as_str()))
        .collect();
    let usual_waker: std::collections::HashMap<i32, i32> = report
        .threads
        .iter()
        .filter_map(|row| row.wakers.first().map(|waker| (row.tid, waker.tid)))
        .collect();
    let mut chains: Vec<Vec<i32>> = Vec::new();
    for row in rows {
        // Chains end at threads that wake nobody shown.
        if row.wakes.iter().any(|woken| {
            shown.contains_key(&woken.tid) && usual_waker.get(&woken.tid) == Some(&row.tid)
        }) {
            continue;
        }
        let mut chain = vec![row.tid];
        let mut current = row.tid;
        while let Some(&waker) = usual_waker.get(&current) {
            if waker <= 0 || chain.contains(&waker) || !shown.contains_key(&waker) {
                break;
            }
            chain.push(waker);
            current = waker;
        }
        if chain.len() > 1 {
            chain.reverse();
            chains.push(chain);
        }
    }
    if !chains.is_empty() {
        let _ = writeln!(out, "\nWake-up chains (each thread's usual waker):");
        for chain in chains {
            let names: Vec<&str> = chain.iter().map(|tid| shown[tid]).collect();
            let _ = writeln!(out, "  {}", names.join(" → "));
        }
    }
}

/// Priority inversions (the first ten) and priority-inheritance boosts (the first five).
fn write_inversions(out: &mut String, report: &TraceReport) {
    let _ = writeln!(out, "\nPriority inversions: {}", report.inversions.len());
    for inversion in report.inversions.iter().take(10) {
        let middle: Vec<String> = inversion
            .middle
            .iter()
            .map(|middle| {
                format!(
                    "{} ({}, prio {}) ran {} ms",
                    middle.name,
                    middle.tid,
                    middle.priority,
                    ms(middle.ns)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  at {} s: {} ({}, prio {}) blocked {} ms on futex {} held by {} ({}, prio {}), which waited {} ms for a CPU while {}",
            ms(inversion.at_ns.saturating_sub(report.first_ns) / 1000),
            inversion.high.name, inversion.high.tid, inversion.high.priority,
            ms(inversion.duration_ns),
            inversion.futex,
            inversion.low.name, inversion.low.tid, inversion.low.priority,
            ms(inversion.low_runnable_ns),
            middle.join(", ")
        );
    }
    if !report.pi_boosts.is_empty() {
        let _ = writeln!(
            out,
            "\nPriority-inheritance boosts: {}",
            report.pi_boosts.len()
        );
        for boost in report.pi_boosts.iter().take(5) {
            let _ = writeln!(
                out,
                "  {} ({}) raised from {} to {} by {} ({})",
                boost.owner.name,
                boost.owner.tid,
                boost.from_priority,
                boost.to_priority,
                boost.by.name,
                boost.by.tid
            );
        }
    }
}

/// Hangs and deadlocks.
fn write_hangs(out: &mut String, report: &TraceReport) {
    let _ = writeln!(
        out,
        "\nHangs (blocked on a futex longer than {} ms): {}",
        ms(report.hang_threshold_ns),
        report.hangs.len()
    );
    for hang in &report.hangs {
        let threads: Vec<String> = hang
            .threads
            .iter()
            .map(|thread| match thread.owner {
                Some(owner) => format!(
                    "{} ({}) waits on {} held by {}",
                    thread.name, thread.tid, thread.futex, owner
                ),
                None => format!("{} ({}) on {}", thread.name, thread.tid, thread.futex),
            })
            .collect();
        let _ = writeln!(
            out,
            "  {} since {} s{}: {}",
            if hang.cycle {
                "DEADLOCK (wait-for cycle)"
            } else {
                "hung together"
            },
            ms(hang.since_ns.saturating_sub(report.first_ns) / 1000),
            hang.ended_ns
                .map(|end| format!(
                    " until {} s",
                    ms(end.saturating_sub(report.first_ns) / 1000)
                ))
                .unwrap_or_else(|| ", still at the end".into()),
            threads.join("; ")
        );
    }
}

/// Starvation (the first ten), with who ran meanwhile.
fn write_starvation(out: &mut String, report: &TraceReport) {
    let _ = writeln!(
        out,
        "\nStarvation (runnable longer than {} ms): {}",
        ms(report.starve_threshold_ns),
        report.starvation.len()
    );
    for starved in report.starvation.iter().take(10) {
        let ran: Vec<String> = starved
            .ran
            .iter()
            .take(3)
            .map(|ran| format!("{} {} ms", ran.name, ms(ran.ns)))
            .collect();
        let _ = writeln!(
            out,
            "  {} ({}) waited {} ms for a CPU at {} s; ran meanwhile: {}",
            starved.thread.name,
            starved.thread.tid,
            ms(starved.runnable_ns),
            ms(starved.since_ns.saturating_sub(report.first_ns) / 1000),
            ran.join(", ")
        );
    }
}

/// The late activations part of the text report: how many, then the first ten, each with its
/// culprit in words and its critical path (`cpu 5.9 ms (qhog0) → run 1.6 ms`).
pub fn write_late_activations(out: &mut String, report: &TraceReport) {
    if let Some(markers) = &report.cycle_markers {
        let _ = writeln!(
            out,
            "\nDeadlines judged by {}: {} cycle starts by {} ({}){}; a thread the cycle drives is late when a cycle starts while it is still unfinished, or right after a cycle that overran ({} overruns). Cycles without an activation of a thread they drive: {}",
            crate::apptrace_words::deadline_source(report.deadline_source),
            markers.n_markers,
            markers.thread.name,
            markers.thread.tid,
            markers
                .period_ns
                .map(|period| format!(", every {} ms", ms(period)))
                .unwrap_or_default(),
            markers.overruns,
            report.missed_periods_total,
        );
        // Threads the cycle does not drive (other tasks in the trace) are still judged by their
        // own inferred period: say how many of the late ones are theirs.
        let by_own_period: u64 = report
            .threads
            .iter()
            .filter(|row| row.deadline_source == Some(DeadlineSource::Inferred))
            .map(|row| row.late_activations)
            .sum();
        let _ = writeln!(
            out,
            "\nLate activations (a cycle began while the work was unfinished): {}{}",
            report.late_activations_total - by_own_period.min(report.late_activations_total),
            if by_own_period > 0 {
                format!(
                    "; and {by_own_period} of threads the cycle does not drive, judged by their own period"
                )
            } else {
                String::new()
            }
        );
        write_late_list(out, report);
        return;
    }
    let _ = writeln!(
        out,
        "\nDeadlines judged by {} (record with --cycle-marker to judge by the program's own cycle)",
        crate::apptrace_words::deadline_source(report.deadline_source)
    );
    let _ = writeln!(
        out,
        "\nLate activations (work not done by the next period, or a period without activation): {}{}",
        report.late_activations_total,
        if report.missed_periods_total > 0 {
            format!(
                " ({} of them gaps without activation)",
                report.missed_periods_total
            )
        } else {
            String::new()
        }
    );
    write_late_list(out, report);
}

/// The first ten late activations, each with its culprit and critical path.
fn write_late_list(out: &mut String, report: &TraceReport) {
    for late in report.late_activations.iter().take(10) {
        let path: Vec<String> = late
            .critical_path
            .iter()
            .map(|step| match &step.by {
                Some(by) => format!("{} {} ms ({})", step.kind, ms(step.ns), culprit_short(by)),
                None => format!("{} {} ms", step.kind, ms(step.ns)),
            })
            .collect();
        let what = match late.kind {
            rtlab_core::apptrace_report::LateKind::Late => format!(
                "took {} ms of its {} ms period",
                ms(late.response_ns),
                ms(late.period_ns)
            ),
            rtlab_core::apptrace_report::LateKind::Missed => {
                format!("missed its {} ms period", ms(late.period_ns))
            }
        };
        let _ = writeln!(
            out,
            "  {} ({}) at {} s {what}: {}\n    {}",
            late.thread.name,
            late.thread.tid,
            ms(late.at_ns.saturating_sub(report.first_ns) / 1000),
            crate::apptrace_words::explanation(&late.explanation),
            path.join(" → ")
        );
    }
}

/// A culprit in a few words, for a critical path.
fn culprit_short(culprit: &rtlab_core::apptrace_report::Culprit) -> String {
    use rtlab_core::apptrace_report::Culprit;
    match culprit {
        Culprit::Thread { name, .. } => name.clone(),
        Culprit::Irq { name, .. } => name.clone(),
        Culprit::Softirq { name, .. } => format!("softirq {name}"),
        Culprit::Hypervisor { .. } => "hypervisor".into(),
        Culprit::Throttled { .. } => "throttled".into(),
        Culprit::Lock { holder, .. } => format!("lock of {}", holder.name),
        Culprit::Waker { waker, .. } => waker.name.clone(),
        Culprit::Migration { .. } => "migration".into(),
    }
}
