//! `rtlab timers --change-experiment` and the hidden `rtlab timers-changer`: paper 004's pair.

use super::{
    base_record, commit_svg, last_online_cpu, micros, open_store, prepare_svgs, store_and_write,
    write_study, Args,
};
use crate::output::PendingOutput;
use anyhow::Context as _;
use rtlab_analysis::timers::change_findings;
use rtlab_core::timer_study::TimerStudy;
use rtlab_core::Nanos;
use rtlab_probe::timers::change::{self, ChangeConfig};
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `rtlab timers-changer` (hidden): the change experiment's other process.
#[derive(Debug, clap::Args)]
pub struct ChangerArgs {}

pub(super) fn write_change_experiment(
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

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // The changer must open /dev/cpu_dma_latency and write another task's
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

/// The hidden changer: serves commands from stdin until told to quit or stdin closes.
pub fn run_changer(_args: ChangerArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    change::serve_changer(stdin.lock(), stdout.lock()).context("serving the change experiment")?;
    Ok(ExitCode::SUCCESS)
}
