//! `rtlab run`: the standard latency study. Starts the probe, shows progress, builds the Run
//! record, prints the summary, writes the requested files and stores the run.

use crate::exit;
use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_core::{parse_duration, Metric, Nanos, RunRecord, RUN_SCHEMA};
use rtlab_probe::{Class, Probe, ProbeConfig, ProbeResult};
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to measure, after warm-up (e.g. 10s, 5m, 2h)
    #[arg(short = 'D', long, default_value = "60s", value_parser = parse_nanos)]
    pub duration: Nanos,
    /// CPUs to measure, as a kernel CPU list (e.g. 0-3,6); default: every online CPU
    #[arg(long, value_parser = parse_cpus, value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// Classes to measure: rt-high (SCHED_FIFO 90), rt-mid (SCHED_FIFO 50), normal (SCHED_OTHER)
    #[arg(long, value_delimiter = ',', default_value = "rt-high,rt-mid,normal")]
    pub classes: Vec<Class>,
    /// Wake-up period of every measuring thread (e.g. 1ms, 250us)
    #[arg(long, default_value = "1ms", value_parser = parse_nanos)]
    pub period: Nanos,
    /// Time to run before samples count (caches, frequency, first faults)
    #[arg(long, default_value = "1s", value_parser = parse_nanos)]
    pub warmup: Nanos,
    /// Hold /dev/cpu_dma_latency at this many µs during the run (0 keeps CPUs out of idle states)
    #[arg(long, value_name = "US")]
    pub cpu_dma_latency: Option<i32>,
    /// Skip the hand-off series (a waiter thread per class woken by the rt-high timer thread)
    #[arg(long)]
    pub no_handoff: bool,
    /// Write the Run record as JSON to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the wake-up histograms in cyclictest's --histfile format
    #[arg(long, value_name = "FILE")]
    pub histfile: Option<PathBuf>,
    /// Number of 1 µs buckets in --histfile (cyclictest's -h)
    #[arg(long, value_name = "US", default_value_t = 10_000)]
    pub histogram: usize,
    /// Print the times between wake-ups in 100 µs bins (paper 000, Tables 2-3)
    #[arg(long)]
    pub intervals: bool,
    /// Do not store the run in the history database
    #[arg(long)]
    pub no_store: bool,
    /// How many of the largest samples each series keeps with their times
    #[arg(long, default_value_t = 4096, hide = true)]
    pub keep_peaks: usize,
    // integration: load — flatten the load arguments here
    #[command(flatten)]
    pub load: super::run_load::LoadArgs,
    // integration: explain — flatten the explain arguments here
    #[command(flatten)]
    pub explain: super::run_explain::ExplainArgs,
    // integration: show — --quiet, --verbose, --for CLASS
    #[command(flatten)]
    pub show: super::run_show::ShowArgs,
}

fn parse_nanos(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

/// A kernel CPU list (`0-3,6`), parsed once.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus(text: &str) -> Result<CpuList, String> {
    rtlab_sys::cpu::parse_cpu_list(text).map(CpuList)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cmdline: Vec<String> = std::env::args().collect();
    let cpus = match &args.cpus {
        Some(cpus) => cpus.0.clone(),
        None => rtlab_sys::cpu::online_cpus().context("reading the online CPUs")?,
    };
    let json_output = args
        .json
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--json"))
        .transpose()?;
    let histfile_output = args
        .histfile
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--histfile"))
        .transpose()?;
    let store = if args.no_store {
        None
    } else {
        Some(
            rtlab_store::Store::open_default()
                .context("opening the run history (use --no-store to skip it)")?,
        )
    };
    // integration: load — validate the load arguments here, before measuring
    let load_plan = super::run_load::validate(&args.load)?;
    let mut running_load: Option<super::run_load::RunningLoad> = None;

    let config = ProbeConfig {
        cpus: cpus.clone(),
        classes: args.classes.clone(),
        period: args.period,
        duration: args.duration,
        warmup: args.warmup,
        handoff: !args.no_handoff,
        peaks_per_series: args.keep_peaks,
        cpu_dma_latency_us: args.cpu_dma_latency,
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let steal_before = rtlab_sys::proc_stat::cpu_times().ok();
    let probe = Probe::start(&config, Arc::clone(&stop)).map_err(|error| match error {
        rtlab_probe::ProbeError::ThreadSetup { .. }
        | rtlab_probe::ProbeError::Spawn(_)
        | rtlab_probe::ProbeError::OnlineCpus(_) => anyhow::Error::new(error),
        input_error => exit::input(input_error),
    })?;
    // integration: explain — start the recorder here (probe.thread_ids(), probe.set_late_threshold)
    let mut explain_session = super::run_explain::start(&args.explain, &probe, &cpus);

    let progress = ProgressDisplay::new(Nanos(args.warmup.as_u64() + args.duration.as_u64()));
    // Poll often when a bar is drawn; otherwise the controller wakes rarely, to stay out of the way.
    let poll = if progress.is_drawn() {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(250)
    };
    loop {
        std::thread::sleep(poll);
        if probe.stop_requested() || probe.is_finished() {
            break;
        }
        // integration: load — start the loads once warm-up is over (probe.measure_start_ns())
        if running_load.is_none()
            && load_plan.is_requested()
            && rtlab_sys::clock::monotonic_ns() >= probe.measure_start_ns()
        {
            running_load = Some(load_plan.start(probe.measure_start_ns(), probe.end_ns())?);
        }
        if let Some(load) = running_load.as_mut() {
            load.poll();
        }
        // integration: explain — drain late samples here (probe.drain_late)
        if let Some(session) = explain_session.as_mut() {
            session.poll(&probe);
        }
        progress.update(&probe);
    }
    progress.finish();
    if let Some(session) = explain_session.as_mut() {
        session.poll(&probe);
    }
    let interrupted = probe.stop_requested();
    let result = probe.finish();
    // integration: load — stop the loads here and keep what ran for the record
    let (load_value, load_warnings) = match running_load {
        Some(load) => {
            let (value, warnings) = load.stop(&load_plan);
            (Some(value), warnings)
        }
        None if load_plan.is_requested() => (Some(load_plan.describe_unstarted()), Vec::new()),
        None => (None, Vec::new()),
    };

    let steal_after = rtlab_sys::proc_stat::cpu_times().ok();
    let mut record = build_record(&args, &cpus, result, started_at, cmdline, interrupted)?;
    record.load = load_value;
    record.warnings.extend(load_plan.warnings().iter().cloned());
    record.warnings.extend(load_warnings);
    if let (Some(before), Some(after)) = (steal_before, steal_after) {
        for cpu in &cpus {
            let stolen = after
                .get(cpu)
                .zip(before.get(cpu))
                .map(|(after, before)| after.steal_ns.saturating_sub(before.steal_ns))
                .unwrap_or(0);
            if stolen > 0 {
                record.warnings.push(format!(
                    "the hypervisor took {} from CPU {cpu} during the run (steal time): long delays there may be time that vanished from the guest",
                    Nanos(stolen)
                ));
            }
        }
    }
    // integration: explain — attach episodes to the record here
    if let Some(session) = explain_session {
        session.finish(&mut record)?;
    }
    // integration: tail — fill each series' tail here
    super::run_load::attach_tails(&mut record, &load_plan.usage(), true);

    let mut out = std::io::stdout().lock();
    let json_to_stdout = args.json.as_deref() == Some(Path::new("-"));
    // integration: show — summary, extra reports, then the verdict block
    let mut unsuitable = false;
    if !json_to_stdout {
        unsuitable = super::run_show::write_end(&mut out, &record, &args.show, |mut out| {
            if args.intervals {
                crate::render::write_interval_table(&mut out, &record)?;
            }
            if args.explain.explain {
                super::explain::write_report(&mut out, &record, 10)?;
            }
            Ok(())
        })?;
    }
    drop(out);
    if let Some(output) = histfile_output {
        output.commit(&histfile_text(&record, args.histogram)?)?;
    }
    if let Some(store) = &store {
        store.insert(&record, &one_line_summary(&record))?;
        if !json_to_stdout && !args.show.quiet {
            let short_id: String = record.id.chars().take(8).collect();
            println!("\nstored as run {short_id} (rtlab show {short_id})");
        }
    }
    if let Some(output) = json_output {
        output.commit(&(record.to_json_pretty() + "\n"))?;
    }
    Ok(if interrupted {
        ExitCode::from(130)
    } else if unsuitable {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn build_record(
    args: &Args,
    cpus: &[usize],
    result: ProbeResult,
    started_at: String,
    cmdline: Vec<String>,
    interrupted: bool,
) -> anyhow::Result<RunRecord> {
    let mut warnings = result.warnings;
    let measured_classes: Vec<String> = {
        let mut classes: Vec<String> = result
            .series
            .iter()
            .map(|series| series.key.class.name().to_owned())
            .collect();
        classes.dedup();
        classes
    };
    let mut series = Vec::with_capacity(result.series.len());
    for measured in result.series {
        let key = measured.key;
        if measured.missed > 0 && key.metric != Metric::Interval {
            warnings.push(format!(
                "{}/{}@{}: {} periods had no wake-up at all because an earlier one was so late (cyclictest skips these silently)",
                key.class, key.metric, key.cpu, measured.missed
            ));
        }
        series.push(
            RunRecord::series_from_histogram(
                key.metric,
                key.class.name(),
                key.cpu as u32,
                measured.policy.name(),
                measured.policy.priority_or_nice(),
                args.period.as_u64(),
                &measured.histogram,
                measured.missed,
                0,
                measured.max_per_second,
                measured.peaks,
            )
            .context("encoding a histogram")?,
        );
    }
    let host = rtlab_sys::host::describe(args.cpu_dma_latency);
    if host.virtualization != "none" {
        warnings.push(format!(
            "running in a virtual machine ({}): expect multi-millisecond hiccups when the hypervisor deschedules a virtual CPU; they are real for software in this guest",
            host.virtualization
        ));
    }
    if result.measured_ns < Nanos::from_secs(600).as_u64() {
        warnings.push(format!(
            "measured for {}: the worst case of a short run says little about the worst case of a day; measure for hours, under the load you care about",
            Nanos(result.measured_ns)
        ));
    }
    let config = serde_json::json!({
        "cpus": cpus,
        "classes": measured_classes,
        "period_ns": args.period.as_u64(),
        "duration_ns": args.duration.as_u64(),
        "warmup_ns": args.warmup.as_u64(),
        "handoff": !args.no_handoff,
        "cpu_dma_latency_us": args.cpu_dma_latency,
        "timer_slack_ns": 1,
        "keep_peaks": args.keep_peaks,
    });
    let record = RunRecord {
        schema: RUN_SCHEMA.to_owned(),
        id: uuid::Uuid::new_v4().to_string(),
        started_at,
        duration_ns: result.measured_ns,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        cmdline,
        host,
        config,
        series,
        load: None,
        episodes: Vec::new(),
        warnings,
        interrupted,
        timers: None,
    };
    record
        .validate()
        .context("the run produced an invalid record")?;
    Ok(record)
}

/// One line for `rtlab history`: the worst rt-high (else any) wake-up p99 and max.
fn one_line_summary(record: &RunRecord) -> String {
    let wakeups: Vec<_> = record
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup)
        .collect();
    let Some(first_class) = wakeups.first().map(|series| series.class.clone()) else {
        return "no wake-up series".to_owned();
    };
    let class_series: Vec<_> = wakeups
        .iter()
        .filter(|series| series.class == first_class)
        .collect();
    let p99 = class_series
        .iter()
        .filter_map(|series| series.percentiles.get("99"))
        .max()
        .copied()
        .unwrap_or(0);
    let max = class_series
        .iter()
        .map(|series| series.max_ns)
        .max()
        .unwrap_or(0);
    format!(
        "{first_class} wakeup p99 {} us, max {} us on {} CPUs",
        crate::render::micros(p99),
        crate::render::micros(max),
        class_series.len()
    )
}

fn histfile_text(record: &RunRecord, buckets: usize) -> anyhow::Result<String> {
    let wakeups: Vec<_> = record
        .series
        .iter()
        .filter(|series| series.metric == Metric::Wakeup)
        .collect();
    let histograms = wakeups
        .iter()
        .map(|series| series.histogram())
        .collect::<Result<Vec<_>, _>>()
        .context("decoding a histogram")?;
    let columns: Vec<rtlab_core::export::HistColumn<'_>> = wakeups
        .iter()
        .zip(&histograms)
        .map(|(series, histogram)| {
            let limit_ns = buckets as u64 * 1_000;
            let mut overflow_cycles: Vec<u64> = series
                .peaks
                .iter()
                .filter(|peak| peak.value_ns >= limit_ns)
                .map(|peak| peak.at_ns / series.period_ns.max(1))
                .collect();
            overflow_cycles.sort_unstable();
            rtlab_core::export::HistColumn {
                label: format!("{}@{}", series.class, series.cpu),
                histogram,
                overflow_cycles,
            }
        })
        .collect();
    Ok(rtlab_core::export::cyclictest_histogram(&columns, buckets))
}

/// The progress bar: elapsed, samples, running max; drawn only when stdout is a terminal.
struct ProgressDisplay {
    bar: Option<indicatif::ProgressBar>,
}

impl ProgressDisplay {
    fn new(total: Nanos) -> Self {
        if !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
            return ProgressDisplay { bar: None };
        }
        let bar = indicatif::ProgressBar::new(total.as_u64() / 1_000_000);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}%  {msg}",
            )
            .expect("constant template"),
        );
        ProgressDisplay { bar: Some(bar) }
    }

    fn update(&self, probe: &rtlab_probe::RunningProbe) {
        let Some(bar) = &self.bar else { return };
        let progress = probe.progress();
        // The bar spans warm-up plus measurement, in ms.
        let total_ms = bar.length().unwrap_or(0);
        let remaining_ms = probe
            .end_ns()
            .saturating_sub(rtlab_sys::clock::monotonic_ns())
            / 1_000_000;
        bar.set_position(total_ms.saturating_sub(remaining_ms));
        if progress.warming_up {
            bar.set_message("warming up");
        } else {
            bar.set_message(format!(
                "{} samples  worst wake-up {} us",
                progress.samples,
                crate::render::micros(progress.max_wakeup_ns)
            ));
        }
    }

    fn is_drawn(&self) -> bool {
        self.bar.is_some()
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
