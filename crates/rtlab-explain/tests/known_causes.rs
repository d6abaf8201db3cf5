//! Attribution against causes we create ourselves: a SCHED_FIFO 95 spinner and a loopback flood.
//!
//! Each test runs a small measuring thread (SCHED_FIFO 80, 1 ms absolute sleeps, like the probe's
//! timer thread) on one CPU, records through a real tracefs instance and, at the same time, the
//! BPF recorder (both are handed every late sample), creates the cause on the same CPU, and
//! checks that the episodes of both recorders name it. They need root and tracefs, so they are
//! marked `ignore = "needs root…"` (CI runs them as root with `--include-ignored`); run that way without root or
//! tracefs they fail saying what is missing.

use rtlab_core::{CauseKind, Episode, Metric};
use rtlab_explain::{
    BpfExplainer, BpfExplainerConfig, EventSet, Explainer, ExplainerConfig, LateWakeup,
    RecorderConfig,
};
use rtlab_sys::clock::{monotonic_ns, sleep_until_ns};
use rtlab_sys::sched::{set_current_thread_policy, Policy};
use rtlab_testkit::{measured_cpu, require_root_and_tracefs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The tests pin threads to the same CPU; running them one at a time keeps them independent.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What both recorders explained of the same late samples.
struct Explained {
    tracefs: Vec<Episode>,
    bpf: Vec<Episode>,
    /// Events the tracefs ring lost (it overflows under heavy load; the BPF recorder's window
    /// cannot).
    tracefs_lost_events: u64,
    /// The CLOCK_MONOTONIC origin the episodes' `at_ns` count from.
    origin_ns: u64,
}

/// Which recorders record a measurement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recording {
    /// Both at once, handed the same late samples (the culprits can be compared one by one).
    Both,
    /// One alone: a flood that overwhelms one recorder's reader must not starve the other's.
    TracefsOnly,
    BpfOnly,
}

/// A late-sample source for an explainer, fed by the returned sender.
fn late_channel() -> (
    mpsc::Sender<LateWakeup>,
    rtlab_explain::recorder::LateSource,
) {
    let (sender, receiver) = mpsc::channel::<LateWakeup>();
    let receiver = Mutex::new(receiver);
    let source = Box::new(move |out: &mut Vec<LateWakeup>| {
        out.extend(receiver.lock().unwrap().try_iter());
    });
    (sender, source)
}

/// The measuring thread wakes a cause through `sender` between its clock read and its next sleep
/// (a cause woken by it preempts it right there): every `every` periods it sends the time just
/// before its next wake-up (the cause is to start then, so that wake-up is late with its timer on
/// time), and right after that late wake-up's clock read it sends `None` (the cause is to start
/// at once, so the thread's next target passes before it sleeps).
struct Kick {
    every: u64,
    sender: mpsc::Sender<Option<u64>>,
}

/// The measuring thread: how long it runs, above what a sample is late, and whom it kicks.
struct Probe {
    duration: Duration,
    threshold_ns: u64,
    kick: Option<Kick>,
}

impl Probe {
    fn late_above(threshold_ns: u64) -> Probe {
        Probe {
            duration: Duration::from_millis(3_000),
            threshold_ns,
            kick: None,
        }
    }
}

/// Runs a 1 ms timer thread (`probe`) on `cpu`, sending every sample later than
/// `threshold_ns` to both recorders; `make_cause` runs alongside and must stop by the deadline it
/// is given.
fn measure_with_cause(
    cpu: usize,
    probe: Probe,
    stack_period_ns: Option<u64>,
    events: EventSet,
    recording: Recording,
    make_cause: impl FnOnce(u64) + Send,
) -> Explained {
    let Probe {
        duration,
        threshold_ns,
        kick,
    } = probe;
    let (sender, source) = late_channel();
    let (bpf_sender, bpf_source) = late_channel();
    let origin = monotonic_ns();
    // Time to start both recorders, then the measurement and the cause run for `duration`.
    let deadline_bound = origin + duration.as_nanos() as u64 + 10_000_000_000;
    let config = ExplainerConfig {
        recorder: RecorderConfig {
            cpus: vec![cpu],
            stack_period_ns,
            events,
            ..RecorderConfig::default()
        },
        poll_interval: Duration::from_millis(10),
        origin_ns: origin,
        max_episodes: 10_000,
        settle: Duration::from_millis(100),
        deadline_ns: deadline_bound + 5_000_000_000,
    };
    let explainer = (recording != Recording::BpfOnly)
        .then(|| Explainer::start(config, source).expect("starting the recorder"));
    let measured = AtomicBool::new(false);
    let (tid_sender, tid_receiver) = mpsc::channel::<u32>();
    let (go_sender, go_receiver) = mpsc::channel::<(Option<BpfExplainer>, u64)>();
    let bpf_explainer = std::thread::scope(|scope| {
        let measured = &measured;
        let measuring = scope.spawn(move || {
            rtlab_sys::cpu::pin_current_thread(cpu).unwrap();
            set_current_thread_policy(Policy::Fifo { priority: 80 }).unwrap();
            let tid = rtlab_sys::cpu::current_tid();
            // The BPF recorder watches this thread by its id: it starts once the id is known.
            tid_sender.send(tid).unwrap();
            let (bpf_explainer, deadline) = go_receiver.recv().unwrap();
            let mut intended = monotonic_ns() + 1_000_000;
            let mut period = 0u64;
            let mut kicked = false;
            while intended < deadline {
                sleep_until_ns(intended);
                let actual = monotonic_ns();
                let latency = actual.saturating_sub(intended);
                if latency > threshold_ns {
                    let late = LateWakeup {
                        series: format!("test/wakeup@{cpu}"),
                        metric: Metric::Wakeup,
                        cpu: cpu as u32,
                        tid,
                        intended_ns: intended,
                        actual_ns: actual,
                        latency_ns: latency,
                    };
                    let _ = bpf_sender.send(late.clone());
                    let _ = sender.send(late);
                }
                intended += 1_000_000;
                // After a long delay, skip the periods already missed instead of bursting.
                while intended < actual {
                    intended += 1_000_000;
                }
                period += 1;
                if let Some(kick) = &kick {
                    if std::mem::replace(&mut kicked, false) && latency > threshold_ns {
                        let _ = kick.sender.send(None);
                    } else if period.is_multiple_of(kick.every) {
                        let _ = kick.sender.send(Some(intended - 10_000));
                        kicked = true;
                    }
                }
            }
            measured.store(true, Ordering::SeqCst);
            bpf_explainer
        });
        let tid = tid_receiver.recv().unwrap();
        let bpf_explainer = (recording != Recording::TracefsOnly).then(|| {
            BpfExplainer::start(
                BpfExplainerConfig {
                    cpus: vec![cpu],
                    events,
                    threads: vec![tid],
                    fixed_threshold_ns: Some(threshold_ns),
                    origin_ns: origin,
                    max_episodes: 10_000,
                    deadline_ns: deadline_bound + 5_000_000_000,
                },
                bpf_source,
            )
            .expect("starting the BPF recorder")
        });
        let deadline = monotonic_ns() + duration.as_nanos() as u64;
        go_sender.send((bpf_explainer, deadline)).unwrap();
        scope.spawn(move || make_cause(deadline));
        measuring.join().unwrap()
    });
    assert!(measured.load(Ordering::SeqCst));
    let report = explainer
        .map(|explainer| explainer.finish().expect("explainer finished"))
        .unwrap_or_default();
    let bpf_report = bpf_explainer
        .map(|explainer| explainer.finish().expect("BPF explainer finished"))
        .unwrap_or_default();
    eprintln!("recorder: {:?}", report.stats);
    eprintln!(
        "BPF recorder: {:?} {:?}; late samples {}, without a kernel episode {}",
        bpf_report.stats,
        bpf_report.bpf,
        bpf_report.late_samples,
        bpf_report.unexplained.len()
    );
    let full_only = "sched:sched_wakeup".to_owned();
    if recording != Recording::BpfOnly {
        assert_eq!(
            report.enabled_events.contains(&full_only),
            events == EventSet::Full,
            "{events:?} recorded {:?}",
            report.enabled_events
        );
    }
    if recording != Recording::TracefsOnly {
        assert_eq!(
            bpf_report
                .enabled_events
                .contains(&"bpf:sched_wakeup".to_owned()),
            events == EventSet::Full
        );
    }
    Explained {
        tracefs: report.episodes,
        bpf: bpf_report.episodes,
        tracefs_lost_events: report.stats.lost_events,
        origin_ns: origin,
    }
}

/// The episodes whose largest cause is the task `name`.
fn largest_is<'a>(episodes: &'a [Episode], name: &str) -> Vec<&'a Episode> {
    episodes
        .iter()
        .filter(|episode| {
            episode
                .largest_cause()
                .is_some_and(|largest| largest.kind == CauseKind::Task && largest.name == name)
        })
        .collect()
}

#[test]
#[ignore = "needs root and tracefs"]
fn a_fifo_95_spinner_is_named_as_the_cause_of_the_delays_it_creates() {
    spinner_is_named_as_the_cause(EventSet::Standard);
}

/// The same with every event the full set adds (the probe's own hrtimer is then found through
/// `hrtimer_start`, and `sched_wakeup`/`sched_migrate_task` are in the window).
#[test]
#[ignore = "needs root and tracefs"]
fn a_fifo_95_spinner_is_named_with_the_full_event_set_too() {
    spinner_is_named_as_the_cause(EventSet::Full);
}

fn spinner_is_named_as_the_cause(events: EventSet) {
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    require_root_and_tracefs();
    let cpu = measured_cpu();
    let spinner_name = format!("spin95-{}", std::process::id() % 100_000);
    let spins = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let spins_done = Arc::clone(&spins);
    // When each spin ran (CLOCK_MONOTONIC, from the spinner's own clock reads).
    let spin_times: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let spin_times_written = Arc::clone(&spin_times);
    let name = spinner_name.clone();
    let explained = measure_with_cause(
        cpu,
        Probe::late_above(500_000),
        Some(500_000),
        events,
        Recording::Both,
        move |deadline| {
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    rtlab_sys::cpu::pin_current_thread(cpu).unwrap();
                    set_current_thread_policy(Policy::Fifo { priority: 95 }).unwrap();
                    // Every 200 ms spin ~2 ms; stop on our own at the deadline.
                    let mut next = monotonic_ns() + 100_000_000;
                    let mut times = Vec::with_capacity(64);
                    while next + 2_000_000 < deadline {
                        sleep_until_ns(next);
                        let start = monotonic_ns();
                        let stop = start + 2_000_000;
                        let mut now = start;
                        while now < stop {
                            std::hint::spin_loop();
                            now = monotonic_ns();
                        }
                        times.push((start, now));
                        spins_done.fetch_add(1, Ordering::SeqCst);
                        next += 200_000_000;
                    }
                    *spin_times_written.lock().unwrap() = times;
                })
                .unwrap()
                .join()
                .unwrap();
        },
    );
    let n_spins = spins.load(Ordering::SeqCst);
    let (episodes, origin_ns) = (&explained.tracefs, explained.origin_ns);
    // The episodes the spinner created: those in which it is the largest cause (on a shared VM
    // an unrelated hypervisor stall can land in the same window and dominate it).
    let created = largest_is(episodes, &spinner_name);
    // The BPF recorder explained the same late samples: it must name the same culprit.
    let created_bpf = largest_is(&explained.bpf, &spinner_name);
    let agreeing = created
        .iter()
        .filter(|episode| created_bpf.iter().any(|bpf| bpf.at_ns == episode.at_ns))
        .count();
    eprintln!(
        "BPF: {} episodes, {} name the spinner, {agreeing} of tracefs' {} the same",
        explained.bpf.len(),
        created_bpf.len(),
        created.len()
    );
    for episode in created
        .iter()
        .filter(|episode| !created_bpf.iter().any(|bpf| bpf.at_ns == episode.at_ns))
    {
        eprintln!("tracefs only: {:?}", episode.timeline);
    }
    assert!(
        created_bpf.len() as u64 * 2 >= n_spins,
        "only {} of {n_spins} spins produced a BPF episode naming {spinner_name}: {:#?}",
        created_bpf.len(),
        explained.bpf
    );
    assert!(
        agreeing * 10 >= created.len() * 8,
        "the BPF recorder named the spinner in {agreeing} of the {} episodes tracefs did",
        created.len()
    );
    for episode in &created_bpf {
        assert_eq!(
            episode.causes.iter().map(|cause| cause.ns).sum::<u64>(),
            episode.latency_ns,
            "causes must add up: {episode:#?}"
        );
    }
    eprintln!(
        "{n_spins} spins, {} episodes above 500 µs, {} name the spinner",
        episodes.len(),
        created.len()
    );
    assert!(
        n_spins > 0,
        "the spinner never spun within the run: nothing was tested"
    );
    // Each spin lands on at least one 1 ms wake-up; allow for a few lost to a busy machine.
    assert!(
        created.len() as u64 * 2 >= n_spins,
        "only {} of {n_spins} spins produced an episode naming {spinner_name}: {episodes:#?}",
        created.len()
    );
    // The spinner must be named for the time it spun inside each episode's window, less the
    // interrupts that landed there (a busy disk's BLOCK softirq takes ~20 % of a spin under
    // `stress-ng --io`; with the full event set hrtimer callbacks such as the --stacks sampler's
    // and the probe's own wake-up interrupt are traced too). Measuring the spins, rather than
    // taking the whole window for the spinner's, keeps the check honest on a busy VM: a window can
    // also hold a hypervisor stall, another task or a late timer outside the spin (a 89.6 % share
    // failed this test once that way), which the spinner must not be blamed for either.
    let spin_times = spin_times.lock().unwrap().clone();
    let in_interrupt = |cause: &rtlab_core::Cause| match cause.kind {
        CauseKind::Irq | CauseKind::Softirq => true,
        CauseKind::Timer => cause.name != "timer fired late",
        _ => false,
    };
    let mut spun_outside_interrupts = 0u64;
    for episode in &created {
        let start = origin_ns + episode.at_ns;
        let end = start + episode.latency_ns;
        let spun: u64 = spin_times
            .iter()
            .map(|(spin_start, spin_end)| end.min(*spin_end).saturating_sub(start.max(*spin_start)))
            .sum();
        let interrupts: u64 = episode
            .causes
            .iter()
            .filter(|cause| in_interrupt(cause))
            .map(|cause| cause.ns)
            .sum();
        spun_outside_interrupts += spun.saturating_sub(interrupts);
    }
    let spinner_time: u64 = created
        .iter()
        .flat_map(|episode| episode.causes.iter())
        .filter(|cause| cause.kind == CauseKind::Task && cause.name == spinner_name)
        .map(|cause| cause.ns)
        .sum();
    // What else was named, by cause: printed always, so a run on a busy machine shows where the
    // time went even when it passes.
    let mut elsewhere: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for cause in created.iter().flat_map(|episode| episode.causes.iter()) {
        if !in_interrupt(cause) && cause.name != spinner_name {
            *elsewhere
                .entry(format!("{} {}", cause.kind.as_str(), cause.name))
                .or_default() += cause.ns;
        }
    }
    eprintln!(
        "spinner named for {spinner_time} ns of {spun_outside_interrupts} ns it spun in the windows \
         outside interrupts; elsewhere: {elsewhere:?}"
    );
    assert!(
        spun_outside_interrupts > 0 && spinner_time * 10 >= spun_outside_interrupts * 9,
        "the spinner is named for {spinner_time} of the {spun_outside_interrupts} ns it spun in \
         the windows outside interrupts (elsewhere: {elsewhere:?}): {created:#?}"
    );
    for episode in &created {
        assert_eq!(
            episode.causes.iter().map(|cause| cause.ns).sum::<u64>(),
            episode.latency_ns,
            "causes must add up: {episode:#?}"
        );
        let spinner = episode
            .causes
            .iter()
            .find(|cause| cause.name == spinner_name)
            .unwrap();
        let detail = spinner.detail.as_deref().unwrap_or("");
        // "SCHED_FIFO 95" while the thread lives; "RT priority 95" from the trace alone once it
        // has exited (the last spin's episode may be attributed after that).
        assert!(
            detail.contains("95, outranks the probe")
                && (detail.starts_with("SCHED_FIFO") || detail.starts_with("RT priority")),
            "{detail}"
        );
    }
    // --stacks: a stack sampled inside a spinner episode is the spinner's (the measuring thread's
    // own samples are skipped). Under heavy machine load perf samples can be lost, so one suffices.
    let spinner_stacks = created
        .iter()
        .filter_map(|episode| episode.stack.as_ref())
        .filter(|stack| {
            stack
                .first()
                .is_some_and(|task| task.starts_with(&spinner_name))
        })
        .count();
    assert!(
        spinner_stacks >= 1,
        "none of {} spinner episodes carries the spinner's stack: {:?}",
        created.len(),
        created
            .iter()
            .map(|episode| episode.stack.as_ref().and_then(|stack| stack.first()))
            .collect::<Vec<_>>()
    );
}

/// A late wake-up whose thread does not block again before its next timer fires: a FIFO 95
/// spinner delays a wake-up (its timer on time) and, right after that wake-up's clock read,
/// preempts the probe again, so the probe's next target passes before it sleeps; that timer then
/// fires in an interrupt on top of the running probe, which never blocked in between. Both
/// recorders must name the spinner for the late wake-up. The BPF programs ended a wake-up only at
/// the thread's block and dropped it when the next timer fired first: in the CI rehearsal the
/// probe's work after a late clock read (5–25 µs before its next target, which the 2 ms spin
/// left that close: the spinner woke with the probe's timer) let the target pass in 10 of 15
/// spins, and the spinner test above failed.
#[test]
#[ignore = "needs root and tracefs"]
fn a_late_wakeup_not_followed_by_a_block_is_named_by_both_recorders() {
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    require_root_and_tracefs();
    let cpu = measured_cpu();
    let spinner_name = format!("kick95-{}", std::process::id() % 100_000);
    let (sender, kicks) = mpsc::channel::<Option<u64>>();
    let delayed_spins = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let delayed_spins_done = Arc::clone(&delayed_spins);
    let name = spinner_name.clone();
    let explained = measure_with_cause(
        cpu,
        Probe {
            kick: Some(Kick { every: 100, sender }),
            ..Probe::late_above(500_000)
        },
        None,
        EventSet::Full,
        Recording::Both,
        move |deadline| {
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    rtlab_sys::cpu::pin_current_thread(cpu).unwrap();
                    set_current_thread_policy(Policy::Fifo { priority: 95 }).unwrap();
                    // Spin 2 ms at each kick (from the time it names, or at once); stop at the
                    // deadline or when the probe is done.
                    while let Some(left) = deadline.checked_sub(monotonic_ns()) {
                        let Ok(start) = kicks.recv_timeout(Duration::from_nanos(left)) else {
                            break;
                        };
                        if let Some(start) = start {
                            sleep_until_ns(start);
                            delayed_spins_done.fetch_add(1, Ordering::SeqCst);
                        }
                        let stop = monotonic_ns() + 2_000_000;
                        while monotonic_ns() < stop {
                            std::hint::spin_loop();
                        }
                    }
                })
                .unwrap()
                .join()
                .unwrap();
        },
    );
    let n_spins = delayed_spins.load(Ordering::SeqCst);
    let created = largest_is(&explained.tracefs, &spinner_name);
    let created_bpf = largest_is(&explained.bpf, &spinner_name);
    let agreeing = created
        .iter()
        .filter(|episode| created_bpf.iter().any(|bpf| bpf.at_ns == episode.at_ns))
        .count();
    eprintln!(
        "{n_spins} delayed spins; tracefs named the spinner in {}, BPF in {}, {agreeing} the same",
        created.len(),
        created_bpf.len()
    );
    assert!(n_spins > 0, "the spinner never spun: nothing was tested");
    // Allow for a few spins lost to a busy machine.
    assert!(
        created.len() as u64 * 2 >= n_spins,
        "tracefs named the spinner for {} of {n_spins} delayed spins: {:#?}",
        created.len(),
        explained.tracefs
    );
    assert!(
        agreeing * 10 >= created.len() * 8,
        "the BPF recorder named the spinner in {agreeing} of the {} episodes tracefs did: {:#?}",
        created.len(),
        explained.bpf
    );
}

#[test]
#[ignore = "needs root and tracefs"]
fn a_loopback_flood_shows_network_softirq_time() {
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    require_root_and_tracefs();
    let cpu = measured_cpu();
    let flood = |recording| {
        measure_with_cause(
            cpu,
            Probe::late_above(5_000),
            None,
            EventSet::Standard,
            recording,
            flood_loopback(cpu),
        )
    };
    let bpf = flood(Recording::BpfOnly).bpf;
    let tracefs = flood(Recording::TracefsOnly).tracefs;
    for (recorder, episodes) in [("tracefs", &tracefs), ("bpf", &bpf)] {
        let network_ns: u64 = episodes
            .iter()
            .flat_map(|episode| episode.causes.iter())
            .filter(|cause| {
                cause.kind == CauseKind::Softirq
                    && (cause.name == "NET_RX" || cause.name == "NET_TX")
            })
            .map(|cause| cause.ns)
            .sum();
        eprintln!(
            "{recorder}: {} episodes above 5 µs, {network_ns} ns of NET_RX/NET_TX softirq",
            episodes.len()
        );
        assert!(
            !episodes.is_empty(),
            "{recorder}: the flood produced no late wake-ups above 5 µs"
        );
        assert!(
            network_ns > 0,
            "{recorder}: no NET_RX/NET_TX time in {} episodes: {:#?}",
            episodes.len(),
            &episodes[..episodes.len().min(5)]
        );
    }
}

/// A paced UDP flood over loopback on `cpu` (sender and receiver pinned there) until the deadline.
fn flood_loopback(cpu: usize) -> impl FnOnce(u64) + Send {
    move |deadline| {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let address = receiver.local_addr().unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                rtlab_sys::cpu::pin_current_thread(cpu).unwrap();
                let mut buffer = [0u8; 2048];
                while monotonic_ns() < deadline {
                    let _ = receiver.recv(&mut buffer);
                }
            });
            scope.spawn(|| {
                rtlab_sys::cpu::pin_current_thread(cpu).unwrap();
                let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let payload = [0x5au8; 1400];
                // Paced at 16 packets every 197 µs (about 81 000 a second): enough NET_RX time to
                // land in most wake-ups' windows, few enough events that the tracefs reader keeps
                // up on a loaded machine (unpaced, it lost 98 % of 1.3 million events there and
                // named no network time at all). Not 200 µs: that divides the probe's 1 ms
                // period, so the bursts kept one phase to the wake-ups for the whole run, and
                // when that phase put them outside every window no NET_RX time was seen at all
                // (1 of 3 BPF runs on a quiet machine). At 197 µs the phase moves 15 µs a period.
                let mut next = monotonic_ns();
                while next < deadline {
                    for _ in 0..16 {
                        let _ = sender.send_to(&payload, address);
                    }
                    next += 197_000;
                    sleep_until_ns(next);
                }
            });
        });
    }
}

/// The hard IRQ of this machine's virtio disk (`vda`, which holds the temp dir): its name in
/// /proc/interrupts (also what `irq_handler_entry` reports) and the CPU it is delivered to.
fn disk_irq() -> (String, usize) {
    let device = std::fs::read_link("/sys/block/vda/device")
        .expect("this test needs a virtio-blk disk, /dev/vda (its interrupts are the busy IRQ)");
    let virtio = device
        .file_name()
        .and_then(|name| name.to_str())
        .expect("virtioN")
        .to_owned();
    let interrupts = std::fs::read_to_string("/proc/interrupts").expect("/proc/interrupts");
    let (number, name) = interrupts
        .lines()
        .find_map(|line| {
            let name = line.split_whitespace().last()?;
            let number = line.split(':').next()?.trim();
            (name.starts_with(&format!("{virtio}-req")))
                .then(|| (number.to_owned(), name.to_owned()))
        })
        .unwrap_or_else(|| panic!("no {virtio}-req interrupt in /proc/interrupts"));
    let cpus = std::fs::read_to_string(format!("/proc/irq/{number}/effective_affinity_list"))
        .expect("effective_affinity_list");
    let cpu = cpus
        .trim()
        .split([',', '-'])
        .next()
        .and_then(|cpu| cpu.parse().ok())
        .unwrap_or_else(|| panic!("IRQ {number}'s CPU: {cpus:?}"));
    (name, cpu)
}

/// O_DIRECT 4 KiB reads of a scratch file on the disk from `cpu` until the deadline (`dd
/// iflag=direct` over and over, so every read is a request whose completion interrupt lands on
/// the IRQ's CPU); the file is removed after.
fn read_disk_directly(cpu: usize) -> impl FnOnce(u64) + Send {
    move |deadline| {
        let path = std::env::temp_dir().join(format!("rtlab-irq-test-{}", std::process::id()));
        std::fs::write(&path, vec![0x5au8; 32 << 20]).expect("scratch file in the temp dir");
        while monotonic_ns() < deadline {
            let mut reader = std::process::Command::new("taskset")
                .args(["-c", &cpu.to_string(), "dd", "of=/dev/null"])
                .arg(format!("if={}", path.display()))
                .args(["bs=4k", "iflag=direct", "status=none"])
                .spawn()
                .expect("taskset and dd (util-linux, coreutils)");
            while monotonic_ns() < deadline {
                if reader.try_wait().expect("wait").is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = reader.kill();
            let _ = reader.wait();
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// The busy IRQ of the known causes: both recorders, fed the same late samples, name the
/// disk's hard IRQ handler for the time it ran inside them, and agree episode by episode.
#[test]
#[ignore = "needs root and tracefs"]
fn a_busy_disk_irq_is_named_by_both_recorders() {
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    require_root_and_tracefs();
    let (irq_name, cpu) = disk_irq();
    let interrupts_before = irq_count(&irq_name, cpu);
    let explained = measure_with_cause(
        cpu,
        Probe::late_above(5_000),
        None,
        EventSet::Standard,
        Recording::Both,
        read_disk_directly(cpu),
    );
    let interrupts = irq_count(&irq_name, cpu) - interrupts_before;
    let irq_ns = |episode: &Episode| -> u64 {
        episode
            .causes
            .iter()
            .filter(|cause| cause.kind == CauseKind::Irq && cause.name == irq_name)
            .map(|cause| cause.ns)
            .sum()
    };
    let naming = |episodes: &[Episode]| -> Vec<u64> {
        episodes
            .iter()
            .filter(|episode| irq_ns(episode) > 0)
            .map(|episode| episode.at_ns)
            .collect()
    };
    // Agreement is judged on the late samples both explained (the tracefs ring can overflow
    // under this load, and a sample can miss its kernel episode).
    let both_explained = |episodes: &[Episode], other: &[Episode]| -> Vec<Episode> {
        episodes
            .iter()
            .filter(|episode| other.iter().any(|theirs| theirs.at_ns == episode.at_ns))
            .cloned()
            .collect()
    };
    let tracefs = naming(&both_explained(&explained.tracefs, &explained.bpf));
    let bpf = naming(&both_explained(&explained.bpf, &explained.tracefs));
    let agreeing = tracefs.iter().filter(|at| bpf.contains(at)).count();
    eprintln!(
        "{interrupts} {irq_name} interrupts on CPU {cpu}; episodes above 5 µs: tracefs {}, bpf {}; \
         of those both explained, naming the IRQ: tracefs {}, bpf {}, both {agreeing}",
        explained.tracefs.len(),
        explained.bpf.len(),
        tracefs.len(),
        bpf.len()
    );
    assert!(
        interrupts > 1_000,
        "the reads made only {interrupts} {irq_name} interrupts on CPU {cpu}: nothing was tested"
    );
    assert!(
        !tracefs.is_empty() && !bpf.is_empty(),
        "{irq_name} named in {} tracefs and {} BPF episodes",
        tracefs.len(),
        bpf.len()
    );
    // The same late samples, the same culprit: most episodes one recorder blames on the disk
    // IRQ, the other does too (a window the BPF tail or the tracefs ring cut short may differ).
    assert!(
        agreeing * 10 >= tracefs.len() * 8,
        "BPF named {irq_name} in {agreeing} of the {} episodes tracefs did",
        tracefs.len()
    );
    // The other way round only when the tracefs ring kept every event: it cannot name an
    // interrupt whose events it lost.
    if explained.tracefs_lost_events == 0 {
        assert!(
            agreeing * 10 >= bpf.len() * 8,
            "tracefs named {irq_name} in {agreeing} of the {} episodes BPF did",
            bpf.len()
        );
    } else {
        eprintln!(
            "the tracefs ring lost {} events: its episodes are not held to BPF's",
            explained.tracefs_lost_events
        );
    }
    for episodes in [&explained.tracefs, &explained.bpf] {
        for episode in episodes {
            assert_eq!(
                episode.causes.iter().map(|cause| cause.ns).sum::<u64>(),
                episode.latency_ns,
                "causes must add up: {episode:#?}"
            );
        }
    }
}

/// Interrupts of `name` delivered to `cpu` so far (/proc/interrupts).
fn irq_count(name: &str, cpu: usize) -> u64 {
    let interrupts = std::fs::read_to_string("/proc/interrupts").expect("/proc/interrupts");
    interrupts
        .lines()
        .find(|line| line.split_whitespace().last() == Some(name))
        .and_then(|line| line.split_whitespace().nth(1 + cpu))
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}
