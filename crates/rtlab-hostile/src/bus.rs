//! The system bus of a stage: a private `dbus-daemon` with a system bus's configuration
//! (`bench/rtkit/private-system-bus.conf`, as rtlab's RealtimeKit1 tests use) on a socket in the
//! stage's directory, on which the daemon under test serves RealtimeKit1
//! (`DBUS_SYSTEM_BUS_ADDRESS`). Killed when dropped, after the daemon (the stage's order).
//!
//! Its policy file is the harness's, not the package's: root may own
//! `org.freedesktop.RealtimeKit1` and everyone may call every member of it, `ResetKnown`,
//! `ResetAll` and `Exit` included. The packaged policy denies those three to everyone but root
//! at the bus; here they reach the daemon, so its own check (root only) is what is attacked.

use anyhow::{bail, Context};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The system bus's configuration with `@SOCKET@`, `@SERVICEDIR@` and `@INCLUDE@` to fill in.
const SYSTEM_BUS_TEMPLATE: &str = include_str!("../../../bench/rtkit/private-system-bus.conf");

/// Who may own and call RealtimeKit1 on the harness's bus.
const POLICY: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy user="root">
    <allow own="org.freedesktop.RealtimeKit1"/>
  </policy>
  <policy context="default">
    <allow send_destination="org.freedesktop.RealtimeKit1"/>
    <allow receive_sender="org.freedesktop.RealtimeKit1"/>
  </policy>
</busconfig>
"#;

const START_LIMIT: Duration = Duration::from_secs(20);

/// A running private bus.
pub struct Bus {
    child: Child,
    /// `unix:path=…`, for `DBUS_SYSTEM_BUS_ADDRESS` and the attackers.
    pub address: String,
}

impl Bus {
    /// Starts `dbus-daemon` in `directory` (which every user must reach) and waits for its socket.
    pub fn start(directory: &Path) -> anyhow::Result<Bus> {
        let socket = directory.join("system_bus_socket");
        let policy = directory.join("realtimekit1.conf");
        let config = directory.join("system-bus.conf");
        std::fs::write(&policy, POLICY)?;
        std::fs::write(
            &config,
            SYSTEM_BUS_TEMPLATE
                .replace("@SOCKET@", &socket.display().to_string())
                .replace("@SERVICEDIR@", "")
                .replace("@INCLUDE@", &policy.display().to_string()),
        )?;
        let log = directory.join("dbus-daemon.log");
        let child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting dbus-daemon (Debian package dbus-daemon)")?;
        let mut bus = Bus {
            child,
            address: format!("unix:path={}", socket.display()),
        };
        let started = Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = bus.child.try_wait() {
                bail!(
                    "dbus-daemon exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if started.elapsed() > START_LIMIT {
                bail!("dbus-daemon made no socket within {START_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(bus)
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
