//! The one table of the kernel tracepoints rtlab records or decodes: for each, its name, the
//! fields the decoders read, which recorders enable or attach it (and in which of `rtlab run
//! --explain`'s event sets), whether a recorder fails without it, and which decoders read it.
//!
//! Every list a recorder or reader uses is derived here from [`TRACEPOINTS`], in the order the
//! recorders have always used: `--explain`'s tracefs events ([`explain_tracefs_events`]) and BPF
//! programs ([`explain_bpf_programs`], `rtlab-bpf/bpf/rtlab.bpf.c`), `rtlab trace record`'s
//! tracefs events ([`app_tracefs_events`]) and BPF programs ([`app_bpf_programs`],
//! `apptrace.bpf.c`), and the formats `rtlab trace` reads from a trace.dat
//! ([`app_read_events`]). The decoded representations stay where they are used (rtlab-explain's
//! `EventKind`, rtlab-bpf's `RawKind`, rtlab-trace's `EventKind`); tests beside each decoder
//! check that it decodes every tracepoint this table says it does and nothing else, and
//! rtlab-bpf's tests check the C sources' programs against this table. Adding a tracepoint
//! starts here (ARCHITECTURE.md, "Five ordinary changes").

/// The x86 interrupt vectors known by name (`irq_vectors:<name>_entry` / `_exit`), in the
/// table's order.
pub const NAMED_VECTORS: &[&str] = &[
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
    "x86_platform_ipi",
    "thermal_apic",
    "error_apic",
    "spurious_apic",
];

/// A tracepoint rtlab decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracepoint {
    SchedSwitch,
    SchedWaking,
    SchedWakeup,
    SchedWakeupNew,
    SchedProcessFork,
    SchedProcessExit,
    SchedMigrateTask,
    SchedPiSetprio,
    SysEnterFutex,
    SysExitFutex,
    IrqHandlerEntry,
    IrqHandlerExit,
    SoftirqEntry,
    SoftirqExit,
    HrtimerStart,
    HrtimerExpireEntry,
    HrtimerExpireExit,
    WorkqueueExecuteStart,
    WorkqueueExecuteEnd,
    IpiSendCpu,
    IpiSendCpumask,
    /// `ftrace:print`, a `trace_marker` write.
    Print,
    /// `irq_vectors:<name>_entry`; the name when it is one of [`NAMED_VECTORS`].
    VectorEntry(Option<&'static str>),
    VectorExit(Option<&'static str>),
}

impl Tracepoint {
    /// The tracepoint `system:name` is, if rtlab decodes it: a row of [`TRACEPOINTS`], or an
    /// x86 vector without a known name.
    pub fn of(system: &str, name: &str) -> Option<Tracepoint> {
        if let Some(row) = row_named(system, name) {
            return Some(row.tracepoint);
        }
        if system != "irq_vectors" {
            return None;
        }
        if name.ends_with("_entry") {
            Some(Tracepoint::VectorEntry(None))
        } else if name.ends_with("_exit") {
            Some(Tracepoint::VectorExit(None))
        } else {
            None
        }
    }

    /// Its row of [`TRACEPOINTS`] (None for a vector without a known name).
    pub fn row(self) -> Option<&'static TracepointRow> {
        TRACEPOINTS.iter().find(|row| row.tracepoint == self)
    }

    /// The fields read, in the order a decoder indexes them (common fields apart).
    pub fn fields(self) -> &'static [&'static str] {
        self.row().map_or(&[], |row| row.fields)
    }
}

/// The row of `system:name`.
pub fn row_named(system: &str, name: &str) -> Option<&'static TracepointRow> {
    TRACEPOINTS
        .iter()
        .find(|row| row.system == system && row.name == name)
}

/// Which of `rtlab run --explain`'s event sets records a tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainSet {
    /// Both sets.
    Standard,
    /// Only the full set.
    Full,
}

/// Whether a recorder fails to start without the tracepoint, or uses it where it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Required,
    Optional,
}

/// A tracepoint in `--explain`'s tracefs recorder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExplainUse {
    pub set: ExplainSet,
    pub need: Need,
}

/// A program of `--explain`'s BPF recorder (`rtlab.bpf.c`), on `tp_btf/<the row's name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExplainBpf {
    pub program: &'static str,
    /// The set that attaches it (the full set attaches every program).
    pub set: ExplainSet,
    pub need: Need,
}

/// A program of `rtlab trace record`'s BPF recorder (`apptrace.bpf.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppBpf {
    pub program: &'static str,
    /// The BTF tracepoint it attaches to (`tp_btf/<attach_to>`): the row's name, or for the
    /// futex events the raw syscall tracepoints it filters.
    pub attach_to: &'static str,
    /// Whether its records are this row's event; false for a program that only keeps the
    /// kernel side's state (`sched_wakeup`, whose event `sched_waking` already gives).
    pub records: bool,
    pub need: Need,
}

/// Which payload decoders read a tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoders {
    /// rtlab-explain's `EventDecoder` (attribution, `--explain`).
    pub explain: bool,
    /// rtlab-trace's `PayloadDecoder` (`rtlab trace`).
    pub app: bool,
}

/// One tracepoint and everything that uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointRow {
    pub tracepoint: Tracepoint,
    pub system: &'static str,
    pub name: &'static str,
    /// The fields the decoders read, in the order they index them (common fields apart).
    pub fields: &'static [&'static str],
    /// `--explain`'s tracefs recorder (rtlab-explain's `recorder/`).
    pub explain: Option<ExplainUse>,
    /// `--explain`'s BPF recorder.
    pub explain_bpf: Option<ExplainBpf>,
    /// `rtlab trace record`'s tracefs recorder (rtlab-explain's `app_recorder.rs`).
    pub app: Option<Need>,
    /// `rtlab trace record`'s BPF recorder.
    pub app_bpf: Option<AppBpf>,
    /// Read from a trace.dat by `rtlab trace` (the formats it keeps).
    pub app_reads: bool,
    pub decoded_by: Decoders,
}

impl TracepointRow {
    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }

    /// An interrupt's entry or exit (`irq`, `irq_vectors`): `rtlab trace`'s recorders enable
    /// these after the task events.
    pub fn is_interrupt(&self) -> bool {
        matches!(self.system, "irq" | "irq_vectors")
    }

    /// An x86 vector (`irq_vectors`): `--explain`'s tracefs recorder enables these last.
    pub fn is_vector(&self) -> bool {
        self.system == "irq_vectors"
    }
}

const fn row(
    tracepoint: Tracepoint,
    system: &'static str,
    name: &'static str,
    fields: &'static [&'static str],
) -> TracepointRow {
    TracepointRow {
        tracepoint,
        system,
        name,
        fields,
        explain: None,
        explain_bpf: None,
        app: None,
        app_bpf: None,
        app_reads: false,
        decoded_by: Decoders {
            explain: false,
            app: false,
        },
    }
}

use ExplainSet::{Full, Standard};
use Need::{Optional, Required};

impl TracepointRow {
    const fn explain(self, set: ExplainSet, need: Need) -> Self {
        TracepointRow {
            explain: Some(ExplainUse { set, need }),
            ..self
        }
    }

    const fn explain_bpf(self, program: &'static str, set: ExplainSet, need: Need) -> Self {
        TracepointRow {
            explain_bpf: Some(ExplainBpf { program, set, need }),
            ..self
        }
    }

    const fn app(self, need: Need) -> Self {
        TracepointRow {
            app: Some(need),
            ..self
        }
    }

    const fn app_bpf(
        self,
        program: &'static str,
        attach_to: &'static str,
        records: bool,
        need: Need,
    ) -> Self {
        TracepointRow {
            app_bpf: Some(AppBpf {
                program,
                attach_to,
                records,
                need,
            }),
            ..self
        }
    }

    const fn app_reads(self) -> Self {
        TracepointRow {
            app_reads: true,
            ..self
        }
    }

    const fn decoded_by(self, explain: bool, app: bool) -> Self {
        TracepointRow {
            decoded_by: Decoders { explain, app },
            ..self
        }
    }
}

const COMM_PID_PRIO_CPU: &[&str] = &["comm", "pid", "prio", "target_cpu"];

/// A named vector's entry or exit: the explain sets record every one (`local_timer`, which
/// fires on every timer expiry the probe's included, only in the full set); `rtlab trace`
/// records the timer and reschedule vectors and reads two more from a trace.dat.
const fn vector(tracepoint: Tracepoint, name: &'static str, vector: &'static str) -> TracepointRow {
    let is_timer = matches!(vector.as_bytes(), b"local_timer");
    let set = if is_timer { Full } else { Standard };
    row(tracepoint, "irq_vectors", name, &[])
        .explain(set, Optional)
        .decoded_by(true, true)
}

/// Every tracepoint, in the order from which each recorder's list is derived.
pub const TRACEPOINTS: &[TracepointRow] = &[
    row(
        Tracepoint::SchedSwitch,
        "sched",
        "sched_switch",
        &[
            "prev_comm",
            "prev_pid",
            "prev_prio",
            "prev_state",
            "next_comm",
            "next_pid",
            "next_prio",
        ],
    )
    .explain(Standard, Required)
    .explain_bpf("rtlab_sched_switch", Standard, Required)
    .app(Required)
    .app_bpf("apptrace_switch", "sched_switch", true, Required)
    .app_reads()
    .decoded_by(true, true),
    row(
        Tracepoint::SchedWaking,
        "sched",
        "sched_waking",
        COMM_PID_PRIO_CPU,
    )
    .explain(Standard, Required)
    .explain_bpf("rtlab_sched_waking", Standard, Required)
    .app(Required)
    .app_bpf("apptrace_waking", "sched_waking", true, Required)
    .app_reads()
    .decoded_by(true, true),
    row(
        Tracepoint::IrqHandlerEntry,
        "irq",
        "irq_handler_entry",
        &["irq", "name"],
    )
    .explain(Standard, Required)
    .explain_bpf("rtlab_irq_handler_entry", Standard, Required)
    .app(Optional)
    .app_bpf("apptrace_irq_entry", "irq_handler_entry", true, Required)
    .app_reads()
    .decoded_by(true, true),
    row(
        Tracepoint::IrqHandlerExit,
        "irq",
        "irq_handler_exit",
        &["irq"],
    )
    .explain(Standard, Required)
    .explain_bpf("rtlab_irq_handler_exit", Standard, Required)
    .app(Optional)
    .app_bpf("apptrace_irq_exit", "irq_handler_exit", true, Required)
    .app_reads()
    .decoded_by(true, true),
    row(Tracepoint::SoftirqEntry, "irq", "softirq_entry", &["vec"])
        .explain(Standard, Required)
        .explain_bpf("rtlab_softirq_entry", Standard, Required)
        .app(Optional)
        .app_bpf("apptrace_softirq_entry", "softirq_entry", true, Required)
        .app_reads()
        .decoded_by(true, true),
    row(Tracepoint::SoftirqExit, "irq", "softirq_exit", &["vec"])
        .explain(Standard, Required)
        .explain_bpf("rtlab_softirq_exit", Standard, Required)
        .app(Optional)
        .app_bpf("apptrace_softirq_exit", "softirq_exit", true, Required)
        .app_reads()
        .decoded_by(true, true),
    // The BPF recorder finds the measuring threads' timers here (the tracepoint carries their
    // expiry): it needs these in both sets.
    row(
        Tracepoint::HrtimerExpireEntry,
        "timer",
        "hrtimer_expire_entry",
        &["hrtimer", "now", "function"],
    )
    .explain(Full, Optional)
    .explain_bpf("rtlab_hrtimer_expire_entry", Standard, Required)
    .decoded_by(true, false),
    row(
        Tracepoint::HrtimerExpireExit,
        "timer",
        "hrtimer_expire_exit",
        &["hrtimer"],
    )
    .explain(Full, Optional)
    .explain_bpf("rtlab_hrtimer_expire_exit", Standard, Required)
    .decoded_by(true, false),
    row(
        Tracepoint::HrtimerStart,
        "timer",
        "hrtimer_start",
        &["hrtimer", "function", "expires"],
    )
    .explain(Full, Optional)
    .decoded_by(true, false),
    row(
        Tracepoint::WorkqueueExecuteStart,
        "workqueue",
        "workqueue_execute_start",
        &["function"],
    )
    .explain(Standard, Optional)
    .explain_bpf("rtlab_workqueue_execute_start", Standard, Optional)
    .decoded_by(true, false),
    row(
        Tracepoint::WorkqueueExecuteEnd,
        "workqueue",
        "workqueue_execute_end",
        &["function"],
    )
    .explain(Standard, Optional)
    .explain_bpf("rtlab_workqueue_execute_end", Standard, Optional)
    .decoded_by(true, false),
    row(Tracepoint::IpiSendCpu, "ipi", "ipi_send_cpu", &["cpu"])
        .explain(Standard, Optional)
        .decoded_by(true, false),
    row(Tracepoint::IpiSendCpumask, "ipi", "ipi_send_cpumask", &[])
        .explain(Standard, Optional)
        .decoded_by(true, false),
    // x86 vectors: a timer's wake-up runs in `local_timer`, which the irq events miss.
    vector(
        Tracepoint::VectorEntry(Some("local_timer")),
        "local_timer_entry",
        "local_timer",
    )
    .explain_bpf("rtlab_local_timer_entry", Full, Optional)
    .app(Optional)
    .app_bpf("apptrace_timer_entry", "local_timer_entry", true, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorExit(Some("local_timer")),
        "local_timer_exit",
        "local_timer",
    )
    .explain_bpf("rtlab_local_timer_exit", Full, Optional)
    .app(Optional)
    .app_bpf("apptrace_timer_exit", "local_timer_exit", true, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorEntry(Some("reschedule")),
        "reschedule_entry",
        "reschedule",
    )
    .explain_bpf("rtlab_reschedule_entry", Standard, Optional)
    .app(Optional)
    .app_bpf("apptrace_resched_entry", "reschedule_entry", true, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorExit(Some("reschedule")),
        "reschedule_exit",
        "reschedule",
    )
    .explain_bpf("rtlab_reschedule_exit", Standard, Optional)
    .app(Optional)
    .app_bpf("apptrace_resched_exit", "reschedule_exit", true, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorEntry(Some("call_function")),
        "call_function_entry",
        "call_function",
    )
    .explain_bpf("rtlab_call_function_entry", Standard, Optional),
    vector(
        Tracepoint::VectorExit(Some("call_function")),
        "call_function_exit",
        "call_function",
    )
    .explain_bpf("rtlab_call_function_exit", Standard, Optional),
    vector(
        Tracepoint::VectorEntry(Some("call_function_single")),
        "call_function_single_entry",
        "call_function_single",
    )
    .explain_bpf("rtlab_call_function_single_entry", Standard, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorExit(Some("call_function_single")),
        "call_function_single_exit",
        "call_function_single",
    )
    .explain_bpf("rtlab_call_function_single_exit", Standard, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorEntry(Some("irq_work")),
        "irq_work_entry",
        "irq_work",
    )
    .explain_bpf("rtlab_irq_work_entry", Standard, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorExit(Some("irq_work")),
        "irq_work_exit",
        "irq_work",
    )
    .explain_bpf("rtlab_irq_work_exit", Standard, Optional)
    .app_reads(),
    vector(
        Tracepoint::VectorEntry(Some("x86_platform_ipi")),
        "x86_platform_ipi_entry",
        "x86_platform_ipi",
    ),
    vector(
        Tracepoint::VectorExit(Some("x86_platform_ipi")),
        "x86_platform_ipi_exit",
        "x86_platform_ipi",
    ),
    vector(
        Tracepoint::VectorEntry(Some("thermal_apic")),
        "thermal_apic_entry",
        "thermal_apic",
    ),
    vector(
        Tracepoint::VectorExit(Some("thermal_apic")),
        "thermal_apic_exit",
        "thermal_apic",
    ),
    vector(
        Tracepoint::VectorEntry(Some("error_apic")),
        "error_apic_entry",
        "error_apic",
    ),
    vector(
        Tracepoint::VectorExit(Some("error_apic")),
        "error_apic_exit",
        "error_apic",
    ),
    vector(
        Tracepoint::VectorEntry(Some("spurious_apic")),
        "spurious_apic_entry",
        "spurious_apic",
    ),
    vector(
        Tracepoint::VectorExit(Some("spurious_apic")),
        "spurious_apic_exit",
        "spurious_apic",
    ),
    row(
        Tracepoint::SchedWakeup,
        "sched",
        "sched_wakeup",
        COMM_PID_PRIO_CPU,
    )
    .explain(Full, Optional)
    .explain_bpf("rtlab_sched_wakeup", Full, Optional)
    .app_bpf("apptrace_wakeup", "sched_wakeup", false, Required)
    .app_reads()
    .decoded_by(true, true),
    row(
        Tracepoint::SchedWakeupNew,
        "sched",
        "sched_wakeup_new",
        &["comm", "pid", "prio"],
    )
    .app(Optional)
    .app_bpf("apptrace_wakeup_new", "sched_wakeup_new", true, Required)
    .app_reads()
    .decoded_by(false, true),
    row(
        Tracepoint::SchedProcessFork,
        "sched",
        "sched_process_fork",
        &["parent_pid", "child_comm", "child_pid"],
    )
    .app(Optional)
    .app_bpf("apptrace_fork", "sched_process_fork", true, Required)
    .app_reads()
    .decoded_by(false, true),
    row(
        Tracepoint::SchedProcessExit,
        "sched",
        "sched_process_exit",
        &["comm", "pid"],
    )
    .app(Optional)
    .app_bpf("apptrace_exit", "sched_process_exit", true, Required)
    .app_reads()
    .decoded_by(false, true),
    row(
        Tracepoint::SchedMigrateTask,
        "sched",
        "sched_migrate_task",
        &["pid", "prio", "orig_cpu", "dest_cpu"],
    )
    .explain(Full, Optional)
    .explain_bpf("rtlab_sched_migrate_task", Full, Optional)
    .app(Optional)
    .app_bpf("apptrace_migrate", "sched_migrate_task", true, Required)
    .app_reads()
    .decoded_by(true, true),
    row(
        Tracepoint::SchedPiSetprio,
        "sched",
        "sched_pi_setprio",
        &["comm", "pid", "oldprio", "newprio"],
    )
    .app(Optional)
    .app_bpf("apptrace_pi_setprio", "sched_pi_setprio", true, Required)
    .app_reads()
    .decoded_by(false, true),
    // The futex syscalls: the BPF recorder reads them from the raw syscall tracepoints.
    row(
        Tracepoint::SysEnterFutex,
        "syscalls",
        "sys_enter_futex",
        &["uaddr", "op", "val"],
    )
    .app(Optional)
    .app_bpf("apptrace_sys_enter", "sys_enter", true, Required)
    .app_reads()
    .decoded_by(false, true),
    row(
        Tracepoint::SysExitFutex,
        "syscalls",
        "sys_exit_futex",
        &["ret"],
    )
    .app(Optional)
    .app_bpf("apptrace_sys_exit", "sys_exit", true, Required)
    .app_reads()
    .decoded_by(false, true),
    // A `trace_marker` write: no recorder enables it, every tracefs instance records it.
    row(Tracepoint::Print, "ftrace", "print", &["buf"]).decoded_by(true, false),
];

/// `--explain`'s tracefs events, standard set or (`full`) full set: the set's events other than
/// vectors, the standard ones first, then the set's vectors.
pub fn explain_tracefs_events(full: bool) -> Vec<(&'static TracepointRow, Need)> {
    let in_set = |row: &&'static TracepointRow, set: ExplainSet| {
        row.explain.is_some_and(|used| used.set == set)
    };
    let standard = TRACEPOINTS
        .iter()
        .filter(|row| !row.is_vector() && in_set(row, Standard));
    let full_only = TRACEPOINTS
        .iter()
        .filter(|row| full && !row.is_vector() && in_set(row, Full));
    let vectors = TRACEPOINTS
        .iter()
        .filter(|row| row.is_vector() && (in_set(row, Standard) || (full && in_set(row, Full))));
    standard
        .chain(full_only)
        .chain(vectors)
        .filter_map(|row| row.explain.map(|used| (row, used.need)))
        .collect()
}

/// `--explain`'s BPF programs in attach order: the standard set's, then the full set's.
pub fn explain_bpf_programs() -> Vec<(&'static TracepointRow, ExplainBpf)> {
    let of_set = |set: ExplainSet| {
        TRACEPOINTS.iter().filter_map(move |row| {
            row.explain_bpf
                .filter(|program| program.set == set)
                .map(|program| (row, program))
        })
    };
    of_set(Standard).chain(of_set(Full)).collect()
}

/// `rtlab trace record`'s tracefs events: the task events, then the interrupts'.
pub fn app_tracefs_events() -> Vec<(&'static TracepointRow, Need)> {
    tasks_then_interrupts(|row| row.app)
}

/// The events `rtlab trace` reads from a trace.dat (the task events, then the interrupts').
pub fn app_read_events() -> Vec<&'static TracepointRow> {
    tasks_then_interrupts(|row| row.app_reads.then_some(()))
        .into_iter()
        .map(|(row, ())| row)
        .collect()
}

/// `rtlab trace record`'s BPF programs in attach order: the task events', then the interrupts'
/// exits, then their entries — an entry seen before its exit's program is attached would leave
/// the kernel side's interrupt depth one too high (until the CPU's next switch).
pub fn app_bpf_programs() -> Vec<(&'static TracepointRow, AppBpf)> {
    let used = |row: &'static TracepointRow| row.app_bpf.map(|program| (row, program));
    let tasks = TRACEPOINTS.iter().filter(|row| !row.is_interrupt());
    let exits = TRACEPOINTS
        .iter()
        .filter(|row| row.is_interrupt() && !row.name.ends_with("_entry"));
    let entries = TRACEPOINTS
        .iter()
        .filter(|row| row.is_interrupt() && row.name.ends_with("_entry"));
    tasks.chain(exits).chain(entries).filter_map(used).collect()
}

fn tasks_then_interrupts<T>(
    used: impl Fn(&'static TracepointRow) -> Option<T>,
) -> Vec<(&'static TracepointRow, T)> {
    let tasks = TRACEPOINTS.iter().filter(|row| !row.is_interrupt());
    let interrupts = TRACEPOINTS.iter().filter(|row| row.is_interrupt());
    tasks
        .chain(interrupts)
        .filter_map(|row| used(row).map(|value| (row, value)))
        .collect()
}

#[cfg(test)]
mod tests;
