//! `rtlab trace watch`'s words: a miss's line as it happens, the verdict and the summary at the
//! end (`rtlab_core::watch_summary`, counted by rtlab-trace's `watch`); [`human`] is also
//! `reserve --auto`'s unit.

use rtlab_core::watch_summary::{WatchSummary, WatchedMiss};

/// Milliseconds below 10 s, in the units people read: "5.9 ms", "838 µs".
pub fn human(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{} µs", ns / 1_000)
    }
}

/// The line printed for one miss.
pub fn miss_line(miss: &WatchedMiss<'_>) -> String {
    let what = match miss.periods_without_activation {
        None => format!("done after {}", human(miss.response_ns)),
        Some(periods) => format!("{periods} period(s) without an activation"),
    };
    format!(
        "{:>9.3} s  {} ({}) missed: {what}, period {}, needs {}; {}",
        miss.seconds,
        miss.thread_name,
        miss.tid,
        human(miss.period_ns),
        human(miss.need_ns),
        crate::apptrace_words::explanation(miss.explanation)
    )
}

/// The one line a musician reads. `reserve_flag`: how `reserve --auto` would name the program
/// (`--comm jackd`, `--pid 42`), `None` for a command rtlab started.
pub fn verdict(summary: &WatchSummary, reserve_flag: Option<&str>) -> String {
    let seconds = summary.seconds();
    if summary.misses == 0 {
        return format!("no deadline misses in {seconds:.0} s: nothing to fix");
    }
    let mut line = format!("{} deadline misses in {seconds:.0} s", summary.misses);
    if let Some((label, tally)) = summary.ranked().first() {
        let held = if tally.least_ns / 100_000 == tally.most_ns / 100_000 {
            human(tally.most_ns)
        } else {
            format!(
                "{:.1}–{}",
                tally.least_ns as f64 / 1e6,
                human(tally.most_ns)
            )
        };
        let cause = match label.as_str() {
            "(its own work)" => format!("{} from the thread's own work", tally.misses),
            unnamed if unnamed.starts_with('(') => format!("{} {unnamed}", tally.misses),
            other if tally.reservable => {
                format!("{} while {other} held the CPU {held}", tally.misses)
            }
            other => format!("{} to {other}, {held}", tally.misses),
        };
        line.push_str(&format!("; {cause}"));
        let fixable = tally.reservable;
        if let (true, Some(how)) = (fixable, reserve_flag) {
            line.push_str(&format!("; `rtlab reserve --auto {how}` would protect it"));
        } else if !fixable {
            line.push_str("; a CPU reservation cannot protect against that");
        }
    }
    line
}

/// `trace watch --wait`'s line while no process of the name runs yet.
pub fn waiting_for(name: &str) -> String {
    format!("rtlab: waiting for a process named {name:?} …\n")
}

/// `trace watch`'s line when it starts watching `target`.
pub fn watching(target: &str) -> String {
    format!("rtlab: watching {target} for deadline misses (Ctrl-C for the summary) …\n")
}

/// The [`summary`], then PipeWire's count beside rtlab's when it was compared.
pub fn summary_with(
    watched: &WatchSummary,
    target: &str,
    reserve_flag: Option<&str>,
    pipewire: Option<&rtlab_core::pipewire_count::PipewireComparison>,
) -> String {
    let mut text = summary(watched, target, reserve_flag);
    if let Some(comparison) = pipewire {
        text.push_str(&crate::pipewire::comparison(comparison));
    }
    text
}

/// The summary printed at the end: `target` as `trace watch` names it, `reserve_flag` as for
/// [`verdict`].
pub fn summary(summary: &WatchSummary, target: &str, reserve_flag: Option<&str>) -> String {
    let seconds = summary.seconds();
    let per_minute = if seconds > 0.0 {
        summary.misses as f64 * 60.0 / seconds
    } else {
        0.0
    };
    let mut text = format!(
        "\nwatched {target} for {seconds:.1} s: {} deadline misses ({per_minute:.1} per minute)\n",
        summary.misses
    );
    for (tid, thread) in summary.threads_ranked().iter().take(5) {
        text.push_str(&format!(
            "  {} ({tid}): {} misses, period {}, needs {} per activation (p99)\n",
            thread.name,
            thread.misses,
            human(thread.period_ns),
            human(thread.need_ns)
        ));
    }
    if !summary.culprits.is_empty() {
        text.push_str("culprits, by the time they took:\n");
        for (label, tally) in summary.ranked().iter().take(10) {
            text.push_str(&format!(
                "  {label:<36} {:>6} misses  {:>10} in all, {}–{} each\n",
                tally.misses,
                human(tally.ns),
                human(tally.least_ns),
                human(tally.most_ns)
            ));
        }
    }
    text.push_str(&format!("verdict: {}\n", verdict(summary, reserve_flag)));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::watch_summary::{Blame, CountedMiss};

    fn miss(periods: u64) -> CountedMiss<'static> {
        CountedMiss {
            tid: 7,
            thread_name: "xrun_client",
            periods,
            period_ns: 2_666_667,
            need_ns: 838_000,
        }
    }

    #[test]
    fn the_verdict_names_the_culprit_and_the_fix() {
        let mut watched = WatchSummary {
            first_ns: Some(0),
            last_ns: 60_000_000_000,
            ..WatchSummary::default()
        };
        for held in [5_100_000, 5_900_000] {
            let blame = Blame {
                label: "qhog7 (SCHED_FIFO 95)".into(),
                reservable: true,
                ns: held,
            };
            watched.add(miss(1), &blame);
        }
        assert_eq!(
            verdict(&watched, Some("--comm jackd")),
            "2 deadline misses in 60 s; 2 while qhog7 (SCHED_FIFO 95) held the CPU 5.1–5.9 ms; \
             `rtlab reserve --auto --comm jackd` would protect it"
        );
        let text = summary(&watched, "jackd", Some("--comm jackd"));
        assert!(text.contains("2.0 per minute"), "{text}");
    }

    #[test]
    fn what_a_reservation_cannot_protect_against_is_said() {
        let mut watched = WatchSummary {
            first_ns: Some(0),
            last_ns: 20_000_000_000,
            ..WatchSummary::default()
        };
        let blame = Blame {
            label: "the hypervisor".into(),
            reservable: false,
            ns: 3_000_000,
        };
        watched.add(miss(3), &blame);
        let line = verdict(&watched, Some("--pid 42"));
        assert!(
            line.starts_with("3 deadline misses in 20 s; 3 to the hypervisor"),
            "{line}"
        );
        assert!(
            line.ends_with("a CPU reservation cannot protect against that"),
            "{line}"
        );
    }
}
