//! What `rtlab tune` found (`rtlab.tune/1`): the inventory of the machine's real-time settings
//! and, for each setting it changed, the measured effect and whether it was kept. rtlab-tune
//! fills it, rtlab-render shows it, `--json` writes it.

use serde::{Deserialize, Serialize};

/// When rtlab can change a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenChangeable {
    /// At run time: `rtlab tune` measures it.
    Now,
    /// Only at the next boot (a kernel command line parameter).
    NextBoot,
    /// rtlab does not change it (a user's limits, a setting absent here): what to do is said.
    ByHand,
    /// Not present on this machine.
    Absent,
}

/// One line of the inventory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryItem {
    pub name: String,
    /// The value in force, or why it could not be read.
    pub value: String,
    /// Why it matters for real-time work.
    pub why: String,
    pub when: WhenChangeable,
    /// What rtlab can do about it (or what the user can), e.g. the kernel command line.
    pub action: String,
}

/// The measured effect of one setting on the chosen figure: B (changed) − A (as it was).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingEffect {
    /// `p99`, …
    pub figure: String,
    pub before_ns: u64,
    pub after_ns: u64,
    pub difference_ns: i64,
    /// Bootstrap interval of the difference at the report's confidence; `None` when too few
    /// samples lie beyond the figure to judge it.
    pub difference_ci_ns: Option<[i64; 2]>,
    pub relative: f64,
    pub relative_ci: Option<[f64; 2]>,
    pub samples_before: u64,
    pub samples_after: u64,
}

/// What happened to one run-time setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingResult {
    pub name: String,
    /// The value before rtlab touched it.
    pub before: String,
    /// The value measured against it.
    pub tried: String,
    /// `None` when it was not measured (see `reason`).
    pub effect: Option<SettingEffect>,
    /// Helped beyond noise: left in place for the rest of the run (and the end, with `--apply`).
    pub kept: bool,
    pub reason: String,
    /// A change that does nothing, measured like the others to show the false-keep rate.
    #[serde(default)]
    pub placebo: bool,
}

/// The whole of `rtlab tune`'s answer (`rtlab.tune/1`, under the common header).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// `p99`, …: the figure each setting was judged on.
    pub figure: String,
    /// Two-sided confidence of every interval, e.g. 0.95.
    pub confidence: f64,
    /// The CPUs measured (the probe's rt-high threads).
    pub cpus: Vec<usize>,
    /// CPUs left for IRQs and workqueues (the online CPUs not measured).
    pub housekeeping_cpus: Vec<usize>,
    pub round_ns: u64,
    /// A/B pairs per setting.
    pub rounds: u32,
    pub as_root: bool,
    /// Settings a killed `rtlab tune` had left changed, put back at the start.
    pub repaired: Vec<String>,
    pub inventory: Vec<InventoryItem>,
    pub settings: Vec<SettingResult>,
    /// Stopped by SIGINT/SIGTERM before the end.
    pub interrupted: bool,
    /// Wall time of the whole command, ns.
    pub duration_ns: u64,
}
