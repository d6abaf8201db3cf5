//! The analyses on synthetic event streams whose answers are known.

use super::report::*;
use super::*;
use crate::model::{Comm, Event, EventKind};

const MS: u64 = 1_000_000;
const HIGH: i32 = 10;
const LOW: i32 = 11;
const MIDDLE: i32 = 12;

struct Script {
    events: Vec<Event>,
}

impl Script {
    fn new(names: &[(i32, &str)]) -> Script {
        let events = names
            .iter()
            .map(|(tid, name)| Event {
                timestamp_ns: 0,
                cpu: 0,
                kind: EventKind::Name {
                    tid: *tid,
                    comm: Comm::new(name),
                },
            })
            .collect();
        Script { events }
    }

    fn at(&mut self, time_ms: f64, cpu: u32, kind: EventKind) -> &mut Script {
        self.events.push(Event {
            timestamp_ns: (time_ms * MS as f64) as u64,
            cpu,
            kind,
        });
        self
    }

    fn switch(
        &mut self,
        time_ms: f64,
        cpu: u32,
        prev: (i32, i32, u32),
        next: (i32, i32),
    ) -> &mut Script {
        self.at(
            time_ms,
            cpu,
            EventKind::Switch {
                prev_tid: prev.0,
                prev_prio: prev.1,
                prev_state: prev.2,
                next_tid: next.0,
                next_prio: next.1,
            },
        )
    }

    fn wake(&mut self, time_ms: f64, cpu: u32, tid: i32, prio: i32, waker: i32) -> &mut Script {
        self.at(
            time_ms,
            cpu,
            EventKind::Waking {
                tid,
                prio,
                waker,
                target_cpu: cpu as i32,
            },
        )
    }

    fn analyse(&self) -> TraceReport {
        self.analyse_with_timeline().0
    }

    fn analyse_with_timeline(&self) -> (TraceReport, Vec<timeline::Span>) {
        self.analyse_declaring(None)
    }

    fn analyse_declaring(&self, recorded: Option<&[String]>) -> (TraceReport, Vec<timeline::Span>) {
        let mut analyzer = Analyzer::new(AnalysisConfig {
            timeline_spans: 1000,
            ..AnalysisConfig::default()
        });
        if let Some(events) = recorded {
            analyzer.declare_recorded(events);
        }
        for event in &self.events {
            analyzer.push(event);
        }
        let header = rtlab_core::header::OutputHeader {
            schema: SCHEMA.into(),
            tool_version: "test".into(),
            cmdline: vec![],
            started_at: "2026-01-01T00:00:00Z".into(),
            host: None,
        };
        let source = SourceInfo {
            path: "synthetic".into(),
            format: "test".into(),
            clock: None,
        };
        let (report, timeline) = analyzer.finish(header, source, 0);
        (
            report,
            timeline.map(|timeline| timeline.spans).unwrap_or_default(),
        )
    }
}

/// Kernel prios: RT 30, 10, 20.
const P_HIGH: i32 = 69;
const P_LOW: i32 = 89;
const P_MIDDLE: i32 = 79;
const SLEEPING: u32 = 1;
const PREEMPTED: u32 = 0;

#[test]
fn an_inversion_names_its_three_threads() {
    let script = inversion_script();
    let report = script.analyse();
    assert_eq!(report.inversions.len(), 1, "{:#?}", report.inversions);
    let inversion = &report.inversions[0];
    assert_eq!((inversion.high.tid, inversion.high.priority), (HIGH, 30));
    assert_eq!((inversion.low.tid, inversion.low.priority), (LOW, 10));
    assert_eq!(inversion.middle.len(), 1);
    assert_eq!(
        (
            inversion.middle[0].tid,
            inversion.middle[0].priority,
            inversion.middle[0].ns
        ),
        (MIDDLE, 20, 20 * MS)
    );
    assert_eq!(inversion.at_ns, 1_200_000);
    assert_eq!(inversion.duration_ns, 21_800_000);
    assert_eq!(inversion.futex, "0xabc0");
    let high = report.threads.iter().find(|row| row.tid == HIGH).unwrap();
    assert_eq!(high.blocked_ns.futex, 21_800_000);
    assert!(high
        .wakers
        .iter()
        .any(|waker| waker.tid == LOW && waker.count == 1));
}

fn inversion_script() -> Script {
    let mut script = Script::new(&[(HIGH, "high"), (LOW, "low"), (MIDDLE, "middle")]);
    script
        .switch(0.0, 1, (0, 120, 0), (LOW, P_LOW))
        .wake(1.0, 1, HIGH, P_HIGH, 0)
        .switch(1.0, 1, (LOW, P_LOW, PREEMPTED), (HIGH, P_HIGH))
        .at(
            1.1,
            1,
            EventKind::FutexEnter {
                tid: HIGH,
                uaddr: 0xabc0,
                op: 0x80,
                value: 2,
            },
        )
        .switch(1.2, 1, (HIGH, P_HIGH, SLEEPING), (LOW, P_LOW))
        .wake(2.0, 1, MIDDLE, P_MIDDLE, 0)
        .switch(2.0, 1, (LOW, P_LOW, PREEMPTED), (MIDDLE, P_MIDDLE))
        .switch(22.0, 1, (MIDDLE, P_MIDDLE, SLEEPING), (LOW, P_LOW))
        .wake(23.0, 1, HIGH, P_HIGH, LOW)
        .switch(23.0, 1, (LOW, P_LOW, PREEMPTED), (HIGH, P_HIGH))
        .at(
            23.1,
            1,
            EventKind::FutexExit {
                tid: HIGH,
                result: 0,
            },
        )
        .switch(24.0, 1, (HIGH, P_HIGH, SLEEPING), (LOW, P_LOW))
        .switch(30.0, 1, (LOW, P_LOW, SLEEPING), (0, 120));
    script
}

#[test]
fn the_text_report_svg_and_perfetto_json_of_an_inversion() {
    let (report, spans) = inversion_script().analyse_with_timeline();
    insta::assert_snapshot!(
        "inversion_text",
        rtlab_render::apptrace_text::render(&report, true)
    );
    insta::assert_snapshot!(
        "inversion_svg",
        rtlab_render::apptrace_svg::render(&report, &spans)
    );
    let perfetto: serde_json::Value =
        serde_json::from_str(&rtlab_render::apptrace_perfetto::render(&report, &spans)).unwrap();
    insta::assert_json_snapshot!("inversion_perfetto", perfetto);
}

#[test]
fn a_middle_thread_on_another_cpu_is_no_inversion() {
    let mut script = Script::new(&[(HIGH, "high"), (LOW, "low"), (MIDDLE, "middle")]);
    script
        .switch(0.0, 1, (0, 120, 0), (LOW, P_LOW))
        .wake(1.0, 1, HIGH, P_HIGH, 0)
        .switch(1.0, 1, (LOW, P_LOW, PREEMPTED), (HIGH, P_HIGH))
        .at(
            1.1,
            1,
            EventKind::FutexEnter {
                tid: HIGH,
                uaddr: 0xabc0,
                op: 0,
                value: 2,
            },
        )
        .switch(1.2, 1, (HIGH, P_HIGH, SLEEPING), (LOW, P_LOW))
        .wake(2.0, 0, MIDDLE, P_MIDDLE, 0)
        .switch(2.0, 0, (0, 120, 0), (MIDDLE, P_MIDDLE))
        .switch(22.0, 0, (MIDDLE, P_MIDDLE, SLEEPING), (0, 120))
        .wake(23.0, 1, HIGH, P_HIGH, LOW)
        .switch(23.0, 1, (LOW, P_LOW, PREEMPTED), (HIGH, P_HIGH));
    assert!(script.analyse().inversions.is_empty());
}

#[test]
fn owners_read_while_recording_close_a_deadlock_cycle() {
    let (a, b, idle) = (20, 21, 22);
    let mut script = Script::new(&[(a, "dead-a"), (b, "dead-b"), (idle, "other")]);
    script
        .switch(0.0, 0, (0, 120, 0), (a, 120))
        .at(
            10.0,
            0,
            EventKind::FutexEnter {
                tid: a,
                uaddr: 0x100,
                op: 0x89,
                value: 2,
            },
        )
        .switch(10.0, 0, (a, 120, SLEEPING), (b, 120))
        .at(
            11.0,
            0,
            EventKind::FutexEnter {
                tid: b,
                uaddr: 0x200,
                op: 0x89,
                value: 2,
            },
        )
        .switch(11.0, 0, (b, 120, SLEEPING), (0, 120))
        .at(
            300.0,
            0,
            EventKind::Owner {
                waiter: a,
                uaddr: 0x100,
                owner: b,
            },
        )
        .at(
            300.0,
            0,
            EventKind::Owner {
                waiter: b,
                uaddr: 0x200,
                owner: a,
            },
        )
        .switch(2000.0, 0, (0, 120, 0), (idle, 120));
    let report = script.analyse();
    assert_eq!(report.hangs.len(), 1, "{:#?}", report.hangs);
    let hang = &report.hangs[0];
    assert!(hang.cycle);
    assert_eq!(hang.ended_ns, None);
    assert_eq!(hang.since_ns, 11 * MS);
    let owners: Vec<(i32, Option<i32>)> = hang
        .threads
        .iter()
        .map(|thread| (thread.tid, thread.owner))
        .collect();
    assert_eq!(owners, vec![(a, Some(b)), (b, Some(a))]);
}

#[test]
fn without_owners_the_hung_pair_is_reported_together_but_not_as_a_cycle() {
    let (a, b) = (20, 21);
    let mut script = Script::new(&[(a, "dead-a"), (b, "dead-b")]);
    script
        .switch(0.0, 0, (0, 120, 0), (a, 120))
        .at(
            10.0,
            0,
            EventKind::FutexEnter {
                tid: a,
                uaddr: 0x100,
                op: 0,
                value: 2,
            },
        )
        .switch(10.0, 0, (a, 120, SLEEPING), (b, 120))
        .at(
            11.0,
            0,
            EventKind::FutexEnter {
                tid: b,
                uaddr: 0x200,
                op: 0,
                value: 2,
            },
        )
        .switch(11.0, 0, (b, 120, SLEEPING), (0, 120))
        .at(
            1500.0,
            0,
            EventKind::Fork {
                parent: 1,
                child: a,
            },
        )
        .at(
            1500.0,
            0,
            EventKind::Fork {
                parent: 1,
                child: b,
            },
        )
        .switch(2000.0, 0, (0, 120, 0), (0, 120));
    let report = script.analyse();
    assert_eq!(report.hangs.len(), 1, "{:#?}", report.hangs);
    assert!(!report.hangs[0].cycle);
    assert_eq!(report.hangs[0].threads.len(), 2);
}

#[test]
fn starvation_names_who_held_the_cpu() {
    let (starved, hog) = (30, 31);
    let mut script = Script::new(&[(starved, "starved"), (hog, "hog")]);
    script
        .switch(0.0, 1, (0, 120, 0), (starved, 120))
        .wake(5.0, 1, hog, 94, 0)
        .switch(5.0, 1, (starved, 120, PREEMPTED), (hog, 94))
        .switch(305.0, 1, (hog, 94, SLEEPING), (starved, 120))
        .switch(306.0, 1, (starved, 120, SLEEPING), (0, 120));
    let report = script.analyse();
    assert_eq!(report.starvation.len(), 1);
    let entry = &report.starvation[0];
    assert_eq!((entry.thread.tid, entry.runnable_ns), (starved, 300 * MS));
    assert_eq!((entry.ran[0].tid, entry.ran[0].ns), (hog, 300 * MS));
}

#[test]
fn a_thread_whose_switch_out_is_missing_is_not_held_running_or_starving() {
    // A filtered recording: `other` ran on CPU 1 at 1 ms, but its switch-out was not recorded.
    let (other, target) = (50, 51);
    let mut script = Script::new(&[(other, "other"), (target, "target")]);
    script
        .wake(1.0, 1, other, 120, 0)
        .switch(1.0, 1, (0, 120, 0), (other, 120))
        .switch(40.0, 1, (0, 120, 0), (target, 120))
        .switch(41.0, 1, (target, 120, SLEEPING), (0, 120))
        // Woken again, by the target: its own events, to be read as they are.
        .wake(200.0, 0, other, 120, target)
        .switch(200.0, 0, (0, 120, 0), (other, 120))
        .switch(201.0, 0, (other, 120, SLEEPING), (0, 120));
    let report = script.analyse();
    assert!(report.starvation.is_empty(), "{:#?}", report.starvation);
    let row = report.threads.iter().find(|row| row.tid == other).unwrap();
    // It is not taken as still running at 200 ms: that wake-up, by the target, is seen; the
    // activation whose end is unknown is not completed.
    let wakers: Vec<i32> = row.wakers.iter().map(|waker| waker.tid).collect();
    assert_eq!(wakers, [0, target], "{row:?}");
    assert_eq!((row.cpu_ns, row.activations), (MS, 1), "{row:?}");
}

#[test]
fn switches_missing_from_a_trace_are_warned_of_and_not_read_as_starvation() {
    // The switches out of idle on CPU 1 are missing (as tracefs drops them on some kernels):
    // `worker`, woken every 50 ms, is seen woken but never switched in; `ghost`'s switches are
    // all missing, only its wake-ups are seen.
    // `late`, woken at 0 ms, is seen switched in only at 480 ms; `other` is switched in at
    // 100 ms and its switch-out is missing: `late` may have run after it, unseen.
    let (worker, ghost, late, other) = (60, 61, 62, 63);
    let mut script = Script::new(&[
        (worker, "worker"),
        (ghost, "ghost"),
        (late, "late"),
        (other, "other"),
    ]);
    script
        .switch(0.0, 1, (0, 120, 0), (0, 120))
        .wake(0.0, 1, late, 120, 0)
        .switch(100.0, 1, (0, 120, 0), (other, 120));
    for period in 0..10u32 {
        let start = f64::from(period) * 50.0;
        script.wake(start, 1, ghost, 120, 0);
        script.wake(start, 1, worker, 120, 0).switch(
            start + 1.0,
            1,
            (worker, 120, SLEEPING),
            (0, 120),
        );
    }
    script.switch(480.0, 1, (0, 120, 0), (late, 120)).switch(
        481.0,
        1,
        (late, 120, SLEEPING),
        (0, 120),
    );
    let report = script.analyse();
    assert!(report.starvation.is_empty(), "{:#?}", report.starvation);
    let gaps: Vec<&String> = report
        .warnings
        .iter()
        .filter(|warning| warning.contains("misses switches"))
        .collect();
    assert_eq!(gaps.len(), 1, "{:?}", report.warnings);
    assert!(
        gaps[0].starts_with("on CPU 1 the trace misses switches: 10 switches")
            && gaps[0].contains("9 of them from idle"),
        "{}",
        gaps[0]
    );
    // A recording that keeps only the switches around its target has such gaps by design.
    let mut analyzer = Analyzer::new(AnalysisConfig::default());
    analyzer.declare_switches_filtered(true);
    for event in &script.events {
        analyzer.push(event);
    }
    let (filtered, _) = analyzer.finish(report.header.clone(), report.source.clone(), 0);
    assert!(
        !filtered
            .warnings
            .iter()
            .any(|warning| warning.contains("misses switches")),
        "{:?}",
        filtered.warnings
    );
    // There a thread's wait is trusted whole (the BPF recorder records the switch-in of every
    // thread it saw woken): `late` waited 480 ms.
    let starved: Vec<(i32, u64)> = filtered
        .starvation
        .iter()
        .map(|entry| (entry.thread.tid, entry.runnable_ns))
        .collect();
    assert_eq!(starved, [(late, 480 * MS)]);
}

#[test]
fn periods_wakers_and_late_activations_of_a_two_stage_pipeline() {
    let (source, sink) = (40, 41);
    let mut script = Script::new(&[(source, "src"), (sink, "sink")]);
    for period in 0..20u32 {
        let start = f64::from(period) * 10.0;
        // The sink's work takes 3 ms, except in period 7, where it waits 12 ms for the CPU.
        let wait = if period == 7 { 12.0 } else { 0.0 };
        script
            .wake(start, 0, source, 79, 0)
            .switch(start, 0, (0, 120, 0), (source, 79))
            .wake(start + 1.0, 0, sink, 80, source)
            .switch(start + 1.0, 0, (source, 79, SLEEPING), (0, 120));
        if wait > 0.0 {
            script.switch(start + 1.0, 0, (0, 120, 0), (99, 50)).switch(
                start + 1.0 + wait,
                0,
                (99, 50, SLEEPING),
                (0, 120),
            );
        }
        script
            .switch(start + 1.0 + wait, 0, (0, 120, 0), (sink, 80))
            .switch(start + 4.0 + wait, 0, (sink, 80, SLEEPING), (0, 120));
    }
    let report = script.analyse();
    let row = |tid: i32| report.threads.iter().find(|row| row.tid == tid).unwrap();
    assert_eq!(row(source).period_ns, Some(10 * MS));
    assert_eq!(
        row(sink)
            .period_ns
            .map(|period| period.abs_diff(10 * MS) < MS / 2),
        Some(true)
    );
    assert_eq!(row(sink).wakers[0].tid, source);
    assert_eq!(row(source).wakes[0].tid, sink);
    assert_eq!(row(sink).cpu_per_activation_ns.max, 3 * MS);
    assert_eq!(report.late_activations_total, 1);
    let late = &report.late_activations[0];
    assert_eq!(late.thread.tid, sink);
    assert_eq!(late.critical_path[0].kind, "cpu");
    match late.critical_path[0].by.as_ref() {
        Some(super::report::Culprit::Thread { tid, .. }) => assert_eq!(*tid, 99),
        other => panic!("the CPU was held by thread 99, not {other:?}"),
    }
    assert!(
        matches!(
            late.explanation,
            Explanation::WaitedForCpu {
                by: Culprit::Thread { tid: 99, .. },
                ..
            }
        ),
        "{:?}",
        late.explanation
    );
    assert_eq!(late.kind, super::report::LateKind::Late);
}

#[test]
fn no_futex_events_warns_only_when_futex_calls_were_not_recorded() {
    let mut script = Script::new(&[(HIGH, "sleeper")]);
    script
        .wake(1.0, 0, HIGH, P_HIGH, 0)
        .switch(1.0, 0, (0, 120, PREEMPTED), (HIGH, P_HIGH))
        .switch(2.0, 0, (HIGH, P_HIGH, SLEEPING), (0, 120));
    let futex_warning = |report: &TraceReport| {
        report
            .warnings
            .iter()
            .any(|warning| warning.contains("no futex syscall events"))
    };
    // A trace.dat, or a file that does not list its events: nothing says futex calls were seen.
    assert!(futex_warning(&script.analyse()));
    // Recorded but never made (a target that only sleeps): no gap, no warning.
    let recorded = [
        "sched:sched_switch".to_owned(),
        "syscalls:sys_enter_futex".to_owned(),
    ];
    assert!(!futex_warning(&script.analyse_declaring(Some(&recorded)).0));
    // Recorded without them: the warning stays.
    let recorded = ["sched:sched_switch".to_owned()];
    assert!(futex_warning(&script.analyse_declaring(Some(&recorded)).0));
}

/// A periodic thread with many more activations than are kept: the period, activation count,
/// CPU statistics and a late activation far beyond the kept ones come from the bounded
/// summaries, and the thread holds no more than `ACTIVATIONS_KEPT` activations.
#[test]
fn a_long_periodic_thread_is_summarised_in_bounded_memory() {
    let n = 3 * super::streaming::ACTIVATIONS_KEPT;
    let late_index = 2 * super::streaming::ACTIVATIONS_KEPT + 17;
    let mut script = Script::new(&[(HIGH, "periodic")]);
    for index in 0..n {
        // Every 10 ms (±0.1 ms), 1 ms of CPU; one activation runs 15 ms.
        let start = 10.0 * index as f64 + 0.1 * (index % 3) as f64;
        let run = if index == late_index { 15.0 } else { 1.0 };
        script
            .wake(start, 0, HIGH, P_HIGH, 0)
            .switch(start + 0.01, 0, (0, 120, PREEMPTED), (HIGH, P_HIGH))
            .switch(start + 0.01 + run, 0, (HIGH, P_HIGH, SLEEPING), (0, 120));
    }
    let mut analyzer = Analyzer::new(AnalysisConfig::default());
    for event in &script.events {
        analyzer.push(event);
    }
    assert_eq!(
        analyzer.threads[&HIGH].activations.len(),
        super::streaming::ACTIVATIONS_KEPT
    );
    let report = script.analyse();
    let row = report.threads.iter().find(|row| row.tid == HIGH).unwrap();
    assert_eq!(row.activations, n as u64);
    let period = row.period_ns.unwrap();
    assert!(period.abs_diff(10 * MS) < 10 * MS / 100, "{period}");
    assert!(row.cpu_per_activation_ns.max >= 15 * MS);
    assert!(row.cpu_per_activation_ns.mean.abs_diff(MS) < MS / 10);
    let late: Vec<_> = report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == HIGH)
        .collect();
    assert_eq!(report.late_activations_total, 1, "{late:?}");
    assert_eq!(
        late[0].at_ns,
        (10.0 * late_index as f64 * MS as f64 + 0.1 * (late_index % 3) as f64 * MS as f64) as u64
    );
}

/// A FIFO 70 source woken by a timer every 10 ms wakes a FIFO 65 sink; in the ninth period a
/// FIFO 95 hog holds CPU 0 from 79 to 92 ms, so the source runs 12 ms late and the sink has no
/// activation in that period: a missed period, whose culprit is the hog (read from the source's
/// own wait), and the sink's activation after the gap started after its deadline.
#[test]
fn a_skipped_period_is_missed_and_names_what_held_back_its_waker() {
    let (source, sink, hog) = (50, 51, 99);
    let mut script = Script::new(&[(source, "driver"), (sink, "client"), (hog, "qhog0")]);
    script.at(
        0.0,
        0,
        EventKind::ThreadInfo {
            tid: sink,
            tgid: sink,
            policy: crate::model::Policy::Fifo,
            priority: 65,
        },
    );
    script.at(
        0.0,
        0,
        EventKind::OtherPolicy {
            tid: hog,
            policy: crate::model::Policy::Fifo,
            priority: 95,
        },
    );
    for period in 0..20u32 {
        let start = f64::from(period) * 10.0;
        if period == 8 {
            script
                .wake(start - 1.0, 0, hog, 4, 0)
                .switch(start - 1.0, 0, (0, 120, 0), (hog, 4))
                .wake(start, 0, source, 29, 0)
                .switch(start + 12.0, 0, (hog, 4, SLEEPING), (source, 29))
                .wake(start + 12.5, 0, sink, 34, source)
                .switch(start + 12.5, 0, (source, 29, SLEEPING), (sink, 34))
                .switch(start + 13.5, 0, (sink, 34, SLEEPING), (0, 120));
            continue;
        }
        script
            .wake(start, 0, source, 29, 0)
            .switch(start, 0, (0, 120, 0), (source, 29))
            .wake(start + 0.5, 0, sink, 34, source)
            .switch(start + 0.5, 0, (source, 29, SLEEPING), (sink, 34))
            .switch(start + 1.5, 0, (sink, 34, SLEEPING), (0, 120));
    }
    let report = script.analyse();
    let row = report.threads.iter().find(|row| row.tid == sink).unwrap();
    assert_eq!(
        row.period_ns
            .map(|period| period.abs_diff(10 * MS) < MS / 2),
        Some(true)
    );
    assert_eq!(row.missed_periods, 1, "{:#?}", report.late_activations);
    let missed = report
        .late_activations
        .iter()
        .find(|late| late.thread.tid == sink && late.kind == LateKind::Missed)
        .expect("the missed period is listed");
    match &missed.culprit {
        Some(Culprit::Thread {
            tid,
            policy,
            priority,
            ..
        }) => assert_eq!((*tid, policy.as_str(), *priority), (hog, "SCHED_FIFO", 95)),
        other => panic!("the hog held the driver back, not {other:?}"),
    }
    assert!(
        matches!(
            &missed.explanation,
            Explanation::Missed { by: Some(Culprit::Thread { tid, .. }), .. } if *tid == hog
        ),
        "{:?}",
        missed.explanation
    );
    assert!(
        rtlab_render::apptrace_words::explanation(&missed.explanation)
            .contains("qhog0 (SCHED_FIFO 95) ran"),
        "{:?}",
        missed.explanation
    );
    // The sink's activation after the gap came more than 2.1 periods after the last one: it
    // started after its own deadline (the gap and it are JACK's two xruns).
    assert_eq!(row.late_activations, 2, "{:#?}", report.late_activations);
    let periodic = report.periodic_threads();
    assert_eq!(periodic.none_because, None);
    assert_eq!(periodic.threads.len(), 1);
    assert_eq!(periodic.threads[0].tid, sink);
    assert_eq!(
        periodic.threads[0].woken_by.as_ref().map(|waker| waker.tid),
        Some(source)
    );
}

/// A real-time thread of the program that runs at irregular times is no periodic thread: the
/// answer says so instead of guessing a period.
#[test]
fn an_aperiodic_program_has_no_periodic_real_time_thread() {
    let worker = 60;
    let mut script = Script::new(&[(worker, "worker")]);
    script.at(
        0.0,
        0,
        EventKind::ThreadInfo {
            tid: worker,
            tgid: worker,
            policy: crate::model::Policy::Fifo,
            priority: 50,
        },
    );
    for start in [0.0, 3.0, 50.0, 51.0, 400.0, 1000.0, 1003.0, 5000.0, 5100.0] {
        script
            .wake(start, 0, worker, 49, 0)
            .switch(start, 0, (0, 120, 0), (worker, 49))
            .switch(start + 0.5, 0, (worker, 49, SLEEPING), (0, 120));
    }
    let report = script.analyse();
    let periodic = report.periodic_threads();
    assert!(periodic.threads.is_empty());
    let reason = periodic.none_because.expect("a reason");
    assert!(
        matches!(
            reason,
            NoPeriodicThread::NonePeriodicAndRealTime {
                recorded: 1,
                real_time: 1,
                ..
            }
        ),
        "{reason:?}"
    );
    assert_eq!(report.late_activations_total, 0);
}

/// A thread on the CPU 12 ms by the switches that got 1 ms of CPU time (its `Runtime` records):
/// the run segment names the hypervisor for the 11 ms it did not get.
#[test]
fn a_run_longer_than_its_cpu_time_is_the_hypervisor() {
    let worker = 70;
    let mut script = Script::new(&[(worker, "worker")]);
    let mut runtime = 0u64;
    for period in 0..20u32 {
        let start = f64::from(period) * 10.0;
        let wall = if period == 19 { 12.0 } else { 1.0 };
        script
            .wake(start, 0, worker, 49, 0)
            .at(
                start,
                0,
                EventKind::Runtime {
                    tid: worker,
                    runtime_ns: runtime,
                },
            )
            .switch(start, 0, (0, 120, 0), (worker, 49));
        runtime += MS;
        script
            .at(
                start + wall,
                0,
                EventKind::Runtime {
                    tid: worker,
                    runtime_ns: runtime,
                },
            )
            .switch(start + wall, 0, (worker, 49, SLEEPING), (0, 120));
    }
    let report = script.analyse();
    assert_eq!(
        report.late_activations_total, 1,
        "{:#?}",
        report.late_activations
    );
    let late = &report.late_activations[0];
    let run = late
        .critical_path
        .iter()
        .find(|step| step.kind == "run")
        .unwrap();
    assert_eq!(run.by, Some(Culprit::Hypervisor { ns: 11 * MS }));
    assert!(
        matches!(
            late.explanation,
            Explanation::HypervisorTook {
                hypervisor_ns,
                ..
            } if hypervisor_ns == 11 * MS
        ),
        "{:?}",
        late.explanation
    );
    assert!(
        rtlab_render::apptrace_words::explanation(&late.explanation)
            .contains("the hypervisor took 11 ms"),
        "{:?}",
        late.explanation
    );
}

/// A trace is untrusted: a wake-up naming a CPU no kernel can have (a fuzzed file's) must not
/// size the per-CPU table to it.
#[test]
fn an_impossible_cpu_number_does_not_grow_the_cpu_table() {
    let mut script = Script::new(&[(HIGH, "high")]);
    script.at(
        1.0,
        0,
        EventKind::Waking {
            tid: HIGH,
            prio: 10,
            waker: 0,
            target_cpu: i32::MAX,
        },
    );
    script.at(
        2.0,
        u32::MAX,
        EventKind::Waking {
            tid: HIGH,
            prio: 10,
            waker: 0,
            target_cpu: 0,
        },
    );
    let mut analyzer = Analyzer::new(AnalysisConfig::default());
    for event in &script.events {
        analyzer.push(event);
    }
    assert!(
        analyzer.cpus.len() <= MAX_CPUS + 1,
        "{} CPUs",
        analyzer.cpus.len()
    );
}

/// JACK's count of a burst that holds back its driver and its client together: the client's
/// late job counts twice when it resumed only after the driver had run its (late) cycle — the
/// restarted cycle found it triggered but not running — and once when both resumed together
/// on two CPUs.
#[test]
fn a_late_job_counts_a_second_xrun_only_when_its_waker_cycled_while_it_waited() {
    let (driver, client, hog0, hog1) = (50, 51, 98, 99);
    let mut script = Script::new(&[
        (driver, "jackd"),
        (client, "xrun_client"),
        (hog0, "qhog0"),
        (hog1, "qhog1"),
    ]);
    for period in 0..40u32 {
        let start = f64::from(period) * 10.0;
        if period == 8 || period == 18 {
            continue; // the driver's wake-up of these cycles is written with the burst
        }
        script
            .wake(start, 0, driver, 29, 0)
            .switch(start, 0, (0, 120, 0), (driver, 29))
            .wake(start + 0.1, 0, client, 34, driver)
            .switch(start + 0.1, 0, (driver, 29, SLEEPING), (client, 34));
        match period {
            // Same CPU: the hog takes it, the driver's next cycle runs when the hog stops, and
            // only then does the client resume.
            7 => {
                script
                    .switch(start + 1.1, 0, (client, 34, PREEMPTED), (hog0, 4))
                    .wake(start + 10.0, 0, driver, 29, 0)
                    .switch(start + 15.0, 0, (hog0, 4, SLEEPING), (driver, 29))
                    .switch(start + 15.1, 0, (driver, 29, SLEEPING), (client, 34))
                    .switch(start + 17.0, 0, (client, 34, SLEEPING), (0, 120));
            }
            // Two CPUs, both held: the driver and the client resume together.
            17 => {
                script
                    .switch(start + 1.1, 0, (client, 34, PREEMPTED), (hog0, 4))
                    .switch(start + 1.1, 1, (0, 120, 0), (hog1, 4))
                    .wake(start + 10.0, 1, driver, 29, 0)
                    .switch(start + 15.0, 1, (hog1, 4, SLEEPING), (driver, 29))
                    .switch(start + 15.0, 0, (hog0, 4, SLEEPING), (client, 34))
                    .switch(start + 15.1, 1, (driver, 29, SLEEPING), (0, 120))
                    .switch(start + 17.0, 0, (client, 34, SLEEPING), (0, 120));
            }
            _ => {
                script.switch(start + 3.1, 0, (client, 34, SLEEPING), (0, 120));
            }
        }
    }
    let report = script.analyse();
    let row = report.threads.iter().find(|row| row.tid == client).unwrap();
    assert_eq!(
        row.period_ns
            .map(|period| period.abs_diff(10 * MS) < MS / 2),
        Some(true),
        "{row:?}"
    );
    let late: Vec<_> = report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == client)
        .map(|late| (late.kind, late.at_ns / MS))
        .collect();
    assert_eq!(late, [(LateKind::Late, 70), (LateKind::Late, 170)]);
    assert_eq!(row.late_activations, 3, "{late:?}");
}

/// A thread its waker activates in only some of the waker's cycles (1, 2 or 3 cycles apart: no
/// rhythm of its own) takes the waker's period, and the cycles it missed count.
#[test]
fn a_sparse_thread_takes_its_wakers_period() {
    let (driver, client) = (50, 51);
    let mut script = Script::new(&[(driver, "jackd"), (client, "xrun_client")]);
    let mut activated = Vec::new();
    let mut cycle = 0u32;
    for step in [1u32, 2, 3].iter().cycle().take(24) {
        activated.push(cycle);
        cycle += step;
    }
    for period in 0..cycle {
        let start = f64::from(period) * 10.0;
        script
            .wake(start, 0, driver, 29, 0)
            .switch(start, 0, (0, 120, 0), (driver, 29));
        if activated.contains(&period) {
            script
                .wake(start + 0.1, 0, client, 34, driver)
                .switch(start + 0.1, 0, (driver, 29, SLEEPING), (client, 34))
                .switch(start + 1.1, 0, (client, 34, SLEEPING), (0, 120));
        } else {
            script.switch(start + 0.1, 0, (driver, 29, SLEEPING), (0, 120));
        }
    }
    let report = script.analyse();
    let row = report.threads.iter().find(|row| row.tid == client).unwrap();
    assert_eq!(
        row.period_ns
            .map(|period| period.abs_diff(10 * MS) < MS / 2),
        Some(true),
        "{row:?}"
    );
    // 23 intervals: 8 of 1 cycle, 15 of 2 or 3 cycles (a cycle without activation each).
    assert_eq!(row.missed_periods, 15, "{:#?}", report.late_activations);
}

/// Two programs' cycle markers (two JACK servers on one machine): the client is judged by the
/// clock of the thread that wakes it, missing one deadline when a cycle finds it unfinished and
/// one when its clock's cycle overran; the other clock changes nothing.
#[test]
fn a_thread_is_judged_by_the_cycle_markers_of_the_clock_that_wakes_it() {
    const CLOCK: i32 = 20;
    const CLIENT: i32 = 21;
    const OTHER_CLOCK: i32 = 30;
    let mut script = Script::new(&[(CLOCK, "jackd"), (CLIENT, "client"), (OTHER_CLOCK, "jackd")]);
    script.at(
        0.0,
        0,
        EventKind::ThreadInfo {
            tid: CLIENT,
            tgid: CLIENT,
            policy: crate::model::Policy::Fifo,
            priority: 60,
        },
    );
    let mut events: Vec<(f64, u32, EventKind)> = Vec::new();
    let switch = |prev: (i32, u32), next: i32| EventKind::Switch {
        prev_tid: prev.0,
        prev_prio: 29,
        prev_state: prev.1,
        next_tid: next,
        next_prio: 29,
    };
    let waking = |tid: i32, waker: i32, cpu: i32| EventKind::Waking {
        tid,
        prio: 29,
        waker,
        target_cpu: cpu,
    };
    for cycle in 1..40u32 {
        let t = f64::from(cycle) * 2.5;
        events.push((t - 0.01, 0, waking(CLOCK, 0, 0)));
        events.push((t - 0.005, 0, switch((0, 0), CLOCK)));
        events.push((t, 0, EventKind::CycleMarker { tid: CLOCK }));
        events.push((t + 0.01, 0, waking(CLIENT, CLOCK, 1)));
        // In cycle 30 the clock begins its next cycle at once (an overrun).
        if cycle != 30 {
            events.push((t + 0.02, 0, switch((CLOCK, 1), 0)));
        }
        events.push((t + 0.03, 1, switch((0, 0), CLIENT)));
        // In cycle 20 the client's work lasts past the next cycle's start.
        let work_end = if cycle == 20 { t + 3.0 } else { t + 0.53 };
        events.push((work_end, 1, switch((CLIENT, 1), 0)));
        events.push((t + 1.0, 2, waking(OTHER_CLOCK, 0, 2)));
        events.push((t + 1.01, 2, switch((0, 0), OTHER_CLOCK)));
        events.push((t + 1.02, 2, EventKind::CycleMarker { tid: OTHER_CLOCK }));
        events.push((t + 1.03, 2, switch((OTHER_CLOCK, 1), 0)));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (time, cpu, kind) in events {
        script.at(time, cpu, kind);
    }
    let report = script.analyse();
    assert_eq!(report.deadline_source, DeadlineSource::CycleMarker);
    let markers = report.cycle_markers.as_ref().expect("markers");
    assert_eq!(markers.thread.tid, CLOCK);
    assert_eq!(markers.period_ns, Some(2_500_000));
    let client = report.threads.iter().find(|row| row.tid == CLIENT).unwrap();
    assert_eq!(client.deadline_source, Some(DeadlineSource::CycleMarker));
    assert_eq!(client.late_activations, 2, "{client:?}");
    let listed: Vec<&LateActivation> = report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == CLIENT)
        .collect();
    assert_eq!(
        listed.iter().map(|late| late.deadlines_missed).sum::<u64>(),
        2
    );
}

/// A recorded tracefs capture (`trace` text: sched_switch, sched_waking and libc's
/// `timerfd_settime` with its arguments as `tfd`) as events; `cycle_call` picks the
/// `timerfd_settime` calls that are cycle markers, from their arguments.
fn tracefs_text_events(text: &str, cycle_call: impl Fn(&str) -> bool) -> Script {
    let mut script = Script { events: Vec::new() };
    let mut named = std::collections::HashSet::new();
    let mut first_s = None;
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let (task, after_task) = line.split_once(" [").expect("TASK-PID [CPU]");
        let (comm, pid) = task.trim().rsplit_once('-').expect("TASK-PID");
        let pid: i32 = pid.parse().unwrap();
        let (cpu, after_cpu) = after_task.split_once("] ").expect("[CPU]");
        let mut words = after_cpu.split_whitespace();
        let flags = words.next().unwrap();
        let time_s: f64 = words.next().unwrap().trim_end_matches(':').parse().unwrap();
        let event = words.next().unwrap().trim_end_matches(':');
        let fields: std::collections::HashMap<&str, &str> =
            words.filter_map(|word| word.split_once('=')).collect();
        let field = |name: &str| -> i32 { fields[name].parse().unwrap() };
        let cpu: u32 = cpu.parse().unwrap();
        if named.insert(pid) {
            script.at(
                0.0,
                cpu,
                EventKind::Name {
                    tid: pid,
                    comm: Comm::new(comm),
                },
            );
        }
        // From the first event, at 0 as the names are.
        let time_ms = (time_s - *first_s.get_or_insert(time_s)) * 1e3;
        let in_interrupt = flags.as_bytes().get(2).is_some_and(|c| b"hHsS".contains(c));
        let kind = match event {
            "sched_switch" => EventKind::Switch {
                prev_tid: field("prev_pid"),
                prev_prio: field("prev_prio"),
                prev_state: match fields["prev_state"] {
                    "R" | "R+" => 0,
                    "S" => 1,
                    _ => 2,
                },
                next_tid: field("next_pid"),
                next_prio: field("next_prio"),
            },
            "sched_waking" => EventKind::Waking {
                tid: field("pid"),
                prio: field("prio"),
                waker: if in_interrupt { 0 } else { pid },
                target_cpu: field("target_cpu"),
            },
            "tfd" if cycle_call(line) => EventKind::CycleMarker { tid: pid },
            "tfd" => continue,
            other => panic!("unexpected event {other}"),
        };
        script.at(time_ms, cpu, kind);
    }
    script
}

/// Issue 40, an idle PipeWire graph recorded beside PipeWire's profiler
/// (test_data/pipewire/idle-profiler-flush.txt): the driver's data thread also re-arms the
/// profiler's flush timer (relative, every second), and once its cycle came late that re-arm was
/// taken for a cycle start, before the cycle's own trigger: two cycle starts finding the client
/// unfinished, 4 misses where PipeWire logged one unfinished cycle. The `pipewire` marker now
/// records only the driver's re-arms (absolute, no interval): one cycle start, 2 — the
/// remaining one beyond PipeWire's is the client's signal written while the driver's thread ran
/// (no wake-up to see), the cycle it was racing.
#[test]
fn pipewire_an_idle_drivers_other_timer_is_no_cycle_start() {
    const DRIVER: i32 = 32348;
    const CLIENT: i32 = 32356;
    let text = include_str!("../../test_data/pipewire/idle-profiler-flush.txt");
    let client_misses = |script: &Script| pipewire_client_misses(script, DRIVER, CLIENT);
    let every_call = tracefs_text_events(text, |_| true);
    let cycle_rearms = tracefs_text_events(text, |line| {
        line.contains("flags=1 interval_sec=0 interval_nsec=0")
    });
    let (before, _) = client_misses(&every_call);
    let (after, at_us) = client_misses(&cycle_rearms);
    assert_eq!(
        before, 4,
        "every timerfd_settime a marker: the flush re-arm counted"
    );
    assert_eq!(after, 2, "late activations at {at_us:?} µs");
    // Charged to the client's activation the late cycle's trigger began (37524.419379).
    assert_eq!(at_us, [48_816]);
}

/// The late activations of `client` (their misses in all, and when, in µs) that the `pipewire`
/// rule finds in `script`, whose cycle markers must be `driver`'s.
fn pipewire_client_misses(script: &Script, driver: i32, client: i32) -> (u64, Vec<u64>) {
    let mut analyzer = Analyzer::new(AnalysisConfig {
        cycle_rule: CycleRule::Pipewire,
        ..AnalysisConfig::default()
    });
    for event in &script.events {
        analyzer.push(event);
    }
    let header = rtlab_core::header::OutputHeader {
        schema: SCHEMA.into(),
        tool_version: "test".into(),
        cmdline: vec![],
        started_at: "2026-01-01T00:00:00Z".into(),
        host: None,
    };
    let source = SourceInfo {
        path: "pipewire capture".into(),
        format: "test".into(),
        clock: None,
    };
    let (report, _) = analyzer.finish(header, source, 0);
    let markers = report.cycle_markers.as_ref().expect("cycle markers");
    assert_eq!(markers.thread.tid, driver);
    let late: Vec<&LateActivation> = report
        .late_activations
        .iter()
        .filter(|late| late.thread.tid == client)
        .collect();
    (
        late.iter().map(|late| late.deadlines_missed).sum(),
        late.iter().map(|late| late.at_ns / 1_000).collect(),
    )
}

/// Issue 40, idle rounds (test_data/pipewire/idle-migration-wake.txt): after re-arming its
/// timer the driver's data thread woke `migration/0` while the follower worked. Every thread the
/// driver's thread wakes was taken for a follower and each wake-up for a trigger: a cycle start
/// finding the follower unfinished (2) and a trigger unread at its signal (1) — 3 misses where
/// PipeWire logged none (the follower finished every cycle 0.8 ms after its trigger). In idle
/// `trace watch` rounds these were most of rtlab's count (PipeWire 0, rtlab 68 in 15 s). A
/// follower signals back and is woken before the timer's re-arm; `migration/0` does neither.
#[test]
fn pipewire_a_thread_the_driver_wakes_after_its_rearm_is_no_follower() {
    const DRIVER: i32 = 20714;
    const CLIENT: i32 = 20739;
    let text = include_str!("../../test_data/pipewire/idle-migration-wake.txt");
    let script = tracefs_text_events(text, |line| {
        line.contains("flags=1 interval_sec=0 interval_nsec=0")
    });
    let (misses, at_us) = pipewire_client_misses(&script, DRIVER, CLIENT);
    assert_eq!(misses, 0, "late activations at {at_us:?} µs");
}
