//! The registry's side of the RealtimeKit1 service: a child module of `registry` (so it sees the
//! registry's book of reservations) kept in a file of its own, so that the registry's own
//! functions stay as they are. The lock order is registry, then book: the service never holds the
//! book's lock while it waits for the registry's.

use super::Registry;
use crate::precedence::{PiGuard, PiLock};
use crate::rtkit::book::Book;
use crate::rtkit::meter::RegistryView;
use rtlab_core::rpc::RealtimeKitThread;
use std::collections::BTreeSet;
use std::sync::Arc;

fn lock(book: &PiLock<Book>) -> PiGuard<'_, Book> {
    book.lock()
}

impl Registry {
    /// Connects the RealtimeKit1 service's book: its threads are listed, forgotten when they
    /// exit, and put back when the daemon stops.
    pub fn attach_realtimekit(&mut self, book: Arc<PiLock<Book>>) {
        self.realtimekit = Some(book);
    }

    /// The reservation holding thread `tid`, if any (an rtkit thread reserved with `rtlab
    /// reserve` is upgraded: its policy is the reservation's until that ends).
    pub fn grant_of_thread(&self, tid: u32) -> Option<u64> {
        self.thread_grants.get(&tid).map(|id| id.0)
    }

    /// What holds thread `tid`, in words, if a reservation or a Time Constraint does: its
    /// policy is theirs, not RealtimeKit1's, until they end.
    pub fn holder_of_thread(&self, tid: u32) -> Option<String> {
        if let Some(id) = self.thread_grants.get(&tid) {
            return Some(format!("reservation {}", id.0));
        }
        self.constraints
            .iter()
            .find(|(_, record)| record.tid == tid)
            .map(|(id, _)| format!("time constraint {}", id.0))
    }

    /// The fraction of one CPU `uid` holds in reservations and Time Constraints.
    pub fn held_by(&self, uid: u32) -> f64 {
        self.held_fraction(uid)
    }

    /// What the watchdog reads (with `try_lock`) at each tick.
    pub fn realtimekit_view(&self) -> RegistryView {
        let uids: BTreeSet<u32> = self
            .grants
            .values()
            .map(|record| record.owner_uid)
            .chain(self.constraints.values().map(|record| record.uid))
            .collect();
        RegistryView {
            held: uids
                .into_iter()
                .map(|uid| (uid, self.held_fraction(uid)))
                .collect(),
            reserved_tids: self
                .thread_grants
                .keys()
                .copied()
                .chain(self.constraints.values().map(|record| record.tid))
                .collect(),
        }
    }

    /// What `uid`'s RealtimeKit1 threads ran over `rtkit.user_share_window` (a fraction of one
    /// CPU) and that window; `None` without the service. Counted with the user's reservations at
    /// admission, so a user demoted for its run time cannot take the CPU back as a reservation.
    pub(super) fn realtimekit_ran(&self, uid: u32) -> Option<(f64, std::time::Duration)> {
        self.realtimekit.as_ref().map(|book| {
            let book = lock(book);
            (book.run_fraction(uid), book.config().user_share_window)
        })
    }

    pub(super) fn realtimekit_list(&self) -> Vec<RealtimeKitThread> {
        match &self.realtimekit {
            Some(book) => lock(book).list(|tid| self.grant_of_thread(tid)),
            None => Vec::new(),
        }
    }

    /// A reservation let go of thread `tid`: an rtkit thread gets its SCHED_RR (or nice level)
    /// back with SCHED_RESET_ON_FORK, which the enforcer's restore does not keep.
    pub(super) fn realtimekit_reservation_ended(&mut self, tid: u32) {
        if let Some(book) = &self.realtimekit {
            lock(book).reservation_ended(tid);
        }
    }

    /// Before a reservation takes threads: those the book made SCHED_RR are put back to their
    /// policy before it (see `Book::suspend_for_reservation`); returns them, for
    /// [`realtimekit_resume`](Registry::realtimekit_resume) if the reservation is not made.
    pub(super) fn realtimekit_suspend(&mut self, tids: &[u32]) -> Vec<u32> {
        match &self.realtimekit {
            Some(book) => {
                let mut book = lock(book);
                tids.iter()
                    .copied()
                    .filter(|&tid| book.suspend_for_reservation(tid))
                    .collect()
            }
            None => Vec::new(),
        }
    }

    /// A Time Constraint on `tid` ended: if nothing holds the thread any more (no reservation,
    /// no other constraint), its RealtimeKit1 grant, suspended when the constraint began, is
    /// given back (if the book still has it: a user demoted meanwhile gets nothing back).
    pub(super) fn realtimekit_constraint_ended(&mut self, tid: u32) {
        if self.holder_of_thread(tid).is_none() {
            self.realtimekit_reservation_ended(tid);
        }
    }

    /// A reservation that suspended these threads' grants was not made: they get them back.
    pub(super) fn realtimekit_resume(&mut self, tids: &[u32]) {
        for &tid in tids {
            self.realtimekit_reservation_ended(tid);
        }
    }

    pub(super) fn realtimekit_thread_exited(&mut self, tid: u32) {
        if let Some(book) = &self.realtimekit {
            lock(book).thread_exited(tid);
        }
    }

    /// After the reservations were reverted (an upgraded rtkit thread is back at SCHED_RR), the
    /// book puts its threads back and closes.
    pub(super) fn realtimekit_shut_down(&mut self) {
        if let Some(book) = &self.realtimekit {
            lock(book).close();
        }
    }
}
