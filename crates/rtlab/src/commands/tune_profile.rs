//! `rtlab tune --apply` (the kept settings as a boot profile), the profile half of `--revert`,
//! and the two hidden entry points the profile's units run: `--apply-profile` (what sysctl cannot
//! hold, at boot) and `--hold-cpu-dma-latency` (a process keeping `/dev/cpu_dma_latency` at 0).
//! The steps are rtlab-tune's (`profile_apply.rs`: root checked, systemd told when it runs; the
//! files and their contents `profile.rs`, `--apply-from`'s report read back `report_file.rs`),
//! the words rtlab-render's (`tune_profile.rs`); this module prints.

use rtlab_core::tune_profile::ProfileReverted;
use rtlab_core::tune_report::TuneReport;
use rtlab_tune::profile::{self, LiveKernel, Which};
use rtlab_tune::profile_apply::{self, ProfileError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A profile step's error: rtlab-tune's own errors as they are (their kind decides the exit
/// code), the rest in their words.
fn profile_error(error: ProfileError) -> anyhow::Error {
    match error {
        ProfileError::Tune(error) => anyhow::Error::new(error),
        other => anyhow::Error::msg(other.to_string()),
    }
}

/// Before measuring, so that `--apply` fails in the first second: root, no profile already
/// there, and the profile's directories can be made. Returns the profile's root.
pub fn prepare_apply() -> anyhow::Result<PathBuf> {
    profile_apply::prepare_apply().map_err(profile_error)
}

/// A report `rtlab tune --json` wrote (`--apply-from`); a file that is not one is an input error.
pub fn read_report(path: &Path) -> anyhow::Result<TuneReport> {
    rtlab_tune::report_file::read_report(path)
        .map_err(|error| crate::exit::input(format!("--apply-from {}: {error}", path.display())))
}

/// After measuring: writes the kept settings (not the placebo) as the profile under `root`,
/// puts its values in force now, and returns what to print.
pub fn apply(report: &TuneReport, root: &Path) -> anyhow::Result<String> {
    let applied = profile_apply::apply(report, root).map_err(profile_error)?;
    Ok(rtlab_render::tune_profile::applied(&applied))
}

/// The profile half of `rtlab tune --revert`: what to print. Stops the units when systemd runs,
/// puts back every recorded value, removes the files.
pub fn revert() -> anyhow::Result<String> {
    let reverted = profile_apply::revert().map_err(profile_error)?;
    let text = rtlab_render::tune_profile::reverted(&reverted);
    if let ProfileReverted::Removed(removed) = &reverted {
        if !removed.failed.is_empty() {
            crate::output::print(&text)?;
            anyhow::bail!(
                "could not put back {}; {} stays for the next rtlab tune --revert",
                removed.failed.join("; "),
                removed.state_file.display()
            );
        }
    }
    Ok(text)
}

/// `rtlab tune --apply-profile` (run by rtlab-tune.service at boot): writes the profile's values
/// sysctl cannot hold. IRQs that refuse an affinity are said, not fatal; any other refusal is.
pub fn apply_at_boot() -> anyhow::Result<ExitCode> {
    let root = profile::root_directory();
    let Some(state) = profile::read_state(&root)? else {
        let state_file = root.join(profile::STATE_FILE);
        crate::output::print(&rtlab_render::tune_profile::nothing_at_boot(&state_file))?;
        return Ok(ExitCode::SUCCESS);
    };
    let (applied, refused) = profile::apply_values(&state, Which::NotSysctl, &mut LiveKernel);
    crate::output::print(&rtlab_render::tune_profile::applied_at_boot(
        &applied, &refused,
    ))?;
    if profile::refused_beyond_irqs(&refused) {
        anyhow::bail!("--apply-profile: the kernel refused a setting of the profile (above)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `rtlab tune --hold-cpu-dma-latency` (run by rtlab-tune-cpu-dma-latency.service): holds
/// `/dev/cpu_dma_latency` at 0 until SIGINT or SIGTERM; the request ends with the process.
pub fn hold_cpu_dma_latency() -> anyhow::Result<ExitCode> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    rtlab_sys::signals::install_flag_only(&stop)
        .map_err(|error| anyhow::anyhow!("installing the SIGINT/SIGTERM handler: {error}"))?;
    let _guard = rtlab_sys::dma_latency::DmaLatencyGuard::hold(0)
        .map_err(|error| anyhow::anyhow!("{}: {error}", rtlab_sys::dma_latency::PATH))?;
    crate::output::print(&format!(
        "holding {} at 0 until SIGTERM\n",
        rtlab_sys::dma_latency::PATH
    ))?;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    Ok(ExitCode::SUCCESS)
}
