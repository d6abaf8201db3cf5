//! The book of threads made real-time (or high priority) through RealtimeKit1: who asked, for
//! which thread, what it was given and what it had before. Every change is journalled *before* it
//! is made, in `STATE_DIR/rtkit/enforce.journal` (the enforcer's journal format and code, in a
//! directory of its own), so a thread is put back when the thread's grant ends, when the daemon
//! stops, and at the next start after a SIGKILL.
//!
//! A thread is put back to what it had before (normally SCHED_OTHER, nice 0), as rtkit's
//! `thread_reset` does; one that had a real-time policy before goes to SCHED_OTHER, nice 0.

use super::config::RtkitConfig;
use super::meter::MeteredThread;
use super::policy::{Counted, Refusal, UserLimits};
use crate::watch::{WatchHandle, Watcher};
use rtlab_core::rpc::RealtimeKitThread;
use rtlab_sched::enforce::journal::{Journal, JournalEntry, SavedThread};
use rtlab_sys::sched::Policy;
use rtlab_sys::thread_control;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The book's journal directory inside the daemon's state directory.
pub const JOURNAL_DIRECTORY: &str = "rtkit";

/// What a thread was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Given {
    RoundRobin {
        priority: u32,
    },
    Nice {
        nice: i32,
    },
    /// A configured program's reservation (`[[rtkit.reserve]]`), held by the registry.
    Reservation {
        grant_id: u64,
    },
}

/// Where the sizing of a `[[rtkit.reserve]]` thread by observation stands (the thread is SCHED_RR
/// meanwhile, and again if no reservation comes of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizing {
    /// Being observed until `until`.
    Observing {
        until: SystemTime,
        observe: Duration,
    },
    /// Reservation `grant_id` (of the registry) holds the thread; `detail` says how it was sized.
    Reserved { grant_id: u64, detail: String },
    /// No reservation came of it (why); the thread stays SCHED_RR.
    Unreserved { reason: String },
}

impl Sizing {
    fn describe(&self) -> String {
        match self {
            Sizing::Observing { until, observe } => format!(
                "observing for {} (until {}), SCHED_RR meanwhile",
                humantime::format_duration(*observe),
                humantime::format_rfc3339_millis(*until)
            ),
            Sizing::Reserved { detail, .. } => format!("observed: {detail}"),
            Sizing::Unreserved { reason } => format!("{reason}; stays SCHED_RR"),
        }
    }
}

/// One thread in the book: the [`Target`] that was changed and what it was given.
#[derive(Clone, Debug)]
pub struct Grant {
    pub target: Target,
    pub given: Given,
    /// What the thread had before the first grant.
    pub saved: Policy,
    pub since: SystemTime,
    /// For a `[[rtkit.reserve]]` thread sized by observation.
    pub sizing: Option<Sizing>,
    /// The thread's run time when it was first granted (the meter counts from there).
    pub cpu_time_at_grant: Option<u64>,
}

/// A user refused for a while, and why (the canary blamed it, or it ran over its share).
#[derive(Clone, Debug)]
pub struct Refused {
    pub until: Instant,
    /// What happened, in words, with the configuration key behind the refusal.
    pub why: String,
    /// The key that sets how long the refusal lasts.
    pub key: &'static str,
}

/// A thread to change, its identity checked by the caller.
#[derive(Clone, Debug)]
pub struct Target {
    pub uid: u32,
    pub pid: u32,
    pub process_start: u64,
    pub tid: u32,
    pub thread_start: u64,
    pub caller_pid: u32,
    pub method: &'static str,
}

/// What a start found left by a killed daemon and put back.
#[derive(Debug, Default)]
pub struct Repaired {
    pub restored: Vec<u32>,
    pub gone: Vec<u32>,
    pub failed: Vec<(u32, String)>,
}

/// The policy a thread goes back to: what it had, unless that was real-time.
fn reset_policy(saved: Policy) -> Policy {
    if saved.is_realtime() {
        Policy::Other { nice: 0 }
    } else {
        saved
    }
}

/// Puts `tid` back to `policy` if it is still the thread that started at `start_time`.
/// `Ok(false)`: it is gone (or its id was reused).
fn restore(tid: u32, start_time: u64, policy: Policy) -> io::Result<bool> {
    match thread_control::thread_start_time(tid) {
        Ok(start) if start == start_time => {}
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    }
    match thread_control::set_thread_policy_with_flags(tid, reset_policy(policy), 0) {
        Ok(()) => Ok(true),
        Err(error) if rtlab_sys::ipc::is_no_such_process(&error) => Ok(false),
        Err(error) => Err(error),
    }
}

/// The threads made real-time through RealtimeKit1, with the per-user limits and the journal.
pub struct Book {
    config: RtkitConfig,
    grants: BTreeMap<u32, Grant>,
    limits: UserLimits,
    journal: Journal,
    /// Users refused for a while: the canary's and the share's demotions.
    refused: BTreeMap<u32, Refused>,
    /// What each user's real-time threads ran over `rtkit.user_share_window`, as a fraction of
    /// one CPU (the watchdog's meter publishes it every tick).
    ran: BTreeMap<u32, f64>,
    closed: bool,
    watcher: Watcher,
    /// Threads about to be made SCHED_RR, told to the watchdog before the change (see
    /// [`Book::announcements`]).
    announced: Announcements,
}

/// Threads the book is making SCHED_RR, pushed before the change while the book's lock is held.
pub type Announcements = Arc<Mutex<Vec<MeteredThread>>>;

impl std::fmt::Debug for Book {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Book")
            .field("grants", &self.grants)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Book {
    /// The journal directory under `state_dir`.
    pub fn journal_directory(state_dir: &Path) -> PathBuf {
        state_dir.join(JOURNAL_DIRECTORY)
    }

    /// Puts back every thread a previous daemon's journal under `state_dir` left changed (it was
    /// killed before it could), then leaves a fresh, empty journal. Done at every start, with or
    /// without `--rtkit`.
    pub fn repair(state_dir: &Path) -> io::Result<Repaired> {
        let directory = Book::journal_directory(state_dir);
        let (pending, _unreadable) = Journal::read_pending(&directory)?;
        let mut repaired = Repaired::default();
        for saved in pending.threads.iter().rev() {
            match restore(saved.tid, saved.start_time, saved.policy) {
                Ok(true) => repaired.restored.push(saved.tid),
                Ok(false) => repaired.gone.push(saved.tid),
                Err(error) => repaired.failed.push((saved.tid, error.to_string())),
            }
        }
        if directory.exists() {
            Journal::create(&directory)?;
        }
        Ok(repaired)
    }

    /// Opens the book with a fresh journal (after [`Book::repair`]).
    pub fn open(state_dir: &Path, config: RtkitConfig, watcher: Watcher) -> io::Result<Book> {
        Ok(Book {
            config,
            grants: BTreeMap::new(),
            limits: UserLimits::default(),
            journal: Journal::create(&Book::journal_directory(state_dir))?,
            refused: BTreeMap::new(),
            ran: BTreeMap::new(),
            closed: false,
            watcher,
            announced: Announcements::default(),
        })
    }

    /// The watchdog's side of the announcements. A thread made SCHED_RR can starve the thread
    /// that made it — a SCHED_OTHER service thread still holding the book's lock — on a machine
    /// whose every CPU such grants fill, and the watchdog, which only `try_lock`s the book, would
    /// then not meter the new threads until that thread ran again (rtlab-hostile saw a user's two
    /// new SCHED_RR threads run 1.66 s unmetered). So each grant is told here first, under a lock
    /// held for a push only; an announcement made before a read of the book that found its lock
    /// free is in that read.
    pub fn announcements(&self) -> Announcements {
        Arc::clone(&self.announced)
    }

    pub fn config(&self) -> &RtkitConfig {
        &self.config
    }

    /// Refuses while closed, a user the canary or its share demoted (for a while), and a user
    /// whose real-time threads' run time plus what the registry holds for it (`held`) is over its
    /// share; then counts the request against the user's burst.
    pub fn admit(&mut self, uid: u32, held: f64, now: Instant) -> Result<(), Refusal> {
        if self.closed {
            return Err(Refusal::Failed(
                "rtlab's RealtimeKit1 service has ended (Exit was called, or the daemon is stopping); it takes no requests"
                    .to_owned(),
            ));
        }
        self.refused.retain(|_, refused| now < refused.until);
        if let Some(refused) = self.refused.get(&uid) {
            return Err(Refusal::AccessDenied(format!(
                "{}; no real-time is granted to uid {uid} for another {} ({})",
                refused.why,
                humantime::format_duration(Duration::from_secs(
                    refused.until.saturating_duration_since(now).as_secs() + 1
                )),
                refused.key
            )));
        }
        let ran = self.run_fraction(uid);
        super::policy::check_share(uid, ran, held, &self.config)?;
        self.limits.forget_ended(now, &self.config);
        self.limits.admit_action(uid, now, &self.config)
    }

    /// The granted threads as the limits count them.
    pub fn counted(&self) -> Vec<Counted> {
        self.grants
            .values()
            .map(|grant| Counted {
                uid: grant.target.uid,
                pid: grant.target.pid,
                process_start: grant.target.process_start,
                tid: grant.target.tid,
            })
            .collect()
    }

    /// Forgets threads that exited without the watcher noticing yet (their ids may be reused).
    pub fn forget_gone(&mut self) {
        let gone: Vec<u32> = self
            .grants
            .values()
            .filter(|grant| {
                !thread_control::thread_start_time(grant.target.tid)
                    .is_ok_and(|start| start == grant.target.thread_start)
            })
            .map(|grant| grant.target.tid)
            .collect();
        for tid in gone {
            self.thread_exited(tid);
        }
    }

    /// Journals `target`'s present policy (first grant only), then gives it `policy` with
    /// SCHED_RESET_ON_FORK, then checks it is still the same thread (else puts it back).
    pub fn apply(
        &mut self,
        target: &Target,
        policy: Policy,
        given: Given,
        handle: Option<WatchHandle>,
    ) -> Result<(), Refusal> {
        let failed = |what: &str, error: io::Error| {
            Refusal::Failed(format!("{what} thread {}: {error}", target.tid))
        };
        let saved = match self.grants.get(&target.tid) {
            Some(known) if known.target.thread_start == target.thread_start => known.saved,
            _ => {
                let present = rtlab_sys::sched::thread_policy(target.tid)
                    .map_err(|error| failed("reading the policy of", error))?;
                self.journal
                    .append(&JournalEntry::Save(SavedThread {
                        tid: target.tid,
                        start_time: target.thread_start,
                        policy: present,
                        affinity: Vec::new(),
                    }))
                    .map_err(|error| failed("journalling", error))?;
                present
            }
        };
        if matches!(given, Given::RoundRobin { .. }) {
            let cpu_time_at_grant = match self.grants.get(&target.tid) {
                Some(known) if known.target.thread_start == target.thread_start => {
                    known.cpu_time_at_grant
                }
                _ => thread_control::thread_cpu_time_ns(target.tid).ok(),
            };
            self.announced
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(MeteredThread {
                    uid: target.uid,
                    tid: target.tid,
                    thread_start: target.thread_start,
                    cpu_time_at_grant,
                });
        }
        if let Some(policy) = (!matches!(given, Given::Reservation { .. })).then_some(policy) {
            if let Err(error) = thread_control::set_thread_policy_with_flags(
                target.tid,
                policy,
                thread_control::SCHED_FLAG_RESET_ON_FORK,
            ) {
                if !self.grants.contains_key(&target.tid) {
                    let _ = self.journal.append(&JournalEntry::Done {
                        tid: target.tid,
                        start_time: target.thread_start,
                    });
                }
                return Err(failed("changing the policy of", error));
            }
        }
        // The id may have been reused between the checks and the change (the thread exited and
        // another started): then the change is undone. The pidfd opened before the owner check
        // says so for certain; the start time where there is none.
        let same_thread = match &handle {
            Some(handle) => handle.is_the_same_thread(),
            None => thread_control::thread_start_time(target.tid)
                .is_ok_and(|start| start == target.thread_start),
        };
        if !same_thread {
            let _ = restore(target.tid, target.thread_start, saved);
            return Err(Refusal::Failed(format!(
                "thread {} exited while it was being changed",
                target.tid
            )));
        }
        let known = self
            .grants
            .get(&target.tid)
            .filter(|known| known.target.thread_start == target.thread_start);
        let is_new = !self.grants.contains_key(&target.tid);
        let since = known.map_or_else(SystemTime::now, |known| known.since);
        // The meter counts what the thread runs from its first grant on.
        let cpu_time_at_grant = match known {
            Some(known) => known.cpu_time_at_grant,
            None => thread_control::thread_cpu_time_ns(target.tid).ok(),
        };
        // A new request (a new priority) ends an earlier sizing's claim on the thread's policy.
        let sizing = None;
        self.grants.insert(
            target.tid,
            Grant {
                target: target.clone(),
                given,
                saved,
                since,
                sizing,
                cpu_time_at_grant,
            },
        );
        if is_new {
            if let Some(handle) = handle {
                self.watcher.watch(handle);
                self.watcher.wake_if_pending();
            }
        }
        Ok(())
    }

    /// A thread of the book exited: forget it (its policy went with it).
    pub fn thread_exited(&mut self, tid: u32) {
        if let Some(grant) = self.grants.remove(&tid) {
            let _ = self.journal.append(&JournalEntry::Done {
                tid,
                start_time: grant.target.thread_start,
            });
            self.watcher.unwatch(tid);
        }
    }

    /// Puts every thread of the book back (ResetKnown, the canary, shutdown); returns how many
    /// were changed.
    pub fn reset_known(&mut self) -> usize {
        let grants: Vec<Grant> = std::mem::take(&mut self.grants).into_values().collect();
        let mut changed = 0;
        for grant in grants {
            if !matches!(grant.given, Given::Reservation { .. })
                && restore(grant.target.tid, grant.target.thread_start, grant.saved)
                    .unwrap_or(false)
            {
                changed += 1;
            }
            let _ = self.journal.append(&JournalEntry::Done {
                tid: grant.target.tid,
                start_time: grant.target.thread_start,
            });
            self.watcher.unwatch(grant.target.tid);
        }
        self.watcher.wake_if_pending();
        changed
    }

    /// Puts every thread back and takes no more requests (the daemon is stopping).
    pub fn close(&mut self) -> usize {
        self.closed = true;
        self.reset_known()
    }

    /// Sets where the sizing by observation of thread `tid` (started at `thread_start`) stands;
    /// false when the book no longer holds that thread at SCHED_RR (it exited, was reset, was
    /// demoted by the canary, or asked again since), so the sizing must not go on.
    pub fn set_sizing(&mut self, tid: u32, thread_start: u64, sizing: Sizing) -> bool {
        match self.grants.get_mut(&tid) {
            Some(grant)
                if grant.target.thread_start == thread_start
                    && matches!(grant.given, Given::RoundRobin { .. }) =>
            {
                grant.sizing = Some(sizing);
                true
            }
            _ => false,
        }
    }

    /// Whether thread `tid` (started at `thread_start`) is still being sized by observation.
    pub fn is_observing(&self, tid: u32, thread_start: u64) -> bool {
        self.grants.get(&tid).is_some_and(|grant| {
            grant.target.thread_start == thread_start
                && matches!(grant.sizing, Some(Sizing::Observing { .. }))
        })
    }

    /// Whether thread `tid` (started at `thread_start`) is still held by its observed reservation
    /// `grant_id`: false once the reservation ended (released, its thread exited), the thread
    /// left the book (ResetKnown, Exit, the daemon stopping) or asked anew. A follower ends then.
    pub fn is_reserved_by(&self, tid: u32, thread_start: u64, grant_id: u64) -> bool {
        self.grants.get(&tid).is_some_and(|grant| {
            grant.target.thread_start == thread_start
                && matches!(grant.sizing, Some(Sizing::Reserved { grant_id: held, .. }) if held == grant_id)
        })
    }

    /// Replaces what the listing's `sizing` says of thread `tid`'s observed reservation
    /// `grant_id` (a follower's latest change); false when it no longer holds the thread.
    pub fn set_reserved_detail(
        &mut self,
        tid: u32,
        thread_start: u64,
        grant_id: u64,
        detail: String,
    ) -> bool {
        if !self.is_reserved_by(tid, thread_start, grant_id) {
            return false;
        }
        let grant = self.grants.get_mut(&tid).expect("checked above");
        grant.sizing = Some(Sizing::Reserved { grant_id, detail });
        true
    }

    /// A reservation holding thread `tid` ended and the enforcer put back the policy the thread
    /// had when it was reserved, but not SCHED_RESET_ON_FORK (the enforcer keeps policies, not
    /// flags): a thread the book holds at SCHED_RR or a nice level gets its grant again, flag
    /// included, as the program asked. A sizing's reservation that ended is said so.
    pub fn reservation_ended(&mut self, tid: u32) {
        let Some(grant) = self.grants.get_mut(&tid) else {
            return;
        };
        let policy = match grant.given {
            Given::RoundRobin { priority } => Policy::RoundRobin { priority },
            Given::Nice { nice } => Policy::Other { nice },
            Given::Reservation { .. } => return,
        };
        if let Some(Sizing::Reserved { grant_id, .. }) = &grant.sizing {
            grant.sizing = Some(Sizing::Unreserved {
                reason: format!("its observed reservation {grant_id} ended"),
            });
        }
        if thread_control::thread_start_time(tid)
            .is_ok_and(|start| start == grant.target.thread_start)
        {
            let _ = thread_control::set_thread_policy_with_flags(
                tid,
                policy,
                thread_control::SCHED_FLAG_RESET_ON_FORK,
            );
        }
    }

    /// A reservation is about to hold thread `tid`: a thread the book made SCHED_RR goes back to
    /// the policy it had before its grant, so that the enforcer saves that as its policy at rest.
    /// The dispatch backend lowers a reserved thread to its saved policy between its slots, and a
    /// SCHED_RR one would run on there unmetered (the watchdog leaves reserved threads to their
    /// reservation): nobody's thread took 86–90 % of a CPU that way (rtlab-hostile's probe
    /// `examples/rtkit_reserved_spinner.rs`). Returns whether it was changed;
    /// [`reservation_ended`](Book::reservation_ended) gives the grant back.
    pub fn suspend_for_reservation(&mut self, tid: u32) -> bool {
        let Some(grant) = self.grants.get(&tid) else {
            return false;
        };
        if !matches!(grant.given, Given::RoundRobin { .. }) {
            return false;
        }
        // Only a grant in force: a thread a reservation or a Time Constraint already holds keeps
        // its policy (it is theirs).
        thread_control::thread_start_time(tid).is_ok_and(|start| start == grant.target.thread_start)
            && matches!(
                rtlab_sys::sched::thread_policy(tid),
                Ok(Policy::RoundRobin { .. })
            )
            && rtlab_sys::sched::set_thread_policy(tid, grant.saved).is_ok()
    }

    /// Whether a grant is the book's to demote: SCHED_RR it gave, not a reservation's since.
    fn demotable(grant: &Grant) -> bool {
        matches!(grant.given, Given::RoundRobin { .. })
            && !matches!(grant.sizing, Some(Sizing::Reserved { .. }))
    }

    /// The watchdog's view: every thread the book made real-time, with its user and its run
    /// time at the grant.
    pub fn realtime_threads(&self) -> Vec<MeteredThread> {
        self.grants
            .values()
            .filter(|grant| Book::demotable(grant))
            .map(|grant| MeteredThread {
                uid: grant.target.uid,
                tid: grant.target.tid,
                thread_start: grant.target.thread_start,
                cpu_time_at_grant: grant.cpu_time_at_grant,
            })
            .collect()
    }

    /// The watchdog demoted the real-time threads of `uids` (the canary blamed them, or they ran
    /// over their share): each is put back again here, under the book's lock (a request that
    /// came between the watchdog's demotion and this made it real-time again), forgotten, and
    /// its user refused until `refused.until`.
    pub fn demote_users(&mut self, uids: &BTreeSet<u32>, refused: &Refused) {
        let demoted: Vec<(u32, u64)> = self
            .grants
            .values()
            .filter(|grant| Book::demotable(grant) && uids.contains(&grant.target.uid))
            .map(|grant| (grant.target.tid, grant.target.thread_start))
            .collect();
        for (tid, start_time) in demoted {
            // Only a thread at its grant's SCHED_RR now: one a reservation or a Time Constraint
            // holds keeps their policy (demoting it would break them), and when they end the
            // grant is not given back, as it is forgotten here.
            if matches!(
                rtlab_sys::sched::thread_policy(tid),
                Ok(Policy::RoundRobin { .. })
            ) {
                demote(tid, start_time);
            }
            self.thread_exited(tid);
        }
        for uid in uids {
            self.refused.insert(*uid, refused.clone());
        }
        self.watcher.wake_if_pending();
    }

    /// The meter's latest figures: per user, what its real-time threads ran over the window.
    pub fn set_run_fractions(&mut self, ran: BTreeMap<u32, f64>) {
        self.ran = ran;
    }

    /// What `uid`'s real-time threads ran over `rtkit.user_share_window`, as a fraction of one
    /// CPU (the registry adds it to the user's reservations when it admits one).
    pub fn run_fraction(&self, uid: u32) -> f64 {
        self.ran.get(&uid).copied().unwrap_or(0.0)
    }

    /// The book as `list` shows it; `grant_of` names the reservation holding a thread, if any.
    pub fn list(&self, grant_of: impl Fn(u32) -> Option<u64>) -> Vec<RealtimeKitThread> {
        self.grants
            .values()
            .map(|grant| {
                let (policy, priority, nice, grant_id) = match grant.given {
                    Given::RoundRobin { priority } => ("SCHED_RR", Some(priority), None, None),
                    Given::Nice { nice } => ("SCHED_OTHER", None, Some(nice), None),
                    Given::Reservation { grant_id } => ("reservation", None, None, Some(grant_id)),
                };
                let (policy, grant_id) = match &grant.sizing {
                    Some(Sizing::Reserved { grant_id, .. }) => ("reservation", Some(*grant_id)),
                    _ => (policy, grant_id.or_else(|| grant_of(grant.target.tid))),
                };
                RealtimeKitThread {
                    pid: grant.target.pid,
                    tid: grant.target.tid,
                    comm: rtlab_sys::proc_thread::thread_comm(grant.target.tid).unwrap_or_default(),
                    uid: grant.target.uid,
                    caller_pid: grant.target.caller_pid,
                    method: grant.target.method.to_owned(),
                    policy: policy.to_owned(),
                    priority,
                    nice,
                    grant_id,
                    since: humantime::format_rfc3339_millis(grant.since).to_string(),
                    sizing: grant.sizing.as_ref().map(Sizing::describe),
                }
            })
            .collect()
    }
}

/// The policy a canary demotion gives: what `restore` would, for a thread known by id only.
pub fn demote(tid: u32, start_time: u64) -> bool {
    restore(tid, start_time, Policy::Other { nice: 0 }).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_line_without_affinity_round_trips() {
        let entry = JournalEntry::Save(SavedThread {
            tid: 7,
            start_time: 9,
            policy: Policy::Other { nice: 0 },
            affinity: Vec::new(),
        });
        assert_eq!(JournalEntry::parse(&entry.to_line()), Ok(entry));
    }

    #[test]
    fn a_demoted_user_is_refused_and_told_why_and_other_users_are_not() {
        let state = tempfile::tempdir().unwrap();
        let (watcher, _loop) = Watcher::new().unwrap();
        let mut book = Book::open(state.path(), RtkitConfig::default(), watcher).unwrap();
        let now = Instant::now();
        book.demote_users(
            &BTreeSet::from([65534]),
            &Refused {
                until: now + Duration::from_secs(60),
                why: "the canary found CPU 1 starved by real-time threads of uid 65534".into(),
                key: "rtkit.canary_refusal",
            },
        );
        let refused = book.admit(65534, 0.0, now).unwrap_err();
        assert!(
            matches!(&refused, Refusal::AccessDenied(message)
                if message.contains("CPU 1 starved") && message.contains("for another 1m")
                    && message.ends_with("(rtkit.canary_refusal)")),
            "{refused:?}"
        );
        assert!(book.admit(1, 0.0, now).is_ok());
        // The refusal ends.
        assert!(book
            .admit(65534, 0.0, now + Duration::from_secs(61))
            .is_ok());
        // Over the share by what its threads ran and what it holds: refused while it is.
        book.set_run_fractions(BTreeMap::from([(1, 0.15)]));
        assert!(book.admit(1, 0.0, now).is_ok());
        let over = book.admit(1, 0.1, now).unwrap_err();
        assert!(over.message().contains("rtkit.user_share"), "{over:?}");
    }

    #[test]
    fn real_time_saved_policies_reset_to_other() {
        assert_eq!(
            reset_policy(Policy::RoundRobin { priority: 5 }),
            Policy::Other { nice: 0 }
        );
        assert_eq!(
            reset_policy(Policy::Other { nice: 3 }),
            Policy::Other { nice: 3 }
        );
    }
}
