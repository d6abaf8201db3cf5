//! Priority classes: the scheduling policies rtlab measures side by side.

use rtlab_sys::sched::Policy;
use std::fmt;
use std::str::FromStr;

/// A measuring thread's class. Names are the wire form (`rt-high`, `rt-mid`, `normal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// SCHED_FIFO 90: above everything a distribution runs by default, like cyclictest -p90.
    RtHigh,
    /// SCHED_FIFO 50: the priority of threaded IRQ handlers, so it competes with them.
    RtMid,
    /// SCHED_OTHER nice 0: what an ordinary application thread gets.
    Normal,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::RtHigh, Class::RtMid, Class::Normal];

    pub fn name(self) -> &'static str {
        match self {
            Class::RtHigh => "rt-high",
            Class::RtMid => "rt-mid",
            Class::Normal => "normal",
        }
    }

    pub fn policy(self) -> Policy {
        match self {
            Class::RtHigh => Policy::Fifo { priority: 90 },
            Class::RtMid => Policy::Fifo { priority: 50 },
            Class::Normal => Policy::Other { nice: 0 },
        }
    }

    pub fn is_realtime(self) -> bool {
        self.policy().is_realtime()
    }
}

impl fmt::Display for Class {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

impl FromStr for Class {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Class::ALL
            .into_iter()
            .find(|class| class.name() == text)
            .ok_or_else(|| format!("unknown class '{text}' (expected rt-high, rt-mid or normal)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for class in Class::ALL {
            assert_eq!(class.name().parse::<Class>().unwrap(), class);
        }
        assert!("rt-low".parse::<Class>().is_err());
    }
}
