//! `rtlab reserve --auto --follow`: after `--auto` reserved, keep each reservation it made sized
//! to its thread until the thread ends or SIGINT/SIGTERM, then release what it made. The
//! decisions are `rtlab_sched::auto_follow`'s (pure, tested there); this module only wires them to
//! the kernel's per-task counters (one window after another, sampled every millisecond) and to
//! the daemon's `resize`, and prints each change.

use super::daemon_client::SocketArgs;
use rtlab_core::rpc::{ErrorCode, GrantInfo, ReleaseTarget};
use rtlab_core::Nanos;
use rtlab_sched::auto_follow::{
    follow, FollowEnd, FollowIo, FollowPolicy, FollowWindow, FollowedSize, Follower,
};
use rtlab_sched::auto_reserve::{AutoMachine, AutoReservation, AutoSize};
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
    std::thread::scope(|scope| {
        for entry in followed {
            let say = &say;
            scope.spawn(move || {
                let reservation = &entry.reservation;
                let name = format!("{} ({})", reservation.name, reservation.tid);
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
            });
        }
    });
    let failures = release_made(followed, socket);
    (
        lines
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        failures,
    )
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
