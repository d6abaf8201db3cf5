//! A subcommand the Windows build does not have (compiled once per such command, under its
//! name, by `#[cfg_attr(windows, path = …)]` in `commands/mod.rs`). It takes any arguments and
//! says plainly why the command is absent and where it runs: exit code 2, nothing measured,
//! nothing pretended.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// The subcommand's name (the module's) and why Windows has no counterpart.
fn why_absent() -> (&'static str, &'static str) {
    let module = module_path!().rsplit("::").next().unwrap_or("this command");
    let reason = match module {
        "explain" => "it explains late wake-ups from Linux kernel events (tracefs, perf); rtlab has no Windows event source (ETW) yet",
        "daemon" | "reserve" | "release" | "reservations" => "CPU reservations are enforced with Linux's SCHED_DEADLINE and the rtlab daemon, which Windows does not have",
        "monitor" => "the monitor runs the Linux probe window by window",
        "buffer_experiment" => "the buffer experiment's device thread is a Linux SCHED_FIFO thread",
        "trace" => "it records with Linux tracefs; a trace-cmd trace.dat or rtlab trace file can be analysed with `rtlab trace analyze` on Linux",
        "workload" | "study" => "the workload runner uses Linux futex locks, SCHED_FIFO and SCHED_DEADLINE reservations; run the model on Linux",
        "report" => "its HTML renderer needs the Linux trace library (kernel event causes); copy the records to Linux and run it there",
        _ => "it needs Linux",
    };
    (module, reason)
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let (module, reason) = why_absent();
    Err(crate::exit::input(format!(
        "rtlab {} is not available on Windows: {reason}",
        module.replace('_', "-")
    )))
}
