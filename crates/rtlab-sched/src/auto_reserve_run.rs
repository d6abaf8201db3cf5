//! `reserve --auto`'s loop: observe the program, decide ([`decide`]), ask for each chosen
//! reservation, observe again and keep the reservations only if the program misses no more
//! deadlines than before ([`worse_after`]); release what was granted, saying why, when asking
//! was refused, the check failed or was interrupted, or the misses rose.
//!
//! What observes and what reserves is the caller's, through an [`AutoReserveIo`]: the binary
//! observes with a trace or the kernel's per-task counters (rtlab-trace's `auto_observe`) and
//! asks the daemon (rtlab-client), so this crate needs neither. What happens is told through
//! [`AutoStep`]s as it happens and returned whole ([`AutoRun`]); the words are the caller's.

use crate::auto_reserve::{
    decide, worse_after, AutoMachine, AutoPlan, AutoRefused, AutoReservation, ObservedThread,
};
pub use rtlab_core::auto_plan::{AutoEnding, Reserved};
use rtlab_core::rpc::GrantInfo;
use std::sync::atomic::{AtomicBool, Ordering};

/// What asking for one chosen reservation came to.
#[derive(Clone, Debug)]
pub enum Asked {
    Granted(GrantInfo),
    /// The thread already holds a reservation of this user's that covers what was sized (made
    /// by hand, by an earlier `--auto`, or as the waker of another program's): the wish is met
    /// and it is left as it is. The line says so.
    AlreadyHeld(GrantInfo, String),
    Refused(String),
}

/// How the loop observes and reserves.
pub trait AutoReserveIo {
    type Error;
    /// Observes the program for the observation's length (or until `stop`): its threads.
    fn observe(&mut self, stop: &AtomicBool) -> Result<Vec<ObservedThread>, Self::Error>;
    /// The deadline misses of threads `tids` in the last observation; `None` when the
    /// observation counts none (the kernel's counters), and then nothing is checked.
    fn misses(&self, tids: &[u32]) -> Option<u64>;
    /// Asks for one reservation.
    fn reserve(&mut self, reservation: &AutoReservation) -> Asked;
    /// Releases `grants`; each failure in words.
    fn release(&mut self, grants: &[GrantInfo]) -> Vec<String>;
}

/// What the loop is doing, as it does it.
#[derive(Debug)]
pub enum AutoStep<'a> {
    /// About to observe the program.
    Observing,
    /// The plan, with the misses counted while observing (`None`: not counted).
    Decided {
        plan: &'a AutoPlan,
        misses_before: Option<u64>,
    },
    /// Every chosen thread asked for, each as it came out (in the plan's order).
    Reserved {
        plan: &'a AutoPlan,
        reserved: &'a [Reserved],
    },
    /// About to observe again, with the reservations.
    Checking,
}

/// How the loop ended.
#[derive(Debug)]
pub enum AutoEnd<E> {
    /// Stopped during the first observation: nothing decided.
    Interrupted,
    /// Nothing can be reserved.
    Refused(AutoRefused),
    /// Decided, nothing asked for.
    DryRun,
    /// The daemon refused one (the reason); what was granted is released (the grants in
    /// [`AutoRun::reserved`] are those asked for before, now released).
    Denied {
        reason: String,
        release_failures: Vec<String>,
    },
    /// Every chosen thread already holds a reservation.
    AlreadyReserved,
    /// Kept without a check: the observation counts no misses.
    KeptUnchecked,
    /// The check's observation failed (`Some`) or was interrupted: what was granted is released.
    CheckEnded {
        error: Option<E>,
        interrupted: bool,
        release_failures: Vec<String>,
    },
    /// The misses rose: what was granted is released.
    RolledBack {
        misses_after: u64,
        release_failures: Vec<String>,
    },
    /// Kept, checked.
    Kept { misses_after: u64 },
}

/// What the loop did.
#[derive(Debug)]
pub struct AutoRun<E> {
    /// The plan (`None` when interrupted or refused before one).
    pub plan: Option<AutoPlan>,
    /// The misses of the chosen threads while observed (0 when not counted).
    pub misses_before: u64,
    /// Each chosen reservation's outcome, in the plan's order (empty for a dry run).
    pub reserved: Vec<Reserved>,
    /// What this run was granted (not those already held); released unless kept.
    pub grants: Vec<GrantInfo>,
    pub end: AutoEnd<E>,
}

impl<E: std::fmt::Display> AutoEnd<E> {
    /// This end in plain words (the check's error written with `{:#}`), for rtlab-render.
    pub fn ending(&self) -> AutoEnding {
        match self {
            AutoEnd::Interrupted => AutoEnding::Interrupted,
            AutoEnd::Refused(refused) => AutoEnding::Refused(refused.to_string()),
            AutoEnd::DryRun => AutoEnding::DryRun,
            AutoEnd::Denied {
                reason,
                release_failures,
            } => AutoEnding::Denied {
                reason: reason.clone(),
                release_failures: release_failures.clone(),
            },
            AutoEnd::AlreadyReserved => AutoEnding::AlreadyReserved,
            AutoEnd::KeptUnchecked => AutoEnding::KeptUnchecked,
            AutoEnd::CheckEnded {
                error,
                interrupted,
                release_failures,
            } => AutoEnding::CheckEnded {
                error: error.as_ref().map(|error| format!("{error:#}")),
                interrupted: *interrupted,
                release_failures: release_failures.clone(),
            },
            AutoEnd::RolledBack {
                misses_after,
                release_failures,
            } => AutoEnding::RolledBack {
                misses_after: *misses_after,
                release_failures: release_failures.clone(),
            },
            AutoEnd::Kept { misses_after } => AutoEnding::Kept {
                misses_after: *misses_after,
            },
        }
    }
}

impl<E> AutoRun<E> {
    fn ended(plan: Option<AutoPlan>, end: AutoEnd<E>) -> AutoRun<E> {
        AutoRun {
            plan,
            misses_before: 0,
            reserved: Vec::new(),
            grants: Vec::new(),
            end,
        }
    }
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

/// Observes, decides, reserves (unless `dry_run`) and checks. An error of the first
/// observation is returned as it is; one of the check's ends the run ([`AutoEnd::CheckEnded`]).
pub fn run<Io: AutoReserveIo>(
    io: &mut Io,
    machine: &AutoMachine,
    dry_run: bool,
    stop: &AtomicBool,
    step: &mut dyn FnMut(AutoStep<'_>),
) -> Result<AutoRun<Io::Error>, Io::Error> {
    step(AutoStep::Observing);
    let threads = io.observe(stop)?;
    if stop.load(Ordering::SeqCst) {
        return Ok(AutoRun::ended(None, AutoEnd::Interrupted));
    }
    let plan = match decide(&threads, machine) {
        Ok(plan) => plan,
        Err(refused) => return Ok(AutoRun::ended(None, AutoEnd::Refused(refused))),
    };
    let tids: Vec<u32> = plan.reservations.iter().map(|r| r.tid).collect();
    let counted_before = io.misses(&tids);
    step(AutoStep::Decided {
        plan: &plan,
        misses_before: counted_before,
    });
    let mut run = AutoRun::ended(None, AutoEnd::DryRun);
    run.misses_before = counted_before.unwrap_or(0);
    if dry_run {
        run.plan = Some(plan);
        return Ok(run);
    }
    run.end = reserve_all(io, &plan, &mut run);
    if !matches!(run.end, AutoEnd::DryRun) {
        run.plan = Some(plan);
        return Ok(run);
    }
    step(AutoStep::Reserved {
        plan: &plan,
        reserved: &run.reserved,
    });
    run.end = if run.grants.is_empty() {
        AutoEnd::AlreadyReserved
    } else if counted_before.is_none() {
        AutoEnd::KeptUnchecked
    } else {
        step(AutoStep::Checking);
        check(io, &tids, run.misses_before, &run.grants, stop)
    };
    run.plan = Some(plan);
    Ok(run)
}

/// Asks for each chosen thread on its own (the best result in issue 26: threads sharing one
/// reservation wait for each other); on a refusal releases what was granted and says so
/// ([`AutoEnd::Denied`]), else leaves [`AutoEnd::DryRun`] for the caller to go on.
fn reserve_all<Io: AutoReserveIo>(
    io: &mut Io,
    plan: &AutoPlan,
    run: &mut AutoRun<Io::Error>,
) -> AutoEnd<Io::Error> {
    // Taken before the reservations make the threads SCHED_DEADLINE.
    run.reserved = plan
        .reservations
        .iter()
        .map(|reservation| Reserved {
            sampler_priority: sampler_priority(reservation.tid),
            ..Reserved::default()
        })
        .collect();
    for (reservation, reserved) in plan.reservations.iter().zip(&mut run.reserved) {
        match io.reserve(reservation) {
            Asked::Granted(grant) => {
                reserved.grant = Some(grant.clone());
                run.grants.push(grant);
            }
            Asked::AlreadyHeld(grant, line) => {
                reserved.grant = Some(grant);
                reserved.already_held = Some(line);
            }
            Asked::Refused(reason) => {
                let release_failures = io.release(&run.grants);
                return AutoEnd::Denied {
                    reason,
                    release_failures,
                };
            }
        }
    }
    AutoEnd::DryRun
}

/// Observes again with the reservations and keeps them unless the misses rose.
fn check<Io: AutoReserveIo>(
    io: &mut Io,
    tids: &[u32],
    misses_before: u64,
    grants: &[GrantInfo],
    stop: &AtomicBool,
) -> AutoEnd<Io::Error> {
    let after = io.observe(stop);
    let interrupted = stop.load(Ordering::SeqCst);
    match after {
        Ok(_) if !interrupted => {}
        other => {
            return AutoEnd::CheckEnded {
                release_failures: io.release(grants),
                error: other.err(),
                interrupted,
            }
        }
    }
    let misses_after = io.misses(tids).unwrap_or(0);
    if worse_after(misses_before, misses_after) {
        return AutoEnd::RolledBack {
            misses_after,
            release_failures: io.release(grants),
        };
    }
    AutoEnd::Kept { misses_after }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auto_reserve::AutoMachine;
    use rtlab_core::Nanos;

    /// A program of one periodic SCHED_FIFO thread whose misses are given per observation.
    struct Fake {
        misses: Vec<u64>,
        observed: usize,
        refuse: bool,
        released: usize,
    }

    fn thread() -> ObservedThread {
        ObservedThread {
            tid: 4242,
            name: "client".into(),
            pid: Some(4240),
            in_target: true,
            real_time: true,
            policy: "FIFO".into(),
            priority: 65,
            activations: 3_750,
            period: Some(Nanos(2_666_667)),
            period_jitter: Some(Nanos(10_000)),
            cpu_per_cycle_high: Nanos(500_000),
            usual_waker: None,
        }
    }

    fn grant() -> GrantInfo {
        let rate = rtlab_core::rpc::WireRate {
            amount_ns: 600_000,
            period_ns: 2_666_667,
        };
        GrantInfo {
            grant_id: 1,
            owner_uid: 0,
            owner: "tid:4242".into(),
            threads: Vec::new(),
            requested: rate,
            granted: rate,
            backend: rtlab_core::rpc::Backend::Deadline,
            cpu: None,
            planner_cpu: 0,
            kernel_admission: "accepted".into(),
            deadline_params: None,
            since: String::new(),
            lingering_until: None,
            kernel_held: None,
        }
    }

    impl AutoReserveIo for Fake {
        type Error = String;
        fn observe(&mut self, _: &AtomicBool) -> Result<Vec<ObservedThread>, String> {
            self.observed += 1;
            Ok(vec![thread()])
        }
        fn misses(&self, _: &[u32]) -> Option<u64> {
            self.misses.get(self.observed - 1).copied()
        }
        fn reserve(&mut self, _: &AutoReservation) -> Asked {
            if self.refuse {
                Asked::Refused("no".into())
            } else {
                Asked::Granted(grant())
            }
        }
        fn release(&mut self, grants: &[GrantInfo]) -> Vec<String> {
            self.released += grants.len();
            Vec::new()
        }
    }

    fn machine() -> AutoMachine {
        AutoMachine {
            n_cpus: 4,
            deadline_overrun: Nanos(4_000_000),
            granularity_described: "4ms tick".into(),
            deadline_share_per_cpu: 0.9,
            deadline_preferred: true,
        }
    }

    fn ran(fake: &mut Fake, dry_run: bool) -> AutoRun<String> {
        let mut steps = Vec::new();
        let run = run(
            fake,
            &machine(),
            dry_run,
            &AtomicBool::new(false),
            &mut |step| {
                steps.push(
                    format!("{step:?}")
                        .split([' ', '{'])
                        .next()
                        .unwrap()
                        .to_owned(),
                )
            },
        )
        .unwrap();
        assert_eq!(steps[0], "Observing");
        run
    }

    #[test]
    fn kept_when_the_misses_do_not_rise_and_rolled_back_when_they_do() {
        let mut fake = Fake {
            misses: vec![10, 2],
            observed: 0,
            refuse: false,
            released: 0,
        };
        assert!(matches!(
            ran(&mut fake, false).end,
            AutoEnd::Kept { misses_after: 2 }
        ));
        assert_eq!(fake.released, 0);
        let mut fake = Fake {
            misses: vec![0, 50],
            observed: 0,
            refuse: false,
            released: 0,
        };
        assert!(matches!(
            ran(&mut fake, false).end,
            AutoEnd::RolledBack {
                misses_after: 50,
                ..
            }
        ));
        assert_eq!(fake.released, 1);
    }

    #[test]
    fn a_refusal_releases_and_a_dry_run_asks_nothing() {
        let mut fake = Fake {
            misses: vec![0],
            observed: 0,
            refuse: true,
            released: 0,
        };
        assert!(matches!(ran(&mut fake, false).end, AutoEnd::Denied { .. }));
        let mut fake = Fake {
            misses: vec![],
            observed: 0,
            refuse: false,
            released: 0,
        };
        let run = ran(&mut fake, true);
        assert!(matches!(run.end, AutoEnd::DryRun));
        assert!(run.reserved.is_empty());
        assert_eq!(fake.observed, 1);
    }
}
