//! Watching managed threads: one thread polls a pidfd per managed thread (`PIDFD_THREAD`, Linux
//! 6.9+; on older kernels it polls /proc every 100 ms and compares start times) and tells the
//! registry when a thread exits, and lets lingering activities go when their hysteresis runs out.
//!
//! The watcher owns every pidfd, so no fd is closed while it is being polled; the registry asks it
//! to watch or forget a thread over a channel and wakes its `poll` through a socket pair.
//!
//! The wake-up is deferred: the registry only queues (under its lock, in the middle of a request),
//! and the server calls [`Watcher::wake_if_pending`] once it has written the answer. Waking the
//! watcher mid-request cost the client a context switch and a wait on the registry lock (the
//! watcher takes it to learn its next deadline) before it got its answer. Nothing is lost by the
//! delay: a pidfd stays readable once its thread has exited, so a thread that exits before its
//! pidfd is polled is still noticed at the wake-up. (A client that does not read its answer
//! delays that wake-up by at most the write timeout, `request_timeout`.)

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the watcher tells when a watched thread exits or a deadline passes: the registry
/// (`registry.rs` implements it). A trait here so that the watcher, which the registry owns a
/// handle to, needs nothing of the registry's.
pub trait WatchedThreads {
    /// Thread `tid` exited (noticed at `now`).
    fn thread_exited(&mut self, tid: u32, now: Instant);
    /// Lets go what has lingered past its time; returns the next deadline, if any.
    fn expire(&mut self, now: Instant) -> Option<Instant>;
}

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

    /// Opens the handle of thread `tid` and reads who owns it: from the handle's own pidfd
    /// (`PIDFD_GET_INFO`, Linux 6.13+), so the owner is that of the very thread watched and no
    /// second pidfd or /proc/TID/status read is needed; else from /proc/TID/status. Returns the
    /// handle and (process id, real uid, effective uid). A thread that is gone gives an error of
    /// kind `NotFound`.
    pub fn open_with_owner(tid: u32) -> io::Result<(WatchHandle, (u32, u32, u32))> {
        let gone = || io::Error::new(io::ErrorKind::NotFound, format!("no thread {tid}"));
        let pidfd = match rtlab_sys::ipc::pidfd_open_thread(tid) {
            Ok(fd) => Some(fd),
            Err(error) if rtlab_sys::ipc::is_no_such_process(&error) => return Err(gone()),
            Err(_) => None,
        };
        let from_pidfd = pidfd
            .as_ref()
            .and_then(|fd| rtlab_sys::ipc::pidfd_info(fd.as_fd()).ok())
            .filter(|info| info.pid == tid)
            .map(|info| (info.tgid, info.real_uid, info.effective_uid));
        let owner = match from_pidfd {
            Some(owner) => owner,
            None => {
                let status = rtlab_sys::proc_thread::thread_status(tid)?;
                (status.tgid, status.real_uid(), status.effective_uid())
            }
        };
        let handle = match pidfd {
            Some(fd) => WatchHandle {
                tid,
                kind: HandleKind::Pidfd(fd),
            },
            None => WatchHandle::open(tid, owner.0)?,
        };
        Ok((handle, owner))
    }

    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Whether the thread this handle was opened for still runs, so that its tid still names it
    /// and not a thread that took the number since. Asked after each change made by tid: a change
    /// that reached another thread is undone.
    pub fn is_the_same_thread(&self) -> bool {
        match &self.kind {
            HandleKind::Pidfd(fd) => {
                !rtlab_sys::ipc::pidfd_process_exited(fd.as_fd()).unwrap_or(true)
            }
            HandleKind::Proc { tgid, start_time } => {
                rtlab_sys::proc_thread::thread_is_alive(*tgid, self.tid, *start_time)
            }
        }
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
    /// Something was queued (or a deadline may have changed) since the watcher last looked.
    pending: Arc<AtomicBool>,
}

/// The watcher thread's side, run by [`WatcherLoop::run`].
pub struct WatcherLoop {
    receiver: mpsc::Receiver<Command>,
    wake: UnixStream,
    pending: Arc<AtomicBool>,
    handles: BTreeMap<u32, WatchHandle>,
}

impl Watcher {
    pub fn new() -> io::Result<(Watcher, WatcherLoop)> {
        let (wake_write, wake_read) = UnixStream::pair()?;
        wake_write.set_nonblocking(true)?;
        wake_read.set_nonblocking(true)?;
        let (sender, receiver) = mpsc::channel();
        let pending = Arc::new(AtomicBool::new(false));
        Ok((
            Watcher {
                sender,
                wake: Arc::new(wake_write),
                pending: Arc::clone(&pending),
            },
            WatcherLoop {
                receiver,
                wake: wake_read,
                pending,
                handles: BTreeMap::new(),
            },
        ))
    }

    /// Queues `command`; the watcher sees it at its next wake-up ([`Watcher::wake_if_pending`]).
    fn queue(&self, command: Command) {
        // The loop may have stopped (shutdown); then nothing needs watching any more.
        if self.sender.send(command).is_ok() {
            self.pending.store(true, Ordering::SeqCst);
        }
    }

    fn wake(&self) {
        // A full socket buffer already holds a wake-up, so WouldBlock is fine.
        let _ = (&*self.wake).write(&[1]);
    }

    /// Starts watching a thread (at the next wake-up).
    pub fn watch(&self, handle: WatchHandle) {
        self.queue(Command::Watch(handle));
    }

    /// Stops watching a thread (at the next wake-up).
    pub fn unwatch(&self, tid: u32) {
        self.queue(Command::Unwatch(tid));
    }

    /// Asks the watcher, at the next wake-up, for the registry's next deadline (something may
    /// linger now that did not: a partition the enforcement keeps after a failed reservation or a
    /// release, say).
    pub fn nudge(&self) {
        self.pending.store(true, Ordering::SeqCst);
    }

    /// Wakes the watcher if anything was queued or nudged since it last looked. The server calls
    /// this after answering each request, outside the registry lock.
    pub fn wake_if_pending(&self) {
        if self.pending.swap(false, Ordering::SeqCst) {
            self.wake();
        }
    }

    /// Stops the watcher thread (at once).
    pub fn stop(&self) {
        if self.sender.send(Command::Stop).is_ok() {
            self.wake();
        }
    }
}

impl WatcherLoop {
    /// Runs until [`Watcher::stop`] (or until every [`Watcher`] is gone).
    pub fn run<Threads: WatchedThreads>(
        mut self,
        registry: Arc<crate::precedence::PiLock<Threads>>,
    ) -> io::Result<()> {
        let mut next_deadline: Option<Instant> = None;
        loop {
            // Cleared before the queue is drained: whatever is queued after this wakes us again.
            self.pending.store(false, Ordering::SeqCst);
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
                let mut registry = registry.lock();
                let now = Instant::now();
                for tid in exited {
                    registry.thread_exited(tid, now);
                }
                next_deadline = registry.expire(Instant::now());
            }
        }
    }
}
