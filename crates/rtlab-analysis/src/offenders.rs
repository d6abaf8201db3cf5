//! The run-level "top offenders" table: causes summed over all episodes.
//!
//! One episode says what delayed one wake-up; the user's next question is which driver, softirq or
//! thread does it *most*, in the spirit of LatencyMon's per-driver table. Tasks are grouped by
//! name (a pid changes between runs, a thread name usually does not).

use rtlab_core::{CauseKind, Episode};
use serde::Serialize;
use std::collections::BTreeMap;

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Offender {
    pub kind: CauseKind,
    pub name: String,
    /// Episodes this cause took part in.
    pub episodes: usize,
    /// Time it took from all episodes together, ns.
    pub total_ns: u64,
    /// The most it took from one episode, ns.
    pub max_ns: u64,
    /// Episodes in which it was the largest cause.
    pub dominant_in: usize,
}

/// Sums causes over `episodes` by (kind, name); largest total first.
pub fn top_offenders(episodes: &[Episode]) -> Vec<Offender> {
    let mut rows: BTreeMap<(CauseKind, String), Offender> = BTreeMap::new();
    for episode in episodes {
        let mut per_episode: BTreeMap<(CauseKind, String), u64> = BTreeMap::new();
        for cause in &episode.causes {
            *per_episode
                .entry((cause.kind, cause.name.clone()))
                .or_default() += cause.ns;
        }
        let dominant = per_episode
            .iter()
            .max_by_key(|(_, ns)| **ns)
            .map(|(key, _)| key.clone());
        for (key, ns) in per_episode {
            let is_dominant = dominant.as_ref() == Some(&key);
            let row = rows.entry(key.clone()).or_insert_with(|| Offender {
                kind: key.0,
                name: key.1.clone(),
                episodes: 0,
                total_ns: 0,
                max_ns: 0,
                dominant_in: 0,
            });
            row.episodes += 1;
            row.total_ns += ns;
            row.max_ns = row.max_ns.max(ns);
            if is_dominant {
                row.dominant_in += 1;
            }
        }
    }
    let mut rows: Vec<Offender> = rows.into_values().collect();
    rows.sort_by(|left, right| {
        right
            .total_ns
            .cmp(&left.total_ns)
            .then_with(|| left.name.cmp(&right.name))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::Cause;

    fn cause(kind: CauseKind, name: &str, pid: Option<u32>, ns: u64) -> Cause {
        Cause {
            kind,
            name: name.into(),
            pid,
            ns,
            detail: None,
        }
    }

    fn episode(causes: Vec<Cause>) -> Episode {
        Episode {
            series: "rt-high/wakeup@0".into(),
            cpu: 0,
            at_ns: 0,
            latency_ns: causes.iter().map(|cause| cause.ns).sum(),
            causes,
            steal_ns: None,
            stack: None,
            timeline: Vec::new(),
        }
    }

    #[test]
    fn sums_by_kind_and_name_across_pids() {
        let episodes = vec![
            episode(vec![
                cause(CauseKind::Task, "spin", Some(1), 900),
                cause(CauseKind::Irq, "virtio0", None, 100),
            ]),
            episode(vec![
                cause(CauseKind::Task, "spin", Some(2), 500),
                cause(CauseKind::Irq, "virtio0", None, 700),
                cause(CauseKind::Unaccounted, "unaccounted", None, 5),
            ]),
        ];
        let rows = top_offenders(&episodes);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].name, "spin");
        assert_eq!(
            (
                rows[0].episodes,
                rows[0].total_ns,
                rows[0].max_ns,
                rows[0].dominant_in
            ),
            (2, 1400, 900, 1)
        );
        assert_eq!(
            (rows[1].name.as_str(), rows[1].total_ns, rows[1].dominant_in),
            ("virtio0", 800, 1)
        );
        assert_eq!(rows[2].kind, CauseKind::Unaccounted);
        assert!(top_offenders(&[]).is_empty());
    }
}
