//! rtkit's rules as pure decisions, so they can be tested without a bus or root: which priority
//! and nice values may be granted, whether a process's RLIMIT_RTTIME is acceptable, whether a
//! user is within its burst, process and thread limits. The answers carry rtkit's D-Bus error
//! names: rtkit-daemon 0.13 answers `org.freedesktop.DBus.Error.AccessDenied` for EPERM, EACCES
//! and EBUSY (a refusal by rule or limit), `org.freedesktop.DBus.Error.Failed` for anything else
//! (EINVAL: a priority outside SCHED_RR's range; ENOENT: no such process or thread), and
//! `org.freedesktop.DBus.Error.InvalidArgs` for a call whose arguments do not parse (the bus
//! library's own answer). Programs match on these names, so they are kept exactly; the messages
//! are rtlab's own, in plain words.

use super::config::RtkitConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Why a request was refused, as rtkit names it on the bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `org.freedesktop.DBus.Error.AccessDenied`: a rule or a limit says no.
    AccessDenied(String),
    /// `org.freedesktop.DBus.Error.Failed`: the request cannot be carried out (bad priority, no
    /// such thread, a system call failed).
    Failed(String),
}

impl Refusal {
    /// The D-Bus error name rtkit answers with.
    pub fn error_name(&self) -> &'static str {
        match self {
            Refusal::AccessDenied(_) => "org.freedesktop.DBus.Error.AccessDenied",
            Refusal::Failed(_) => "org.freedesktop.DBus.Error.Failed",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Refusal::AccessDenied(message) | Refusal::Failed(message) => message,
        }
    }
}

impl From<Refusal> for zbus::fdo::Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::AccessDenied(message) => zbus::fdo::Error::AccessDenied(message),
            Refusal::Failed(message) => zbus::fdo::Error::Failed(message),
        }
    }
}

/// SCHED_RR's priority range (sched_get_priority_min/max).
pub const SCHED_RR_PRIORITIES: std::ops::RangeInclusive<u32> = 1..=99;

/// MakeThreadRealtime's priority: inside SCHED_RR's range (else Failed, rtkit's EINVAL) and at
/// most `MaxRealtimePriority` (else AccessDenied).
pub fn check_priority(priority: u32, config: &RtkitConfig) -> Result<(), Refusal> {
    if !SCHED_RR_PRIORITIES.contains(&priority) {
        return Err(Refusal::Failed(format!(
            "priority {priority} is not a SCHED_RR priority (1 to 99)"
        )));
    }
    if priority > config.max_realtime_priority {
        return Err(Refusal::AccessDenied(format!(
            "priority {priority} is above MaxRealtimePriority {} (rtkit.max_realtime_priority)",
            config.max_realtime_priority
        )));
    }
    Ok(())
}

/// MakeThreadHighPriority's nice value: inside -20..=19 (else Failed) and not below
/// `MinNiceLevel` (else AccessDenied).
pub fn check_nice(nice: i32, config: &RtkitConfig) -> Result<(), Refusal> {
    if !(-20..=19).contains(&nice) {
        return Err(Refusal::Failed(format!(
            "nice level {nice} is not a nice value (-20 to 19)"
        )));
    }
    if nice < config.min_nice_level {
        return Err(Refusal::AccessDenied(format!(
            "nice level {nice} is below MinNiceLevel {} (rtkit.min_nice_level)",
            config.min_nice_level
        )));
    }
    Ok(())
}

/// The target process's RLIMIT_RTTIME hard limit (`None`: unlimited) must be set and at most
/// `RTTimeUSecMax`: then the kernel itself stops a thread that runs away with its real-time.
pub fn check_rttime(
    pid: u32,
    hard_limit: Option<u64>,
    config: &RtkitConfig,
) -> Result<(), Refusal> {
    match hard_limit {
        Some(limit) if limit <= config.rttime_usec_max => Ok(()),
        Some(limit) => Err(Refusal::AccessDenied(format!(
            "process {pid}'s RLIMIT_RTTIME hard limit is {limit} µs, above RTTimeUSecMax {} µs; set it lower (setrlimit, prlimit --rttime=)",
            config.rttime_usec_max
        ))),
        None => Err(Refusal::AccessDenied(format!(
            "process {pid} has no RLIMIT_RTTIME (unlimited); set one of at most {} µs (setrlimit, prlimit --rttime=) so a runaway thread is stopped",
            config.rttime_usec_max
        ))),
    }
}

/// The caller may act only on processes and threads of its own uid (real and effective).
pub fn check_owner(
    caller_uid: u32,
    tid: u32,
    real_uid: u32,
    effective_uid: u32,
) -> Result<(), Refusal> {
    if real_uid == caller_uid && effective_uid == caller_uid {
        Ok(())
    } else {
        // Not whose it is: another user's threads are not named to the unprivileged.
        Err(Refusal::AccessDenied(format!(
            "thread {tid} is another user's, not the caller's (uid {caller_uid})"
        )))
    }
}

/// A user's real-time threads' run time over `rtkit.user_share_window` (`ran`) plus what the
/// registry holds for it (`held`: reservations, Time Constraints), both fractions of one CPU, must
/// stay within `rtkit.user_share`; root is not held to it (as the registry's limit does not hold
/// privileged callers).
pub fn check_share(uid: u32, ran: f64, held: f64, config: &RtkitConfig) -> Result<(), Refusal> {
    if uid == 0 || ran + held <= config.user_share + 1e-9 {
        return Ok(());
    }
    Err(Refusal::AccessDenied(share_exceeded(
        uid, ran, held, config,
    )))
}

/// Why a user is over its share, in words: the start of its refusals and of the daemon's notice.
pub fn share_exceeded(uid: u32, ran: f64, held: f64, config: &RtkitConfig) -> String {
    format!(
        "uid {uid}'s real-time threads ran {:.1} % of a CPU over the last {} and it holds {:.1} % in reservations and Time Constraints: more than its share of {:.1} % (rtkit.user_share)",
        ran * 100.0,
        humantime::format_duration(config.user_share_window),
        held * 100.0,
        config.user_share * 100.0
    )
}

/// One user's burst: rtkit allows `actions_per_burst_max` requests in a burst of
/// `actions_burst` that starts at the first request after the last burst ended.
#[derive(Clone, Copy, Debug)]
struct Burst {
    started: Instant,
    actions: u32,
}

/// A granted thread as the limits count it: its user, its process (pid, start time) and itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Counted {
    pub uid: u32,
    pub pid: u32,
    pub process_start: u64,
    pub tid: u32,
}

/// The per-user limits: users, processes per user, threads per user, requests per burst.
#[derive(Debug, Default)]
pub struct UserLimits {
    bursts: BTreeMap<u32, Burst>,
}

impl UserLimits {
    /// Counts one request of `uid` against its burst; refuses when the burst is used up.
    pub fn admit_action(
        &mut self,
        uid: u32,
        now: Instant,
        config: &RtkitConfig,
    ) -> Result<(), Refusal> {
        let burst = self.bursts.entry(uid).or_insert(Burst {
            started: now,
            actions: 0,
        });
        if now.saturating_duration_since(burst.started) >= config.actions_burst {
            *burst = Burst {
                started: now,
                actions: 0,
            };
        }
        if burst.actions >= config.actions_per_burst_max {
            let left = config
                .actions_burst
                .saturating_sub(now.saturating_duration_since(burst.started));
            return Err(Refusal::AccessDenied(format!(
                "uid {uid} made {} requests within {} (rtkit.actions_per_burst_max); try again in {}",
                burst.actions,
                humantime::format_duration(config.actions_burst),
                humantime::format_duration(Duration::from_secs(left.as_secs() + 1))
            )));
        }
        burst.actions += 1;
        Ok(())
    }

    /// Forgets bursts that ended (so `users_max` counts users seen lately).
    pub fn forget_ended(&mut self, now: Instant, config: &RtkitConfig) {
        self.bursts
            .retain(|_, burst| now.saturating_duration_since(burst.started) < config.actions_burst);
    }
}

/// Whether one more thread (`wanted`) fits the user, process and thread limits given the threads
/// already granted (`granted`, each counted once). A thread already granted always fits (a
/// second request for it changes its priority).
pub fn check_counts(
    granted: &[Counted],
    wanted: Counted,
    config: &RtkitConfig,
) -> Result<(), Refusal> {
    if granted
        .iter()
        .any(|known| known.tid == wanted.tid && known.uid == wanted.uid)
    {
        return Ok(());
    }
    let users: BTreeSet<u32> = granted.iter().map(|known| known.uid).collect();
    if !users.contains(&wanted.uid) && users.len() >= config.users_max {
        return Err(Refusal::AccessDenied(format!(
            "{} users already hold real-time threads (rtkit.users_max)",
            users.len()
        )));
    }
    let mine: Vec<&Counted> = granted
        .iter()
        .filter(|known| known.uid == wanted.uid)
        .collect();
    let processes: BTreeSet<(u32, u64)> = mine
        .iter()
        .map(|known| (known.pid, known.process_start))
        .collect();
    if !processes.contains(&(wanted.pid, wanted.process_start))
        && processes.len() >= config.processes_per_user_max
    {
        return Err(Refusal::AccessDenied(format!(
            "uid {} already has {} processes with real-time threads (rtkit.processes_per_user_max)",
            wanted.uid,
            processes.len()
        )));
    }
    if mine.len() >= config.threads_per_user_max {
        return Err(Refusal::AccessDenied(format!(
            "uid {} already has {} real-time threads (rtkit.threads_per_user_max)",
            wanted.uid,
            mine.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RtkitConfig {
        RtkitConfig {
            processes_per_user_max: 2,
            threads_per_user_max: 3,
            users_max: 2,
            actions_per_burst_max: 2,
            ..RtkitConfig::default()
        }
    }

    #[test]
    fn priorities_outside_rr_fail_and_above_the_maximum_are_denied() {
        let config = config();
        assert!(check_priority(20, &config).is_ok());
        assert!(matches!(
            check_priority(0, &config),
            Err(Refusal::Failed(_))
        ));
        assert!(matches!(
            check_priority(100, &config),
            Err(Refusal::Failed(_))
        ));
        let denied = check_priority(21, &config).unwrap_err();
        assert_eq!(
            denied.error_name(),
            "org.freedesktop.DBus.Error.AccessDenied"
        );
        assert!(
            denied.message().contains("MaxRealtimePriority 20"),
            "{denied:?}"
        );
        assert!(check_nice(-15, &config).is_ok());
        assert!(matches!(
            check_nice(-16, &config),
            Err(Refusal::AccessDenied(_))
        ));
        assert!(matches!(check_nice(20, &config), Err(Refusal::Failed(_))));
    }

    #[test]
    fn rttime_must_be_set_and_small() {
        let config = config();
        assert!(check_rttime(1, Some(200_000), &config).is_ok());
        assert!(matches!(
            check_rttime(1, Some(200_001), &config),
            Err(Refusal::AccessDenied(_))
        ));
        let unlimited = check_rttime(7, None, &config).unwrap_err();
        assert!(unlimited
            .message()
            .contains("process 7 has no RLIMIT_RTTIME"));
    }

    #[test]
    fn only_the_owner_may_ask() {
        assert!(check_owner(1000, 5, 1000, 1000).is_ok());
        assert!(check_owner(1000, 5, 65534, 65534).is_err());
        assert!(check_owner(1000, 5, 1000, 0).is_err());
    }

    #[test]
    fn a_user_over_its_share_is_denied_and_told_why_and_root_is_not_held_to_it() {
        let config = config();
        assert!(check_share(1000, 0.1, 0.1, &config).is_ok());
        let denied = check_share(1000, 0.15, 0.1, &config).unwrap_err();
        assert_eq!(
            denied.error_name(),
            "org.freedesktop.DBus.Error.AccessDenied"
        );
        assert!(
            denied
                .message()
                .contains("ran 15.0 % of a CPU over the last 5s")
                && denied.message().contains("rtkit.user_share"),
            "{denied:?}"
        );
        assert!(check_share(0, 0.9, 0.0, &config).is_ok());
    }

    #[test]
    fn bursts_allow_a_count_then_refuse_until_the_burst_ends() {
        let config = config();
        let mut limits = UserLimits::default();
        let start = Instant::now();
        assert!(limits.admit_action(1, start, &config).is_ok());
        assert!(limits.admit_action(1, start, &config).is_ok());
        assert!(limits.admit_action(1, start, &config).is_err());
        assert!(limits.admit_action(2, start, &config).is_ok());
        let later = start + config.actions_burst;
        assert!(limits.admit_action(1, later, &config).is_ok());
    }

    #[test]
    fn users_processes_and_threads_are_counted() {
        let config = config();
        let thread = |uid, pid, tid| Counted {
            uid,
            pid,
            process_start: u64::from(pid) * 10,
            tid,
        };
        let granted = vec![thread(1, 10, 11), thread(1, 10, 12), thread(1, 20, 21)];
        // A third process of uid 1 is over processes_per_user_max = 2.
        assert!(check_counts(&granted, thread(1, 30, 31), &config).is_err());
        // A fourth thread of uid 1 is over threads_per_user_max = 3, even in a known process.
        assert!(check_counts(&granted, thread(1, 10, 13), &config).is_err());
        // A thread already granted may ask again.
        assert!(check_counts(&granted, thread(1, 10, 12), &config).is_ok());
        let two_users = vec![thread(1, 10, 11), thread(2, 40, 41)];
        assert!(check_counts(&two_users, thread(3, 50, 51), &config).is_err());
        assert!(check_counts(&two_users, thread(2, 40, 42), &config).is_ok());
    }
}
