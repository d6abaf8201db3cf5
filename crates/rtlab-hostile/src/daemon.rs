//! The daemon under test: the real `rtlab daemon` binary, as root, with real enforcement, on a
//! socket and a journal in a directory of the run's own (never /run/rtlab), stopped with SIGTERM
//! so it puts every thread back itself (SIGKILL only if it has not stopped within 10 s). With a
//! bus, it serves RealtimeKit1 there (`--rtkit`: it does not start without it).

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_LIMIT: Duration = Duration::from_secs(30);
const STOP_GRACE: Duration = Duration::from_secs(10);
const SIGTERM: i32 = 15;

/// How the daemon is configured.
#[derive(Clone, Debug)]
pub struct DaemonSettings {
    /// The `rtlab` binary.
    pub binary: PathBuf,
    /// `user_limit` in its configuration.
    pub user_limit: f64,
    /// `deadline_placement`: off by default here, so an attacker's reservation does not take a
    /// CPU away from everything else on a shared machine for the whole run.
    pub deadline_placement: bool,
    /// Whether it serves RealtimeKit1 (on the stage's private bus).
    pub rtkit: bool,
    /// `rtkit.user_share`, when not the default (`user_limit`).
    pub rtkit_user_share: Option<f64>,
    /// `rtkit.user_share_window`.
    pub rtkit_user_share_window: Duration,
}

impl DaemonSettings {
    /// The share of one CPU a user's RealtimeKit1 threads may run over the window, with what the
    /// registry holds for it.
    pub fn effective_user_share(&self) -> f64 {
        self.rtkit_user_share.unwrap_or(self.user_limit)
    }
}

pub struct Daemon {
    child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts it in `directory` (named `name`.sock, .toml, .log, -state) and waits until it
    /// listens (and, with `bus`, owns RealtimeKit1 on that bus).
    pub fn start(
        settings: &DaemonSettings,
        directory: &Path,
        name: &str,
        bus: Option<&str>,
    ) -> anyhow::Result<Daemon> {
        let config = directory.join(format!("{name}.toml"));
        let socket = directory.join(format!("{name}.sock"));
        let log = directory.join(format!("{name}.log"));
        let rtkit = bus.is_some() && settings.rtkit;
        let mut text = format!(
            "state_dir = \"{}\"\nuser_limit = {}\ndeadline_placement = {}\n[rtkit]\nenabled = {rtkit}\nuser_share_window = \"{}ms\"\n",
            directory.join(format!("{name}-state")).display(),
            settings.user_limit,
            settings.deadline_placement,
            settings.rtkit_user_share_window.as_millis(),
        );
        if let Some(share) = settings.rtkit_user_share {
            text.push_str(&format!("user_share = {share}\n"));
        }
        std::fs::write(&config, text)?;
        let mut command = Command::new(&settings.binary);
        command
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket);
        if let (true, Some(address)) = (rtkit, bus) {
            command
                .arg("--rtkit")
                .env("DBUS_SYSTEM_BUS_ADDRESS", address);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", settings.binary.display()))?;
        let mut daemon = Daemon { child, socket, log };
        let started = Instant::now();
        let ready = |log: &str| {
            log.contains("listening on")
                && (!rtkit || log.contains("owns org.freedesktop.RealtimeKit1"))
        };
        while !ready(&daemon.log_text()) {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                bail!("the daemon exited with {status}: {}", daemon.log_text());
            }
            if started.elapsed() > START_LIMIT {
                bail!(
                    "the daemon did not listen within {START_LIMIT:?}: {}",
                    daemon.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(daemon)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Whether it has exited or a thread of it panicked (it then reverts every thread and exits,
    /// which can take seconds).
    pub fn failed(&mut self) -> bool {
        self.exited().is_some() || self.log_text().contains("panicked")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, so it reverts every thread itself; SIGKILL after [`STOP_GRACE`]. Whether it
    /// stopped by itself.
    pub fn stop(&mut self) -> bool {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        let _ = rtlab_sys::signals::send(self.child.id(), SIGTERM);
        let until = Instant::now() + STOP_GRACE;
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}
