//! `rtlab trace watch`: a program's deadline misses (late activations) live, one line each with
//! its culprit, the thread's period and CPU need; at the end (duration, the program's exit or
//! Ctrl-C) the misses per minute, the culprits ranked by the time they took, and a one-line
//! verdict. The work is `rtlab_trace::watch`'s (a recording analysed window by window, the
//! misses counted into a `rtlab_core::watch_summary`; whose cycle a PipeWire client is judged by,
//! `rtlab_trace::watch_pipewire::judged_by`), the words `rtlab_render::watch`'s, `--json`'s lines
//! `rtlab_store::output::JsonLines`; this module holds the flags and the printing.

use anyhow::Context as _;
use clap::Args as ClapArgs;
use rtlab_core::watch_summary::{WatchSummary, SUMMARY_SCHEMA};
use rtlab_store::output::{JsonLines, PendingOutput};
use rtlab_trace::analyze::report::TraceReport;
use rtlab_trace::live::DEFAULT_WINDOW_NS;
use rtlab_trace::record::{RecorderChoice, Target};
use rtlab_trace::watch::{self, EndWatcher, Markers, WatchConfig};
use rtlab_trace::watch_pipewire::{self, PipewireWish};
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
    #[arg(long, default_value = "auto", value_parser = crate::flags::recorder())]
    pub recorder: RecorderChoice,
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
    json: Option<JsonLines>,
    json_to_stdout: bool,
    summary_json: Option<PendingOutput>,
}

impl Outputs {
    fn open(args: &WatchArgs) -> anyhow::Result<Outputs> {
        let json = args
            .json
            .as_deref()
            .map(|path| {
                JsonLines::open(path).map_err(|error| {
                    crate::exit::input(format!("--json {}: {error}", path.display()))
                })
            })
            .transpose()?;
        let summary_json = args
            .summary_json
            .as_deref()
            .map(|path| PendingOutput::prepare(path, "--summary-json"))
            .transpose()?;
        Ok(Outputs {
            json_to_stdout: json.as_ref().is_some_and(JsonLines::is_stdout),
            json,
            summary_json,
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
                json.line(&serde_json::to_string(&late).expect("a late activation serialises"));
            }
        });
    }
}

pub fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let cycle_marker = super::trace_markers::cycle_marker_flag(args.cycle_marker.as_deref())?;
    let work_done_marker =
        super::trace_markers::work_done_marker_flag(args.work_done_marker.as_deref())?;
    let target = Target::from_flags(args.pid, args.comm.as_deref(), &args.command);
    let mut outputs = Outputs::open(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    if let (Target::Comm(name), true) = (&target, args.wait) {
        if !watch::comm_running(name) {
            eprint!("{}", rtlab_render::watch::waiting_for(name));
        }
        if !watch::wait_for_comm(name, &stop) {
            return Ok(crate::exit::finished(true));
        }
    }
    let wish = PipewireWish::from_flags(args.pipewire, args.no_pipewire);
    // Before the recording starts, so PipeWire's window holds rtlab's.
    let pipewire = watch_pipewire::start(&target, wish)
        .map_err(|error| anyhow::Error::new(error).context("--pipewire: PipeWire's count"))?;
    let (cycle_marker, judged) =
        watch_pipewire::judged_by(cycle_marker, pipewire.is_some(), args.no_pipewire_marker);
    if let Some(judged) = &judged {
        eprint!("{}", rtlab_render::pipewire::cycle_note(judged));
    }
    if !outputs.json_to_stdout {
        eprint!("{}", rtlab_render::watch::watching(&target.describe()));
    }
    let end = EndWatcher::start(&target, Arc::clone(&stop));
    let config = WatchConfig {
        target: &target,
        duration: args
            .duration
            .map(|duration| Duration::from_nanos(duration.0)),
        window_ns: DEFAULT_WINDOW_NS,
        recorder: args.recorder,
        markers: Markers {
            cycle: cycle_marker.as_ref(),
            work_done: work_done_marker.as_ref(),
        },
    };
    let mut summary = WatchSummary::default();
    let recorded = watch::watch_windows(&config, end.record_stop(), |report| {
        outputs.window(&mut summary, &report)
    });
    if let Some(error) = outputs.json.as_mut().and_then(JsonLines::take_error) {
        return Err(anyhow::Error::new(error).context("writing --json"));
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
    let text = rtlab_render::watch::summary_with(
        summary,
        &target.describe(),
        reserve_flag.as_deref(),
        pipewire.as_ref(),
    );
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
