//! `rtlab timers` end to end: the rows and files it writes, each API's documented behaviour, the
//! audit naming a cpu_dma_latency holder this test starts, and the change experiment leaving
//! nothing changed after SIGINT and SIGKILL. Assertions are about behaviour with generous
//! margins, never tight timings.

mod common;

use common::{
    assert_input_error, read_record, stdout_json, wait_for, wait_until, KillOnDrop, Sandbox,
};
use rtlab_core::timer_study::{TimerRow, TIMER_APIS};
use std::process::Stdio;
use std::time::Duration;

/// What the root tests need root (or CAP_SYS_NICE) for.
const NEEDS_REALTIME: &str = "SCHED_FIFO and /dev/cpu_dma_latency";

/// Measuring tests take this lock so they never run at once: two studies pinned to the same CPU
/// disturb each other (another process's timers expire a slack timer early, for one).
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn rows_of(record: &rtlab_core::RunRecord) -> &[TimerRow] {
    &record.timers.as_ref().expect("a timer study").rows
}

#[test]
fn a_short_study_writes_rows_findings_svgs_and_a_loadable_record() {
    let _measuring = measuring();
    let sandbox = Sandbox::new();
    let json = sandbox.file("study.json");
    let svg = sandbox.file("plots");
    let output = sandbox.run_expecting(
        0,
        [
            "timers",
            "--duration",
            "1200ms",
            "--intervals",
            "2ms",
            "--apis",
            "nanosleep,epoll_wait,timerfd",
            "--classes",
            "normal,normal-slack1ns",
            "--json",
            json.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("requested 2ms"), "{stdout}");
    let record = read_record(&json);
    let rows = rows_of(&record);
    // nanosleep, epoll_wait, timerfd periodic and re-armed, in two classes.
    assert_eq!(rows.len(), 8, "{rows:?}");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for row in value["timers"]["rows"].as_array().unwrap() {
        for field in [
            "api",
            "class",
            "requested_ns",
            "count",
            "mean_ns",
            "p50_ns",
            "p99_ns",
            "max_ns",
            "catchups",
            "skipped",
            "mode",
        ] {
            assert!(row.get(field).is_some(), "row without {field}: {row}");
        }
        assert!(TIMER_APIS.contains(&row["api"].as_str().unwrap()));
        assert_eq!(row["requested_ns"], 2_000_000);
    }
    let timerfd_modes: Vec<&str> = rows
        .iter()
        .filter(|row| row.api == "timerfd")
        .map(|row| row.mode.as_str())
        .collect();
    assert!(timerfd_modes.contains(&"periodic") && timerfd_modes.contains(&"rearmed"));
    assert!(rows.iter().all(|row| row.count > 0));
    let picture = std::fs::read_to_string(svg.join("timers-2ms.svg")).unwrap();
    assert!(picture.starts_with("<svg") && picture.contains("epoll_wait"));
    // Stored like every run, and `rtlab show` reads it back with its table.
    let shown = sandbox.run_expecting(0, ["show", "latest"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("requested 2ms"));
}

#[test]
fn bad_timer_flags_are_usage_errors_naming_the_flag() {
    let sandbox = Sandbox::new();
    assert_input_error(&sandbox.run(["timers", "--apis", "sleep_sort"]), "--apis");
    assert_input_error(
        &sandbox.run(["timers", "--intervals", "1us"]),
        "--intervals",
    );
    assert_input_error(
        &sandbox.run(["timers", "--svg", "/proc/version/x", "--intervals", "1ms"]),
        "--svg",
    );
}

/// The row of `api` (in `mode`, when given) for `class` at 1 ms.
fn row<'a>(rows: &'a [TimerRow], api: &str, mode: Option<&str>, class: &str) -> &'a TimerRow {
    rows.iter()
        .find(|row| {
            row.api == api
                && mode.is_none_or(|mode| row.mode == mode)
                && row.class == class
                && row.requested_ns == 1_000_000
        })
        .unwrap_or_else(|| panic!("no {api} row for {class}"))
}

#[test]
#[ignore = "needs root"]
fn each_api_delivers_what_its_documentation_promises_for_1ms() {
    rtlab_testkit::require_realtime(NEEDS_REALTIME);
    rtlab_testkit::require_writable("/dev/cpu_dma_latency");
    let _measuring = measuring();
    let sandbox = Sandbox::new();
    let json = sandbox.file("study.json");
    sandbox.run_expecting(
        0,
        [
            "timers",
            "--duration",
            "8s",
            "--intervals",
            "1ms",
            "--classes",
            "normal,normal-slack1ns,rt-high",
            "--no-store",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let record = read_record(&json);
    let study = record.timers.as_ref().unwrap();
    let rows = &study.rows;
    let millisecond = 1_000_000.0;
    for api in TIMER_APIS {
        if api == "io_uring" && !rows.iter().any(|row| row.api == api) {
            // Only where the kernel has no io_uring: then it is named with the reason.
            assert!(
                study
                    .unavailable
                    .iter()
                    .any(|cell| cell.api == api && cell.reason.contains("not available")),
                "io_uring neither measured nor reported unavailable"
            );
            continue;
        }
        let fifo = rows
            .iter()
            .filter(|row| row.api == api && row.class == "rt-high")
            .collect::<Vec<_>>();
        assert!(
            !fifo.is_empty(),
            "{api} was not measured in rt-high: {:?}",
            study.unavailable
        );
        for row in fifo {
            assert!(
                row.count >= 100,
                "{}: only {} intervals",
                row.label(),
                row.count
            );
            match row.mode.as_str() {
                // A timeout or a sleep of one period never returns early: the mean is at least
                // the request (poll/epoll_wait whole ms, usleep/select whole µs).
                "relative" | "rearmed" => assert!(
                    row.mean_ns >= millisecond * 0.999,
                    "{} returned early on average: {} ns",
                    row.label(),
                    row.mean_ns
                ),
                // Absolute deadlines and kernel-periodic timers keep the period on average,
                // counting the periods they skipped.
                _ => {
                    let periods = (row.count + row.skipped) as f64;
                    let per_period = row.mean_ns * row.count as f64 / periods;
                    assert!(
                        (0.9 * millisecond..=1.1 * millisecond).contains(&per_period),
                        "{} did not keep a 1 ms period: {per_period} ns per period",
                        row.label()
                    );
                }
            }
        }
    }
    // epoll_wait's timeout is at least its whole milliseconds.
    assert!(row(rows, "epoll_wait", None, "rt-high").mean_ns >= millisecond);
    // SCHED_OTHER with the default slack: nanosleep ends most of its slack late (documented in
    // prctl(2): the slack lets the kernel expire the timer up to that much later).
    let normal = row(rows, "nanosleep", None, "normal");
    assert!(normal.timer_slack_ns > 0);
    assert!(
        normal.mean_ns > millisecond + 0.8 * normal.timer_slack_ns as f64,
        "nanosleep in SCHED_OTHER with {} ns slack ran {} ns on average",
        normal.timer_slack_ns,
        normal.mean_ns
    );
    assert!(normal.mean_ns > 1.04 * millisecond);
    // The slack is an upper bound ("up to"): a timer may also expire early with another
    // interrupt on the CPU, so only the classes' slack is asserted, not which ran shorter.
    assert!(rows
        .iter()
        .filter(|row| row.class == "normal-slack1ns")
        .all(|row| row.timer_slack_ns == 1));
    assert!(rows
        .iter()
        .filter(|row| row.class == "rt-high")
        .all(|row| row.timer_slack_ns == 0));
    // The findings say it in words.
    assert!(
        study
            .findings
            .iter()
            .any(|line| line.contains("the default timer slack")),
        "{:?}",
        study.findings
    );
}

/// A process (not rtlab) holding /dev/cpu_dma_latency at `micros` µs until killed.
fn hold_dma_latency(micros: u32) -> KillOnDrop {
    let child = std::process::Command::new("sh")
        .arg("-c")
        // Eight hex digits: the device parses a write that is not 4 bytes long as hex text.
        .arg(format!(
            "exec 3>/dev/cpu_dma_latency && printf %08x {micros} >&3 && exec sleep 60"
        ))
        .spawn()
        .expect("start sh");
    KillOnDrop(child)
}

fn holders_of_dma_latency() -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        if fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target == std::path::Path::new("/dev/cpu_dma_latency"))
        }) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
#[ignore = "needs root"]
fn the_audit_names_a_cpu_dma_latency_holder_and_its_value() {
    rtlab_testkit::require_realtime(NEEDS_REALTIME);
    rtlab_testkit::require_writable("/dev/cpu_dma_latency");
    let _measuring = measuring();
    let holder = hold_dma_latency(42);
    let pid = holder.id();
    wait_until(
        Duration::from_secs(5),
        "the holder has the device open",
        || holders_of_dma_latency().contains(&pid),
    );
    let sandbox = Sandbox::new();
    let output = sandbox.run_expecting(0, ["timers", "--audit", "--json", "-"]);
    let report = stdout_json(&output);
    assert_eq!(report["schema"], "rtlab.timer-audit/1");
    let items = report["items"].as_array().unwrap();
    let item = items
        .iter()
        .find(|item| item["setting"] == format!("held by pid {pid} (sleep)"))
        .unwrap_or_else(|| panic!("holder {pid} not named: {items:#?}"));
    let in_force = report["facts"]["cpu_dma_latency_in_force_us"]
        .as_i64()
        .unwrap();
    assert!(in_force <= 42, "{in_force}");
    let holders = report["facts"]["cpu_dma_latency_holders"]
        .as_array()
        .unwrap()
        .len();
    let value = item["value"].as_str().unwrap();
    if holders == 1 {
        // Alone, its value is the one in force.
        assert!(value.starts_with("42 µs"), "{value}");
    } else {
        // Others hold it too (another test, another tool): the kernel cannot say whose is whose.
        assert!(value.starts_with("unknown"), "{value}");
    }
    assert!(item["set_by"].as_str().unwrap().contains("sleep 60"));
}

/// rtlab's changer: the child of `parent` that has /dev/cpu_dma_latency open, if any.
fn changer_holding(parent: u32) -> Option<u32> {
    holders_of_dma_latency().into_iter().find(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after = stat[stat.rfind(')')? + 1..].to_owned();
                after.split_whitespace().nth(1)?.parse::<u32>().ok()
            })
            == Some(parent)
    })
}

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has closed every file already.
        Ok(stat) => stat[stat.rfind(')').unwrap() + 1..]
            .trim_start()
            .starts_with('Z'),
    }
}

/// Starts the change experiment and waits until its changer holds /dev/cpu_dma_latency; returns
/// rtlab and the changer's pid.
fn start_experiment(sandbox: &Sandbox, json: &std::path::Path) -> (KillOnDrop, u32) {
    let rtlab = KillOnDrop(
        sandbox
            .command()
            .args([
                "timers",
                "--change-experiment",
                "--hold",
                "1s",
                "--no-store",
                "--json",
            ])
            .arg(json)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rtlab"),
    );
    let parent = rtlab.id();
    let mut changer = None;
    wait_until(
        Duration::from_secs(20),
        "the changer holds cpu_dma_latency",
        || {
            changer = changer_holding(parent);
            changer.is_some()
        },
    );
    (rtlab, changer.expect("found above"))
}

#[test]
#[ignore = "needs root"]
fn sigint_during_the_change_experiment_restores_the_slack_and_releases_the_latency() {
    rtlab_testkit::require_realtime(NEEDS_REALTIME);
    rtlab_testkit::require_writable("/dev/cpu_dma_latency");
    let _measuring = measuring();
    let sandbox = Sandbox::new();
    let json = sandbox.file("change.json");
    let (mut rtlab, changer) = start_experiment(&sandbox, &json);
    let parent = rtlab.id();
    // After the cpu_dma_latency step comes the first timer-slack step (the changer lets go of
    // the device when it starts): interrupt while another process has changed rtlab's slack.
    wait_until(
        Duration::from_secs(20),
        "the changer lets go for the slack step",
        || !holders_of_dma_latency().contains(&changer),
    );
    std::thread::sleep(Duration::from_millis(500));
    rtlab_sys::signals::send(parent, rtlab_sys::signals::SIGINT).unwrap();
    let status = wait_for(
        Duration::from_secs(15),
        "rtlab to stop after SIGINT",
        || rtlab.try_wait().unwrap(),
    );
    assert_eq!(status.code(), Some(130));
    assert!(
        process_gone(changer),
        "the changer {changer} outlived rtlab"
    );
    assert!(!holders_of_dma_latency().contains(&changer));
    let record = read_record(&json);
    assert!(record.interrupted);
    let experiment = record.timers.unwrap().change_experiment.unwrap();
    let restored = experiment.restored;
    assert!(restored.changer_exited);
    assert_eq!(
        restored.timer_slack_ns_after,
        restored.timer_slack_ns_before
    );
    // The cpu_dma_latency step had finished before the interrupt.
    assert!(
        experiment
            .steps
            .iter()
            .any(|step| step.setting.starts_with("cpu_dma_latency")),
        "{:?}",
        experiment.steps
    );
}

#[test]
#[ignore = "needs root"]
fn sigkill_of_rtlab_during_the_change_experiment_releases_everything() {
    rtlab_testkit::require_realtime(NEEDS_REALTIME);
    rtlab_testkit::require_writable("/dev/cpu_dma_latency");
    let _measuring = measuring();
    let sandbox = Sandbox::new();
    let json = sandbox.file("change.json");
    let (mut rtlab, changer) = start_experiment(&sandbox, &json);
    rtlab.kill().unwrap();
    rtlab.wait().unwrap();
    // The changer dies with rtlab (parent-death signal, closed input) and the kernel drops its
    // request with its descriptor; the thread whose slack it changed died with rtlab.
    wait_until(Duration::from_secs(5), "the changer is gone", || {
        process_gone(changer)
    });
    assert!(!holders_of_dma_latency().contains(&changer));
    assert!(!json.exists(), "a killed run leaves no half-written record");
}
