//! `rtlab daemon` for the CLI tests: started on a socket in the test's sandbox with its state
//! (journal) there too, never /run/rtlab, and stopped the way systemd stops it.

use super::{assert_exit_code, end, stdout_json, wait_until, KillOnDrop, Sandbox};
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

/// How long a daemon may take to listen on a busy machine.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A daemon on `sandbox/rtlabd.sock`, its journal in `sandbox/state` and its log in
/// `sandbox/daemon.log`. Dropped: SIGTERM first, so the daemon reverts everything itself (a
/// SIGKILL would leave its partitions to the next daemon's start), SIGKILL if it has not stopped
/// in 5 s.
pub struct Daemon {
    pub process: KillOnDrop,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        end(&mut self.process, Duration::from_secs(5));
    }
}

impl Daemon {
    /// Starts the daemon with `config_lines` (TOML) added to its `state_dir` and waits until it
    /// listens; fails the test, with the daemon's log, when it exits instead.
    pub fn start(sandbox: &Sandbox, config_lines: &str) -> Daemon {
        let config = sandbox.write(
            "rtlabd.toml",
            format!(
                "state_dir = \"{}\"\n{config_lines}",
                sandbox.file("state").display()
            ),
        );
        let socket = sandbox.file("rtlabd.sock");
        let log = sandbox.file("daemon.log");
        let process = sandbox
            .command()
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start rtlab daemon");
        let mut daemon = Daemon {
            process: KillOnDrop(process),
            socket,
            log,
        };
        // The socket is bound before the enforcer repairs what a killed daemon left; the log line
        // comes after both.
        wait_until(START_LIMIT, "the daemon listens", || {
            if let Ok(Some(status)) = daemon.process.try_wait() {
                panic!("the daemon exited with {status}: {}", daemon.log_text());
            }
            daemon.log_text().contains("listening on")
        });
        daemon
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// rtlab with `RTLAB_SOCKET` pointing at this daemon.
    pub fn rtlab(&self, sandbox: &Sandbox, args: &[&str]) -> Output {
        sandbox
            .command()
            .env("RTLAB_SOCKET", &self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// rtlab as the unprivileged user nobody (util-linux's `setpriv`), talking to this daemon; the
    /// sandbox must be open to all (mode 755) for nobody to reach the socket.
    pub fn rtlab_as_nobody(&self, args: &[&str]) -> Output {
        std::process::Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_rtlab"))
            .args(args)
            .env("RTLAB_SOCKET", &self.socket)
            .env("RTLAB_HOME", "/nonexistent")
            .output()
            .expect("setpriv (util-linux)")
    }

    /// The rows of `rtlab reservations --json -`.
    pub fn reservation_rows(&self, sandbox: &Sandbox) -> Vec<serde_json::Value> {
        let output = self.rtlab(sandbox, &["reservations", "--json", "-"]);
        assert_exit_code(&output, 0);
        stdout_json(&output)["reservations"]
            .as_array()
            .expect("a reservations array")
            .clone()
    }

    /// The reserved threads, from [`Daemon::reservation_rows`].
    pub fn reservation_tids(&self, sandbox: &Sandbox) -> Vec<u64> {
        self.reservation_rows(sandbox)
            .iter()
            .filter_map(|row| row["tid"].as_u64())
            .collect()
    }
}
