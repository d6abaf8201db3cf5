//! What a series measures (`wakeup`, `interval`, …): the `metric` of every series, of its label
//! (`crate::label`) and of `--series` selectors. Its own module so that the record and the label
//! both use it without using each other.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a series measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Actual − intended wake time of a timer thread.
    Wakeup,
    /// Time between consecutive wake-ups (paper 000's metric).
    Interval,
    /// Signalling thread → first instruction of the woken thread (paper 002's thread latency).
    Handoff,
    /// Release → completion of one activation of a workload thread (`rtlab workload`).
    Response,
    /// Timer expiry − intended time of a timer thread's wake-up: rtla timerlat's IRQ latency
    /// (the BPF recorder, from `hrtimer_expire_entry`).
    Irq,
    /// Switch-in − timer expiry of a timer thread's wake-up: from the timer callback to the
    /// thread running (the BPF recorder).
    Thread,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Wakeup => "wakeup",
            Metric::Interval => "interval",
            Metric::Handoff => "handoff",
            Metric::Response => "response",
            Metric::Irq => "irq",
            Metric::Thread => "thread",
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "wakeup" => Ok(Metric::Wakeup),
            "interval" => Ok(Metric::Interval),
            "handoff" => Ok(Metric::Handoff),
            "response" => Ok(Metric::Response),
            "irq" => Ok(Metric::Irq),
            "thread" => Ok(Metric::Thread),
            other => Err(format!(
                "unknown metric '{other}' (expected wakeup, interval, handoff, response, irq or thread)"
            )),
        }
    }
}
