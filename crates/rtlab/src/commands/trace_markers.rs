//! `--cycle-marker` and `--work-done-marker`, resolved once for `trace record`, `trace watch`
//! and `reserve --auto`, and the recording's errors as exit codes (a module of its own, so those
//! commands do not use each other).

/// `--cycle-marker SPEC` resolved to its probe (exit 2 naming what is wrong).
pub(crate) fn cycle_marker_flag(
    spec: Option<&str>,
) -> anyhow::Result<Option<rtlab_trace::cycle_marker::CycleMarker>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    rtlab_trace::cycle_marker::resolve(spec)
        .map(Some)
        .map_err(|error| crate::exit::input(format!("--cycle-marker: {error}")))
}

/// `--work-done-marker SPEC` resolved to its probes (exit 2 naming what is wrong).
pub(crate) fn work_done_marker_flag(
    spec: Option<&str>,
) -> anyhow::Result<Option<rtlab_trace::cycle_marker::CycleMarker>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    rtlab_trace::cycle_marker::resolve_work_done(spec)
        .map(Some)
        .map_err(|error| crate::exit::input(format!("--work-done-marker: {error}")))
}

/// A recording's error as an exit code: no such program, or a command that cannot start, is
/// the user's (2); the rest the system's (3).
pub(crate) fn record_error(error: rtlab_trace::record::RecordError) -> anyhow::Error {
    use rtlab_trace::record::RecordError;
    match error {
        RecordError::NoTarget(_) | RecordError::Spawn { .. } => crate::exit::input(error),
        other => anyhow::Error::new(other),
    }
}

/// `reserve --auto`'s observation (and the daemon's observer's): the target recorded for
/// `duration` and analysed whole (`rtlab_trace::watch::observe`), its errors as exit codes.
pub(crate) fn observe(
    target: &rtlab_trace::record::Target,
    duration: std::time::Duration,
    cycle_marker: Option<&rtlab_trace::cycle_marker::CycleMarker>,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<rtlab_trace::analyze::report::TraceReport> {
    use rtlab_trace::watch::ObserveError;
    rtlab_trace::watch::observe(target, duration, cycle_marker, stop).map_err(|error| match error {
        ObserveError::Record(error) => record_error(error),
        other => anyhow::Error::new(other),
    })
}
