//! A thread for tests that act on another thread of the process (its policy, its pidfd, its
//! listing): it reports its tid and waits until released.

use std::sync::mpsc;
use std::thread::JoinHandle;

/// A thread that waits, blocked, until [`WaitingThread::finish`] or drop releases it.
pub struct WaitingThread {
    pub tid: u32,
    release: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl WaitingThread {
    /// Starts the thread and returns once its tid is known.
    pub fn spawn() -> WaitingThread {
        let (tid_sender, tid_receiver) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            tid_sender
                .send(crate::cpu::current_tid())
                .expect("the spawner waits for the tid");
            let _ = released.recv();
        });
        let tid = tid_receiver.recv().expect("the thread sends its tid");
        WaitingThread {
            tid,
            release: Some(release),
            handle: Some(handle),
        }
    }

    /// Releases the thread and waits until it has exited: what drop does, said where it happens.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for WaitingThread {
    fn drop(&mut self) {
        self.release.take();
        if let Some(handle) = self.handle.take() {
            let joined = handle.join();
            // Not a second panic while a failed test unwinds.
            if !std::thread::panicking() {
                joined.expect("the waiting thread does not panic");
            }
        }
    }
}
