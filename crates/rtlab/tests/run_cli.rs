//! `rtlab run` end to end: the record it writes, the non-root path, and what a signal leaves
//! behind. These assert behaviour (counts, schema, cleanup), never timings.

mod common;

use common::{
    assert_exit_code, eventually, read_record, stderr_text, stdout_record, stdout_text, wait_for,
    wait_until, KillOnDrop, Sandbox, RT_HIGH_WITH_100US_OF_WORK, SHORT_RUN,
};
use rtlab_core::Metric;
use std::process::Command;
use std::time::Duration;

/// A tag put in the environment of one test's rtlab, inherited by anything it starts, so the scan
/// below finds that run's leftovers and not those of tests running in parallel.
fn unique_tag() -> String {
    format!(
        "RTLAB_TEST_TAG=run-{}-{}",
        std::process::id(),
        rtlab_sys::clock::monotonic_ns()
    )
}

/// Every process on the machine carrying `tag` in its environment (zombies have none).
fn tagged_processes(tag: &str) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .flatten()
        .filter_map(|process| process.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .unwrap_or_default()
                .split(|byte| *byte == 0)
                .any(|entry| entry == tag.as_bytes())
        })
        .collect()
}

/// `pid`'s command name, or `?` once it is gone.
fn command_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Every thread on the machine, of a process carrying `tag` in its environment, that runs at a
/// real-time policy.
fn tagged_threads_at_realtime(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for pid in tagged_processes(tag) {
        let Ok(tids) = rtlab_sys::sched::process_thread_ids(pid) else {
            continue;
        };
        for tid in tids {
            let comm =
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
            if let Ok(policy) = rtlab_sys::sched::thread_policy(tid) {
                if policy.is_realtime() {
                    found.push(format!("{pid}/{tid} {}", comm.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn run_writes_a_complete_valid_record() {
    let sandbox = Sandbox::new();
    let json = sandbox.file("run.json");
    let histfile = sandbox.file("run.hist");
    let output = sandbox.run_expecting(
        0,
        [
            "run",
            "--duration",
            "3s",
            "--warmup",
            "200ms",
            "--no-store",
            "--json",
            json.to_str().unwrap(),
            "--histfile",
            histfile.to_str().unwrap(),
            "--intervals",
        ],
    );
    let stdout = stdout_text(&output);
    assert!(stdout.contains("wake-up latency"), "{stdout}");
    assert!(stdout.contains("times between wake-ups"), "{stdout}");
    let record = read_record(&json);
    let cpus = rtlab_sys::cpu::online_cpus().unwrap();
    let classes: Vec<&str> = if rtlab_sys::sched::realtime_permitted() {
        vec!["rt-high", "rt-mid", "normal"]
    } else {
        eprintln!("note: not root, only the normal class is expected");
        vec!["normal"]
    };
    let expected_per_series = 3_000_000_000u64 / 1_000_000;
    for class in &classes {
        for cpu in &cpus {
            for metric in [Metric::Wakeup, Metric::Interval, Metric::Handoff] {
                let series = record
                    .series
                    .iter()
                    .find(|series| {
                        series.class == *class
                            && series.cpu == *cpu as u32
                            && series.metric == metric
                    })
                    .unwrap_or_else(|| panic!("missing series {class}/{metric}@{cpu}"));
                // Every period is either a sample or counted as missed: nothing silently dropped.
                let accounted = series.count + series.missed;
                let low = expected_per_series * 98 / 100;
                let high = expected_per_series * 102 / 100;
                assert!(
                    (low..=high).contains(&accounted),
                    "{}: count {} + missed {} not within 2 % of {expected_per_series}",
                    series.label(),
                    series.count,
                    series.missed
                );
                let p50 = series.percentiles["50"];
                let p99 = series.percentiles["99"];
                assert!(
                    series.min_ns <= p50 && p50 <= p99 && p99 <= series.max_ns,
                    "{}",
                    series.label()
                );
                let histogram = series.histogram().expect("valid HDR payload");
                assert_eq!(histogram.count(), series.count);
                assert!(!series.max_per_second.is_empty());
                assert_eq!(series.period_ns, 1_000_000);
                if metric == Metric::Interval {
                    // Intervals cluster around the period.
                    assert!(
                        p50 > 500_000 && p50 < 1_500_000,
                        "{} p50 {p50}",
                        series.label()
                    );
                }
            }
        }
    }
    assert_eq!(record.series.len(), classes.len() * cpus.len() * 3);
    let histogram_text = std::fs::read_to_string(&histfile).unwrap();
    assert!(histogram_text.starts_with("# Histogram\n000000 "));
    assert!(histogram_text.contains("# Max Latencies:"));
    // No temporary files left beside the outputs.
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.path())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
#[ignore = "needs root and setpriv (util-linux)"]
fn without_realtime_permission_warns_once_and_still_records() {
    assert!(
        rtlab_sys::sched::realtime_permitted(),
        "this test needs root, to drop to an unprivileged user with setpriv"
    );
    assert!(
        Command::new("setpriv").arg("--version").output().is_ok(),
        "this test needs setpriv (util-linux)"
    );
    let sandbox = Sandbox::new();
    std::fs::set_permissions(
        sandbox.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let json = sandbox.file("run.json");
    let output = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_rtlab"))
        .args(SHORT_RUN)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let stdout = stdout_text(&output);
    assert_eq!(
        stdout
            .matches("no permission for real-time scheduling")
            .count(),
        1,
        "the warning appears exactly once: {stdout}"
    );
    let record = read_record(&json);
    assert!(!record.series.is_empty());
    assert!(record.series.iter().all(|series| series.class == "normal"));
    assert_eq!(
        record
            .warnings
            .iter()
            .filter(|warning| warning.contains("no permission for real-time scheduling"))
            .count(),
        1
    );
}

/// `rtlab run` for 60 s (100 ms warm-up, nothing stored, stdout discarded) with `tag` in its
/// environment, for the caller to add flags to and spawn.
fn tagged_run_command(sandbox: &Sandbox, tag: &str) -> Command {
    let (tag_name, tag_value) = tag.split_once('=').unwrap();
    let mut command = sandbox.command();
    command
        .env(tag_name, tag_value)
        .args([
            "run",
            "--duration",
            "60s",
            "--warmup",
            "100ms",
            "--no-store",
        ])
        .stdout(std::process::Stdio::null());
    command
}

/// A 60 s run started in the background with a unique environment tag, once its real-time
/// threads are up.
struct TaggedRun {
    child: KillOnDrop,
    tag: String,
    json: std::path::PathBuf,
    /// The run's home and where it writes `json`: with `--no-store` nothing else should appear.
    sandbox: Sandbox,
    /// `/dev/cpu_dma_latency` before the run started, if it can be read.
    dma_before: Option<i32>,
}

impl TaggedRun {
    /// Starts the run; fails the test when not root (real-time classes and `/dev/cpu_dma_latency`
    /// need it).
    fn start_as_root(extra_args: &[&str]) -> TaggedRun {
        assert!(
            rtlab_sys::sched::realtime_permitted(),
            "this test needs root, for real-time classes and /dev/cpu_dma_latency"
        );
        let dma_before = rtlab_sys::dma_latency::current().ok();
        let sandbox = Sandbox::new();
        let json = sandbox.file("run.json");
        let tag = unique_tag();
        let mut command = tagged_run_command(&sandbox, &tag);
        command
            .args(["--cpu-dma-latency", "0"])
            .args(extra_args)
            .arg("--json")
            .arg(&json);
        let child = KillOnDrop(command.spawn().unwrap());
        let pid = child.id();
        wait_until(
            Duration::from_secs(10),
            "the run has real-time threads while measuring",
            || {
                rtlab_sys::sched::process_thread_ids(pid)
                    .unwrap_or_default()
                    .into_iter()
                    .any(|tid| {
                        rtlab_sys::sched::thread_policy(tid)
                            .is_ok_and(|policy| policy.is_realtime())
                    })
            },
        );
        TaggedRun {
            child,
            tag,
            json,
            sandbox,
            dma_before,
        }
    }
}

#[test]
#[ignore = "needs root"]
fn sigint_mid_run_keeps_the_partial_record_and_leaves_nothing_behind() {
    let mut run = TaggedRun::start_as_root(&[]);
    // The scan used after exit does see this run's threads while it runs.
    assert!(!tagged_threads_at_realtime(&run.tag).is_empty());
    if run.dma_before.is_some() {
        assert_eq!(
            rtlab_sys::dma_latency::current().ok(),
            Some(0),
            "cpu_dma_latency held during the run"
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
    rtlab_sys::signals::send(run.child.id(), rtlab_sys::signals::SIGINT).unwrap();
    let status = wait_for(
        Duration::from_secs(10),
        "rtlab to exit after SIGINT",
        || run.child.try_wait().unwrap(),
    );
    assert_eq!(status.code(), Some(130));
    let record = read_record(&run.json);
    assert!(record.interrupted);
    assert!(record.series.iter().any(|series| series.count > 0));
    assert!(record.duration_ns < 60_000_000_000);
    let leftovers = tagged_threads_at_realtime(&run.tag);
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(
        rtlab_sys::dma_latency::current().ok(),
        run.dma_before,
        "cpu_dma_latency released"
    );
}

#[test]
#[ignore = "needs root"]
fn sigkill_mid_run_leaves_no_thread_no_file_and_no_latency_request() {
    let mut run = TaggedRun::start_as_root(&[]);
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    let leftovers = tagged_threads_at_realtime(&run.tag);
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(rtlab_sys::dma_latency::current().ok(), run.dma_before);
    let entries: Vec<_> = std::fs::read_dir(run.sandbox.path())
        .unwrap()
        .flatten()
        .collect();
    assert!(
        entries.is_empty(),
        "nothing half-written: {:?}",
        entries
            .iter()
            .map(|entry| entry.file_name())
            .collect::<Vec<_>>()
    );
}

/// A `--load-cmd` goes with rtlab even when rtlab is SIGKILLed: not only the shell (which the
/// parent-death signal alone would reach) but its children too. Needs no root.
#[test]
fn sigkill_mid_run_leaves_no_process_of_the_load() {
    let sandbox = Sandbox::new();
    let tag = unique_tag();
    let mut command = tagged_run_command(&sandbox, &tag);
    command
        .args(["--classes", "normal", "--no-handoff"])
        .args(["--load-cmd", "sleep 100 & sleep 100"])
        .stderr(std::process::Stdio::null());
    let mut child = KillOnDrop(command.spawn().unwrap());
    let sleeps = |tag: &str| {
        tagged_processes(tag)
            .into_iter()
            .filter(|pid| command_name(*pid) == "sleep")
            .count()
    };
    assert!(
        eventually(Duration::from_secs(30), || sleeps(&tag) >= 2),
        "the load's two sleeps never started: {:?}",
        tagged_processes(&tag)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The load is told at once (SIGTERM, SIGKILL 2 s later); wait for it by condition.
    let gone = eventually(Duration::from_secs(20), || {
        tagged_processes(&tag).is_empty()
    });
    let left: Vec<String> = tagged_processes(&tag)
        .into_iter()
        .map(|pid| format!("{pid} {}", command_name(pid)))
        .collect();
    assert!(gone, "left behind after SIGKILL of rtlab: {left:?}");
}

#[test]
fn bad_flags_are_usage_errors_naming_the_flag() {
    let cases: [(&[&str], &str); 6] = [
        (&["run", "--duration", "10"], "--duration"),
        (&["run", "--cpus", "999", "--no-store"], "--cpus"),
        (&["run", "--period", "1us", "--no-store"], "--period"),
        (&["run", "--classes", "rt-low"], "--classes"),
        // The work after each wake-up must fit the period.
        (&["run", "--compute", "2ms", "--no-store"], "--compute"),
        (&["run", "--compute", "0us", "--no-store"], "--compute"),
    ];
    let sandbox = Sandbox::new();
    for (args, flag) in cases {
        let output = sandbox.run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = stderr_text(&output);
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

#[test]
fn unwritable_output_fails_before_measuring() {
    let output = Sandbox::new().run([
        "run",
        "--duration",
        "1h",
        "--no-store",
        "--json",
        "/nonexistent-dir/run.json",
    ]);
    assert_exit_code(&output, 2);
    let stderr = stderr_text(&output);
    assert!(stderr.starts_with("rtlab: error: --json"), "{stderr}");
}

#[test]
fn show_and_history_read_back_a_stored_run() {
    let sandbox = Sandbox::new();
    let run = sandbox.run_expecting(
        0,
        [
            "run",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--classes",
            "normal",
            "--json",
            "-",
        ],
    );
    let record = stdout_record(&run);
    let history = sandbox.run(["history"]);
    let listing = stdout_text(&history);
    assert!(listing.contains(&record.id[..8]), "{listing}");
    let show = sandbox.run_expecting(0, ["show", &record.id[..8], "--json"]);
    let shown = stdout_record(&show);
    assert_eq!(shown.id, record.id);
    assert_eq!(shown.series.len(), record.series.len());
    assert_exit_code(&sandbox.run(["show", "ffffffff"]), 2);
}

/// `show --json --plain` writes the peaks (packed by default) as plain arrays that need no
/// rtlab to read, with the same values, and the result reads back as a record.
#[test]
fn show_json_plain_writes_the_peaks_as_plain_arrays() {
    let sandbox = Sandbox::new();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rtlab-render/test_data/records/vm-5s.json"
    );
    let original = read_record(std::path::Path::new(fixture));
    let packed = common::stdout_json(&sandbox.run_expecting(0, ["show", fixture, "--json", "-"]));
    assert_eq!(packed["series"][0]["peaks"]["encoding"], "rtlab-packed/1");
    let output = sandbox.run_expecting(0, ["show", fixture, "--json", "-", "--plain"]);
    let plain = common::stdout_json(&output);
    for (json, series) in plain["series"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&original.series)
    {
        let peaks = json["peaks"].as_array().expect("peaks is a plain array");
        assert_eq!(peaks.len(), series.peaks.len());
        for (peak, expected) in peaks.iter().zip(&series.peaks) {
            assert_eq!(peak["value_ns"], expected.value_ns);
            assert_eq!(peak["at_ns"], expected.at_ns);
        }
        let maxima: Vec<u64> = json["max_per_second"]
            .as_array()
            .expect("max_per_second is a plain array")
            .iter()
            .map(|value| value.as_u64().unwrap())
            .collect();
        assert_eq!(maxima, series.max_per_second);
    }
    let read_back = stdout_record(&output);
    for (series, expected) in read_back.series.iter().zip(&original.series) {
        assert_eq!(series.peaks, expected.peaks);
        assert_eq!(series.max_per_second, expected.max_per_second);
    }
    assert_exit_code(&sandbox.run(["show", fixture, "--plain"]), 2);
}

#[test]
fn a_binary_file_is_an_input_error_for_every_reader() {
    let sandbox = Sandbox::new();
    let binary = sandbox.write("binary.json", [0x7f, b'E', b'L', b'F', 0xff, 0xfe, 0, 1]);
    let path = binary.to_str().unwrap();
    for args in [
        vec!["show", path],
        vec!["explain", path],
        vec!["forecast", path],
        vec!["import", path, "--no-store"],
    ] {
        let output = sandbox.run(&args);
        assert_exit_code(&output, 2);
        assert!(stderr_text(&output).contains(path), "{args:?}");
    }
}

#[test]
#[ignore = "needs root: the rt-high threads run SCHED_FIFO"]
fn compute_records_a_response_series_that_holds_the_work() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(RT_HIGH_WITH_100US_OF_WORK.iter().chain(&[
        "--no-handoff",
        "-D",
        "1s",
        "--json",
        "-",
    ]));
    assert_exit_code(&run, 0);
    let record = stdout_record(&run);
    assert_eq!(record.config.compute_ns, Some(100_000));
    let responses: Vec<_> = record
        .series
        .iter()
        .filter(|series| series.metric == rtlab_core::Metric::Response)
        .collect();
    let wakeups = record
        .series
        .iter()
        .filter(|series| series.metric == rtlab_core::Metric::Wakeup)
        .count();
    assert_eq!(responses.len(), wakeups, "one response series per CPU");
    for series in responses {
        assert_eq!(series.class, "rt-high");
        assert!(series.count > 0);
        // Deadline → end of 100 µs of work: never less than the work.
        assert!(series.min_ns >= 100_000, "{}", series.min_ns);
    }
}
