//! The fork stressor: process creation and exec churn.
//!
//! Each step forks, execs `true` and waits for it (page-table copies, exec, exit, reaping), with
//! stdio closed so nothing reaches the terminal.

use super::{StepOutcome, Stressor};
use std::path::PathBuf;
use std::process::{Command, Stdio};

pub(crate) struct ForkStressor {
    program: PathBuf,
}

impl ForkStressor {
    pub fn new() -> std::io::Result<ForkStressor> {
        let program = ["/usr/bin/true", "/bin/true"]
            .iter()
            .map(PathBuf::from)
            .find(|path| path.exists())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "neither /usr/bin/true nor /bin/true exists",
                )
            })?;
        Ok(ForkStressor { program })
    }
}

impl Stressor for ForkStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        let status = Command::new(&self.program)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "{} exited with {status}",
                self.program.display()
            )));
        }
        Ok(StepOutcome {
            operations: 1,
            bytes: 0,
        })
    }
}
