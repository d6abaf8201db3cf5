//! `rtlab trace watch`: a program's deadline misses (late activations) live, one line each with
//! its culprit, the thread's period and CPU need; at the end (duration, the program's exit or
//! Ctrl-C) the misses per minute, the culprits ranked by the time they took, and a one-line
//! verdict. The work is `rtlab_trace::watch`'s (a recording analysed window by window, the
//! misses counted into a `rtlab_core::watch_summary`), the words `rtlab_render::watch`'s; this
//! module holds the flags and the printing.

use anyhow::Context as _;
use clap::Args as ClapArgs;
use rtlab_core::watch_summary::{WatchSummary, SUMMARY_SCHEMA};
use rtlab_trace::analyze::report::TraceReport;
use rtlab_trace::cycle_marker::CycleMarker;
use rtlab_trace::live::DEFAULT_WINDOW_NS;
use rtlab_trace::record::{RecorderChoice, Target};
use rtlab_trace::watch::{self, EndWatcher, Markers, WatchConfig};
use rtlab_trace::watch_pipewire::{PipewireWatch, PipewireWish};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, ClapArgs)]
#[command(
    group(clap::ArgGroup::new("target").required(true).args(["pid", "comm", "command"])),
    after_help = "Examples:\n  rtlab trace watch --comm jackd\n  rtlab trace watch --pid 4242 -D 60s --json misses.jsonl\n  rtlab trace watch -- ./synth\n\n\
Each line is printed when the window holding the miss has been analysed (a few seconds later). \
When the program is a PipeWire client (a JACK program run through pw-jack), PipeWire's own count \
of its unfinished cycles (pw-profiler) is printed beside rtlab's. \
Exit status: 0 watched to the end, 2 no such program (without --wait), 3 tracing failed or, with \
--pipewire, PipeWire's count cannot be had (no pw-profiler, no server, no profiler module), 130 \
interrupted (the summary is printed first)."
)]
pub struct WatchArgs {
    /// Watch this process (all its threads)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Watch every process with this name (/proc/PID/comm), also ones started later
    #[arg(long)]
    pub comm: Option<String>,
    /// With --comm: wait for a process of that name to appear instead of failing
    #[arg(long, requires = "comm")]
    pub wait: bool,
    /// Stop after this long (e.g. 60s); default: until the program ends or Ctrl-C
    #[arg(short = 'D', long, value_parser = crate::flags::positive_duration)]
    pub duration: Option<rtlab_core::Nanos>,
    /// Write each miss as one JSON object per line (the fields of `late_activations[]` in
    /// `trace analyze --json`) to FILE as it happens; `-` for stdout in place of the text
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// bpf (filtered in the kernel), tracefs, or auto: bpf when it loads, else tracefs
    #[arg(long, default_value = "auto", value_parser = ["auto", "bpf", "tracefs"])]
    pub recorder: String,
    /// Judge deadlines by the program's own cycle starts: `jack` or PATH:SYMBOL (see `trace
    /// record --cycle-marker`)
    #[arg(long, value_name = "SPEC")]
    pub cycle_marker: Option<String>,
    /// With --cycle-marker: where a thread's cycle work ends (see `trace record
    /// --work-done-marker`)
    #[arg(long, value_name = "SPEC", requires = "cycle_marker")]
    pub work_done_marker: Option<String>,
    /// Compare with PipeWire's own count (its profiler, through `pw-profiler`) even when the
    /// program does not look like a PipeWire client yet, and fail when the count cannot be had;
    /// by default it is compared whenever the program has libpipewire mapped
    #[arg(long, conflicts_with = "no_pipewire")]
    pub pipewire: bool,
    /// Never ask PipeWire for its count
    #[arg(long)]
    pub no_pipewire: bool,
    /// When comparing with PipeWire's count, infer the cycle instead of judging by PipeWire's
    /// own (`--cycle-marker pipewire` is taken by default then)
    #[arg(long)]
    pub no_pipewire_marker: bool,
    /// Write the summary (misses, culprits, verdict, PipeWire's count) as JSON to FILE at the
    /// end (`-` for stdout); opened before watching
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Start this command and watch it (after `--`)
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// Where the misses go as they happen (`--json`) and the summary at the end
/// (`--summary-json`), both opened before watching, so a bad path fails at once.
struct Outputs {
    json: Option<Box<dyn std::io::Write>>,
    json_to_stdout: bool,
    summary_json: Option<rtlab_store::output::PendingOutput>,
    /// The first error writing `--json` (a closed pipe ends the lines quietly).
    write_error: Option<std::io::Error>,
}

impl Outputs {
    fn open(args: &WatchArgs) -> anyhow::Result<Outputs> {
        let json_to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
        let json: Option<Box<dyn std::io::Write>> = match &args.json {
            None => None,
            Some(_) if json_to_stdout => Some(Box::new(std::io::stdout())),
            Some(path) => Some(Box::new(std::io::LineWriter::new(
                std::fs::File::create(path).map_err(|error| {
                    crate::exit::input(format!("--json {}: {error}", path.display()))
                })?,
            ))),
        };
        let summary_json = args
            .summary_json
            .as_deref()
            .map(|path| rtlab_store::output::PendingOutput::prepare(path, "--summary-json"))
            .transpose()?;
        Ok(Outputs {
            json,
            json_to_stdout,
            summary_json,
            write_error: None,
        })
    }

    /// Counts one window's misses and prints each: a line, or a JSON object on `--json`.
    fn window(&mut self, summary: &mut WatchSummary, report: &TraceReport) {
        let start = summary.first_ns.unwrap_or(report.first_ns);
        let label = rtlab_render::apptrace_words::culprit_label;
        watch::count_window(summary, report, label, |late, _, need| {
            if !self.json_to_stdout {
                let shown = watch::watched_miss(late, need, start);
                println!("{}", rtlab_render::watch::miss_line(&shown));
            }
            if let Some(json) = &mut self.json {
                let late = rtlab_render::apptrace_json::LateActivationJson::of(late);
                let line = serde_json::to_string(&late).expect("a late activation serialises");
                if let Err(error) = writeln!(json, "{line}") {
                    self.write_error.get_or_insert(error);
                }
            }
        });
    }
}

/// The target the flags name.
fn target_of(args: &WatchArgs) -> Target {
    match (&args.pid, &args.comm) {
        (Some(pid), _) => Target::Pid(*pid),
        (None, Some(name)) => Target::Comm(name.clone()),
        (None, None) => Target::Command(args.command.clone()),
    }
}

/// A PipeWire client compared with PipeWire's count is judged by PipeWire's cycle, unless told
/// otherwise (`--no-pipewire-marker`) or given a marker.
fn judged_by(
    cycle_marker: Option<CycleMarker>,
    pipewire: Option<&PipewireWatch>,
    no_pipewire_marker: bool,
) -> Option<CycleMarker> {
    match (cycle_marker, pipewire) {
        (None, Some(_)) if !no_pipewire_marker => {
            match rtlab_trace::cycle_marker::resolve(rtlab_trace::cycle_marker::PIPEWIRE_PRESET) {
                Ok(marker) => {
                    eprintln!(
                        "rtlab: a PipeWire client: judged by PipeWire's cycle (--cycle-marker \
                         pipewire, {}); --no-pipewire-marker to infer it",
                        marker.describe()
                    );
                    Some(marker)
                }
                Err(error) => {
                    eprintln!("rtlab: PipeWire's cycle marker: {error}; inferring the cycle");
                    None
                }
            }
        }
        (marker, _) => marker,
    }
}

/// `--recorder`'s word as the recording's choice.
pub(crate) fn recorder_choice(recorder: &str) -> RecorderChoice {
    match recorder {
        "bpf" => RecorderChoice::Bpf,
        "tracefs" => RecorderChoice::Tracefs,
        _ => RecorderChoice::Auto,
    }
}

pub fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let cycle_marker = super::trace_markers::cycle_marker_flag(args.cycle_marker.as_deref())?;
    let work_done_marker =
        super::trace_markers::work_done_marker_flag(args.work_done_marker.as_deref())?;
    let target = target_of(&args);
    let mut outputs = Outputs::open(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    if let (Target::Comm(name), true) = (&target, args.wait) {
        if !watch::comm_running(name) {
            eprintln!("rtlab: waiting for a process named {name:?} …");
        }
        if !watch::wait_for_comm(name, &stop) {
            return Ok(crate::exit::finished(true));
        }
    }
    let wish = match (args.pipewire, args.no_pipewire) {
        (true, _) => PipewireWish::Required,
        (_, true) => PipewireWish::Never,
        _ => PipewireWish::Auto,
    };
    // Before the recording starts, so PipeWire's window holds rtlab's.
    let pipewire = rtlab_trace::watch_pipewire::start(&target, wish)
        .map_err(|error| anyhow::Error::new(error).context("--pipewire: PipeWire's count"))?;
    let cycle_marker = judged_by(cycle_marker, pipewire.as_ref(), args.no_pipewire_marker);
    if !outputs.json_to_stdout {
        eprintln!(
            "rtlab: watching {} for deadline misses (Ctrl-C for the summary) …",
            target.describe()
        );
    }
    let end = EndWatcher::start(&target, Arc::clone(&stop));
    let config = WatchConfig {
        target: &target,
        duration: args
            .duration
            .map(|duration| Duration::from_nanos(duration.0)),
        window_ns: DEFAULT_WINDOW_NS,
        recorder: recorder_choice(&args.recorder),
        markers: Markers {
            cycle: cycle_marker.as_ref(),
            work_done: work_done_marker.as_ref(),
        },
    };
    let mut summary = WatchSummary::default();
    let recorded = watch::watch_windows(&config, end.record_stop(), |report| {
        outputs.window(&mut summary, &report)
    });
    if let Some(error) = outputs.write_error.take() {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(anyhow::Error::new(error).context("writing --json"));
        }
    }
    end.finish();
    let window = summary.first_ns.map(|first| (first, summary.last_ns));
    let pipewire =
        pipewire.map(|watch| watch.finish(window, summary.misses, summary.top_reservable()));
    recorded.map_err(super::trace_markers::record_error)?;
    let interrupted = stop.load(Ordering::SeqCst);
    finish(outputs, &summary, &target, pipewire, interrupted)
}

/// Prints the summary (on stderr when stdout carries JSON) and writes `--summary-json`.
fn finish(
    mut outputs: Outputs,
    summary: &WatchSummary,
    target: &Target,
    pipewire: Option<rtlab_core::pipewire_count::PipewireComparison>,
    interrupted: bool,
) -> anyhow::Result<ExitCode> {
    if let Some(json) = &mut outputs.json {
        json.flush().context("writing --json")?;
    }
    let reserve_flag = watch::reserve_flag(target);
    let mut text =
        rtlab_render::watch::summary(summary, &target.describe(), reserve_flag.as_deref());
    if let Some(comparison) = &pipewire {
        text.push_str(&rtlab_render::pipewire::comparison(comparison));
    }
    if let Some(output) = outputs.summary_json {
        let to_stdout = output.is_stdout();
        let verdict = rtlab_render::watch::verdict(summary, reserve_flag.as_deref());
        output
            .commit_json(
                SUMMARY_SCHEMA,
                None,
                &summary.to_json(target.describe(), interrupted, verdict, pipewire),
            )
            .context("writing --summary-json")?;
        if to_stdout {
            eprint!("{text}");
            return Ok(crate::exit::finished(interrupted));
        }
    }
    if outputs.json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    Ok(crate::exit::finished(interrupted))
}
