//! `rtlab daemon` for the CLI tests: started on a socket in the test's sandbox with its state
//! (journal) there too, never /run/rtlab, and stopped the way systemd stops it.

use super::{assert_exit_code, end, stdout_json, wait_until, KillOnDrop, Sandbox};
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

/// How long a daemon may take to listen on a busy machine.
const START_LIMIT: Duration = Duration::from_secs(30);

/// How long a stopped daemon may take to put every thread back before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A daemon on `sandbox/rtlabd.sock`, its journal in `sandbox/rtlabd-state` and its log in
/// `sandbox/rtlabd.log` (other names with [`Launch::name`]). Dropped: SIGTERM first, so the daemon
/// reverts everything itself (a SIGKILL would leave its partitions to the next daemon's start),
/// SIGKILL if it has not stopped within [`STOP_GRACE`].
pub struct Daemon {
    pub process: KillOnDrop,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a daemon is started beyond its configuration lines: [`Launch::default`] is what
/// [`Daemon::start`] uses.
pub struct Launch<'a> {
    /// Names its files in the sandbox: `NAME.toml`, `NAME.sock`, `NAME.log` and the state
    /// directory `NAME-state` (a second daemon with another name shares nothing with the first).
    pub name: &'a str,
    /// Arguments after `--config FILE --socket FILE` (`--rtkit`, `--replace`).
    pub args: &'a [&'a str],
    /// The D-Bus system bus it connects to (`DBUS_SYSTEM_BUS_ADDRESS`), when not the machine's.
    pub system_bus: Option<&'a str>,
    /// A command the daemon runs under (`unshare …`, `setpriv …`), ending with the one that
    /// execs the daemon: its arguments follow. Empty: the daemon itself.
    pub wrapper: &'a [&'a str],
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            name: "rtlabd",
            args: &[],
            system_bus: None,
            wrapper: &[],
        }
    }
}

impl Daemon {
    /// Starts the daemon with `config_lines` (TOML) added to its `state_dir` and waits until it
    /// listens; fails the test, with the daemon's log, when it exits instead.
    pub fn start(sandbox: &Sandbox, config_lines: &str) -> Daemon {
        let mut daemon = Daemon::spawn(sandbox, config_lines, &Launch::default());
        daemon.wait_for_log("listening on");
        daemon
    }

    /// Starts the daemon as `launch` says, with `config_lines` (TOML) added to its `state_dir`,
    /// without waiting for it.
    pub fn spawn(sandbox: &Sandbox, config_lines: &str, launch: &Launch) -> Daemon {
        let name = launch.name;
        let config = sandbox.write(
            &format!("{name}.toml"),
            format!(
                "state_dir = \"{}\"\n{config_lines}",
                sandbox.file(&format!("{name}-state")).display()
            ),
        );
        let socket = sandbox.file(&format!("{name}.sock"));
        let log = sandbox.file(&format!("{name}.log"));
        let mut command = match launch.wrapper {
            [] => sandbox.command(),
            [program, arguments @ ..] => {
                let mut command = std::process::Command::new(program);
                command
                    .args(arguments)
                    .arg(env!("CARGO_BIN_EXE_rtlab"))
                    .env("RTLAB_HOME", sandbox.path());
                command
            }
        };
        command
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .args(launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(address) = launch.system_bus {
            command.env("DBUS_SYSTEM_BUS_ADDRESS", address);
        }
        let process = command.spawn().expect("start rtlab daemon");
        Daemon {
            process: KillOnDrop(process),
            config,
            socket,
            log,
        }
    }

    /// Waits until the daemon's log contains `line` (the socket is bound before the enforcer
    /// repairs what a killed daemon left; "listening on" comes after both); fails the test, with
    /// the log, when the daemon exits instead.
    pub fn wait_for_log(&mut self, line: &str) {
        wait_until(START_LIMIT, &format!("the daemon logs {line:?}"), || {
            if let Ok(Some(status)) = self.process.try_wait() {
                panic!("the daemon exited with {status}: {}", self.log_text());
            }
            self.log_text().contains(line)
        });
    }

    /// SIGTERM, so the daemon reverts everything itself; SIGKILL if it has not stopped within
    /// [`STOP_GRACE`]. Its exit status stays readable with `process.try_wait()`.
    pub fn stop(&mut self) {
        end(&mut self.process, STOP_GRACE);
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

    /// `wrapper` (e.g. `unshare -Ur`) running rtlab, as the unprivileged user nobody when
    /// `as_nobody`, else as root; talking to this daemon.
    pub fn rtlab_wrapped(&self, as_nobody: bool, wrapper: &[&str], args: &[&str]) -> Output {
        let mut command = if as_nobody {
            let mut command = std::process::Command::new("setpriv");
            command
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .args(wrapper);
            command
        } else {
            let mut command = std::process::Command::new(wrapper[0]);
            command.args(&wrapper[1..]);
            command
        };
        command
            .arg(env!("CARGO_BIN_EXE_rtlab"))
            .args(args)
            .env("RTLAB_SOCKET", &self.socket)
            .env("RTLAB_HOME", "/nonexistent")
            .output()
            .expect("setpriv and unshare (util-linux)")
    }

    /// `rtlab reservations --json -`'s document.
    pub fn reservations_document(&self, sandbox: &Sandbox) -> serde_json::Value {
        let output = self.rtlab(sandbox, &["reservations", "--json", "-"]);
        assert_exit_code(&output, 0);
        stdout_json(&output)
    }

    /// The rows of `rtlab reservations --json -`.
    pub fn reservation_rows(&self, sandbox: &Sandbox) -> Vec<serde_json::Value> {
        self.reservations_document(sandbox)["reservations"]
            .as_array()
            .expect("a reservations array")
            .clone()
    }

    /// The threads made real-time through RealtimeKit1 (`rtlab reservations --json -`'s
    /// `realtimekit` array; none when the daemon serves no RealtimeKit1).
    pub fn realtimekit_rows(&self, sandbox: &Sandbox) -> Vec<serde_json::Value> {
        self.reservations_document(sandbox)["realtimekit"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The reserved threads, from [`Daemon::reservation_rows`].
    pub fn reservation_tids(&self, sandbox: &Sandbox) -> Vec<u64> {
        self.reservation_rows(sandbox)
            .iter()
            .filter_map(|row| row["tid"].as_u64())
            .collect()
    }
}
