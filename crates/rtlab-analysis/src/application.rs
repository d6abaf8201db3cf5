//! How an application behaves when a stall hits it: how it counts the failures one stall
//! costs ([`Counting`]) and whether its clock runs on while the CPUs are taken ([`AppClock`]).
//! A module of its own because both the classes (`classes.rs`, which carry them) and the
//! forecast (`forecast/`, which reads them) need them, and the forecast reads the classes.

use serde::{Deserialize, Serialize};

/// How many failures one stall longer than the slack costs an application (issue 35, item 4).
///
/// A program that restarts its cycle after a failure (JACK: one xrun, then the next cycle from
/// now) loses one period per stall however long the stall was. A program that catches up — a
/// ring buffer fed by a timer, whose absolute timer runs the periods it overslept back to back —
/// owes every period the stall covered and works through them one per `c` while the device
/// takes one per `t`: a stall `S` past the slack `x` costs about `(S − x)/(t − c)` buffers
/// (`backlog.rs`' count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Counting {
    /// One failure per stall: the program restarts its cycle (JACK, PipeWire).
    #[default]
    Restart,
    /// One failure per period the stall made late: the program catches up (a ring buffer fed
    /// by a timer).
    CatchUp,
}

impl Counting {
    /// `restart` / `catch-up`, as the flag and the classes file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Counting::Restart => "restart",
            Counting::CatchUp => "catch-up",
        }
    }

    /// The rule in words, for verdicts: "one glitch per stall (it restarts its cycle, as JACK
    /// does)".
    pub fn describe(self, event: &str) -> String {
        match self {
            Counting::Restart => {
                format!("one {event} per stall (it restarts its cycle, as JACK does)")
            }
            Counting::CatchUp => format!(
                "one {event} per period a stall made late (it catches up, as a ring buffer fed by a timer does)"
            ),
        }
    }
}

impl std::str::FromStr for Counting {
    type Err = String;

    fn from_str(text: &str) -> Result<Counting, String> {
        match text {
            "restart" => Ok(Counting::Restart),
            "catch-up" => Ok(Counting::CatchUp),
            other => Err(format!(
                "'{other}' is not a way of counting (restart, catch-up)"
            )),
        }
    }
}

/// Whether the application's clock runs on while every CPU is taken (issue 35, item 3).
///
/// A sound card's clock, or a timer the program reads in absolute time, keeps time through a
/// stall: a burst that holds the CPUs is late against it. A clock kept by a thread that sleeps
/// one period at a time and resumes from "now" after it was held up — JACK's dummy driver —
/// stops with the CPUs: a burst that holds every CPU at once delays the clock with the
/// application, and whether it costs a glitch depends on how the program resumes, which no
/// latency distribution says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppClock {
    /// A device's or an absolute timer's clock: it runs on through a stall.
    #[default]
    Device,
    /// A clock kept by a thread (JACK's dummy driver): it stops with the CPUs.
    StopsWithCpus,
}

impl AppClock {
    /// `device` / `stops-with-cpus`, as the flag and the classes file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            AppClock::Device => "device",
            AppClock::StopsWithCpus => "stops-with-cpus",
        }
    }
}

impl std::str::FromStr for AppClock {
    type Err = String;

    fn from_str(text: &str) -> Result<AppClock, String> {
        match text {
            "device" => Ok(AppClock::Device),
            "stops-with-cpus" => Ok(AppClock::StopsWithCpus),
            other => Err(format!(
                "'{other}' is not an application clock (device, stops-with-cpus)"
            )),
        }
    }
}
