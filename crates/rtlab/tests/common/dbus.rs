//! A private dbus-daemon with a system bus's configuration (the RealtimeKit1 and package tests).

use super::KillOnDrop;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The system bus's configuration with `@SOCKET@`, `@SERVICEDIR@` and `@INCLUDE@` to fill in, the
/// one copy (bench/rtkit/canary_demotion.sh fills it in too).
const SYSTEM_BUS_TEMPLATE: &str = include_str!("../../../../bench/rtkit/private-system-bus.conf");

/// A dbus-daemon with a system bus's configuration, `include` (a bus policy file) and `servicedir`
/// (activation files, if any), in `directory`; its address once it is up, or its error when it refused the
/// configuration.
pub fn dbus_daemon_with(
    directory: &Path,
    include: &Path,
    servicedir: Option<&Path>,
) -> Result<(KillOnDrop, String), String> {
    let socket = directory.join("system_bus_socket");
    let config = directory.join("system-bus.conf");
    let servicedir = servicedir
        .map(|directory| format!("<servicedir>{}</servicedir>", directory.display()))
        .unwrap_or_default();
    let configuration = SYSTEM_BUS_TEMPLATE
        .replace("@SOCKET@", &socket.display().to_string())
        .replace("@SERVICEDIR@", &servicedir)
        .replace("@INCLUDE@", &include.display().to_string());
    std::fs::write(&config, configuration).unwrap();
    let mut process = KillOnDrop(
        Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dbus-daemon (Debian package dbus-daemon)"),
    );
    let started = Instant::now();
    while !socket.exists() {
        if let Ok(Some(_)) = process.0.try_wait() {
            let mut error = String::new();
            if let Some(mut stderr) = process.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut error);
            }
            return Err(error);
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no bus socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Up: its stderr is drained from now on, so a bus that logs much never blocks on the pipe.
    if let Some(mut stderr) = process.0.stderr.take() {
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    }
    Ok((process, format!("unix:path={}", socket.display())))
}
