//! `rtlab timers` on Windows: what each Windows way to wait really delivers (papers 000 and
//! 004), with and without this process's timeBeginPeriod(1); `--audit` of the timer resolution;
//! `--change-experiment`, Bruce Dawson's pair (another process cycles timeBeginPeriod 1..15 ms
//! while this one measures Sleep(1)). Flags, progress and printing only: the plan and the record
//! are `rtlab_session::windows`, the text `rtlab_render::timers` (the same as on Linux).

use crate::output::{PendingOutput, RecordOutputs};
use anyhow::Context as _;
use rtlab_core::timer_audit::WINDOWS_AUDIT_SCHEMA;
use rtlab_core::{Nanos, RunRecord};
use rtlab_probe::windows::timers::WindowsTimerClass;
use rtlab_session::windows::{ChangeSettings, WindowsSessionError, WindowsStudyRequest};
use std::process::{ExitCode, Stdio};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Total measuring time, split evenly over every (API, class, interval) cell
    #[arg(short = 'D', long, default_value = "30s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    /// The intervals to request, each measured with every API and class
    #[arg(long, value_delimiter = ',', default_value = "1ms,2ms,10ms,15.625ms", value_parser = crate::flags::duration)]
    pub intervals: Vec<Nanos>,
    /// Only these APIs: Sleep, WaitForSingleObject, SetWaitableTimer (both modes), timeSetEvent
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub apis: Vec<String>,
    /// Classes: normal (no request from rtlab), period-1ms (rtlab holds timeBeginPeriod(1))
    #[arg(long, value_delimiter = ',', default_value = "normal,period-1ms")]
    pub classes: Vec<WindowsTimerClass>,
    /// CPU to pin the measuring threads to (default: the last)
    #[arg(long)]
    pub cpu: Option<usize>,
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
    /// Instead of measuring: the timer resolution in force, its limits, and who set it
    #[arg(long, conflicts_with = "change_experiment")]
    pub audit: bool,
    /// Dawson's pair (paper 004): another process cycles timeBeginPeriod 1..15 ms while this one
    /// measures its Sleep(1)
    #[arg(long)]
    pub change_experiment: bool,
    /// With --change-experiment: how long each setting is held
    #[arg(long, default_value = "1s", value_parser = crate::flags::duration)]
    pub hold: Nanos,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.audit {
        return audit(&args);
    }
    if args.change_experiment {
        return change(&args);
    }
    study(&args)
}

/// A session error naming the flag it is about.
fn session_error(error: WindowsSessionError) -> anyhow::Error {
    let setting = error.setting();
    crate::flags::naming_flag(error, setting)
}

/// Progress on stderr, only on a terminal: `LABEL done/total`.
fn progress(label: &'static str) -> impl FnMut(usize, usize) {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    move |done, total| {
        if terminal {
            eprint!("\r{label}{done}/{total}");
        }
    }
}

fn study(args: &Args) -> anyhow::Result<ExitCode> {
    let request = WindowsStudyRequest {
        apis: args.apis.clone(),
        classes: args.classes.clone(),
        intervals: args.intervals.clone(),
        duration: args.duration,
        cpu: args.cpu,
    };
    let settings = request
        .plan(std::env::args().collect())
        .map_err(session_error)?;
    let outputs = RecordOutputs::open(&args.record)?;
    let stop = super::stop_flag()?;
    let record = rtlab_session::windows::timer_study(settings, stop, &mut progress("cells "))?;
    finish(&record, outputs, "timer study")
}

fn change(args: &Args) -> anyhow::Result<ExitCode> {
    let outputs = RecordOutputs::open(&args.record)?;
    let stop = super::stop_flag()?;
    let executable = std::env::current_exe().context("finding rtlab.exe to start the changer")?;
    let changer = std::process::Command::new(executable)
        .arg("timers-changer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the changer process")?;
    let settings = ChangeSettings {
        hold: args.hold,
        periods_ms: (1..=15).collect(),
        cmdline: std::env::args().collect(),
    };
    let record = rtlab_session::windows::change_experiment(
        &settings,
        changer,
        &stop,
        &mut progress("step "),
    )?;
    finish(&record, outputs, "timeBeginPeriod change experiment")
}

fn finish(record: &RunRecord, outputs: RecordOutputs, summary: &str) -> anyhow::Result<ExitCode> {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    if !outputs.json_to_stdout() {
        crate::output::print(&rtlab_render::timers::study(record))?;
    }
    outputs.finish(record, summary, false)?;
    Ok(crate::exit::finished(record.interrupted))
}

fn audit(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.record.prepare_json()?;
    let audit = rtlab_session::windows::audit();
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(output) = json_output {
        let host = rtlab_sys::host::describe(None);
        output.commit_json(WINDOWS_AUDIT_SCHEMA, Some(host), &audit)?;
    }
    if !to_stdout {
        crate::output::print(&rtlab_render::timers::windows_audit(&audit))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The change experiment's other process (hidden `rtlab timers-changer`).
#[derive(Debug, clap::Args)]
pub struct ChangerArgs {}

pub fn run_changer(_args: ChangerArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    rtlab_probe::windows::change::serve_changer(stdin, stdout).context("the changer's pipes")?;
    Ok(ExitCode::SUCCESS)
}
