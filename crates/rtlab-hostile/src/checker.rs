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
//!
//! # RealtimeKit1's share
//!
//! With a bus, each attacking uid's SCHED_RR threads are metered too: an unprivileged uid has no
//! other way to SCHED_RR than RealtimeKit1 (no RLIMIT_RTPRIO; `unshare -Ur`'s capabilities do not
//! count), so every SCHED_RR thread of its processes is a RealtimeKit1 grant. At each check the
//! kernel's run time of every thread (`sum_exec_runtime`, /proc/TID/schedstat) is read; what a
//! thread ran since the check before counts for its uid when it was SCHED_RR at either check
//! (the attackers' threads spin only while SCHED_RR and look at their policy every millisecond,
//! so before a grant and after a demotion they sleep). The checks run at SCHED_FIFO 21, above
//! every RealtimeKit1 priority: starved by the spinners, a check came after a whole grant, spin
//! and demotion, and saw the thread SCHED_RR at neither reading. Over the daemon's metering window W
//! (`rtkit.user_share_window`) only the part that must lie inside it is counted: of an interval
//! that began before the window, its length outside is taken off (a thread runs on one CPU at a
//! time), so a late check never counts old run time as new.
//!
//! The bound, from the daemon's documented rule (docs/rtkit.md, "The share"): its watchdog looks
//! at every granted thread every 50 ms (`CANARY_TICK`) and demotes a user whose run time over W
//! plus what the registry holds for it is over `rtkit.user_share`; at every look that finds it
//! within, its run over the window ending there is within. Between the last such look and the
//! demotion lies at most one tick and the demotion's own work (measured: the napping spinner is
//! demoted 1.02–1.13 s after its grant, where 20 % of 5 s is used up in 1.04 s), during which
//! each CPU runs at most that long. So a uid's run time over any W, plus the SCHED_DEADLINE
//! bandwidth it holds now, must stay within
//!
//! ```text
//! share + (CPUs × 2 ticks) / W  (+ SLACK when it holds SCHED_DEADLINE bandwidth)
//! ```
//!
//! of one CPU: with 2 CPUs, W = 5 s and the share 20 %, 24 % (and 29 % with bandwidth). The
//! share is the checked limit (0.2), whatever the daemon was given.

use rtlab_sys::sched::Policy;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

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
    /// An attacking uid's SCHED_RR threads (RealtimeKit1's grants) ran more over the daemon's
    /// window, with the SCHED_DEADLINE bandwidth it holds, than its share and the daemon's
    /// demotion latency allow.
    OverShare { uid: u32 },
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

impl ViolationKind {
    /// How long a replay goes on checking after its last request before it says the violation
    /// did not come back: a share is used up by spinning, over seconds.
    pub fn settle_time(&self, share: Option<&ShareRule>) -> Duration {
        match (self, share) {
            (ViolationKind::OverShare { .. }, Some(share)) => share.window + Duration::from_secs(2),
            _ => Duration::from_millis(100),
        }
    }
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
    /// What its SCHED_RR threads ran over the window, as a fraction of one CPU (at least).
    pub rtkit_ran: f64,
}

/// The share a uid's RealtimeKit1 threads are held to (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ShareRule {
    /// The fraction of one CPU, the checked limit.
    pub share: f64,
    /// The daemon's `rtkit.user_share_window`.
    pub window: Duration,
    /// Run time the daemon's demotion may let through over the share: online CPUs × two ticks of
    /// its watchdog (50 ms each).
    pub latency_allowance: Duration,
}

/// The daemon's watchdog tick (`rtkit::canary::CANARY_TICK`).
pub const WATCHDOG_TICK: Duration = Duration::from_millis(50);

impl ShareRule {
    /// The rule for a daemon configured as `settings`, holding each uid to `limit`.
    pub fn of(settings: &crate::daemon::DaemonSettings, limit: f64) -> ShareRule {
        let cpus = rtlab_sys::cpu::online_cpus().map_or(1, |cpus| cpus.len().max(1));
        ShareRule {
            share: limit,
            window: settings.rtkit_user_share_window,
            latency_allowance: WATCHDOG_TICK * 2 * cpus as u32,
        }
    }

    /// The largest fraction of one CPU a uid's run time over the window plus its bandwidth may
    /// come to.
    pub fn bound(&self, holds_bandwidth: bool) -> f64 {
        self.share
            + self.latency_allowance.as_secs_f64() / self.window.as_secs_f64()
            + if holds_bandwidth { SLACK } else { 0.0 }
    }
}

/// A thread's last reading: CLOCK_MONOTONIC just before it, and its run time.
#[derive(Clone, Copy, Debug)]
struct Reading {
    before_ns: u64,
    ran_ns: u64,
    round_robin: bool,
    check: u64,
}

/// What a thread ran between two readings while SCHED_RR at either: all of it after `from_ns`
/// (the clock before the first reading).
#[derive(Clone, Copy, Debug)]
struct Stretch {
    from_ns: u64,
    ran_ns: u64,
    /// The clock after the second reading: the stretch is forgotten once this leaves the window.
    to_ns: u64,
}

/// The run time of one uid's SCHED_RR threads, check by check.
#[derive(Debug, Default)]
struct RunMeter {
    /// By (tid, start time).
    last: BTreeMap<(u32, u64), Reading>,
    stretches: VecDeque<Stretch>,
    check: u64,
    /// The SCHED_RR threads seen at the last check (for reports).
    seen: Vec<String>,
}

impl RunMeter {
    fn start_check(&mut self) {
        self.check += 1;
        self.seen.clear();
    }

    /// Counts what `tid` ran since its last reading when SCHED_RR at either.
    fn read(&mut self, tid: u32, policy: &Policy) {
        let before_ns = rtlab_sys::clock::monotonic_ns();
        let (Ok(start), Ok(ran_ns)) = (
            rtlab_sys::thread_control::thread_start_time(tid),
            rtlab_sys::thread_control::thread_cpu_time_ns(tid),
        ) else {
            return;
        };
        let round_robin = matches!(policy, Policy::RoundRobin { .. });
        let reading = Reading {
            before_ns,
            ran_ns,
            round_robin,
            check: self.check,
        };
        if let Some(earlier) = self.last.insert((tid, start), reading) {
            let ran = ran_ns.saturating_sub(earlier.ran_ns);
            if (earlier.round_robin || round_robin) && ran > 0 {
                self.stretches.push_back(Stretch {
                    from_ns: earlier.before_ns,
                    ran_ns: ran,
                    to_ns: rtlab_sys::clock::monotonic_ns(),
                });
            }
        }
        if round_robin {
            self.seen.push(format!("tid {tid} {policy:?}"));
        }
    }

    /// What must have run inside the `window_ns` ending at `end_ns` (a clock read after every
    /// reading of this check), ns: each stretch less the part of it that lies before the window
    /// (a thread runs on one CPU at a time, so at most that long). Forgets older stretches and the
    /// threads not read at this check.
    fn ran_in_window(&mut self, window_ns: u64, end_ns: u64) -> u64 {
        let since = end_ns.saturating_sub(window_ns);
        let check = self.check;
        self.last.retain(|_, reading| reading.check == check);
        while self
            .stretches
            .front()
            .is_some_and(|stretch| stretch.to_ns <= since)
        {
            self.stretches.pop_front();
        }
        self.stretches
            .iter()
            .map(|stretch| {
                let outside = since.saturating_sub(stretch.from_ns);
                stretch.ran_ns.saturating_sub(outside)
            })
            .sum()
    }
}

/// A process the checker watches, with a name for reports.
#[derive(Clone, Debug)]
pub struct Watched {
    pub role: String,
    pub pid: u32,
}

/// An attacking uid and the processes whose threads count towards its share (its attackers and
/// its bystander).
#[derive(Clone, Debug)]
pub struct UidProcesses {
    pub uid: u32,
    pub pids: Vec<u32>,
}

/// What one check saw.
#[derive(Clone, Debug, Default)]
pub struct CheckFindings {
    /// Every violation seen now.
    pub violations: Vec<Violation>,
    /// Each attacking uid's share now.
    pub shares: Vec<UidShare>,
}

/// The baseline of the victims and what to sum for each attacking uid.
pub struct Checker {
    victims: Vec<VictimThread>,
    /// Each attacking uid and its processes (attackers and bystander).
    uids: Vec<UidProcesses>,
    limit: f64,
    overrun_ns: u64,
    /// With RealtimeKit1: the share, and each uid's meter.
    share: Option<ShareRule>,
    meters: BTreeMap<u32, RunMeter>,
}

impl Checker {
    /// Reads the victims' policies now, before any attack.
    pub fn new(
        victims: &[Watched],
        uids: Vec<UidProcesses>,
        limit: f64,
        share: Option<ShareRule>,
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
            share,
            meters: BTreeMap::new(),
        })
    }

    /// The RealtimeKit1 share the attackers are held to, if the daemon serves it.
    pub fn share_rule(&self) -> Option<&ShareRule> {
        self.share.as_ref()
    }

    pub fn overrun_ns(&self) -> u64 {
        self.overrun_ns
    }

    pub fn victim_threads(&self) -> usize {
        self.victims.len()
    }

    /// One check: every violation seen now, and each uid's share.
    pub fn check(&mut self) -> CheckFindings {
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
        for UidProcesses { uid, pids } in &self.uids {
            let mut share = UidShare {
                uid: *uid,
                ..UidShare::default()
            };
            let mut held = Vec::new();
            let meter = self.meters.entry(*uid).or_default();
            meter.start_check();
            for pid in pids {
                for tid in rtlab_sys::sched::process_thread_ids(*pid).unwrap_or_default() {
                    let policy = rtlab_sys::sched::thread_policy(tid);
                    if let (Some(_), Ok(policy)) = (&self.share, &policy) {
                        meter.read(tid, policy);
                    }
                    if let Ok(Policy::Deadline {
                        runtime_ns,
                        period_ns,
                        ..
                    }) = policy
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
            if let Some(rule) = &self.share {
                let window_ns = rule.window.as_nanos() as u64;
                let ran_ns = meter.ran_in_window(window_ns, rtlab_sys::clock::monotonic_ns());
                share.rtkit_ran = ran_ns as f64 / window_ns as f64;
                let bound = rule.bound(share.deadline_threads > 0);
                if share.rtkit_ran + share.held > bound {
                    violations.push(Violation {
                        kind: ViolationKind::OverShare { uid: *uid },
                        detail: format!(
                            "uid {uid}'s SCHED_RR threads (RealtimeKit1's) ran {:.1} % of a CPU \
                             over the last {:?} ({} ms) and it holds {:.1} % in SCHED_DEADLINE: \
                             over {:.1} % (its share of {:.1} %, {} ms of demotion latency{}); \
                             SCHED_RR now: {}",
                            share.rtkit_ran * 100.0,
                            rule.window,
                            ran_ns / 1_000_000,
                            share.held * 100.0,
                            bound * 100.0,
                            rule.share * 100.0,
                            rule.latency_allowance.as_millis(),
                            if share.deadline_threads > 0 {
                                format!(" and {:.0} points of slack", SLACK * 100.0)
                            } else {
                                String::new()
                            },
                            if meter.seen.is_empty() {
                                "none".to_owned()
                            } else {
                                meter.seen.join(", ")
                            }
                        ),
                        seen_at_ns: now,
                    });
                }
            }
            shares.push(share);
        }
        CheckFindings { violations, shares }
    }
}
