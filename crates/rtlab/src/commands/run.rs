//! `rtlab run`: the standard latency study. The flags become a `rtlab_session::RunConfig`; the
//! session measures and returns the Run record; this module shows progress, prints the summary,
//! writes the requested files and stores the run.

use crate::exit;
use crate::output::{PendingOutput, RecordOutputs};
use anyhow::Context as _;
use rtlab_analysis::tail::UsageModel;
use rtlab_core::Nanos;
use rtlab_explain::EventSet;
use rtlab_probe::{Class, ProbeConfig};
use rtlab_session::{
    ExplainConfig, LoadRequest, RecorderChoice, RunConfig, Session, SessionError, SessionProgress,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to measure, after warm-up (e.g. 10s, 5m, 2h)
    #[arg(short = 'D', long, default_value = "60s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    #[command(flatten)]
    pub cpus: crate::flags::CpusArgs,
    /// Classes to measure: rt-high (SCHED_FIFO 90), rt-mid (SCHED_FIFO 50), normal (SCHED_OTHER)
    #[arg(long, value_delimiter = ',', default_value = "rt-high,rt-mid,normal")]
    pub classes: Vec<Class>,
    /// Wake-up period of every measuring thread (e.g. 1ms, 250us)
    #[arg(long, default_value = "1ms", value_parser = crate::flags::duration)]
    pub period: Nanos,
    /// Time to run before samples count (caches, frequency, first faults)
    #[arg(long, default_value = "1s", value_parser = crate::flags::duration)]
    pub warmup: Nanos,
    /// Hold /dev/cpu_dma_latency at this during the run (e.g. 10us; 0 keeps CPUs out of idle
    /// states)
    #[arg(long, value_name = "TIME", value_parser = crate::flags::dma_latency_us)]
    pub cpu_dma_latency: Option<i32>,
    /// Work this long after every rt-high wake-up and record the response series (wake-up +
    /// compute + what interrupted it), what `rtlab forecast` needs for an application that
    /// computes (e.g. 820us); costs that share of each CPU
    #[arg(long, value_name = "TIME", value_parser = crate::flags::positive_duration)]
    pub compute: Option<Nanos>,
    /// Skip the hand-off series (a waiter thread per class woken by the rt-high timer thread)
    #[arg(long)]
    pub no_handoff: bool,
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
    /// Write the wake-up histograms in cyclictest's --histfile format
    #[arg(long, value_name = "FILE")]
    pub histfile: Option<PathBuf>,
    /// Number of 1 µs buckets in --histfile (cyclictest's -h)
    #[arg(long, value_name = "US", default_value_t = 10_000)]
    pub histogram: usize,
    /// Print the times between wake-ups in 100 µs bins (paper 000, Tables 2-3)
    #[arg(long)]
    pub intervals: bool,
    /// How many of the largest samples each series keeps with their times
    #[arg(long, default_value_t = 4096, hide = true)]
    pub keep_peaks: usize,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub explain: ExplainArgs,
    #[command(flatten)]
    pub show: super::run_show::ShowArgs,
}

/// Loads and competitors (`rtlab_session::LoadRequest`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LoadArgs {
    /// Load during measurement, comma-separated: a profile (office, workstation, gaming, web,
    /// build, none) and/or stressors KIND[:N | :P% | :N@P%] with KIND one of cpu, memory, io, net,
    /// fork, timers, cache (e.g. cpu:50%,io:4)
    #[arg(long, value_name = "SPEC[,SPEC…]")]
    pub load: Option<String>,
    /// Run this shell command as extra load (own process group, stopped as a group at the end)
    #[arg(long, value_name = "CMD")]
    pub load_cmd: Option<String>,
    /// Add a thread spinning at POLICY:PRIO[@CPU] for the whole run (fifo:10@1, rr:5,
    /// other:-10 for nice -10); repeatable
    #[arg(long, value_name = "POLICY:PRIO[@CPU]")]
    pub competitor: Vec<String>,
    /// Usage model of the tail projection: hours of use per day and days per week
    /// [default: the profile's, else 24h/day,7d/week]
    #[arg(long, value_name = "Nh/day,Nd/week", value_parser = crate::flags::usage)]
    pub usage: Option<UsageModel>,
    /// Run RT competitors even when RT throttling is off (sched_rt_runtime_us = -1)
    #[arg(long)]
    pub force: bool,
}

/// Explaining late wake-ups (`rtlab_session::ExplainConfig`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ExplainArgs {
    /// Record kernel events (BPF or tracefs) and explain every late wake-up: which IRQ, softirq, timer or
    /// task ran instead, and what time went unaccounted
    #[arg(long)]
    pub explain: bool,
    /// Explain wake-ups later than this (e.g. 150us) [default: each series' p99.9 after warm-up]
    #[arg(long, value_name = "TIME", requires = "explain", value_parser = crate::flags::explain_threshold)]
    pub explain_above: Option<Nanos>,
    /// Also sample kernel call stacks (perf cpu-clock) on the measured CPUs and attach the one
    /// caught inside each episode
    #[arg(long, requires = "explain")]
    pub stacks: bool,
    /// Which kernel events to record: `standard` (what attribution needs) or `full` (adds
    /// sched_wakeup, sched_migrate_task, hrtimer_start and the local timer interrupt; costs the
    /// probe more, see BENCHMARKS.md)
    #[arg(long, default_value = "standard", value_parser = crate::flags::event_set(), requires = "explain")]
    pub explain_events: EventSet,
    /// Which recorder: `bpf` (programs on the scheduler and interrupt tracepoints; hands over only
    /// late wake-ups), `tracefs` (a private trace instance), or `auto`: bpf when it loads, else
    /// tracefs with the reason
    #[arg(long, default_value = "auto", value_parser = crate::flags::recorder(), requires = "explain")]
    pub explain_recorder: RecorderChoice,
}

impl ExplainArgs {
    /// The explain session's settings, when `--explain` is given.
    pub fn config(&self) -> Option<ExplainConfig> {
        self.explain.then_some(ExplainConfig {
            threshold: self.explain_above,
            stacks: self.stacks,
            events: self.explain_events,
            recorder: self.explain_recorder,
        })
    }
}

impl Args {
    fn run_config(&self) -> RunConfig {
        RunConfig {
            probe: ProbeConfig {
                cpus: self
                    .cpus
                    .list
                    .as_ref()
                    .map(|cpus| cpus.0.clone())
                    .unwrap_or_default(),
                classes: self.classes.clone(),
                period: self.period,
                duration: self.duration,
                warmup: self.warmup,
                handoff: !self.no_handoff,
                peaks_per_series: self.keep_peaks,
                cpu_dma_latency_us: self.cpu_dma_latency,
                compute: self.compute,
            },
            load: LoadRequest {
                load: self.load.load.clone(),
                load_cmd: self.load.load_cmd.clone(),
                competitor: self.load.competitor.clone(),
                usage: self.load.usage,
                force: self.load.force,
            },
            explain: self.explain.config(),
            cmdline: std::env::args().collect(),
        }
    }
}

/// A session error naming the flag it is about.
fn session_error(error: SessionError) -> anyhow::Error {
    let setting = match &error {
        SessionError::Load(load) => load.field().map(|field| field.name()),
        SessionError::Probe(probe) => probe.setting(),
        _ => None,
    };
    crate::flags::naming_flag(error, setting)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let outputs = RecordOutputs::open(&args.record)?;
    let histfile_output = args
        .histfile
        .as_deref()
        .map(|path| PendingOutput::prepare(path, "--histfile"))
        .transpose()?;
    let session = Session::new(args.run_config()).map_err(session_error)?;
    let stop = super::stop_flag()?;
    let total_ms = (args.warmup.as_u64() + args.duration.as_u64()) / 1_000_000;
    let mut progress = ProgressDisplay {
        bar: crate::output::terminal_bar(total_ms),
    };
    let record = session
        .with_stop_flag(stop)
        .run(&mut progress)
        .map_err(session_error)?;
    // The summary, extra reports, then the verdict block.
    let mut unsuitable = false;
    if !outputs.json_to_stdout() {
        let extra =
            rtlab_render::run_verdict::extra_reports(&record, args.intervals, args.explain.explain);
        unsuitable = super::run_show::print_end(&record, &args.show, &extra)?;
    }
    if let Some(output) = histfile_output {
        let text = rtlab_core::export::record_histfile(&record, args.histogram)
            .context("decoding a histogram")?;
        output.commit(&text)?;
    }
    let summary = rtlab_session::summary_line(&record);
    outputs.finish(&record, &summary, args.show.quiet)?;
    Ok(if record.interrupted {
        exit::finished(true)
    } else {
        exit::checked(!unsuitable)
    })
}

/// The progress bar: elapsed, samples, running max; drawn only when stdout is a terminal.
struct ProgressDisplay {
    bar: Option<indicatif::ProgressBar>,
}

impl rtlab_session::Observer for ProgressDisplay {
    /// Poll often when a bar is drawn; otherwise the session wakes rarely, to stay out of the way.
    fn poll_interval(&self) -> Duration {
        if self.bar.is_some() {
            Duration::from_millis(100)
        } else {
            Duration::from_millis(250)
        }
    }

    fn progress(&mut self, progress: &SessionProgress) {
        let Some(bar) = &self.bar else { return };
        // The bar spans warm-up plus measurement, in ms.
        bar.set_position(progress.elapsed_ns / 1_000_000);
        if progress.warming_up {
            bar.set_message("warming up");
        } else {
            bar.set_message(rtlab_render::summary::progress(
                progress.samples,
                progress.max_wakeup_ns,
            ));
        }
    }

    fn measured(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
