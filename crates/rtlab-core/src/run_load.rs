//! The record's `load`: what ran beside the measurement, when, and what it consumed.
//!
//! Times (`*_ns` of parts) are ns since the start of measurement. The request (`spec`, `profile`,
//! `load_cmd`, requested `competitors`) is always there; what ran (`stressors`, `command`, the
//! competitors' reports, softirq counts) only once the load started (`started`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `load`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// The load asked for (a profile and/or stressors), as given.
    #[serde(default)]
    pub spec: Option<String>,
    #[serde(default)]
    pub profile: Option<LoadProfile>,
    /// The usage model of the tail projection.
    pub usage: LoadUsage,
    /// The shell command run as load, as given.
    #[serde(default)]
    pub load_cmd: Option<String>,
    /// Each competitor: its report once started, else the spec asked for.
    #[serde(default)]
    pub competitors: Vec<CompetitorEntry>,
    /// Whether the load started (false when the run ended during warm-up).
    #[serde(default)]
    pub started: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stressors: Vec<StressorRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandRun>,
    /// Softirqs raised on all CPUs while the load ran, by softirq name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirqs_during_load: Option<BTreeMap<String, u64>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadProfile {
    pub name: String,
    pub description: String,
    /// The profile's stressors, `KIND:…` comma-separated.
    pub mix: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadUsage {
    pub hours_per_day: f64,
    pub days_per_week: f64,
    /// Where the model came from (a profile, the request, or the default).
    pub source: String,
}

/// A competitor as it ran, or (not started) as it was asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CompetitorEntry {
    Ran(CompetitorRun),
    Requested(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompetitorRun {
    /// `POLICY:PRIO[@CPU]`.
    pub spec: String,
    pub thread_id: u32,
    pub started_ns: u64,
    pub stopped_ns: u64,
    pub cpu_time_ns: u64,
    pub involuntary_switches: u64,
    /// `requested`, `deadline`, `watchdog`, …
    pub stop_reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StressorRun {
    pub spec: String,
    pub kind: String,
    pub workers: u64,
    pub duty_percent: u64,
    pub started_ns: u64,
    pub stopped_ns: u64,
    pub operations: u64,
    pub bytes: u64,
    pub cpu_time_ns: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    #[serde(default)]
    pub errors: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandRun {
    pub cmd: String,
    pub started_ns: u64,
    pub stopped_ns: u64,
    /// How it ended, in words.
    pub ended: String,
    /// What went wrong stopping it, if anything.
    #[serde(default)]
    pub problem: Option<String>,
}
