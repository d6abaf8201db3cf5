//! `rtlab tune`: the machine's real-time settings, each changed alone and measured, kept only if
//! it helps beyond noise, everything put back at the end. The work is rtlab-tune's; this module
//! holds the flags, the progress bar and the printing.

use super::tune_profile;
use crate::exit;
use crate::output::PendingOutput;
use rtlab_core::Nanos;
use rtlab_tune::{Figure, TuneConfig, TuneObserver};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Measure only these settings (comma-separated names, as the inventory lists them; e.g.
    /// cpu_dma_latency,timer_migration,placebo)
    #[arg(long, value_name = "NAME[,NAME…]", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Measure every setting but these
    #[arg(long, value_name = "NAME[,NAME…]", value_delimiter = ',')]
    pub skip: Vec<String>,
    #[command(flatten)]
    pub cpus: crate::flags::CpusArgs,
    /// The whole measurement's time: shared out into rounds unless --round is given; settings
    /// that would not fit are not measured
    #[arg(long, default_value = "10m", value_parser = crate::flags::positive_duration)]
    pub budget: Nanos,
    /// Length of one round (one arm of one A/B pair) [default: the budget shared out, at least 2s]
    #[arg(long, value_name = "TIME", value_parser = crate::flags::positive_duration)]
    pub round: Option<Nanos>,
    /// A/B pairs per setting, interleaved (ABBA…)
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Time each round runs before samples count
    #[arg(long, default_value = "1s", value_parser = crate::flags::duration)]
    pub warmup: Nanos,
    /// The rt-high wake-up figure each setting is judged on: p50, p90, p99, p99.9
    #[arg(long, default_value = "p99", value_parser = Figure::parse)]
    pub figure: Figure,
    /// Confidence of every bootstrap interval, in percent
    #[arg(long, value_name = "PERCENT", default_value_t = 95.0, value_parser = crate::flags::confidence)]
    pub confidence: f64,
    /// Also count this running program's own deadline misses in every round (as `rtlab trace
    /// watch --comm COMM` counts them) and judge each setting by them too: kept when the probe or
    /// the program is better beyond noise and the other is not worse
    #[arg(long, value_name = "COMM", conflicts_with_all = ["inventory", "revert", "apply_from"])]
    pub app: Option<String>,
    /// With --app: judge the program's deadlines by its own cycle starts, `jack` or PATH:SYMBOL
    /// (see `rtlab trace record --cycle-marker`); default: the cycle inferred from its wake-ups
    #[arg(long, value_name = "SPEC", requires = "app")]
    pub cycle_marker: Option<String>,
    /// List the settings only: change and measure nothing
    #[arg(long, conflicts_with_all = ["revert", "apply"])]
    pub inventory: bool,
    /// After measuring, make the settings kept last: in force now and at every boot, as a profile (a
    /// sysctl.d file and systemd units under /etc, and the tuned profile rtlab when /etc/tuned
    /// exists; the values before in /var/lib/rtlab/tune-profile.json). Needs root; rtlab tune
    /// --revert undoes it
    #[arg(long, conflicts_with_all = ["revert"])]
    pub apply: bool,
    /// Write the profile --apply would from a report an earlier `rtlab tune --json FILE` wrote
    /// (its kept settings, its housekeeping CPUs), without measuring again. Needs root
    #[arg(long, value_name = "REPORT", conflicts_with_all = ["revert", "apply", "inventory", "only", "skip"])]
    pub apply_from: Option<PathBuf>,
    /// Put back what a killed rtlab tune left changed (from its journal), and remove the profile
    /// --apply wrote, putting back the values it recorded; then exit
    #[arg(long)]
    pub revert: bool,
    /// Apply the profile's settings sysctl cannot hold (what rtlab-tune.service runs at boot)
    #[arg(long, hide = true, exclusive = true)]
    pub apply_profile: bool,
    /// Hold /dev/cpu_dma_latency at 0 until SIGTERM (what the profile's holder unit runs)
    #[arg(long, hide = true, exclusive = true)]
    pub hold_cpu_dma_latency: bool,
    #[command(flatten)]
    pub json: crate::output::JsonArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.hold_cpu_dma_latency {
        return tune_profile::hold_cpu_dma_latency();
    }
    if args.apply_profile {
        return tune_profile::apply_at_boot();
    }
    if let Some(report) = &args.apply_from {
        let root = tune_profile::prepare_apply()?;
        let report = tune_profile::read_report(report)?;
        crate::output::print(tune_profile::apply(&report, &root)?.trim_start())?;
        return Ok(ExitCode::SUCCESS);
    }
    let state_dir = PathBuf::from(rtlab_tune::journal::STATE_DIR);
    if args.revert {
        let repaired = rtlab_tune::revert(&state_dir)?;
        crate::output::print(&rtlab_render::tune::put_back(&repaired))?;
        crate::output::print(&tune_profile::revert()?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let settings = rtlab_tune::catalogue::select(&args.only, &args.skip).map_err(|error| {
        exit::input(format!(
            "{}: {error}",
            if args.only.is_empty() {
                "--skip"
            } else {
                "--only"
            }
        ))
    })?;
    if settings.is_empty() && !args.inventory {
        return Err(exit::input("--only/--skip: no setting left to measure"));
    }
    let app = args
        .app
        .as_deref()
        .map(|comm| super::tune_app::WatchedApp::new(comm, args.cycle_marker.as_deref()))
        .transpose()?;
    let json = args
        .json
        .json
        .as_deref()
        .map(PendingOutput::json)
        .transpose()?;
    let profile_root = args.apply.then(tune_profile::prepare_apply).transpose()?;
    let config = TuneConfig {
        settings,
        cpus: args.cpus.list.as_ref().map(|cpus| cpus.0.clone()),
        round: args.round,
        rounds: args.rounds,
        warmup: args.warmup,
        period: Nanos(1_000_000),
        budget: args.budget,
        figure: args.figure,
        confidence: args.confidence / 100.0,
        measure: !args.inventory,
        state_dir,
        cmdline: std::env::args().collect(),
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Every SIGINT/SIGTERM only sets the flag: the settings must be put back however often the
    // user asks to stop.
    rtlab_sys::signals::install_flag_only(&stop)
        .map_err(|error| anyhow::anyhow!("installing the SIGINT/SIGTERM handler: {error}"))?;
    let mut progress = Progress {
        bar: crate::output::terminal_bar(0),
    };
    let report = rtlab_tune::tune(
        &config,
        app.as_ref().map(|app| app as &dyn rtlab_tune::AppWatcher),
        &mut progress,
        &stop,
    )
    .map_err(|error| {
        if error.is_input() {
            exit::input(error)
        } else {
            anyhow::Error::new(error)
        }
    })?;
    progress.finish();
    let to_stdout = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if !to_stdout {
        crate::output::print(&rtlab_render::tune::report(&report, args.inventory))?;
    }
    // The report first: a profile that cannot be written must not cost the measurement.
    if let Some(json) = json {
        json.commit_json(
            rtlab_tune::report_file::SCHEMA,
            Some(rtlab_sys::host::describe(None)),
            &report,
        )?;
    }
    if let Some(root) = &profile_root {
        let text = tune_profile::apply(&report, root)?;
        if to_stdout {
            eprint!("{text}");
        } else {
            crate::output::print(&text)?;
        }
    }
    Ok(exit::finished(report.interrupted))
}

/// The progress bar: the planned measuring time, the setting being measured; drawn only on a
/// terminal.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl TuneObserver for Progress {
    fn planned(&mut self, total_ns: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total_ns / 1_000_000);
        }
    }

    fn setting(&mut self, name: &str, index: usize, count: usize) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{name} ({} of {count})", index + 1));
        }
    }

    fn elapsed(&mut self, elapsed_ns: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(elapsed_ns / 1_000_000);
        }
    }
}
