//! What `rtlab trace watch` counts while it watches a program (and `rtlab tune --app` per round):
//! the deadline misses, who they are blamed on and which threads missed, bounded however long it
//! runs. rtlab-trace's `watch` fills it from each window's analysis; rtlab-render's `watch`
//! writes it out; `--summary-json` serialises [`SummaryJson`].

use std::collections::HashMap;

/// Who a miss is blamed on, as the summary counts it.
#[derive(Clone, Debug, PartialEq)]
pub struct Blame {
    /// "qhog0 (SCHED_FIFO 95)", "the hypervisor (…)", "(its own work)", …
    pub label: String,
    /// Whether a reservation can protect against it (another thread took the CPU).
    pub reservable: bool,
    pub ns: u64,
}

/// One culprit's misses and the time it took.
#[derive(Clone, Copy, Debug, Default)]
pub struct CulpritTally {
    pub misses: u64,
    pub reservable: bool,
    pub ns: u64,
    pub least_ns: u64,
    pub most_ns: u64,
}

/// One thread's misses, with the period and the need last seen for it.
#[derive(Clone, Debug, Default)]
pub struct ThreadMisses {
    pub name: String,
    pub misses: u64,
    pub period_ns: u64,
    pub need_ns: u64,
}

/// Misses per culprit, bounded: past [`CULPRITS_KEPT`] names the rest are counted together.
#[derive(Debug, Default)]
pub struct WatchSummary {
    pub misses: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    pub culprits: HashMap<String, CulpritTally>,
    /// The threads that missed, by tid (at most [`THREADS_KEPT`]).
    pub threads: HashMap<i32, ThreadMisses>,
}

/// The culprits named one by one; the rest are "(others)".
pub const CULPRITS_KEPT: usize = 64;
/// The threads counted one by one.
pub const THREADS_KEPT: usize = 256;

/// One miss as counted: the thread, how many periods it stands for (as JACK counts xruns: a
/// gap's periods, 2 for a job over 2.1 periods), its period and its need per activation.
#[derive(Clone, Copy, Debug)]
pub struct CountedMiss<'a> {
    pub tid: i32,
    pub thread_name: &'a str,
    pub periods: u64,
    pub period_ns: u64,
    pub need_ns: u64,
}

impl WatchSummary {
    /// Counts one miss blamed on `culprit`.
    pub fn add(&mut self, miss: CountedMiss<'_>, culprit: &Blame) {
        let periods = miss.periods;
        self.misses += periods;
        let key = if self.culprits.len() >= CULPRITS_KEPT
            && !self.culprits.contains_key(&culprit.label)
        {
            "(others)".to_owned()
        } else {
            culprit.label.clone()
        };
        let tally = self.culprits.entry(key).or_default();
        tally.least_ns = if tally.misses == 0 {
            culprit.ns
        } else {
            tally.least_ns.min(culprit.ns)
        };
        tally.misses += periods;
        tally.reservable = culprit.reservable;
        tally.ns += culprit.ns;
        tally.most_ns = tally.most_ns.max(culprit.ns);
        if self.threads.len() < THREADS_KEPT || self.threads.contains_key(&miss.tid) {
            let entry = self.threads.entry(miss.tid).or_insert(ThreadMisses {
                name: miss.thread_name.to_owned(),
                ..ThreadMisses::default()
            });
            entry.misses += periods;
            entry.period_ns = miss.period_ns;
            entry.need_ns = miss.need_ns;
        }
    }

    /// Widens the time watched to a window's first and last event.
    pub fn see(&mut self, first_ns: u64, last_ns: u64) {
        self.first_ns.get_or_insert(first_ns);
        self.last_ns = self.last_ns.max(last_ns);
    }

    /// The competitor a reservation could protect against with the most misses, and its
    /// misses: culprits that differ only by a number at the end of the thread's name and share
    /// a policy (a competitor's per-CPU threads, `qhog0` and `qhog1`) count together, named
    /// together ("qhog0, qhog1 (SCHED_FIFO 95)").
    pub fn top_reservable(&self) -> Option<(String, u64)> {
        let mut groups: Vec<(String, String, Vec<&str>, u64)> = Vec::new();
        for (label, tally) in self.culprits.iter().filter(|(_, tally)| tally.reservable) {
            let (name, rest) = label.split_once(" (").unwrap_or((label.as_str(), ""));
            let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
            match groups
                .iter_mut()
                .find(|group| group.0 == stem && group.1 == rest)
            {
                Some(group) => {
                    group.2.push(name);
                    group.3 += tally.misses;
                }
                None => groups.push((stem.to_owned(), rest.to_owned(), vec![name], tally.misses)),
            }
        }
        groups
            .into_iter()
            .max_by(|left, right| left.3.cmp(&right.3).then(right.0.cmp(&left.0)))
            .map(|(_, rest, mut names, misses)| {
                names.sort_unstable();
                let label = if rest.is_empty() {
                    names.join(", ")
                } else {
                    format!("{} ({rest}", names.join(", "))
                };
                (label, misses)
            })
    }

    /// The seconds between the first and the last event watched.
    pub fn seconds(&self) -> f64 {
        self.last_ns
            .saturating_sub(self.first_ns.unwrap_or(self.last_ns)) as f64
            / 1e9
    }

    /// The culprits by the time they took, largest first.
    pub fn ranked(&self) -> Vec<(&String, &CulpritTally)> {
        let mut ranked: Vec<_> = self.culprits.iter().collect();
        ranked.sort_by(|left, right| right.1.ns.cmp(&left.1.ns).then(left.0.cmp(right.0)));
        ranked
    }

    /// The threads by their misses, most first.
    pub fn threads_ranked(&self) -> Vec<(&i32, &ThreadMisses)> {
        let mut threads: Vec<_> = self.threads.iter().collect();
        threads.sort_by(|left, right| right.1.misses.cmp(&left.1.misses).then(left.0.cmp(right.0)));
        threads
    }

    /// The summary as `--summary-json` writes it (`verdict`: rtlab-render's line).
    pub fn to_json(
        &self,
        target: String,
        interrupted: bool,
        verdict: String,
        pipewire: Option<crate::pipewire_count::PipewireComparison>,
    ) -> SummaryJson {
        SummaryJson {
            target,
            seconds: self.seconds(),
            interrupted,
            misses: self.misses,
            culprits: self
                .ranked()
                .into_iter()
                .map(|(label, tally)| CulpritJson {
                    label: label.clone(),
                    misses: tally.misses,
                    reservable: tally.reservable,
                    ns: tally.ns,
                })
                .collect(),
            verdict,
            pipewire,
        }
    }
}

/// `--summary-json`'s schema.
pub const SUMMARY_SCHEMA: &str = "rtlab.watch-summary/1";

/// `--summary-json`'s body (schema [`SUMMARY_SCHEMA`], under the common header).
#[derive(Debug, serde::Serialize)]
pub struct SummaryJson {
    pub target: String,
    pub seconds: f64,
    pub interrupted: bool,
    /// rtlab's deadline misses (as JACK counts xruns).
    pub misses: u64,
    /// By the time they took, largest first.
    pub culprits: Vec<CulpritJson>,
    pub verdict: String,
    /// PipeWire's own count beside rtlab's; absent when the program is not a PipeWire client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipewire: Option<crate::pipewire_count::PipewireComparison>,
}

/// One culprit in `--summary-json`.
#[derive(Debug, serde::Serialize)]
pub struct CulpritJson {
    pub label: String,
    pub misses: u64,
    /// Another thread took the CPU: a reservation protects against it.
    pub reservable: bool,
    pub ns: u64,
}

/// One miss as `trace watch` prints it when its window has been analysed.
#[derive(Clone, Debug)]
pub struct WatchedMiss<'a> {
    /// Seconds since the first event watched.
    pub seconds: f64,
    pub thread_name: &'a str,
    pub tid: i32,
    /// `Some(periods)` for periods without an activation; `None` for an activation done late.
    pub periods_without_activation: Option<u64>,
    pub response_ns: u64,
    pub period_ns: u64,
    pub need_ns: u64,
    pub explanation: &'a crate::apptrace_report::Explanation,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miss() -> CountedMiss<'static> {
        CountedMiss {
            tid: 7,
            thread_name: "xrun_client",
            periods: 1,
            period_ns: 1,
            need_ns: 1,
        }
    }

    #[test]
    fn a_competitors_threads_on_each_cpu_count_together() {
        let mut summary = WatchSummary::default();
        for (name, n) in [("qhog0", 3), ("qhog1", 5), ("pipewire", 7), ("qhog1", 1)] {
            let blame = Blame {
                label: format!("{name} (SCHED_FIFO 95)"),
                reservable: true,
                ns: 1,
            };
            for _ in 0..n {
                summary.add(miss(), &blame);
            }
        }
        assert_eq!(
            summary.top_reservable(),
            Some(("qhog0, qhog1 (SCHED_FIFO 95)".into(), 9))
        );
    }

    #[test]
    fn culprits_stay_bounded() {
        let mut summary = WatchSummary::default();
        for n in 0..1_000 {
            let blame = Blame {
                label: format!("thread{n}"),
                reservable: true,
                ns: 1,
            };
            summary.add(miss(), &blame);
        }
        assert_eq!(summary.culprits.len(), CULPRITS_KEPT + 1);
        assert_eq!(summary.misses, 1_000);
    }
}
