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
        "1s",
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
