//! The profile's files for a given kept set, written and reverted in a temporary root against a
//! fake kernel; the state file's parser on `test_data/tune-profile/{ok,err}`.

use super::*;
use std::collections::BTreeMap;

/// The kernel as a map; a knob in `refuse` refuses writes, as a per-CPU IRQ does.
#[derive(Default)]
struct FakeKernel {
    values: BTreeMap<Knob, String>,
    refuse: Vec<Knob>,
}

impl KernelSettings for FakeKernel {
    fn read(&self, knob: Knob) -> io::Result<String> {
        self.values
            .get(&knob)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
    fn write(&mut self, knob: Knob, value: &str) -> io::Result<()> {
        if self.refuse.contains(&knob) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        self.values.insert(knob, value.to_owned());
        Ok(())
    }
    fn irqs(&self) -> io::Result<Vec<u32>> {
        Ok(self
            .values
            .keys()
            .filter_map(|knob| match knob {
                Knob::IrqAffinity(irq) => Some(*irq),
                _ => None,
            })
            .collect())
    }
}

fn machine() -> FakeKernel {
    FakeKernel {
        values: [
            (Knob::TimerMigration, "1"),
            (Knob::Swappiness, "60"),
            (Knob::ThpEnabled, "madvise"),
            (Knob::IrqAffinity(1), "0-1"),
            (Knob::IrqAffinity(24), "1"),
        ]
        .into_iter()
        .map(|(knob, value)| (knob, value.to_owned()))
        .collect(),
        refuse: Vec::new(),
    }
}

fn header() -> OutputHeader {
    OutputHeader {
        schema: STATE_SCHEMA.into(),
        tool_version: "0.1.0".into(),
        cmdline: vec!["rtlab".into(), "tune".into(), "--apply".into()],
        started_at: "2026-12-06T23:00:00Z".into(),
        host: None,
    }
}

fn kept(names: &[&str]) -> Vec<KeptSetting> {
    names
        .iter()
        .map(|name| KeptSetting {
            setting: SettingName::parse(name).unwrap(),
            effect: format!(
                "p99 140.0 -> 57.0 us (-59 %, 95 % interval -65 % to -52 %) for {name}"
            ),
        })
        .collect()
}

fn profile_of(names: &[&str], kernel: &FakeKernel) -> ProfileState {
    ProfileState::from_kept(
        &kept(names),
        &[0],
        kernel,
        Path::new("/usr/bin/rtlab"),
        header(),
    )
    .unwrap()
}

const EVERY_KIND: [&str; 5] = [
    "cpu_dma_latency",
    "timer_migration",
    "swappiness",
    "thp_enabled",
    "irq_affinity",
];

#[test]
fn the_sysctl_file_holds_the_kept_sysctls_and_says_who_wrote_it_and_how_to_undo_it() {
    let state = profile_of(&EVERY_KIND, &machine());
    let text = state.sysctl_text().unwrap();
    let settings: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(
        settings,
        ["kernel.timer_migration = 0", "vm.swappiness = 10"]
    );
    assert!(
        text.starts_with(
            "# Written by rtlab tune --apply (rtlab 0.1.0) at 2026-12-06T23:00:00Z.\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("#   timer_migration: p99 140.0 -> 57.0 us"),
        "{text}"
    );
    assert!(text.contains("# Undo: rtlab tune --revert"), "{text}");
    assert!(text.contains("/var/lib/rtlab/tune-profile.json"), "{text}");
}

#[test]
fn what_sysctl_cannot_hold_goes_to_the_oneshot_unit_and_cpu_dma_latency_to_a_holder() {
    let state = profile_of(&EVERY_KIND, &machine());
    assert_eq!(state.units(), [APPLY_UNIT, HOLDER_UNIT]);
    let apply = state.apply_unit_text();
    assert!(apply.contains("\nType=oneshot\n"), "{apply}");
    assert!(
        apply.contains("\nExecStart=/usr/bin/rtlab tune --apply-profile\n"),
        "{apply}"
    );
    assert!(apply.contains("\nWantedBy=multi-user.target\n"), "{apply}");
    assert!(
        apply.starts_with("# Written by rtlab tune --apply"),
        "{apply}"
    );
    let holder = state.holder_unit_text();
    assert!(holder.contains("\nType=simple\n"), "{holder}");
    assert!(
        holder.contains("\nExecStart=/usr/bin/rtlab tune --hold-cpu-dma-latency\n"),
        "{holder}"
    );
    assert!(holder.contains("# Undo: rtlab tune --revert"), "{holder}");
    // Only sysctls kept: neither unit, and no sysctl file without a sysctl.
    let sysctls_only = profile_of(&["timer_migration"], &machine());
    assert!(sysctls_only.units().is_empty());
    assert!(profile_of(&["thp_enabled"], &machine())
        .sysctl_text()
        .is_none());
}

#[test]
fn the_profile_records_each_value_before_and_leaves_the_placebo_out() {
    let state = profile_of(&["timer_migration", "irq_affinity", "placebo"], &machine());
    let names: Vec<&str> = state
        .settings
        .iter()
        .map(|setting| setting.name.as_str())
        .collect();
    assert_eq!(names, ["timer_migration", "irq_affinity"]);
    assert_eq!(
        state.settings[1].values,
        [
            KnobValue {
                knob: "irq/1".into(),
                before: "0-1".into(),
                profile: "0".into()
            },
            KnobValue {
                knob: "irq/24".into(),
                before: "1".into(),
                profile: "0".into()
            },
        ]
    );
    assert!(profile_of(&["placebo"], &machine()).settings.is_empty());
}

#[test]
fn a_binary_path_a_unit_could_not_run_is_refused() {
    let error = ProfileState::from_kept(
        &kept(&["thp_enabled"]),
        &[0],
        &machine(),
        Path::new("/home/a user/rtlab"),
        header(),
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("'/home/a user/rtlab'"),
        "{error}"
    );
}

#[test]
fn write_then_revert_puts_every_value_back_and_leaves_no_file() {
    let root = tempfile::tempdir().unwrap();
    let mut kernel = machine();
    let before = kernel.values.clone();
    let state = profile_of(&EVERY_KIND, &kernel);
    let written = write_profile(root.path(), &state).unwrap();
    assert_eq!(written.len(), 6, "{written:?}");
    for relative in PROFILE_FILES {
        // No /etc/tuned under the root: tuned is not installed, no tuned profile.
        assert_eq!(
            root.path().join(relative).exists(),
            relative != crate::tuned::TUNED_FILE,
            "{relative}"
        );
    }
    assert!(!root.path().join(crate::tuned::TUNED_PROFILE_DIR).exists());
    let link = root.path().join(WANTS_DIR).join(APPLY_UNIT);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../rtlab-tune.service")
    );
    assert_eq!(read_state(root.path()).unwrap(), Some(state.clone()));

    let (applied, refused) = apply_values(&state, Which::All, &mut kernel);
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(
        applied,
        [
            "timer_migration=0",
            "swappiness=10",
            "thp_enabled=never",
            "irq/1=0",
            "irq/24=0"
        ]
    );
    assert_ne!(kernel.values, before);

    let reverted = revert_profile(root.path(), &state, &mut kernel).unwrap();
    assert_eq!(kernel.values, before);
    assert!(reverted.failed.is_empty());
    assert_eq!(reverted.removed.len(), 6);
    for relative in PROFILE_FILES {
        assert!(!root.path().join(relative).exists(), "{relative} left");
    }
    assert_eq!(read_state(root.path()).unwrap(), None);
}

#[test]
fn the_unit_applies_only_what_sysctl_does_not() {
    let mut kernel = machine();
    let state = profile_of(&EVERY_KIND, &kernel);
    let (applied, _) = apply_values(&state, Which::NotSysctl, &mut kernel);
    assert_eq!(applied, ["thp_enabled=never", "irq/1=0", "irq/24=0"]);
    assert_eq!(kernel.values[&Knob::TimerMigration], "1");
}

#[test]
fn a_value_that_cannot_be_put_back_keeps_the_state_file_and_names_itself() {
    let root = tempfile::tempdir().unwrap();
    let mut kernel = machine();
    let state = profile_of(&["timer_migration", "swappiness"], &kernel);
    write_profile(root.path(), &state).unwrap();
    kernel.refuse.push(Knob::Swappiness);
    let reverted = revert_profile(root.path(), &state, &mut kernel).unwrap();
    assert_eq!(reverted.restored, ["timer_migration=1"]);
    assert_eq!(reverted.failed.len(), 1);
    assert!(
        reverted.failed[0].starts_with("swappiness: "),
        "{:?}",
        reverted.failed
    );
    assert!(!root.path().join(SYSCTL_FILE).exists());
    assert!(root.path().join(STATE_FILE).exists());
}

#[test]
fn a_failed_write_removes_what_the_call_wrote() {
    let root = tempfile::tempdir().unwrap();
    // A directory where the unit goes: its rename fails after the state and sysctl files.
    std::fs::create_dir_all(root.path().join(UNIT_DIR).join(APPLY_UNIT).join("x")).unwrap();
    let state = profile_of(&EVERY_KIND, &machine());
    let error = write_profile(root.path(), &state).unwrap_err();
    assert!(error.to_string().contains("rtlab-tune.service"), "{error}");
    assert!(!root.path().join(STATE_FILE).exists());
    assert!(!root.path().join(SYSCTL_FILE).exists());
    let leftovers: Vec<_> = walk(root.path())
        .into_iter()
        .filter(|path| path.is_file() || path.is_symlink())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(directory: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(directory).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            paths.extend(walk(&path));
        }
        paths.push(path);
    }
    paths
}

#[test]
fn the_generated_units_pass_systemd_analyze_verify() {
    let Ok(version) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        println!("skipped: systemd-analyze is not installed (Debian package systemd)");
        return;
    };
    assert!(version.status.success());
    let root = tempfile::tempdir().unwrap();
    // ExecStart= must name an executable that exists: this test's own binary stands in.
    let binary = std::env::current_exe().unwrap();
    let state = ProfileState::from_kept(&kept(&EVERY_KIND), &[0], &machine(), &binary, header());
    let Ok(state) = state else {
        println!(
            "skipped: the test binary's path {} has characters a unit cannot run",
            binary.display()
        );
        return;
    };
    write_profile(root.path(), &state).unwrap();
    let units: Vec<PathBuf> = [APPLY_UNIT, HOLDER_UNIT]
        .iter()
        .map(|unit| root.path().join(UNIT_DIR).join(unit))
        .collect();
    let output = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()
        .unwrap();
    // A warning (an unknown key, a bad value) fails it too: systemd would ignore that line.
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn fixtures(kind: &str) -> Vec<(String, PathBuf)> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data/tune-profile")
        .join(kind);
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&directory)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .map(|path| {
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                path,
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", directory.display());
    files
}

#[test]
fn every_ok_fixture_parses_and_writes_back_the_same() {
    for (name, path) in fixtures("ok") {
        let text = std::fs::read_to_string(&path).unwrap();
        let state = ProfileState::parse(&text).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(
            ProfileState::parse(&state.to_json()).unwrap(),
            state,
            "{name}"
        );
    }
}

#[test]
fn every_err_fixture_is_refused_with_its_message() {
    for (name, path) in fixtures("err") {
        let text = std::fs::read_to_string(&path).unwrap();
        let expected = std::fs::read_to_string(path.with_extension("err")).unwrap();
        let error = ProfileState::parse(&text).expect_err(&name);
        assert!(
            error.contains(expected.trim()),
            "{name}: '{error}' does not contain '{}'",
            expected.trim()
        );
    }
}

#[test]
fn a_corrupt_state_file_is_an_error_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join(STATE_FILE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\"schema\": \"rtlab.tune-profile/1\", trunc").unwrap();
    let error = read_state(root.path()).unwrap_err().to_string();
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("not a tune profile"), "{error}");
}

#[test]
fn with_tuned_installed_a_tuned_profile_holds_the_same_settings_and_revert_removes_it() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(crate::tuned::TUNED_DIR)).unwrap();
    // A tuned with the [irq] plugin (2.23 and later).
    let plugins = root
        .path()
        .join("usr/lib/python3/dist-packages/tuned/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("plugin_irq.py"), "").unwrap();
    let mut kernel = kernel_with_thp();
    let before = kernel.values.clone();
    let state = profile_of(
        &[
            "cpu_dma_latency",
            "timer_migration",
            "thp_enabled",
            "thp_defrag",
            "khugepaged_defrag",
            "irq_affinity",
        ],
        &kernel,
    );
    let written = write_profile(root.path(), &state).unwrap();
    let tuned_file = root.path().join(crate::tuned::TUNED_FILE);
    assert!(written.contains(&tuned_file), "{written:?}");
    let text = std::fs::read_to_string(&tuned_file).unwrap();
    let body: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert_eq!(
        body,
        [
            "[main]",
            "summary=rtlab tune: the settings measured to lower real-time latency here \
             (cpu_dma_latency, timer_migration, thp_enabled, thp_defrag, khugepaged_defrag, \
             irq_affinity)",
            "[cpu]",
            "force_latency=0",
            "[sysctl]",
            "kernel.timer_migration=0",
            "[vm]",
            "transparent_hugepages=never",
            "transparent_hugepage.defrag=never",
            "[sysfs]",
            "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag=0",
            "[irq]",
            "affinity=0",
        ]
    );
    assert!(
        text.starts_with("# Written by rtlab tune --apply"),
        "{text}"
    );
    assert!(
        text.contains("# Select it: tuned-adm profile rtlab."),
        "{text}"
    );
    assert!(text.contains("# Undo: rtlab tune --revert"), "{text}");

    apply_values(&state, Which::All, &mut kernel);
    let reverted = revert_profile(root.path(), &state, &mut kernel).unwrap();
    assert!(reverted.failed.is_empty(), "{:?}", reverted.failed);
    assert_eq!(kernel.values, before);
    assert!(
        reverted.removed.contains(&tuned_file),
        "{:?}",
        reverted.removed
    );
    assert!(!root.path().join(crate::tuned::TUNED_PROFILE_DIR).exists());
    // tuned's own directory stays: it is tuned's.
    assert!(root.path().join(crate::tuned::TUNED_DIR).is_dir());
}

/// [`machine`] with every transparent hugepage file.
fn kernel_with_thp() -> FakeKernel {
    let mut kernel = machine();
    for (knob, value) in [(Knob::ThpDefrag, "madvise"), (Knob::KhugepagedDefrag, "1")] {
        kernel.values.insert(knob, value.to_owned());
    }
    kernel
}
