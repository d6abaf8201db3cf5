//! `rtlab timers --audit`: the settings that change everyone's timing, judged.

use super::Args;
use crate::output::PendingOutput;
use std::process::ExitCode;

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.record.prepare_json()?;
    let report = rtlab_session::timers::audit(std::env::args().collect());
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
