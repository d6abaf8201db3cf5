//! `rtlab plan`'s text: grants, denials and per-CPU timelines.

use rtlab_core::plan_report::PlanReport;
use std::fmt::Write;

/// Slots printed per CPU in the text timeline; `--json` always has them all.
const TIMELINE_SLOTS_SHOWN: usize = 32;

/// A duration printed exactly (the planner's roundings matter to the nanosecond): the largest unit
/// that divides it, else microseconds with every decimal needed.
pub fn exact(nanos: u64) -> String {
    for (unit, name) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if nanos >= unit && (nanos / unit) * unit == nanos {
            return format!("{}{name}", nanos / unit);
        }
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    let text = format!("{}.{:03}", nanos / 1_000, nanos % 1_000);
    format!("{}us", text.trim_end_matches('0'))
}

/// The plan: a summary line, grants, denials and each CPU's timeline.
/// The plan as text: [`write_text`].
pub fn text(output: &PlanReport) -> String {
    crate::to_text(|out| write_text(out, output))
}

pub fn write_text(out: &mut impl Write, output: &PlanReport) -> std::fmt::Result {
    let rebuilds = output
        .grants
        .iter()
        .filter(|grant| !grant.incremental)
        .count();
    writeln!(
        out,
        "{} requests on {} CPUs, quantum {}, cap {}: {} granted ({} incremental, {} rebuilds), {} denied",
        output.requests,
        output.n_cpus,
        exact(output.quantum_ns),
        output.cap,
        output.grants.len(),
        output.grants.len() - rebuilds,
        rebuilds,
        output.denied.len()
    )?;
    if !output.grants.is_empty() {
        writeln!(out, "\nGranted")?;
        let owner_width = output
            .grants
            .iter()
            .map(|grant| grant.owner.len())
            .max()
            .unwrap_or(5)
            .max(5);
        writeln!(
            out,
            "  {:<owner_width$}  {:>4}  {:>17}  {:>17}  path",
            "owner", "cpu", "requested", "granted"
        )?;
        for grant in &output.grants {
            let requested = format!(
                "{}/{}",
                exact(grant.requested.amount_ns),
                exact(grant.requested.period_ns)
            );
            let granted = format!(
                "{}/{}",
                exact(grant.granted.amount_ns),
                exact(grant.granted.period_ns)
            );
            let path = if grant.incremental {
                "incremental"
            } else {
                "rebuild"
            };
            writeln!(
                out,
                "  {:<owner_width$}  {:>4}  {requested:>17}  {granted:>17}  {path}",
                grant.owner, grant.cpu
            )?;
        }
    }
    if !output.denied.is_empty() {
        writeln!(out, "\nDenied")?;
        for denied in &output.denied {
            writeln!(out, "  {}: {}", denied.owner, denied.reason)?;
        }
    }
    writeln!(out, "\nTimeline (one major cycle per CPU, repeating)")?;
    for cpu in &output.cpus {
        let reserved_percent = cpu.reserved_ppm as f64 / 10_000.0;
        writeln!(
            out,
            "  cpu {}: cycle {}, {reserved_percent:.2}% reserved, {} slots",
            cpu.cpu,
            exact(cpu.cycle_ns),
            cpu.slots.len()
        )?;
        for slot in cpu.slots.iter().take(TIMELINE_SLOTS_SHOWN) {
            writeln!(
                out,
                "    {:>14} +{:<12} {}",
                exact(slot.start_ns),
                exact(slot.length_ns),
                slot.owner
            )?;
        }
        if cpu.slots.len() > TIMELINE_SLOTS_SHOWN {
            writeln!(
                out,
                "    … {} more slots (--json OUT lists them all)",
                cpu.slots.len() - TIMELINE_SLOTS_SHOWN
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::exact;

    #[test]
    fn exact_durations_lose_nothing() {
        assert_eq!(exact(0), "0ns");
        assert_eq!(exact(1_024_000_000), "1024ms");
        assert_eq!(exact(976_562), "976.562us");
        assert_eq!(exact(500_000), "500us");
        assert_eq!(exact(2_000_000_000), "2s");
        assert_eq!(exact(1_500), "1.5us");
    }
}
