use super::*;

fn names<T>(list: &[(&'static TracepointRow, T)]) -> Vec<String> {
    list.iter().map(|(row, _)| row.full_name()).collect()
}

fn with_need(list: &[(&'static TracepointRow, Need)]) -> Vec<(String, bool)> {
    list.iter()
        .map(|(row, need)| (row.full_name(), *need == Required))
        .collect()
}

fn owned(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter()
        .map(|(name, required)| ((*name).to_owned(), *required))
        .collect()
}

/// The standard set's list as `event.rs` held it before the table (order and all).
const STANDARD_BEFORE: &[(&str, bool)] = &[
    ("sched:sched_switch", true),
    ("sched:sched_waking", true),
    ("irq:irq_handler_entry", true),
    ("irq:irq_handler_exit", true),
    ("irq:softirq_entry", true),
    ("irq:softirq_exit", true),
    ("workqueue:workqueue_execute_start", false),
    ("workqueue:workqueue_execute_end", false),
    ("ipi:ipi_send_cpu", false),
    ("ipi:ipi_send_cpumask", false),
];

const FULL_ONLY_BEFORE: &[(&str, bool)] = &[
    ("timer:hrtimer_expire_entry", false),
    ("timer:hrtimer_expire_exit", false),
    ("timer:hrtimer_start", false),
    ("sched:sched_wakeup", false),
    ("sched:sched_migrate_task", false),
];

fn vectors_before(full: bool) -> Vec<(String, bool)> {
    let mut events = Vec::new();
    for vector in NAMED_VECTORS
        .iter()
        .filter(|vector| full || **vector != "local_timer")
    {
        for suffix in ["entry", "exit"] {
            events.push((format!("irq_vectors:{vector}_{suffix}"), false));
        }
    }
    events
}

#[test]
fn the_explain_sets_are_the_lists_they_replaced() {
    let mut standard = owned(STANDARD_BEFORE);
    standard.extend(vectors_before(false));
    assert_eq!(with_need(&explain_tracefs_events(false)), standard);
    let mut full = owned(STANDARD_BEFORE);
    full.extend(owned(FULL_ONLY_BEFORE));
    full.extend(vectors_before(true));
    assert_eq!(with_need(&explain_tracefs_events(true)), full);
}

#[test]
fn the_explain_bpf_programs_are_the_lists_they_replaced() {
    // (program, tracepoint, in the standard set), and REQUIRED, as `loader.rs` held them.
    let before: &[(&str, &str, bool)] = &[
        ("rtlab_sched_switch", "sched_switch", true),
        ("rtlab_sched_waking", "sched_waking", true),
        ("rtlab_irq_handler_entry", "irq_handler_entry", true),
        ("rtlab_irq_handler_exit", "irq_handler_exit", true),
        ("rtlab_softirq_entry", "softirq_entry", true),
        ("rtlab_softirq_exit", "softirq_exit", true),
        ("rtlab_hrtimer_expire_entry", "hrtimer_expire_entry", true),
        ("rtlab_hrtimer_expire_exit", "hrtimer_expire_exit", true),
        (
            "rtlab_workqueue_execute_start",
            "workqueue_execute_start",
            true,
        ),
        ("rtlab_workqueue_execute_end", "workqueue_execute_end", true),
        ("rtlab_reschedule_entry", "reschedule_entry", true),
        ("rtlab_reschedule_exit", "reschedule_exit", true),
        ("rtlab_call_function_entry", "call_function_entry", true),
        ("rtlab_call_function_exit", "call_function_exit", true),
        (
            "rtlab_call_function_single_entry",
            "call_function_single_entry",
            true,
        ),
        (
            "rtlab_call_function_single_exit",
            "call_function_single_exit",
            true,
        ),
        ("rtlab_irq_work_entry", "irq_work_entry", true),
        ("rtlab_irq_work_exit", "irq_work_exit", true),
        ("rtlab_local_timer_entry", "local_timer_entry", false),
        ("rtlab_local_timer_exit", "local_timer_exit", false),
        ("rtlab_sched_wakeup", "sched_wakeup", false),
        ("rtlab_sched_migrate_task", "sched_migrate_task", false),
    ];
    let required = [
        "sched_switch",
        "sched_waking",
        "irq_handler_entry",
        "irq_handler_exit",
        "softirq_entry",
        "softirq_exit",
        "hrtimer_expire_entry",
        "hrtimer_expire_exit",
    ];
    let derived: Vec<(&str, &str, bool)> = explain_bpf_programs()
        .iter()
        .map(|(row, program)| (program.program, row.name, program.set == Standard))
        .collect();
    assert_eq!(derived, before);
    for (row, program) in explain_bpf_programs() {
        assert_eq!(
            program.need == Required,
            required.contains(&row.name),
            "{}",
            row.name
        );
    }
}

#[test]
fn the_app_lists_are_the_lists_they_replaced() {
    // APP_EVENTS as `app_recorder.rs` held it.
    let app_before: &[(&str, bool)] = &[
        ("sched:sched_switch", true),
        ("sched:sched_waking", true),
        ("sched:sched_wakeup_new", false),
        ("sched:sched_process_fork", false),
        ("sched:sched_process_exit", false),
        ("sched:sched_migrate_task", false),
        ("sched:sched_pi_setprio", false),
        ("syscalls:sys_enter_futex", false),
        ("syscalls:sys_exit_futex", false),
        ("irq:irq_handler_entry", false),
        ("irq:irq_handler_exit", false),
        ("irq:softirq_entry", false),
        ("irq:softirq_exit", false),
        ("irq_vectors:local_timer_entry", false),
        ("irq_vectors:local_timer_exit", false),
        ("irq_vectors:reschedule_entry", false),
        ("irq_vectors:reschedule_exit", false),
    ];
    assert_eq!(with_need(&app_tracefs_events()), owned(app_before));
    // USED_EVENTS as `decode.rs` held it.
    let read_before = [
        "sched:sched_switch",
        "sched:sched_waking",
        "sched:sched_wakeup",
        "sched:sched_wakeup_new",
        "sched:sched_process_fork",
        "sched:sched_process_exit",
        "sched:sched_migrate_task",
        "sched:sched_pi_setprio",
        "syscalls:sys_enter_futex",
        "syscalls:sys_exit_futex",
        "irq:irq_handler_entry",
        "irq:irq_handler_exit",
        "irq:softirq_entry",
        "irq:softirq_exit",
        "irq_vectors:local_timer_entry",
        "irq_vectors:local_timer_exit",
        "irq_vectors:reschedule_entry",
        "irq_vectors:reschedule_exit",
        "irq_vectors:call_function_single_entry",
        "irq_vectors:call_function_single_exit",
        "irq_vectors:irq_work_entry",
        "irq_vectors:irq_work_exit",
    ];
    let read: Vec<String> = app_read_events()
        .iter()
        .map(|row| row.full_name())
        .collect();
    assert_eq!(read, read_before);
    // The BPF recorder's PROGRAMS and REQUIRED as `apptrace.rs` held them.
    let bpf_before: &[(&str, &str, Option<&str>)] = &[
        (
            "apptrace_switch",
            "sched_switch",
            Some("sched:sched_switch"),
        ),
        (
            "apptrace_waking",
            "sched_waking",
            Some("sched:sched_waking"),
        ),
        ("apptrace_wakeup", "sched_wakeup", None),
        (
            "apptrace_wakeup_new",
            "sched_wakeup_new",
            Some("sched:sched_wakeup_new"),
        ),
        (
            "apptrace_fork",
            "sched_process_fork",
            Some("sched:sched_process_fork"),
        ),
        (
            "apptrace_exit",
            "sched_process_exit",
            Some("sched:sched_process_exit"),
        ),
        (
            "apptrace_migrate",
            "sched_migrate_task",
            Some("sched:sched_migrate_task"),
        ),
        (
            "apptrace_pi_setprio",
            "sched_pi_setprio",
            Some("sched:sched_pi_setprio"),
        ),
        (
            "apptrace_sys_enter",
            "sys_enter",
            Some("syscalls:sys_enter_futex"),
        ),
        (
            "apptrace_sys_exit",
            "sys_exit",
            Some("syscalls:sys_exit_futex"),
        ),
        (
            "apptrace_irq_exit",
            "irq_handler_exit",
            Some("irq:irq_handler_exit"),
        ),
        (
            "apptrace_softirq_exit",
            "softirq_exit",
            Some("irq:softirq_exit"),
        ),
        (
            "apptrace_timer_exit",
            "local_timer_exit",
            Some("irq_vectors:local_timer_exit"),
        ),
        (
            "apptrace_resched_exit",
            "reschedule_exit",
            Some("irq_vectors:reschedule_exit"),
        ),
        (
            "apptrace_irq_entry",
            "irq_handler_entry",
            Some("irq:irq_handler_entry"),
        ),
        (
            "apptrace_softirq_entry",
            "softirq_entry",
            Some("irq:softirq_entry"),
        ),
        (
            "apptrace_timer_entry",
            "local_timer_entry",
            Some("irq_vectors:local_timer_entry"),
        ),
        (
            "apptrace_resched_entry",
            "reschedule_entry",
            Some("irq_vectors:reschedule_entry"),
        ),
    ];
    let bpf: Vec<(&str, &str, Option<String>)> = app_bpf_programs()
        .iter()
        .map(|(row, program)| {
            (
                program.program,
                program.attach_to,
                program.records.then(|| row.full_name()),
            )
        })
        .collect();
    let before: Vec<(&str, &str, Option<String>)> = bpf_before
        .iter()
        .map(|(program, attach, records)| (*program, *attach, records.map(str::to_owned)))
        .collect();
    assert_eq!(bpf, before);
    let required = [
        "sched_switch",
        "sched_waking",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_process_fork",
        "sched_process_exit",
        "sched_migrate_task",
        "sched_pi_setprio",
        "sys_enter",
        "sys_exit",
        "irq_handler_entry",
        "irq_handler_exit",
        "softirq_entry",
        "softirq_exit",
    ];
    for (_, program) in app_bpf_programs() {
        assert_eq!(
            program.need == Required,
            required.contains(&program.attach_to),
            "{}",
            program.attach_to
        );
    }
}

#[test]
fn every_row_is_found_by_its_name_and_recorded_rows_have_a_decoder() {
    for (index, row) in TRACEPOINTS.iter().enumerate() {
        assert_eq!(Tracepoint::of(row.system, row.name), Some(row.tracepoint));
        assert_eq!(row.tracepoint.row(), Some(row), "{}", row.full_name());
        assert!(
            TRACEPOINTS[..index]
                .iter()
                .all(|earlier| earlier.full_name() != row.full_name()
                    && earlier.tracepoint != row.tracepoint),
            "{} twice",
            row.full_name()
        );
        if row.explain.is_some() || row.explain_bpf.is_some() {
            assert!(
                row.decoded_by.explain,
                "{}: no explain decoder",
                row.full_name()
            );
        }
        let app_records = row.app_bpf.is_some_and(|program| program.records);
        if row.app.is_some() || app_records || row.app_reads {
            assert!(row.decoded_by.app, "{}: no trace decoder", row.full_name());
        }
        if let Some(program) = row.explain_bpf {
            assert_eq!(program.program, format!("rtlab_{}", row.name));
        }
        if let Some(program) = row.app_bpf {
            assert!(program.program.starts_with("apptrace_"));
            assert!(program.attach_to == row.name || row.system == "syscalls");
        }
        if let Tracepoint::VectorEntry(Some(vector)) = row.tracepoint {
            assert_eq!(row.name, format!("{vector}_entry"));
        }
        if let Tracepoint::VectorExit(Some(vector)) = row.tracepoint {
            assert_eq!(row.name, format!("{vector}_exit"));
        }
    }
    for vector in NAMED_VECTORS {
        assert!(Tracepoint::VectorEntry(Some(vector)).row().is_some());
        assert!(Tracepoint::VectorExit(Some(vector)).row().is_some());
    }
}

/// Every variant: a new one fails to compile here until it is given a row.
fn has_row(tracepoint: Tracepoint) -> bool {
    use Tracepoint::*;
    match tracepoint {
        SchedSwitch
        | SchedWaking
        | SchedWakeup
        | SchedWakeupNew
        | SchedProcessFork
        | SchedProcessExit
        | SchedMigrateTask
        | SchedPiSetprio
        | SysEnterFutex
        | SysExitFutex
        | IrqHandlerEntry
        | IrqHandlerExit
        | SoftirqEntry
        | SoftirqExit
        | HrtimerStart
        | HrtimerExpireEntry
        | HrtimerExpireExit
        | WorkqueueExecuteStart
        | WorkqueueExecuteEnd
        | IpiSendCpu
        | IpiSendCpumask
        | Print => tracepoint.row().is_some(),
        VectorEntry(name) | VectorExit(name) => tracepoint.row().is_some() == name.is_some(),
    }
}

#[test]
fn every_variant_has_a_row_and_vectors_are_known_by_name_or_not_at_all() {
    for row in TRACEPOINTS {
        assert!(has_row(row.tracepoint));
    }
    assert!(has_row(Tracepoint::VectorEntry(None)));
    assert_eq!(
        Tracepoint::of("irq_vectors", "local_timer_entry"),
        Some(Tracepoint::VectorEntry(Some("local_timer")))
    );
    assert_eq!(
        Tracepoint::of("irq_vectors", "brand_new_exit"),
        Some(Tracepoint::VectorExit(None))
    );
    assert_eq!(Tracepoint::of("irq_vectors", "local_timer"), None);
    assert_eq!(Tracepoint::of("sched", "sched_stat_runtime"), None);
    assert_eq!(
        names(&app_tracefs_events()).len(),
        TRACEPOINTS.iter().filter(|row| row.app.is_some()).count()
    );
}
