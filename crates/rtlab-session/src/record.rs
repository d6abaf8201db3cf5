//! Building the Run record from what the probe measured, with the warnings that lower its quality.

use crate::run_warnings::{short_run_warning, vm_warning};
use crate::{RunConfig, SessionError};
use rtlab_core::{Metric, Nanos, RecordConfig, RecordHeader, RunConditions, RunRecord};
use rtlab_probe::ProbeResult;
use rtlab_sys::proc_stat::CpuTimes;
use std::collections::BTreeMap;

/// The record of one probe run (no load, episodes or tails yet), validated. The period and the
/// classes are what the probe ran, not what was asked.
pub(crate) fn build(
    config: &RunConfig,
    cpus: &[usize],
    result: ProbeResult,
    started_at: String,
    cmdline: Vec<String>,
    interrupted: bool,
) -> Result<RunRecord, SessionError> {
    let probe = &config.probe;
    let mut warnings = result.warnings;
    let mut measured_classes: Vec<String> = Vec::new();
    for series in &result.series {
        let name = series.key.class.name();
        if !measured_classes.iter().any(|known| known == name) {
            measured_classes.push(name.to_owned());
        }
    }
    let period_ns = result.period.as_u64();
    let mut series = Vec::with_capacity(result.series.len());
    for measured in result.series {
        let key = measured.key;
        if measured.missed > 0 && key.metric != Metric::Interval {
            warnings.push(format!(
                "{}: {} periods had no wake-up at all because an earlier one was so late (cyclictest skips these silently)",
                key.label(),
                measured.missed
            ));
        }
        series.push(RunRecord::series_from_histogram(
            key.metric,
            key.class.name(),
            key.cpu as u32,
            measured.policy.name(),
            measured.policy.priority_or_nice(),
            period_ns,
            &measured.histogram,
            measured.missed,
            0,
            measured.max_per_second,
            measured.peaks,
        )?);
    }
    let host = rtlab_sys::host::describe(probe.cpu_dma_latency_us);
    warnings.extend(vm_warning(&host));
    warnings.extend(short_run_warning(result.measured_ns));
    let record_config = RecordConfig {
        cpus: cpus.to_vec(),
        classes: measured_classes,
        period_ns: Some(period_ns),
        duration_ns: Some(probe.duration.as_u64()),
        warmup_ns: Some(probe.warmup.as_u64()),
        handoff: Some(probe.handoff),
        cpu_dma_latency_us: probe.cpu_dma_latency_us,
        compute_ns: probe.compute.map(|compute| compute.as_u64()),
        timer_slack_ns: Some(1),
        keep_peaks: Some(probe.peaks_per_series),
        ..RecordConfig::default()
    };
    let mut record = RunRecord::with_header(
        RecordHeader {
            id: uuid::Uuid::new_v4().to_string(),
            started_at,
            duration_ns: result.measured_ns,
            cmdline,
            host,
        },
        record_config,
        series,
    );
    record.warnings = warnings;
    record.interrupted = interrupted;
    record.validate()?;
    Ok(record)
}

/// One warning per CPU the hypervisor took time from between the two /proc/stat readings.
pub(crate) fn steal_warnings(
    cpus: &[usize],
    before: &BTreeMap<usize, CpuTimes>,
    after: &BTreeMap<usize, CpuTimes>,
) -> Vec<String> {
    cpus.iter()
        .filter_map(|cpu| {
            let stolen = after
                .get(cpu)
                .zip(before.get(cpu))
                .map(|(after, before)| after.steal_ns.saturating_sub(before.steal_ns))
                .unwrap_or(0);
            (stolen > 0).then(|| format!(
                "the hypervisor took {} from CPU {cpu} during the run (steal time): long delays there may be time that vanished from the guest",
                Nanos(stolen)
            ))
        })
        .collect()
}

/// What the whole machine did between two /proc/stat readings `elapsed_ns` apart, while rtlab
/// itself used `rtlab_cpu_ns`.
pub(crate) fn conditions(
    before: &BTreeMap<usize, CpuTimes>,
    after: &BTreeMap<usize, CpuTimes>,
    elapsed_ns: u64,
    rtlab_cpu_ns: u64,
) -> RunConditions {
    let busy = |times: &CpuTimes| {
        times.user_ns + times.nice_ns + times.system_ns + times.irq_ns + times.softirq_ns
    };
    let (mut busy_ns, mut steal_ns) = (0u64, 0u64);
    for (cpu, after) in after {
        let Some(before) = before.get(cpu) else {
            continue;
        };
        busy_ns += busy(after).saturating_sub(busy(before));
        steal_ns += after.steal_ns.saturating_sub(before.steal_ns);
    }
    RunConditions {
        elapsed_ns,
        cpus: after.len() as u32,
        busy_ns,
        steal_ns,
        rtlab_cpu_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_sum_busy_and_steal_time_over_every_cpu() {
        let times = |busy_ns: u64, idle_ns: u64, steal_ns: u64| CpuTimes {
            user_ns: busy_ns / 2,
            system_ns: busy_ns / 2,
            idle_ns,
            steal_ns,
            ..CpuTimes::default()
        };
        let before = BTreeMap::from([(0, times(0, 0, 0)), (1, times(1_000, 0, 50))]);
        let after = BTreeMap::from([(0, times(400, 600, 10)), (1, times(1_800, 200, 60))]);
        let conditions = conditions(&before, &after, 1_000, 200);
        assert_eq!(conditions.cpus, 2);
        assert_eq!(conditions.busy_ns, 1_200);
        assert_eq!(conditions.steal_ns, 20);
        assert!((conditions.other_work_fraction() - 1_000.0 / 1_800.0).abs() < 1e-12);
    }

    #[test]
    fn steal_is_warned_per_cpu_that_lost_time() {
        let times = |steal_ns| CpuTimes {
            steal_ns,
            ..CpuTimes::default()
        };
        let before = BTreeMap::from([(0, times(100)), (1, times(100))]);
        let after = BTreeMap::from([(0, times(100)), (1, times(2_500_100))]);
        let warnings = steal_warnings(&[0, 1, 2], &before, &after);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("took 2.5ms from CPU 1"),
            "{}",
            warnings[0]
        );
    }
}
