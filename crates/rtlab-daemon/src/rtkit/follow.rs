//! A `[[rtkit.reserve]] size = "auto"` reservation that follows its thread (`follow = true`, the
//! default): once observation has reserved the thread, the same thread of the daemon goes on
//! watching it, one window after another, at low cost (the kernel's per-task counters, no trace:
//! [`ThreadObserver::observe_window`]), and `rtlab_sched::auto_follow`'s decisions, the very ones
//! `rtlab reserve --auto --follow` makes, grow the reservation when the work per activation
//! rises, shrink it after the hysteresis and map it anew when the period changes. Each change goes
//! through the registry's `resize` (the owner's limit, the CPUs' room, the kernel) as the user
//! would ask it, under the registry's lock as every registry change; each change, and each
//! growth that is refused (which reservation, by how much it is short), is a line of the daemon's
//! log, and the listing's `sizing` says the last one.
//!
//! One thread per followed grant (the thread that observed it): a follower waits on its own
//! thread's counters for a whole window, and one thread for all would have to sample every
//! followed thread in one loop, so that one slow or ended thread delays the others' decisions;
//! a sleeping thread of the daemon costs a stack. It ends when the reservation no longer holds the
//! thread (released, reset, the thread exited) at the end of the window that finds it so, and at
//! the daemon's stop within one sample of the counters (`Shared::stopping`, which the sampler
//! reads every millisecond).

use super::book::Target;
use super::observe::ThreadObserver;
use super::{kernel_holds, notice, Shared};
use crate::registry::Caller;
use rtlab_core::rpc::ResizeParams;
use rtlab_core::Nanos;
use rtlab_sched::auto_follow::{
    follow, FollowEnd, FollowEvent, FollowIo, FollowPolicy, FollowWindow, FollowedSize, Follower,
};
use rtlab_sched::auto_reserve::{AutoMachine, AutoReservation, AutoSize};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A refused growth (or one that cannot be given) is asked again every window; the log says the
/// first, then at most one line per this long for the same reservation, with the count of those
/// not said (a follower held short by its user's limit must not fill the journal every second).
const REFUSALS_SAID_EVERY: Duration = Duration::from_secs(30);

/// One followed grant.
pub(super) struct FollowedGrant<'a> {
    pub shared: &'a Shared,
    pub observer: &'a dyn ThreadObserver,
    pub target: &'a Target,
    pub program: &'a str,
    pub grant_id: u64,
    /// The window of each observation (`follow_window`).
    pub window: Nanos,
    /// The counters' sampler's SCHED_FIFO priority: one above the SCHED_RR the thread was given.
    pub sampler_priority: u32,
}

impl FollowedGrant<'_> {
    /// Whether the reservation still holds the thread and the daemon is not stopping. The
    /// registry's lock and the book's are taken one after the other, never together.
    fn holds(&self) -> bool {
        if self.shared.stopping.load(Ordering::SeqCst) {
            return false;
        }
        let shut_down = self.shared.registry.lock().is_shut_down();
        !shut_down
            && self.shared.book.lock().is_reserved_by(
                self.target.tid,
                self.target.thread_start,
                self.grant_id,
            )
    }

    /// How the thread is named in the log.
    fn name(&self) -> String {
        format!(
            "thread {} of {} (pid {}), reservation {}",
            self.target.tid, self.program, self.target.pid, self.grant_id
        )
    }

    /// Follows until the reservation no longer holds the thread or the daemon stops; `detail`
    /// is what the listing said of the reservation when it was made.
    pub fn run(&self, reservation: &AutoReservation, machine: AutoMachine, detail: &str) {
        let name = self.name();
        let followed_in = format!("followed in windows of {}", self.window);
        let base = format!("{detail}; {followed_in}");
        self.shared.book.lock().set_reserved_detail(
            self.target.tid,
            self.target.thread_start,
            self.grant_id,
            base.clone(),
        );
        notice(&format!(
            "{name}: following it (windows of {}): {} of every {}",
            self.window, reservation.amount, reservation.window
        ));
        let mut follower = Follower::new(
            FollowedSize::from_reservation(reservation),
            machine,
            FollowPolicy::for_window(self.window),
        );
        let mut io = GrantIo { grant: self };
        let mut changes = 0_u64;
        let mut refusals = RefusalLog::default();
        let end = follow(&mut io, &mut follower, &mut |event| match event {
            FollowEvent::Changed { .. } => {
                changes += 1;
                let line = event.describe();
                notice(&format!("{name}: {line}"));
                self.shared.book.lock().set_reserved_detail(
                    self.target.tid,
                    self.target.thread_start,
                    self.grant_id,
                    format!("{base}: {changes} changes, the last: {line}"),
                );
            }
            FollowEvent::Refused { .. } | FollowEvent::CannotGrow(_) => {
                if let Some(unsaid) = refusals.say(Instant::now()) {
                    let also = if unsaid > 0 {
                        format!(" ({unsaid} more since the last said)")
                    } else {
                        String::new()
                    };
                    notice(&format!("{name}: {}{also}", event.describe()));
                }
            }
        });
        let why = match end {
            FollowEnd::Stopped => "the daemon is stopping".to_owned(),
            FollowEnd::ThreadEnded => self.why_ended(),
        };
        notice(&format!("{name}: no longer followed: {why}"));
    }

    /// Why the follow loop found no more windows.
    fn why_ended(&self) -> String {
        // A thread that exited may be a zombie a while (its process not yet reaped): still in
        // /proc with its start time, but in state Z (or X).
        let tid = self.target.tid;
        let runs = rtlab_sys::thread_control::thread_start_time(tid)
            .is_ok_and(|start| start == self.target.thread_start)
            && rtlab_sys::thread_control::thread_state(tid)
                .is_ok_and(|state| state != 'Z' && state != 'X');
        if !runs {
            "the thread ended".to_owned()
        } else if self.shared.stopping.load(Ordering::SeqCst)
            || self.shared.registry.lock().is_shut_down()
        {
            "the daemon is stopping".to_owned()
        } else if !self.shared.book.lock().is_reserved_by(
            self.target.tid,
            self.target.thread_start,
            self.grant_id,
        ) {
            "the reservation no longer holds the thread (released or reset)".to_owned()
        } else {
            "its counters could not be read; the reservation keeps its last size".to_owned()
        }
    }
}

/// When the log last said a refusal, and how many it has not said since.
#[derive(Default)]
struct RefusalLog {
    last_said: Option<Instant>,
    unsaid: u64,
}

impl RefusalLog {
    /// `Some(count of refusals not said since the last said)` when this one is to be said.
    fn say(&mut self, now: Instant) -> Option<u64> {
        match self.last_said {
            Some(said) if now.duration_since(said) < REFUSALS_SAID_EVERY => {
                self.unsaid += 1;
                None
            }
            _ => {
                self.last_said = Some(now);
                Some(std::mem::take(&mut self.unsaid))
            }
        }
    }
}

/// The followed thread's counters and its reservation in the registry.
struct GrantIo<'a> {
    grant: &'a FollowedGrant<'a>,
}

impl FollowIo for GrantIo<'_> {
    fn observe_window(&mut self) -> Option<FollowWindow> {
        let grant = self.grant;
        if !grant.holds() {
            return None;
        }
        let window = grant.observer.observe_window(
            grant.target.tid,
            grant.window,
            grant.sampler_priority,
            &grant.shared.stopping,
        )?;
        // Released (or reset) during the window: what it saw is no longer this grant's.
        grant.holds().then_some(window)
    }

    fn resize(&mut self, size: &AutoSize) -> Result<String, String> {
        let grant = self.grant;
        // As the thread's owner would ask it (`rtlab reserve --resize`): the owner's limit
        // applies, as it did to the reservation made.
        let caller = Caller {
            pid: grant.target.caller_pid,
            uid: grant.target.uid,
            privileged: false,
        };
        let params = ResizeParams {
            grant_id: grant.grant_id,
            amount_ns: size.amount.0,
            period_ns: size.window.0,
        };
        grant
            .shared
            .registry
            .lock()
            .resize(&caller, &params)
            .map(|info| {
                // The follow loop's line says "the kernel holds" before it.
                let holds = kernel_holds(&info);
                match holds.strip_prefix("the kernel holds ") {
                    Some(held) => held.to_owned(),
                    None => holds,
                }
            })
            .map_err(|refused| refused.message)
    }

    fn stop_requested(&self) -> bool {
        self.grant.shared.stopping.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusal_is_said_then_one_line_per_period_with_the_count_of_the_others() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        assert_eq!(log.say(start), Some(0));
        for second in 1..30 {
            assert_eq!(log.say(start + Duration::from_secs(second)), None);
        }
        assert_eq!(log.say(start + REFUSALS_SAID_EVERY), Some(29));
        assert_eq!(log.say(start + REFUSALS_SAID_EVERY), None);
        assert_eq!(log.say(start + REFUSALS_SAID_EVERY * 2), Some(1));
    }
}
