//! Sightings of stalls in a Run record: the explain episodes (named: the task that held the CPU
//! longest) and the probe's kept late samples (unnamed), for [`super::find_periodic`].

use super::find::{CulpritName, Sighting};
use rtlab_core::{CauseKind, Metric, RunRecord};

/// A sample counts as a stall when it is later than this, or than [`MEDIAN_MULTIPLE`] times the
/// series' median, whichever is more.
pub const LATE_FLOOR_NS: u64 = 200_000;
pub const MEDIAN_MULTIPLE: u64 = 10;

/// What a run saw of its stalls, for one class's wake-up series.
#[derive(Clone, Debug, Default)]
pub struct RunSightings {
    /// From the explain episodes: each names the task that held the CPU longest.
    pub named: Vec<Sighting>,
    /// From the probe's kept late samples (every CPU), unnamed.
    pub samples: Vec<Sighting>,
    /// The probe's period.
    pub probe_period_ns: u64,
    /// The CPUs measured.
    pub cpus: Vec<u32>,
}

/// "SCHED_FIFO 95" from an episode cause's detail ("SCHED_FIFO 95, outranks the probe").
fn policy_of(detail: Option<&str>) -> Option<String> {
    let detail = detail?;
    let policy = detail.split(',').next()?.trim();
    policy.starts_with("SCHED_").then(|| policy.to_owned())
}

/// The sightings of `class`'s wake-up series in `record`.
pub fn run_sightings(record: &RunRecord, class: &str) -> RunSightings {
    let mut sightings = RunSightings::default();
    let prefix = format!("{class}/{}", Metric::Wakeup);
    for series in record
        .series
        .iter()
        .filter(|series| series.class == class && series.metric == Metric::Wakeup)
    {
        sightings.cpus.push(series.cpu);
        sightings.probe_period_ns = sightings.probe_period_ns.max(series.period_ns);
        let median = series
            .histogram()
            .map(|histogram| histogram.value_at_quantile(0.5))
            .unwrap_or(0);
        let floor = LATE_FLOOR_NS.max(median.saturating_mul(MEDIAN_MULTIPLE));
        sightings.samples.extend(
            series
                .peaks
                .iter()
                .filter(|peak| peak.value_ns > floor)
                .map(|peak| Sighting {
                    end_ns: peak.at_ns + peak.value_ns,
                    length_ns: peak.value_ns,
                    cpu: Some(series.cpu),
                    culprit: None,
                }),
        );
    }
    sightings.cpus.sort_unstable();
    sightings.cpus.dedup();
    sightings.named = record
        .episodes
        .iter()
        .filter(|episode| episode.series.starts_with(&prefix))
        .filter_map(|episode| {
            let task = episode
                .causes
                .iter()
                .filter(|cause| cause.kind == CauseKind::Task)
                .max_by_key(|cause| cause.ns)?;
            Some(Sighting {
                end_ns: episode.at_ns + episode.latency_ns,
                length_ns: episode.latency_ns,
                cpu: Some(episode.cpu),
                culprit: Some(CulpritName {
                    name: task.name.clone(),
                    policy: policy_of(task.detail.as_deref()),
                }),
            })
        })
        .collect();
    sightings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_read_from_the_cause_s_detail() {
        assert_eq!(
            policy_of(Some("SCHED_FIFO 95, outranks the probe")),
            Some("SCHED_FIFO 95".to_owned())
        );
        assert_eq!(
            policy_of(Some("context switch and return to user space")),
            None
        );
        assert_eq!(policy_of(None), None);
    }
}
