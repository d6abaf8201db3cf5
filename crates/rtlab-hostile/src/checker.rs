//! The checker: what the kernel says, never what the daemon says. A victim's threads keep the
//! policy they had before the attack (`sched_getattr`), and each attacking uid's SCHED_DEADLINE
//! bandwidth — runtime / period as the kernel holds it, summed over the uid's threads — stays
//! within the daemon's `user_limit` plus [`SLACK`].
//!
//! The kernel's runtime is more than the grant: the daemon's `deadline` backend sets runtime =
//! amount + the kernel's enforcement granularity (the overrun a job may make before it is
//! throttled: one tick, or 100 µs under HRTICK_DL), and a Time Constraint gets estimate + that
//! over what is left of its window. The daemon counts that against the limit (what the kernel
//! holds, when more than the rate asked), so the kernel's figure is the one checked; the slack of
//! five percentage points covers a constraint's window shrinking between the daemon's reading of
//! the clock and the kernel's. Grants of the `dispatch` backend (SCHED_FIFO raised and lowered in
//! slots by the daemon's dispatcher) show no bandwidth to `sched_getattr` and are not counted.

use rtlab_sys::sched::Policy;
use serde::Serialize;

/// How far a uid's summed share may exceed the limit: five percentage points.
pub const SLACK: f64 = 0.05;

/// The overrun the daemon's `deadline` backend adds to every runtime on this machine, ns.
pub fn overrun_ns() -> u64 {
    match rtlab_sys::thread_control::hrtick_dl_enabled() {
        Ok(Some(true)) => 100_000,
        _ => rtlab_sys::thread_control::tick_ns().unwrap_or(4_000_000),
    }
}

/// What a violation is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ViolationKind {
    /// A victim thread's policy or priority changed (or it vanished).
    VictimChanged,
    /// An attacking uid held more SCHED_DEADLINE bandwidth than its limit.
    OverLimit { uid: u32 },
    /// Root's ping went unanswered past the bound, or was refused.
    Unanswered,
    /// The daemon exited, or a thread of it panicked, while attacked.
    DaemonExited,
}

#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    #[serde(flatten)]
    pub kind: ViolationKind,
    pub detail: String,
    /// CLOCK_MONOTONIC ns when it was seen.
    pub seen_at_ns: u64,
}

impl Violation {
    /// What it is about: a victim thread (its role), a uid, root's ping, the daemon.
    pub fn subject(&self) -> String {
        match &self.kind {
            ViolationKind::VictimChanged => {
                self.detail.split(':').next().unwrap_or_default().to_owned()
            }
            kind => format!("{kind:?}"),
        }
    }
}

#[derive(Clone, Debug)]
struct VictimThread {
    role: String,
    tid: u32,
    policy: Policy,
}

/// An attacking uid's share as read at one check.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct UidShare {
    pub uid: u32,
    /// Σ runtime / period over its SCHED_DEADLINE threads: what is held against the limit.
    pub held: f64,
    /// Σ (runtime − the overrun) / period: the rates asked, about.
    pub asked: f64,
    pub deadline_threads: usize,
}

/// A process the checker watches, with a name for reports.
#[derive(Clone, Debug)]
pub struct Watched {
    pub role: String,
    pub pid: u32,
}

/// The baseline of the victims and what to sum for each attacking uid.
pub struct Checker {
    victims: Vec<VictimThread>,
    /// Each attacking uid and its processes (attackers and bystander).
    uids: Vec<(u32, Vec<u32>)>,
    limit: f64,
    overrun_ns: u64,
}

impl Checker {
    /// Reads the victims' policies now, before any attack.
    pub fn new(
        victims: &[Watched],
        uids: Vec<(u32, Vec<u32>)>,
        limit: f64,
    ) -> std::io::Result<Checker> {
        let mut threads = Vec::new();
        for victim in victims {
            for tid in rtlab_sys::sched::process_thread_ids(victim.pid)? {
                let comm = rtlab_sys::proc_thread::thread_comm(tid).unwrap_or_default();
                threads.push(VictimThread {
                    role: format!("{} thread {tid} ({comm})", victim.role),
                    tid,
                    policy: rtlab_sys::sched::thread_policy(tid)?,
                });
            }
        }
        Ok(Checker {
            victims: threads,
            uids,
            limit,
            overrun_ns: overrun_ns(),
        })
    }

    pub fn overrun_ns(&self) -> u64 {
        self.overrun_ns
    }

    pub fn victim_threads(&self) -> usize {
        self.victims.len()
    }

    /// One check: every violation seen now, and each uid's share.
    pub fn check(&self) -> (Vec<Violation>, Vec<UidShare>) {
        let now = rtlab_sys::clock::monotonic_ns();
        let mut violations = Vec::new();
        for victim in &self.victims {
            match rtlab_sys::sched::thread_policy(victim.tid) {
                Ok(policy) if policy == victim.policy => {}
                Ok(policy) => violations.push(Violation {
                    kind: ViolationKind::VictimChanged,
                    detail: format!(
                        "{}: {:?} before the attack, {policy:?} now",
                        victim.role, victim.policy
                    ),
                    seen_at_ns: now,
                }),
                Err(error) => violations.push(Violation {
                    kind: ViolationKind::VictimChanged,
                    detail: format!("{}: unreadable ({error}): gone?", victim.role),
                    seen_at_ns: now,
                }),
            }
        }
        let mut shares = Vec::new();
        for (uid, pids) in &self.uids {
            let mut share = UidShare {
                uid: *uid,
                ..UidShare::default()
            };
            let mut held = Vec::new();
            for pid in pids {
                for tid in rtlab_sys::sched::process_thread_ids(*pid).unwrap_or_default() {
                    if let Ok(Policy::Deadline {
                        runtime_ns,
                        period_ns,
                        ..
                    }) = rtlab_sys::sched::thread_policy(tid)
                    {
                        if period_ns == 0 {
                            continue;
                        }
                        share.held += runtime_ns as f64 / period_ns as f64;
                        share.asked +=
                            runtime_ns.saturating_sub(self.overrun_ns) as f64 / period_ns as f64;
                        share.deadline_threads += 1;
                        held.push(format!("tid {tid}: {runtime_ns}/{period_ns} ns"));
                    }
                }
            }
            if share.held > self.limit + SLACK {
                violations.push(Violation {
                    kind: ViolationKind::OverLimit { uid: *uid },
                    detail: format!(
                        "uid {uid} holds {:.1} % of a CPU in SCHED_DEADLINE as the kernel has it \
                         ({:.1} % without an overrun of {} µs a thread), over its limit of \
                         {:.1} % + {:.0} points: {}",
                        share.held * 100.0,
                        share.asked * 100.0,
                        self.overrun_ns / 1_000,
                        self.limit * 100.0,
                        SLACK * 100.0,
                        held.join(", ")
                    ),
                    seen_at_ns: now,
                });
            }
            shares.push(share);
        }
        (violations, shares)
    }
}
