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
    /// With `--app COMM`: that program's own deadline misses in each round, and the effect on
    /// them; absent without `--app` or when the setting was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppEffect>,
}

/// A watched program's deadline misses in one round (`--app`), counted as `rtlab trace watch`
/// counts them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppRound {
    /// Deadline misses (a gap counts each period it lost, as JACK counts xruns).
    pub misses: u64,
    /// The time watched, s (the recording's first to last event).
    pub seconds: f64,
}

impl AppRound {
    /// Misses per minute watched; 0 when nothing was watched.
    pub fn per_minute(&self) -> f64 {
        if self.seconds > 0.0 {
            self.misses as f64 * 60.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// The effect of one setting on a watched program's deadline misses (`--app`): B (changed) −
/// A (as it was), in misses per minute, judged over the A/B pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppEffect {
    /// The program's name (`/proc/PID/comm`).
    pub comm: String,
    /// Each round of arm A (as it was), in the order measured.
    pub rounds_before: Vec<AppRound>,
    /// Each round of arm B (changed).
    pub rounds_after: Vec<AppRound>,
    /// Mean misses per minute over each arm's rounds.
    pub per_minute_before: f64,
    pub per_minute_after: f64,
    /// The mean of the pairs' differences (B − A), misses per minute.
    pub difference_per_minute: f64,
    /// Student's t interval of that mean over the pairs at the report's confidence; `None` with
    /// one pair.
    pub difference_ci_per_minute: Option<[f64; 2]>,
    /// The pairs in which B had fewer misses per minute than A.
    pub pairs_fewer: u32,
    pub pairs: u32,
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
    /// `--app COMM`: the program whose deadline misses were counted beside the probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Stopped by SIGINT/SIGTERM before the end.
    pub interrupted: bool,
    /// Wall time of the whole command, ns.
    pub duration_ns: u64,
}
