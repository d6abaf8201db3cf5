//! `trace watch`'s comparison with PipeWire's own count: which PipeWire server the watched
//! program talks to, `pw-profiler` run for the watch's window (`crate::pipewire`), and the
//! comparison of its count with rtlab's that rtlab-render writes out.

use crate::cycle_marker::CycleMarker;
use crate::pipewire::{PipewireError, PipewireServer, ProfilerSession};
use crate::record::Target;
use rtlab_core::pipewire_count::{CompetitorShare, PipewireComparison, PipewireCycle};

/// Whether to compare with PipeWire (`--pipewire`, `--no-pipewire`, neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipewireWish {
    /// When the program has libpipewire mapped; a failure is a line in the summary.
    Auto,
    /// Always (the server from the program's environment, else rtlab's); a failure to start
    /// the profiler is an error (exit 3).
    Required,
    Never,
}

impl PipewireWish {
    /// `--pipewire` (required) wins over `--no-pipewire` (never); neither is `Auto`.
    pub fn from_flags(pipewire: bool, no_pipewire: bool) -> PipewireWish {
        match (pipewire, no_pipewire) {
            (true, _) => PipewireWish::Required,
            (_, true) => PipewireWish::Never,
            _ => PipewireWish::Auto,
        }
    }
}

/// The cycle a watch judges by: a PipeWire client compared with PipeWire's count
/// (`compared`) is judged by PipeWire's cycle, unless told otherwise (`no_pipewire_marker`) or
/// given a marker; with the choice to tell the user when PipeWire's cycle was taken or could
/// not be.
pub fn judged_by(
    cycle_marker: Option<CycleMarker>,
    compared: bool,
    no_pipewire_marker: bool,
) -> (Option<CycleMarker>, Option<PipewireCycle>) {
    if cycle_marker.is_some() || !compared || no_pipewire_marker {
        return (cycle_marker, None);
    }
    match crate::cycle_marker::resolve(crate::cycle_marker::PIPEWIRE_PRESET) {
        Ok(marker) => {
            let taken = PipewireCycle::Taken {
                marker: marker.describe(),
            };
            (Some(marker), Some(taken))
        }
        Err(error) => (
            None,
            Some(PipewireCycle::Unavailable {
                error: error.to_string(),
            }),
        ),
    }
}

/// The profiler running for a watch, or why it is not.
pub struct PipewireWatch {
    session: Result<ProfilerSession, String>,
    watched_pids: Vec<u32>,
}

/// The processes `target` names now (a command's is not known before it starts).
fn target_pids(target: &Target) -> Vec<u32> {
    match target {
        Target::Pid(pid) => vec![*pid],
        Target::Comm(name) => {
            let mut pids: Vec<u32> = rtlab_sys::proc_thread::threads_named(name)
                .unwrap_or_default()
                .into_iter()
                .filter(|(pid, tid)| pid == tid)
                .map(|(pid, _)| pid)
                .collect();
            pids.dedup();
            pids
        }
        Target::Command(_) => Vec::new(),
    }
}

/// Starts `pw-profiler` for the watch of `target` when `wish` asks for it: `Ok(None)` when
/// there is nothing to compare with, an error only when `--pipewire` was given
/// ([`PipewireWish::Required`]) and the profiler cannot start.
pub fn start(target: &Target, wish: PipewireWish) -> Result<Option<PipewireWatch>, PipewireError> {
    if wish == PipewireWish::Never {
        return Ok(None);
    }
    let watched_pids = target_pids(target);
    let server = watched_pids
        .iter()
        .find_map(|pid| PipewireServer::of_process(*pid));
    let server = match (server, wish) {
        (Some(server), _) => server,
        (None, PipewireWish::Required) => PipewireServer::of_this_process(),
        (None, _) => return Ok(None),
    };
    let session = match ProfilerSession::start(&server) {
        Ok(session) => Ok(session),
        Err(error) if wish == PipewireWish::Required => return Err(error),
        Err(error) => Err(error.to_string()),
    };
    Ok(Some(PipewireWatch {
        session,
        watched_pids,
    }))
}

impl PipewireWatch {
    /// Stops the profiler and compares its count over `window` (rtlab's first and last event,
    /// CLOCK_MONOTONIC ns) with rtlab's `misses`, `top_competitor` the reservable culprit with
    /// the most of them.
    pub fn finish(
        self,
        window: Option<(u64, u64)>,
        misses: u64,
        top_competitor: Option<(String, u64)>,
    ) -> PipewireComparison {
        let session = match self.session {
            Ok(session) => session,
            Err(reason) => return PipewireComparison::Unavailable { reason },
        };
        match session.finish(&self.watched_pids, window) {
            Ok(profile) => PipewireComparison::counted(
                profile,
                misses,
                top_competitor.map(|(label, misses)| CompetitorShare { label, misses }),
            ),
            Err(error) => PipewireComparison::Unavailable {
                reason: error.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_choose_the_wish_and_pipewire_s_cycle_is_asked_for_only_without_a_marker() {
        assert_eq!(
            PipewireWish::from_flags(true, false),
            PipewireWish::Required
        );
        assert_eq!(PipewireWish::from_flags(false, true), PipewireWish::Never);
        assert_eq!(PipewireWish::from_flags(false, false), PipewireWish::Auto);
        assert!(matches!(judged_by(None, false, false), (None, None)));
        assert!(matches!(judged_by(None, true, true), (None, None)));
    }
}
