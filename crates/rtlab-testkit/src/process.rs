//! Child processes a test starts: killed when the test fails, or ended the way a user would.

use crate::wait::eventually;
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command};
use std::time::Duration;

/// A spawned process that is killed and reaped when dropped, so a failing assertion does not
/// leave it running (an rtlab measuring at real-time priority until its own deadline, a daemon).
pub struct KillOnDrop(pub Child);

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Both fail harmlessly when the test already waited for it.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ends `child` the way a user would: SIGTERM, up to `grace` to exit on its own (and undo what it
/// changed), then SIGKILL; reaps it. Nothing happens to a child that has already exited.
pub fn end(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .stderr(std::process::Stdio::null())
        .status();
    if !eventually(grace, || matches!(child.try_wait(), Ok(Some(_)))) {
        let _ = child.kill();
    }
    let _ = child.wait();
}
