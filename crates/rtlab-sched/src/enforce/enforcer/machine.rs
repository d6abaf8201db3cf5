//! What the machine offers the backends: online CPUs, the deadline enforcement granularity,
//! the fair server and the kernel's deadline limit, detected once at `Enforcer::open`.

use rtlab_core::Nanos;
use rtlab_sys::thread_control;

use super::super::deadline_map::Granularity;
use super::super::{BackendKind, EnforceError};

/// What the machine offers the backends, detected at `open`.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineFacts {
    pub cpus: Vec<usize>,
    pub granularity: Granularity,
    /// The kernel runs SCHED_OTHER through a deadline server (Linux 6.12 and later), which takes
    /// up to its share (5 %) from real-time threads whenever normal threads starve.
    pub fair_server: bool,
    /// The fair server's share of each CPU, which the kernel's deadline admission counts: read
    /// from debugfs where visible, else the kernel's default (50 ms of every second).
    pub fair_server_share: f64,
    /// Whether `fair_server_share` was read (true) or assumed (false).
    pub fair_server_visible: bool,
    /// The share of each CPU the kernel admits for deadline and RT in all
    /// (`sched_rt_runtime_us / sched_rt_period_us`).
    pub deadline_limit: f64,
}

/// The fair server's default share: 50 ms of every 1 s per CPU.
pub const FAIR_SERVER_DEFAULT_SHARE: f64 = 0.05;

/// The first kernel whose SCHED_OTHER runs through a deadline "fair server".
pub const FAIR_SERVER_SINCE: (u32, u32) = (6, 12);

impl MachineFacts {
    /// Detects the online CPUs, the deadline enforcement granularity and the fair server.
    pub fn detect() -> Result<MachineFacts, EnforceError> {
        let cpus = rtlab_sys::cpu::online_cpus().map_err(|source| EnforceError::System {
            context: "reading /sys/devices/system/cpu/online".into(),
            source,
        })?;
        let tick = thread_control::tick_ns().map_err(|source| EnforceError::System {
            context: "reading the tick (CLOCK_MONOTONIC_COARSE resolution)".into(),
            source,
        })?;
        let hrtick_dl = thread_control::hrtick_dl_enabled().unwrap_or(None);
        let fair_server = thread_control::kernel_release()
            .ok()
            .and_then(|release| thread_control::parse_kernel_version(&release))
            .is_some_and(|version| version >= FAIR_SERVER_SINCE);
        let read_share = cpus
            .first()
            .and_then(|&cpu| thread_control::fair_server_share(cpu).ok().flatten());
        let fair_server_share = match (fair_server, read_share) {
            (_, Some(share)) => share,
            (true, None) => FAIR_SERVER_DEFAULT_SHARE,
            (false, None) => 0.0,
        };
        Ok(MachineFacts {
            cpus,
            granularity: Granularity {
                tick: Nanos(tick),
                hrtick_dl,
            },
            fair_server,
            fair_server_share,
            fair_server_visible: read_share.is_some(),
            deadline_limit: thread_control::deadline_bandwidth_limit().unwrap_or(0.95),
        })
    }

    /// The backend that keeps "X in every window of Y" best here.
    ///
    /// With a fair server, only SCHED_DEADLINE outranks it: the dispatcher (SCHED_FIFO 99) and the
    /// threads it raises lose up to the server's whole budget in one piece (measured: 10 ms) when
    /// normal threads starve, so `deadline` is the default, and a request it cannot map (period
    /// shorter than `X + 2T` at a coarse tick) falls back to `dispatch` (see `Enforcer::reserve`).
    /// Without a fair server and without HRTICK_DL, the dispatcher's hrtimer precision wins.
    pub fn best_backend(&self) -> BackendKind {
        if self.fair_server || self.granularity.hrtick_dl == Some(true) {
            BackendKind::Deadline
        } else {
            BackendKind::Dispatch
        }
    }
}
