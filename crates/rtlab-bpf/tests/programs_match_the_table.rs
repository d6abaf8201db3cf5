//! The BPF C sources' programs against rtlab-core's tracepoint table (`rtlab_core::tracepoints`):
//! every program the table names is in the source, on the tracepoint the table says, and the
//! source has no tracepoint program the table does not name. Pure: reads the sources, loads
//! nothing.

use rtlab_core::tracepoints::{app_bpf_programs, explain_bpf_programs, Tracepoint, TRACEPOINTS};
use std::collections::BTreeSet;

/// (program, tracepoint) of every `tp_btf` program in a C source: `SEC("tp_btf/X")` before
/// `int NAME(`, and rtlab.bpf.c's `TRACEPOINT_PROGRAM(X, …)` (`rtlab_X`) and
/// `VECTOR_PROGRAMS(X, …)` (`rtlab_X_entry`, `rtlab_X_exit`).
fn programs_in(source: &str) -> BTreeSet<(String, String)> {
    let mut programs = BTreeSet::new();
    let mut lines = source.lines().peekable();
    let mut in_definition = false;
    while let Some(line) = lines.next() {
        let line = line.trim();
        if in_definition || line.starts_with("#define") {
            // A macro's definition (continued by backslashes), not a program.
            in_definition = line.ends_with('\\');
            continue;
        }
        if let Some(rest) = line.strip_prefix("SEC(\"tp_btf/") {
            let tracepoint = rest.split('"').next().unwrap_or_default();
            let next = lines.peek().copied().unwrap_or_default().trim();
            let name = next
                .strip_prefix("int ")
                .and_then(|rest| rest.split('(').next())
                .unwrap_or_else(|| panic!("no program after SEC(\"tp_btf/{tracepoint}\")"));
            programs.insert((name.to_owned(), tracepoint.to_owned()));
        } else if let Some(rest) = line.strip_prefix("TRACEPOINT_PROGRAM(") {
            let tracepoint = rest.split(',').next().unwrap_or_default().trim();
            programs.insert((format!("rtlab_{tracepoint}"), tracepoint.to_owned()));
        } else if let Some(rest) = line.strip_prefix("VECTOR_PROGRAMS(") {
            let vector = rest.split(',').next().unwrap_or_default().trim();
            for suffix in ["entry", "exit"] {
                let tracepoint = format!("{vector}_{suffix}");
                programs.insert((format!("rtlab_{tracepoint}"), tracepoint));
            }
        }
    }
    programs
}

fn source(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("bpf")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_explain_recorders_programs_are_the_tables() {
    let table: BTreeSet<(String, String)> = explain_bpf_programs()
        .into_iter()
        .map(|(row, program)| (program.program.to_owned(), row.name.to_owned()))
        .collect();
    assert_eq!(programs_in(&source("rtlab.bpf.c")), table);
}

#[test]
fn the_trace_recorders_programs_are_the_tables() {
    let table: BTreeSet<(String, String)> = app_bpf_programs()
        .into_iter()
        .map(|(_, program)| (program.program.to_owned(), program.attach_to.to_owned()))
        .collect();
    assert_eq!(programs_in(&source("apptrace.bpf.c")), table);
}

#[test]
fn the_explain_recorders_vector_numbers_name_the_tables_vectors() {
    // The C `VECTOR_*` ids index `VECTOR_NAMES`; each names a vector the table attaches.
    let attached: Vec<&str> = TRACEPOINTS
        .iter()
        .filter(|row| row.explain_bpf.is_some())
        .filter_map(|row| match row.tracepoint {
            Tracepoint::VectorEntry(Some(vector)) => Some(vector),
            _ => None,
        })
        .collect();
    assert_eq!(rtlab_bpf::VECTOR_NAMES.to_vec(), attached);
}

#[test]
fn the_source_reader_sees_every_form() {
    let text = "#define TRACEPOINT_PROGRAM(tracepoint, call) \\\n\tSEC(\"tp_btf/\" #tracepoint) \\\n\tint rtlab_##tracepoint(__u64 *ctx)\n\
                SEC(\"tp_btf/sched_switch\")\nint rtlab_sched_switch(__u64 *ctx)\n\
                TRACEPOINT_PROGRAM(sched_waking, record(ctx))\nVECTOR_PROGRAMS(irq_work, 4)\n";
    let found: Vec<(String, String)> = programs_in(text).into_iter().collect();
    let expected: Vec<(String, String)> = [
        ("rtlab_irq_work_entry", "irq_work_entry"),
        ("rtlab_irq_work_exit", "irq_work_exit"),
        ("rtlab_sched_switch", "sched_switch"),
        ("rtlab_sched_waking", "sched_waking"),
    ]
    .iter()
    .map(|(program, tracepoint)| ((*program).to_owned(), (*tracepoint).to_owned()))
    .collect();
    assert_eq!(found, expected);
}
