//! `rtlab timers --audit`: the settings that change everyone's timing, judged.

use super::Args;
use crate::output::PendingOutput;
use rtlab_analysis::timers::judge_audit;
use rtlab_core::timer_audit::{AuditReport, AUDIT_SCHEMA};
use std::process::ExitCode;

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let facts = rtlab_sys::timer_audit::collect();
    let items = judge_audit(&facts);
    let mut skipped = facts.skipped.clone();
    if !facts.as_root {
        skipped.push("not root: other processes' open files and timer slack are hidden, and debugfs (the fair server) is unreadable; run as root for the whole picture".to_owned());
    }
    skipped.push("what each cpu_dma_latency holder asked for: the kernel keeps it inside the open file and shows only the least of all requests (reading /dev/cpu_dma_latency)".to_owned());
    let report = AuditReport {
        schema: AUDIT_SCHEMA.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host: rtlab_sys::host::describe(None),
        items,
        skipped,
        facts,
    };
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&rtlab_render::timers::audit(&report))?;
    }
    if let Some(output) = json_output {
        output.commit(
            &(serde_json::to_string_pretty(&report).expect("the audit serialises") + "\n"),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
