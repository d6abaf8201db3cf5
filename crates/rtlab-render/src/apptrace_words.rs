//! `rtlab trace`'s findings in words: a culprit (`qhog0 (SCHED_FIFO 95)`), a late activation's
//! explanation (`waited 5.9 ms for CPU 0: qhog0 (SCHED_FIFO 95) ran`) and what deadlines were
//! judged by, and a timeline span's state. The analysis (rtlab-trace's `analyze::findings`) chooses which
//! [`Explanation`] applies and with which numbers; these are its words, shared by the text
//! report, the JSON (`apptrace_json`), the misses timeline and `trace watch`'s lines.

use rtlab_core::apptrace_report::{Culprit, DeadlineSource, Explanation, LateActivation};
use rtlab_core::apptrace_timeline::SpanState;

/// Milliseconds with up to 3 decimals, trailing zeros dropped (`5.9`, `11`).
fn ms(ns: u64) -> String {
    let text = format!("{:.3}", ns as f64 / 1e6);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// A culprit in words: `qhog0 (SCHED_FIFO 95)`, `the hypervisor (…)`, `interrupt irq 11`, …
pub fn culprit(culprit: &Culprit) -> String {
    match culprit {
        Culprit::Thread {
            name,
            policy,
            priority,
            ..
        } => format!("{name} ({policy} {priority})"),
        Culprit::Irq { name, .. } => format!("interrupt {name}"),
        Culprit::Softirq { name, .. } => format!("softirq {name}"),
        Culprit::Hypervisor { .. } => "the hypervisor (the virtual CPU was not running)".into(),
        Culprit::Throttled { .. } => "throttling (its class's CPU budget was used up)".into(),
        Culprit::Lock { holder, .. } => {
            format!("a lock held by {} ({})", holder.name, holder.tid)
        }
        Culprit::Waker { waker, .. } => format!("{} ({}) to wake it", waker.name, waker.tid),
        Culprit::Migration { .. } => "a migration to another CPU".into(),
    }
}

/// The culprit of a miss in words ("(its own work)" when the analysis names none): the label
/// the misses timeline colours by and `trace watch` counts by.
pub fn culprit_label(late: &LateActivation) -> String {
    late.culprit
        .as_ref()
        .map_or_else(|| "(its own work)".to_owned(), culprit)
}

/// What the CPU wait was, after "waited … for CPU n": who had it.
fn cpu_taken_by(by: &Culprit) -> String {
    match by {
        Culprit::Hypervisor { .. } => {
            "nothing of this machine ran, the hypervisor had the virtual CPU".to_owned()
        }
        Culprit::Throttled { .. } => "throttled (its class's CPU budget was used up)".to_owned(),
        other => format!("{} ran", culprit(other)),
    }
}

/// A late activation's explanation in words (the JSON's `explanation`).
pub fn explanation(explanation: &Explanation) -> String {
    match explanation {
        Explanation::OwnWork {
            own_ns,
            response_ns,
        } => format!(
            "its own work: {} ms of CPU in a {} ms response (nothing else in the trace)",
            ms(*own_ns),
            ms(*response_ns)
        ),
        Explanation::OwnWorkThen {
            own_ns,
            response_ns,
            then,
            then_ns,
        } => format!(
            "its own work: {} ms of CPU in a {} ms response; then {} ({} ms)",
            ms(*own_ns),
            ms(*response_ns),
            culprit(then),
            ms(*then_ns)
        ),
        Explanation::WaitedForCpu { ns, cpu, by } => format!(
            "waited {} ms for CPU{}: {}",
            ms(*ns),
            cpu.map(|cpu| format!(" {cpu}")).unwrap_or_default(),
            cpu_taken_by(by)
        ),
        Explanation::Interrupts { ns, by } => format!(
            "interrupts took {} ms while it ran: {}",
            ms(*ns),
            culprit(by)
        ),
        Explanation::HypervisorTook {
            on_cpu_ns,
            hypervisor_ns,
        } => format!(
            "was on a CPU {} ms but got {} ms of it: the hypervisor took {} ms",
            ms(*on_cpu_ns),
            ms(on_cpu_ns.saturating_sub(*hypervisor_ns)),
            ms(*hypervisor_ns)
        ),
        Explanation::BlockedOnFutex { ns, by } => {
            format!("blocked {} ms on {}", ms(*ns), culprit(by))
        }
        Explanation::BlockedUntil { ns, step, by } => {
            format!("blocked {} ms ({step}) until {}", ms(*ns), culprit(by))
        }
        Explanation::Missed {
            gap_ns,
            periods,
            by,
        } => format!(
            "no activation for {} ms ({periods} period{}){}",
            ms(*gap_ns),
            if *periods == 1 { "" } else { "s" },
            by.as_ref()
                .map(|by| format!(": {}", cpu_taken_by(by)))
                .unwrap_or_default()
        ),
    }
}

/// What a thread did in a timeline's span, as the SVG's legend and the Perfetto slices name it.
pub fn span_state(state: SpanState) -> &'static str {
    match state {
        SpanState::Running => "running",
        SpanState::Runnable => "runnable",
        SpanState::BlockedFutex => "blocked (futex)",
        SpanState::BlockedIo => "blocked (I/O)",
        SpanState::BlockedSleep => "sleeping",
    }
}

/// What deadlines were judged by, for the text report.
pub fn deadline_source(source: DeadlineSource) -> &'static str {
    match source {
        DeadlineSource::CycleMarker => "the program's own cycle starts (cycle markers)",
        DeadlineSource::Inferred => "periods inferred from the scheduler's events",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hog() -> Culprit {
        Culprit::Thread {
            tid: 4242,
            name: "qhog0".into(),
            policy: "SCHED_FIFO".into(),
            priority: 95,
            ns: 5_897_000,
        }
    }

    #[test]
    fn a_wait_for_the_cpu_names_who_ran() {
        let words = explanation(&Explanation::WaitedForCpu {
            ns: 5_897_000,
            cpu: Some(0),
            by: hog(),
        });
        assert_eq!(
            words,
            "waited 5.897 ms for CPU 0: qhog0 (SCHED_FIFO 95) ran"
        );
        let words = explanation(&Explanation::WaitedForCpu {
            ns: 2_000_000,
            cpu: None,
            by: Culprit::Hypervisor { ns: 2_000_000 },
        });
        assert_eq!(
            words,
            "waited 2 ms for CPU: nothing of this machine ran, the hypervisor had the virtual CPU"
        );
    }

    #[test]
    fn a_gap_says_its_periods_and_who_had_the_cpu() {
        let words = explanation(&Explanation::Missed {
            gap_ns: 8_000_000,
            periods: 3,
            by: Some(hog()),
        });
        assert_eq!(
            words,
            "no activation for 8 ms (3 periods): qhog0 (SCHED_FIFO 95) ran"
        );
        let words = explanation(&Explanation::Missed {
            gap_ns: 2_500_000,
            periods: 1,
            by: None,
        });
        assert_eq!(words, "no activation for 2.5 ms (1 period)");
    }

    #[test]
    fn the_hypervisors_share_of_a_run_is_subtracted() {
        let words = explanation(&Explanation::HypervisorTook {
            on_cpu_ns: 12_000_000,
            hypervisor_ns: 11_000_000,
        });
        assert_eq!(
            words,
            "was on a CPU 12 ms but got 1 ms of it: the hypervisor took 11 ms"
        );
    }
}
