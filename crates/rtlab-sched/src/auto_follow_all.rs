//! `reserve --auto --follow` for every reservation `--auto` made: one thread each, following
//! its reservation (`auto_follow::follow`) until its thread ends or a stop, a thread its program
//! starts in the followed one's place reserved at the size held and followed in turn, then
//! everything made released. The daemon and the windows observed are the caller's
//! ([`FollowDaemon`]: the binary's client and the kernel's counters), so this crate needs
//! neither rtlab-client nor the tracing crates.

use crate::auto_follow::{
    follow, FollowEnd, FollowIo, FollowPolicy, FollowWindow, FollowedSize, Follower,
};
use crate::auto_reserve::{AutoMachine, AutoPlan, AutoReservation, AutoSize};
use rtlab_core::auto_plan::Reserved;
use rtlab_core::rpc::GrantInfo;
use rtlab_core::Nanos;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One reservation to follow: what `--auto` sized and what the daemon granted.
pub struct Followed {
    pub reservation: AutoReservation,
    pub grant: GrantInfo,
    /// The counters' sampler's SCHED_FIFO priority: one above the thread's own before it was
    /// reserved (under its reservation it is SCHED_DEADLINE, which has none).
    pub sampler_priority: u32,
}

/// The reservations `--auto` made and may follow: each of `plan`'s that this run was granted
/// (`reserved`, in the plan's order), not those found already held, which are not its own to
/// change.
pub fn followed(plan: &AutoPlan, reserved: &[Reserved]) -> Vec<Followed> {
    plan.reservations
        .iter()
        .zip(reserved)
        .filter(|(_, reserved)| reserved.already_held.is_none())
        .filter_map(|(reservation, reserved)| {
            Some(Followed {
                reservation: reservation.clone(),
                grant: reserved.grant.clone()?,
                sampler_priority: reserved.sampler_priority,
            })
        })
        .collect()
}

/// A resize the daemon refused, in words; `gone` when it no longer knows the reservation (its
/// thread exited).
#[derive(Debug)]
pub struct ResizeRefused {
    pub words: String,
    pub gone: bool,
}

/// The daemon, and the windows a follower decides by, as the caller reaches them (from every
/// following thread at once).
pub trait FollowDaemon: Sync {
    /// A connection to the daemon.
    type Connection;
    /// Connects; the error in words.
    fn connect(&self) -> Result<Self::Connection, String>;
    /// Asks once for a reservation of `tid` at `size` (reclaiming).
    fn reserve(
        &self,
        connection: &mut Self::Connection,
        tid: u32,
        size: &AutoSize,
    ) -> Result<GrantInfo, String>;
    /// Resizes grant `grant_id`; what is held now, in words.
    fn resize(&self, grant_id: u64, size: &AutoSize) -> Result<String, ResizeRefused>;
    /// Releases grant `grant_id`: `Ok(true)` released, `Ok(false)` the daemon no longer holds it
    /// (its thread exited: not a failure), `Err` the refusal in words.
    fn release(&self, connection: &mut Self::Connection, grant_id: u64) -> Result<bool, String>;
    /// Observes thread `tid` for one window from a sampler at SCHED_FIFO `sampler_priority`;
    /// `None` once the thread has ended (or `stop` was set mid-window).
    fn observe_window(
        &self,
        tid: u32,
        window: Duration,
        sampler_priority: u32,
        stop: &AtomicBool,
    ) -> Option<FollowWindow>;
}

/// A followed thread's windows and its reservation in the daemon.
struct ThreadAndDaemon<'a, D: FollowDaemon> {
    daemon: &'a D,
    tid: u32,
    grant_id: u64,
    window: Duration,
    sampler_priority: u32,
    stop: &'a AtomicBool,
    /// Set when the daemon no longer knows the reservation (its thread exited).
    gone: bool,
}

impl<D: FollowDaemon> FollowIo for ThreadAndDaemon<'_, D> {
    fn observe_window(&mut self) -> Option<FollowWindow> {
        if self.gone {
            return None;
        }
        self.daemon
            .observe_window(self.tid, self.window, self.sampler_priority, self.stop)
    }

    fn resize(&mut self, size: &AutoSize) -> Result<String, String> {
        self.daemon.resize(self.grant_id, size).map_err(|refused| {
            if refused.gone {
                self.gone = true;
            }
            refused.words
        })
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// How long a followed thread's successor may take to appear: JACK restarts its real-time
/// thread on a buffer size change within milliseconds.
const SUCCESSOR_WAIT: Duration = Duration::from_secs(2);

/// What a followed thread was before it was reserved, to know its successor by: its process,
/// its name, its SCHED_FIFO/RR priority.
struct Identity {
    tgid: u32,
    comm: String,
    priority: u32,
}

/// The one thread of `identity`'s process, other than `ended`, with its name at its SCHED_FIFO
/// or SCHED_RR priority, waiting up to [`SUCCESSOR_WAIT`] for it: the thread a program started in
/// place of a followed one (jackd restarts its real-time thread when the buffer size changes,
/// and the new one ran unreserved: 251 xruns in 10 s beside the competitor, BENCHMARKS.md).
/// None when the process has ended, none appears, or several match (which one is not known).
fn successor(identity: &Identity, ended: u32, stop: &AtomicBool) -> Result<u32, String> {
    let deadline = Instant::now() + SUCCESSOR_WAIT;
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", identity.tgid))
            .map_err(|_| "its process has ended".to_owned())?;
        let matching: Vec<u32> = tasks
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&tid| tid != ended)
            .filter(|&tid| {
                rtlab_sys::proc_thread::thread_comm(tid).is_ok_and(|comm| comm == identity.comm)
            })
            .filter(|&tid| {
                matches!(
                    rtlab_sys::sched::thread_policy(tid),
                    Ok(rtlab_sys::sched::Policy::Fifo { priority }
                        | rtlab_sys::sched::Policy::RoundRobin { priority })
                        if priority == identity.priority
                )
            })
            .collect();
        match matching.as_slice() {
            [one] => return Ok(*one),
            [] if Instant::now() < deadline && !stop.load(Ordering::SeqCst) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            [] => {
                return Err(format!(
                    "no thread of its process took its place ({} at SCHED_FIFO/RR {})",
                    identity.comm, identity.priority
                ))
            }
            several => {
                return Err(format!(
                "{} threads of its process could have taken its place ({several:?}): none reserved",
                several.len()
            ))
            }
        }
    }
}

/// Tries at reserving a successor, [`SUCCESSOR_RETRY`] apart: the thread it replaces may still
/// hold its SCHED_DEADLINE bandwidth in the kernel for a moment after it ended (measured once:
/// EBUSY 0.1 s after jackd's old thread ended, beside the client grown to 89 % of a CPU).
const SUCCESSOR_TRIES: u32 = 10;
const SUCCESSOR_RETRY: Duration = Duration::from_millis(100);

/// Reserves `tid` at the size `held` holds, as `--auto` reserved the thread it replaces; the
/// last refusal when every try was refused.
fn reserve_successor<D: FollowDaemon>(
    daemon: &D,
    tid: u32,
    held: &FollowedSize,
    stop: &AtomicBool,
) -> Result<GrantInfo, String> {
    let mut connection = daemon.connect()?;
    let mut tries = 0;
    loop {
        tries += 1;
        match daemon.reserve(&mut connection, tid, &held.size) {
            Ok(grant) => return Ok(grant),
            Err(error) if tries >= SUCCESSOR_TRIES || stop.load(Ordering::SeqCst) => {
                return Err(format!("{error} ({tries} tries)"))
            }
            Err(_) => std::thread::sleep(SUCCESSOR_RETRY),
        }
    }
}

/// Follows one reservation, and the threads that take its thread's place, until none does or
/// `stop`; each line to `say`, each grant made for a successor to `made`.
fn follow_one<D: FollowDaemon>(
    daemon: &D,
    entry: &Followed,
    machine: &AutoMachine,
    window: Nanos,
    stop: &AtomicBool,
    say: &(dyn Fn(String) + Sync),
    made: &Mutex<Vec<u64>>,
) {
    let reservation = &entry.reservation;
    let mut name = format!("{} ({})", reservation.name, reservation.tid);
    let identity = rtlab_sys::thread_control::thread_group_id(reservation.tid)
        .ok()
        .zip(rtlab_sys::proc_thread::thread_comm(reservation.tid).ok())
        .map(|(tgid, comm)| Identity {
            tgid,
            comm,
            priority: entry.sampler_priority.saturating_sub(1),
        });
    let mut io = ThreadAndDaemon {
        daemon,
        tid: reservation.tid,
        grant_id: entry.grant.grant_id,
        window: Duration::from_nanos(window.0),
        sampler_priority: entry.sampler_priority,
        stop,
        gone: false,
    };
    let mut follower = Follower::new(
        FollowedSize::from_reservation(reservation),
        machine.clone(),
        FollowPolicy::for_window(window),
    );
    say(format!(
        "following {name}, reservation #{}: {} of every {}, windows of {window}",
        entry.grant.grant_id, reservation.amount, reservation.window
    ));
    loop {
        let end = follow(&mut io, &mut follower, &mut |event| {
            say(format!("{name}: {}", event.describe()));
        });
        say(format!(
            "{name}: {}",
            match end {
                FollowEnd::ThreadEnded => "the thread ended",
                FollowEnd::Stopped => "stopped",
            }
        ));
        // A thread started in its place (jackd's on a buffer size change) takes over its
        // reservation's size and its following.
        let Some(identity) = identity
            .as_ref()
            .filter(|_| end == FollowEnd::ThreadEnded && !stop.load(Ordering::SeqCst))
        else {
            break;
        };
        let next = match successor(identity, io.tid, stop) {
            Ok(next) => next,
            Err(why) => {
                say(format!("{name}: not followed further: {why}"));
                break;
            }
        };
        match reserve_successor(daemon, next, follower.held(), stop) {
            Ok(grant) => {
                made.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(grant.grant_id);
                say(format!(
                    "{name}: thread {next} of its process took its place: reservation #{}, {} of every {}, followed",
                    grant.grant_id,
                    follower.held().size.amount,
                    follower.held().size.window
                ));
                name = format!("{} ({next})", identity.comm);
                io.tid = next;
                io.grant_id = grant.grant_id;
                io.gone = false;
            }
            Err(why) => {
                say(format!(
                    "{name}: thread {next} of its process took its place; the daemon refused to reserve it: {why}"
                ));
                break;
            }
        }
    }
}

/// Follows every reservation in `followed`, one thread each, until every thread has ended or
/// `stop` is set; hands each line, with its time since the start, to `print` and returns them
/// all. Then releases the reservations (those whose thread ended the daemon has released
/// already) and returns the failures too.
pub fn follow_all<D: FollowDaemon>(
    daemon: &D,
    followed: &[Followed],
    machine: &AutoMachine,
    window: Nanos,
    stop: &AtomicBool,
    print: &(dyn Fn(&str) + Sync),
) -> (Vec<String>, Vec<String>) {
    let started = Instant::now();
    let lines = Mutex::new(Vec::new());
    let say = |line: String| {
        let line = format!("[{:7.2}s] {line}", started.elapsed().as_secs_f64());
        print(&line);
        lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    };
    // Grants made for successors, released at the end with the others.
    let made = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for entry in followed {
            let (say, made) = (&say, &made);
            scope.spawn(move || follow_one(daemon, entry, machine, window, stop, say, made));
        }
    });
    let ids: Vec<u64> = followed.iter().map(|entry| entry.grant.grant_id).collect();
    let mut failures = release(daemon, &ids);
    let made = made
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !made.is_empty() {
        failures.extend(release(daemon, &made));
    }
    (
        lines
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        failures,
    )
}

/// Releases the grants made; one the daemon no longer holds (its thread exited) is not a
/// failure.
fn release<D: FollowDaemon>(daemon: &D, grant_ids: &[u64]) -> Vec<String> {
    let mut connection = match daemon.connect() {
        Ok(connection) => connection,
        Err(error) => return vec![format!("connecting to release: {error}")],
    };
    grant_ids
        .iter()
        .filter_map(|&grant_id| {
            daemon
                .release(&mut connection, grant_id)
                .err()
                .map(|error| format!("grant {grant_id}: {error}"))
        })
        .collect()
}
