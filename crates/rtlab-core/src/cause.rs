//! One cause type: a named share of a stretch of time (`kind`, `name`, `pid`, `ns`, `detail`).
//!
//! A late wake-up's causes in the Run record's episodes ([`Cause`], kinds [`CauseKind`]) and the
//! parts of a workload thread's explained window (`rtlab workload --explain`,
//! [`crate::LatenessPart`] = `Cause<LatenessKind>`) are the same shape with different kinds; the
//! kind is the type parameter, so each JSON output keeps exactly the kinds it always had.

use serde::{Deserialize, Serialize};

/// What kind of thing took time from a late wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CauseKind {
    Irq,
    Softirq,
    Task,
    Timer,
    Switch,
    Unaccounted,
}

impl CauseKind {
    /// The name used in the Run record and in reports (`irq`, `softirq`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Irq => "irq",
            CauseKind::Softirq => "softirq",
            CauseKind::Task => "task",
            CauseKind::Timer => "timer",
            CauseKind::Switch => "switch",
            CauseKind::Unaccounted => "unaccounted",
        }
    }
}

/// A share of a stretch of time: what kind of thing it was, its name (task, IRQ, softirq, …),
/// the task's pid where it was one, how long, and free-form details (policy and priority of a
/// task, whether it outranked the probe, …). `K` is the set of kinds: [`CauseKind`] for a late
/// wake-up's episode, `LatenessKind` for a workload thread's window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause<K = CauseKind> {
    pub kind: K,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
