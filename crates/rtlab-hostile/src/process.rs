//! The harness's own processes (victims, bystanders, attackers): started as an [`Identity`]
//! through util-linux's `setpriv` and `unshare -Ur`, spoken to over their stdin and stdout (JSON
//! lines), and killed when dropped, so none outlives the harness.

use crate::world::{Identity, ProcessInfo};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// `binary` run as `identity`: `setpriv --reuid U --regid U --clear-groups [unshare -Ur]
/// [prlimit --rttime=R:R] binary` (nobody's group is nogroup, 65534); root runs it directly (or
/// under `unshare -Ur`). `rttime_us` sets its RLIMIT_RTTIME (soft and hard), which RealtimeKit1
/// asks of a process before it makes a thread of it real-time, and which stops a real-time
/// thread that runs that long without blocking.
pub fn command_as(binary: &Path, identity: Identity, rttime_us: Option<u64>) -> Command {
    let mut words: Vec<String> = Vec::new();
    if identity.uid != 0 {
        words.extend(
            [
                "setpriv",
                "--reuid",
                &identity.uid.to_string(),
                "--regid",
                &identity.uid.to_string(),
                "--clear-groups",
            ]
            .map(str::to_owned),
        );
    }
    if identity.user_namespace {
        words.extend(["unshare", "-Ur"].map(str::to_owned));
    }
    if let Some(rttime_us) = rttime_us {
        words.extend([
            "prlimit".to_owned(),
            format!("--rttime={rttime_us}:{rttime_us}"),
        ]);
    }
    let mut command = match words.split_first() {
        Some((program, arguments)) => {
            let mut command = Command::new(program);
            command.args(arguments).arg(binary);
            command
        }
        None => Command::new(binary),
    };
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// A running process of the harness: killed and reaped when dropped.
pub struct Spawned {
    pub identity: Identity,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
}

impl Spawned {
    pub fn start(mut command: Command, identity: Identity) -> anyhow::Result<Spawned> {
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {command:?} (util-linux's setpriv and unshare)"))?;
        Ok(Spawned {
            identity,
            stdin: child.stdin.take(),
            stdout: child.stdout.take().map(BufReader::new),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the `{"ready": …}` line a role prints once its threads run.
    pub fn ready(&mut self) -> anyhow::Result<ProcessInfo> {
        let line = self.read_line()?;
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("a process's first line {line:?}"))?;
        let info: ProcessInfo = serde_json::from_value(value["ready"].clone())
            .with_context(|| format!("a process's ready line {line:?}"))?;
        if info.pid != self.pid() {
            bail!(
                "process {} says it is {} (setpriv or unshare forked?)",
                self.pid(),
                info.pid
            );
        }
        Ok(info)
    }

    pub fn read_line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        let stdout = self.stdout.as_mut().context("stdout taken")?;
        if stdout.read_line(&mut line)? == 0 {
            bail!(
                "process {} ({}) ended without a word",
                self.pid(),
                self.identity.describe()
            );
        }
        Ok(line)
    }

    pub fn take_stdout(&mut self) -> Option<BufReader<ChildStdout>> {
        self.stdout.take()
    }

    pub fn write_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    /// Closes its stdin: every role ends when its stdin does.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits up to `limit` for it to end by itself.
    pub fn wait_for_end(&mut self, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while std::time::Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
