//! `rtlab reserve --auto`: observe a program, reserve what its periodic real-time threads need,
//! and keep the reservation only if the program misses no more deadlines than before.
//!
//! The loop (observe, decide, reserve, check, roll back) is `rtlab_sched::auto_reserve_run`'s,
//! the decisions `rtlab_sched::auto_reserve`'s, the observation rtlab-trace's
//! (`watch::observe`, a trace; `auto_observe`, its threads as the decisions read them, or the
//! kernel's counters). This module holds the flags, the printing, the JSON, and the loop's
//! [`AutoReserveIo`]: the observation chosen by `--observe-with` and the daemon asked for each
//! reservation (so its journal repairs them after a crash, and they end with the threads).
//! Ctrl-C or an error before the end releases what was granted.

use super::daemon_client::SocketArgs;
use anyhow::Context as _;
use rtlab_core::already_reserved;
use rtlab_core::rpc::{
    Backend, ErrorCode, GrantInfo, ReleaseTarget, ReserveParams, Target as RpcTarget, WireRate,
};
use rtlab_core::Nanos;
use rtlab_render::watch::human;
use rtlab_sched::auto_reserve::{
    AutoBackend, AutoMachine, AutoPlan, AutoReservation, ObservedThread, SIZING_MARGIN,
    SIZING_PERCENTILE,
};
use rtlab_sched::auto_reserve_run::{self, Asked, AutoEnd, AutoReserveIo, AutoRun, AutoStep};
use rtlab_trace::analyze::report::TraceReport;
use rtlab_trace::auto_observe::{self, CountersError};
use rtlab_trace::record::Target;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub const AUTO_SCHEMA: &str = "rtlab.reserve-auto/1";

/// How `reserve --auto` observes the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ObserveWith {
    /// The scheduler's events (BPF or tracefs).
    Trace,
    /// The kernel's per-task counters (`rtlab_trace::counters`), no tracing.
    Schedstat,
}

/// What `reserve --auto` needs from `reserve`'s flags.
pub struct AutoArgs {
    pub target: Target,
    pub observe: Nanos,
    pub observe_with: ObserveWith,
    /// `--cycle-marker`: the program's own cycle starts, to judge misses by.
    pub cycle_marker: Option<rtlab_trace::cycle_marker::CycleMarker>,
    pub dry_run: bool,
    pub verify: Option<Nanos>,
    /// `--follow`: after reserving, follow each reservation made with windows this long.
    pub follow: Option<Nanos>,
    pub json: Option<rtlab_store::output::PendingOutput>,
    pub socket: SocketArgs,
}

#[derive(Debug, Serialize)]
struct ChosenJson {
    tid: u32,
    name: String,
    pid: Option<u32>,
    why_thread: String,
    period_ns: u64,
    need_per_activation_ns: u64,
    amount_ns: u64,
    window_ns: u64,
    periods_per_window: u32,
    backend: &'static str,
    asked_share: f64,
    expected_share: f64,
    why_backend: String,
    /// The daemon's grant (null for --dry-run or when refused); with `already_held`, the
    /// reservation the thread held before.
    grant: Option<GrantInfo>,
    /// The share of one CPU the grant takes: what the kernel (or the dispatcher) holds, read
    /// back by the daemon (`grant.kernel_held`), else runtime / period asked of the kernel.
    granted_share: Option<f64>,
    /// The thread already held a reservation (`grant`), left as it is: the wish was met.
    already_held: bool,
}

#[derive(Debug, Serialize)]
struct AutoJson {
    target: String,
    observe_ns: u64,
    sizing: String,
    passed_over: Vec<String>,
    reservations: Vec<ChosenJson>,
    misses_before: u64,
    misses_after: Option<u64>,
    /// `dry_run`, `kept`, `kept_unchecked` (observed with `--observe-with schedstat`, which
    /// counts no misses), `already_reserved` (every chosen thread already held a reservation),
    /// `rolled_back`, `interrupted`, `refused`.
    outcome: &'static str,
    reason: Option<String>,
    verify: Vec<rtlab_session::supply::VerifiedSupply>,
    /// `--follow`'s log: each change (what, from → to, why), refusal and end, with the time
    /// since following began.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    follow: Vec<String>,
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

fn granted_share(grant: &GrantInfo) -> f64 {
    if let Some(held) = &grant.kernel_held {
        return held.share;
    }
    match grant.deadline_params {
        Some(params) => params.runtime_ns as f64 / params.period_ns.max(1) as f64,
        None => grant.granted.amount_ns as f64 / grant.granted.period_ns.max(1) as f64,
    }
}

fn ask(client: &mut rtlab_client::Client, reservation: &AutoReservation) -> Asked {
    let backend = match reservation.backend {
        AutoBackend::Deadline => Backend::Deadline,
        AutoBackend::Dispatch => Backend::Dispatch,
    };
    let refused = |error: &dyn std::fmt::Display| {
        Asked::Refused(format!(
            "the daemon refused {} ({}): {error}",
            reservation.name, reservation.tid
        ))
    };
    // Reclaiming: "at least this much in every window", so a thread whose work grows beyond
    // its size runs on the bandwidth no reservation uses rather than being throttled (a root
    // request; the daemon makes another user's without it).
    match client.reserve_with(ReserveParams {
        target: RpcTarget::Thread {
            tid: reservation.tid,
        },
        amount_ns: reservation.amount.0,
        period_ns: reservation.window.0,
        backend: Some(backend),
        reclaim: true,
    }) {
        Ok(grant) => Asked::Granted(grant),
        Err(error) if error.code() == Some(ErrorCode::AlreadyReserved) => {
            let Some(grant) = client
                .list()
                .ok()
                .and_then(|list| already_reserved::holding(&list.grants, reservation.tid).cloned())
            else {
                return refused(&error);
            };
            let asked = WireRate {
                amount_ns: reservation.amount.0,
                period_ns: reservation.window.0,
            };
            let judgement = already_reserved::judge(
                &grant,
                rtlab_sys::users::current_uid(),
                already_reserved::Wish::AtLeast {
                    amount_ns: asked.amount_ns,
                    window_ns: asked.period_ns,
                    per_activation_ns: reservation.amount.0
                        / u64::from(reservation.periods_per_window).max(1),
                },
            );
            let line = rtlab_render::reserve::already_reserved(
                &reservation.name,
                reservation.tid,
                &grant,
                &asked,
                judgement,
            );
            match judgement {
                already_reserved::Judgement::Met(_) => Asked::AlreadyHeld(grant, line),
                _ => Asked::Refused(line),
            }
        }
        Err(error) => refused(&error),
    }
}

fn release_all(client: &mut rtlab_client::Client, grants: &[GrantInfo]) -> Vec<String> {
    let mut failures = Vec::new();
    for grant in grants {
        if let Err(error) = client.release(ReleaseTarget::Grant {
            grant_id: grant.grant_id,
        }) {
            failures.push(format!("grant {}: {error}", grant.grant_id));
        }
    }
    failures
}

/// What the kernel enforces could not be read.
pub(crate) fn machine_error(error: rtlab_sched::enforce::EnforceError) -> anyhow::Error {
    anyhow::Error::new(error).context("reading what the kernel enforces")
}

/// The counters' errors as exit codes: a program not running is the user's (2).
pub(crate) fn counters_error(error: CountersError) -> anyhow::Error {
    match error {
        CountersError::NotRunning => crate::exit::input(
            "--observe-with schedstat observes a running program (--pid or --comm)",
        ),
        CountersError::NoSuchProgram(_) => crate::exit::input(error),
        other => anyhow::Error::new(other),
    }
}

/// The program observed as `--observe-with` says, and the daemon asked.
struct ProgramAndDaemon<'a> {
    target: &'a Target,
    observe: Duration,
    observe_with: ObserveWith,
    cycle_marker: Option<&'a rtlab_trace::cycle_marker::CycleMarker>,
    client: Option<rtlab_client::Client>,
    /// The last trace (none with the counters, which count no misses).
    last: Option<TraceReport>,
}

impl AutoReserveIo for ProgramAndDaemon<'_> {
    type Error = anyhow::Error;

    fn observe(&mut self, stop: &AtomicBool) -> anyhow::Result<Vec<ObservedThread>> {
        match self.observe_with {
            ObserveWith::Trace => {
                let report = super::trace_markers::observe(
                    self.target,
                    self.observe,
                    self.cycle_marker,
                    stop,
                )?;
                let threads = auto_observe::observed_threads(&report);
                self.last = Some(report);
                Ok(threads)
            }
            ObserveWith::Schedstat => {
                auto_observe::observed_by_counters(self.target, self.observe, stop)
                    .map_err(counters_error)
            }
        }
    }

    fn misses(&self, tids: &[u32]) -> Option<u64> {
        self.last
            .as_ref()
            .map(|report| auto_observe::misses(report, tids))
    }

    fn reserve(&mut self, reservation: &AutoReservation) -> Asked {
        ask(self.client.as_mut().expect("not a dry run"), reservation)
    }

    fn release(&mut self, grants: &[GrantInfo]) -> Vec<String> {
        release_all(self.client.as_mut().expect("not a dry run"), grants)
    }
}

/// Prints what the loop does as it does it (nothing when the JSON goes to stdout).
fn print_step(args: &AutoArgs, sizing: &str, step: AutoStep<'_>) {
    let say = |line: &str| {
        if !args.json.as_ref().is_some_and(|json| json.is_stdout()) {
            println!("{line}");
        }
    };
    match step {
        AutoStep::Observing => say(&format!(
            "observing {} for {} …",
            args.target.describe(),
            args.observe
        )),
        AutoStep::Decided {
            plan,
            misses_before,
        } => {
            say(&format!(
                "found {} thread(s) to reserve ({sizing}; {}):",
                plan.reservations.len(),
                match misses_before {
                    Some(misses) => format!("{misses} deadline misses while observed"),
                    None => "misses not counted: the counters do not see them".to_owned(),
                }
            ));
            for reservation in &plan.reservations {
                say(&format!(
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
                say(&format!("  passed over: {reason}"));
            }
        }
        AutoStep::Reserved { plan, reserved } => {
            for line in reserved.iter().filter_map(|r| r.already_held.as_ref()) {
                say(line);
            }
            for (reservation, reserved) in plan.reservations.iter().zip(reserved) {
                let Some(grant) = reserved
                    .grant
                    .as_ref()
                    .filter(|_| reserved.already_held.is_none())
                else {
                    continue;
                };
                say(&rtlab_render::reserve::auto_reserved(
                    &reservation.name,
                    reservation.tid,
                    grant,
                ));
            }
        }
        AutoStep::Checking => say(&format!(
            "checking: watching {} for {} …",
            args.target.describe(),
            args.observe
        )),
    }
}

pub fn run(mut args: AutoArgs) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    let machine = rtlab_sched::auto_machine::detect().map_err(machine_error)?;
    // Connect first, so a missing daemon fails before the observation.
    let client = if args.dry_run {
        None
    } else {
        Some(args.socket.connect()?)
    };
    let sizing = format!(
        "CPU per cycle at {SIZING_PERCENTILE} plus {:.0} %{}",
        SIZING_MARGIN * 100.0,
        match args.observe_with {
            ObserveWith::Trace => "",
            ObserveWith::Schedstat => ", from the kernel's per-task counters",
        }
    );
    let mut io = ProgramAndDaemon {
        target: &args.target,
        observe: Duration::from_nanos(args.observe.0),
        observe_with: args.observe_with,
        cycle_marker: args.cycle_marker.as_ref(),
        client,
        last: None,
    };
    let ran = auto_reserve_run::run(&mut io, &machine, args.dry_run, &stop, &mut |step| {
        print_step(&args, &sizing, step)
    })?;
    let output = AutoJson::of(&args, sizing, &ran);
    let json = args.json.take();
    conclude(ran, &args, json, output, &machine, &stop)
}

impl AutoJson {
    /// The JSON of what the loop did, its outcome still to be said.
    fn of(args: &AutoArgs, sizing: String, ran: &AutoRun<anyhow::Error>) -> AutoJson {
        let mut reservations = ran.plan.as_ref().map(chosen_json).unwrap_or_default();
        for (json, reserved) in reservations.iter_mut().zip(&ran.reserved) {
            if let Some(grant) = &reserved.grant {
                json.granted_share = Some(granted_share(grant));
                json.grant = Some(grant.clone());
            }
            json.already_held = reserved.already_held.is_some();
        }
        AutoJson {
            target: args.target.describe(),
            observe_ns: args.observe.0,
            sizing,
            passed_over: ran
                .plan
                .as_ref()
                .map(|plan| plan.passed_over.clone())
                .unwrap_or_default(),
            reservations,
            misses_before: ran.misses_before,
            misses_after: None,
            outcome: "refused",
            reason: None,
            verify: Vec::new(),
            follow: Vec::new(),
        }
    }
}

/// Writes the JSON, if asked for.
fn commit(
    json: Option<rtlab_store::output::PendingOutput>,
    output: &AutoJson,
) -> anyhow::Result<()> {
    if let Some(json) = json {
        json.commit_json(AUTO_SCHEMA, None, output)?;
    }
    Ok(())
}

fn print_failures(failures: &[String]) {
    for failure in failures {
        eprintln!("rtlab: error: releasing {failure}");
    }
}

/// Says how the loop ended, writes the JSON, and verifies and follows what was kept.
fn conclude(
    ran: AutoRun<anyhow::Error>,
    args: &AutoArgs,
    json: Option<rtlab_store::output::PendingOutput>,
    mut output: AutoJson,
    machine: &AutoMachine,
    stop: &AtomicBool,
) -> anyhow::Result<ExitCode> {
    let quiet = json.as_ref().is_some_and(|json| json.is_stdout());
    let say = |line: &str| {
        if !quiet {
            println!("{line}");
        }
    };
    match ran.end {
        AutoEnd::Interrupted => Ok(crate::exit::finished(true)),
        AutoEnd::Refused(refused) => {
            let message = format!("{}: {refused}", args.target.describe());
            output.reason = Some(refused.to_string());
            commit(json, &output)?;
            Err(crate::exit::input(message))
        }
        AutoEnd::DryRun => {
            output.outcome = "dry_run";
            commit(json, &output)?;
            say("dry run: nothing reserved");
            Ok(ExitCode::SUCCESS)
        }
        AutoEnd::Denied {
            reason,
            release_failures,
        } => {
            for reservation in &mut output.reservations {
                reservation.grant = None;
            }
            output.reason = Some(reason.clone());
            commit(json, &output)?;
            print_failures(&release_failures);
            eprintln!("rtlab: denied: {reason}; nothing is reserved");
            Ok(ExitCode::from(crate::exit::CHECK_FAILED))
        }
        AutoEnd::AlreadyReserved => {
            output.outcome = "already_reserved";
            output.reason = Some("every chosen thread already holds a reservation".to_owned());
            commit(json, &output)?;
            say("nothing more to reserve: every chosen thread already holds a reservation");
            Ok(ExitCode::SUCCESS)
        }
        AutoEnd::KeptUnchecked => {
            output.outcome = "kept_unchecked";
            output.reason = Some(
                "observed through the kernel's counters, which do not count misses: not checked"
                    .to_owned(),
            );
            if args.follow.is_none() {
                commit(json, &output)?;
                say("kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks); they end with the threads, or `rtlab release --pid PID`");
                return Ok(ExitCode::SUCCESS);
            }
            say("kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks)");
            follow_and_release(&ran, machine, args, json, stop, output)
        }
        AutoEnd::CheckEnded {
            ref error,
            ref release_failures,
            ..
        } => {
            print_failures(release_failures);
            output.outcome = "interrupted";
            output.reason = Some(match error {
                Some(error) => format!("the check failed: {error:#}"),
                None => "interrupted before the check ended".into(),
            });
            eprintln!(
                "rtlab: released the reservations: {}",
                output.reason.as_deref().unwrap_or_default()
            );
            commit(json, &output)?;
            match ran.end {
                AutoEnd::CheckEnded {
                    error: Some(error),
                    interrupted: false,
                    ..
                } => Err(error),
                _ => Ok(crate::exit::finished(true)),
            }
        }
        AutoEnd::RolledBack {
            misses_after,
            ref release_failures,
        } => {
            output.misses_after = Some(misses_after);
            let reason = format!(
                "deadline misses rose from {} to {} in {} with the reservations: rolled back, the \
                 program runs as before",
                output.misses_before, misses_after, args.observe
            );
            output.outcome = "rolled_back";
            output.reason = Some(reason.clone());
            commit(json, &output)?;
            print_failures(release_failures);
            eprintln!("rtlab: {reason}");
            Ok(ExitCode::from(crate::exit::CHECK_FAILED))
        }
        AutoEnd::Kept { misses_after } => {
            output.misses_after = Some(misses_after);
            output.outcome = "kept";
            say(&format!(
                "verdict: {} deadline misses in {} before, {} with the reservations: kept (they end with \
                 the threads, or `rtlab release --pid PID`)",
                output.misses_before, args.observe, misses_after
            ));
            if let Some(duration) = args.verify {
                verify(&ran.grants, duration, quiet, &mut output)?;
            }
            if args.follow.is_some() {
                return follow_and_release(&ran, machine, args, json, stop, output);
            }
            commit(json, &output)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `--verify`: what each granted thread received, printed and kept for the JSON.
fn verify(
    grants: &[GrantInfo],
    duration: Nanos,
    quiet: bool,
    output: &mut AutoJson,
) -> anyhow::Result<()> {
    for grant in grants {
        let Some(tid) = grant.threads.first().map(|thread| thread.tid) else {
            continue;
        };
        if !quiet {
            println!("verifying: watching thread {tid} for {duration} …");
        }
        let verified = rtlab_session::supply::verify_supply(
            tid,
            Nanos(grant.requested.amount_ns),
            Nanos(grant.requested.period_ns),
            duration,
        )
        .context("--verify")?;
        if !quiet {
            print!(
                "{}",
                rtlab_render::reserve::verified(
                    &verified,
                    Nanos(grant.requested.amount_ns),
                    Nanos(grant.requested.period_ns)
                )
            );
        }
        output.verify.push(verified);
    }
    Ok(())
}

/// `--follow`: follows each reservation this run made (not those found already held) until its
/// thread ends or SIGINT/SIGTERM, then releases them, and writes the JSON with the log.
fn follow_and_release(
    ran: &AutoRun<anyhow::Error>,
    machine: &AutoMachine,
    args: &AutoArgs,
    json: Option<rtlab_store::output::PendingOutput>,
    stop: &AtomicBool,
    mut output: AutoJson,
) -> anyhow::Result<ExitCode> {
    let window = args.follow.expect("called with --follow");
    let quiet = json.as_ref().is_some_and(|json| json.is_stdout());
    let plan: &AutoPlan = ran.plan.as_ref().expect("followed after a plan");
    let followed: Vec<super::reserve_follow::Followed> = plan
        .reservations
        .iter()
        .zip(&ran.reserved)
        .filter(|(_, reserved)| reserved.already_held.is_none())
        .filter_map(|(reservation, reserved)| {
            Some(super::reserve_follow::Followed {
                reservation: reservation.clone(),
                grant: reserved.grant.clone()?,
                sampler_priority: reserved.sampler_priority,
            })
        })
        .collect();
    if !quiet {
        println!(
            "following {} reservation(s) until their threads end or Ctrl-C; each change is printed, and what was reserved is released at the end",
            followed.len()
        );
    }
    let (log, failures) =
        super::reserve_follow::follow_all(&followed, machine, window, &args.socket, stop, quiet);
    output.follow = log;
    print_failures(&failures);
    if !quiet && failures.is_empty() {
        println!("released the reservations this run made");
    }
    commit(json, &output)?;
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(anyhow::anyhow!(
            "{} reservation(s) could not be released",
            failures.len()
        ))
    }
}
