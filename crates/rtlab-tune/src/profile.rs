//! `rtlab tune --apply` and the profile half of `--revert`: the settings a tune kept, written as a
//! profile the system applies at every boot, with the values they had before recorded so that
//! `--revert` can put them back.
//!
//! What sysctl can hold goes to a sysctl.d file; the rest (transparent hugepages, khugepaged, the
//! workqueue cpumask, IRQ affinities) to a oneshot unit, `rtlab-tune.service`, that runs
//! `rtlab tune --apply-profile`; a kept `cpu_dma_latency` to a simple unit whose process,
//! `rtlab tune --hold-cpu-dma-latency`, keeps `/dev/cpu_dma_latency` open at 0. Each unit is
//! enabled by its `multi-user.target.wants` link, made here as `systemctl enable` would make it,
//! so the profile works whether or not systemd runs now. Beside them the state file
//! (`/var/lib/rtlab/tune-profile.json`) records every value before and in the profile.
//!
//! When tuned is installed, a tuned profile holding the same settings is written too
//! ([`crate::tuned`]).
//!
//! Every file is written atomically (a temporary file renamed over it); an error removes what the
//! call wrote. The files live under a root directory (`/`, or `RTLAB_TUNE_PROFILE_ROOT` for tests
//! and packagers), and the kernel is reached through [`KernelSettings`], so everything but the
//! real kernel writes can be tested in a temporary directory. Which files a profile has is fixed
//! here ([`PROFILE_FILES`]), never read from the state file, so a state file cannot make
//! `--revert` remove anything else.

use crate::catalogue::SettingName;
use crate::error::TuneError;
use rtlab_core::header::OutputHeader;
use rtlab_core::tune_report::SettingEffect;
use rtlab_sys::tunables::Knob;
use serde::{Deserialize, Serialize};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// The environment variable that moves the profile's root directory away from `/` (tests,
/// packagers building an image).
pub const ROOT_ENV: &str = "RTLAB_TUNE_PROFILE_ROOT";
/// The state file's schema.
pub const STATE_SCHEMA: &str = "rtlab.tune-profile/1";
/// Each file of a profile, relative to the root.
pub const STATE_FILE: &str = "var/lib/rtlab/tune-profile.json";
pub const SYSCTL_FILE: &str = "etc/sysctl.d/60-rtlab-tune.conf";
pub const APPLY_UNIT: &str = "rtlab-tune.service";
pub const HOLDER_UNIT: &str = "rtlab-tune-cpu-dma-latency.service";
const UNIT_DIR: &str = "etc/systemd/system";
const WANTS_DIR: &str = "etc/systemd/system/multi-user.target.wants";

/// Every file a profile may have, relative to the root; the state file last, so a revert that
/// stops half-way still finds it.
pub const PROFILE_FILES: [&str; 7] = [
    SYSCTL_FILE,
    "etc/systemd/system/multi-user.target.wants/rtlab-tune.service",
    "etc/systemd/system/multi-user.target.wants/rtlab-tune-cpu-dma-latency.service",
    "etc/systemd/system/rtlab-tune.service",
    "etc/systemd/system/rtlab-tune-cpu-dma-latency.service",
    crate::tuned::TUNED_FILE,
    STATE_FILE,
];

/// The profile's root directory: [`ROOT_ENV`] when set, else `/`.
pub fn root_directory() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// Reading and writing the kernel's settings: the real files, or a fake in tests.
pub trait KernelSettings {
    fn read(&self, knob: Knob) -> io::Result<String>;
    fn write(&mut self, knob: Knob, value: &str) -> io::Result<()>;
    /// The IRQs with an affinity file.
    fn irqs(&self) -> io::Result<Vec<u32>>;
}

/// The running kernel's files.
pub struct LiveKernel;

impl KernelSettings for LiveKernel {
    fn read(&self, knob: Knob) -> io::Result<String> {
        knob.read()
    }
    fn write(&mut self, knob: Knob, value: &str) -> io::Result<()> {
        knob.write(value)
    }
    fn irqs(&self) -> io::Result<Vec<u32>> {
        rtlab_sys::tunables::irqs()
    }
}

/// One kernel file of a kept setting: its value before the profile and in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobValue {
    /// A [`Knob::id`]: `timer_migration`, `irq/24`, …
    pub knob: String,
    pub before: String,
    pub profile: String,
}

/// A kept setting as the profile holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileSetting {
    /// The setting's name ([`SettingName::name`]).
    pub name: String,
    /// What was measured, in words, e.g. `p99 140.0 -> 57.0 us (-59 %, 95 % interval -65 % to -52 %)`.
    pub effect: String,
    /// The files it sets; none for `cpu_dma_latency`, which is a process holding a file open.
    pub values: Vec<KnobValue>,
}

/// The state file: what the profile sets and what each value was before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileState {
    #[serde(flatten)]
    pub header: OutputHeader,
    /// How to undo it.
    pub undo: String,
    /// The rtlab binary the units run.
    pub rtlab: String,
    pub settings: Vec<ProfileSetting>,
}

/// A setting the tune kept, with its measured effect.
#[derive(Clone, Debug)]
pub struct KeptSetting {
    pub setting: SettingName,
    pub effect: String,
}

/// `p99 140.0 -> 57.0 us (-59 %, 95 % interval -65 % to -52 %)`.
pub fn effect_words(effect: &SettingEffect, confidence: f64) -> String {
    let micros = |nanos: u64| format!("{:.1}", nanos as f64 / 1000.0);
    let percent = |fraction: f64| format!("{:+.0} %", fraction * 100.0);
    let interval = match effect.relative_ci {
        Some([low, high]) => format!(
            ", {:.0} % interval {} to {}",
            confidence * 100.0,
            percent(low),
            percent(high)
        ),
        None => String::new(),
    };
    format!(
        "{} {} -> {} us ({}{interval})",
        effect.figure,
        micros(effect.before_ns),
        micros(effect.after_ns),
        percent(effect.relative)
    )
}

/// The sysctl key of a knob that is a sysctl (`kernel.timer_migration`), else `None`.
pub fn sysctl_key(knob: Knob) -> Option<String> {
    knob.sysctl_key()
}

impl ProfileState {
    /// The profile of `kept`, each value before read from `kernel` now (after the tune put every
    /// setting back); `rtlab` is the binary the units run.
    pub fn from_kept(
        kept: &[KeptSetting],
        housekeeping_cpus: &[usize],
        kernel: &dyn KernelSettings,
        rtlab: &Path,
        header: OutputHeader,
    ) -> Result<ProfileState, TuneError> {
        let mut settings = Vec::new();
        for kept in kept {
            let setting = kept.setting;
            let knobs: Vec<(Knob, String)> = match setting {
                SettingName::Placebo => continue,
                SettingName::CpuDmaLatency => Vec::new(),
                SettingName::File(knob) => vec![(
                    knob,
                    setting
                        .tried_value(housekeeping_cpus)
                        .expect("a one-file setting has a value to try"),
                )],
                SettingName::IrqAffinity => {
                    let cpus = housekeeping_cpus
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(",");
                    kernel
                        .irqs()
                        .map_err(|source| TuneError::Setting {
                            setting: setting.name().into(),
                            source,
                        })?
                        .into_iter()
                        .map(|irq| (Knob::IrqAffinity(irq), cpus.clone()))
                        .collect()
                }
            };
            let mut values = Vec::new();
            for (knob, profile) in knobs {
                let before = match kernel.read(knob) {
                    Ok(before) => before,
                    // An IRQ without a readable affinity is one the tune did not move either.
                    Err(_) if matches!(knob, Knob::IrqAffinity(_)) => continue,
                    Err(source) => {
                        return Err(TuneError::Setting {
                            setting: setting.name().into(),
                            source,
                        })
                    }
                };
                values.push(KnobValue {
                    knob: knob.id(),
                    before,
                    profile,
                });
            }
            settings.push(ProfileSetting {
                name: setting.name().into(),
                effect: kept.effect.clone(),
                values,
            });
        }
        let rtlab = rtlab.display().to_string();
        check_rtlab_path(&rtlab).map_err(|reason| TuneError::Profile {
            path: rtlab.clone(),
            reason,
        })?;
        Ok(ProfileState {
            header,
            undo: "rtlab tune --revert".into(),
            rtlab,
            settings,
        })
    }

    /// Every knob of the profile with its two values, checked: a state file names only rtlab's
    /// knobs and plain values.
    fn knobs(&self) -> impl Iterator<Item = (Knob, &KnobValue)> {
        self.settings.iter().flat_map(|setting| {
            setting.values.iter().map(|value| {
                (
                    Knob::from_id(&value.knob).expect("checked when read"),
                    value,
                )
            })
        })
    }

    fn holds_cpu_dma_latency(&self) -> bool {
        self.settings
            .iter()
            .any(|setting| setting.name == SettingName::CpuDmaLatency.name())
    }

    /// The units the profile has: rtlab-tune.service when a kept value is not a sysctl, the
    /// holder when cpu_dma_latency was kept.
    pub fn units(&self) -> Vec<&'static str> {
        let mut units = Vec::new();
        if self.knobs().any(|(knob, _)| sysctl_key(knob).is_none()) {
            units.push(APPLY_UNIT);
        }
        if self.holds_cpu_dma_latency() {
            units.push(HOLDER_UNIT);
        }
        units
    }

    /// The comment every file begins with (`prefix` `#`): who wrote it, when, the measured
    /// effects and how to undo it.
    fn header_comment(&self) -> String {
        let mut text = format!(
            "# Written by rtlab tune --apply (rtlab {}) at {}.\n# Kept because each lowered the real-time wake-up latency beyond noise, measured alone:\n",
            one_line(&self.header.tool_version),
            one_line(&self.header.started_at)
        );
        for setting in &self.settings {
            text.push_str(&format!(
                "#   {}: {}\n",
                one_line(&setting.name),
                one_line(&setting.effect)
            ));
        }
        text.push_str(&format!(
            "# Undo: rtlab tune --revert (removes this profile and puts back the values recorded in /{STATE_FILE}).\n"
        ));
        text
    }

    /// The sysctl.d file, or `None` when no kept value is a sysctl.
    pub fn sysctl_text(&self) -> Option<String> {
        let lines: Vec<String> = self
            .knobs()
            .filter_map(|(knob, value)| {
                Some(format!("{} = {}\n", sysctl_key(knob)?, value.profile))
            })
            .collect();
        (!lines.is_empty()).then(|| format!("{}{}", self.header_comment(), lines.concat()))
    }

    /// `rtlab-tune.service`: applies at boot what sysctl cannot hold.
    pub fn apply_unit_text(&self) -> String {
        format!(
            "{}[Unit]
Description=rtlab tune profile: the kept settings sysctl cannot hold
Documentation=man:rtlab-tune(1)
ConditionPathExists=/{STATE_FILE}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={} tune --apply-profile
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateNetwork=yes
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
",
            self.header_comment(),
            self.rtlab
        )
    }

    /// `rtlab-tune-cpu-dma-latency.service`: a process holding `/dev/cpu_dma_latency` at 0.
    pub fn holder_unit_text(&self) -> String {
        format!(
            "{}[Unit]
Description=rtlab tune profile: hold /dev/cpu_dma_latency at 0 (CPUs stay out of deep idle states)
Documentation=man:rtlab-tune(1)

[Service]
Type=simple
ExecStart={} tune --hold-cpu-dma-latency
Restart=on-failure
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateNetwork=yes
PrivateTmp=yes
DevicePolicy=closed
DeviceAllow=/dev/cpu_dma_latency rw

[Install]
WantedBy=multi-user.target
",
            self.header_comment(),
            self.rtlab
        )
    }

    /// The tuned profile's `tuned.conf` ([`crate::tuned`]), for a tuned that has the `[irq]`
    /// plugin or not (`irq_plugin`).
    pub fn tuned_text(&self, irq_plugin: bool) -> String {
        let kept: Vec<&str> = self
            .settings
            .iter()
            .map(|setting| setting.name.as_str())
            .collect();
        let values: Vec<(Knob, &str)> = self
            .knobs()
            .map(|(knob, value)| (knob, value.profile.as_str()))
            .collect();
        crate::tuned::tuned_text(
            &self.header_comment(),
            &kept,
            self.holds_cpu_dma_latency(),
            &values,
            irq_plugin,
        )
    }

    /// The state file's text.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a profile serialises");
        text.push('\n');
        text
    }

    /// A state file's text, checked: its schema, and only rtlab's settings, knobs and plain
    /// values (anything else would make `--apply-profile` or `--revert` write what rtlab never
    /// changed).
    pub fn parse(text: &str) -> Result<ProfileState, String> {
        let state: ProfileState =
            serde_json::from_str(text).map_err(|error| format!("not a tune profile: {error}"))?;
        if state.header.schema != STATE_SCHEMA {
            return Err(format!(
                "schema '{}', expected '{STATE_SCHEMA}'",
                state.header.schema
            ));
        }
        for setting in &state.settings {
            let name = SettingName::parse(&setting.name).map_err(|error| error.to_string())?;
            if name == SettingName::Placebo {
                return Err("the placebo is never part of a profile".into());
            }
            for value in &setting.values {
                let knob = Knob::from_id(&value.knob)
                    .ok_or_else(|| format!("{}: unknown knob '{}'", setting.name, value.knob))?;
                let belongs = match name {
                    SettingName::File(own) => knob == own,
                    SettingName::IrqAffinity => matches!(knob, Knob::IrqAffinity(_)),
                    _ => false,
                };
                if !belongs {
                    return Err(format!(
                        "{}: knob '{}' is not one of its files",
                        setting.name, value.knob
                    ));
                }
                for word in [&value.before, &value.profile] {
                    if !crate::journal::is_plain_value(word) {
                        return Err(format!(
                            "{}: value '{word}' is not a plain value",
                            value.knob
                        ));
                    }
                }
            }
        }
        check_rtlab_path(&state.rtlab)?;
        Ok(state)
    }
}

/// The binary a unit's `ExecStart=` runs must be an absolute path of plain characters.
fn check_rtlab_path(rtlab: &str) -> Result<(), String> {
    if rtlab.starts_with('/')
        && rtlab
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "/-_.+".contains(character))
    {
        Ok(())
    } else {
        Err(format!(
            "the rtlab binary '{rtlab}' is not an absolute path of plain characters (a unit's ExecStart= could not run it)"
        ))
    }
}

/// One line of a comment: control characters (a newline would end the comment) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|character| {
            if character.is_control() {
                ' '
            } else {
                character
            }
        })
        .collect()
}

/// The state file under `root`, or `None` when there is no profile.
pub fn read_state(root: &Path) -> Result<Option<ProfileState>, TuneError> {
    let path = root.join(STATE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TuneError::Profile {
                path: path.display().to_string(),
                reason: source.to_string(),
            })
        }
    };
    ProfileState::parse(&text)
        .map(Some)
        .map_err(|reason| TuneError::Profile {
            path: path.display().to_string(),
            reason,
        })
}

fn profile_error(path: &Path, error: io::Error) -> TuneError {
    TuneError::Profile {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}

/// Writes `contents` to `path` through a temporary file beside it (mode 0644), renamed over it;
/// the temporary file is removed if anything fails.
fn write_atomically(path: &Path, contents: &str) -> Result<(), TuneError> {
    use std::os::unix::fs::PermissionsExt as _;
    let directory = path.parent().expect("a profile file has a directory");
    std::fs::create_dir_all(directory).map_err(|error| profile_error(directory, error))?;
    let file_name = path.file_name().expect("a file name").to_string_lossy();
    let written = (|| {
        let mut file = tempfile::Builder::new()
            .prefix(&format!(".{file_name}."))
            .suffix(".rtlab-new")
            .permissions(std::fs::Permissions::from_mode(0o644))
            .tempfile_in(directory)?;
        file.write_all(contents.as_bytes())?;
        file.as_file().sync_all()?;
        file.persist(path).map(drop).map_err(|error| error.error)
    })();
    written.map_err(|error| profile_error(path, error))
}

/// `…/multi-user.target.wants/UNIT` → `../UNIT`, as `systemctl enable` links it.
fn link_atomically(path: &Path, unit: &str) -> Result<(), TuneError> {
    let directory = path.parent().expect("a link has a directory");
    std::fs::create_dir_all(directory).map_err(|error| profile_error(directory, error))?;
    let temporary = directory.join(format!(".{unit}.rtlab-new"));
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(format!("../{unit}"), &temporary)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            profile_error(path, error)
        })
}

/// Writes the profile under `root`: the state file first (it names what to put back), then the
/// sysctl.d file, the units and their links. Returns the files written; on an error removes
/// every file this call wrote and returns the error.
pub fn write_profile(root: &Path, state: &ProfileState) -> Result<Vec<PathBuf>, TuneError> {
    let mut written = Vec::new();
    let result = write_each(root, state, &mut written);
    if let Err(error) = result {
        for path in written.iter().rev() {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_dir(root.join(crate::tuned::TUNED_PROFILE_DIR));
        return Err(error);
    }
    Ok(written)
}

fn write_each(
    root: &Path,
    state: &ProfileState,
    written: &mut Vec<PathBuf>,
) -> Result<(), TuneError> {
    let mut file = |relative: &str, contents: &str| {
        let path = root.join(relative);
        write_atomically(&path, contents)?;
        written.push(path);
        Ok::<(), TuneError>(())
    };
    file(STATE_FILE, &state.to_json())?;
    if let Some(sysctl) = state.sysctl_text() {
        file(SYSCTL_FILE, &sysctl)?;
    }
    let units = state.units();
    for unit in &units {
        let text = if *unit == APPLY_UNIT {
            state.apply_unit_text()
        } else {
            state.holder_unit_text()
        };
        file(&format!("{UNIT_DIR}/{unit}"), &text)?;
    }
    for unit in units {
        let path = root.join(WANTS_DIR).join(unit);
        link_atomically(&path, unit)?;
        written.push(path);
    }
    if crate::tuned::tuned_installed(root) {
        let path = root.join(crate::tuned::TUNED_FILE);
        write_atomically(
            &path,
            &state.tuned_text(crate::tuned::tuned_has_irq_plugin(root)),
        )?;
        written.push(path);
    }
    Ok(())
}

/// Which of a profile's values to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Every value: `--apply` putting the profile in force now.
    All,
    /// What sysctl cannot hold: the unit at boot, after systemd-sysctl applied the rest.
    NotSysctl,
}

/// Whether the kernel refused more than an IRQ's affinity (`apply_values`' refusals, at boot):
/// an IRQ may refuse one, any other refusal fails `--apply-profile`.
pub fn refused_beyond_irqs(refused: &[String]) -> bool {
    refused.iter().any(|refusal| !refusal.starts_with("irq/"))
}

/// Writes the profile's values; returns `id=value` of each written and, separately, each the
/// kernel refused (`id: error`). An IRQ may refuse a new affinity (per-CPU ones do); the tune
/// measured the others.
pub fn apply_values(
    state: &ProfileState,
    which: Which,
    kernel: &mut dyn KernelSettings,
) -> (Vec<String>, Vec<String>) {
    let mut written = Vec::new();
    let mut refused = Vec::new();
    for (knob, value) in state.knobs() {
        if which == Which::NotSysctl && sysctl_key(knob).is_some() {
            continue;
        }
        match kernel.write(knob, &value.profile) {
            Ok(()) => written.push(format!("{}={}", value.knob, value.profile)),
            Err(error) => refused.push(format!("{}: {error}", value.knob)),
        }
    }
    (written, refused)
}

/// What reverting a profile did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reverted {
    /// The files removed.
    pub removed: Vec<PathBuf>,
    /// `id=value` of each value put back.
    pub restored: Vec<String>,
    /// `id: error` of each value that could not be put back (the state file then stays, for a
    /// later `--revert` to try again).
    pub failed: Vec<String>,
}

/// Puts back every value `state` recorded (in reverse order), then removes the profile's files
/// under `root`; the state file stays when a value could not be put back.
pub fn revert_profile(
    root: &Path,
    state: &ProfileState,
    kernel: &mut dyn KernelSettings,
) -> Result<Reverted, TuneError> {
    let mut reverted = Reverted::default();
    let knobs: Vec<(Knob, &KnobValue)> = state.knobs().collect();
    for (knob, value) in knobs.into_iter().rev() {
        match kernel.write(knob, &value.before) {
            Ok(()) => reverted
                .restored
                .push(format!("{}={}", value.knob, value.before)),
            Err(error) => reverted.failed.push(format!("{}: {error}", value.knob)),
        }
    }
    reverted.restored.reverse();
    for relative in PROFILE_FILES {
        if relative == STATE_FILE && !reverted.failed.is_empty() {
            continue;
        }
        let path = root.join(relative);
        match std::fs::remove_file(&path) {
            Ok(()) => reverted.removed.push(path),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(profile_error(&path, error)),
        }
    }
    // The tuned profile's directory, once empty (a file someone else put there keeps it).
    let tuned_directory = root.join(crate::tuned::TUNED_PROFILE_DIR);
    if std::fs::remove_dir(&tuned_directory).is_ok() {
        reverted.removed.push(tuned_directory);
    }
    Ok(reverted)
}

#[cfg(test)]
mod tests;
