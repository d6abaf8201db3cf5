//! `rtlab tune`: bad names refused, the inventory's and the report's schema, and above all that
//! every setting reads as before after the command, after SIGTERM, and after a SIGKILL once the
//! next `rtlab tune` (or `--revert`) has run. Nothing here asserts that a setting helps: that is
//! measured in BENCHMARKS.md ("rtlab tune").

#![cfg(target_os = "linux")]

mod common;

use common::{
    assert_exit_code, assert_input_error, eventually, require_root_taking_turns, stdout_json,
    Sandbox,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Every file rtlab tune may change, with its content now.
fn settings_now() -> BTreeMap<String, String> {
    let mut files: Vec<String> = [
        "/proc/sys/kernel/timer_migration",
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/kernel/mm/transparent_hugepage/defrag",
        "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag",
        "/proc/sys/vm/stat_interval",
        "/proc/sys/kernel/nmi_watchdog",
        "/proc/sys/vm/swappiness",
        "/sys/devices/virtual/workqueue/cpumask",
        "/dev/cpu_dma_latency",
    ]
    .iter()
    .map(|path| (*path).to_owned())
    .collect();
    for entry in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let path = entry.path().join("smp_affinity_list");
        if path.exists() {
            files.push(path.display().to_string());
        }
    }
    files
        .into_iter()
        .filter_map(|path| {
            let content = if path == "/dev/cpu_dma_latency" {
                std::fs::read(&path)
                    .ok()
                    .map(|bytes| format!("{bytes:?}"))?
            } else {
                std::fs::read_to_string(&path).ok()?
            };
            Some((path, content))
        })
        .collect()
}

fn changed_since(before: &BTreeMap<String, String>) -> Vec<String> {
    let now = settings_now();
    before
        .iter()
        .filter(|(path, content)| now.get(*path) != Some(content))
        .map(|(path, content)| format!("{path}: {content:?} -> {:?}", now.get(path)))
        .collect()
}

/// Asserts that every setting reads as in `before`; `when` ends the message ("after …").
fn assert_every_setting_as_before(before: &BTreeMap<String, String>, when: &str) {
    assert_eq!(
        changed_since(before),
        Vec::<String>::new(),
        "left changed {when}"
    );
}

/// The settings a kill test changes: several kinds (sysctl, a choice list, IRQs, a cpumask).
const KILLED_SETTINGS: &str =
    "timer_migration,swappiness,thp_enabled,stat_interval,irq_affinity,workqueue_cpumask";

/// `rtlab ARGS` with the tune profile under `root` (`RTLAB_TUNE_PROFILE_ROOT`), never `/`.
fn tune_with_profile_root(
    sandbox: &Sandbox,
    root: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    sandbox
        .command()
        .args(args)
        .env(PROFILE_ROOT_ENV, root)
        .output()
        .unwrap()
}

#[test]
fn unknown_setting_names_are_refused_naming_the_flag() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(["tune", "--only", "swapiness"]);
    assert_input_error(&output, "--only: unknown setting 'swapiness'");
    assert!(common::stderr_text(&output).contains("known: cpu_dma_latency"));
    let output = sandbox.run(["tune", "--skip", "placebo,turbo"]);
    assert_input_error(&output, "--skip: unknown setting 'turbo'");
    let output = sandbox.run(["tune", "--figure", "p95"]);
    assert_exit_code(&output, 2);
    let output = sandbox.run(["tune", "--only", "placebo", "--skip", "placebo"]);
    assert_input_error(&output, "no setting left to measure");
}

#[test]
fn the_inventory_lists_every_setting_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let before = settings_now();
    let output = sandbox.run(["tune", "--inventory", "--json", "-"]);
    assert_exit_code(&output, 0);
    let report = stdout_json(&output);
    assert_eq!(report["schema"], "rtlab.tune/1");
    for field in ["tool_version", "cmdline", "started_at", "host"] {
        assert!(report.get(field).is_some(), "no {field}: {report}");
    }
    let names: Vec<&str> = report["inventory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["name"].as_str().unwrap())
        .collect();
    for name in [
        "cpu_dma_latency",
        "timer_migration",
        "sched_rt_runtime_us",
        "thp_enabled",
        "khugepaged_defrag",
        "stat_interval",
        "nmi_watchdog",
        "swappiness",
        "irq_affinity",
        "workqueue_cpumask",
        "cpufreq_governor",
        "cpu_boost",
        "energy_performance_preference",
        "smt",
        "rtprio_limit",
        "memlock_limit",
        "threadirqs",
        "preempt",
        "isolation",
        "mitigations",
        "kernel_command_line",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for item in report["inventory"].as_array().unwrap() {
        for field in ["value", "why", "when", "action"] {
            assert!(item[field].is_string(), "{field} of {item}");
        }
    }
    assert_eq!(report["settings"].as_array().unwrap().len(), 0);
    assert!(changed_since(&before).is_empty());
}

#[test]
#[ignore = "needs root: changes kernel settings and runs the SCHED_FIFO probe"]
fn a_short_tune_reports_each_setting_and_puts_every_one_back() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let before = settings_now();
    let json = sandbox.file("tune.json");
    let output = sandbox.run([
        "tune",
        "--only",
        "cpu_dma_latency,timer_migration,swappiness,irq_affinity,placebo",
        "--rounds",
        "1",
        "--round",
        "500ms",
        "--warmup",
        "100ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(text.contains("before -> tried"), "{text}");
    assert!(text.contains("placebo (placebo)"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["schema"], "rtlab.tune/1");
    let settings = report["settings"].as_array().unwrap();
    let names: Vec<&str> = settings
        .iter()
        .map(|setting| setting["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cpu_dma_latency",
            "timer_migration",
            "swappiness",
            "irq_affinity",
            "placebo"
        ]
    );
    for setting in settings {
        for field in ["name", "before", "tried", "reason"] {
            assert!(setting[field].is_string(), "{field} of {setting}");
        }
        assert!(setting["kept"].is_boolean(), "{setting}");
        assert!(setting.get("effect").is_some(), "{setting}");
    }
    let placebo = &settings[4];
    assert_eq!(placebo["placebo"], true);
    assert!(placebo["effect"]["difference_ns"].is_i64(), "{placebo}");
    assert_every_setting_as_before(&before, "after a normal end");
    assert!(!Path::new("/run/rtlab/tune.journal").exists());
}

/// Starts a tune of [`KILLED_SETTINGS`] and waits until it has changed one of them.
fn start_a_tune_and_wait_for_a_change(
    sandbox: &Sandbox,
    before: &BTreeMap<String, String>,
) -> std::process::Child {
    let child = sandbox
        .command()
        .args([
            "tune",
            "--only",
            KILLED_SETTINGS,
            "--rounds",
            "2",
            "--round",
            "3s",
            "--warmup",
            "100ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Several settings changed at once would be a bug in itself; one is enough to kill it with.
    assert!(
        eventually(Duration::from_secs(30), || !changed_since(before)
            .is_empty()),
        "rtlab tune changed nothing within 30 s"
    );
    child
}

/// What a tune of [`KILLED_SETTINGS`] killed with SIGKILL after its first change left: its
/// sandbox, every setting as it was before, and the files still changed (never none).
struct KilledTune {
    sandbox: Sandbox,
    before: BTreeMap<String, String>,
    left: Vec<String>,
}

fn sigkill_a_tune_midway() -> KilledTune {
    let sandbox = Sandbox::new();
    let before = settings_now();
    let mut child = start_a_tune_and_wait_for_a_change(&sandbox, &before);
    child.kill().unwrap();
    child.wait().unwrap();
    // SIGKILL runs no clean-up: the change is still there.
    let left = changed_since(&before);
    assert!(!left.is_empty(), "nothing left changed after SIGKILL");
    KilledTune {
        sandbox,
        before,
        left,
    }
}

#[test]
#[ignore = "needs root: changes kernel settings and runs the SCHED_FIFO probe"]
fn a_sigkilled_tune_is_put_back_by_the_next_start() {
    let _turn = require_root_taking_turns();
    let killed = sigkill_a_tune_midway();
    // The journal holds what each setting left changed was before.
    assert!(Path::new("/run/rtlab/tune.journal").exists());
    let output = killed.sandbox.run(["tune", "--inventory", "--json", "-"]);
    assert_exit_code(&output, 0);
    let report = stdout_json(&output);
    assert!(
        !report["repaired"].as_array().unwrap().is_empty(),
        "the next start named nothing it put back: {report}"
    );
    assert_every_setting_as_before(
        &killed.before,
        &format!("after the next start (was: {:?})", killed.left),
    );
    assert!(!Path::new("/run/rtlab/tune.journal").exists());
}

#[test]
#[ignore = "needs root: changes kernel settings and runs the SCHED_FIFO probe"]
fn a_sigkilled_tune_is_put_back_by_revert() {
    let _turn = require_root_taking_turns();
    let killed = sigkill_a_tune_midway();
    let output = killed.sandbox.run(["tune", "--revert"]);
    assert_exit_code(&output, 0);
    assert!(common::stdout_text(&output).starts_with("put back: "));
    assert_every_setting_as_before(
        &killed.before,
        &format!("after --revert (was: {:?})", killed.left),
    );
    let output = killed.sandbox.run(["tune", "--revert"]);
    assert!(common::stdout_text(&output).starts_with("nothing to put back"));
}

#[test]
#[ignore = "needs root: changes kernel settings and runs the SCHED_FIFO probe"]
fn sigterm_mid_tune_puts_every_setting_back_and_exits_130() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let before = settings_now();
    let mut child = start_a_tune_and_wait_for_a_change(&sandbox, &before);
    rtlab_sys::signals::send(child.id(), SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_every_setting_as_before(&before, "after SIGTERM");
    assert!(!Path::new("/run/rtlab/tune.journal").exists());
}

const SIGTERM: i32 = 15;

#[test]
#[ignore = "needs root: opens the tune journal"]
fn a_setting_that_does_not_fit_the_budget_is_not_measured_and_says_so() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let before = settings_now();
    let output = sandbox.run([
        "tune",
        "--only",
        "timer_migration",
        "--round",
        "5s",
        "--budget",
        "1s",
        "--json",
        "-",
    ]);
    assert_exit_code(&output, 0);
    let report = stdout_json(&output);
    let setting = &report["settings"][0];
    assert_eq!(setting["name"], "timer_migration");
    assert_eq!(setting["kept"], false);
    assert!(setting["effect"].is_null(), "{setting}");
    assert!(
        setting["reason"].as_str().unwrap().contains("budget"),
        "{setting}"
    );
    assert!(changed_since(&before).is_empty());
}

// ---- --apply and the profile half of --revert (the profile under RTLAB_TUNE_PROFILE_ROOT) ----

const PROFILE_ROOT_ENV: &str = "RTLAB_TUNE_PROFILE_ROOT";
const STATE_FILE: &str = "var/lib/rtlab/tune-profile.json";
const SYSCTL_FILE: &str = "etc/sysctl.d/60-rtlab-tune.conf";
const APPLY_UNIT_FILE: &str = "etc/systemd/system/rtlab-tune.service";
const APPLY_UNIT_LINK: &str = "etc/systemd/system/multi-user.target.wants/rtlab-tune.service";

/// Every file under `directory`, relative to it.
fn files_under(directory: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(directory) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            files.extend(
                files_under(&path)
                    .into_iter()
                    .map(|file| format!("{}/{file}", entry.file_name().to_string_lossy())),
            );
        } else {
            files.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    files.sort();
    files
}

/// Writes each kernel file's value back when dropped, so a failing test leaves the machine as
/// it found it.
struct PutBack(Vec<(&'static str, String)>);

impl PutBack {
    fn remember(paths: &[&'static str]) -> PutBack {
        PutBack(
            paths
                .iter()
                .map(|path| (*path, read_setting(path)))
                .collect(),
        )
    }
}

impl Drop for PutBack {
    fn drop(&mut self) {
        for (path, value) in &self.0 {
            let _ = std::fs::write(path, value);
        }
    }
}

const SWAPPINESS: &str = "/proc/sys/vm/swappiness";
const KHUGEPAGED_DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag";

fn read_setting(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

/// Another value for a 0/1 file, and for swappiness.
fn other_value(path: &str, value: &str) -> String {
    match (path, value) {
        (SWAPPINESS, "10") => "11".into(),
        (SWAPPINESS, _) => "10".into(),
        (_, "0") => "1".into(),
        _ => "0".into(),
    }
}

/// A profile as `--apply` writes it, by hand: its state file (swappiness, a sysctl, and
/// khugepaged_defrag, which the unit applies, each with its value now as `before`), a sysctl.d
/// file, the unit and its link. Returns the values recorded in it as before and in the profile.
fn write_a_profile(root: &Path) -> [(&'static str, String, String); 2] {
    let values = [SWAPPINESS, KHUGEPAGED_DEFRAG].map(|path| {
        let before = read_setting(path);
        let profile = other_value(path, &before);
        (path, before, profile)
    });
    let [(_, swappiness_before, swappiness_profile), (_, defrag_before, defrag_profile)] = &values;
    let state = serde_json::json!({
        "schema": "rtlab.tune-profile/1",
        "tool_version": "0.1.0",
        "cmdline": ["rtlab", "tune", "--apply"],
        "started_at": "2026-12-06T23:00:00Z",
        "undo": "rtlab tune --revert",
        "rtlab": env!("CARGO_BIN_EXE_rtlab"),
        "settings": [
            {"name": "khugepaged_defrag", "effect": "p99 50.0 -> 40.0 us (-20 %)",
             "values": [{"knob": "khugepaged_defrag", "before": defrag_before, "profile": defrag_profile}]},
            {"name": "swappiness", "effect": "p99 40.0 -> 30.0 us (-25 %)",
             "values": [{"knob": "swappiness", "before": swappiness_before, "profile": swappiness_profile}]}
        ]
    });
    for (file, contents) in [
        (STATE_FILE, serde_json::to_string_pretty(&state).unwrap()),
        (
            SYSCTL_FILE,
            format!("vm.swappiness = {swappiness_profile}\n"),
        ),
        (APPLY_UNIT_FILE, "[Service]\nType=oneshot\n".to_owned()),
    ] {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    let link = root.join(APPLY_UNIT_LINK);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("../rtlab-tune.service", link).unwrap();
    values
}

#[test]
fn apply_without_root_is_a_clear_error_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let mut command = if rtlab_sys::users::effective_uid() == 0 {
        // Drop to nobody, as a user without sudo would run it.
        std::fs::set_permissions(
            sandbox.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let mut command = std::process::Command::new("setpriv");
        command.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_rtlab"),
        ]);
        command.env("RTLAB_HOME", sandbox.path());
        command
    } else {
        sandbox.command()
    };
    let output = command
        .args(["tune", "--apply", "--only", "placebo"])
        .env(PROFILE_ROOT_ENV, &root)
        .output()
        .expect("setpriv (Debian package util-linux) or rtlab");
    assert_exit_code(&output, 3);
    let stderr = common::stderr_text(&output);
    assert!(
        stderr.contains("--apply: writing a boot profile and changing kernel settings needs root"),
        "{stderr}"
    );
    assert!(files_under(&root).is_empty(), "{:?}", files_under(&root));
}

#[test]
#[ignore = "needs root: changes kernel settings and runs the SCHED_FIFO probe"]
fn apply_with_nothing_kept_writes_nothing_and_says_so() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let before = settings_now();
    // The placebo is never part of a profile, kept or not: nothing can be written whatever the
    // measurement finds.
    let output = tune_with_profile_root(
        &sandbox,
        &root,
        &[
            "tune", "--apply", "--only", "placebo", "--rounds", "1", "--round", "1s", "--warmup",
            "100ms",
        ],
    );
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(
        text.contains("--apply: no setting was kept, so no profile was written"),
        "{text}"
    );
    let files: Vec<String> = files_under(&root)
        .into_iter()
        .filter(|file| !file.ends_with('/'))
        .collect();
    assert!(files.is_empty(), "{files:?}");
    assert_every_setting_as_before(&before, "after --apply with nothing kept");
}

#[test]
#[ignore = "needs root: writes kernel settings"]
fn apply_refuses_to_write_over_an_existing_profile_before_measuring() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let _put_back = PutBack::remember(&[SWAPPINESS, KHUGEPAGED_DEFRAG]);
    write_a_profile(&root);
    let output = tune_with_profile_root(
        &sandbox,
        &root,
        &["tune", "--apply", "--only", "placebo", "--round", "1h"],
    );
    assert_exit_code(&output, 3);
    let stderr = common::stderr_text(&output);
    assert!(
        stderr.contains("a tune profile already exists")
            && stderr.contains(&root.join(STATE_FILE).display().to_string()),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: writes kernel settings"]
fn the_boot_unit_applies_what_sysctl_cannot_hold_and_revert_puts_every_value_back() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let _put_back = PutBack::remember(&[SWAPPINESS, KHUGEPAGED_DEFRAG]);
    let [(_, swappiness_before, swappiness_profile), (_, defrag_before, defrag_profile)] =
        write_a_profile(&root);

    // What rtlab-tune.service runs at boot: khugepaged's defrag, not the sysctl.
    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--apply-profile"]);
    assert_exit_code(&output, 0);
    assert_eq!(
        common::stdout_text(&output),
        format!("applied: khugepaged_defrag={defrag_profile}\n")
    );
    assert_eq!(read_setting(KHUGEPAGED_DEFRAG), defrag_profile);
    assert_eq!(read_setting(SWAPPINESS), swappiness_before);
    // As systemd-sysctl would at boot.
    std::fs::write(SWAPPINESS, &swappiness_profile).unwrap();

    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--revert"]);
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(
        text.contains(&format!(
            "put back as before the profile: khugepaged_defrag={defrag_before}, swappiness={swappiness_before}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "systemd does not manage this system now: rtlab-tune.service removed as files only"
        ),
        "{text}"
    );
    for file in [STATE_FILE, SYSCTL_FILE, APPLY_UNIT_FILE, APPLY_UNIT_LINK] {
        assert!(
            text.contains(&root.join(file).display().to_string()),
            "{file} not named: {text}"
        );
    }
    assert_eq!(read_setting(KHUGEPAGED_DEFRAG), defrag_before);
    assert_eq!(read_setting(SWAPPINESS), swappiness_before);
    let left: Vec<String> = files_under(&root);
    assert!(left.is_empty(), "left: {left:?}");

    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--revert"]);
    assert!(
        common::stdout_text(&output).contains("no tune profile to remove"),
        "{}",
        common::stdout_text(&output)
    );
}

#[test]
#[ignore = "needs root: opens the tune journal"]
fn a_corrupt_profile_is_an_error_naming_its_file_and_nothing_is_reverted() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let state = root.join(STATE_FILE);
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::write(
        &state,
        "{\"schema\": \"rtlab.tune-profile/1\", \"settings\": [",
    )
    .unwrap();
    std::fs::create_dir_all(root.join(SYSCTL_FILE).parent().unwrap()).unwrap();
    std::fs::write(root.join(SYSCTL_FILE), "vm.swappiness = 10\n").unwrap();
    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--revert"]);
    assert_exit_code(&output, 3);
    let stderr = common::stderr_text(&output);
    assert!(
        stderr.contains(&format!(
            "the tune profile {}: not a tune profile",
            state.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("remove the profile's files by hand"),
        "{stderr}"
    );
    assert!(state.exists() && root.join(SYSCTL_FILE).exists());
}

/// The value in force in /dev/cpu_dma_latency, µs.
fn cpu_dma_latency_now() -> i32 {
    let bytes = std::fs::read("/dev/cpu_dma_latency").unwrap();
    i32::from_ne_bytes(bytes[..4].try_into().unwrap())
}

#[test]
#[ignore = "needs root: holds /dev/cpu_dma_latency"]
fn the_cpu_dma_latency_holder_holds_0_until_sigterm_and_the_request_ends_with_it() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let before = cpu_dma_latency_now();
    assert_ne!(
        before, 0,
        "something else holds /dev/cpu_dma_latency at 0 already"
    );
    let mut holder = sandbox
        .command()
        .args(["tune", "--hold-cpu-dma-latency"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let held = eventually(Duration::from_secs(10), || cpu_dma_latency_now() == 0);
    rtlab_sys::signals::send(holder.id(), SIGTERM).unwrap();
    let status = holder.wait().unwrap();
    assert!(held, "the holder never brought /dev/cpu_dma_latency to 0");
    assert_eq!(status.code(), Some(0));
    assert_eq!(cpu_dma_latency_now(), before);
}

const TIMER_MIGRATION: &str = "/proc/sys/kernel/timer_migration";

/// One setting of a tune report, kept or not, with a measured effect.
fn report_setting(name: &str, kept: bool) -> serde_json::Value {
    serde_json::json!({
        "name": name, "before": "1", "tried": "0", "kept": kept, "placebo": name == "placebo",
        "reason": if kept { "helps" } else { "put back: within noise" },
        "effect": {"figure": "p99", "before_ns": 140_000, "after_ns": 57_000,
                   "difference_ns": -83_000, "difference_ci_ns": [-90_000, -70_000],
                   "relative": -0.59, "relative_ci": [-0.65, -0.52],
                   "samples_before": 6000, "samples_after": 6000}
    })
}

#[test]
#[ignore = "needs root: writes kernel settings"]
fn apply_from_a_report_writes_the_kept_settings_puts_them_in_force_and_revert_undoes_it() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    let _put_back = PutBack::remember(&[TIMER_MIGRATION, KHUGEPAGED_DEFRAG]);
    // Both away from the value tune tries (0), so that --apply changes them.
    std::fs::write(TIMER_MIGRATION, "1").unwrap();
    std::fs::write(KHUGEPAGED_DEFRAG, "1").unwrap();
    let output = sandbox.run(["tune", "--inventory", "--json", "-"]);
    let mut report = stdout_json(&output);
    report["housekeeping_cpus"] = serde_json::json!([0]);
    report["settings"] = serde_json::json!([
        report_setting("cpu_dma_latency", true),
        report_setting("timer_migration", true),
        report_setting("swappiness", false),
        report_setting("khugepaged_defrag", true),
        report_setting("placebo", true),
    ]);
    let report_path = sandbox.write("tune.json", report.to_string());

    let output = sandbox
        .command()
        .arg("tune")
        .arg("--apply-from")
        .arg(&report_path)
        .env(PROFILE_ROOT_ENV, &root)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(
        text.contains(
            "--apply: kept cpu_dma_latency, timer_migration, khugepaged_defrag; written:"
        ),
        "{text}"
    );
    assert!(text.contains("the placebo was kept (noise"), "{text}");
    assert!(
        text.contains("in force now: timer_migration=0, khugepaged_defrag=0\n"),
        "{text}"
    );
    assert!(
        text.contains("from the next boot on (systemd does not manage this system now"),
        "{text}"
    );
    assert_eq!(read_setting(TIMER_MIGRATION), "0");
    assert_eq!(read_setting(KHUGEPAGED_DEFRAG), "0");
    let holder_unit = "etc/systemd/system/rtlab-tune-cpu-dma-latency.service";
    assert_eq!(
        files_under(&root),
        [
            "etc/sysctl.d/60-rtlab-tune.conf",
            "etc/systemd/system/multi-user.target.wants/rtlab-tune-cpu-dma-latency.service",
            "etc/systemd/system/multi-user.target.wants/rtlab-tune.service",
            holder_unit,
            "etc/systemd/system/rtlab-tune.service",
            "var/lib/rtlab/tune-profile.json",
        ]
    );
    let sysctl = std::fs::read_to_string(root.join(SYSCTL_FILE)).unwrap();
    assert!(
        sysctl.ends_with("\nkernel.timer_migration = 0\n"),
        "{sysctl}"
    );
    assert!(
        sysctl.contains(
            "#   timer_migration: p99 140.0 -> 57.0 us (-59 %, 95 % interval -65 % to -52 %)"
        ),
        "{sysctl}"
    );
    let unit = std::fs::read_to_string(root.join(APPLY_UNIT_FILE)).unwrap();
    let exec_start = format!(
        "\nExecStart={} tune --apply-profile\n",
        env!("CARGO_BIN_EXE_rtlab")
    );
    assert!(unit.contains(&exec_start), "{unit}");
    // The units as systemd would read them (without the man page check: rtlab's man pages are
    // installed by the package, not by the test build).
    let verify = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(root.join(APPLY_UNIT_FILE))
        .arg(root.join(holder_unit))
        .output()
        .expect("systemd-analyze (Debian package systemd)");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // A second --apply does not write over the first.
    let output = sandbox
        .command()
        .arg("tune")
        .arg("--apply-from")
        .arg(&report_path)
        .env(PROFILE_ROOT_ENV, &root)
        .output()
        .unwrap();
    assert_exit_code(&output, 3);

    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--revert"]);
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(
        text.contains("put back as before the profile: timer_migration=1, khugepaged_defrag=1\n"),
        "{text}"
    );
    assert_eq!(read_setting(TIMER_MIGRATION), "1");
    assert_eq!(read_setting(KHUGEPAGED_DEFRAG), "1");
    assert!(files_under(&root).is_empty(), "{:?}", files_under(&root));
}

#[test]
fn apply_from_a_file_that_is_not_a_tune_report_is_an_input_error() {
    let sandbox = Sandbox::new();
    let not_a_report = sandbox.write("run.json", r#"{"schema": "rtlab.run/1"}"#);
    let mut command = sandbox.command();
    command
        .arg("tune")
        .arg("--apply-from")
        .arg(&not_a_report)
        .env(PROFILE_ROOT_ENV, sandbox.file("profile-root"));
    let output = command.output().unwrap();
    if rtlab_sys::users::effective_uid() == 0 {
        assert_input_error(&output, "not an rtlab tune report (schema rtlab.run/1");
    } else {
        // Root is checked first: without it nothing is read.
        assert_exit_code(&output, 3);
    }
}

#[test]
#[ignore = "needs root: writes kernel settings"]
fn with_tuned_installed_apply_from_writes_a_tuned_profile_too_and_revert_removes_it() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let root = sandbox.file("profile-root");
    // tuned is installed under the root: its configuration directory, and rtlab's profile
    // selected in it (as `tuned-adm profile rtlab` records it).
    std::fs::create_dir_all(root.join("etc/tuned")).unwrap();
    std::fs::write(root.join("etc/tuned/active_profile"), "rtlab\n").unwrap();
    let _put_back = PutBack::remember(&[TIMER_MIGRATION, KHUGEPAGED_DEFRAG]);
    std::fs::write(TIMER_MIGRATION, "1").unwrap();
    std::fs::write(KHUGEPAGED_DEFRAG, "1").unwrap();
    let output = sandbox.run(["tune", "--inventory", "--json", "-"]);
    let mut report = stdout_json(&output);
    report["housekeeping_cpus"] = serde_json::json!([0]);
    report["settings"] = serde_json::json!([
        report_setting("cpu_dma_latency", true),
        report_setting("timer_migration", true),
        report_setting("khugepaged_defrag", true),
        report_setting("swappiness", false),
    ]);
    let report_path = sandbox.write("tune.json", report.to_string());
    let output = sandbox
        .command()
        .arg("tune")
        .arg("--apply-from")
        .arg(&report_path)
        .env(PROFILE_ROOT_ENV, &root)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(text.contains("etc/tuned/rtlab/tuned.conf\n"), "{text}");
    assert!(
        text.contains("tuned is installed: the same settings are its profile rtlab (tuned-adm profile rtlab selects it"),
        "{text}"
    );
    let tuned = std::fs::read_to_string(root.join("etc/tuned/rtlab/tuned.conf")).unwrap();
    let body: Vec<&str> = tuned
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert_eq!(
        body,
        [
            "[main]",
            "summary=rtlab tune: the settings measured to lower real-time latency here (cpu_dma_latency, timer_migration, khugepaged_defrag)",
            "[cpu]",
            "force_latency=0",
            "[sysctl]",
            "kernel.timer_migration=0",
            "[sysfs]",
            "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag=0",
        ],
        "{tuned}"
    );
    assert!(
        tuned.contains("#   timer_migration: p99 140.0 -> 57.0 us"),
        "{tuned}"
    );

    let output = tune_with_profile_root(&sandbox, &root, &["tune", "--revert"]);
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(text.contains("etc/tuned/rtlab/tuned.conf\n"), "{text}");
    assert!(
        text.contains("warning: tuned's active profile was rtlab, now removed: select another"),
        "{text}"
    );
    assert_eq!(read_setting(TIMER_MIGRATION), "1");
    assert_eq!(read_setting(KHUGEPAGED_DEFRAG), "1");
    // Only tuned's own file is left; rtlab's directory in it is gone.
    assert_eq!(files_under(&root), ["etc/tuned/active_profile"]);
    assert!(!root.join("etc/tuned/rtlab").exists());

    // A tuned profile called rtlab that rtlab did not write is not written over.
    std::fs::create_dir_all(root.join("etc/tuned/rtlab")).unwrap();
    std::fs::write(root.join("etc/tuned/rtlab/tuned.conf"), "[main]\n").unwrap();
    let output = sandbox
        .command()
        .arg("tune")
        .arg("--apply-from")
        .arg(&report_path)
        .env(PROFILE_ROOT_ENV, &root)
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    assert!(
        common::stderr_text(&output).contains("tuned.conf exists but no rtlab tune profile does"),
        "{}",
        common::stderr_text(&output)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/tuned/rtlab/tuned.conf")).unwrap(),
        "[main]\n"
    );
    assert_eq!(read_setting(TIMER_MIGRATION), "1");
}

#[test]
fn an_app_that_is_not_running_is_an_input_error_before_anything_changes() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(["tune", "--only", "placebo", "--app", "rtlab-no-such"]);
    assert_input_error(
        &output,
        "--app rtlab-no-such: no running program has that name",
    );
    let output = sandbox.run(["tune", "--app", "a_name_longer_than_15"]);
    assert_input_error(
        &output,
        "--app \"a_name_longer_than_15\": give a program's name",
    );
    let output = sandbox.run(["tune", "--cycle-marker", "jack"]);
    assert_exit_code(&output, 2);
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), tracing, changes kernel settings"]
fn with_app_jackd_each_round_counts_its_deadline_misses_and_every_setting_is_put_back() {
    use common::jack::{ClientProcess, JackServer};
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let _put_back = PutBack::remember(&[TIMER_MIGRATION]);
    // Away from the value tune tries (0), so that it is measured.
    std::fs::write(TIMER_MIGRATION, "1").unwrap();
    let before = settings_now();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "tuned", 30, 120.0);
    assert!(
        client.wait_until_active(Duration::from_secs(20)),
        "the JACK client never ran"
    );
    let json = sandbox.file("tune.json");
    let output = sandbox.run([
        "tune",
        "--only",
        "timer_migration",
        "--rounds",
        "2",
        "--round",
        "1s",
        "--warmup",
        "200ms",
        "--app",
        "jackd",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_exit_code(&output, 0);
    let text = common::stdout_text(&output);
    assert!(text.contains("jackd misses/min: "), "{text}");
    assert!(text.contains("jackd's own deadline misses"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["app"], "jackd");
    let setting = &report["settings"][0];
    assert_eq!(setting["name"], "timer_migration", "{setting}");
    assert!(setting["effect"]["difference_ns"].is_i64(), "{setting}");
    let app = &setting["app"];
    assert_eq!(app["comm"], "jackd", "{setting}");
    assert_eq!(app["pairs"], 2, "{app}");
    for arm in ["rounds_before", "rounds_after"] {
        let rounds = app[arm].as_array().unwrap();
        assert_eq!(rounds.len(), 2, "{arm}: {app}");
        for round in rounds {
            assert!(round["misses"].is_u64(), "{arm}: {round}");
            // jackd's driver thread wakes every 2.7 ms: every round recorded some of it.
            assert!(round["seconds"].as_f64().unwrap() > 0.0, "{arm}: {round}");
        }
    }
    let interval = app["difference_ci_per_minute"].as_array().unwrap();
    assert!(
        interval[0].as_f64().unwrap() <= interval[1].as_f64().unwrap(),
        "{app}"
    );
    assert!(app["difference_per_minute"].is_f64(), "{app}");
    assert!(
        setting["reason"]
            .as_str()
            .unwrap()
            .contains("jackd's deadline misses"),
        "{setting}"
    );
    drop(client);
    drop(server);
    assert_every_setting_as_before(&before, "after a tune with --app");
    assert!(!Path::new("/run/rtlab/tune.journal").exists());
}

#[test]
#[ignore = "needs root: changes kernel settings, tracing"]
fn an_app_that_exits_mid_tune_stops_it_with_exit_3_and_every_setting_put_back() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let _put_back = PutBack::remember(&[TIMER_MIGRATION]);
    std::fs::write(TIMER_MIGRATION, "1").unwrap();
    let before = settings_now();
    // A program only this test runs: sleep under a name of its own, ending in the second round.
    let name = format!("rtlabgone{}", std::process::id() % 100_000);
    let program = sandbox.file(&name);
    std::fs::copy("/bin/sleep", &program).unwrap();
    let mut app = std::process::Command::new(&program)
        .arg("4")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let output = sandbox.run([
        "tune",
        "--only",
        "timer_migration",
        "--rounds",
        "3",
        "--round",
        "2s",
        "--warmup",
        "500ms",
        "--app",
        name.as_str(),
    ]);
    let _ = app.wait();
    assert_exit_code(&output, 3);
    let stderr = common::stderr_text(&output);
    assert!(
        stderr.contains(&format!(
            "--app {name}: the program exited mid-tune, so its deadline misses cannot be counted any more"
        )),
        "{stderr}"
    );
    assert_every_setting_as_before(&before, "after the app exited mid-tune");
    assert!(!Path::new("/run/rtlab/tune.journal").exists());
}
