//! Workloads whose outcome is known, run on real threads: they need root (RT policies,
//! SCHED_DEADLINE) and fail without it. They assert counts, never timings, with margins that
//! hold on a busy two-CPU machine: the competitor takes all of the starved thread's CPU, and the
//! protected thread's deadline is many times what it needs.

use rtlab_core::Nanos;
use rtlab_testkit::{measured_cpu, require_realtime, take_turns};
use rtlab_workload::runner::{run, RunResult, RunSettings};
use rtlab_workload::toml_file::parse_workload_toml;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The tests share one CPU and spinners: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What the tests need root (or CAP_SYS_NICE) for.
const NEEDS_REALTIME: &str = "RT priorities and SCHED_DEADLINE";

fn run_text(text: &str, seconds: u64, competitors: Vec<String>, play_log: bool) -> RunResult {
    run_explained(text, seconds, competitors, play_log, false)
}

fn run_explained(
    text: &str,
    seconds: u64,
    competitors: Vec<String>,
    play_log: bool,
    explain: bool,
) -> RunResult {
    let workload = parse_workload_toml(text, "test").unwrap();
    let settings = RunSettings {
        duration: Nanos::from_secs(seconds),
        competitors,
        load: None,
        force: false,
        keep_play_log: play_log,
        explain,
    };
    run(&workload, &settings, &Arc::new(AtomicBool::new(false))).unwrap()
}

fn producer_and_device(cpu: usize, scheduling: &str) -> String {
    format!(
        r#"
[[thread]]
name = "producer"
{scheduling}
cpus = "{cpu}"
period = "10ms"
work = "1ms"
produces = "card"

[[device]]
name = "card"
buffers = 4
period = "10ms"
"#
    )
}

/// A consumer (the device) underruns when its producer is starved by a higher-priority FIFO
/// spinner on its CPU; the WAV file has exactly one silent period per underrun.
#[test]
#[ignore = "needs root"]
fn a_starved_producer_underruns_and_the_wav_silences_match() {
    let _turn = take_turns(&ONE_AT_A_TIME);
    require_realtime(NEEDS_REALTIME);
    let cpu = measured_cpu();
    let text = producer_and_device(cpu, "policy = \"fifo\"\npriority = 10");
    let result = run_text(&text, 3, vec![format!("fifo:50@{cpu}")], true);
    let device = &result.devices[0];
    // 300 periods; the producer gets nothing but what RT throttling leaves, and that goes to
    // SCHED_OTHER threads first.
    assert!(
        device.underruns >= device.periods / 2,
        "{} underruns in {} periods",
        device.underruns,
        device.periods
    );
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("card.wav");
    rtlab_workload::wav::write_play_log(&path, 10_000_000, &device.play_log).unwrap();
    let (silent, total) = rtlab_workload::wav::count_silent_periods(&path, 10_000_000).unwrap();
    assert_eq!(total, device.periods);
    assert_eq!(silent, device.underruns);
}

/// With `--explain`, the starved producer's underruns are charged to the FIFO competitor, by
/// name: what ran on its CPU while it was runnable.
#[test]
#[ignore = "needs root and tracefs"]
fn a_starved_producers_underruns_are_attributed_to_the_competitor() {
    let _turn = take_turns(&ONE_AT_A_TIME);
    require_realtime(NEEDS_REALTIME);
    let cpu = measured_cpu();
    let text = producer_and_device(cpu, "policy = \"fifo\"\npriority = 10");
    let result = run_explained(&text, 2, vec![format!("fifo:50@{cpu}")], false, true);
    let device = &result.devices[0];
    assert!(
        device.underruns >= device.periods / 2,
        "{} underruns",
        device.underruns
    );
    assert!(
        !result.explained.is_empty(),
        "no explanations: {:?}",
        result.warnings
    );
    let by_competitor = result
        .explained
        .iter()
        .filter(|event| {
            event.kind == "underrun"
                && event.cause_kind == rtlab_core::LatenessKind::Task
                && event.cause.starts_with("competitor[")
                && event.cause.contains("SCHED_FIFO 50")
        })
        .count();
    // Once a second the fair server holds the whole RT class for up to 50 ms; those windows
    // are "throttled", all the others the competitor's.
    assert!(
        by_competitor * 10 >= result.explained.len() * 8,
        "{by_competitor} of {} underruns charged to the competitor; first: {}",
        result.explained.len(),
        result.explained[0].cause
    );
}

/// The same producer with a reservation (SCHED_DEADLINE outranks the FIFO spinner) keeps the
/// device fed: no underrun except for time the hypervisor took (`--explain` says which).
#[test]
#[ignore = "needs root and tracefs"]
fn a_reserved_producer_does_not_underrun() {
    let _turn = take_turns(&ONE_AT_A_TIME);
    require_realtime(NEEDS_REALTIME);
    let cpu = measured_cpu();
    let text = producer_and_device(cpu, "reserve = \"2ms/10ms\"");
    let result = run_explained(&text, 3, vec![format!("fifo:50@{cpu}")], false, true);
    let device = &result.devices[0];
    assert!(device.periods >= 250, "{} periods", device.periods);
    // The holes once a second seen before (2-3 underruns at 1.68 and 2.67 s) were the device
    // thread's: a SCHED_FIFO device lost up to 50 ms a second to the fair server beside the
    // spinner. The device now runs SCHED_DEADLINE, as a sound card is never held up.
    assert_only_vanished(&result.explained, device.underruns);
    assert!(result.threads[0].scheduling.contains("reserve"));
}

/// Every one of `underruns` is explained, and by time that vanished from the machine
/// (hypervisor): none is ours.
fn assert_only_vanished(explained: &[rtlab_core::ExplainedEvent], underruns: u64) {
    let explained_underruns: Vec<&rtlab_core::ExplainedEvent> = explained
        .iter()
        .filter(|event| event.kind == "underrun")
        .collect();
    assert_eq!(
        explained_underruns.len() as u64,
        underruns.min(rtlab_workload::explain::EXPLAINED_KEPT as u64),
        "every underrun is explained"
    );
    let ours: Vec<&str> = explained_underruns
        .iter()
        .filter(|event| event.cause_kind != rtlab_core::LatenessKind::Vanished)
        .map(|event| event.cause.as_str())
        .collect();
    assert!(
        ours.is_empty(),
        "{} underruns not explained by vanished time: {ours:?}",
        ours.len()
    );
}

fn inversion(cpu: usize, kind: &str) -> String {
    // `low` takes the lock at the start of every 10 ms for 2 ms of CPU; `medium` wakes 1 ms into
    // one of those sections every 100 ms and computes for 30 ms; `high` wants the lock 2 ms into
    // the same section and has a 20 ms deadline. Without priority inheritance `medium` keeps
    // `low` — and with it `high` — off the CPU for 30 ms every time.
    format!(
        r#"
[[thread]]
name = "high"
policy = "fifo"
priority = 30
cpus = "{cpu}"
period = "20ms"
offset = "2ms"
work = "100us"
lock = "shared"
critical = "100us"
deadline = "20ms"

[[thread]]
name = "medium"
policy = "fifo"
priority = 20
cpus = "{cpu}"
period = "100ms"
offset = "1ms"
work = "30ms"

[[thread]]
name = "low"
policy = "fifo"
priority = 10
cpus = "{cpu}"
period = "10ms"
work = "0ns"
lock = "shared"
critical = "2ms"

[[lock]]
name = "shared"
kind = "{kind}"
"#
    )
}

/// A priority-inheritance lock removes the inversion a plain lock shows.
#[test]
#[ignore = "needs root"]
fn a_pi_lock_removes_the_inversion_a_plain_lock_shows() {
    let _turn = take_turns(&ONE_AT_A_TIME);
    require_realtime(NEEDS_REALTIME);
    let cpu = measured_cpu();
    let run = |kind: &str, explain: bool| {
        let result = run_explained(&inversion(cpu, kind), 3, Vec::new(), false, explain);
        let high = result
            .threads
            .iter()
            .find(|thread| thread.name == "high")
            .unwrap();
        assert!(high.activations >= 100, "{} activations", high.activations);
        (high.deadline_misses, result)
    };
    let (plain, _) = run("plain", false);
    // The PI run explained (`--explain`): a miss with the PI lock can only be time the machine
    // itself lost — a hypervisor holding the vCPU for 20 ms, which CI's VM does (4 misses once,
    // 2026-11-27) — and the trace tells which. Any other cause (medium, low, the lock) fails.
    let (inherited, result) = run("pi", true);
    let explained: Vec<&rtlab_core::ExplainedEvent> = result
        .explained
        .iter()
        .filter(|event| event.kind == "deadline_miss" && event.source == "high")
        .collect();
    let not_the_hypervisor: Vec<&str> = explained
        .iter()
        .filter(|event| event.cause_kind != rtlab_core::LatenessKind::Vanished)
        .map(|event| event.cause.as_str())
        .collect();
    eprintln!(
        "deadline misses of high: plain {plain}, pi {inherited} ({} explained, {} of them the \
         hypervisor's)",
        explained.len(),
        explained.len() - not_the_hypervisor.len()
    );
    // About 30 inversions of ~30 ms in 3 s with the plain lock.
    assert!(plain >= 10, "plain lock: {plain} deadline misses");
    assert_eq!(
        explained.len() as u64,
        inherited,
        "PI lock: every deadline miss explained"
    );
    assert!(
        not_the_hypervisor.is_empty(),
        "PI lock: {inherited} deadline misses, not the hypervisor's: {not_the_hypervisor:?}"
    );
}

/// Paper 003's Table 3-2 in miniature: experiment 3 (a competitor above the decoder, no
/// reservation) glitches throughout, experiment 6 (decoder and mixer reserved) does not, and the
/// WAV file of experiment 3 has exactly one silent period per glitch.
#[test]
#[ignore = "needs root"]
fn the_study_glitches_without_reservations_and_not_with_them() {
    let _turn = take_turns(&ONE_AT_A_TIME);
    require_realtime(NEEDS_REALTIME);
    let cpu = measured_cpu();
    let stop = Arc::new(AtomicBool::new(false));
    let experiment = |number: u32, explain: bool| {
        let experiment = rtlab_workload::study::EXPERIMENTS
            .iter()
            .find(|experiment| experiment.number == number)
            .unwrap();
        rtlab_workload::study::run_experiment(experiment, Nanos::from_secs(2), cpu, explain, &stop)
            .unwrap()
    };
    let starved = experiment(3, false);
    // 200 periods; the 330 ms of buffered audio lasts a sixth of them.
    assert!(
        starved.underruns >= 100,
        "experiment 3: {} glitches",
        starved.underruns
    );
    assert!(
        starved.starvations >= 100,
        "experiment 3: {} starvations",
        starved.starvations
    );
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("experiment-3.wav");
    rtlab_workload::wav::write_play_log(&path, 10_000_000, &starved.play_log).unwrap();
    let (silent, _) = rtlab_workload::wav::count_silent_periods(&path, 10_000_000).unwrap();
    assert_eq!(silent, starved.underruns);
    let reserved = experiment(6, true);
    // The reservations end the starvation: experiment 3's hundreds of glitches become none. The
    // 1-4 glitches that about 1 in 10 2-s runs still had (2026-11-23) were all the device
    // thread's own: its 200 µs SCHED_DEADLINE budget, charged with interrupt time, ran out and
    // it was deferred 10-30 ms (`--explain`: "the device thread took the buffer 30.3 ms late:
    // throttled: SCHED_DEADLINE budget used up"); its budget is now 2 ms. What may remain is
    // time the hypervisor takes from every thread, which `--explain` names; a glitch caused by
    // anything else — the competitor, a thread of the player, the device thread — fails.
    eprintln!(
        "experiment 6 glitched at {:?} s: {:?}",
        reserved.underrun_times_s, reserved.glitch_causes
    );
    let causes = reserved.glitch_causes.clone().expect("explained");
    assert_eq!(
        (causes.workload, causes.unexplained),
        (0, 0),
        "experiment 6: glitches at {:?} s not caused by the hypervisor: {:?}",
        reserved.underrun_times_s,
        rtlab_workload::explain::underruns_only(&reserved.explained)
            .iter()
            .map(|event| event.cause.as_str())
            .collect::<Vec<_>>()
    );
    assert_eq!(causes.hypervisor, reserved.underruns);
    assert_eq!(
        reserved.starvations, 0,
        "experiment 6: {} mixer starvations",
        reserved.starvations
    );
    assert_eq!(reserved.granted.len(), 2, "{:?}", reserved.granted);
}

#[test]
#[ignore = "needs root"]
fn the_journal_directory_of_a_killed_workload_is_repaired_and_removed() {
    require_realtime(NEEDS_REALTIME);
    let _turn = take_turns(&ONE_AT_A_TIME);
    // A process that has exited stands for a workload killed with SIGKILL.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let stale = std::env::temp_dir().join(format!("rtlab-workload-{dead_pid}"));
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(
        stale.join(rtlab_sched::enforce::journal::JOURNAL_FILE),
        format!("{}\n", rtlab_sched::enforce::journal::JOURNAL_HEADER),
    )
    .unwrap();
    let reserver = rtlab_workload::reserve::Reserver::open().unwrap();
    if reserver.describe() == "in-process enforcement" {
        assert!(!stale.exists(), "{} was left behind", stale.display());
    } else {
        // A running daemon answered: no in-process enforcer was opened, nothing was repaired.
        let _ = std::fs::remove_dir_all(&stale);
    }
}
