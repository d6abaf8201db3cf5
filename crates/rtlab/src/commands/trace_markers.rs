//! `--cycle-marker` and `--work-done-marker`, resolved once for `trace record`, `trace watch`
//! and `reserve --auto` (a module of its own, so those commands do not use each other).

/// `--cycle-marker SPEC` resolved to its probe (exit 2 naming what is wrong).
pub(crate) fn cycle_marker_flag(
    spec: Option<&str>,
) -> anyhow::Result<Option<rtlab_apptrace::cycle_marker::CycleMarker>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    rtlab_apptrace::cycle_marker::resolve(spec)
        .map(Some)
        .map_err(|error| crate::exit::input(format!("--cycle-marker: {error}")))
}

/// `--work-done-marker SPEC` resolved to its probes (exit 2 naming what is wrong).
pub(crate) fn work_done_marker_flag(
    spec: Option<&str>,
) -> anyhow::Result<Option<rtlab_apptrace::cycle_marker::CycleMarker>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    rtlab_apptrace::cycle_marker::resolve_work_done(spec)
        .map(Some)
        .map_err(|error| crate::exit::input(format!("--work-done-marker: {error}")))
}

/// The counting rule a cycle marker's threads are judged by: PipeWire's for its preset.
pub(crate) fn cycle_rule(
    marker: Option<&rtlab_apptrace::cycle_marker::CycleMarker>,
) -> rtlab_apptrace::analyze::CycleRule {
    match marker {
        Some(marker) if marker.spec == rtlab_apptrace::cycle_marker::PIPEWIRE_PRESET => {
            rtlab_apptrace::analyze::CycleRule::Pipewire
        }
        _ => rtlab_apptrace::analyze::CycleRule::Jack,
    }
}
