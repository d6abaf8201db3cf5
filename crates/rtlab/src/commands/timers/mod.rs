//! `rtlab timers`: what each Linux timer API really delivers per scheduling class (paper 000 §4.1),
//! `--audit` of the settings that change everyone's timing, and `--change-experiment`, paper
//! 004's measure/change pair. Argument parsing, progress and rendering only: the measuring is in
//! `rtlab_probe::timers`, the statistics and findings in `rtlab_analysis::timers`.

mod audit;
mod change;

pub use change::{run_changer, ChangerArgs};

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::timers::{findings, timer_row, CellInput};
use rtlab_core::timer_study::{TimerStudy, UnavailableCell};
use rtlab_core::{parse_duration, Nanos, RunRecord, RUN_SCHEMA};
use rtlab_probe::timers::{RunningStudy, StudyConfig, TimerClass};
use rtlab_sys::timer_apis::TimerApi;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Total measuring time, split evenly over every (API, class, interval) cell
    #[arg(short = 'D', long, default_value = "30s", value_parser = parse_nanos)]
    pub duration: Nanos,
    /// The intervals to request, each measured with every API and class
    #[arg(long, value_delimiter = ',', default_value = "1ms,2ms,10ms,16.667ms", value_parser = parse_nanos)]
    pub intervals: Vec<Nanos>,
    /// Only these APIs (function names; `timerfd` means both its periodic and re-armed loops)
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub apis: Vec<String>,
    /// Classes: normal (SCHED_OTHER, default slack), normal-slack1ns, rt-high (SCHED_FIFO 90)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "normal,normal-slack1ns,rt-high"
    )]
    pub classes: Vec<TimerClass>,
    /// CPU to pin the measuring threads to (default: the last online CPU)
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Write the Run record (or, with --audit, the audit) as JSON to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the plots as SVG files into DIR (created if missing)
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Do not store the study in the run history
    #[arg(long)]
    pub no_store: bool,
    /// Instead of measuring: list the settings that change everyone's timing, and who set them
    #[arg(long, conflicts_with = "change_experiment")]
    pub audit: bool,
    /// Paper 004's pair: another process cycles cpu_dma_latency and this thread's timer slack
    /// while this one measures its own sleeps (needs root)
    #[arg(long)]
    pub change_experiment: bool,
    /// With --change-experiment: how long each setting is held
    #[arg(long, default_value = "3s", value_parser = parse_nanos)]
    pub hold: Nanos,
}

fn parse_nanos(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

fn selected_apis(names: &[String]) -> anyhow::Result<Vec<TimerApi>> {
    if names.is_empty() {
        return Ok(TimerApi::ALL.to_vec());
    }
    for name in names {
        if !TimerApi::ALL.iter().any(|api| api.function() == name) {
            return Err(crate::exit::input(format!(
                "--apis: unknown API '{name}' (expected {})",
                rtlab_core::timer_study::TIMER_APIS.join(", ")
            )));
        }
    }
    Ok(TimerApi::ALL
        .into_iter()
        .filter(|api| names.iter().any(|name| name == api.function()))
        .collect())
}

/// The SVG files of a run, opened before measuring (a bad directory fails at once).
fn prepare_svgs(
    directory: Option<&Path>,
    names: &[String],
) -> anyhow::Result<Vec<(String, PendingOutput)>> {
    let Some(directory) = directory else {
        return Ok(Vec::new());
    };
    std::fs::create_dir_all(directory).map_err(|error| {
        crate::exit::input(format!(
            "--svg: cannot create {}: {error}",
            directory.display()
        ))
    })?;
    names
        .iter()
        .map(|name| {
            PendingOutput::prepare(&directory.join(name), "--svg").map(|file| (name.clone(), file))
        })
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.audit {
        return audit::run(&args);
    }
    if args.change_experiment {
        return change::run(&args);
    }
    study(&args)
}

fn last_online_cpu() -> anyhow::Result<usize> {
    rtlab_sys::cpu::online_cpus()
        .context("reading the online CPUs")?
        .last()
        .copied()
        .context("no online CPU")
}

fn open_store(no_store: bool) -> anyhow::Result<Option<rtlab_store::Store>> {
    if no_store {
        return Ok(None);
    }
    rtlab_store::Store::open_default()
        .map(Some)
        .context("opening the run history (use --no-store to skip it)")
}

fn base_record(
    started: std::time::SystemTime,
    duration_ns: u64,
    config: serde_json::Value,
    study: TimerStudy,
    warnings: Vec<String>,
    interrupted: bool,
) -> anyhow::Result<RunRecord> {
    let mut warnings = warnings;
    let host = rtlab_sys::host::describe(None);
    if host.virtualization != "none" {
        warnings.push(format!(
            "running in a virtual machine ({}): the hypervisor's own timers and descheduling show up in every API",
            host.virtualization
        ));
    }
    let record = RunRecord {
        schema: RUN_SCHEMA.to_owned(),
        id: uuid::Uuid::new_v4().to_string(),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        duration_ns,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
        host,
        config: serde_json::from_value(config).context("the timer study's settings")?,
        series: Vec::new(),
        load: None,
        episodes: Vec::new(),
        warnings,
        interrupted,
        timers: Some(study),
        conditions: None,
        workload: None,
    };
    record
        .validate()
        .context("the study produced an invalid record")?;
    Ok(record)
}

fn study(args: &Args) -> anyhow::Result<ExitCode> {
    let apis = selected_apis(&args.apis)?;
    if args
        .intervals
        .iter()
        .any(|interval| interval.as_u64() < 10_000)
    {
        return Err(crate::exit::input(
            "--intervals: every interval must be at least 10us",
        ));
    }
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => last_online_cpu()?,
    };
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let svg_names: Vec<String> = args
        .intervals
        .iter()
        .map(|interval| format!("timers-{}.svg", crate::svg_timers::millis_label(interval.0)))
        .collect();
    let svg_outputs = prepare_svgs(args.svg.as_deref(), &svg_names)?;
    let store = open_store(args.no_store)?;
    let mut classes = args.classes.clone();
    classes.sort();
    classes.dedup();
    let config = StudyConfig {
        apis,
        classes,
        intervals: args.intervals.clone(),
        cell_duration: Nanos::ZERO,
        cpu,
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
    if cell_duration < 5 * longest {
        cell_duration = 5 * longest;
        warnings.push(format!(
            "--duration {} gives each of the {cells} cells less than 5 intervals of {}: each cell measured {} instead",
            args.duration,
            Nanos(longest),
            Nanos(cell_duration)
        ));
    }
    let config = StudyConfig {
        cell_duration: Nanos(cell_duration),
        ..config
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let started = std::time::SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let running = RunningStudy::start(config.clone(), Arc::clone(&stop))?;
    let bar = progress_bar(cells);
    while !running.is_finished() {
        std::thread::sleep(Duration::from_millis(if bar.is_some() { 100 } else { 250 }));
        if let Some(bar) = &bar {
            let done = running.progress().0;
            bar.set_position(done as u64);
            if let Some((interval, api, class)) = config.cell(done) {
                bar.set_message(format!(
                    "{} ({}) in {} at {}",
                    api.function(),
                    api.mode(),
                    class.name(),
                    crate::svg_timers::millis_label(interval.0)
                ));
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let result = running.finish()?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    warnings.extend(result.warnings);

    let mut study = TimerStudy {
        cpu: cpu as u32,
        ..TimerStudy::default()
    };
    let mut unavailable_reasons: Vec<(String, String, String, String)> = Vec::new();
    for cell in &result.cells {
        if let Some(reason) = &cell.unavailable {
            unavailable_reasons.push((
                cell.api.function().to_owned(),
                cell.api.mode().to_owned(),
                cell.class.name().to_owned(),
                reason.clone(),
            ));
            continue;
        }
        if let Some(error) = &cell.error {
            warnings.push(format!(
                "{} ({}) in {} at {}: ended early: {error}",
                cell.api.function(),
                cell.api.mode(),
                cell.class.name(),
                Nanos(cell.requested_ns)
            ));
        }
        study.rows.push(timer_row(&CellInput {
            api: cell.api.function(),
            mode: cell.api.mode(),
            class: cell.class.name(),
            policy: cell.policy.name(),
            priority: cell.policy.priority_or_nice(),
            timer_slack_ns: cell.timer_slack_ns,
            requested_ns: cell.requested_ns,
            asked_ns: cell.api.effective_request_ns(cell.requested_ns),
            intervals: &cell.intervals,
            reported_overruns: cell
                .api
                .reports_overruns()
                .then_some(cell.reported_overruns),
        }));
    }
    // One entry per (api, mode, class) and reason, not per interval.
    unavailable_reasons.dedup();
    for (api, mode, class, reason) in unavailable_reasons {
        let entry = UnavailableCell {
            api,
            mode,
            class: Some(class),
            reason,
        };
        if !study.unavailable.contains(&entry) {
            study.unavailable.push(entry);
        }
    }
    study.findings = findings(&study.rows);
    let config_json = serde_json::json!({
        "timers": {
            "apis": config.apis.iter().map(|api| format!("{}/{}", api.function(), api.mode())).collect::<Vec<_>>(),
            "classes": config.classes.iter().map(|class| class.name()).collect::<Vec<_>>(),
            "intervals_ns": config.intervals.iter().map(|interval| interval.0).collect::<Vec<_>>(),
            "cell_duration_ns": config.cell_duration.0,
            "cpu": cpu,
        }
    });
    let record = base_record(
        started,
        measured_ns,
        config_json,
        study,
        warnings,
        result.interrupted,
    )?;
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        let mut out = std::io::stdout().lock();
        write_study(&mut out, &record)?;
    }
    let study = record.timers.as_ref().expect("set above");
    for ((name, output), interval) in svg_outputs.into_iter().zip(&args.intervals) {
        let picture = crate::svg_timers::interval_distributions(&study.rows, interval.0)?;
        commit_svg(args, &name, output, &picture, to_stdout)?;
    }
    store_and_write(&record, store, json_output, to_stdout, "timer study")?;
    Ok(if result.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// Names one SVG file of `--svg` and says so (unless JSON goes to stdout).
fn commit_svg(
    args: &Args,
    name: &str,
    output: PendingOutput,
    picture: &str,
    quiet: bool,
) -> anyhow::Result<()> {
    output.commit(picture)?;
    if !quiet {
        let directory = args.svg.as_deref().unwrap_or(Path::new("."));
        println!("wrote {}", directory.join(name).display());
    }
    Ok(())
}

fn store_and_write(
    record: &RunRecord,
    store: Option<rtlab_store::Store>,
    json_output: Option<PendingOutput>,
    to_stdout: bool,
    summary: &str,
) -> anyhow::Result<()> {
    if let Some(store) = &store {
        store.insert(record, summary)?;
        if !to_stdout {
            let short_id: String = record.id.chars().take(8).collect();
            println!("\nstored as run {short_id} (rtlab show {short_id})");
        }
    }
    if let Some(output) = json_output {
        output.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(())
}

fn progress_bar(length: u64) -> Option<indicatif::ProgressBar> {
    if !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(length);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
        )
        .expect("constant template"),
    );
    Some(bar)
}

fn micros(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The study's table per interval, what was not measured, and the findings.
pub fn write_study(out: &mut impl std::io::Write, record: &RunRecord) -> std::io::Result<()> {
    let Some(study) = &record.timers else {
        return Ok(());
    };
    if let Some(experiment) = &study.change_experiment {
        return change::write_change_experiment(out, experiment);
    }
    writeln!(
        out,
        "timer study {}  started {}  on CPU {}  kernel {}{}",
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
            "requested {}: times between returns (µs); drift = mean against the request",
            crate::svg_timers::millis_label(requested)
        )?;
        writeln!(
            out,
            "{:<23} {:<9} {:<16} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
            "api",
            "mode",
            "class",
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
                "{:<23} {:<9} {:<16} {:>6} {:>9} {:>8.2}% {:>9} {:>9} {:>9} {:>7} {:>7}",
                row.api,
                row.mode,
                row.class,
                row.count,
                micros(row.mean_ns),
                row.drift_ppm / 1e4,
                micros(row.p50_ns as f64),
                micros(row.p99_ns as f64),
                micros(row.max_ns as f64),
                row.catchups,
                format!(
                    "{}{}",
                    row.skipped,
                    if row.skipped_from == "reported" {
                        "r"
                    } else {
                        ""
                    }
                ),
            )?;
        }
    }
    writeln!(
        out,
        "\ncatchup: returns less than a quarter period after the previous one; skipped: periods with no return (r: the API's own overrun count)"
    )?;
    if !study.unavailable.is_empty() {
        writeln!(out, "\nnot measured:")?;
        // One line per class and reason (without root, rt-high fails the same way for all).
        let mut groups: Vec<(&str, &str, Vec<String>)> = Vec::new();
        for cell in &study.unavailable {
            let class = cell.class.as_deref().unwrap_or("any class");
            let name = format!("{} ({})", cell.api, cell.mode);
            match groups
                .iter_mut()
                .find(|(other, reason, _)| *other == class && *reason == cell.reason)
            {
                Some((_, _, names)) => names.push(name),
                None => groups.push((class, &cell.reason, vec![name])),
            }
        }
        let mut every_api: Vec<(&str, &str)> = study
            .rows
            .iter()
            .map(|row| (row.api.as_str(), row.mode.as_str()))
            .chain(
                study
                    .unavailable
                    .iter()
                    .map(|cell| (cell.api.as_str(), cell.mode.as_str())),
            )
            .collect();
        every_api.sort_unstable();
        every_api.dedup();
        for (class, reason, names) in groups {
            let which = if names.len() == every_api.len() && names.len() > 1 {
                "every API".to_owned()
            } else {
                names.join(", ")
            };
            writeln!(out, "  {which} in {class}: {reason}")?;
        }
    }
    if !study.findings.is_empty() {
        writeln!(out, "\nfindings:")?;
        for finding in &study.findings {
            writeln!(out, "  - {finding}")?;
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
