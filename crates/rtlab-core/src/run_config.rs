//! The record's `config`: everything needed to repeat a run, typed.
//!
//! Producers fill the part that is theirs: `rtlab run` the measurement settings (and `explain`,
//! `explain_trace` when explaining), the buffer experiment `buffer_experiment`, an import
//! `import`. Keys this version does not know (from a newer producer) are kept in `other` and
//! written back unchanged.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The record's `config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordConfig {
    /// CPUs measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
    /// Classes measured (each once, in the order measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// The wake-up period the probe ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
    /// Measurement asked for (the record's `duration_ns` is what was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_ns: Option<u64>,
    /// Whether hand-off series were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<bool>,
    /// Work per wake-up of the highest class's timer threads (`rtlab run --compute`): the
    /// `response` series measured with it; absent when the probe did not compute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ns: Option<u64>,
    /// The /dev/cpu_dma_latency value held, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_us: Option<i32>,
    /// Timer slack of the measuring threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
    /// Largest samples kept per series with their times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_peaks: Option<usize>,
    /// How late wake-ups were chosen for explaining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<ExplainSettings>,
    /// What the kernel-event recording did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_trace: Option<ExplainTrace>,
    /// The producer/consumer buffer experiment's settings and counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_experiment: Option<BufferExperiment>,
    /// Where an imported record came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportSource>,
    /// Keys this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Reads `null` (older records, `RunRecord::new`) as the default.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// How the explain threshold was set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThresholdKind {
    /// One threshold for every series, given by the user.
    #[serde(rename = "fixed")]
    Fixed,
    /// Each series' p99.9 (calibrated during the first second, checked at the end).
    #[serde(rename = "p99.9")]
    P999,
}

/// `config.explain`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExplainSettings {
    pub threshold: ThresholdKind,
    /// The fixed threshold, when `threshold` is `fixed`.
    #[serde(default)]
    pub explain_above_ns: Option<u64>,
    /// Per series label, the threshold calibrated in the first second.
    #[serde(default)]
    pub provisional_threshold_ns: BTreeMap<String, u64>,
    /// Whether kernel events were recorded (false: the recorder could not start).
    pub recorded: bool,
    /// The recorder that recorded them (absent in records before the BPF recorder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<ExplainRecorder>,
    /// Events (tracefs) or episode and sample records (BPF) the kernel could not hand over.
    #[serde(default)]
    pub lost_events: u64,
    /// Late wake-ups not kept as episodes because the run reached its episode cap (they are
    /// counted and summed into `explain_trace`, not attributed one by one).
    #[serde(default)]
    pub episodes_not_kept: u64,
    /// The causes of the episodes not kept, summed by kind and name (BPF recorder: it keeps the
    /// latest episodes up to the cap and summarises the least late ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summarised_causes: Vec<crate::Cause>,
}

/// Which recorder `--explain` used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExplainRecorder {
    /// BPF programs on the scheduler and interrupt tracepoints (rtlab-bpf).
    Bpf,
    /// A private tracefs instance's ring buffers.
    Tracefs,
}

impl ExplainRecorder {
    pub fn name(self) -> &'static str {
        match self {
            ExplainRecorder::Bpf => "bpf",
            ExplainRecorder::Tracefs => "tracefs",
        }
    }
}

/// `config.explain_trace`: what the recording saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExplainTrace {
    pub event_set: String,
    pub comm_recording_off: bool,
    pub events: Vec<String>,
    pub markers: u64,
    pub pages: u64,
    pub decoded_events: u64,
    pub lost_events: u64,
    pub undecodable_pages: u64,
    pub late_samples: u64,
    pub reader_catch_ups: u64,
    pub episodes_below_final_threshold: u64,
    pub stack_samples: u64,
}

/// `config.buffer_experiment`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferExperiment {
    pub buffer_period_ns: u64,
    pub compute_ns: u64,
    pub producer_policy: String,
    pub producer_priority: i32,
    pub periods: u64,
    /// Per buffer count n.
    pub underruns: BTreeMap<u32, UnderrunCount>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnderrunCount {
    pub checked: u64,
    pub underruns: u64,
}

/// `config.import`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportSource {
    /// `cyclictest`, `rtla`, `hdr-log`, `csv`.
    pub format: String,
    /// The file it came from.
    pub source: String,
    /// The measuring period (0 when unknown).
    pub period_ns: u64,
}
