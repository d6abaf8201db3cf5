//! Attribution on synthetic traces: each test builds the events one CPU would show around a late
//! wake-up and checks the causes (and the timeline) the three passes make of them.

use super::*;
use crate::event::{Comm, EventKind};
use rtlab_core::CauseKind;

const PROBE: i32 = 500;
const SPINNER: i32 = 777;

fn event(timestamp_ns: u64, pid: i32, kind: EventKind) -> TraceEvent {
    TraceEvent {
        timestamp_ns,
        cpu: 1,
        pid,
        kind,
    }
}

fn switch(timestamp_ns: u64, prev: (i32, &str, i32), next: (i32, &str, i32)) -> TraceEvent {
    event(
        timestamp_ns,
        prev.0,
        EventKind::Switch {
            prev_comm: Comm::new(prev.1),
            prev_pid: prev.0,
            prev_prio: prev.2,
            prev_state: 0,
            next_comm: Comm::new(next.1),
            next_pid: next.0,
            next_prio: next.2,
        },
    )
}

/// `woken` (pid, name, kernel prio) woken onto CPU 1 while `current_pid` runs there (0: from an
/// interrupt while the CPU idles).
fn waking(timestamp_ns: u64, current_pid: i32, woken: (i32, &str, i32)) -> TraceEvent {
    event(
        timestamp_ns,
        current_pid,
        EventKind::Waking {
            comm: Comm::new(woken.1),
            pid: woken.0,
            prio: woken.2,
            target_cpu: 1,
        },
    )
}

/// The probe arms its timer (0xAA) to fire at `expires_ns`.
fn probe_timer_start(timestamp_ns: u64, expires_ns: i64) -> TraceEvent {
    event(
        timestamp_ns,
        PROBE,
        EventKind::HrtimerStart {
            timer: 0xAA,
            function: 0x1,
            expires_ns,
        },
    )
}

/// The probe's timer fires (its callback starts) while `current_pid` runs.
fn probe_timer_expire_entry(timestamp_ns: u64, current_pid: i32) -> TraceEvent {
    event(
        timestamp_ns,
        current_pid,
        EventKind::HrtimerExpireEntry {
            timer: 0xAA,
            now_ns: timestamp_ns as i64,
            function: 0x1,
        },
    )
}

fn probe_timer_expire_exit(timestamp_ns: u64, current_pid: i32) -> TraceEvent {
    event(
        timestamp_ns,
        current_pid,
        EventKind::HrtimerExpireExit { timer: 0xAA },
    )
}

/// An interrupt vector (`local_timer`, `reschedule`, …) entered while `current_pid` runs.
fn vector_entry(timestamp_ns: u64, current_pid: i32, name: &'static str) -> TraceEvent {
    event(timestamp_ns, current_pid, EventKind::VectorEntry { name })
}

fn vector_exit(timestamp_ns: u64, current_pid: i32, name: &'static str) -> TraceEvent {
    event(timestamp_ns, current_pid, EventKind::VectorExit { name })
}

fn late(intended_ns: u64, actual_ns: u64, metric: Metric) -> LateWakeup {
    LateWakeup {
        series: "rt-high/wakeup@1".into(),
        metric,
        cpu: 1,
        tid: PROBE as u32,
        intended_ns,
        actual_ns,
        latency_ns: actual_ns - intended_ns,
    }
}

/// The time attributed to one named cause; panics (failing the test) when it is absent.
fn ns_of(causes: &[Cause], kind: CauseKind, name: &str) -> u64 {
    find(causes, kind, name)
        .unwrap_or_else(|| panic!("no {kind:?} cause named {name:?} in {causes:?}"))
        .ns
}

fn find<'a>(causes: &'a [Cause], kind: CauseKind, name: &str) -> Option<&'a Cause> {
    causes
        .iter()
        .find(|cause| cause.kind == kind && cause.name == name)
}

/// The probe (RT 80, kernel prio 19) sleeps; an RT 95 spinner (prio 4) runs through its wake-up.
fn spinner_trace() -> Vec<TraceEvent> {
    vec![
        probe_timer_start(900, 10_000),
        switch(1_000, (PROBE, "probe", 19), (SPINNER, "spin95", 4)),
        vector_entry(10_100, SPINNER, "local_timer"),
        probe_timer_expire_entry(10_200, SPINNER),
        waking(10_300, SPINNER, (PROBE, "probe", 19)),
        probe_timer_expire_exit(10_400, SPINNER),
        vector_exit(10_500, SPINNER, "local_timer"),
        event(
            500_000,
            SPINNER,
            EventKind::IrqEntry {
                irq: 11,
                name: "virtio0-input".into(),
            },
        ),
        event(520_000, SPINNER, EventKind::IrqExit { irq: 11 }),
        event(520_100, SPINNER, EventKind::SoftirqEntry { vector: 3 }),
        event(540_100, SPINNER, EventKind::SoftirqExit { vector: 3 }),
        switch(2_000_000, (SPINNER, "spin95", 4), (PROBE, "probe", 19)),
    ]
}

#[test]
fn the_timeline_follows_the_window_in_order_and_adds_up() {
    let late = late(10_000, 2_000_500, Metric::Wakeup);
    let (causes, timeline) =
        attribute_with_timeline(&late, &spinner_trace(), AttributionContext::default());
    let order: Vec<(CauseKind, &str)> = timeline
        .iter()
        .map(|segment| (segment.kind, segment.name.as_str()))
        .collect();
    // The timer interrupt, the spinner, the network IRQ and its softirq inside the spinner's
    // time, the spinner again, then the switch to the probe.
    assert_eq!(
        order,
        vec![
            (CauseKind::Timer, "timer fired late"),
            (CauseKind::Timer, "wake-up interrupt"),
            (CauseKind::Task, "spin95"),
            (CauseKind::Irq, "virtio0-input"),
            (CauseKind::Task, "spin95"),
            (CauseKind::Softirq, "NET_RX"),
            (CauseKind::Task, "spin95"),
            (CauseKind::Switch, "switch to the probe"),
        ],
        "{timeline:#?}"
    );
    let mut expected_start = 0;
    for segment in &timeline {
        assert_eq!(segment.start_ns, expected_start, "{timeline:#?}");
        expected_start += segment.ns;
    }
    assert_eq!(expected_start, late.latency_ns);
    // The same time as the causes, by name.
    let spinner_in_timeline: u64 = timeline
        .iter()
        .filter(|segment| segment.name == "spin95")
        .map(|segment| segment.ns)
        .sum();
    assert_eq!(
        spinner_in_timeline,
        ns_of(&causes, CauseKind::Task, "spin95")
    );
}

#[test]
fn a_task_that_preempts_the_probe_after_its_switch_in_is_named() {
    let trace = vec![
        probe_timer_start(900, 10_000),
        switch(1_000, (PROBE, "probe", 19), (300, "rustc", 120)),
        probe_timer_expire_entry(10_000, 300),
        waking(10_100, 300, (PROBE, "probe", 19)),
        probe_timer_expire_exit(10_200, 300),
        switch(11_000, (300, "rustc", 120), (PROBE, "probe", 19)),
        switch(11_500, (PROBE, "probe", 19), (SPINNER, "spin95", 4)),
        switch(2_011_500, (SPINNER, "spin95", 4), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 2_012_000, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    assert_eq!(ns_of(&causes, CauseKind::Task, "spin95"), 2_000_000);
    assert_eq!(ns_of(&causes, CauseKind::Task, "rustc"), 800);
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "switch to the probe"),
        1_000
    );
    assert_eq!(ns_of(&causes, CauseKind::Timer, "wake-up interrupt"), 200);
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 2_002_000);
}

#[test]
fn a_higher_priority_spinner_is_named_and_the_parts_add_up() {
    let late = late(10_000, 2_001_000, Metric::Wakeup);
    let causes = attribute(&late, &spinner_trace(), AttributionContext::default());
    let total: u64 = causes.iter().map(|cause| cause.ns).sum();
    assert_eq!(total, late.latency_ns);
    let spinner = find(&causes, CauseKind::Task, "spin95").expect("spinner named");
    assert_eq!(spinner.pid, Some(SPINNER as u32));
    assert_eq!(spinner.ns, 2_000_000 - 10_500 - 20_000 - 20_000);
    assert!(spinner
        .detail
        .as_deref()
        .unwrap()
        .contains("RT priority 95, outranks the probe"));
    assert_eq!(ns_of(&causes, CauseKind::Irq, "virtio0-input"), 20_000);
    assert_eq!(ns_of(&causes, CauseKind::Softirq, "NET_RX"), 20_000);
    // The timer interrupt: 100 ns late while the spinner ran, then 400 ns delivering it.
    assert_eq!(ns_of(&causes, CauseKind::Timer, "timer fired late"), 100);
    assert_eq!(ns_of(&causes, CauseKind::Timer, "wake-up interrupt"), 400);
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "switch to the probe"),
        1_000
    );
    assert_eq!(causes[0].kind, CauseKind::Task);
}

#[test]
fn a_task_switched_in_without_a_traced_switch_is_named_from_its_events() {
    // The switch out of idle into the spinner is missing, as on kernels that do not trace it.
    let trace = vec![
        switch(1_000, (PROBE, "probe", 19), (0, "swapper/1", 120)),
        waking(5_000, 0, (SPINNER, "spin95", 4)),
        vector_entry(5_500, SPINNER, "local_timer"),
        vector_exit(5_600, SPINNER, "local_timer"),
        vector_entry(10_100, SPINNER, "local_timer"),
        waking(10_200, SPINNER, (PROBE, "probe", 19)),
        vector_exit(10_300, SPINNER, "local_timer"),
        switch(1_010_000, (SPINNER, "spin95", 4), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 1_010_500, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    let spinner = find(&causes, CauseKind::Task, "spin95").expect("spinner named");
    assert_eq!(spinner.ns, 1_010_000 - 10_300);
    assert!(spinner
        .detail
        .as_deref()
        .unwrap()
        .contains("outranks the probe"));
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 1_000_500);
}

#[test]
fn an_idle_cpu_whose_timer_fires_late_is_unaccounted() {
    let trace = vec![
        probe_timer_start(900, 10_000),
        switch(1_000, (PROBE, "probe", 19), (0, "swapper/1", 120)),
        vector_entry(60_000, 0, "local_timer"),
        probe_timer_expire_entry(60_100, 0),
        waking(60_200, 0, (PROBE, "probe", 19)),
        probe_timer_expire_exit(60_300, 0),
        vector_exit(60_400, 0, "local_timer"),
        switch(61_000, (0, "swapper/1", 120), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 62_000, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 52_000);
    assert_eq!(
        find(&causes, CauseKind::Unaccounted, UNACCOUNTED_NAME)
            .unwrap()
            .ns,
        50_000
    );
    assert_eq!(ns_of(&causes, CauseKind::Timer, "wake-up interrupt"), 400);
    // Once the interrupt that woke it returns, the idle CPU is switching to the probe.
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "switch to the probe"),
        1_600
    );
}

#[test]
fn a_spinner_woken_by_the_same_interrupt_on_an_idle_cpu_is_named() {
    // One timer interrupt on an idle CPU wakes the probe and an RT 95 spinner; the kernel does
    // not trace the switch out of idle, and the spinner runs 1 ms without a traced event.
    let trace = vec![
        switch(1_000, (PROBE, "probe", 19), (0, "swapper/1", 120)),
        vector_entry(10_100, 0, "local_timer"),
        waking(10_200, 0, (PROBE, "probe", 19)),
        waking(10_300, 0, (SPINNER, "spin95", 4)),
        vector_exit(10_400, 0, "local_timer"),
        switch(1_010_000, (SPINNER, "spin95", 4), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 1_010_500, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 1_000_500);
    assert_eq!(
        ns_of(&causes, CauseKind::Task, "spin95"),
        1_010_000 - 10_400
    );
    assert!(
        find(&causes, CauseKind::Switch, "scheduling").is_none(),
        "{causes:?}"
    );
}

#[test]
fn a_spinner_woken_with_the_probe_is_named_when_the_interrupt_is_not_traced() {
    // The trace this VM's CPU 1 gives with the standard event set (captured from a failing
    // known-causes run): the timer interrupt on the idle CPU is not recorded, only the two
    // wakings in it; the switch out of idle is missing too, and the next event is the spinner's
    // own, 810 µs later.
    let trace = vec![
        switch(1_000, (PROBE, "probe", 19), (0, "swapper/1", 120)),
        waking(86_260, 0, (PROBE, "probe", 19)),
        waking(89_500, 0, (SPINNER, "spin95", 4)),
        event(
            898_960,
            SPINNER,
            EventKind::IpiSend {
                target_cpu: Some(0),
            },
        ),
        event(927_320, SPINNER, EventKind::SoftirqEntry { vector: 7 }),
        event(930_185, SPINNER, EventKind::SoftirqExit { vector: 7 }),
        switch(2_158_710, (SPINNER, "spin95", 4), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 2_160_545, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 2_150_545);
    // Only the untraced interrupt between the two wakings is left to the scheduler.
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "scheduling"),
        89_500 - 86_260
    );
    // From the spinner's waking to the switch to the probe, less its softirq.
    assert_eq!(
        ns_of(&causes, CauseKind::Task, "spin95"),
        2_158_710 - 89_500 - (930_185 - 927_320)
    );
    // Before the interrupt, the idle CPU did nothing nameable (the timer fired late).
    assert_eq!(
        ns_of(&causes, CauseKind::Unaccounted, UNACCOUNTED_NAME),
        86_260 - 10_000
    );
}

#[test]
fn a_probe_woken_on_an_idle_cpu_with_no_later_event_is_switching_in() {
    // The waking is the last event: the idle CPU runs the woken probe from there.
    let trace = vec![
        switch(1_000, (PROBE, "probe", 19), (0, "swapper/1", 120)),
        waking(60_200, 0, (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 62_000, Metric::Wakeup);
    let causes = attribute(&late, &trace, AttributionContext::default());
    assert_eq!(
        ns_of(&causes, CauseKind::Unaccounted, UNACCOUNTED_NAME),
        50_200
    );
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "switch to the probe"),
        1_800
    );
}

#[test]
fn no_events_means_all_unaccounted_and_a_shortfall_is_filled() {
    let late = late(10_000, 30_000, Metric::Wakeup);
    let causes = attribute(
        &late,
        &[],
        AttributionContext {
            events_lost: true,
            ..Default::default()
        },
    );
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].kind, CauseKind::Unaccounted);
    assert_eq!(causes[0].ns, 20_000);
    assert!(causes[0].detail.as_deref().unwrap().contains("lost events"));
    // The probe says 25 µs while the window is 20 µs: the remainder is unaccounted.
    let mut longer = late.clone();
    longer.latency_ns = 25_000;
    let causes = attribute(
        &longer,
        &spinner_trace()[..2],
        AttributionContext::default(),
    );
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 25_000);
}

#[test]
fn handoff_waits_for_a_lower_priority_kernel_worker() {
    let trace = vec![
        switch(1_000, (PROBE, "probe", 19), (300, "kworker/1:1", 120)),
        event(1_100, 300, EventKind::WorkStart { function: 0x1234 }),
        vector_entry(20_000, 300, "reschedule"),
        event(
            20_100,
            300,
            EventKind::Wakeup {
                comm: Comm::new("probe"),
                pid: PROBE,
                prio: 19,
                target_cpu: 1,
            },
        ),
        vector_exit(20_200, 300, "reschedule"),
        switch(50_000, (300, "kworker/1:1", 120), (PROBE, "probe", 19)),
    ];
    let late = late(10_000, 50_500, Metric::Handoff);
    let context = AttributionContext {
        wake_hint_ns: Some(20_050),
        ..Default::default()
    };
    let causes = attribute(&late, &trace, context);
    assert_eq!(causes.iter().map(|cause| cause.ns).sum::<u64>(), 40_500);
    assert_eq!(
        ns_of(&causes, CauseKind::Switch, "wake-up in flight"),
        10_000
    );
    let worker = find(&causes, CauseKind::Task, "kworker/1:1").unwrap();
    assert!(
        worker
            .detail
            .as_deref()
            .unwrap()
            .contains("below the probe's priority, work 0x1234"),
        "{worker:?}"
    );
}
