//! `rtlab reserve`: asks the daemon for a CPU Reservation ("AMOUNT of every PERIOD") for a thread
//! of any program (the remoter of paper 003 §3.4), or runs a command with its main thread
//! reserved, like `chrt`. The daemon holds the reservation until `rtlab release` or the thread's
//! exit.

use super::daemon_client::{failure, verify, SocketArgs};
use crate::output::PendingOutput;
use rtlab_core::already_reserved::Judgement;
use rtlab_core::rpc::{Backend, Target, WireRate, GRANT_SCHEMA};
use rtlab_core::Nanos;
use rtlab_render::reserve::{
    already_reserved_thread as render_already_reserved, grant as render_grant,
};
use rtlab_session::supply::VerifiedGrant;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("target").required(true).args(["tid", "pid", "comm", "command", "resize"])),
    after_help = "Examples:\n  rtlab reserve --auto --comm jackd\n  rtlab reserve --auto --pid 4242 --observe 5s --dry-run\n  rtlab reserve --auto --comm jackd --observe-with schedstat\n  rtlab reserve --auto --follow --comm jackd\n  rtlab reserve 2ms/10ms --comm pipewire\n  rtlab reserve 1ms/10ms --pid 4242 --all-threads\n  rtlab reserve 5ms/20ms -- ./decoder input.wav\n  rtlab reserve 3ms/10ms --resize 4\n\n\
Exit status: 0 granted (or already held: the thread's reservation is the caller's, asked for the \
same budget), 1 denied (the reason is printed: no room, over the user's limit, not the caller's \
thread, already reserved by another user or for another budget), 2 bad input (a malformed rate, no such thread), 3 system error (no daemon). \
With `-- CMD`, the command's own exit status."
)]
pub struct Args {
    /// CPU time and period, e.g. `2ms/10ms`: at least AMOUNT in every window of PERIOD
    #[arg(value_name = "AMOUNT/PERIOD", value_parser = rtlab_core::rpc::parse_rate,
          required_unless_present = "auto", conflicts_with = "auto")]
    pub rate: Option<(Nanos, Nanos)>,
    /// Observe the program (--comm or --pid), find its periodic real-time threads and the
    /// thread that wakes them, and reserve what they need (their p99 CPU per activation plus
    /// 20 %) on the backend that enforces their period here; each choice is printed with its
    /// reason. Rolled back if deadline misses rise in the next --observe window
    #[arg(long, conflicts_with_all = ["tid", "command", "backend", "all_threads", "resize"])]
    pub auto: bool,
    /// With --auto: how long to observe the program before reserving, and again after
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = crate::flags::positive_duration, requires = "auto")]
    pub observe: Nanos,
    /// With --auto: how to observe. `trace`: the scheduler's events (BPF or tracefs): periods,
    /// CPU per activation, the thread that wakes them, deadline misses and the check after.
    /// `schedstat`: the counters the kernel keeps per task (run time, voluntary switches),
    /// sampled every millisecond, where tracing is not allowed: periods and CPU per activation
    /// only, no waker chain, no misses, so the reservations are kept unchecked
    #[arg(long, value_name = "HOW", value_enum, default_value = "trace")]
    pub observe_with: super::reserve_auto::ObserveWith,
    /// With --auto: print what would be reserved and why, reserve nothing
    #[arg(long, requires = "auto")]
    pub dry_run: bool,
    /// With --auto: stay in the foreground and keep each reservation made sized to its thread,
    /// from the kernel's per-task counters sampled every millisecond in windows of DURATION
    /// (default 250ms): grow at once when the p99 CPU per cycle plus 20 % is more than it
    /// holds, shrink after 3 s of windows in a row under 70 % of it (each to the need plus
    /// 10 %), map the window anew when the period changes (2 s of windows agreeing). Each change (or refusal) is printed. Ends when the threads
    /// end or on Ctrl-C/SIGTERM, and then releases what it reserved
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "250ms",
          value_parser = crate::flags::positive_duration, requires = "auto",
          conflicts_with_all = ["dry_run", "verify"])]
    pub follow: Option<Nanos>,
    /// With --auto: judge misses by the program's own cycle starts, `jack` or PATH:SYMBOL (see
    /// `trace record --cycle-marker`)
    #[arg(long, value_name = "SPEC", requires = "auto")]
    pub cycle_marker: Option<String>,
    /// Change reservation ID (as `rtlab reservations` lists it) to AMOUNT/PERIOD, keeping its
    /// threads: a growth is admitted as a new reservation would be (the caller's limit, the
    /// CPUs' room, the kernel), and when refused the old size stays
    #[arg(long, value_name = "ID", conflicts_with_all = ["backend", "all_threads", "verify", "command"])]
    pub resize: Option<u64>,
    /// The thread to reserve for
    #[arg(long, value_name = "TID")]
    pub tid: Option<u32>,
    /// A process: its main thread, or with --all-threads every thread sharing one reservation
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// With --pid: every thread of the process shares the reservation (an activity)
    #[arg(long)]
    pub all_threads: bool,
    /// Threads named NAME (their comm, as `ps -L -o comm` shows), in programs never built for
    /// rtlab; several matching threads share one reservation
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
    /// How to enforce it [default: the daemon's choice for this machine]
    #[arg(long, value_name = "BACKEND", value_enum)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
    /// After granting, watch the reserved thread for DURATION (e.g. 10s) and report the CPU it
    /// really received in every sliding window of the period (10 µs steps): the share of windows
    /// that held the amount, the least any window got, and the 1st percentile. Needs root
    /// (tracefs); a thread that sleeps of its own accord receives less than it reserved
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration, conflicts_with = "command")]
    pub verify: Option<Nanos>,
    #[command(flatten)]
    pub socket: SocketArgs,
    /// Run CMD with its main thread reserved (after `--`)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    if args.auto {
        let target = match (&args.pid, &args.comm) {
            (Some(pid), _) => rtlab_trace::record::Target::Pid(*pid),
            (None, Some(name)) => rtlab_trace::record::Target::Comm(name.clone()),
            (None, None) => {
                return Err(crate::exit::input("--auto needs --comm NAME or --pid PID"))
            }
        };
        let cycle_marker = super::trace_markers::cycle_marker_flag(args.cycle_marker.as_deref())?;
        return super::reserve_auto::run(super::reserve_auto::AutoArgs {
            target,
            observe: args.observe,
            observe_with: args.observe_with,
            cycle_marker,
            dry_run: args.dry_run,
            verify: args.verify,
            follow: args.follow,
            json,
            socket: args.socket,
        });
    }
    let (amount, period) = args.rate.expect("clap requires a rate without --auto");
    if let Some(grant_id) = args.resize {
        let mut client = args.socket.connect()?;
        let grant = match client.resize(grant_id, amount, period) {
            Ok(grant) => grant,
            Err(error) => return failure(error),
        };
        if !json.as_ref().is_some_and(PendingOutput::is_stdout) {
            print!("{}", render_grant(&grant));
        }
        if let Some(json) = json {
            let file = VerifiedGrant {
                grant: &grant,
                verify: None,
                already_held: false,
            };
            json.commit_json(GRANT_SCHEMA, None, &file)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.all_threads && args.pid.is_none() {
        return Err(crate::exit::input("--all-threads goes with --pid"));
    }
    let target = if let Some(tid) = args.tid {
        Target::Thread { tid }
    } else if let Some(pid) = args.pid {
        Target::Process {
            pid,
            all_threads: args.all_threads,
        }
    } else if let Some(name) = &args.comm {
        Target::Comm { name: name.clone() }
    } else {
        // `-- CMD`: this very thread becomes CMD's main thread at exec, so reserve it.
        Target::Thread {
            tid: rtlab_client::current_thread_id(),
        }
    };
    let asked = WireRate {
        amount_ns: amount.0,
        period_ns: period.0,
    };
    let uid = rtlab_sys::users::current_uid();
    let mut client = args.socket.connect()?;
    let (grant, already_held) = match client.reserve(target.clone(), amount, period, args.backend) {
        Ok(grant) => (grant, None),
        Err(error) => match client.already_reserved_exactly(&error, &target, &asked, uid) {
            Some((tid, grant, judgement)) => {
                let line = render_already_reserved(tid, &grant, &asked, judgement);
                if !matches!(judgement, Judgement::Met(_)) {
                    eprintln!("rtlab: denied (already_reserved): {line}");
                    return Ok(ExitCode::from(crate::exit::CHECK_FAILED));
                }
                (grant, Some(line))
            }
            None => return failure(error),
        },
    };
    let to_stdout_only = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if args.command.is_empty() && !to_stdout_only {
        match &already_held {
            Some(line) => println!("{line}"),
            None => print!("{}", render_grant(&grant)),
        }
    }
    let verify = match args.verify {
        Some(duration) if args.command.is_empty() => {
            let tid = grant
                .threads
                .first()
                .map(|thread| thread.tid)
                .ok_or_else(|| {
                    crate::exit::input("--verify: the reservation holds no thread to watch")
                })?;
            Some(verify(tid, amount, period, duration, to_stdout_only)?)
        }
        _ => None,
    };
    if let Some(json) = json {
        let file = VerifiedGrant {
            grant: &grant,
            verify,
            already_held: already_held.is_some(),
        };
        json.commit_json(GRANT_SCHEMA, None, &file)?;
    }
    if args.command.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !to_stdout_only {
        // The command owns standard output from here on.
        eprint!("{}", render_grant(&grant));
    }
    drop(client);
    exec_reserved(&args.command, args.socket)
}

/// Replaces this process with `command` (the reserved thread carries over); only returns if the
/// exec failed, after giving the reservation back.
fn exec_reserved(command: &[String], socket: SocketArgs) -> anyhow::Result<ExitCode> {
    let socket = rtlab_client::socket_path(socket.socket.as_deref());
    let (error, released) = rtlab_client::exec_reserved(command, &socket);
    if let Err(release_error) = released {
        eprintln!("rtlab: error: giving the reservation back: {release_error}");
    }
    Err(crate::exit::input(format!(
        "cannot run {}: {error}",
        command[0]
    )))
}
