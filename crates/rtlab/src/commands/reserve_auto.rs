//! `rtlab reserve --auto`: observe a program, reserve what its periodic real-time threads need,
//! and keep the reservation only if the program misses no more deadlines than before.
//!
//! The steps: trace the program for `--observe` ([`super::trace_watch::observe`]); turn its
//! threads into `rtlab_sched::auto_reserve::ObservedThread`s; let `auto_reserve::decide` choose
//! the threads, sizes and backends (the decisions and their reasons live there, pure and tested);
//! ask the daemon for each reservation (so its journal repairs them after a crash, and they end
//! with the threads); trace again for `--observe` and release everything, saying why, if the
//! misses rose. Ctrl-C or an error before the end releases what was granted.

use super::daemon_client::SocketArgs;
use super::trace_watch::{human, is_real_time, observe};
use anyhow::Context as _;
use rtlab_apptrace::analyze::report::TraceReport;
use rtlab_apptrace::record::Target;
use rtlab_core::already_reserved;
use rtlab_core::rpc::{
    Backend, ErrorCode, GrantInfo, ReleaseTarget, ReserveParams, Target as RpcTarget, WireRate,
};
use rtlab_core::Nanos;
use rtlab_sched::auto_reserve::{
    decide, worse_after, AutoBackend, AutoMachine, AutoPlan, AutoRefused, AutoReservation,
    ObservedThread, SIZING_MARGIN, SIZING_PERCENTILE,
};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const AUTO_SCHEMA: &str = "rtlab.reserve-auto/1";

/// How `reserve --auto` observes the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ObserveWith {
    /// The scheduler's events (BPF or tracefs).
    Trace,
    /// The kernel's per-task counters (`rtlab_apptrace::counters`), no tracing.
    Schedstat,
}

/// What `reserve --auto` needs from `reserve`'s flags.
pub struct AutoArgs {
    pub target: Target,
    pub observe: Nanos,
    pub observe_with: ObserveWith,
    /// `--cycle-marker`: the program's own cycle starts, to judge misses by.
    pub cycle_marker: Option<rtlab_apptrace::cycle_marker::CycleMarker>,
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

pub(crate) fn machine() -> anyhow::Result<AutoMachine> {
    let facts =
        rtlab_sched::enforce::MachineFacts::detect().context("reading what the kernel enforces")?;
    let deadline_share_per_cpu = (facts.deadline_limit - facts.fair_server_share).clamp(0.0, 0.9);
    Ok(AutoMachine {
        n_cpus: facts.cpus.len(),
        deadline_overrun: facts.granularity.overrun(),
        granularity_described: facts.granularity.describe(),
        deadline_share_per_cpu,
        deadline_preferred: facts.best_backend() == rtlab_sched::enforce::BackendKind::Deadline,
    })
}

/// The observation's threads as the decision reads them.
pub(crate) fn observed_threads(report: &TraceReport) -> Vec<ObservedThread> {
    report
        .threads
        .iter()
        .map(|row| ObservedThread {
            tid: row.tid as u32,
            name: row.name.clone(),
            pid: row.tgid.map(|pid| pid as u32),
            in_target: row.target,
            real_time: is_real_time(&row.policy),
            policy: row.policy.clone(),
            priority: row.priority,
            activations: row.activations,
            period: row.period_ns.map(Nanos),
            period_jitter: row.period_jitter_ns.map(Nanos),
            cpu_per_cycle_high: Nanos(row.cpu_per_cycle_ns.p99),
            usual_waker: row
                .wakers
                .first()
                .filter(|waker| waker.tid > 0 && waker.tid != row.tid)
                .map(|waker| waker.tid as u32),
        })
        .collect()
}

/// The target's threads (every thread of the process, or of every process named so).
fn target_threads(target: &Target) -> anyhow::Result<Vec<(u32, u32)>> {
    let pids = match target {
        Target::Pid(pid) => vec![*pid],
        Target::Comm(name) => rtlab_sys::proc_thread::process_ids()
            .context("listing /proc")?
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .collect(),
        Target::Command(_) => {
            return Err(crate::exit::input(
                "--observe-with schedstat observes a running program (--pid or --comm)",
            ))
        }
    };
    let mut threads = Vec::new();
    for pid in pids {
        if let Ok(tids) = rtlab_sys::sched::process_thread_ids(pid) {
            threads.extend(tids.into_iter().map(|tid| (pid, tid)));
        }
    }
    if threads.is_empty() {
        return Err(crate::exit::input(format!(
            "{}: no such program running",
            target.describe()
        )));
    }
    Ok(threads)
}

/// Observes the target's real-time threads through the kernel's per-task counters, sampled every
/// millisecond by a SCHED_FIFO thread one priority above the highest of them (so its samples
/// keep time while they run), and describes every thread as the decision reads it: no waker
/// (the counters do not say who woke a thread).
pub(crate) fn observed_by_counters(
    target: &Target,
    duration: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<ObservedThread>> {
    let mut threads = Vec::new();
    for (pid, tid) in target_threads(target)? {
        let Ok(policy) = rtlab_sys::sched::thread_policy(tid) else {
            continue;
        };
        let name = rtlab_sys::proc_thread::thread_comm(tid).unwrap_or_default();
        threads.push((pid, tid, name, policy));
    }
    let real_time: Vec<u32> = threads
        .iter()
        .filter(|(.., policy)| policy.is_realtime())
        .map(|(_, tid, ..)| *tid)
        .collect();
    let highest = threads
        .iter()
        .filter_map(|(.., policy)| match policy {
            rtlab_sys::sched::Policy::Fifo { priority }
            | rtlab_sys::sched::Policy::RoundRobin { priority } => Some(*priority),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let estimates = rtlab_apptrace::counters::observe(
        &real_time,
        duration,
        rtlab_apptrace::counters::SAMPLE_INTERVAL,
        Some((highest + 1).clamp(1, 98)),
        stop,
    )
    .context("sampling the threads' counters (SCHED_FIFO: needs root or CAP_SYS_NICE)")?;
    Ok(threads
        .into_iter()
        .map(|(pid, tid, name, policy)| {
            let estimate = estimates.iter().find(|estimate| estimate.tid == tid);
            ObservedThread {
                tid,
                name,
                pid: Some(pid),
                in_target: true,
                real_time: policy.is_realtime(),
                policy: policy.name().trim_start_matches("SCHED_").to_owned(),
                priority: policy.priority_or_nice(),
                activations: estimate.map_or(0, |estimate| estimate.activations),
                period: estimate.and_then(|estimate| estimate.period),
                period_jitter: estimate.and_then(|estimate| estimate.period_jitter),
                cpu_per_cycle_high: estimate
                    .map_or(Nanos(0), |estimate| estimate.cpu_per_cycle_p99),
                usual_waker: None,
            }
        })
        .collect())
}

/// Deadline misses of the chosen threads: late activations and periods without one (all of the
/// program's when the list was cut short).
fn misses(report: &TraceReport, tids: &[u32]) -> u64 {
    if report.late_activations_total > report.late_activations.len() as u64 {
        return report.late_activations_total;
    }
    report
        .late_activations
        .iter()
        .filter(|late| tids.contains(&(late.thread.tid as u32)))
        .map(|late| late.deadlines_missed.max(1))
        .sum()
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

/// What asking the daemon for one chosen reservation came to.
enum Asked {
    Granted(GrantInfo),
    /// The thread already holds a reservation of this user's that covers what was sized (made
    /// by hand, by an earlier `--auto`, or as the waker of another program's): the wish is met
    /// and it is left as it is. The line says so.
    AlreadyHeld(GrantInfo, String),
    Refused(String),
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

pub fn run(args: AutoArgs) -> anyhow::Result<ExitCode> {
    let quiet = args.json.as_ref().is_some_and(|json| json.is_stdout());
    let say = |line: &str| {
        if !quiet {
            println!("{line}");
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    let machine = machine()?;
    // Connect first, so a missing daemon fails before the observation.
    let mut client = if args.dry_run {
        None
    } else {
        Some(args.socket.connect()?)
    };
    let observe_for = Duration::from_nanos(args.observe.0);
    say(&format!(
        "observing {} for {} …",
        args.target.describe(),
        args.observe
    ));
    let (threads, before) = match args.observe_with {
        ObserveWith::Trace => {
            let before = observe(&args.target, observe_for, args.cycle_marker.as_ref(), &stop)?;
            (observed_threads(&before), Some(before))
        }
        ObserveWith::Schedstat => (
            observed_by_counters(&args.target, observe_for, &stop)?,
            None,
        ),
    };
    if stop.load(Ordering::SeqCst) {
        return Ok(crate::exit::finished(true));
    }
    let mut output = AutoJson {
        target: args.target.describe(),
        observe_ns: args.observe.0,
        sizing: format!(
            "CPU per cycle at {SIZING_PERCENTILE} plus {:.0} %{}",
            SIZING_MARGIN * 100.0,
            match args.observe_with {
                ObserveWith::Trace => "",
                ObserveWith::Schedstat => ", from the kernel's per-task counters",
            }
        ),
        passed_over: Vec::new(),
        reservations: Vec::new(),
        misses_before: 0,
        misses_after: None,
        outcome: "refused",
        reason: None,
        verify: Vec::new(),
        follow: Vec::new(),
    };
    let plan = match decide(&threads, &machine) {
        Ok(plan) => plan,
        Err(refused) => {
            let message = format!("{}: {refused}", args.target.describe());
            if let Some(json) = args.json {
                output.reason = Some(refused.to_string());
                json.commit_json(AUTO_SCHEMA, None, &output)?;
            }
            return Err(match refused {
                AutoRefused::NoPeriodicThread(_) | AutoRefused::NeedsMoreThanACpu { .. } => {
                    crate::exit::input(message)
                }
            });
        }
    };
    let tids: Vec<u32> = plan.reservations.iter().map(|r| r.tid).collect();
    output.misses_before = before.as_ref().map_or(0, |before| misses(before, &tids));
    output.passed_over = plan.passed_over.clone();
    output.reservations = chosen_json(&plan);
    say(&format!(
        "found {} thread(s) to reserve ({}; {}):",
        plan.reservations.len(),
        output.sizing,
        match before {
            Some(_) => format!("{} deadline misses while observed", output.misses_before),
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
    let Some(client) = client.as_mut() else {
        output.outcome = "dry_run";
        if let Some(json) = args.json {
            json.commit_json(AUTO_SCHEMA, None, &output)?;
        }
        say("dry run: nothing reserved");
        return Ok(ExitCode::SUCCESS);
    };
    // Reserve each thread on its own (the best result in issue 26: threads sharing one
    // reservation wait for each other).
    let mut grants: Vec<GrantInfo> = Vec::new();
    // Taken before the reservations make the threads SCHED_DEADLINE.
    let sampler_priorities: Vec<u32> = plan
        .reservations
        .iter()
        .map(|reservation| super::reserve_follow::sampler_priority(reservation.tid))
        .collect();
    let mut refusal = None;
    let mut held_lines = Vec::new();
    for (reservation, json) in plan.reservations.iter().zip(&mut output.reservations) {
        match ask(client, reservation) {
            Asked::Granted(grant) => {
                json.granted_share = Some(granted_share(&grant));
                json.grant = Some(grant.clone());
                grants.push(grant);
            }
            Asked::AlreadyHeld(grant, line) => {
                json.granted_share = Some(granted_share(&grant));
                json.grant = Some(grant);
                json.already_held = true;
                held_lines.push(line);
            }
            Asked::Refused(reason) => {
                refusal = Some(reason);
                break;
            }
        }
    }
    if let Some(reason) = refusal {
        let failures = release_all(client, &grants);
        for reservation in &mut output.reservations {
            reservation.grant = None;
        }
        output.reason = Some(reason.clone());
        if let Some(json) = args.json {
            json.commit_json(AUTO_SCHEMA, None, &output)?;
        }
        for failure in failures {
            eprintln!("rtlab: error: releasing {failure}");
        }
        eprintln!("rtlab: denied: {reason}; nothing is reserved");
        return Ok(ExitCode::from(crate::exit::CHECK_FAILED));
    }
    for line in &held_lines {
        say(line);
    }
    for (reservation, json) in plan.reservations.iter().zip(&output.reservations) {
        let Some(grant) = json.grant.as_ref().filter(|_| !json.already_held) else {
            continue;
        };
        say(&rtlab_render::reserve::auto_reserved(
            &reservation.name,
            reservation.tid,
            grant,
        ));
    }
    if grants.is_empty() {
        output.outcome = "already_reserved";
        output.reason = Some("every chosen thread already holds a reservation".to_owned());
        if let Some(json) = args.json {
            json.commit_json(AUTO_SCHEMA, None, &output)?;
        }
        say("nothing more to reserve: every chosen thread already holds a reservation");
        return Ok(ExitCode::SUCCESS);
    }
    if before.is_none() {
        output.outcome = "kept_unchecked";
        output.reason = Some(
            "observed through the kernel's counters, which do not count misses: not checked"
                .to_owned(),
        );
        if args.follow.is_none() {
            if let Some(json) = args.json {
                json.commit_json(AUTO_SCHEMA, None, &output)?;
            }
            say("kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks); they end with the threads, or `rtlab release --pid PID`");
            return Ok(ExitCode::SUCCESS);
        }
        say("kept without a check: the kernel's counters do not count deadline misses (`--observe-with trace` checks)");
        return follow_and_release(&plan, &sampler_priorities, &machine, args, &stop, output);
    }
    say(&format!(
        "checking: watching {} for {} …",
        args.target.describe(),
        args.observe
    ));
    let after = observe(&args.target, observe_for, args.cycle_marker.as_ref(), &stop);
    let interrupted = stop.load(Ordering::SeqCst);
    let after = match after {
        Ok(after) if !interrupted => after,
        other => {
            let failures = release_all(client, &grants);
            for failure in failures {
                eprintln!("rtlab: error: releasing {failure}");
            }
            output.outcome = "interrupted";
            output.reason = Some(match &other {
                Err(error) => format!("the check failed: {error:#}"),
                Ok(_) => "interrupted before the check ended".into(),
            });
            eprintln!(
                "rtlab: released the reservations: {}",
                output.reason.as_deref().unwrap_or_default()
            );
            if let Some(json) = args.json {
                json.commit_json(AUTO_SCHEMA, None, &output)?;
            }
            return match other {
                Err(error) if !interrupted => Err(error),
                _ => Ok(crate::exit::finished(true)),
            };
        }
    };
    let misses_after = misses(&after, &tids);
    output.misses_after = Some(misses_after);
    if worse_after(output.misses_before, misses_after) {
        let failures = release_all(client, &grants);
        let reason = format!(
            "deadline misses rose from {} to {} in {} with the reservations: rolled back, the \
             program runs as before",
            output.misses_before, misses_after, args.observe
        );
        output.outcome = "rolled_back";
        output.reason = Some(reason.clone());
        if let Some(json) = args.json {
            json.commit_json(AUTO_SCHEMA, None, &output)?;
        }
        for failure in failures {
            eprintln!("rtlab: error: releasing {failure}");
        }
        eprintln!("rtlab: {reason}");
        return Ok(ExitCode::from(crate::exit::CHECK_FAILED));
    }
    output.outcome = "kept";
    say(&format!(
        "verdict: {} deadline misses in {} before, {} with the reservations: kept (they end with \
         the threads, or `rtlab release --pid PID`)",
        output.misses_before, args.observe, misses_after
    ));
    if let Some(duration) = args.verify {
        for grant in &grants {
            let Some(tid) = grant.threads.first().map(|thread| thread.tid) else {
                continue;
            };
            say(&format!(
                "verifying: watching thread {tid} for {duration} …"
            ));
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
    }
    if args.follow.is_some() {
        return follow_and_release(&plan, &sampler_priorities, &machine, args, &stop, output);
    }
    if let Some(json) = args.json {
        json.commit_json(AUTO_SCHEMA, None, &output)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--follow`: follows each reservation this run made (not those found already held) until its
/// thread ends or SIGINT/SIGTERM, then releases them, and writes the JSON with the log.
fn follow_and_release(
    plan: &AutoPlan,
    sampler_priorities: &[u32],
    machine: &AutoMachine,
    args: AutoArgs,
    stop: &AtomicBool,
    mut output: AutoJson,
) -> anyhow::Result<ExitCode> {
    let window = args.follow.expect("called with --follow");
    let quiet = args.json.as_ref().is_some_and(|json| json.is_stdout());
    let followed: Vec<super::reserve_follow::Followed> = plan
        .reservations
        .iter()
        .zip(&output.reservations)
        .zip(sampler_priorities)
        .filter(|((_, json), _)| !json.already_held)
        .filter_map(|((reservation, json), priority)| {
            Some(super::reserve_follow::Followed {
                reservation: reservation.clone(),
                grant: json.grant.clone()?,
                sampler_priority: *priority,
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
    for failure in &failures {
        eprintln!("rtlab: error: releasing {failure}");
    }
    if !quiet && failures.is_empty() {
        println!("released the reservations this run made");
    }
    if let Some(json) = args.json {
        json.commit_json(AUTO_SCHEMA, None, &output)?;
    }
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(anyhow::anyhow!(
            "{} reservation(s) could not be released",
            failures.len()
        ))
    }
}
