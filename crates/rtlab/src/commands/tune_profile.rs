//! `rtlab tune --apply` (the kept settings as a boot profile), the profile half of `--revert`,
//! and the two hidden entry points the profile's units run: `--apply-profile` (what sysctl cannot
//! hold, at boot) and `--hold-cpu-dma-latency` (a process keeping `/dev/cpu_dma_latency` at 0).
//! The files and their contents are rtlab-tune's (`profile.rs`); this module checks root, tells
//! systemd when it runs, and says what was done.

use rtlab_core::header::OutputHeader;
use rtlab_core::tune_report::TuneReport;
use rtlab_tune::profile::{self, KeptSetting, LiveKernel, ProfileState, Which};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn is_root() -> bool {
    rtlab_sys::users::effective_uid() == 0
}

/// True when systemd is PID 1 (sd_booted(3)'s test) and the profile is the system's own (not
/// under `RTLAB_TUNE_PROFILE_ROOT`): only then is systemctl told.
fn systemd_manages(root: &Path) -> bool {
    root == Path::new("/") && Path::new("/run/systemd/system").is_dir()
}

/// `systemctl ARGS…`; its failure is reported, not fatal (the files are what persist).
fn systemctl(args: &[&str], text: &mut String) {
    match Command::new("systemctl").args(args).output() {
        Ok(output) if output.status.success() => {}
        Ok(output) => text.push_str(&format!(
            "warning: systemctl {} failed: {}\n",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => text.push_str(&format!("warning: systemctl {}: {error}\n", args.join(" "))),
    }
}

/// Before measuring, so that `--apply` fails in the first second: root, no profile already
/// there, and the profile's directories can be made. Returns the profile's root.
pub fn prepare_apply() -> anyhow::Result<PathBuf> {
    if !is_root() {
        anyhow::bail!(
            "--apply: writing a boot profile and changing kernel settings needs root (run it with sudo)"
        );
    }
    let root = profile::root_directory();
    if profile::read_state(&root)?.is_some() {
        anyhow::bail!(
            "--apply: a tune profile already exists ({}); rtlab tune --revert removes it first",
            root.join(profile::STATE_FILE).display()
        );
    }
    let tuned_file = root.join(rtlab_tune::tuned::TUNED_FILE);
    if tuned_file.exists() {
        anyhow::bail!(
            "--apply: {} exists but no rtlab tune profile does (no {}); it is not rtlab's to write over: remove it first",
            tuned_file.display(),
            root.join(profile::STATE_FILE).display()
        );
    }
    for file in [
        profile::STATE_FILE,
        profile::SYSCTL_FILE,
        profile::PROFILE_FILES[1],
    ] {
        let directory = root.join(file);
        let directory = directory.parent().expect("a profile file has a directory");
        std::fs::create_dir_all(directory).map_err(|error| {
            anyhow::anyhow!("--apply: cannot make {}: {error}", directory.display())
        })?;
    }
    Ok(root)
}

/// A report `rtlab tune --json` wrote (`--apply-from`); a file that is not one is an input error.
/// `schema_expected` is the one `--json` writes (`tune::TUNE_SCHEMA`).
pub fn read_report(path: &Path, schema_expected: &str) -> anyhow::Result<TuneReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| crate::exit::input(format!("--apply-from {}: {error}", path.display())))?;
    let schema = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|document| document["schema"].as_str().map(str::to_owned));
    if schema.as_deref() != Some(schema_expected) {
        return Err(crate::exit::input(format!(
            "--apply-from {}: not an rtlab tune report (schema {}, expected {})",
            path.display(),
            schema.as_deref().unwrap_or("missing"),
            schema_expected
        )));
    }
    serde_json::from_str(&text)
        .map_err(|error| crate::exit::input(format!("--apply-from {}: {error}", path.display())))
}

/// After measuring: writes the kept settings (not the placebo) as the profile under `root`,
/// puts its values in force now, and returns what to print.
pub fn apply(report: &TuneReport, root: &Path) -> anyhow::Result<String> {
    let mut text = String::from("\n");
    if report.interrupted {
        text.push_str("--apply: interrupted, so no profile was written\n");
        return Ok(text);
    }
    if report
        .settings
        .iter()
        .any(|setting| setting.placebo && setting.kept)
    {
        text.push_str("--apply: the placebo was kept (noise, see docs/tune.md); it is never part of a profile\n");
    }
    let kept: Vec<KeptSetting> = report
        .settings
        .iter()
        .filter(|setting| setting.kept && !setting.placebo)
        .map(|setting| {
            Ok(KeptSetting {
                setting: rtlab_tune::SettingName::parse(&setting.name)?,
                effect: setting.effect.as_ref().map_or_else(
                    || "(no effect recorded)".to_owned(),
                    |effect| profile::effect_words(effect, report.confidence),
                ),
            })
        })
        .collect::<Result<_, rtlab_tune::TuneError>>()?;
    if kept.is_empty() {
        text.push_str(
            "--apply: no setting was kept, so no profile was written (nothing changes at boot)\n",
        );
        return Ok(text);
    }
    let rtlab = std::env::current_exe()
        .map_err(|error| anyhow::anyhow!("--apply: where is the rtlab binary? {error}"))?;
    let header = OutputHeader::now(profile::STATE_SCHEMA, Some(rtlab_sys::host::describe(None)));
    let state = ProfileState::from_kept(
        &kept,
        &report.housekeeping_cpus,
        &LiveKernel,
        &rtlab,
        header,
    )?;
    let written = profile::write_profile(root, &state)?;
    let (applied, refused) = profile::apply_values(&state, Which::All, &mut LiveKernel);
    let refused_settings: Vec<&String> = refused
        .iter()
        .filter(|refusal| !refusal.starts_with("irq/"))
        .collect();
    if !refused_settings.is_empty() {
        // Leave nothing half-done: the values back, the files gone.
        let reverted = profile::revert_profile(root, &state, &mut LiveKernel)?;
        anyhow::bail!(
            "--apply: the kernel refused {} now, so the profile was removed again{}",
            refused_settings
                .iter()
                .map(|refusal| refusal.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            if reverted.failed.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} could not be put back; rtlab tune --revert tries again)",
                    reverted.failed.join("; ")
                )
            }
        );
    }
    text.push_str(&format!(
        "--apply: kept {}; written:\n",
        state
            .settings
            .iter()
            .map(|setting| setting.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for path in &written {
        text.push_str(&format!("  {}\n", path.display()));
    }
    if !applied.is_empty() {
        text.push_str(&format!("in force now: {}\n", applied.join(", ")));
    }
    if !refused.is_empty() {
        text.push_str(&format!(
            "refused by the kernel (left as they were): {}\n",
            refused.join(", ")
        ));
    }
    if written
        .iter()
        .any(|path| path.ends_with(rtlab_tune::tuned::TUNED_FILE))
    {
        text.push_str(&format!(
            "tuned is installed: the same settings are its profile {0} (tuned-adm profile {0} selects it; the files above hold them at boot without tuned)\n",
            rtlab_tune::tuned::TUNED_PROFILE
        ));
    }
    let units = state.units();
    if systemd_manages(root) {
        systemctl(&["daemon-reload"], &mut text);
        if units.contains(&profile::HOLDER_UNIT) {
            systemctl(&["start", profile::HOLDER_UNIT], &mut text);
            text.push_str(&format!(
                "cpu_dma_latency is held at 0 by {} from now on\n",
                profile::HOLDER_UNIT
            ));
        }
    } else if units.contains(&profile::HOLDER_UNIT) {
        text.push_str(&format!(
            "cpu_dma_latency is held at 0 by {} from the next boot on (systemd does not manage this system now, so it was not started)\n",
            profile::HOLDER_UNIT
        ));
    }
    text.push_str("undo: rtlab tune --revert\n");
    Ok(text)
}

/// The profile half of `rtlab tune --revert`: what to print. Stops the units when systemd runs,
/// puts back every recorded value, removes the files.
pub fn revert() -> anyhow::Result<String> {
    let root = profile::root_directory();
    let state_path = root.join(profile::STATE_FILE);
    let state = profile::read_state(&root).map_err(|error| {
        anyhow::anyhow!(
            "{error} (nothing was reverted; remove the profile's files by hand: {})",
            profile::PROFILE_FILES
                .iter()
                .map(|file| root.join(file).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let Some(state) = state else {
        return Ok(format!(
            "no tune profile to remove ({} does not exist)\n",
            state_path.display()
        ));
    };
    let mut text = String::new();
    let tuned_selected = rtlab_tune::tuned::tuned_selects_rtlab(&root);
    let units = state.units();
    let managed = systemd_manages(&root);
    if managed && !units.is_empty() {
        let mut stop = vec!["stop"];
        stop.extend(units.iter().copied());
        systemctl(&stop, &mut text);
    }
    let reverted = profile::revert_profile(&root, &state, &mut LiveKernel)?;
    if managed {
        systemctl(&["daemon-reload"], &mut text);
    } else if !units.is_empty() {
        text.push_str(&format!(
            "systemd does not manage this system now: {} removed as files only (nothing to stop)\n",
            units.join(", ")
        ));
    }
    text.push_str("profile removed:\n");
    for path in &reverted.removed {
        text.push_str(&format!("  {}\n", path.display()));
    }
    if !reverted.restored.is_empty() {
        text.push_str(&format!(
            "put back as before the profile: {}\n",
            reverted.restored.join(", ")
        ));
    }
    if tuned_selected {
        text.push_str(&format!(
            "warning: tuned's active profile was {0}, now removed: select another (tuned-adm profile NAME, or tuned-adm off)\n",
            rtlab_tune::tuned::TUNED_PROFILE
        ));
    }
    if !reverted.failed.is_empty() {
        crate::output::print(&text)?;
        anyhow::bail!(
            "could not put back {}; {} stays for the next rtlab tune --revert",
            reverted.failed.join("; "),
            state_path.display()
        );
    }
    Ok(text)
}

/// `rtlab tune --apply-profile` (run by rtlab-tune.service at boot): writes the profile's values
/// sysctl cannot hold. IRQs that refuse an affinity are said, not fatal; any other refusal is.
pub fn apply_at_boot() -> anyhow::Result<ExitCode> {
    let root = profile::root_directory();
    let Some(state) = profile::read_state(&root)? else {
        crate::output::print(&format!(
            "no tune profile ({} does not exist): nothing to apply\n",
            root.join(profile::STATE_FILE).display()
        ))?;
        return Ok(ExitCode::SUCCESS);
    };
    let (applied, refused) = profile::apply_values(&state, Which::NotSysctl, &mut LiveKernel);
    let mut text = format!(
        "applied: {}\n",
        if applied.is_empty() {
            "nothing (sysctl holds the rest)".to_owned()
        } else {
            applied.join(", ")
        }
    );
    if !refused.is_empty() {
        text.push_str(&format!("refused: {}\n", refused.join(", ")));
    }
    crate::output::print(&text)?;
    if refused.iter().any(|refusal| !refusal.starts_with("irq/")) {
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
