//! What each user's RealtimeKit1 threads really ran: the budget behind `rtkit.user_share` and the
//! canary's aim.
//!
//! RLIMIT_RTTIME stops only a thread that runs without ever blocking, and the canary sees only a
//! CPU that real-time threads held without a break: a thread that spins and naps 100 µs every
//! 100 ms passes both while it holds 96 % of its CPU. So the watchdog also looks at every SCHED_RR
//! thread of the book at each of its ticks (50 ms): the kernel's run time of the thread
//! (/proc/TID/schedstat, `sum_exec_runtime`), the CPU it is on, whether it is still real-time.
//! What a user's threads ran while real-time, over the last `rtkit.user_share_window` (5 s), is
//! that user's use; with what the registry holds for the user (reservations, Time Constraints)
//! it must stay within `rtkit.user_share` of one CPU. The registry counts the same use when the
//! user asks for a reservation, so a demoted user cannot take the CPU back that way.
//!
//! When a CPU starves, the same looks say whose threads ran on it during the silence: the canary
//! demotes those users only (see [`blamed_users`]).
//!
//! This module is pure bookkeeping over [`Look`]s, so the rules are tested without threads.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What the watchdog needs of the registry (`Registry::realtimekit_view`, read with `try_lock`):
/// what each user holds, and which threads reservations hold (their run time is the
/// reservation's, not the book's SCHED_RR's, and they are not the book's to demote).
#[derive(Clone, Debug, Default)]
pub struct RegistryView {
    /// Per uid, the fraction of one CPU its reservations and Time Constraints hold.
    pub held: BTreeMap<u32, f64>,
    pub reserved_tids: BTreeSet<u32>,
}

/// One look at one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// When (CLOCK_MONOTONIC, ns).
    pub at_ns: u64,
    /// The thread's run time so far (ns).
    pub cpu_time_ns: u64,
    /// The CPU it is on, or last ran on.
    pub cpu: usize,
    /// Whether it is still real-time (a thread that left SCHED_RR itself is not the book's).
    pub realtime: bool,
}

/// A thread the watchdog meters: whose it is, which thread, and its run time when it was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeteredThread {
    pub uid: u32,
    pub tid: u32,
    pub thread_start: u64,
    /// Its run time when the book granted it (so the first look counts from the grant).
    pub cpu_time_at_grant: Option<u64>,
}

#[derive(Debug)]
struct ThreadLooks {
    uid: u32,
    last_cpu_time_ns: Option<u64>,
    looks: VecDeque<Look>,
}

/// Every user's run time over the window and each thread's recent looks.
#[derive(Debug)]
pub struct Meter {
    window_ns: u64,
    keep_looks_ns: u64,
    threads: BTreeMap<(u32, u64), ThreadLooks>,
    /// Per user: (when, ns run by its real-time threads since the look before), one a tick.
    users: BTreeMap<u32, VecDeque<(u64, u64)>>,
}

impl Meter {
    /// A meter over `window_ns`, keeping each thread's looks for `keep_looks_ns` (the canary's
    /// longest silence).
    pub fn new(window_ns: u64, keep_looks_ns: u64) -> Meter {
        Meter {
            window_ns: window_ns.max(1),
            keep_looks_ns,
            threads: BTreeMap::new(),
            users: BTreeMap::new(),
        }
    }

    /// Records a look at `thread`: what it ran since the look before (or since its grant) counts
    /// for its user when it is real-time now.
    pub fn record(&mut self, thread: MeteredThread, look: Look) {
        let entry = self
            .threads
            .entry((thread.tid, thread.thread_start))
            .or_insert_with(|| ThreadLooks {
                uid: thread.uid,
                last_cpu_time_ns: thread.cpu_time_at_grant,
                looks: VecDeque::new(),
            });
        let ran = entry
            .last_cpu_time_ns
            .map_or(0, |before| look.cpu_time_ns.saturating_sub(before));
        entry.last_cpu_time_ns = Some(look.cpu_time_ns);
        entry.looks.push_back(look);
        if look.realtime && ran > 0 {
            let buckets = self.users.entry(thread.uid).or_default();
            match buckets.back_mut() {
                Some((at, sum)) if *at == look.at_ns => *sum += ran,
                _ => buckets.push_back((look.at_ns, ran)),
            }
        }
    }

    /// Forgets the threads not in `present` (exited, demoted, reset); their users' run time stays
    /// counted until it leaves the window. Drops what is older than the window and the looks.
    pub fn end_tick(&mut self, present: &BTreeSet<(u32, u64)>, now_ns: u64) {
        self.threads.retain(|key, _| present.contains(key));
        let looks_since = now_ns.saturating_sub(self.keep_looks_ns);
        for thread in self.threads.values_mut() {
            while thread.looks.len() > 1 && thread.looks[1].at_ns <= looks_since {
                thread.looks.pop_front();
            }
        }
        let window_since = now_ns.saturating_sub(self.window_ns);
        for buckets in self.users.values_mut() {
            while buckets.front().is_some_and(|(at, _)| *at <= window_since) {
                buckets.pop_front();
            }
        }
        self.users.retain(|_, buckets| !buckets.is_empty());
    }

    /// Per user, the fraction of one CPU its real-time threads ran over the window ending at
    /// `now_ns` (run time over the whole window's length: a budget, not an average of the part
    /// seen so far).
    pub fn fractions(&self, now_ns: u64) -> BTreeMap<u32, f64> {
        let since = now_ns.saturating_sub(self.window_ns);
        self.users
            .iter()
            .map(|(uid, buckets)| {
                let ran: u64 = buckets
                    .iter()
                    .filter(|(at, _)| *at > since)
                    .map(|(_, ran)| ran)
                    .sum();
                (*uid, ran as f64 / self.window_ns as f64)
            })
            .collect()
    }

    /// Per user, how long its threads ran between looks after `since_ns` at either of which they
    /// were on `cpu`.
    pub fn ran_on_cpu(&self, cpu: usize, since_ns: u64) -> BTreeMap<u32, u64> {
        let mut ran = BTreeMap::new();
        for thread in self.threads.values() {
            let on_cpu: u64 = thread
                .looks
                .iter()
                .zip(thread.looks.iter().skip(1))
                .filter(|(before, after)| {
                    after.at_ns > since_ns && (before.cpu == cpu || after.cpu == cpu)
                })
                .map(|(before, after)| after.cpu_time_ns.saturating_sub(before.cpu_time_ns))
                .sum();
            if on_cpu > 0 {
                *ran.entry(thread.uid).or_insert(0) += on_cpu;
            }
        }
        ran
    }
}

/// Whom a starvation blames: of the users whose threads ran on the starved CPU during the
/// `silent_ns` it was starved (`ran_on_cpu`), those that ran there more than their share of the
/// silence; if none did (many users, each within its share), every one of them — but only when
/// the book's threads together ran at least half the silence. Less than that, and the CPU was
/// starved by real-time threads that are not the service's (a privileged program, rtlab's own
/// reservations and dispatcher): nobody is blamed. (The watchdog once demoted a quiet user whose
/// idle SCHED_RR thread had run a few microseconds on a CPU something else starved.) Users whose
/// threads did not run there are never blamed, so one user cannot get every user demoted.
pub fn blamed_users(ran_on_cpu: &BTreeMap<u32, u64>, silent_ns: u64, share: f64) -> BTreeSet<u32> {
    let over: BTreeSet<u32> = ran_on_cpu
        .iter()
        .filter(|(_, ran)| **ran as f64 > share * silent_ns as f64)
        .map(|(uid, _)| *uid)
        .collect();
    if !over.is_empty() {
        return over;
    }
    let together: u64 = ran_on_cpu.values().sum();
    if together.saturating_mul(2) >= silent_ns {
        ran_on_cpu.keys().copied().collect()
    } else {
        BTreeSet::new()
    }
}

/// A user over its share: what its threads ran and what the registry holds for it (fractions of
/// one CPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverShare {
    pub uid: u32,
    pub ran: f64,
    pub held: f64,
}

/// The users, among `candidates` (those with a real-time thread now), whose run time over the
/// window plus what the registry holds for them exceeds `share`. Root (uid 0) is not held to a
/// share, as the registry holds no privileged caller to its limit.
pub fn over_share(
    ran: &BTreeMap<u32, f64>,
    held: &BTreeMap<u32, f64>,
    candidates: &BTreeSet<u32>,
    share: f64,
) -> Vec<OverShare> {
    candidates
        .iter()
        .filter(|uid| **uid != 0)
        .filter_map(|uid| {
            let over = OverShare {
                uid: *uid,
                ran: ran.get(uid).copied().unwrap_or(0.0),
                held: held.get(uid).copied().unwrap_or(0.0),
            };
            // A little slack for the float sums.
            (over.ran > 0.0 && over.ran + over.held > share + 1e-9).then_some(over)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn thread(uid: u32, tid: u32) -> MeteredThread {
        MeteredThread {
            uid,
            tid,
            thread_start: u64::from(tid) * 10,
            cpu_time_at_grant: Some(0),
        }
    }

    fn look(at_ms: u64, cpu_time_ms: u64, cpu: usize) -> Look {
        Look {
            at_ns: at_ms * MS,
            cpu_time_ns: cpu_time_ms * MS,
            cpu,
            realtime: true,
        }
    }

    /// Ticks of 50 ms from `from_ms` to `until_ms`, the thread running `percent` of the time
    /// since 0.
    fn run(meter: &mut Meter, thread: MeteredThread, percent: u64, from_ms: u64, until_ms: u64) {
        let cpu = (thread.uid % 2) as usize;
        let present = BTreeSet::from([(thread.tid, thread.thread_start)]);
        for at in (from_ms..=until_ms).step_by(50) {
            meter.record(thread, look(at, at * percent / 100, cpu));
            meter.end_tick(&present, at * MS);
        }
    }

    #[test]
    fn a_napping_spinner_passes_the_share_within_a_second_and_a_modest_thread_never_does() {
        let share = 0.2;
        let mut spinner = Meter::new(5_000 * MS, 1_000 * MS);
        let spinning = thread(65534, 7);
        // 96 % of a CPU: over 20 % of 5 s after 1.05 s, not before.
        run(&mut spinner, spinning, 96, 50, 1_000);
        let candidates = BTreeSet::from([65534]);
        let none = BTreeMap::new();
        assert!(over_share(&spinner.fractions(1_000 * MS), &none, &candidates, share).is_empty());
        run(&mut spinner, spinning, 96, 1_050, 1_100);
        let over = over_share(&spinner.fractions(1_100 * MS), &none, &candidates, share);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].uid, 65534);

        // 10 % for a minute: never over.
        let mut modest = Meter::new(5_000 * MS, 1_000 * MS);
        run(&mut modest, thread(1, 8), 10, 50, 60_000);
        let fraction = modest.fractions(60_000 * MS)[&1];
        assert!((fraction - 0.1).abs() < 0.01, "{fraction}");
        let candidates = BTreeSet::from([1]);
        assert!(over_share(&modest.fractions(60_000 * MS), &none, &candidates, share).is_empty());
        // ... unless the registry holds 15 % more for that user.
        let held = BTreeMap::from([(1, 0.15)]);
        assert_eq!(
            over_share(&modest.fractions(60_000 * MS), &held, &candidates, share).len(),
            1
        );
    }

    #[test]
    fn run_time_counts_from_the_grant_only_while_real_time_and_leaves_with_the_window() {
        let mut meter = Meter::new(1_000 * MS, 1_000 * MS);
        let granted = MeteredThread {
            cpu_time_at_grant: Some(500 * MS),
            ..thread(5, 9)
        };
        let present = BTreeSet::from([(9, 90)]);
        // 600 ms of run time so far, 500 of it before the grant.
        meter.record(granted, look(100, 600, 0));
        meter.end_tick(&present, 100 * MS);
        assert!((meter.fractions(100 * MS)[&5] - 0.1).abs() < 1e-9);
        // Not real-time any more (it left SCHED_RR itself): what it runs is not counted.
        meter.record(
            granted,
            Look {
                realtime: false,
                ..look(200, 700, 0)
            },
        );
        meter.end_tick(&present, 200 * MS);
        assert!((meter.fractions(200 * MS)[&5] - 0.1).abs() < 1e-9);
        // The thread is gone; what it ran stays counted until it leaves the window.
        meter.end_tick(&BTreeSet::new(), 1_000 * MS);
        assert!((meter.fractions(1_000 * MS)[&5] - 0.1).abs() < 1e-9);
        meter.end_tick(&BTreeSet::new(), 1_100 * MS);
        assert!(meter.fractions(1_100 * MS).is_empty());
    }

    #[test]
    fn root_is_not_held_to_a_share() {
        let ran = BTreeMap::from([(0, 0.9)]);
        assert!(over_share(&ran, &BTreeMap::new(), &BTreeSet::from([0]), 0.2).is_empty());
    }

    #[test]
    fn a_starvation_blames_the_users_that_ran_on_the_starved_cpu_only() {
        let mut meter = Meter::new(5_000 * MS, 2_000 * MS);
        let hog = thread(65534, 7);
        let bystander = thread(1, 8);
        let present = BTreeSet::from([(7, 70), (8, 80)]);
        for at in (50..=1_000).step_by(50) {
            meter.record(hog, look(at, at * 95 / 100, 1));
            meter.record(bystander, look(at, at / 10, 0));
            meter.end_tick(&present, at * MS);
        }
        let since = 500 * MS;
        let on_cpu_1 = meter.ran_on_cpu(1, since);
        assert_eq!(on_cpu_1.keys().copied().collect::<Vec<_>>(), vec![65534]);
        assert_eq!(
            blamed_users(&on_cpu_1, 500 * MS, 0.2),
            BTreeSet::from([65534])
        );
        // On CPU 0 only the bystander ran, 10 % of the silence: something else starved that CPU,
        // and nobody is blamed (it once was).
        assert!(blamed_users(&meter.ran_on_cpu(0, since), 500 * MS, 0.2).is_empty());
        // A quiet user whose thread ran a few microseconds there: not blamed either.
        let quiet = BTreeMap::from([(2, 20_000)]);
        assert!(blamed_users(&quiet, 503 * MS, 0.2).is_empty());
        // Two users on the starved CPU: the one over its share is blamed, not the other.
        let both = BTreeMap::from([(1, 50 * MS), (2, 450 * MS)]);
        assert_eq!(blamed_users(&both, 500 * MS, 0.2), BTreeSet::from([2]));
        // Many users, each within its share: all of them.
        let many = BTreeMap::from([(1, 90 * MS), (2, 90 * MS), (3, 90 * MS)]);
        assert_eq!(blamed_users(&many, 500 * MS, 0.2).len(), 3);
        assert!(blamed_users(&BTreeMap::new(), 500 * MS, 0.2).is_empty());
    }
}
