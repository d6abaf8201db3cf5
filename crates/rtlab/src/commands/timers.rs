//! `rtlab timers`: what each Linux timer API really delivers per scheduling class (paper 000 §4.1),
//! `--audit` of the settings that change everyone's timing, and `--change-experiment`, paper
//! 004's measure/change pair. Argument parsing, progress and rendering only: the measuring is in
//! `rtlab_probe::timers`, the statistics and findings in `rtlab_analysis::timers`.

use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::timers::{change_findings, findings, judge_audit, timer_row, CellInput};
use rtlab_core::timer_audit::{AuditReport, AUDIT_SCHEMA};
use rtlab_core::timer_study::{TimerStudy, UnavailableCell};
use rtlab_core::{parse_duration, Nanos, RunRecord, RUN_SCHEMA};
use rtlab_probe::timers::change::{self, ChangeConfig};
use rtlab_probe::timers::{RunningStudy, StudyConfig, TimerClass};
use rtlab_sys::timer_apis::TimerApi;
use std::io::{IsTerminal as _, Write as _};
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

/// `rtlab timers-changer` (hidden): the change experiment's other process.
#[derive(Debug, clap::Args)]
pub struct ChangerArgs {}

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
        return audit(&args);
    }
    if args.change_experiment {
        return change_experiment(&args);
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
        config,
        series: Vec::new(),
        load: None,
        episodes: Vec::new(),
        warnings,
        interrupted,
        timers: Some(study),
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
        return write_change_experiment(out, experiment);
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

fn write_change_experiment(
    out: &mut impl std::io::Write,
    experiment: &rtlab_core::timer_study::ChangeExperiment,
) -> std::io::Result<()> {
    writeln!(
        out,
        "change experiment: another process changes a setting, this {} thread measures its {} sleeps (µs; FIFO: a SCHED_FIFO 90 thread's wake-ups on another CPU)",
        experiment.policy,
        crate::svg_timers::millis_label(experiment.sleep_ns)
    )?;
    writeln!(
        out,
        "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "setting",
        "in force",
        "slack",
        "count",
        "wake p50",
        "wake p99",
        "wake max",
        "sleep p50",
        "sleep p99",
        "FIFO p50",
        "FIFO p99"
    )?;
    for step in &experiment.steps {
        writeln!(
            out,
            "{:<26} {:>9} {:>9} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            step.setting,
            match step.cpu_dma_latency_in_force_us {
                Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
                Some(value) => format!("{value} µs"),
                None => "?".to_owned(),
            },
            format!("{}", Nanos(step.timer_slack_ns)),
            step.wakeup.count,
            micros(step.wakeup.p50_ns as f64),
            micros(step.wakeup.p99_ns as f64),
            micros(step.wakeup.max_ns as f64),
            micros(step.sleep.p50_ns as f64),
            micros(step.sleep.p99_ns as f64),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p50_ns as f64)),
            step.rt_wakeup
                .as_ref()
                .map_or("-".to_owned(), |rt| micros(rt.p99_ns as f64)),
        )?;
    }
    let findings = change_findings(experiment);
    if !findings.is_empty() {
        writeln!(out, "\nfindings:")?;
        for finding in findings {
            writeln!(out, "  - {finding}")?;
        }
    }
    let restored = &experiment.restored;
    let dma = |value: Option<i64>| match value {
        Some(value) if value >= 2_000_000_000 => "no limit".to_owned(),
        Some(value) => format!("{value} µs"),
        None => "unreadable".to_owned(),
    };
    writeln!(
        out,
        "\nrestored: timer slack {} (was {}), cpu_dma_latency in force {} (was {}), changer process {}",
        Nanos(restored.timer_slack_ns_after),
        Nanos(restored.timer_slack_ns_before),
        dma(restored.cpu_dma_latency_after_us),
        dma(restored.cpu_dma_latency_before_us),
        if restored.changer_exited { "exited" } else { "STILL RUNNING" }
    )?;
    Ok(())
}

fn change_experiment(args: &Args) -> anyhow::Result<ExitCode> {
    // SAFETY-free check: the changer must open /dev/cpu_dma_latency and write another task's
    // timerslack_ns, both root-only.
    if std::fs::OpenOptions::new()
        .write(true)
        .open(rtlab_sys::dma_latency::PATH)
        .is_err()
    {
        anyhow::bail!(
            "--change-experiment needs root: the other process holds {} and writes this thread's /proc/TID/timerslack_ns",
            rtlab_sys::dma_latency::PATH
        );
    }
    let cpu = match args.cpu {
        Some(cpu) => cpu,
        None => last_online_cpu()?,
    };
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let svg_outputs = prepare_svgs(args.svg.as_deref(), &["change-experiment.svg".to_owned()])?;
    let store = open_store(args.no_store)?;
    let facts = rtlab_sys::timer_audit::collect();
    let latencies: Vec<u64> = facts
        .idle_states
        .iter()
        .filter(|state| !state.disabled)
        .map(|state| state.exit_latency_us)
        .collect();
    let rt_cpu = rtlab_sys::cpu::online_cpus()
        .unwrap_or_default()
        .into_iter()
        .find(|other| *other != cpu);
    let config = ChangeConfig {
        settings: change::settings_for(&latencies),
        hold: args.hold,
        sleep: Nanos::from_millis(1),
        cpu,
        rt_cpu,
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let mut changer = std::process::Command::new(
        std::env::current_exe().context("finding the rtlab binary to start the changer")?,
    );
    changer.arg("timers-changer");
    rtlab_sys::load_syscalls::configure_load_command(&mut changer);
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        eprintln!(
            "holding {} settings for {} each: {}",
            config.settings.len(),
            args.hold,
            config
                .settings
                .iter()
                .map(|setting| setting.describe())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let started = std::time::SystemTime::now();
    let began_ns = rtlab_sys::clock::monotonic_ns();
    let outcome = change::run(&config, changer, &stop)?;
    let measured_ns = rtlab_sys::clock::monotonic_ns() - began_ns;
    let mut warnings = Vec::new();
    let restored = &outcome.experiment.restored;
    if restored.timer_slack_ns_after != restored.timer_slack_ns_before {
        warnings.push(format!(
            "the measuring thread's timer slack reads {} after restoring, not {}",
            Nanos(restored.timer_slack_ns_after),
            Nanos(restored.timer_slack_ns_before)
        ));
    }
    let svg = crate::svg_timers::change_experiment(&outcome.experiment);
    let study = TimerStudy {
        cpu: cpu as u32,
        findings: change_findings(&outcome.experiment),
        change_experiment: Some(outcome.experiment),
        ..TimerStudy::default()
    };
    let config_json = serde_json::json!({
        "change_experiment": {
            "settings": config.settings.iter().map(|setting| setting.describe()).collect::<Vec<_>>(),
            "hold_ns": config.hold.0,
            "sleep_ns": config.sleep.0,
            "cpu": cpu,
        }
    });
    let record = base_record(
        started,
        measured_ns,
        config_json,
        study,
        warnings,
        outcome.interrupted,
    )?;
    if !to_stdout {
        let mut out = std::io::stdout().lock();
        write_study(&mut out, &record)?;
        for warning in &record.warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    for (name, output) in svg_outputs {
        commit_svg(args, &name, output, &svg, to_stdout)?;
    }
    store_and_write(&record, store, json_output, to_stdout, "change experiment")?;
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn audit(args: &Args) -> anyhow::Result<ExitCode> {
    let json_output = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let facts = rtlab_sys::timer_audit::collect();
    let items = judge_audit(&facts);
    let mut skipped = facts.skipped.clone();
    if !facts.as_root {
        skipped.push("not root: other processes' open files and timer slack are hidden, and debugfs (the fair server) is unreadable; run as root for the whole picture".to_owned());
    }
    skipped.push("what each cpu_dma_latency holder asked for: the kernel keeps it inside the open file and shows only the least of all requests (reading /dev/cpu_dma_latency)".to_owned());
    let report = AuditReport {
        schema: AUDIT_SCHEMA.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host: rtlab_sys::host::describe(None),
        items,
        skipped,
        facts,
    };
    let to_stdout = json_output.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        let mut out = std::io::stdout().lock();
        write_audit(&mut out, &report)?;
    }
    if let Some(output) = json_output {
        output.commit(
            &(serde_json::to_string_pretty(&report).expect("the audit serialises") + "\n"),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_audit(out: &mut impl std::io::Write, report: &AuditReport) -> std::io::Result<()> {
    writeln!(
        out,
        "settings that change everyone's timing on {} (kernel {})",
        report.host.hostname, report.host.kernel
    )?;
    let mut topic = "";
    for item in &report.items {
        if item.topic != topic {
            topic = &item.topic;
            writeln!(out, "\n{topic}")?;
        }
        writeln!(
            out,
            "  [{:<7}] {}: {}",
            item.effect.as_str(),
            item.setting,
            item.value
        )?;
        writeln!(out, "            {} (set by: {})", item.why, item.set_by)?;
    }
    if !report.skipped.is_empty() {
        writeln!(out, "\nnot known:")?;
        for line in &report.skipped {
            writeln!(out, "  - {line}")?;
        }
    }
    Ok(())
}

/// The hidden changer: serves commands from stdin until told to quit or stdin closes.
pub fn run_changer(_args: ChangerArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    change::serve_changer(stdin.lock(), stdout.lock()).context("serving the change experiment")?;
    Ok(ExitCode::SUCCESS)
}
