//! Talking to the service manager (systemd's `sd_notify` protocol, through the `sd-notify`
//! crate): `READY=1` once a service is serving, `STATUS=` lines for `systemctl status`,
//! `STOPPING=1`, and the watchdog's `WATCHDOG=1` pings.
//!
//! Everything here does nothing when the process was not started by a service manager
//! (`NOTIFY_SOCKET` unset), so `rtlab daemon` and `rtlab monitor` behave the same in a terminal.
//! A failed notification is ignored: the service manager's own timeouts (TimeoutStartSec=,
//! WatchdogSec=) are what catches a service that cannot report.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tells the service manager the service is ready, with a status line.
pub fn ready(status: &str) {
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(status),
        ],
    );
}

/// Replaces the status line `systemctl status` shows.
pub fn status(status: &str) {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Status(status)]);
}

/// Tells the service manager the service is stopping, with a status line.
pub fn stopping(status: &str) {
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status(status),
        ],
    );
}

/// The watchdog the service manager asked for (`WatchdogSec=`, passed as `WATCHDOG_USEC` and
/// `WATCHDOG_PID`): pinged at half its interval, as sd_watchdog_enabled(3) recommends.
#[derive(Debug)]
pub struct Watchdog {
    interval: Duration,
    last_ping: Mutex<Option<Instant>>,
}

impl Watchdog {
    /// The watchdog of this process, if the service manager set one.
    pub fn from_environment() -> Option<Watchdog> {
        let mut usec = 0;
        if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
            return None;
        }
        Some(Watchdog::with_timeout(Duration::from_micros(usec)))
    }

    /// A watchdog of `timeout` (pinged every `timeout / 2`).
    pub fn with_timeout(timeout: Duration) -> Watchdog {
        Watchdog {
            interval: timeout / 2,
            last_ping: Mutex::new(None),
        }
    }

    /// How often [`Watchdog::ping_if_due`] pings.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// True when half the timeout has passed since the last ping (or there was none).
    pub fn is_due(&self) -> bool {
        let last = *self
            .last_ping
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.is_none_or(|last| last.elapsed() >= self.interval)
    }

    /// Sends `WATCHDOG=1` when due. The caller calls this from the loop whose progress the
    /// watchdog stands for, after checking that loop is healthy.
    pub fn ping_if_due(&self) -> bool {
        if !self.is_due() {
            return false;
        }
        *self
            .last_ping
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    /// One test sets the process environment (NOTIFY_SOCKET), so the others cannot race it.
    #[test]
    fn notifications_reach_the_socket_and_the_watchdog_pings_at_half_its_timeout() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // The only test in this crate touching these variables.
        std::env::set_var("NOTIFY_SOCKET", &path);
        let mut buffer = [0u8; 512];

        ready("listening on /run/rtlab/rtlabd.sock");
        let length = receiver.recv(&mut buffer).unwrap();
        assert_eq!(
            std::str::from_utf8(&buffer[..length]).unwrap(),
            "READY=1\nSTATUS=listening on /run/rtlab/rtlabd.sock\n"
        );

        let watchdog = Watchdog::with_timeout(Duration::from_secs(3600));
        assert_eq!(watchdog.interval(), Duration::from_secs(1800));
        assert!(watchdog.ping_if_due(), "the first call pings");
        let length = receiver.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"WATCHDOG=1\n");
        assert!(!watchdog.ping_if_due(), "not again before half the timeout");

        stopping("reverting");
        let length = receiver.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"STOPPING=1\nSTATUS=reverting\n");

        // WATCHDOG_PID names another process: not our watchdog.
        std::env::set_var("WATCHDOG_USEC", "2000000");
        std::env::set_var("WATCHDOG_PID", "1");
        assert!(Watchdog::from_environment().is_none());
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
        let ours = Watchdog::from_environment().expect("WATCHDOG_USEC with our pid");
        assert_eq!(ours.interval(), Duration::from_secs(1));
        std::env::remove_var("NOTIFY_SOCKET");
        std::env::remove_var("WATCHDOG_USEC");
        std::env::remove_var("WATCHDOG_PID");
    }
}
