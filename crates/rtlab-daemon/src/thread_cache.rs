//! Connection threads kept for the next connection instead of ending with theirs.
//!
//! Starting and ending a thread takes locks of the whole process in the kernel: its stack and
//! signal stack are mapped and unmapped (the process's `mmap_lock`, for writing), and `clone` and
//! `exit` take the cgroup thread-group lock. A thread serving an unprivileged peer runs lowered
//! (nice 19, `crate::precedence`) and is starved while users' real-time threads hold the CPUs; one
//! preempted while it held such a lock kept root's accept thread waiting in the kernel (state D)
//! for 100 ms, before root's connection thread could even be started (rtlab-hostile, a tracefs
//! capture frozen at the late answer: root's thread slept in D until a nice-19 connection thread
//! of the daemon ran again and let go). With threads kept and handed the next connection, a flood
//! of connections starts and ends almost no threads, and root's connections are served by
//! threads that already exist at root's policy: nothing on root's path starts a thread.
//!
//! A kept thread waits for its next connection for [`KEEP_IDLE`], then ends; [`ThreadCache::close`]
//! ends the waiting ones at once.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a thread with nothing to serve is kept for the next connection.
pub const KEEP_IDLE: Duration = Duration::from_secs(30);

/// What a kept thread is handed: a connection to serve, or `None`: end.
type Job = Option<Box<dyn FnOnce() + Send + 'static>>;

/// Threads that serve one job after another (see the module docs).
pub struct ThreadCache {
    name: String,
    stack_bytes: usize,
    keep_idle: Duration,
    /// The threads waiting for a job, by id, each with the way to hand it one.
    idle: Mutex<Vec<(u64, mpsc::Sender<Job>)>>,
    next_id: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ThreadCache {
    /// Threads named `name`, with stacks of `stack_bytes`, kept [`KEEP_IDLE`] after each job.
    pub fn new(name: &str, stack_bytes: usize) -> Arc<ThreadCache> {
        ThreadCache::keeping(name, stack_bytes, KEEP_IDLE)
    }

    /// As [`new`](ThreadCache::new), each kept `keep_idle` after a job.
    pub fn keeping(name: &str, stack_bytes: usize, keep_idle: Duration) -> Arc<ThreadCache> {
        Arc::new(ThreadCache {
            name: name.to_owned(),
            stack_bytes,
            keep_idle,
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Runs `job` on a waiting thread, or on a new one (born with the calling thread's scheduling,
    /// as any thread it starts) when none waits. An error when no thread could be started: `job`
    /// is dropped.
    pub fn run(self: &Arc<Self>, job: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let mut job: Box<dyn FnOnce() + Send> = Box::new(job);
        loop {
            let waiting = lock(&self.idle).pop();
            let Some((_, hand)) = waiting else { break };
            match hand.send(Some(job)) {
                Ok(()) => return Ok(()),
                // That thread ended meanwhile: the next one, or a new one.
                Err(mpsc::SendError(back)) => job = back.expect("a job was sent"),
            }
        }
        let cache = Arc::clone(self);
        std::thread::Builder::new()
            .name(self.name.clone())
            .stack_size(self.stack_bytes)
            .spawn(move || cache.serve(job))
            .map(drop)
    }

    /// Ends the threads waiting now; threads still serving end after their job.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for (_, hand) in lock(&self.idle).drain(..) {
            let _ = hand.send(None);
        }
    }

    /// The number of threads waiting for a job.
    pub fn waiting(&self) -> usize {
        lock(&self.idle).len()
    }

    fn serve(self: Arc<Self>, first: Box<dyn FnOnce() + Send>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (hand, jobs) = mpsc::channel::<Job>();
        let mut job = first;
        loop {
            job();
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            lock(&self.idle).push((id, hand.clone()));
            if self.closed.load(Ordering::SeqCst) {
                // Closed while it was listing itself: `close` may have drained the list before.
                lock(&self.idle).retain(|(listed, _)| *listed != id);
                return;
            }
            let next = match jobs.recv_timeout(self.keep_idle) {
                Ok(next) => next,
                Err(_) => {
                    // Still listed: no one took it, it ends. Taken: a job is on its way (`run`
                    // sends right after taking it), so it waits for that one.
                    let mut idle = lock(&self.idle);
                    if let Some(at) = idle.iter().position(|(listed, _)| *listed == id) {
                        idle.remove(at);
                        return;
                    }
                    drop(idle);
                    jobs.recv().ok().flatten()
                }
            };
            match next {
                Some(next) => job = next,
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn current_tid() -> u32 {
        rtlab_sys::cpu::current_tid()
    }

    #[test]
    fn a_thread_that_finished_its_job_serves_the_next_one() {
        let cache = ThreadCache::new("test-cache", 256 * 1024);
        let (done, finished) = channel();
        let first = done.clone();
        cache
            .run(move || first.send(current_tid()).unwrap())
            .unwrap();
        let first_tid = finished.recv().unwrap();
        while cache.waiting() == 0 {
            std::thread::yield_now();
        }
        cache
            .run(move || done.send(current_tid()).unwrap())
            .unwrap();
        assert_eq!(finished.recv().unwrap(), first_tid, "the same thread");
        cache.close();
    }

    #[test]
    fn jobs_given_while_every_thread_is_busy_get_threads_of_their_own() {
        let cache = ThreadCache::new("test-cache", 256 * 1024);
        let (release, hold) = channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let (started, seen) = channel();
        for _ in 0..3 {
            let (hold, started) = (Arc::clone(&hold), started.clone());
            cache
                .run(move || {
                    started.send(current_tid()).unwrap();
                    let _ = lock(&hold).recv();
                })
                .unwrap();
        }
        let mut tids: Vec<u32> = (0..3).map(|_| seen.recv().unwrap()).collect();
        tids.sort_unstable();
        tids.dedup();
        assert_eq!(tids.len(), 3);
        for _ in 0..3 {
            release.send(()).unwrap();
        }
        cache.close();
    }

    #[test]
    fn an_idle_thread_ends_after_its_time_and_a_job_given_then_is_not_lost() {
        let cache = ThreadCache::keeping("test-cache", 256 * 1024, Duration::from_millis(20));
        let (done, finished) = channel();
        for round in 0..50u32 {
            let done = done.clone();
            cache.run(move || done.send(round).unwrap()).unwrap();
            assert_eq!(finished.recv().unwrap(), round);
            // Around the idle time: the thread ends, or takes the next job, never neither.
            std::thread::sleep(Duration::from_millis(u64::from(round % 3) * 10 + 5));
        }
        cache.close();
    }

    #[test]
    fn closing_ends_the_waiting_threads() {
        let cache = ThreadCache::new("test-cache", 256 * 1024);
        let (done, finished) = channel();
        cache.run(move || done.send(()).unwrap()).unwrap();
        finished.recv().unwrap();
        while cache.waiting() == 0 {
            std::thread::yield_now();
        }
        cache.close();
        assert_eq!(cache.waiting(), 0);
    }
}
