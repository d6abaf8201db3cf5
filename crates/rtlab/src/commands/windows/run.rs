//! `rtlab run` on Windows: measuring threads per class (rt-high, mmcss, normal) on
//! high-resolution waitable timers. The flags become a `WindowsRunConfig`; the session measures
//! and returns the same Run record as on Linux; this module prints, writes and stores it.
//! Linux-only flags are accepted only to say plainly that they are not available here.

use crate::exit;
use crate::output::RecordOutputs;
use rtlab_core::Nanos;
use rtlab_probe::windows::run::{WindowsClass, WindowsProbeConfig};
use rtlab_render::windows_absent::LinuxOnlyRunOption;
use rtlab_session::windows::{AnnounceOnce, WindowsRunConfig};
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to measure, after warm-up (e.g. 10s, 5m, 2h)
    #[arg(short = 'D', long, default_value = "60s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    /// Classes to measure: rt-high (TIME_CRITICAL in REALTIME_PRIORITY_CLASS, else HIGH),
    /// mmcss (the "Pro Audio" MMCSS task), normal
    #[arg(long, value_delimiter = ',', default_value = "rt-high,mmcss,normal")]
    pub classes: Vec<WindowsClass>,
    /// The CPU the measuring threads are pinned to (default: the last)
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Wake-up period of every measuring thread (e.g. 1ms, 500us)
    #[arg(long, default_value = "1ms", value_parser = crate::flags::duration)]
    pub period: Nanos,
    /// Time to run before samples count (caches, frequency, first faults)
    #[arg(long, default_value = "1s", value_parser = crate::flags::duration)]
    pub warmup: Nanos,
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
    /// Print the times between wake-ups in 100 µs bins (paper 000, Tables 2-3)
    #[arg(long)]
    pub intervals: bool,
    /// How many of the largest samples each series keeps with their times
    #[arg(long, default_value_t = 4096, hide = true)]
    pub keep_peaks: usize,
    /// Linux only (tracefs); refused here with the reason
    #[arg(long, hide = true)]
    pub explain: bool,
    /// Linux only; refused here with the reason
    #[arg(long, hide = true, value_name = "SPEC")]
    pub load: Option<String>,
    /// Linux only; refused here with the reason
    #[arg(long, hide = true, value_name = "CMD")]
    pub load_cmd: Option<String>,
    /// Linux only; refused here with the reason
    #[arg(long, hide = true, value_name = "POLICY:PRIO")]
    pub competitor: Vec<String>,
    /// Linux only; refused here with the reason
    #[arg(long, hide = true, value_name = "TIME")]
    pub cpu_dma_latency: Option<String>,
    /// Linux only; refused here with the reason
    #[arg(long, hide = true, value_name = "FILE")]
    pub histfile: Option<PathBuf>,
}

/// The first Linux-only option given.
fn linux_only_option(args: &Args) -> Option<LinuxOnlyRunOption> {
    LinuxOnlyRunOption::first_given(
        args.explain,
        args.load.is_some() || args.load_cmd.is_some() || !args.competitor.is_empty(),
        args.cpu_dma_latency.is_some(),
        args.histfile.is_some(),
    )
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(option) = linux_only_option(&args) {
        return Err(exit::input(option.refusal()));
    }
    let outputs = RecordOutputs::open(&args.record)?;
    let mut classes = args.classes.clone();
    classes.dedup();
    let config = WindowsRunConfig {
        probe: WindowsProbeConfig {
            classes,
            cpu: args.cpu.unwrap_or_else(rtlab_session::windows::last_cpu),
            period: args.period,
            duration: args.duration,
            warmup: args.warmup,
            peaks_per_series: args.keep_peaks,
        },
        cmdline: std::env::args().collect(),
    };
    let stop = super::stop_flag()?;
    let total = Nanos(args.warmup.as_u64() + args.duration.as_u64());
    let terminal = std::io::stderr().is_terminal();
    let mut progress = AnnounceOnce(
        terminal.then_some(|| eprintln!("{}", rtlab_render::summary::measuring_for(total))),
    );
    let record = rtlab_session::windows::run(&config, stop, &mut progress).map_err(|error| {
        let setting = error.setting();
        crate::flags::naming_flag(error, setting)
    })?;
    // The summary tables, not the Linux verdict block (its advice names Linux flags and
    // cyclictest): `rtlab forecast` gives the per-class verdicts on either platform.
    if !outputs.json_to_stdout() {
        let extra = rtlab_render::run_verdict::extra_reports(&record, args.intervals, false);
        crate::output::print(&(rtlab_render::summary::summary(&record) + &extra))?;
    }
    outputs.finish(&record, &rtlab_session::summary_line(&record), false)?;
    Ok(exit::finished(record.interrupted))
}
