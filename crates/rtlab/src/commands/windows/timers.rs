//! `rtlab timers` on Windows: what each Windows way to wait really delivers (papers 000 and
//! 004), with and without this process's timeBeginPeriod(1); `--audit` of the timer resolution;
//! `--change-experiment`, Bruce Dawson's pair (another process cycles timeBeginPeriod 1..15 ms
//! while this one measures Sleep(1)). Flags, progress and tables only: the measuring is in
//! `rtlab_probe::windows`, the record in `rtlab_session::windows`, the findings in
//! `rtlab_analysis::timers::windows`.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::timers::windows::interval_bins;
use rtlab_core::{parse_duration, Nanos, RunRecord};
use rtlab_probe::windows::timers::{WindowsStudyConfig, WindowsTimerApi, WindowsTimerClass};
use rtlab_session::windows::{ChangeSettings, StudySettings};
use serde::Serialize;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn parse_nanos(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

fn parse_class(text: &str) -> Result<WindowsTimerClass, String> {
    text.parse()
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Total measuring time, split evenly over every (API, class, interval) cell
    #[arg(short = 'D', long, default_value = "30s", value_parser = parse_nanos)]
    pub duration: Nanos,
    /// The intervals to request, each measured with every API and class
    #[arg(long, value_delimiter = ',', default_value = "1ms,2ms,10ms,15.625ms", value_parser = parse_nanos)]
    pub intervals: Vec<Nanos>,
    /// Only these APIs: Sleep, WaitForSingleObject, SetWaitableTimer (both modes), timeSetEvent
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub apis: Vec<String>,
    /// Classes: normal (no request from rtlab), period-1ms (rtlab holds timeBeginPeriod(1))
    #[arg(long, value_delimiter = ',', default_value = "normal,period-1ms", value_parser = parse_class)]
    pub classes: Vec<WindowsTimerClass>,
    /// CPU to pin the measuring threads to (default: the last)
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Write the Run record (or, with --audit, the audit) as JSON to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not store the study in the run history
    #[arg(long)]
    pub no_store: bool,
    /// Instead of measuring: the timer resolution in force, its limits, and who set it
    #[arg(long, conflicts_with = "change_experiment")]
    pub audit: bool,
    /// Dawson's pair (paper 004): another process cycles timeBeginPeriod 1..15 ms while this one
    /// measures its Sleep(1)
    #[arg(long)]
    pub change_experiment: bool,
    /// With --change-experiment: how long each setting is held
    #[arg(long, default_value = "1s", value_parser = parse_nanos)]
    pub hold: Nanos,
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

fn selected_apis(names: &[String]) -> anyhow::Result<Vec<WindowsTimerApi>> {
    if names.is_empty() {
        return Ok(WindowsTimerApi::ALL.to_vec());
    }
    for name in names {
        if !WindowsTimerApi::ALL
            .iter()
            .any(|api| api.function() == name)
        {
            return Err(crate::exit::input(format!(
                "--apis: unknown API '{name}' (expected Sleep, WaitForSingleObject, SetWaitableTimer or timeSetEvent)"
            )));
        }
    }
    Ok(WindowsTimerApi::ALL
        .into_iter()
        .filter(|api| names.iter().any(|name| name == api.function()))
        .collect())
}

fn default_cpu() -> usize {
    std::thread::available_parallelism()
        .map(|count| count.get() - 1)
        .unwrap_or(0)
}

fn open_store(no_store: bool) -> anyhow::Result<Option<rtlab_store::Store>> {
    if no_store {
        return Ok(None);
    }
    rtlab_store::Store::open_default()
        .map(Some)
        .context("opening the run history (use --no-store to skip it)")
}

fn install_stop() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::windows::console::install_stop_flag(&stop)
        .context("installing the console control handler")?;
    Ok(stop)
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

fn study(args: &Args) -> anyhow::Result<ExitCode> {
    let apis = selected_apis(&args.apis)?;
    if args
        .intervals
        .iter()
        .any(|interval| interval.as_u64() < 100_000)
    {
        return Err(crate::exit::input(
            "--intervals: every interval must be at least 100us",
        ));
    }
    if args.classes.is_empty() {
        return Err(crate::exit::input("--classes: no class given"));
    }
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let store = open_store(args.no_store)?;
    let mut classes = args.classes.clone();
    classes.sort();
    classes.dedup();
    let mut config = WindowsStudyConfig {
        apis,
        classes,
        intervals: args.intervals.clone(),
        cell_duration: Nanos::ZERO,
        cpu: args.cpu.unwrap_or_else(default_cpu),
    };
    let cells = config.cell_count().max(1) as u64;
    let longest = args
        .intervals
        .iter()
        .map(|interval| interval.0)
        .max()
        .unwrap_or(0);
    let mut warnings = Vec::new();
    let mut cell_duration = args.duration.0 / cells;
    // Whole-millisecond APIs round an interval up to 1 ms at least: five of those per cell.
    let floor = 5 * longest.max(1_000_000);
    if cell_duration < floor {
        cell_duration = floor;
        warnings.push(format!(
            "--duration {} gives each of the {cells} cells less than 5 intervals: each cell measured {} instead",
            args.duration,
            Nanos(cell_duration)
        ));
    }
    config.cell_duration = Nanos(cell_duration);
    let stop = install_stop()?;
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut reported = 0;
    let record = rtlab_session::windows::timer_study(
        StudySettings {
            study: config,
            warnings,
            cmdline: std::env::args().collect(),
        },
        stop,
        &mut |done, total| {
            if terminal && done != reported {
                reported = done;
                eprint!("\r{done}/{total} cells");
            }
        },
    )?;
    if terminal {
        eprintln!();
    }
    finish(&record, json_output, store, "timer study")
}

fn finish(
    record: &RunRecord,
    json_output: Option<PendingOutput>,
    store: Option<rtlab_store::Store>,
    summary: &str,
) -> anyhow::Result<ExitCode> {
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        let mut out = std::io::stdout().lock();
        write_study(&mut out, record)?;
    }
    if let Some(store) = &store {
        store.insert(record, summary)?;
        if !to_stdout {
            let short_id: String = record.id.chars().take(8).collect();
            println!("\nstored as run {short_id}");
        }
    }
    if let Some(output) = json_output {
        output.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(crate::exit::finished(record.interrupted))
}

fn micros(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

fn millis(ns: u64) -> String {
    let text = format!("{:.3}", ns as f64 / 1e6);
    format!("{}ms", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The study's table per interval (with paper 000's 100 µs bins for the multimedia timer), what
/// was not measured, and the findings.
pub fn write_study(out: &mut impl std::io::Write, record: &RunRecord) -> std::io::Result<()> {
    let Some(study) = &record.timers else {
        return Ok(());
    };
    if let Some(experiment) = &study.change_experiment {
        return write_change(out, record, experiment);
    }
    writeln!(
        out,
        "timer study {}  started {}  on CPU {}  {}{}",
        record.id.chars().take(8).collect::<String>(),
        record.started_at,
        study.cpu,
        record.host.kernel,
        if record.interrupted {
            "  (interrupted)"
        } else {
            ""
        }
    )?;
    let mut intervals: Vec<u64> = study.rows.iter().map(|row| row.requested_ns).collect();
    intervals.sort_unstable();
    intervals.dedup();
    for requested in intervals {
        writeln!(out)?;
        writeln!(
            out,
            "requested {}: times between returns (µs); drift = mean against what the call was given",
            millis(requested)
        )?;
        writeln!(
            out,
            "{:<20} {:<9} {:<11} {:>7} {:>6} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7} {:>7}",
            "api",
            "mode",
            "class",
            "given",
            "count",
            "mean",
            "drift",
            "p50",
            "p99",
            "max",
            "catchup",
            "skipped"
        )?;
        for row in study
            .rows
            .iter()
            .filter(|row| row.requested_ns == requested)
        {
            writeln!(
                out,
                "{:<20} {:<9} {:<11} {:>7} {:>6} {:>9} {:>7.2}% {:>9} {:>9} {:>9} {:>7} {:>7}",
                row.api,
                row.mode,
                row.class,
                millis(row.asked_ns),
                row.count,
                micros(row.mean_ns),
                row.drift_ppm / 1e4,
                micros(row.p50_ns as f64),
                micros(row.p99_ns as f64),
                micros(row.max_ns as f64),
                row.catchups,
                row.skipped
            )?;
        }
    }
    writeln!(
        out,
        "\ncatchup: returns less than a quarter period after the previous one; skipped: periods with no return"
    )?;
    for row in study
        .rows
        .iter()
        .filter(|row| row.api == "timeSetEvent" && row.count > 0)
    {
        let Some(bins) = interval_bins(row) else {
            continue;
        };
        writeln!(
            out,
            "\ntimeSetEvent({}) in {}: intervals between callbacks in 100 µs bins (paper 000, Tables 1-3)",
            millis(row.asked_ns),
            row.class
        )?;
        for (lower, count) in bins {
            let bin = format!(
                "{:.1}-{:.1} ms",
                lower as f64 / 1e6,
                (lower + 100_000) as f64 / 1e6
            );
            writeln!(out, "  {bin:>16} {count:>8}")?;
        }
    }
    if !study.unavailable.is_empty() {
        writeln!(out, "\nnot measured:")?;
        for cell in &study.unavailable {
            writeln!(
                out,
                "  {} ({}) in {}: {}",
                cell.api,
                cell.mode,
                cell.class.as_deref().unwrap_or("any class"),
                cell.reason
            )?;
        }
    }
    write_findings_and_warnings(out, record)
}

fn write_findings_and_warnings(
    out: &mut impl std::io::Write,
    record: &RunRecord,
) -> std::io::Result<()> {
    if let Some(study) = &record.timers {
        if !study.findings.is_empty() {
            writeln!(out, "\nfindings:")?;
            for finding in &study.findings {
                writeln!(out, "  - {finding}")?;
            }
        }
    }
    if !record.warnings.is_empty() {
        writeln!(out)?;
        for warning in &record.warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    Ok(())
}

fn write_change(
    out: &mut impl std::io::Write,
    record: &RunRecord,
    experiment: &rtlab_core::timer_study::ChangeExperiment,
) -> std::io::Result<()> {
    writeln!(
        out,
        "change experiment: another process changes its timeBeginPeriod request, this one measures Sleep(1) (µs)"
    )?;
    writeln!(
        out,
        "{:<40} {:>7} {:>10} {:>10} {:>10}",
        "setting (resolution in force)", "count", "sleep p50", "sleep p99", "sleep max"
    )?;
    for step in &experiment.steps {
        writeln!(
            out,
            "{:<40} {:>7} {:>10} {:>10} {:>10}",
            step.setting,
            step.sleep.count,
            micros(step.sleep.p50_ns as f64),
            micros(step.sleep.p99_ns as f64),
            micros(step.sleep.max_ns as f64)
        )?;
    }
    for finding in rtlab_analysis::timers::windows::windows_change_findings(experiment) {
        writeln!(out, "  - {finding}")?;
    }
    write_findings_and_warnings(out, record)
}

fn change(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let store = open_store(args.no_store)?;
    let stop = install_stop()?;
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
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let record = rtlab_session::windows::change_experiment(
        &settings,
        changer,
        &stop,
        &mut |done, total| {
            if terminal {
                eprint!("\rstep {done}/{total}");
            }
        },
    )?;
    if terminal {
        eprintln!();
    }
    finish(
        &record,
        json_output,
        store,
        "timeBeginPeriod change experiment",
    )
}

/// What `--audit` reports (`rtlab.timer-audit-windows/1`).
#[derive(Debug, Serialize)]
struct WindowsAudit {
    version: String,
    wine: Option<String>,
    timer_resolution_ns: Option<u64>,
    timer_resolution_finest_ns: Option<u64>,
    timer_resolution_coarsest_ns: Option<u64>,
    multimedia_period_range_ms: Option<(u32, u32)>,
    power_plan: Option<String>,
    requesters: String,
}

const REQUESTERS: &str = "not readable without administrator rights: run `powercfg /energy /duration 10` as administrator and read 'Platform Timer Resolution: Outstanding Timer Request' in energy-report.html";

fn audit(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let facts = rtlab_sys::windows::host::windows_facts();
    let audit = WindowsAudit {
        version: facts.version,
        wine: facts.wine,
        timer_resolution_ns: facts.timer_resolution_ns,
        timer_resolution_finest_ns: facts.timer_resolution_finest_ns,
        timer_resolution_coarsest_ns: facts.timer_resolution_coarsest_ns,
        multimedia_period_range_ms: rtlab_sys::windows::resolution::multimedia_period_range_ms()
            .ok(),
        power_plan: facts.power_plan,
        requesters: REQUESTERS.to_owned(),
    };
    if let Some(output) = json_output {
        if output.is_stdout() {
            let host = rtlab_sys::host::describe(None);
            return output
                .commit_json("rtlab.timer-audit-windows/1", Some(host), &audit)
                .map(|()| ExitCode::SUCCESS);
        }
        let host = rtlab_sys::host::describe(None);
        output.commit_json("rtlab.timer-audit-windows/1", Some(host), &audit)?;
    }
    let mut out = std::io::stdout().lock();
    let resolution =
        |value: Option<u64>| value.map_or("unreadable".to_owned(), |ns| Nanos(ns).to_string());
    writeln!(out, "Windows {}", audit.version)?;
    if let Some(wine) = &audit.wine {
        writeln!(
            out,
            "running under Wine {wine}: these are Wine's answers, not a Windows kernel's"
        )?;
    }
    writeln!(
        out,
        "timer resolution in force   {}",
        resolution(audit.timer_resolution_ns)
    )?;
    writeln!(
        out,
        "finest a process can ask    {}",
        resolution(audit.timer_resolution_finest_ns)
    )?;
    writeln!(
        out,
        "default (coarsest)          {}",
        resolution(audit.timer_resolution_coarsest_ns)
    )?;
    match audit.multimedia_period_range_ms {
        Some((low, high)) => writeln!(out, "timeBeginPeriod range       {low}..{high} ms")?,
        None => writeln!(
            out,
            "timeBeginPeriod range       unreadable (timeGetDevCaps failed)"
        )?,
    }
    writeln!(
        out,
        "power plan                  {}",
        audit
            .power_plan
            .as_deref()
            .unwrap_or("unreadable (PowerGetActiveScheme failed)")
    )?;
    writeln!(out, "who asked for the resolution: {}", audit.requesters)?;
    if let (Some(now), Some(coarsest)) = (
        audit.timer_resolution_ns,
        audit.timer_resolution_coarsest_ns,
    ) {
        if now < coarsest {
            writeln!(
                out,
                "\nsome process holds a timeBeginPeriod request: the clock interrupt runs every {} instead of {} (more wake-ups, more power; since Windows 10 2004 it speeds up only the processes that asked)",
                Nanos(now),
                Nanos(coarsest)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
