//! `rtlab forecast`: what a run's latency distribution means for applications with `n` buffers of
//! `t` ms — the mean time to buffer underrun (paper 002 §5), a table over buffer counts like its
//! Figures 6-7, the least buffering that reaches a target, and a plain verdict per class.

use crate::output::PendingOutput;
use rtlab_analysis::application::{AppClock, Counting};
use rtlab_analysis::classes::{builtin_classes, parse_classes, Rate};
use rtlab_analysis::forecast::Model;
use rtlab_analysis::forecast_study::{study, ForecastRequest, RequestField};
use rtlab_core::Nanos;
use std::path::PathBuf;
use std::process::ExitCode;

/// The `schema` of `rtlab forecast --json`.
pub const FORECAST_SCHEMA: &str = "rtlab.forecast/1";

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModelArg {
    /// Stalls per second that make the chain's wake-up or the compute miss the slack, one
    /// failure per stall (needs the probe's own series; else per-period)
    Response,
    /// One wake-up per buffer period: MTTF = t / P(late)
    PerPeriod,
    /// Paper 002 §5: MTTF = (n−1)·t / P(late), exact for double buffering only
    Paper002,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CountsArg {
    /// One failure per stall: the program restarts its cycle (JACK, PipeWire)
    Restart,
    /// One failure per period a stall made late: the program catches up (a ring buffer fed by
    /// a timer)
    CatchUp,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum AppClockArg {
    /// A sound card's clock or an absolute timer: it runs on through a stall
    Device,
    /// A clock kept by a thread that resumes from now after a stall (JACK's dummy driver)
    StopsWithCpus,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run id (or unique prefix, or `latest`) from `rtlab history`, or a Run record JSON file
    #[arg(required_unless_present = "trace")]
    pub run: Option<String>,
    /// Forecast from the application's own trace (an `rtlab trace record` file or a trace-cmd
    /// trace.dat): its periodic real-time thread's late activations at its recorded buffering,
    /// and at other buffer counts and sizes
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "run", "class", "classes_file", "buffers", "buffer_ms", "compute_ms", "series", "target",
        "model", "chain", "counts", "app_clock",
    ])]
    pub trace: Option<PathBuf>,
    /// With --trace: the audio sample rate (e.g. 48000), to show periods in frames
    #[arg(long, value_name = "HZ", requires = "trace", conflicts_with = "run", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: Option<u32>,
    /// With --trace: which periodic real-time thread (default: the most urgent)
    #[arg(long, value_name = "TID", requires = "trace", conflicts_with = "run")]
    pub tid: Option<i32>,
    /// Forecast for one application class (see the list with no --class); exit 1 if unsuitable
    #[arg(long, value_name = "NAME", conflicts_with_all = ["buffers", "buffer_ms"])]
    pub class: Option<String>,
    /// More classes, from a TOML file of [[class]] tables (name, buffers, buffer, compute, acceptable)
    #[arg(long, value_name = "FILE")]
    pub classes_file: Option<PathBuf>,
    /// Number of buffers n (with --buffer-ms)
    #[arg(long, value_name = "N", requires = "buffer_ms")]
    pub buffers: Option<u32>,
    /// Length of one buffer t, the wake-up period (e.g. 4ms)
    #[arg(long = "buffer", alias = "buffer-ms", value_name = "T", value_parser = crate::flags::millis_time)]
    pub buffer_ms: Option<Nanos>,
    /// Compute time per buffer c (e.g. 500us)
    #[arg(long = "compute", alias = "compute-ms", value_name = "C", value_parser = crate::flags::millis_time)]
    pub compute_ms: Option<Nanos>,
    /// Which series to read (default: rt-high/wakeup pooled over CPUs)
    #[arg(long, value_name = "CLASS/METRIC")]
    pub series: Option<String>,
    /// Find the least buffering whose MTTF reaches this rate (1/day, 1/hour, 1/10min)
    #[arg(long, value_name = "RATE", value_parser = crate::flags::rate)]
    pub target: Option<Rate>,
    /// How failures per wake-up become failures per second
    #[arg(long, value_enum, default_value = "response")]
    pub model: ModelArg,
    /// Threads in the application's wake-up chain, each on its own CPU (a JACK or PipeWire
    /// client: 2, woken by the server's driver thread; default: the class's, else 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub chain: Option<u32>,
    /// How the application counts the failures one stall costs it: restart (one per stall: it
    /// restarts its cycle, as JACK does) or catch-up (one per period the stall made late: a
    /// ring buffer fed by a timer) (default: the class's, else restart)
    #[arg(long, value_enum, value_name = "HOW")]
    pub counts: Option<CountsArg>,
    /// Whether the application's clock runs on while every CPU is taken (device: a sound card,
    /// an absolute timer) or stops with them (stops-with-cpus: a clock kept by a thread, as
    /// JACK's dummy driver's) (default: the class's, else device)
    #[arg(long, value_enum, value_name = "CLOCK")]
    pub app_clock: Option<AppClockArg>,
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    if let Some(file) = &args.trace {
        #[cfg(target_os = "linux")]
        {
            let request = super::forecast_trace::TraceRequest {
                file,
                sample_rate: args.rate,
                tid: args.tid,
            };
            return super::forecast_trace::run(request, json);
        }
        // An application's trace (rtlab trace, trace.dat) is read on Linux only.
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (json, args.rate, args.tid);
            return Err(crate::exit::input(format!(
                "--trace {}: forecasting from an application's trace is available on Linux only",
                file.display()
            )));
        }
    }
    let run = args
        .run
        .as_deref()
        .expect("clap requires a run without --trace");
    let record = super::load_record(run)?;
    let model = match args.model {
        ModelArg::Response => Model::Response,
        ModelArg::PerPeriod => Model::PerPeriod,
        ModelArg::Paper002 => Model::Paper002,
    };
    let mut classes = builtin_classes();
    if let Some(path) = &args.classes_file {
        let text = std::fs::read_to_string(path).map_err(|error| {
            crate::exit::input(format!("--classes-file {}: {error}", path.display()))
        })?;
        let extra = parse_classes(&text)
            .map_err(|error| crate::exit::input(format!("{}: {error}", path.display())))?;
        for class in extra {
            classes.retain(|existing| existing.name != class.name);
            classes.push(class);
        }
    }
    let request = ForecastRequest {
        series: args.series.clone(),
        model,
        classes,
        class: args.class.clone(),
        buffer_period: args.buffer_ms,
        buffers: args.buffers,
        compute: args.compute_ms,
        target: args.target,
        chain: args.chain,
        counting: args.counts.map(|counts| match counts {
            CountsArg::Restart => Counting::Restart,
            CountsArg::CatchUp => Counting::CatchUp,
        }),
        clock: args.app_clock.map(|clock| match clock {
            AppClockArg::Device => AppClock::Device,
            AppClockArg::StopsWithCpus => AppClock::StopsWithCpus,
        }),
    };
    let output = study(&record, &request).map_err(|error| {
        let text = match error.field() {
            Some(RequestField::Series) => format!("{run}: {error}"),
            Some(RequestField::Class) => format!("--class: {error}"),
            Some(RequestField::BufferPeriod) => format!("--buffer-ms: {error}"),
            Some(RequestField::Buffers) => format!("--buffers: {error}"),
            None => error.to_string(),
        };
        crate::exit::input(text)
    })?;
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&rtlab_render::forecast::report(&output))?;
    }
    if let Some(json) = json {
        json.commit_json(FORECAST_SCHEMA, Some(record.host.clone()), &output)?;
    }
    Ok(crate::exit::checked(output.passed))
}
