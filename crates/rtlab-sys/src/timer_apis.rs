//! Every way a Linux program can wait for a period, each behind one [`Waiter`]: the sleeps
//! (`clock_nanosleep` absolute and relative, `nanosleep`, `usleep`), the kernel's periodic timers
//! (`timerfd`, POSIX `timer_create` with a thread-directed signal, `setitimer`), the timeouts of
//! the waiting calls (`poll`, `epoll_wait`, `select`, `pthread_cond_timedwait` on a real pthread
//! condition variable, an io_uring timeout).
//!
//! `rtlab timers` measures what each delivers; keeping them here keeps the measuring code free of
//! `unsafe`. Each waiter is built, armed and used by one thread (they are not `Send` on purpose:
//! timer_create's signal goes to the thread that created it, and setitimer's to the process).

use std::io;
use std::mem::MaybeUninit;

/// The APIs, with the loop each is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerApi {
    /// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` to `next += period`.
    ClockNanosleepAbs,
    /// `clock_nanosleep(CLOCK_MONOTONIC, 0)` for one period.
    ClockNanosleepRel,
    /// `nanosleep` for one period.
    Nanosleep,
    /// `usleep` for one period, rounded up to whole µs.
    Usleep,
    /// A periodic timerfd (`it_interval` = period); `read` returns the expirations.
    TimerfdPeriodic,
    /// A timerfd set again as a one-shot of one period before every `read`.
    TimerfdRearmed,
    /// POSIX `timer_create` (CLOCK_MONOTONIC, SIGEV_THREAD_ID) periodic, `sigtimedwait`,
    /// `timer_getoverrun`.
    TimerCreate,
    /// `setitimer(ITIMER_REAL)` periodic; SIGALRM taken with `sigtimedwait`.
    Setitimer,
    /// `poll` with no descriptors and a timeout of one period in whole ms (rounded up).
    Poll,
    /// `epoll_wait` on an empty epoll set, timeout in whole ms (rounded up).
    EpollWait,
    /// `select` with no descriptors and a timeval of one period (µs, rounded up).
    Select,
    /// `pthread_cond_timedwait` (condition on CLOCK_MONOTONIC) to `next += period`.
    CondTimedwait,
    /// An io_uring `IORING_OP_TIMEOUT` of one period, submitted and waited for.
    IoUring,
}

impl TimerApi {
    pub const ALL: [TimerApi; 13] = [
        TimerApi::ClockNanosleepAbs,
        TimerApi::ClockNanosleepRel,
        TimerApi::Nanosleep,
        TimerApi::Usleep,
        TimerApi::TimerfdPeriodic,
        TimerApi::TimerfdRearmed,
        TimerApi::TimerCreate,
        TimerApi::Setitimer,
        TimerApi::Poll,
        TimerApi::EpollWait,
        TimerApi::Select,
        TimerApi::CondTimedwait,
        TimerApi::IoUring,
    ];

    /// The function's name (the `api` of a study row).
    pub fn function(self) -> &'static str {
        match self {
            TimerApi::ClockNanosleepAbs => "clock_nanosleep_abs",
            TimerApi::ClockNanosleepRel => "clock_nanosleep_rel",
            TimerApi::Nanosleep => "nanosleep",
            TimerApi::Usleep => "usleep",
            TimerApi::TimerfdPeriodic | TimerApi::TimerfdRearmed => "timerfd",
            TimerApi::TimerCreate => "timer_create",
            TimerApi::Setitimer => "setitimer",
            TimerApi::Poll => "poll",
            TimerApi::EpollWait => "epoll_wait",
            TimerApi::Select => "select",
            TimerApi::CondTimedwait => "pthread_cond_timedwait",
            TimerApi::IoUring => "io_uring",
        }
    }

    /// How the loop asks (the `mode` of a study row).
    pub fn mode(self) -> &'static str {
        match self {
            TimerApi::ClockNanosleepAbs | TimerApi::CondTimedwait => "absolute",
            TimerApi::TimerfdPeriodic | TimerApi::TimerCreate | TimerApi::Setitimer => "periodic",
            TimerApi::TimerfdRearmed => "rearmed",
            _ => "relative",
        }
    }

    /// True when the API itself counts the periods it could not deliver.
    pub fn reports_overruns(self) -> bool {
        matches!(self, TimerApi::TimerfdPeriodic | TimerApi::TimerCreate)
    }

    /// The timeout the call is really given for a requested `period_ns`, ns (whole ms for
    /// poll/epoll_wait, whole µs for usleep/select/setitimer).
    pub fn effective_request_ns(self, period_ns: u64) -> u64 {
        match self {
            TimerApi::Poll | TimerApi::EpollWait => period_ns.div_ceil(1_000_000) * 1_000_000,
            TimerApi::Usleep | TimerApi::Select | TimerApi::Setitimer => {
                period_ns.div_ceil(1_000) * 1_000
            }
            _ => period_ns,
        }
    }
}

/// Sleeps `ns` relative to now (clock_nanosleep on CLOCK_MONOTONIC), finishing the remainder
/// after a signal.
pub fn sleep_for_ns(ns: u64) {
    let mut request = timespec(ns);
    loop {
        let mut remaining = timespec(0);
        // SAFETY: both timespecs are valid for the call.
        let result =
            unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &request, &mut remaining) };
        if result != libc::EINTR {
            return;
        }
        request = remaining;
    }
}

/// The signal timer_create delivers to its thread (blocked there and taken with sigtimedwait).
pub fn timer_create_signal() -> i32 {
    libc::SIGRTMIN() + 3
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

fn signal_set(signal: i32) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given; sigaddset then only writes into it.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), signal);
        set.assume_init()
    }
}

/// Blocks `signal` in the calling thread (threads it spawns later inherit the mask).
pub fn block_signal_in_current_thread(signal: i32) -> io::Result<()> {
    let set = signal_set(signal);
    // SAFETY: `set` is an initialised sigset; the old-mask pointer may be null.
    let result = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(result))
    }
}

/// Whether every thread of this process blocks `signal` (from /proc/self/task/*/status SigBlk):
/// setitimer's SIGALRM goes to any thread that does not, and by default kills the process.
pub fn signal_blocked_in_every_thread(signal: i32) -> io::Result<bool> {
    let bit = 1u64 << (signal - 1);
    // Every thread, read as `process_thread_ids` reads them: one read of the task directory can
    // miss a live thread, and a missed one that takes SIGALRM would end the process.
    for tid in crate::sched::process_thread_ids(std::process::id())? {
        let status = match std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) {
            Ok(status) => status,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        let blocked = status
            .lines()
            .find_map(|line| line.strip_prefix("SigBlk:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no SigBlk line"))?;
        if blocked & bit == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Takes a pending `signal` (already blocked) if there is one, without waiting.
fn drain_signal(signal: i32) {
    let set = signal_set(signal);
    let zero = timespec(0);
    loop {
        // SAFETY: `set` and `zero` are valid; the siginfo pointer may be null.
        let result = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) };
        if result != signal {
            return;
        }
    }
}

/// Waits for `signal` (blocked in this thread) at most `timeout_ns`; true when it came.
fn wait_for_signal(signal: i32, timeout_ns: u64) -> io::Result<bool> {
    let set = signal_set(signal);
    let timeout = timespec(timeout_ns);
    loop {
        // SAFETY: `set` and `timeout` are valid for the call; the siginfo pointer may be null.
        let result = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
        if result == signal {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EAGAIN) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// A pthread mutex and condition variable on CLOCK_MONOTONIC, boxed so they never move.
struct PthreadCondition {
    mutex: libc::pthread_mutex_t,
    condition: libc::pthread_cond_t,
}

impl PthreadCondition {
    fn new() -> io::Result<Box<PthreadCondition>> {
        let mut boxed = Box::new(PthreadCondition {
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            condition: libc::PTHREAD_COND_INITIALIZER,
        });
        let mut attributes = MaybeUninit::<libc::pthread_condattr_t>::uninit();
        // SAFETY: the attribute object is initialised by pthread_condattr_init before use and
        // destroyed after; the condition lives in a Box, so it does not move after init.
        unsafe {
            let result = libc::pthread_condattr_init(attributes.as_mut_ptr());
            if result != 0 {
                return Err(io::Error::from_raw_os_error(result));
            }
            let result =
                libc::pthread_condattr_setclock(attributes.as_mut_ptr(), libc::CLOCK_MONOTONIC);
            if result != 0 {
                libc::pthread_condattr_destroy(attributes.as_mut_ptr());
                return Err(io::Error::from_raw_os_error(result));
            }
            let result = libc::pthread_cond_init(&mut boxed.condition, attributes.as_ptr());
            libc::pthread_condattr_destroy(attributes.as_mut_ptr());
            if result != 0 {
                return Err(io::Error::from_raw_os_error(result));
            }
        }
        Ok(boxed)
    }

    /// Waits on the condition (never signalled) until CLOCK_MONOTONIC reaches `deadline_ns`.
    fn wait_until(&mut self, deadline_ns: u64) -> io::Result<()> {
        let deadline = timespec(deadline_ns);
        // SAFETY: mutex and condition were initialised in `new` and have not moved (boxed);
        // the mutex is locked before the wait and unlocked after, by this thread only.
        unsafe {
            libc::pthread_mutex_lock(&mut self.mutex);
            let result = loop {
                let result =
                    libc::pthread_cond_timedwait(&mut self.condition, &mut self.mutex, &deadline);
                // Nobody signals it: anything but ETIMEDOUT is a spurious wake-up or an error.
                if result == libc::ETIMEDOUT || (result != 0 && result != libc::EINTR) {
                    break result;
                }
            };
            libc::pthread_mutex_unlock(&mut self.mutex);
            if result == libc::ETIMEDOUT {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(result))
            }
        }
    }
}

impl Drop for PthreadCondition {
    fn drop(&mut self) {
        // SAFETY: both were initialised and nobody waits on or holds them any more.
        unsafe {
            libc::pthread_cond_destroy(&mut self.condition);
            libc::pthread_mutex_destroy(&mut self.mutex);
        }
    }
}

enum State {
    Plain,
    Descriptor(std::os::fd::OwnedFd),
    PosixTimer(libc::timer_t),
    Itimer,
    Condition(Box<PthreadCondition>),
    Ring(Box<RingTimeout>),
}

/// An io_uring and the timespec its timeout entry points at (boxed with it, so it never moves
/// while the kernel may read it).
struct RingTimeout {
    ring: io_uring::IoUring,
    time: io_uring::types::Timespec,
}

/// One API set up for one period, used by the thread that created it.
pub struct Waiter {
    api: TimerApi,
    period_ns: u64,
    next_deadline_ns: u64,
    state: State,
    // Not Send: timer_create's signal is directed at the creating thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Waiter")
            .field("api", &self.api)
            .field("period_ns", &self.period_ns)
            .finish()
    }
}

impl Waiter {
    /// Creates what `api` needs (descriptors, timers, rings) without arming anything. An error
    /// here means the API is not available to this process (no io_uring, SIGALRM not blocked in
    /// every thread, …).
    pub fn new(api: TimerApi, period_ns: u64) -> io::Result<Waiter> {
        let state = match api {
            TimerApi::TimerfdPeriodic | TimerApi::TimerfdRearmed => {
                // SAFETY: plain syscall; a non-negative result is a new descriptor we own.
                let fd = check(unsafe {
                    libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC)
                })?;
                // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
                State::Descriptor(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
            }
            TimerApi::EpollWait => {
                // SAFETY: plain syscall; a non-negative result is a new descriptor we own.
                let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
                // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
                State::Descriptor(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
            }
            TimerApi::TimerCreate => {
                let signal = timer_create_signal();
                block_signal_in_current_thread(signal)?;
                // SAFETY: sigevent is plain data; zeroed is a valid start before filling it.
                let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
                event.sigev_notify = libc::SIGEV_THREAD_ID;
                event.sigev_signo = signal;
                event.sigev_notify_thread_id = crate::cpu::current_tid() as libc::c_int;
                let mut timer: libc::timer_t = std::ptr::null_mut();
                // SAFETY: `event` is initialised and `timer` writable; the kernel fills the id.
                check(unsafe {
                    libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer)
                })?;
                State::PosixTimer(timer)
            }
            TimerApi::Setitimer => {
                block_signal_in_current_thread(libc::SIGALRM)?;
                if !signal_blocked_in_every_thread(libc::SIGALRM)? {
                    return Err(io::Error::other(
                        "a thread of this process does not block SIGALRM, which would kill it",
                    ));
                }
                drain_signal(libc::SIGALRM);
                State::Itimer
            }
            TimerApi::CondTimedwait => State::Condition(PthreadCondition::new()?),
            TimerApi::IoUring => {
                let ring = io_uring::IoUring::new(4)?;
                let mut probe = io_uring::Probe::new();
                ring.submitter().register_probe(&mut probe)?;
                if !probe.is_supported(io_uring::opcode::Timeout::CODE) {
                    return Err(io::Error::other(
                        "the kernel's io_uring has no timeout opcode",
                    ));
                }
                State::Ring(Box::new(RingTimeout {
                    ring,
                    time: io_uring::types::Timespec::new(),
                }))
            }
            _ => State::Plain,
        };
        Ok(Waiter {
            api,
            period_ns,
            next_deadline_ns: 0,
            state,
            _not_send: std::marker::PhantomData,
        })
    }

    /// Arms the timer (periodic APIs) with its first expiry one period from now, and sets the
    /// first deadline of the absolute ones.
    pub fn start(&mut self) -> io::Result<()> {
        let now = crate::clock::monotonic_ns();
        self.next_deadline_ns = now;
        let period = timespec(self.period_ns);
        match (&self.state, self.api) {
            (State::Descriptor(fd), TimerApi::TimerfdPeriodic) => {
                let setting = libc::itimerspec {
                    it_interval: period,
                    it_value: period,
                };
                // SAFETY: valid descriptor and itimerspec; the old value may be null.
                check(unsafe {
                    libc::timerfd_settime(
                        std::os::fd::AsRawFd::as_raw_fd(fd),
                        0,
                        &setting,
                        std::ptr::null_mut(),
                    )
                })?;
            }
            (State::PosixTimer(timer), _) => {
                let setting = libc::itimerspec {
                    it_interval: period,
                    it_value: period,
                };
                // SAFETY: `timer` is a live timer id; the old value may be null.
                check(unsafe { libc::timer_settime(*timer, 0, &setting, std::ptr::null_mut()) })?;
            }
            (State::Itimer, _) => {
                let micros = self.period_ns.div_ceil(1_000);
                let interval = libc::timeval {
                    tv_sec: (micros / 1_000_000) as libc::time_t,
                    tv_usec: (micros % 1_000_000) as libc::suseconds_t,
                };
                let setting = libc::itimerval {
                    it_interval: interval,
                    it_value: interval,
                };
                // SAFETY: valid itimerval; the old value may be null.
                check(unsafe {
                    libc::setitimer(libc::ITIMER_REAL, &setting, std::ptr::null_mut())
                })?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Waits one period the API's way. Returns the periods the API says it could not deliver
    /// (overruns; always 0 for the APIs that report none). A wait that ends with nothing
    /// delivered after two periods and 100 ms (a lost signal) is an error, so no caller
    /// blocks forever.
    ///
    /// The longer ways are functions of their own, each inlined here, so the wait compiles to
    /// what one function with every way in it did.
    pub fn wait(&mut self) -> io::Result<u64> {
        let period_ns = self.period_ns;
        let patience_ns = 2 * period_ns + 100_000_000;
        match self.api {
            TimerApi::ClockNanosleepAbs => {
                self.next_deadline_ns += period_ns;
                crate::clock::sleep_until_ns(self.next_deadline_ns);
                Ok(0)
            }
            TimerApi::ClockNanosleepRel => clock_nanosleep_for(period_ns),
            TimerApi::Nanosleep => nanosleep_for(period_ns),
            TimerApi::Usleep => {
                let micros = period_ns.div_ceil(1_000).min(u32::MAX as u64) as libc::useconds_t;
                // SAFETY: plain syscall wrapper taking an integer.
                check(unsafe { libc::usleep(micros) })?;
                Ok(0)
            }
            TimerApi::TimerfdPeriodic | TimerApi::TimerfdRearmed => self.read_timerfd(),
            TimerApi::TimerCreate => {
                let State::PosixTimer(timer) = &self.state else {
                    unreachable!("timer_create waiters hold a timer")
                };
                if !wait_for_signal(timer_create_signal(), patience_ns)? {
                    return Err(io::Error::other("timer_create's signal never came"));
                }
                // SAFETY: `timer` is a live timer id.
                let overruns = check(unsafe { libc::timer_getoverrun(*timer) })?;
                Ok(overruns as u64)
            }
            TimerApi::Setitimer => {
                if !wait_for_signal(libc::SIGALRM, patience_ns)? {
                    return Err(io::Error::other("setitimer's SIGALRM never came"));
                }
                Ok(0)
            }
            TimerApi::Poll => {
                let millis = (period_ns.div_ceil(1_000_000)).min(i32::MAX as u64) as libc::c_int;
                // SAFETY: no descriptors: a null array with a count of 0 is valid.
                check(unsafe { libc::poll(std::ptr::null_mut(), 0, millis) })?;
                Ok(0)
            }
            TimerApi::EpollWait => self.wait_on_empty_epoll(),
            TimerApi::Select => select_for(period_ns),
            TimerApi::CondTimedwait => {
                self.next_deadline_ns += period_ns;
                let deadline = self.next_deadline_ns;
                let State::Condition(condition) = &mut self.state else {
                    unreachable!("condition waiters hold a condition")
                };
                condition.wait_until(deadline)?;
                Ok(0)
            }
            TimerApi::IoUring => self.wait_for_io_uring_timeout(),
        }
    }

    /// Reads a timerfd's expirations (re-arming it as a one-shot first when it is the re-armed
    /// kind); returns the expirations beyond the first.
    #[inline(always)]
    fn read_timerfd(&self) -> io::Result<u64> {
        let period_ns = self.period_ns;
        let State::Descriptor(fd) = &self.state else {
            unreachable!("timerfd waiters hold a descriptor")
        };
        let raw = std::os::fd::AsRawFd::as_raw_fd(fd);
        if self.api == TimerApi::TimerfdRearmed {
            let setting = libc::itimerspec {
                it_interval: timespec(0),
                it_value: timespec(period_ns),
            };
            // SAFETY: valid descriptor and itimerspec; the old value may be null.
            check(unsafe { libc::timerfd_settime(raw, 0, &setting, std::ptr::null_mut()) })?;
        }
        let mut expirations = 0u64;
        loop {
            // SAFETY: reads 8 bytes into a u64 we own.
            let read = unsafe { libc::read(raw, (&mut expirations as *mut u64).cast(), 8) };
            if read == 8 {
                return Ok(expirations.saturating_sub(1));
            }
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINTR) {
                return Err(error);
            }
        }
    }

    /// Waits on the empty epoll set for one period in whole ms (rounded up).
    #[inline(always)]
    fn wait_on_empty_epoll(&self) -> io::Result<u64> {
        let State::Descriptor(fd) = &self.state else {
            unreachable!("epoll waiters hold a descriptor")
        };
        let millis = (self.period_ns.div_ceil(1_000_000)).min(i32::MAX as u64) as libc::c_int;
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll descriptor and room for one event.
        check(unsafe {
            libc::epoll_wait(std::os::fd::AsRawFd::as_raw_fd(fd), &mut event, 1, millis)
        })?;
        Ok(0)
    }

    /// Submits an io_uring timeout of one period and waits for its completion.
    #[inline(always)]
    fn wait_for_io_uring_timeout(&mut self) -> io::Result<u64> {
        let period_ns = self.period_ns;
        let State::Ring(ring_timeout) = &mut self.state else {
            unreachable!("io_uring waiters hold a ring")
        };
        let RingTimeout { ring, time } = &mut **ring_timeout;
        *time = io_uring::types::Timespec::new()
            .sec(period_ns / 1_000_000_000)
            .nsec((period_ns % 1_000_000_000) as u32);
        let entry = io_uring::opcode::Timeout::new(time as *const _)
            .build()
            .user_data(1);
        // SAFETY: the timespec lives in the boxed state, untouched until the completion
        // below is reaped; the entry refers to nothing else.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("the io_uring submission queue is full"))?;
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => continue,
                Err(error) => return Err(error),
            }
            if let Some(completion) = ring.completion().next() {
                let result = completion.result();
                // -ETIME is how a timeout completes.
                if result == -libc::ETIME || result >= 0 {
                    return Ok(0);
                }
                return Err(io::Error::from_raw_os_error(-result));
            }
        }
    }
}

/// Sleeps one period with a relative `clock_nanosleep`, finishing the remainder after a signal.
#[inline(always)]
fn clock_nanosleep_for(period_ns: u64) -> io::Result<u64> {
    let mut request = timespec(period_ns);
    loop {
        let mut remaining = timespec(0);
        // SAFETY: both timespecs are valid; relative sleep.
        let result =
            unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &request, &mut remaining) };
        if result != libc::EINTR {
            return if result == 0 {
                Ok(0)
            } else {
                Err(io::Error::from_raw_os_error(result))
            };
        }
        request = remaining;
    }
}

/// Sleeps one period with `nanosleep`, finishing the remainder after a signal.
#[inline(always)]
fn nanosleep_for(period_ns: u64) -> io::Result<u64> {
    let mut request = timespec(period_ns);
    loop {
        let mut remaining = timespec(0);
        // SAFETY: both timespecs are valid.
        if unsafe { libc::nanosleep(&request, &mut remaining) } == 0 {
            return Ok(0);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
        request = remaining;
    }
}

/// Waits one period (whole µs, rounded up) in a `select` with no descriptors.
#[inline(always)]
fn select_for(period_ns: u64) -> io::Result<u64> {
    let micros = period_ns.div_ceil(1_000);
    let mut timeout = libc::timeval {
        tv_sec: (micros / 1_000_000) as libc::time_t,
        tv_usec: (micros % 1_000_000) as libc::suseconds_t,
    };
    // SAFETY: no descriptor sets (null) and a valid timeval.
    check(unsafe {
        libc::select(
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut timeout,
        )
    })?;
    Ok(0)
}

impl Drop for Waiter {
    fn drop(&mut self) {
        match &self.state {
            State::PosixTimer(timer) => {
                // SAFETY: `timer` is a live timer id, deleted once here.
                unsafe { libc::timer_delete(*timer) };
                drain_signal(timer_create_signal());
            }
            State::Itimer => {
                let zero = libc::itimerval {
                    it_interval: libc::timeval {
                        tv_sec: 0,
                        tv_usec: 0,
                    },
                    it_value: libc::timeval {
                        tv_sec: 0,
                        tv_usec: 0,
                    },
                };
                // SAFETY: valid itimerval; disarms the process's ITIMER_REAL.
                unsafe { libc::setitimer(libc::ITIMER_REAL, &zero, std::ptr::null_mut()) };
                // A SIGALRM generated before the disarm stays pending on the process: take it.
                drain_signal(libc::SIGALRM);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_but_setitimer_waits_about_one_period() {
        // setitimer needs SIGALRM blocked in every thread, which the test harness's threads do
        // not: the CLI tests cover it.
        for api in TimerApi::ALL {
            if api == TimerApi::Setitimer {
                continue;
            }
            let mut waiter = match Waiter::new(api, 2_000_000) {
                Ok(waiter) => waiter,
                // A kernel without io_uring (or with it disabled) refuses it plainly; any
                // other failure is a bug.
                Err(error)
                    if api == TimerApi::IoUring
                        && matches!(
                            error.raw_os_error(),
                            Some(libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP)
                        ) =>
                {
                    continue
                }
                Err(error) => panic!("{api:?}: {error}"),
            };
            waiter.start().unwrap();
            let before = crate::clock::monotonic_ns();
            for _ in 0..3 {
                waiter.wait().unwrap();
            }
            let elapsed = crate::clock::monotonic_ns() - before;
            // Never early: three periods of 2 ms take at least 5.9 ms (absolute loops start one
            // period after `start`, and the clock read may trail by a little).
            assert!(elapsed >= 5_900_000, "{api:?} returned after {elapsed} ns");
        }
    }

    #[test]
    fn setitimer_refuses_while_a_thread_could_take_sigalrm() {
        // The harness's main thread never blocks SIGALRM.
        assert!(!signal_blocked_in_every_thread(libc::SIGALRM).unwrap());
        std::thread::spawn(|| {
            let error = Waiter::new(TimerApi::Setitimer, 1_000_000).unwrap_err();
            assert!(error.to_string().contains("SIGALRM"), "{error}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn ms_and_us_apis_round_up() {
        assert_eq!(
            TimerApi::EpollWait.effective_request_ns(16_666_667),
            17_000_000
        );
        assert_eq!(TimerApi::Poll.effective_request_ns(1_000_000), 1_000_000);
        assert_eq!(
            TimerApi::Select.effective_request_ns(16_666_667),
            16_667_000
        );
        assert_eq!(TimerApi::TimerfdRearmed.function(), "timerfd");
        assert_ne!(
            TimerApi::TimerfdRearmed.mode(),
            TimerApi::TimerfdPeriodic.mode()
        );
    }
}
