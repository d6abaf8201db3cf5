//! `rtlab reserve --auto`'s output: the lines it prints as its loop goes (the observation, the
//! plan with each choice's reasons, each reservation made, the check, how it ended) and its
//! `--json` (`rtlab.reserve-auto/1`), from rtlab-core's plan (`auto_plan`, which rtlab-sched's
//! `auto_reserve` fills) and the daemon's grants.

use crate::reserve::auto_reserved;
use crate::watch::human;
use rtlab_analysis::supply::VerifiedSupply;
use rtlab_core::auto_plan::{AutoEnding, AutoPlan, Reserved, SIZING_MARGIN, SIZING_PERCENTILE};
use rtlab_core::rpc::GrantInfo;
use rtlab_core::Nanos;
use serde::Serialize;

pub const AUTO_SCHEMA: &str = "rtlab.reserve-auto/1";

/// One chosen reservation in the JSON.
#[derive(Debug, Serialize)]
pub struct ChosenJson {
    pub tid: u32,
    pub name: String,
    pub pid: Option<u32>,
    pub why_thread: String,
    pub period_ns: u64,
    pub need_per_activation_ns: u64,
    pub amount_ns: u64,
    pub window_ns: u64,
    pub periods_per_window: u32,
    pub backend: &'static str,
    pub asked_share: f64,
    pub expected_share: f64,
    pub why_backend: String,
    /// The daemon's grant (null for --dry-run or when refused); with `already_held`, the
    /// reservation the thread held before.
    pub grant: Option<GrantInfo>,
    /// The share of one CPU the grant takes: what the kernel (or the dispatcher) holds, read
    /// back by the daemon (`grant.kernel_held`), else runtime / period asked of the kernel.
    pub granted_share: Option<f64>,
    /// The thread already held a reservation (`grant`), left as it is: the wish was met.
    pub already_held: bool,
}

/// The whole JSON (`rtlab.reserve-auto/1`).
#[derive(Debug, Serialize)]
pub struct AutoJson {
    pub target: String,
    pub observe_ns: u64,
    pub sizing: String,
    pub passed_over: Vec<String>,
    pub reservations: Vec<ChosenJson>,
    pub misses_before: u64,
    pub misses_after: Option<u64>,
    /// `dry_run`, `kept`, `kept_unchecked` (observed with `--observe-with schedstat`, which
    /// counts no misses), `already_reserved` (every chosen thread already held a reservation),
    /// `rolled_back`, `interrupted`, `refused`.
    pub outcome: &'static str,
    pub reason: Option<String>,
    pub verify: Vec<VerifiedSupply>,
    /// `--follow`'s log: each change (what, from → to, why), refusal and end, with the time
    /// since following began.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub follow: Vec<String>,
}

fn chosen_json(plan: &AutoPlan) -> Vec<ChosenJson> {
    plan.reservations
        .iter()
        .map(|reservation| ChosenJson {
            tid: reservation.tid,
            name: reservation.name.clone(),
            pid: reservation.pid,
            why_thread: reservation.why_thread.clone(),
            period_ns: reservation.period.0,
            need_per_activation_ns: reservation.need_per_activation.0,
            amount_ns: reservation.amount.0,
            window_ns: reservation.window.0,
            periods_per_window: reservation.periods_per_window,
            backend: reservation.backend.as_str(),
            asked_share: reservation.need_per_activation.0 as f64 / reservation.period.0 as f64,
            expected_share: reservation.expected_share,
            why_backend: reservation.why_backend.clone(),
            grant: None,
            granted_share: None,
            already_held: false,
        })
        .collect()
}

/// The share of one CPU `grant` takes: what the kernel holds, read back, else runtime / period.
pub fn granted_share(grant: &GrantInfo) -> f64 {
    if let Some(held) = &grant.kernel_held {
        return held.share;
    }
    match grant.deadline_params {
        Some(params) => params.runtime_ns as f64 / params.period_ns.max(1) as f64,
        None => grant.granted.amount_ns as f64 / grant.granted.period_ns.max(1) as f64,
    }
}

impl AutoJson {
    /// The JSON of what the loop did (`plan`, each chosen reservation as `reserved`), its
    /// outcome still to be said (`refused` until then).
    pub fn new(
        target: String,
        observe: Nanos,
        sizing: String,
        plan: Option<&AutoPlan>,
        reserved: &[Reserved],
        misses_before: u64,
    ) -> AutoJson {
        let mut reservations = plan.map(chosen_json).unwrap_or_default();
        for (json, reserved) in reservations.iter_mut().zip(reserved) {
            if let Some(grant) = &reserved.grant {
                json.granted_share = Some(granted_share(grant));
                json.grant = Some(grant.clone());
            }
            json.already_held = reserved.already_held.is_some();
        }
        AutoJson {
            target,
            observe_ns: observe.0,
            sizing,
            passed_over: plan
                .map(|plan| plan.passed_over.clone())
                .unwrap_or_default(),
            reservations,
            misses_before,
            misses_after: None,
            outcome: "refused",
            reason: None,
            verify: Vec::new(),
            follow: Vec::new(),
        }
    }
}

/// The sizing rule in words: "CPU per cycle at p99 plus 20 %", and where the CPU was read
/// (`counters`: the kernel's per-task counters, not a trace).
pub fn sizing(counters: bool) -> String {
    format!(
        "CPU per cycle at {SIZING_PERCENTILE} plus {:.0} %{}",
        SIZING_MARGIN * 100.0,
        if counters {
            ", from the kernel's per-task counters"
        } else {
            ""
        }
    )
}

/// "observing jackd for 3s …"
pub fn observing(target: &str, observe: Nanos) -> String {
    format!("observing {target} for {observe} …")
}

/// "checking: watching jackd for 3s …"
pub fn checking(target: &str, observe: Nanos) -> String {
    format!("checking: watching {target} for {observe} …")
}

/// The plan, a line each: how many threads, each with why and what it is asked, each passed
/// over with why.
pub fn decided(plan: &AutoPlan, sizing: &str, misses_before: Option<u64>) -> Vec<String> {
    let mut lines = vec![format!(
        "found {} thread(s) to reserve ({sizing}; {}):",
        plan.reservations.len(),
        match misses_before {
            Some(misses) => format!("{misses} deadline misses while observed"),
            None => "misses not counted: the counters do not see them".to_owned(),
        }
    )];
    for reservation in &plan.reservations {
        lines.push(format!(
            "  {} ({}): {}; period {}, needs {} per activation\n    → {} of every {} on {}: {}",
            reservation.name,
            reservation.tid,
            reservation.why_thread,
            human(reservation.period.0),
            human(reservation.need_per_activation.0),
            human(reservation.amount.0),
            human(reservation.window.0),
            reservation.backend.as_str(),
            reservation.why_backend
        ));
    }
    for reason in &plan.passed_over {
        lines.push(format!("  passed over: {reason}"));
    }
    lines
}

/// Each chosen thread as asking came out: those found already held first (their lines), then
/// each reservation made.
pub fn reserved(plan: &AutoPlan, reserved: &[Reserved]) -> Vec<String> {
    let mut lines: Vec<String> = reserved
        .iter()
        .filter_map(|reserved| reserved.already_held.clone())
        .collect();
    for (reservation, reserved) in plan.reservations.iter().zip(reserved) {
        if let Some(grant) = reserved
            .grant
            .as_ref()
            .filter(|_| reserved.already_held.is_none())
        {
            lines.push(auto_reserved(&reservation.name, reservation.tid, grant));
        }
    }
    lines
}

/// A chosen thread found already reserved (`grant`), judged (`judgement`) against what was
/// sized for it (`reservation`): the line `reserve --auto` prints.
pub fn already_reserved(
    reservation: &rtlab_core::auto_plan::AutoReservation,
    grant: &GrantInfo,
    judgement: rtlab_core::already_reserved::Judgement,
) -> String {
    let asked = rtlab_core::rpc::WireRate {
        amount_ns: reservation.amount.0,
        period_ns: reservation.window.0,
    };
    crate::reserve::already_reserved(&reservation.name, reservation.tid, grant, &asked, judgement)
}

/// The daemon refused a chosen thread's reservation (`error`, its words).
pub fn daemon_refused(name: &str, tid: u32, error: &dyn std::fmt::Display) -> String {
    format!("the daemon refused {name} ({tid}): {error}")
}

/// A release that failed: "grant 3: …".
pub fn release_failed(grant_id: u64, error: &dyn std::fmt::Display) -> String {
    format!("grant {grant_id}: {error}")
}

pub const DRY_RUN: &str = "dry run: nothing reserved";

/// The reason of `already_reserved`, and the line printed.
pub const ALREADY_RESERVED_REASON: &str = "every chosen thread already holds a reservation";
pub const ALREADY_RESERVED: &str =
    "nothing more to reserve: every chosen thread already holds a reservation";

/// The reason of `kept_unchecked`, and the line printed (`following`: then `--follow` begins).
pub const KEPT_UNCHECKED_REASON: &str =
    "observed through the kernel's counters, which do not count misses: not checked";
pub fn kept_unchecked(following: bool) -> &'static str {
    if following {
        "kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks)"
    } else {
        "kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks); they end with the threads, or `rtlab release --pid PID`"
    }
}

/// Why the reservations were released when the check ended early: its error, or an interrupt.
pub fn check_ended(error: Option<String>) -> String {
    match error {
        Some(error) => format!("the check failed: {error}"),
        None => "interrupted before the check ended".into(),
    }
}

/// Why the reservations were rolled back.
pub fn rolled_back(misses_before: u64, misses_after: u64, observe: Nanos) -> String {
    format!(
        "deadline misses rose from {misses_before} to {misses_after} in {observe} with the \
         reservations: rolled back, the program runs as before"
    )
}

/// The verdict when the reservations are kept.
pub fn kept(misses_before: u64, misses_after: u64, observe: Nanos) -> String {
    format!(
        "verdict: {misses_before} deadline misses in {observe} before, {misses_after} with the reservations: kept (they end with \
         the threads, or `rtlab release --pid PID`)"
    )
}

/// `--follow` begins.
pub fn following(reservations: usize) -> String {
    format!(
        "following {reservations} reservation(s) until their threads end or Ctrl-C; each change is printed, and what was reserved is released at the end"
    )
}

pub const RELEASED: &str = "released the reservations this run made";

/// A release that failed, as printed on stderr.
pub fn release_error(failure: &str) -> String {
    format!("rtlab: error: releasing {failure}")
}

/// How `reserve --auto` exits after its loop ([`conclude`]); the binary maps each to its code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AutoExit {
    /// Exit 0.
    #[default]
    Success,
    /// Stopped by the user (the binary's `exit::finished(true)`).
    Interrupted,
    /// A reservation denied or rolled back (exit 1).
    CheckFailed,
    /// Bad input (exit 2), with its message.
    Input(String),
    /// The check's own error.
    CheckError,
    /// Kept: verify (when `checked`), then follow if `--follow` asked, else write the JSON.
    Kept { checked: bool },
}

/// What to print, in order, around writing the JSON, and how to exit ([`conclude`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoConclusion {
    /// Lines printed before the JSON is written: `(to stderr, line)`.
    pub before: Vec<(bool, String)>,
    /// Whether the JSON is written now (not for [`AutoExit::Kept`], nor when interrupted early).
    pub write_json: bool,
    /// Lines printed after the JSON is written.
    pub after: Vec<(bool, String)>,
    pub exit: AutoExit,
}

/// How `reserve --auto`'s loop ended (`ending`), told: the JSON's outcome, reason and misses
/// after set in `output`, the lines to print (stdout ones left out when `quiet`: the JSON goes to
/// stdout) and how to exit. `following`: `--follow` was asked for.
pub fn conclude(
    ending: &AutoEnding,
    target: &str,
    observe: Nanos,
    following: bool,
    quiet: bool,
    output: &mut AutoJson,
) -> AutoConclusion {
    let say = |line: &str| (!quiet).then(|| (false, line.to_owned()));
    let failures = |failures: &[String]| {
        failures
            .iter()
            .map(|failure| (true, release_error(failure)))
            .collect::<Vec<_>>()
    };
    let mut told = AutoConclusion {
        write_json: true,
        ..AutoConclusion::default()
    };
    match ending {
        AutoEnding::Interrupted => {
            told.write_json = false;
            told.exit = AutoExit::Interrupted;
        }
        AutoEnding::Refused(refused) => {
            output.reason = Some(refused.clone());
            told.exit = AutoExit::Input(format!("{target}: {refused}"));
        }
        AutoEnding::DryRun => {
            output.outcome = "dry_run";
            told.after.extend(say(DRY_RUN));
            told.exit = AutoExit::Success;
        }
        AutoEnding::Denied {
            reason,
            release_failures,
        } => {
            for reservation in &mut output.reservations {
                reservation.grant = None;
            }
            output.reason = Some(reason.clone());
            told.after = failures(release_failures);
            let denied = format!("rtlab: denied: {reason}; nothing is reserved");
            told.after.push((true, denied));
            told.exit = AutoExit::CheckFailed;
        }
        AutoEnding::AlreadyReserved => {
            output.outcome = "already_reserved";
            output.reason = Some(ALREADY_RESERVED_REASON.to_owned());
            told.after.extend(say(ALREADY_RESERVED));
            told.exit = AutoExit::Success;
        }
        AutoEnding::KeptUnchecked => {
            output.outcome = "kept_unchecked";
            output.reason = Some(KEPT_UNCHECKED_REASON.to_owned());
            if following {
                told.write_json = false;
                told.before.extend(say(kept_unchecked(true)));
                told.exit = AutoExit::Kept { checked: false };
            } else {
                told.after.extend(say(kept_unchecked(false)));
                told.exit = AutoExit::Success;
            }
        }
        AutoEnding::CheckEnded {
            error,
            interrupted,
            release_failures,
        } => {
            told.before = failures(release_failures);
            output.outcome = "interrupted";
            let reason = check_ended(error.clone());
            told.before
                .push((true, format!("rtlab: released the reservations: {reason}")));
            output.reason = Some(reason);
            told.exit = match (error, interrupted) {
                (Some(_), false) => AutoExit::CheckError,
                _ => AutoExit::Interrupted,
            };
        }
        AutoEnding::RolledBack {
            misses_after,
            release_failures,
        } => {
            output.misses_after = Some(*misses_after);
            let reason = rolled_back(output.misses_before, *misses_after, observe);
            output.outcome = "rolled_back";
            output.reason = Some(reason.clone());
            told.after = failures(release_failures);
            told.after.push((true, format!("rtlab: {reason}")));
            told.exit = AutoExit::CheckFailed;
        }
        AutoEnding::Kept { misses_after } => {
            output.misses_after = Some(*misses_after);
            output.outcome = "kept";
            told.write_json = false;
            told.before
                .extend(say(&kept(output.misses_before, *misses_after, observe)));
            told.exit = AutoExit::Kept { checked: true };
        }
    }
    told
}
