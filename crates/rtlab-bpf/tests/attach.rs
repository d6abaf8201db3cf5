//! Root-only: the programs load, attach, record a measuring thread's wake-ups, and leave nothing
//! behind when the recorder is dropped.

use rtlab_testkit::wait;

use rtlab_bpf::{
    loaded_program_names, program_ids_of_process, still_loaded, BpfConfig, BpfRecorder, Record,
    PROGRAM_PREFIX,
};
use std::time::{Duration, Instant};

fn ours() -> Vec<String> {
    loaded_program_names()
        .expect("BPF_PROG_GET_NEXT_ID works as root")
        .into_iter()
        .filter(|name| name.starts_with(PROGRAM_PREFIX))
        .collect()
}

/// The kernel frees a program after its last link closes, asynchronously (RCU): which of `ids`
/// are still loaded after `limit`. (By id: another rtlab may have its own programs loaded.)
fn gone_within(ids: &[u32], limit: Duration) -> Vec<u32> {
    let left = || still_loaded(ids).expect("BPF_PROG_GET_NEXT_ID works as root");
    wait::poll(limit, || Some(left()).filter(Vec::is_empty)).unwrap_or_else(left)
}

#[test]
#[ignore = "needs root"]
fn programs_attach_record_wakeups_and_detach_on_drop() {
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let mut recorder = BpfRecorder::start(&BpfConfig {
        cpus,
        ..BpfConfig::default()
    })
    .expect("the recorder loads as root");
    assert!(recorder.attached().contains(&"sched_switch"));
    assert!(!ours().is_empty(), "our programs are listed while attached");
    let ids = program_ids_of_process(std::process::id()).expect("fdinfo");
    assert!(
        ids.len() >= recorder.attached().len(),
        "this process holds its programs: {ids:?}"
    );
    // This thread sleeps on absolute timers (hrtimer_wakeup): each wake-up is a sample, and with
    // threshold 0 every one is an episode. Pinned, so its own block is on the CPU it wakes on.
    let tid = rtlab_sys::cpu::current_tid();
    let cpu = rtlab_sys::cpu::current_cpu().expect("the CPU this thread runs on");
    rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
    recorder.watch_thread(tid, 3).expect("watch");
    recorder.set_threshold(3, 0).expect("threshold");
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut samples = 0;
    let mut episodes = Vec::new();
    recorder.drain(|record| match record {
        Record::Sample(sample) => {
            assert_eq!(sample.tid, tid);
            assert_eq!(sample.slot, 3);
            assert!(sample.switched_ns >= sample.intended_ns);
            samples += 1;
        }
        Record::Episode(episode) => episodes.push(episode),
    });
    assert!(samples >= 20, "{samples} samples from ~100 sleeps");
    let episode = episodes.first().expect("episodes at threshold 0");
    assert_eq!(episode.wakeup.tid, tid);
    assert!(
        episode.wakeup.expired_ns >= episode.wakeup.intended_ns,
        "{episode:?}"
    );
    assert!(
        episode.events.iter().any(|event| matches!(
            event.kind,
            rtlab_bpf::RawKind::Switch { next_pid, .. } if next_pid == tid as i32
        )),
        "the window holds the switch to the thread"
    );
    // The episodes are short tails from the CPU's last switch before the wake-up began, not the
    // whole 1024-event window, and they reach back to the intended time (so the CPU's state then
    // is known). On a busy machine two switches can fall between the intended time and the
    // timer's late interrupt, so one in ten may start later.
    for episode in &episodes {
        assert!(
            episode.events.len() <= 256,
            "a tail of at most 256 events: {} events",
            episode.events.len()
        );
    }
    let reaching_back = episodes
        .iter()
        .filter(|episode| {
            episode.events.iter().any(|event| {
                matches!(event.kind, rtlab_bpf::RawKind::Switch { .. })
                    && event.timestamp_ns <= episode.wakeup.intended_ns
            })
        })
        .count();
    assert!(
        reaching_back * 10 >= episodes.len() * 9,
        "{reaching_back} of {} episodes start at a switch before their intended time: {:?}",
        episodes.len(),
        episodes.first()
    );
    let counters = recorder.counters().expect("counters");
    assert!(counters.events > 0 && counters.samples >= samples);
    assert!(
        counters.tail_episodes >= episodes.len() as u64 / 2,
        "{} of {} episodes sent as tails",
        counters.tail_episodes,
        episodes.len()
    );
    let histogram = recorder.histogram(3).expect("histogram");
    assert!(histogram.iter().sum::<u64>() >= samples);
    println!("attached: {:?}", recorder.attached());
    drop(recorder);
    assert_eq!(
        gone_within(&ids, Duration::from_secs(10)),
        Vec::<u32>::new(),
        "nothing of ours left after drop"
    );
}

/// A thread that overruns its period sleeps towards a target already past: its timer then fires
/// in an interrupt on top of the thread, which is woken while it still runs and never switches
/// out or in. Both wake-ups must still be samples: the one it overran (it ended when the next
/// began, not at a block) and the one whose target had passed (it "switched in" when its timer
/// woke it). Before the programs knew this, the first was dropped when the next began and the
/// second never got a switch-in: the explain test's FIFO 95 spinner, preempting the probe just
/// after its clock read, left late samples without a kernel episode that way.
#[test]
#[ignore = "needs root"]
fn a_wakeup_whose_target_had_passed_is_still_a_sample() {
    let cpu = rtlab_sys::cpu::current_cpu().expect("the CPU this thread runs on");
    rtlab_sys::cpu::pin_current_thread(cpu).expect("pin");
    let mut recorder = BpfRecorder::start(&BpfConfig {
        cpus: vec![cpu],
        ..BpfConfig::default()
    })
    .expect("the recorder loads as root");
    let tid = rtlab_sys::cpu::current_tid();
    recorder.watch_thread(tid, 0).expect("watch");
    recorder.set_threshold(0, 0).expect("threshold");
    const PERIOD_NS: u64 = 1_000_000;
    const PERIODS: u64 = 200;
    // Every 20th period the thread runs on for 1.5 periods after its wake-up.
    let overrun = |period: u64| period % 20 == 10;
    let start = rtlab_sys::clock::monotonic_ns() + PERIOD_NS;
    for period in 0..PERIODS {
        rtlab_sys::clock::sleep_until_ns(start + period * PERIOD_NS);
        if overrun(period) {
            let until = rtlab_sys::clock::monotonic_ns() + 3 * PERIOD_NS / 2;
            while rtlab_sys::clock::monotonic_ns() < until {
                std::hint::spin_loop();
            }
        }
    }
    // One more block, so the last wake-up is finished too.
    std::thread::sleep(Duration::from_millis(2));
    let mut sampled = std::collections::HashSet::new();
    recorder.drain(|record| {
        if let Record::Sample(sample) = record {
            sampled.insert(sample.intended_ns);
        }
    });
    let overrun_pairs: Vec<u64> = (0..PERIODS - 1).filter(|&period| overrun(period)).collect();
    let missing: Vec<String> = overrun_pairs
        .iter()
        .flat_map(|&period| [period, period + 1])
        .filter(|&period| !sampled.contains(&(start + period * PERIOD_NS)))
        .map(|period| {
            let kind = if overrun(period) {
                "overran"
            } else {
                "target passed"
            };
            format!("{period} ({kind})")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "wake-ups around {} overruns without a sample: {missing:?} ({} samples of {PERIODS} sleeps)",
        overrun_pairs.len(),
        sampled.len()
    );
}

fn bpf_stats_enabled() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").expect("the sysctl exists")
}

#[test]
#[ignore = "needs root"]
fn run_time_statistics_count_each_program_and_leave_the_sysctl_alone() {
    let before = bpf_stats_enabled();
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let recorder = BpfRecorder::start(&BpfConfig {
        cpus,
        ..BpfConfig::default()
    })
    .expect("the recorder loads as root");
    let stats = rtlab_bpf::RunTimeStats::enable().expect("BPF_ENABLE_STATS as root");
    let deadline = Instant::now() + Duration::from_millis(100);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let costs = recorder.program_costs().expect("program info");
    drop(stats);
    // BPF_ENABLE_STATS counts by descriptor and never writes the sysctl.
    assert_eq!(bpf_stats_enabled(), before, "the sysctl is left as it was");
    let switch = costs
        .iter()
        .find(|cost| cost.tracepoint == "sched_switch")
        .expect("sched_switch is attached");
    assert!(
        switch.run_count > 0 && switch.run_time_ns > 0,
        "~100 sleeps switch: {switch:?}"
    );
    assert_eq!(costs.len(), recorder.attached().len());
}
