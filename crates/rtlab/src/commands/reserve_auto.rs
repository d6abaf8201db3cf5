//! `rtlab reserve --auto`: observe a program, reserve what its periodic real-time threads need,
//! and keep the reservation only if the program misses no more deadlines than before.
//!
//! The loop (observe, decide, reserve, check, roll back) is `rtlab_sched::auto_reserve_run`'s,
//! the decisions `rtlab_sched::auto_reserve`'s, the observation rtlab-trace's
//! (`watch::observe`, a trace; `auto_observe`, its threads as the decisions read them, or the
//! kernel's counters), asking the daemon and judging a thread found already reserved
//! rtlab-client's (`Client::reserve_thread`), the lines printed and the JSON rtlab-render's
//! (`reserve_auto`). This module holds the flags, the printing and exit codes, and the loop's
//! [`AutoReserveIo`], which joins those: the observation chosen by `--observe-with` and the
//! daemon asked for each reservation (so its journal repairs them after a crash, and they end
//! with the threads). Ctrl-C or an error before the end releases what was granted.

use super::daemon_client::SocketArgs;
use anyhow::Context as _;
use rtlab_client::ThreadReservation;
use rtlab_core::already_reserved::Judgement;
use rtlab_core::rpc::GrantInfo;
use rtlab_core::Nanos;
use rtlab_render::reserve_auto::{self as render, AutoExit, AutoJson, AUTO_SCHEMA};
use rtlab_sched::auto_reserve::{AutoMachine, AutoReservation, ObservedThread};
use rtlab_sched::auto_reserve_run::{self, Asked, AutoEnd, AutoReserveIo, AutoRun, AutoStep};
use rtlab_trace::auto_observe::{CountersError, Observation, ObservationError};
use rtlab_trace::record::Target;
use rtlab_trace::watch::ObserveError;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

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

/// Asks the daemon for one chosen reservation; a thread found already reserved is said in a line.
fn ask(client: &mut rtlab_client::Client, reservation: &AutoReservation) -> Asked {
    match client.reserve_sized(reservation, rtlab_sys::users::current_uid()) {
        ThreadReservation::Granted(grant) => Asked::Granted(grant),
        ThreadReservation::AlreadyReserved { grant, judgement } => {
            let line = render::already_reserved(reservation, &grant, judgement);
            match judgement {
                Judgement::Met(_) => Asked::AlreadyHeld(grant, line),
                _ => Asked::Refused(line),
            }
        }
        ThreadReservation::Refused(error) => Asked::Refused(render::daemon_refused(
            &reservation.name,
            reservation.tid,
            &error,
        )),
    }
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
    observation: Observation<'a>,
    client: Option<rtlab_client::Client>,
}

impl AutoReserveIo for ProgramAndDaemon<'_> {
    type Error = anyhow::Error;

    fn observe(&mut self, stop: &AtomicBool) -> anyhow::Result<Vec<ObservedThread>> {
        self.observation.observe(stop).map_err(|error| match error {
            ObservationError::Trace(ObserveError::Record(error)) => {
                super::trace_markers::record_error(error)
            }
            ObservationError::Trace(other) => anyhow::Error::new(other),
            ObservationError::Counters(error) => counters_error(error),
        })
    }

    fn misses(&self, tids: &[u32]) -> Option<u64> {
        self.observation.misses(tids)
    }

    fn reserve(&mut self, reservation: &AutoReservation) -> Asked {
        ask(self.client.as_mut().expect("not a dry run"), reservation)
    }

    fn release(&mut self, grants: &[GrantInfo]) -> Vec<String> {
        let client = self.client.as_mut().expect("not a dry run");
        let failures = client.release_grants(grants);
        failures
            .iter()
            .map(|(grant_id, error)| render::release_failed(*grant_id, error))
            .collect()
    }
}

/// Prints what the loop does as it does it (nothing when the JSON goes to stdout).
fn print_step(args: &AutoArgs, sizing: &str, step: AutoStep<'_>) {
    if args.json.as_ref().is_some_and(|json| json.is_stdout()) {
        return;
    }
    let target = args.target.describe();
    let lines = match step {
        AutoStep::Observing => vec![render::observing(&target, args.observe)],
        AutoStep::Decided {
            plan,
            misses_before,
        } => render::decided(plan, sizing, misses_before),
        AutoStep::Reserved { plan, reserved } => render::reserved(plan, reserved),
        AutoStep::Checking => vec![render::checking(&target, args.observe)],
    };
    for line in lines {
        println!("{line}");
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
    let sizing = render::sizing(args.observe_with == ObserveWith::Schedstat);
    let observation = Observation {
        target: &args.target,
        duration: Duration::from_nanos(args.observe.0),
        cycle_marker: args.cycle_marker.as_ref(),
        counters: args.observe_with == ObserveWith::Schedstat,
        last: None,
    };
    let mut io = ProgramAndDaemon {
        observation,
        client,
    };
    let ran = auto_reserve_run::run(&mut io, &machine, args.dry_run, &stop, &mut |step| {
        print_step(&args, &sizing, step)
    })?;
    let output = AutoJson::new(
        args.target.describe(),
        args.observe,
        sizing,
        ran.plan.as_ref(),
        &ran.reserved,
        ran.misses_before,
    );
    let json = args.json.take();
    conclude(ran, &args, json, output, &machine, &stop)
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
        eprintln!("{}", render::release_error(failure));
    }
}

fn print(lines: &[(bool, String)]) {
    for (to_stderr, line) in lines {
        if *to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
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
    let (target, following) = (args.target.describe(), args.follow.is_some());
    let ending = ran.end.ending();
    let told = render::conclude(
        &ending,
        &target,
        args.observe,
        following,
        quiet,
        &mut output,
    );
    print(&told.before);
    if told.write_json {
        commit(json, &output)?;
        print(&told.after);
        return match told.exit {
            AutoExit::Success => Ok(ExitCode::SUCCESS),
            AutoExit::Interrupted => Ok(crate::exit::finished(true)),
            AutoExit::CheckFailed => Ok(ExitCode::from(crate::exit::CHECK_FAILED)),
            AutoExit::Input(message) => Err(crate::exit::input(message)),
            AutoExit::CheckError | AutoExit::Kept { .. } => match ran.end {
                AutoEnd::CheckEnded {
                    error: Some(error), ..
                } => Err(error),
                _ => unreachable!("only a check's error ends with it"),
            },
        };
    }
    if let (AutoExit::Kept { checked: true }, Some(duration)) = (&told.exit, args.verify) {
        verify(&ran.grants, duration, quiet, &mut output)?;
    }
    match told.exit {
        AutoExit::Kept { .. } if following => {
            follow_and_release(&ran, machine, args, json, stop, output)
        }
        AutoExit::Kept { .. } => commit(json, &output).map(|()| ExitCode::SUCCESS),
        _ => Ok(crate::exit::finished(true)),
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
        let (amount, period) = (grant.requested.amount_ns, grant.requested.period_ns);
        let verified =
            super::daemon_client::verify(tid, Nanos(amount), Nanos(period), duration, quiet)?;
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
    let plan = ran.plan.as_ref().expect("followed after a plan");
    let followed = rtlab_sched::auto_follow_all::followed(plan, &ran.reserved);
    if !quiet {
        println!("{}", render::following(followed.len()));
    }
    let (log, failures) =
        super::reserve_follow::follow_all(&followed, machine, window, &args.socket, stop, quiet);
    output.follow = log;
    print_failures(&failures);
    if !quiet && failures.is_empty() {
        println!("{}", render::RELEASED);
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
