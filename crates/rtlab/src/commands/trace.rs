//! `rtlab trace record` / `rtlab trace analyze`: what an application's threads really do (paper
//! 003, section 3). Flags, the progress bar and printing only; the work is `rtlab-trace`'s, the
//! words `rtlab_render`'s (`trace_record` for what a recording did, `apptrace_*` for the analysis).

use crate::output::PendingOutput;
use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use rtlab_render::trace_record;
use rtlab_trace::analyze::AnalysisConfig;
use rtlab_trace::file::FileHeader;
use rtlab_trace::record::{RecordConfig, RecorderChoice, Target};
use rtlab_trace::source::SourceError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Record an application's threads (and whatever preempts or wakes them) to an rtlab trace file
    Record(RecordArgs),
    /// Thread structure, wake-up chains, priority inversions, hangs, starvation and late
    /// activations of an rtlab trace file or a trace-cmd trace.dat
    Analyze(AnalyzeArgs),
    /// A program's deadline misses live, one line each with its culprit; a summary and a
    /// verdict at the end (Ctrl-C, -D or the program's exit)
    Watch(super::trace_watch::WatchArgs),
}

#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "comm", "command"])))]
pub struct RecordArgs {
    /// Record this process (all its threads)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Record every process with this name (/proc/PID/comm), also ones started later
    #[arg(long)]
    pub comm: Option<String>,
    /// Stop after this long (e.g. 10s, 500ms); default: until the target ends or Ctrl-C
    #[arg(short = 'D', long, value_parser = crate::flags::positive_duration)]
    pub duration: Option<rtlab_core::Nanos>,
    /// Ring buffer per CPU, KiB (BPF: one ring of this times the CPUs)
    #[arg(long, default_value_t = 8192)]
    pub buffer_kb: u32,
    /// bpf (filtered in the kernel), tracefs, or auto: bpf when it loads, else tracefs
    #[arg(long, default_value = "auto", value_parser = crate::flags::recorder())]
    pub recorder: RecorderChoice,
    /// Also record the program's own cycle starts: `jack` (libjackserver's
    /// JackEngine::ProcessNext and ProcessCurrent, where the engine judges each cycle), or
    /// PATH:SYMBOL[,SYMBOL…] (ELF functions, mangled or not); `trace analyze` then judges
    /// deadlines by them
    #[arg(long, value_name = "SPEC")]
    pub cycle_marker: Option<String>,
    /// With --cycle-marker: PATH:SYMBOL[,SYMBOL…], the function whose return marks that the
    /// calling thread finished its cycle's work (a JACK client's process callback): a thread
    /// that goes on with the next cycle's work without blocking is then still judged exactly
    #[arg(long, value_name = "SPEC", requires = "cycle_marker")]
    pub work_done_marker: Option<String>,
    /// The rtlab trace file to write (appears only when the recording ends)
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Start this command and record it (after `--`)
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, ClapArgs)]
pub struct AnalyzeArgs {
    /// An rtlab trace file (`rtlab trace record`) or a trace-cmd trace.dat (v6 or v7)
    pub file: PathBuf,
    /// Write the analysis as JSON (schema rtlab.trace/1); `-` for stdout
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a timeline SVG (one row per thread: running, runnable, blocked; findings marked)
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write Chrome trace-event JSON for ui.perfetto.dev
    #[arg(long)]
    pub perfetto: Option<PathBuf>,
    /// A futex wait longer than this is a hang
    #[arg(long, default_value = "1s", value_parser = crate::flags::positive_duration)]
    pub hang: rtlab_core::Nanos,
    /// A runnable wait longer than this is starvation
    #[arg(long, default_value = "100ms", value_parser = crate::flags::positive_duration)]
    pub starve: rtlab_core::Nanos,
    /// List every thread in the text report (default: the recorded application's, or the busiest)
    #[arg(long)]
    pub all_threads: bool,
    /// How the cycle markers in the file judge the threads they drive: `jack` (as JACK counts
    /// xruns) or `pipewire` (as PipeWire's profiler counts unfinished cycles; for recordings
    /// made with `--cycle-marker pipewire`)
    #[arg(long, value_name = "RULE", default_value = "jack", value_parser = ["jack", "pipewire"])]
    pub cycle_rule: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        TraceCommand::Record(args) => record(args),
        TraceCommand::Analyze(args) => analyze(args),
        TraceCommand::Watch(args) => super::trace_watch::run(args),
    }
}

fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let cycle_marker = super::trace_markers::cycle_marker_flag(args.cycle_marker.as_deref())?;
    let work_done_marker =
        super::trace_markers::work_done_marker_flag(args.work_done_marker.as_deref())?;
    let target = Target::from_flags(args.pid, args.comm.as_deref(), &args.command);
    let pending = match PendingOutput::prepare(&args.output, "--output")? {
        PendingOutput::File(file) => file,
        PendingOutput::Stdout => {
            return Err(crate::exit::input(
                "--output: a recording cannot go to stdout",
            ))
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    let config = RecordConfig {
        target: target.clone(),
        duration: args
            .duration
            .map(|duration| Duration::from_nanos(duration.0)),
        buffer_kb: args.buffer_kb,
        recorder: args.recorder,
        cycle_marker: cycle_marker.clone(),
        work_done_marker: work_done_marker.clone(),
        ..RecordConfig::default()
    };
    let described = target.describe();
    let header = crate::output::header(rtlab_trace::file::SCHEMA, None);
    let header = FileHeader::for_recording(header, described.clone());
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} recording {msg}")
            .expect("valid template"),
    );
    let started = std::time::Instant::now();
    let result = rtlab_trace::record::record(
        &config,
        std::io::BufWriter::with_capacity(1 << 20, pending),
        header,
        &stop,
        |progress| {
            let elapsed_s = started.elapsed().as_secs_f64();
            bar.set_message(trace_record::progress(&described, elapsed_s, progress));
            bar.tick();
        },
    );
    bar.finish_and_clear();
    let (output, summary) = result.map_err(super::trace_markers::record_error)?;
    let pending = output
        .into_inner()
        .map_err(|error| error.into_error())
        .context("writing the recording")?;
    pending
        .commit(&[])
        .with_context(|| format!("writing {}", args.output.display()))?;
    let file_bytes = std::fs::metadata(&args.output)
        .map(|metadata| metadata.len())
        .unwrap_or(summary.progress.bytes_written);
    let cycle = cycle_marker.map(|marker| marker.describe());
    let work_done = work_done_marker.map(|marker| marker.describe());
    let markers = trace_record::MarkersAsked {
        cycle: cycle.as_deref(),
        work_done: work_done.as_deref(),
    };
    eprint!(
        "{}",
        trace_record::recorded(&summary, &described, markers, &args.output, file_bytes)
    );
    Ok(crate::exit::finished(summary.interrupted))
}

fn analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    // Outputs are opened before the work, so a bad path fails at once.
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let svg = args
        .svg
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--svg"))
        .transpose()?;
    let perfetto = args
        .perfetto
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--perfetto"))
        .transpose()?;
    let config = AnalysisConfig {
        hang_ns: args.hang.0,
        starve_ns: args.starve.0,
        timeline_spans: if svg.is_some() || perfetto.is_some() {
            2_000_000
        } else {
            0
        },
        cycle_rule: rtlab_trace::analyze::CycleRule::from_name(&args.cycle_rule),
    };
    let header = crate::output::header(rtlab_trace::analyze::report::SCHEMA, None);
    let (report, timeline) = rtlab_trace::source::analyze_path(&args.file, config, header)
        .map_err(|error| match error {
            SourceError::Open { .. } => anyhow::Error::new(error),
            other => crate::exit::input(other),
        })?;
    let json_to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        let text = serde_json::to_string_pretty(&rtlab_render::apptrace_json::TraceReportJson::of(
            &report,
        ))
        .context("serialising the analysis")?;
        json.commit(&(text + "\n"))?;
    }
    let spans = timeline.map(|timeline| timeline.spans).unwrap_or_default();
    if let Some(svg) = svg {
        svg.commit(&rtlab_render::apptrace_svg::render(&report, &spans))?;
    }
    if let Some(perfetto) = perfetto {
        perfetto.commit(&rtlab_render::apptrace_perfetto::render(&report, &spans))?;
    }
    if !json_to_stdout {
        crate::output::print(&rtlab_render::apptrace_text::render(
            &report,
            args.all_threads,
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
