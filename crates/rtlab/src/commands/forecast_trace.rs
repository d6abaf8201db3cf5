//! `rtlab forecast --trace FILE`: the forecast from an application's own trace (an `rtlab trace`
//! recording or a trace-cmd trace.dat). The trace is analysed (`rtlab_trace::source`), the
//! forecast computed by `rtlab_trace::forecast` and written by `rtlab_render::trace_forecast`;
//! this module reads the flags and prints.

use crate::output::PendingOutput;
use rtlab_analysis::trace_forecast::FORECAST_TRACE_SCHEMA;
use rtlab_trace::analyze::AnalysisConfig;
use rtlab_trace::source::SourceError;
use std::path::Path;
use std::process::ExitCode;

/// What `--trace` was given.
pub struct TraceRequest<'a> {
    pub file: &'a Path,
    pub sample_rate: Option<u32>,
    pub tid: Option<i32>,
}

pub fn run(request: TraceRequest, json: Option<PendingOutput>) -> anyhow::Result<ExitCode> {
    let header = crate::output::header(rtlab_trace::analyze::report::SCHEMA, None);
    let (report, _) =
        rtlab_trace::source::analyze_path(request.file, AnalysisConfig::default(), header)
            // Unreadable or malformed: the user's input either way (the message names the file).
            .map_err(|error: SourceError| crate::exit::input(error))?;
    let name = request.file.display();
    let output = rtlab_trace::forecast::forecast(&report, request.tid, request.sample_rate)
        .map_err(|error| crate::exit::input(format!("{name}: {error}")))?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&rtlab_render::trace_forecast::render(&output))?;
    }
    if let Some(json) = json {
        json.commit_json(FORECAST_TRACE_SCHEMA, None, &output)?;
    }
    Ok(ExitCode::SUCCESS)
}
