//! `rtlab reserve --auto`'s plan as plain data: the reservations rtlab-sched's `auto_reserve`
//! decides on (each with its reasons in words), the backend each asks for, and the sizing rule's
//! percentile and margin. rtlab-sched fills them and re-exports them under their old paths;
//! rtlab-render shows them (text and `--json`), which is why they live here.

use crate::rpc::{Backend, GrantInfo};
use crate::Nanos;

/// The percentile of CPU per activation a reservation is sized from.
pub const SIZING_PERCENTILE: &str = "p99";
/// The margin added to that percentile: 20 %.
pub const SIZING_MARGIN: f64 = 0.20;

/// The backend a reservation asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoBackend {
    Deadline,
    Dispatch,
}

impl AutoBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            AutoBackend::Deadline => "deadline",
            AutoBackend::Dispatch => "dispatch",
        }
    }
}

/// One reservation to ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoReservation {
    pub tid: u32,
    pub name: String,
    pub pid: Option<u32>,
    /// Why this thread: "periodic SCHED_FIFO 65 thread of the program" / "wakes xrun_client …".
    pub why_thread: String,
    pub period: Nanos,
    /// CPU per activation the reservation is sized for: the percentile plus the margin.
    pub need_per_activation: Nanos,
    /// The rate asked: `periods_per_window · need` of every `periods_per_window · period`.
    pub amount: Nanos,
    pub window: Nanos,
    pub periods_per_window: u32,
    pub backend: AutoBackend,
    /// The share of one CPU the kernel will be asked for (deadline: runtime / period including
    /// one overrun per window); for dispatch the daemon's grant tells.
    pub expected_share: f64,
    /// Why this size and backend, in words.
    pub why_backend: String,
}

/// The whole decision.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoPlan {
    pub reservations: Vec<AutoReservation>,
    /// Real-time threads of the program passed over, each with why.
    pub passed_over: Vec<String>,
}

/// One chosen reservation, as asking for it came out.
#[derive(Clone, Debug, Default)]
pub struct Reserved {
    /// The daemon's grant, or the reservation the thread already held.
    pub grant: Option<GrantInfo>,
    /// The thread already held a reservation (`grant`), left as it is; with its line.
    pub already_held: Option<String>,
    /// The SCHED_FIFO priority a sampler following the thread takes: one above the thread's
    /// own before it was reserved (under its reservation it is SCHED_DEADLINE, which has none).
    pub sampler_priority: u32,
}

impl From<AutoBackend> for Backend {
    fn from(backend: AutoBackend) -> Backend {
        match backend {
            AutoBackend::Deadline => Backend::Deadline,
            AutoBackend::Dispatch => Backend::Dispatch,
        }
    }
}

/// How `reserve --auto`'s loop ended, in plain words (rtlab-sched's `AutoEnd::ending`, the
/// check's error written out): what rtlab-render's `reserve_auto::conclude` tells.
#[derive(Clone, Debug, PartialEq)]
pub enum AutoEnding {
    /// Stopped during the first observation: nothing decided.
    Interrupted,
    /// Nothing can be reserved (why).
    Refused(String),
    /// Decided, nothing asked for.
    DryRun,
    /// The daemon refused one (the reason); what was granted is released.
    Denied {
        reason: String,
        release_failures: Vec<String>,
    },
    /// Every chosen thread already holds a reservation.
    AlreadyReserved,
    /// Kept without a check: the observation counts no misses.
    KeptUnchecked,
    /// The check's observation failed (`Some`, its error) or was interrupted: released.
    CheckEnded {
        error: Option<String>,
        interrupted: bool,
        release_failures: Vec<String>,
    },
    /// The misses rose: what was granted is released.
    RolledBack {
        misses_after: u64,
        release_failures: Vec<String>,
    },
    /// Kept, checked.
    Kept { misses_after: u64 },
}
