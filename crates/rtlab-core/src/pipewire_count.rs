//! PipeWire's own verdict on a watched program, beside rtlab's: what PipeWire's profiler
//! counted (each cycle, each follower node's status when the driver began the next cycle) and
//! what rtlab counted for the same window. rtlab-trace fills it from `pw-profiler`'s log,
//! the CLI adds rtlab's figures, rtlab-render writes it out; it lives here so the renderer can
//! read it without the crates that trace.

use serde::{Deserialize, Serialize};

/// One follower node of the PipeWire graph as the profiler saw it over the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipewireFollower {
    /// The node's id in the PipeWire graph.
    pub node_id: u32,
    /// `node.name` (a JACK client through `pw-jack`: its client name).
    pub name: String,
    /// Cycles in which it was scheduled (a status recorded).
    pub cycles: u64,
    /// Cycles it had not finished (status triggered or awake, not finished) when the driver
    /// started the next: what `pw-top`'s ERR column counts.
    pub unfinished: u64,
    /// Whether it is the watched program's node (its client's process id is the target's).
    pub watched: bool,
}

/// What PipeWire's profiler counted over the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipewireProfile {
    /// The driver's node id and name (`Dummy-Driver`, an ALSA sink, …), when one was logged.
    pub driver_id: Option<u32>,
    pub driver_name: Option<String>,
    /// Cycles the profiler logged.
    pub cycles: u64,
    /// Every follower seen, in the order the profiler first logged them.
    pub followers: Vec<PipewireFollower>,
}

impl PipewireProfile {
    /// Unfinished cycles of the watched program's nodes, or of every follower when none is
    /// known to be the program's (the profiler names nodes, not processes).
    pub fn unfinished(&self) -> u64 {
        let watched: Vec<_> = self.followers.iter().filter(|f| f.watched).collect();
        if watched.is_empty() {
            self.followers.iter().map(|f| f.unfinished).sum()
        } else {
            watched.iter().map(|f| f.unfinished).sum()
        }
    }

    /// The followers [`PipewireProfile::unfinished`] counts.
    pub fn counted(&self) -> Vec<&PipewireFollower> {
        let watched: Vec<_> = self.followers.iter().filter(|f| f.watched).collect();
        if watched.is_empty() {
            self.followers.iter().collect()
        } else {
            watched
        }
    }
}

/// PipeWire's count beside rtlab's for one watch (`trace watch`'s summary and its
/// `--summary-json`'s `pipewire`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PipewireComparison {
    /// The profiler ran for the window.
    Counted {
        profile: PipewireProfile,
        /// PipeWire's unfinished cycles of the watched nodes ([`PipewireProfile::unfinished`]).
        pipewire_unfinished: u64,
        /// rtlab's deadline misses over the same window.
        rtlab_misses: u64,
        /// rtlab's misses blamed on the thread that took the CPU most often, with its name.
        top_competitor: Option<CompetitorShare>,
        /// rtlab's count over PipeWire's (null when PipeWire counted none).
        ratio: Option<f64>,
    },
    /// PipeWire's count could not be had: why, in words (no profiler module, no `pw-profiler`,
    /// no follower in the graph, …).
    Unavailable { reason: String },
}

/// rtlab's misses that one competitor caused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompetitorShare {
    /// "qhog0 (SCHED_FIFO 95)"
    pub label: String,
    pub misses: u64,
}

impl PipewireComparison {
    /// The comparison of a profile with rtlab's misses.
    pub fn counted(
        profile: PipewireProfile,
        rtlab_misses: u64,
        top_competitor: Option<CompetitorShare>,
    ) -> PipewireComparison {
        let pipewire_unfinished = profile.unfinished();
        let ratio =
            (pipewire_unfinished > 0).then(|| rtlab_misses as f64 / pipewire_unfinished as f64);
        PipewireComparison::Counted {
            profile,
            pipewire_unfinished,
            rtlab_misses,
            top_competitor,
            ratio,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower(name: &str, unfinished: u64, watched: bool) -> PipewireFollower {
        PipewireFollower {
            node_id: 19,
            name: name.into(),
            cycles: 100,
            unfinished,
            watched,
        }
    }

    #[test]
    fn the_watched_followers_are_counted_or_all_when_none_is_known() {
        let mut profile = PipewireProfile {
            followers: vec![follower("a", 3, false), follower("b", 5, false)],
            ..PipewireProfile::default()
        };
        assert_eq!(profile.unfinished(), 8);
        profile.followers[1].watched = true;
        assert_eq!(profile.unfinished(), 5);
        let comparison = PipewireComparison::counted(profile, 4, None);
        let PipewireComparison::Counted { ratio, .. } = comparison else {
            panic!("counted")
        };
        assert_eq!(ratio, Some(0.8));
    }

    #[test]
    fn it_serialises_with_a_status_tag() {
        let text = serde_json::to_string(&PipewireComparison::Unavailable {
            reason: "no profiler".into(),
        })
        .unwrap();
        assert_eq!(text, r#"{"status":"unavailable","reason":"no profiler"}"#);
    }
}

/// Why a watched PipeWire client is judged by PipeWire's cycle or not (`trace watch` without
/// `--cycle-marker`, chosen by rtlab-trace's `watch_pipewire::judged_by`, worded by
/// rtlab-render's `pipewire::cycle_note`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipewireCycle {
    /// Judged by PipeWire's cycle: its marker, described.
    Taken { marker: String },
    /// PipeWire's marker could not be had: the cycle is inferred.
    Unavailable { error: String },
}
