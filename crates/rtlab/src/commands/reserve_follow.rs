//! `rtlab reserve --auto --follow`: after `--auto` reserved, keep each reservation it made sized
//! to its thread until the thread ends or SIGINT/SIGTERM, then release what it made. The
//! decisions are `rtlab_sched::auto_follow`'s (pure, tested there); this module only wires them to
//! the kernel's per-task counters (one window after another, sampled every millisecond) and to
//! the daemon's `resize`, and prints each change.

use super::daemon_client::SocketArgs;
use rtlab_core::rpc::{Backend, ErrorCode, GrantInfo, ReleaseTarget, ReserveParams, Target};
use rtlab_core::Nanos;
use rtlab_sched::auto_follow::{
    follow, FollowEnd, FollowIo, FollowPolicy, FollowWindow, FollowedSize, Follower,
};
use rtlab_sched::auto_reserve::{AutoBackend, AutoMachine, AutoReservation, AutoSize};
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

/// One above `tid`'s SCHED_FIFO or SCHED_RR priority (at least 1, at most 98); 1 at another
/// policy.
pub fn sampler_priority(tid: u32) -> u32 {
    let own = rtlab_sys::sched::thread_policy(tid)
        .ok()
        .and_then(|policy| match policy {
            rtlab_sys::sched::Policy::Fifo { priority }
            | rtlab_sys::sched::Policy::RoundRobin { priority } => Some(priority),
            _ => None,
        })
        .unwrap_or(0);
    (own + 1).clamp(1, 98)
}

/// One window of thread `tid`'s counters, sampled every millisecond from a SCHED_FIFO
/// `sampler_priority` thread: what a follower decides by. `None` once the thread has ended (or
/// `stop` was set mid-window). The CLI's `--follow` and the daemon's auto-sized RealtimeKit1
/// grants (`commands::daemon`) observe through this.
pub fn counters_window(
    tid: u32,
    window: Duration,
    sampler_priority: u32,
    stop: &AtomicBool,
) -> Option<FollowWindow> {
    let estimates = rtlab_apptrace::counters::observe(
        &[tid],
        window,
        rtlab_apptrace::counters::SAMPLE_INTERVAL,
        Some(sampler_priority),
        stop,
    )
    .ok()?;
    let estimate = estimates.into_iter().next()?;
    // A thread that exited mid-window: what was sampled says nothing of a need to come.
    if estimate.samples < 2 || !std::path::Path::new(&format!("/proc/{tid}")).exists() {
        return None;
    }
    Some(FollowWindow {
        activations: estimate.activations,
        period: estimate.period,
        cpu_per_cycle_high: estimate.cpu_per_cycle_p99,
    })
}

/// A followed thread's counters and its reservation in the daemon.
struct CountersAndDaemon<'a> {
    tid: u32,
    grant_id: u64,
    window: Duration,
    sampler_priority: u32,
    socket: &'a SocketArgs,
    stop: &'a AtomicBool,
    /// Set when the daemon no longer knows the reservation (its thread exited).
    gone: bool,
}

impl FollowIo for CountersAndDaemon<'_> {
    fn observe_window(&mut self) -> Option<FollowWindow> {
        if self.gone {
            return None;
        }
        counters_window(self.tid, self.window, self.sampler_priority, self.stop)
    }

    fn resize(&mut self, size: &AutoSize) -> Result<String, String> {
        let mut client = self
            .socket
            .connect()
            .map_err(|error| format!("{error:#}"))?;
        match client.resize(self.grant_id, size.amount, size.window) {
            Ok(grant) => Ok(match &grant.kernel_held {
                Some(held) => rtlab_render::reserve::kernel_held(held),
                None => rtlab_render::reserve::asked_and_held(&grant),
            }),
            Err(error) => {
                if error.code() == Some(ErrorCode::NotFound) {
                    self.gone = true;
                }
                Err(error.to_string())
            }
        }
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
fn reserve_successor(
    socket: &SocketArgs,
    tid: u32,
    held: &FollowedSize,
    stop: &AtomicBool,
) -> Result<GrantInfo, String> {
    let mut client = socket.connect().map_err(|error| format!("{error:#}"))?;
    let backend = match held.size.backend {
        AutoBackend::Deadline => Backend::Deadline,
        AutoBackend::Dispatch => Backend::Dispatch,
    };
    let mut tries = 0;
    loop {
        tries += 1;
        match client.reserve_with(ReserveParams {
            target: Target::Thread { tid },
            amount_ns: held.size.amount.0,
            period_ns: held.size.window.0,
            backend: Some(backend),
            reclaim: true,
        }) {
            Ok(grant) => return Ok(grant),
            Err(error) if tries >= SUCCESSOR_TRIES || stop.load(Ordering::SeqCst) => {
                return Err(format!("{error} ({tries} tries)"))
            }
            Err(_) => std::thread::sleep(SUCCESSOR_RETRY),
        }
    }
}

/// Follows every reservation in `followed`, one thread each, until every thread has ended or
/// `stop` is set; prints each change (unless `quiet`) and returns every line, each with its
/// time since the start. Then releases the reservations (those whose thread ended the daemon
/// has released already).
pub fn follow_all(
    followed: &[Followed],
    machine: &AutoMachine,
    window: Nanos,
    socket: &SocketArgs,
    stop: &AtomicBool,
    quiet: bool,
) -> (Vec<String>, Vec<String>) {
    let started = Instant::now();
    let lines = Mutex::new(Vec::new());
    let say = |line: String| {
        let line = format!("[{:7.2}s] {line}", started.elapsed().as_secs_f64());
        if !quiet {
            println!("{line}");
        }
        lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    };
    // Grants made for successors, released at the end with the others.
    let made = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for entry in followed {
            let say = &say;
            let made = &made;
            scope.spawn(move || {
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
                let mut io = CountersAndDaemon {
                    tid: reservation.tid,
                    grant_id: entry.grant.grant_id,
                    window: Duration::from_nanos(window.0),
                    sampler_priority: entry.sampler_priority,
                    socket,
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
                    // A thread started in its place (jackd's on a buffer size change) takes
                    // over its reservation's size and its following.
                    let Some(identity) = identity.as_ref().filter(|_| {
                        end == FollowEnd::ThreadEnded && !stop.load(Ordering::SeqCst)
                    }) else {
                        break;
                    };
                    let next = match successor(identity, io.tid, stop) {
                        Ok(next) => next,
                        Err(why) => {
                            say(format!("{name}: not followed further: {why}"));
                            break;
                        }
                    };
                    match reserve_successor(socket, next, follower.held(), stop) {
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
            });
        }
    });
    let mut failures = release_made(followed, socket);
    failures.extend(release_grants(
        &made
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        socket,
    ));
    (
        lines
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        failures,
    )
}

/// Releases the grants made for successors, as [`release_made`].
fn release_grants(grants: &[u64], socket: &SocketArgs) -> Vec<String> {
    if grants.is_empty() {
        return Vec::new();
    }
    let mut client = match socket.connect() {
        Ok(client) => client,
        Err(error) => return vec![format!("connecting to release: {error:#}")],
    };
    let mut failures = Vec::new();
    for &grant_id in grants {
        match client.release(ReleaseTarget::Grant { grant_id }) {
            Ok(_) => {}
            Err(error) if error.code() == Some(ErrorCode::NotFound) => {}
            Err(error) => failures.push(format!("grant {grant_id}: {error}")),
        }
    }
    failures
}

/// Releases the reservations made; one the daemon no longer holds (its thread exited) is not a
/// failure.
fn release_made(followed: &[Followed], socket: &SocketArgs) -> Vec<String> {
    let mut failures = Vec::new();
    let mut client = match socket.connect() {
        Ok(client) => client,
        Err(error) => return vec![format!("connecting to release: {error:#}")],
    };
    for entry in followed {
        match client.release(ReleaseTarget::Grant {
            grant_id: entry.grant.grant_id,
        }) {
            Ok(_) => {}
            Err(error) if error.code() == Some(ErrorCode::NotFound) => {}
            Err(error) => failures.push(format!("grant {}: {error}", entry.grant.grant_id)),
        }
    }
    failures
}
