//! Watching managed threads: one thread polls a pidfd per managed thread (`PIDFD_THREAD`, Linux
//! 6.9+; on older kernels it polls /proc every 100 ms and compares start times) and tells the
//! registry when a thread exits, and lets lingering activities go when their hysteresis runs out.
//!
//! The watcher owns every pidfd, so no fd is closed while it is being polled; the registry asks it
//! to watch or forget a thread over a channel and wakes its `poll` through a socket pair.

use crate::registry::Registry;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often /proc is polled for threads that have no pidfd (kernels before 6.9).
const PROC_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What tells the watcher that one thread exited.
#[derive(Debug)]
pub struct WatchHandle {
    tid: u32,
    kind: HandleKind,
}

#[derive(Debug)]
enum HandleKind {
    Pidfd(OwnedFd),
    Proc { tgid: u32, start_time: u64 },
}

impl WatchHandle {
    /// Opens the handle for thread `tid` of process `tgid`: a thread pidfd where the kernel has
    /// them, else its start time for polling. A thread that is gone gives an error of kind
    /// `NotFound`.
    pub fn open(tid: u32, tgid: u32) -> io::Result<WatchHandle> {
        match rtlab_sys::ipc::pidfd_open_thread(tid) {
            Ok(fd) => Ok(WatchHandle {
                tid,
                kind: HandleKind::Pidfd(fd),
            }),
            Err(error) if rtlab_sys::ipc::is_no_such_process(&error) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no thread {tid}"),
            )),
            Err(_) => {
                let start_time = rtlab_sys::thread_control::thread_start_time(tid)?;
                Ok(WatchHandle {
                    tid,
                    kind: HandleKind::Proc { tgid, start_time },
                })
            }
        }
    }

    pub fn tid(&self) -> u32 {
        self.tid
    }

    fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        match &self.kind {
            HandleKind::Pidfd(fd) => Some(fd.as_fd()),
            HandleKind::Proc { .. } => None,
        }
    }

    fn proc_thread_is_gone(&self) -> bool {
        match self.kind {
            HandleKind::Proc { tgid, start_time } => {
                !rtlab_sys::proc_thread::thread_is_alive(tgid, self.tid, start_time)
            }
            HandleKind::Pidfd(_) => false,
        }
    }
}

enum Command {
    Watch(WatchHandle),
    Unwatch(u32),
    Stop,
}

/// The registry's side: asks the watcher thread to watch or forget threads.
#[derive(Clone)]
pub struct Watcher {
    sender: mpsc::Sender<Command>,
    wake: Arc<UnixStream>,
}

/// The watcher thread's side, run by [`WatcherLoop::run`].
pub struct WatcherLoop {
    receiver: mpsc::Receiver<Command>,
    wake: UnixStream,
    handles: BTreeMap<u32, WatchHandle>,
}

impl Watcher {
    pub fn new() -> io::Result<(Watcher, WatcherLoop)> {
        let (wake_write, wake_read) = UnixStream::pair()?;
        wake_write.set_nonblocking(true)?;
        wake_read.set_nonblocking(true)?;
        let (sender, receiver) = mpsc::channel();
        Ok((
            Watcher {
                sender,
                wake: Arc::new(wake_write),
            },
            WatcherLoop {
                receiver,
                wake: wake_read,
                handles: BTreeMap::new(),
            },
        ))
    }

    fn send(&self, command: Command) {
        // The loop may have stopped (shutdown); then nothing needs watching any more.
        if self.sender.send(command).is_ok() {
            // A full socket buffer already holds a wake-up, so WouldBlock is fine.
            let _ = (&*self.wake).write(&[1]);
        }
    }

    pub fn watch(&self, handle: WatchHandle) {
        self.send(Command::Watch(handle));
    }

    pub fn unwatch(&self, tid: u32) {
        self.send(Command::Unwatch(tid));
    }

    /// Wakes the watcher to ask the registry for its next deadline (something may linger now that
    /// did not: a partition the enforcement keeps after a failed reservation, say).
    pub fn nudge(&self) {
        let _ = (&*self.wake).write(&[1]);
    }

    pub fn stop(&self) {
        self.send(Command::Stop);
    }
}

impl WatcherLoop {
    /// Runs until [`Watcher::stop`] (or until every [`Watcher`] is gone).
    pub fn run(mut self, registry: Arc<Mutex<Registry>>) -> io::Result<()> {
        let mut next_deadline: Option<Instant> = None;
        loop {
            loop {
                match self.receiver.try_recv() {
                    Ok(Command::Watch(handle)) => {
                        self.handles.insert(handle.tid, handle);
                    }
                    Ok(Command::Unwatch(tid)) => {
                        self.handles.remove(&tid);
                    }
                    Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            let now = Instant::now();
            let mut timeout = next_deadline.map(|deadline| deadline.saturating_duration_since(now));
            let polls_proc = self.handles.values().any(|handle| handle.pidfd().is_none());
            if polls_proc {
                timeout = Some(timeout.map_or(PROC_POLL_INTERVAL, |t| t.min(PROC_POLL_INTERVAL)));
            }
            let pidfd_tids: Vec<u32> = self
                .handles
                .values()
                .filter(|handle| handle.pidfd().is_some())
                .map(|handle| handle.tid)
                .collect();
            let mut fds: Vec<BorrowedFd<'_>> = vec![self.wake.as_fd()];
            fds.extend(self.handles.values().filter_map(WatchHandle::pidfd));
            let ready = rtlab_sys::ipc::poll_readable(&fds, timeout)?;
            if ready[0] {
                let mut buffer = [0u8; 256];
                while matches!((&self.wake).read(&mut buffer), Ok(n) if n > 0) {}
            }
            let mut exited: Vec<u32> = pidfd_tids
                .iter()
                .zip(&ready[1..])
                .filter(|(_, ready)| **ready)
                .map(|(tid, _)| *tid)
                .collect();
            if polls_proc {
                exited.extend(
                    self.handles
                        .values()
                        .filter(|handle| handle.proc_thread_is_gone())
                        .map(|handle| handle.tid),
                );
            }
            for tid in &exited {
                self.handles.remove(tid);
            }
            let due = next_deadline.is_some_and(|deadline| deadline <= Instant::now());
            if !exited.is_empty() || due || ready[0] {
                let mut registry = registry
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let now = Instant::now();
                for tid in exited {
                    registry.thread_exited(tid, now);
                }
                next_deadline = registry.expire(Instant::now());
            }
        }
    }
}
