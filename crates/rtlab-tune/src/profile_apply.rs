//! `rtlab tune --apply` (the kept settings as a boot profile) and the profile half of
//! `--revert`, as steps: the checks before measuring ([`prepare_apply`]: root, no profile already
//! there, its directories made), the profile written and put in force ([`apply`]), removed
//! ([`revert`]), systemd told when it runs the system. The files and their contents are
//! `profile.rs`'s; what was done is returned as `rtlab_core::tune_profile`'s plain data, which
//! rtlab-render writes out.

use crate::profile::{self, KeptSetting, LiveKernel, ProfileState, Which};
use crate::TuneError;
use rtlab_core::header::OutputHeader;
use rtlab_core::tune_profile::{ProfileApplied, ProfileRemoved, ProfileReverted, ProfileWritten};
use rtlab_core::tune_report::TuneReport;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why `--apply` or `--revert` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "--apply: writing a boot profile and changing kernel settings needs root (run it with sudo)"
    )]
    NotRoot,
    #[error("--apply: a tune profile already exists ({}); rtlab tune --revert removes it first", .0.display())]
    Exists(PathBuf),
    #[error("--apply: {} exists but no rtlab tune profile does (no {}); it is not rtlab's to write over: remove it first", .tuned.display(), .state.display())]
    TunedExists { tuned: PathBuf, state: PathBuf },
    #[error("--apply: cannot make {}: {error}", .directory.display())]
    CannotMake {
        directory: PathBuf,
        error: std::io::Error,
    },
    #[error("--apply: where is the rtlab binary? {0}")]
    NoBinary(std::io::Error),
    /// The kernel refused a setting now: the profile was removed again.
    #[error(
        "--apply: the kernel refused {refused} now, so the profile was removed again{not_put_back}"
    )]
    Refused {
        refused: String,
        not_put_back: String,
    },
    /// The state file cannot be read: nothing was reverted.
    #[error("{error} (nothing was reverted; remove the profile's files by hand: {files})")]
    Unreadable { error: TuneError, files: String },
    #[error(transparent)]
    Tune(#[from] TuneError),
}

fn is_root() -> bool {
    rtlab_sys::users::effective_uid() == 0
}

/// True when systemd is PID 1 (sd_booted(3)'s test) and the profile is the system's own (not
/// under `RTLAB_TUNE_PROFILE_ROOT`): only then is systemctl told.
fn systemd_manages(root: &Path) -> bool {
    root == Path::new("/") && Path::new("/run/systemd/system").is_dir()
}

/// `systemctl ARGS…`; its failure is a warning line, not fatal (the files are what persist).
fn systemctl(args: &[&str]) -> Option<String> {
    match Command::new("systemctl").args(args).output() {
        Ok(output) if output.status.success() => None,
        Ok(output) => Some(format!(
            "warning: systemctl {} failed: {}\n",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Some(format!("warning: systemctl {}: {error}\n", args.join(" "))),
    }
}

/// Before measuring, so that `--apply` fails in the first second: root, no profile already
/// there, and the profile's directories can be made. Returns the profile's root.
pub fn prepare_apply() -> Result<PathBuf, ProfileError> {
    if !is_root() {
        return Err(ProfileError::NotRoot);
    }
    let root = profile::root_directory();
    if profile::read_state(&root)?.is_some() {
        return Err(ProfileError::Exists(root.join(profile::STATE_FILE)));
    }
    let tuned_file = root.join(crate::tuned::TUNED_FILE);
    if tuned_file.exists() {
        return Err(ProfileError::TunedExists {
            tuned: tuned_file,
            state: root.join(profile::STATE_FILE),
        });
    }
    for file in [
        profile::STATE_FILE,
        profile::SYSCTL_FILE,
        profile::PROFILE_FILES[1],
    ] {
        let directory = root.join(file);
        let directory = directory.parent().expect("a profile file has a directory");
        std::fs::create_dir_all(directory).map_err(|error| ProfileError::CannotMake {
            directory: directory.to_owned(),
            error,
        })?;
    }
    Ok(root)
}

/// The kept settings of `report` (not the placebo), each with its effect in words.
fn kept_settings(report: &TuneReport) -> Result<Vec<KeptSetting>, TuneError> {
    report
        .settings
        .iter()
        .filter(|setting| setting.kept && !setting.placebo)
        .map(|setting| {
            Ok(KeptSetting {
                setting: crate::SettingName::parse(&setting.name)?,
                effect: setting.effect.as_ref().map_or_else(
                    || "(no effect recorded)".to_owned(),
                    |effect| profile::effect_words(effect, report.confidence),
                ),
            })
        })
        .collect()
}

/// After measuring: writes the kept settings (not the placebo) as the profile under `root` and
/// puts its values in force now; a value the kernel refuses (but an IRQ's affinity) removes the
/// profile again.
pub fn apply(report: &TuneReport, root: &Path) -> Result<ProfileApplied, ProfileError> {
    if report.interrupted {
        return Ok(ProfileApplied::Interrupted);
    }
    let placebo_kept = report
        .settings
        .iter()
        .any(|setting| setting.placebo && setting.kept);
    let kept = kept_settings(report)?;
    if kept.is_empty() {
        return Ok(ProfileApplied::NothingKept { placebo_kept });
    }
    let rtlab = std::env::current_exe().map_err(ProfileError::NoBinary)?;
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
        return Err(ProfileError::Refused {
            refused: refused_settings
                .iter()
                .map(|refusal| refusal.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            not_put_back: if reverted.failed.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} could not be put back; rtlab tune --revert tries again)",
                    reverted.failed.join("; ")
                )
            },
        });
    }
    let tuned_written = written
        .iter()
        .any(|path| path.ends_with(crate::tuned::TUNED_FILE));
    let units = state.units();
    let holder_unit = units
        .contains(&profile::HOLDER_UNIT)
        .then(|| profile::HOLDER_UNIT.to_owned());
    let managed = systemd_manages(root);
    let (reload_warning, start_warning) = if managed {
        let reload = systemctl(&["daemon-reload"]);
        let start = holder_unit
            .as_ref()
            .and_then(|_| systemctl(&["start", profile::HOLDER_UNIT]));
        (reload, start)
    } else {
        (None, None)
    };
    Ok(ProfileApplied::Written(ProfileWritten {
        placebo_kept,
        kept: state
            .settings
            .iter()
            .map(|setting| setting.name.clone())
            .collect(),
        written,
        applied,
        refused,
        tuned_profile: tuned_written.then(|| crate::tuned::TUNED_PROFILE.to_owned()),
        systemd_manages: managed,
        reload_warning,
        holder_unit,
        start_warning,
    }))
}

/// The profile half of `rtlab tune --revert`: stops the units when systemd runs, puts back every
/// recorded value, removes the files. A value that could not be put back is in `failed`, and the
/// state file stays for the next `--revert`.
pub fn revert() -> Result<ProfileReverted, ProfileError> {
    let root = profile::root_directory();
    let state_path = root.join(profile::STATE_FILE);
    let state = profile::read_state(&root).map_err(|error| ProfileError::Unreadable {
        error,
        files: profile::PROFILE_FILES
            .iter()
            .map(|file| root.join(file).display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let Some(state) = state else {
        return Ok(ProfileReverted::NoProfile {
            state_file: state_path,
        });
    };
    let tuned_selected = crate::tuned::tuned_selects_rtlab(&root);
    let units = state.units();
    let managed = systemd_manages(&root);
    let stop_warning = if managed && !units.is_empty() {
        let mut stop = vec!["stop"];
        stop.extend(units.iter().copied());
        systemctl(&stop)
    } else {
        None
    };
    let reverted = profile::revert_profile(&root, &state, &mut LiveKernel)?;
    let reload_warning = if managed {
        systemctl(&["daemon-reload"])
    } else {
        None
    };
    Ok(ProfileReverted::Removed(ProfileRemoved {
        stop_warning,
        systemd_manages: managed,
        reload_warning,
        units: units.iter().map(|unit| (*unit).to_owned()).collect(),
        removed: reverted.removed,
        restored: reverted.restored,
        failed: reverted.failed,
        tuned_was_selected: tuned_selected.then(|| crate::tuned::TUNED_PROFILE.to_owned()),
        state_file: state_path,
    }))
}
