//! The runner: one real thread per workload thread and per device, the load and competitors of
//! `rtlab_session::load`, reservations through [`crate::reserve`], and what they counted.
//!
//! Every thread is created, pinned and given its policy before the common start time, then waits
//! for it; from then on a thread's loop touches only preallocated state (its histograms, event
//! lists, the lock-free rings, futex words and the two locks), so the runner does not measure
//! itself. Every thread stops on its own at the end time: a periodic thread does not sleep past
//! it, a woken thread waits at most 50 ms at a time, a lock is waited for at most until the end
//! plus [`LOCK_GRACE`]; RT competitors stop at the end by themselves and are demoted by the
//! watchdog if not; all threads are threads of this process, so a SIGKILL ends every one of them
//! (and with them any SCHED_DEADLINE or RT policy).

use crate::model::{LockKind, ThreadSpec, Trigger, Workload};
pub use crate::results::{DeviceResult, ThreadResult};
use crate::ring::Ring;
use rtlab_core::run_workload::EVENTS_KEPT;
use rtlab_core::{LatencyHistogram, Nanos, WorkloadEvent};
use rtlab_sys::clock::{monotonic_ns, sleep_until_ns};
use rtlab_sys::locks::{PiMutex, PlainMutex};
use rtlab_sys::sched::Policy;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// How long past the end a thread may still wait for a lock.
pub const LOCK_GRACE: Nanos = Nanos::from_millis(500);
/// The longest a waiting thread sleeps before it looks at the clock and the stop flag again.
const WAIT_SLICE_NS: u64 = 50_000_000;
/// The device thread's SCHED_DEADLINE runtime and deadline per period. It needs ~20 µs a period,
/// but the kernel charges it for whatever runs while it is current: without
/// CONFIG_IRQ_TIME_ACCOUNTING (Debian's default) every interrupt and softirq (a busy disk's
/// BLOCK softirq), and with HRTICK_DL off its overrun is seen only at the next 4 ms tick. A
/// 200 µs budget overrun by 0.5 ms was pushed 3 periods back (each period's replenishment pays
/// 200 µs of the debt): 30 ms late, 3-4 glitches in one of ~10 runs of experiment 6. With 2 ms
/// the same charge leaves budget over.
pub const DEVICE_RUNTIME_NS: u64 = 2_000_000;
pub const DEVICE_DEADLINE_NS: u64 = 2_000_000;
/// Time between creating the threads and the common start, for reservations and the load.
const START_MARGIN_NS: u64 = 300_000_000;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("thread '{thread}': {message}")]
    Setup { thread: String, message: String },
    #[error(transparent)]
    Reserve(#[from] crate::reserve::ReserveError),
    #[error("load: {0}")]
    Load(#[from] rtlab_session::load::LoadError),
    #[error("starting thread '{thread}': {source}")]
    Spawn {
        thread: String,
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// True when the request was at fault (a bad competitor, a reservation refused by admission),
    /// not the system.
    pub fn is_input(&self) -> bool {
        match self {
            RunError::Load(error) => error.is_input(),
            RunError::Reserve(crate::reserve::ReserveError::Refused { .. }) => true,
            _ => false,
        }
    }
}

/// How to run a workload.
#[derive(Clone, Debug)]
pub struct RunSettings {
    pub duration: Nanos,
    /// `POLICY:PRIO[@CPU]` spinners (paper 003's competitor).
    pub competitors: Vec<String>,
    /// `--load`: a profile and/or stressors.
    pub load: Option<String>,
    /// Run RT competitors even when RT throttling is off.
    pub force: bool,
    /// Keep each device's play log (one byte per period) for WAV files.
    pub keep_play_log: bool,
    /// Trace the run and explain each underrun and deadline miss (`--explain`).
    pub explain: bool,
}

/// Everything the run produced, before it becomes a record.
#[derive(Debug)]
pub struct RunResult {
    pub started: std::time::SystemTime,
    pub duration: Nanos,
    pub threads: Vec<ThreadResult>,
    pub devices: Vec<DeviceResult>,
    pub load: Option<rtlab_core::Load>,
    pub warnings: Vec<String>,
    pub interrupted: bool,
    /// With `explain`: each underrun and deadline miss (the first ones) with its cause.
    pub explained: Vec<rtlab_core::ExplainedEvent>,
}

/// A thread's wake-up word: wakers count up and set the release time of the first pending wake.
#[derive(Debug, Default)]
struct WakeWord {
    pending: AtomicU32,
    released_ns: AtomicU64,
}

impl WakeWord {
    fn wake(&self, released_ns: u64) {
        let _ = self.released_ns.compare_exchange(
            0,
            released_ns.max(1),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        self.pending.fetch_add(1, Ordering::Release);
        rtlab_sys::futex::wake(&self.pending, 1);
    }

    /// Waits for a wake until `end_ns` or `stop`; returns the release time.
    fn wait(&self, end_ns: u64, stop: &AtomicBool) -> Option<u64> {
        loop {
            if self.pending.swap(0, Ordering::AcqRel) > 0 {
                let released = self.released_ns.swap(0, Ordering::AcqRel);
                return Some(if released == 0 {
                    monotonic_ns()
                } else {
                    released
                });
            }
            let now = monotonic_ns();
            if now >= end_ns || stop.load(Ordering::Relaxed) {
                return None;
            }
            rtlab_sys::futex::wait(&self.pending, 0, (end_ns - now).min(WAIT_SLICE_NS));
        }
    }
}

enum SharedLock {
    Plain(PlainMutex),
    Pi(PiMutex),
}

impl SharedLock {
    /// Takes the lock; false when it could not be had before `deadline_ns`.
    fn lock(&self, deadline_ns: u64) -> bool {
        match self {
            SharedLock::Plain(lock) => lock.lock_until(deadline_ns).is_ok(),
            SharedLock::Pi(lock) => matches!(lock.lock_until(deadline_ns), Ok(Ok(()))),
        }
    }

    fn unlock(&self) {
        match self {
            SharedLock::Plain(lock) => lock.unlock(),
            SharedLock::Pi(lock) => {
                let _ = lock.unlock();
            }
        }
    }
}

/// State every thread sees.
struct Shared {
    workload: Workload,
    rings: Vec<Ring>,
    locks: Vec<SharedLock>,
    wake_words: Vec<WakeWord>,
    /// The thread that produces into each ring (woken by a device when a slot frees).
    ring_producer: Vec<Option<usize>>,
    /// CLOCK_MONOTONIC start, 0 until known; threads futex-wait on `go`.
    start_ns: AtomicU64,
    go: AtomicU32,
    end_ns: AtomicU64,
    stop: Arc<AtomicBool>,
}

impl Shared {
    /// Waits for the start; returns (start, end) or None when stopped before it.
    fn wait_for_start(&self) -> Option<(u64, u64)> {
        while self.go.load(Ordering::Acquire) == 0 {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            rtlab_sys::futex::wait(&self.go, 0, WAIT_SLICE_NS);
        }
        if self.go.load(Ordering::Acquire) == 2 {
            return None;
        }
        let start = self.start_ns.load(Ordering::Acquire);
        sleep_until_ns(start);
        Some((start, self.end_ns.load(Ordering::Acquire)))
    }
}

fn push_event(events: &mut Vec<WorkloadEvent>, event: WorkloadEvent) {
    if events.len() < EVENTS_KEPT {
        events.push(event);
    }
}

/// Sets up the calling thread: affinity, then policy.
fn set_up(cpus: &[usize], policy: Policy) -> Result<(), String> {
    if !cpus.is_empty() {
        rtlab_sys::cpu::pin_current_thread_to(cpus)
            .map_err(|error| format!("cannot run on CPUs {cpus:?}: {error}"))?;
    }
    rtlab_sys::sched::set_current_thread_policy(policy).map_err(|error| {
        format!(
            "cannot set {} {}: {error}",
            policy.name(),
            policy.priority_or_nice()
        )
    })
}

fn work_at(spec: &ThreadSpec, since_start_ns: u64) -> Option<Nanos> {
    let mut work = Some(spec.work);
    for phase in &spec.phases {
        if phase.after.0 <= since_start_ns {
            work = if phase.active {
                Some(phase.work.unwrap_or(work.unwrap_or(spec.work)))
            } else {
                None
            };
        }
    }
    work
}

fn run_thread(shared: &Shared, index: usize, result: &mut ThreadResult) {
    let Some((start_ns, end_ns)) = shared.wait_for_start() else {
        return;
    };
    let spec = &shared.workload.threads[index];
    let deadline = spec.effective_deadline();
    let cpu_before = rtlab_sys::thread_clock::thread_cpu_time_ns();
    let mut next_release = match spec.trigger {
        Trigger::Period { offset, .. } => start_ns + offset.0,
        _ => 0,
    };
    loop {
        let release = match spec.trigger {
            Trigger::Period { period, .. } => {
                let release = next_release;
                next_release += period.0;
                if release >= end_ns || shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                sleep_until_ns(release);
                release
            }
            Trigger::WokenBy(_) | Trigger::BufferFree(_) => {
                match shared.wake_words[index].wait(end_ns, &shared.stop) {
                    Some(release) => release,
                    None => break,
                }
            }
        };
        let began = monotonic_ns();
        if began >= end_ns {
            break;
        }
        let Some(work) = work_at(spec, began - start_ns) else {
            continue;
        };
        activate(shared, spec, work, end_ns, start_ns, result);
        let done = monotonic_ns();
        result.activations += 1;
        let wakeup = began.saturating_sub(release);
        result.wakeup.record(wakeup);
        let second = ((began - start_ns) / 1_000_000_000) as usize;
        if let Some(slot) = result.wakeup_max_per_second.get_mut(second) {
            *slot = (*slot).max(wakeup);
        }
        let response = done.saturating_sub(release);
        result.response.record(response);
        if let Some(deadline) = deadline {
            if response > deadline.0 {
                result.deadline_misses += 1;
                push_event(
                    &mut result.deadline_miss_events,
                    WorkloadEvent {
                        at_ns: release.saturating_sub(start_ns),
                        late_ns: Some(response - deadline.0),
                    },
                );
            }
        }
        for &target in &spec.wakes {
            shared.wake_words[target].wake(done);
        }
    }
    result.cpu_time_ns = rtlab_sys::thread_clock::thread_cpu_time_ns() - cpu_before;
}

/// One activation: the critical section, then the work (per buffer when producing).
fn activate(
    shared: &Shared,
    spec: &ThreadSpec,
    work: Nanos,
    end_ns: u64,
    start_ns: u64,
    result: &mut ThreadResult,
) {
    if let Some(section) = spec.critical_section {
        let lock = &shared.locks[section.lock];
        if lock.lock(end_ns + LOCK_GRACE.0) {
            rtlab_sys::thread_clock::spin_cpu_time_ns(section.critical.0);
            lock.unlock();
        }
    }
    if spec.produces.is_none() && spec.consumes.is_none() {
        rtlab_sys::thread_clock::spin_cpu_time_ns(work.0);
        return;
    }
    loop {
        if let Some(output) = spec.produces {
            if shared.rings[output].is_full() {
                break;
            }
        }
        if let Some(input) = spec.consumes {
            let now = monotonic_ns();
            if shared.rings[input].consume_ready_by(now).is_none() {
                result.starvations += 1;
                push_event(
                    &mut result.starvation_events,
                    WorkloadEvent {
                        at_ns: now.saturating_sub(start_ns),
                        late_ns: None,
                    },
                );
                break;
            }
        }
        rtlab_sys::thread_clock::spin_cpu_time_ns(work.0);
        if let Some(output) = spec.produces {
            shared.rings[output].produce(monotonic_ns());
        }
        if !spec.fill || monotonic_ns() >= end_ns {
            break;
        }
    }
}

/// The device: at every period boundary it takes one buffer that was ready by then, or counts an
/// underrun; then it wakes the ring's producer.
fn run_device(shared: &Shared, ring_index: usize, result: &mut DeviceResult) {
    let Some((start_ns, end_ns)) = shared.wait_for_start() else {
        return;
    };
    let ring = &shared.rings[ring_index];
    let period = shared.workload.rings[ring_index].period.0;
    let producer = shared.ring_producer[ring_index];
    let mut boundary = start_ns + period;
    result.tid = rtlab_sys::cpu::current_tid();
    while boundary <= end_ns && !shared.stop.load(Ordering::Relaxed) {
        sleep_until_ns(boundary);
        result.periods += 1;
        let played = ring.consume_ready_by(boundary).is_some();
        if !played {
            result.underruns += 1;
            if result.underrun_events.len() < EVENTS_KEPT {
                result
                    .underrun_device_late_ns
                    .push(monotonic_ns().saturating_sub(boundary));
            }
            push_event(
                &mut result.underrun_events,
                WorkloadEvent {
                    at_ns: boundary - start_ns,
                    late_ns: None,
                },
            );
        }
        if result.play_log.len() < result.play_log.capacity() {
            result.play_log.push(played);
        }
        // The producer (a mixer) runs every period the ring has room, as a sound card's
        // interrupt would wake it, also after an underrun.
        if let Some(producer) = producer {
            if !ring.is_full() {
                shared.wake_words[producer].wake(boundary);
            }
        }
        boundary += period;
    }
}

/// The device thread's scheduling: SCHED_DEADLINE with a short deadline (a sound card's DMA is
/// never held up, and a deadline thread is neither RT-throttled nor deferred by the fair server),
/// else SCHED_FIFO at its priority on its CPUs. True when either was granted.
fn device_policy(device: &crate::model::DeviceSpec, period: Nanos) -> bool {
    let deadline = Policy::Deadline {
        runtime_ns: DEVICE_RUNTIME_NS.min(period.0 / 5),
        deadline_ns: DEVICE_DEADLINE_NS
            .min(period.0 / 2)
            .max(DEVICE_RUNTIME_NS.min(period.0 / 5)),
        period_ns: period.0,
    };
    if rtlab_sys::sched::set_current_thread_policy(deadline).is_ok() {
        return true;
    }
    if !device.cpus.is_empty() {
        let _ = rtlab_sys::cpu::pin_current_thread_to(&device.cpus);
    }
    rtlab_sys::sched::set_current_thread_policy(Policy::Fifo {
        priority: device.priority,
    })
    .is_ok()
}

/// Runs `workload` with `settings`; `stop` ends it early (SIGINT).
pub fn run(
    workload: &Workload,
    settings: &RunSettings,
    stop: &Arc<AtomicBool>,
) -> Result<RunResult, RunError> {
    let duration = settings.duration;
    let load_plan = rtlab_session::load::validate(&rtlab_session::load::LoadRequest {
        load: settings.load.clone(),
        load_cmd: None,
        competitor: settings.competitors.clone(),
        usage: None,
        force: settings.force,
    })?;
    let mut warnings: Vec<String> = load_plan.warnings().to_vec();
    check_realtime_permitted(workload)?;
    let _memory = match rtlab_sys::memory::MemoryLock::lock_all() {
        Ok(lock) => Some(lock),
        Err(error) => {
            warnings.push(format!(
                "memory not locked (mlockall: {error}): page faults may add latency"
            ));
            None
        }
    };
    let shared = Arc::new(shared_state(workload, stop));
    // From here on every exit path must release the threads: `Started` does it on drop.
    let mut started = Started {
        shared: Arc::clone(&shared),
        threads: Vec::new(),
        devices: Vec::new(),
    };
    let seconds = (duration.0 / 1_000_000_000 + 2) as usize;
    let mut tids: Vec<u32> = Vec::new();
    for (index, spec) in workload.threads.iter().enumerate() {
        tids.push(spawn_thread(&shared, index, spec, seconds, &mut started)?);
    }
    for (ring_index, ring) in workload.rings.iter().enumerate() {
        let Some(device) = &ring.device else {
            continue;
        };
        spawn_device(&shared, ring_index, ring, device, settings, &mut started)?;
    }
    let mut reservations = reserve_threads(workload, &tids, &mut warnings)?;
    let mut tracer = start_tracer(settings, &mut warnings);
    // The load starts first (its threads are created and lock their stacks, which can take long
    // on a busy machine); the start is set only once it runs, so no release is in the past. The
    // load stops by itself 2 s after the end it was given, which covers a late start.
    let planned_start_ns = monotonic_ns() + START_MARGIN_NS;
    let running_load = if load_plan.is_idle() {
        None
    } else {
        Some(load_plan.start(planned_start_ns, planned_start_ns + duration.0)?)
    };
    let start_ns = planned_start_ns.max(monotonic_ns() + START_MARGIN_NS / 3);
    let end_ns = start_ns + duration.0;
    if start_ns - planned_start_ns > 1_000_000_000 {
        warnings.push(format!(
            "the load took {} to start; competitors may stop up to that long before the end",
            Nanos(start_ns - planned_start_ns)
        ));
    }
    let started_at = std::time::SystemTime::now()
        + std::time::Duration::from_nanos(start_ns.saturating_sub(monotonic_ns()));
    shared.start_ns.store(start_ns, Ordering::Release);
    shared.end_ns.store(end_ns, Ordering::Release);
    shared.go.store(1, Ordering::Release);
    rtlab_sys::futex::wake(&shared.go, u32::MAX);
    let mut running_load = running_load;
    wait_for_the_end(start_ns, end_ns, stop, &mut running_load, &mut tracer);
    let interrupted = stop.load(Ordering::Relaxed) && monotonic_ns() < end_ns;
    let load = running_load.map(|running| {
        let (load, load_warnings) = running.stop(&load_plan);
        warnings.extend(load_warnings);
        load
    });
    // Reservations end while the threads still live, so they are restored, not just forgotten.
    if let Some(mut enforcement) = reservations.reserver.take() {
        enforcement.release_all();
    }
    let (mut threads, devices) = started.join();
    for (thread, (granted, tid)) in threads
        .iter_mut()
        .zip(reservations.scheduling.into_iter().zip(&tids))
    {
        thread.tid = *tid;
        if let Some(granted) = granted {
            thread.scheduling = granted;
        }
    }
    let explained = match tracer {
        Some(mut tracer) => {
            let (explained, trace_warnings) =
                tracer.explain_run(workload, &threads, &devices, start_ns);
            warnings.extend(trace_warnings);
            explained
        }
        None => Vec::new(),
    };
    for device in &devices {
        if !device.realtime {
            warnings.push(format!(
                "device '{}' could not run SCHED_FIFO: it judged by buffer completion times, so its counts stay exact",
                device.name
            ));
        }
    }
    Ok(RunResult {
        started: started_at,
        duration: if interrupted {
            Nanos(monotonic_ns().saturating_sub(start_ns))
        } else {
            duration
        },
        threads,
        devices,
        load,
        warnings,
        interrupted,
        explained,
    })
}

/// Fails, naming the first such thread, when a thread needs an RT policy or a reservation and
/// this process may not give one.
fn check_realtime_permitted(workload: &Workload) -> Result<(), RunError> {
    let needs_rt = workload
        .threads
        .iter()
        .any(|thread| thread.policy.is_realtime() || thread.reserve.is_some());
    if needs_rt && !rtlab_sys::sched::realtime_permitted() {
        return Err(RunError::Setup {
            thread: workload
                .threads
                .iter()
                .find(|thread| thread.policy.is_realtime() || thread.reserve.is_some())
                .map_or_else(String::new, |thread| thread.name.clone()),
            message: "needs an RT policy or a reservation: run as root or with CAP_SYS_NICE".into(),
        });
    }
    Ok(())
}

/// The state every thread sees, before the start is known.
fn shared_state(workload: &Workload, stop: &Arc<AtomicBool>) -> Shared {
    let ring_producer = (0..workload.rings.len())
        .map(|ring| {
            workload
                .threads
                .iter()
                .position(|thread| thread.produces == Some(ring))
        })
        .collect();
    Shared {
        workload: workload.clone(),
        rings: workload
            .rings
            .iter()
            .map(|ring| Ring::new(ring.buffers, ring.prefill))
            .collect(),
        locks: workload
            .locks
            .iter()
            .map(|lock| match lock.kind {
                LockKind::Plain => SharedLock::Plain(PlainMutex::new()),
                LockKind::PriorityInheritance => SharedLock::Pi(PiMutex::new()),
            })
            .collect(),
        wake_words: workload
            .threads
            .iter()
            .map(|_| WakeWord::default())
            .collect(),
        ring_producer,
        start_ns: AtomicU64::new(0),
        go: AtomicU32::new(0),
        end_ns: AtomicU64::new(0),
        stop: Arc::clone(stop),
    }
}

/// Starts the thread of `spec` (added to `started`) and waits until it has its CPUs and policy;
/// returns its thread id.
fn spawn_thread(
    shared: &Arc<Shared>,
    index: usize,
    spec: &ThreadSpec,
    seconds: usize,
    started: &mut Started,
) -> Result<u32, RunError> {
    let (ready_sender, ready_receiver) = mpsc::channel::<Result<u32, String>>();
    let thread_shared = Arc::clone(shared);
    let spec_for_thread = spec.clone();
    let mut result = ThreadResult {
        name: spec.name.clone(),
        tid: 0,
        scheduling: spec.scheduling(),
        policy: spec.policy,
        activations: 0,
        wakeup: LatencyHistogram::new(),
        response: LatencyHistogram::new(),
        wakeup_max_per_second: vec![0; seconds],
        deadline_misses: 0,
        deadline_miss_events: Vec::with_capacity(EVENTS_KEPT),
        starvations: 0,
        starvation_events: Vec::with_capacity(EVENTS_KEPT),
        cpu_time_ns: 0,
    };
    let handle = std::thread::Builder::new()
        .name(format!(
            "wl-{}",
            spec.name.chars().take(12).collect::<String>()
        ))
        .spawn(move || {
            match set_up(&spec_for_thread.cpus, spec_for_thread.policy) {
                Ok(()) => {
                    let _ = ready_sender.send(Ok(rtlab_sys::cpu::current_tid()));
                }
                Err(message) => {
                    let _ = ready_sender.send(Err(message));
                    return result;
                }
            }
            run_thread(&thread_shared, index, &mut result);
            let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
            result
        })
        .map_err(|source| RunError::Spawn {
            thread: spec.name.clone(),
            source,
        })?;
    started.threads.push(handle);
    match ready_receiver.recv() {
        Ok(Ok(tid)) => Ok(tid),
        Ok(Err(message)) => Err(RunError::Setup {
            thread: spec.name.clone(),
            message,
        }),
        Err(_) => Err(RunError::Setup {
            thread: spec.name.clone(),
            message: "the thread ended during set-up".into(),
        }),
    }
}

/// Starts the thread of the device draining ring `ring_index` (added to `started`).
fn spawn_device(
    shared: &Arc<Shared>,
    ring_index: usize,
    ring: &crate::model::RingSpec,
    device: &crate::model::DeviceSpec,
    settings: &RunSettings,
    started: &mut Started,
) -> Result<(), RunError> {
    let device_shared = Arc::clone(shared);
    let periods = (settings.duration.0 / ring.period.0 + 2) as usize;
    let mut result = DeviceResult {
        name: ring.name.clone(),
        buffer_period: ring.period,
        buffers: ring.buffers,
        periods: 0,
        underruns: 0,
        underrun_events: Vec::with_capacity(EVENTS_KEPT),
        play_log: Vec::with_capacity(if settings.keep_play_log { periods } else { 0 }),
        realtime: false,
        underrun_device_late_ns: Vec::with_capacity(EVENTS_KEPT),
        tid: 0,
    };
    let device = device.clone();
    let period = ring.period;
    let handle = std::thread::Builder::new()
        .name(format!(
            "wl-dev-{}",
            ring.name.chars().take(8).collect::<String>()
        ))
        .spawn(move || {
            result.realtime = device_policy(&device, period);
            run_device(&device_shared, ring_index, &mut result);
            let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
            result
        })
        .map_err(|source| RunError::Spawn {
            thread: format!("device {}", ring.name),
            source,
        })?;
    started.devices.push(handle);
    Ok(())
}

/// The reservations made for the run, and how each thread ended up scheduled.
struct Reservations {
    /// Open when any thread has a reservation; dropping it puts the threads back.
    reserver: Option<crate::reserve::Reserver>,
    /// Per thread: how its reservation was granted, `None` for a thread without one.
    scheduling: Vec<Option<String>>,
}

/// Makes each thread's reservation, on the threads' ids, before the start.
fn reserve_threads(
    workload: &Workload,
    tids: &[u32],
    warnings: &mut Vec<String>,
) -> Result<Reservations, RunError> {
    let mut reserver = None;
    let mut scheduling: Vec<Option<String>> = vec![None; workload.threads.len()];
    for (index, spec) in workload.threads.iter().enumerate() {
        let Some(reservation) = spec.reserve else {
            continue;
        };
        if reserver.is_none() {
            reserver = Some(crate::reserve::Reserver::open()?);
        }
        let enforcement = reserver.as_mut().expect("opened above");
        if reservation.backend != Some(rtlab_sched::enforce::BackendKind::Dispatch)
            && !spec.cpus.is_empty()
        {
            // SCHED_DEADLINE needs every CPU of the root domain; the thread starts where its
            // `cpus` put it and the kernel keeps it there while nothing else needs it moved.
            let online = rtlab_sys::cpu::online_cpus().unwrap_or_default();
            let _ = rtlab_sys::thread_control::set_thread_affinity(tids[index], &online);
            warnings.push(format!(
                "thread '{}': a SCHED_DEADLINE reservation needs every CPU, so its cpus = {:?} only placed it at the start",
                spec.name, spec.cpus
            ));
        }
        let granted = enforcement.reserve(&spec.name, tids[index], &reservation)?;
        scheduling[index] = Some(format!(
            "reserve {}/{} ({granted}, {})",
            reservation.amount,
            reservation.period,
            enforcement.describe()
        ));
    }
    Ok(Reservations {
        reserver,
        scheduling,
    })
}

/// With `--explain`, starts tracing; a tracer that cannot start leaves a warning instead.
fn start_tracer(
    settings: &RunSettings,
    warnings: &mut Vec<String>,
) -> Option<crate::explain::Tracer> {
    if settings.explain {
        match crate::explain::Tracer::start(settings.duration) {
            Ok(tracer) => Some(tracer),
            Err(error) => {
                warnings.push(format!(
                    "--explain: tracing unavailable ({error}); no causes"
                ));
                None
            }
        }
    } else {
        None
    }
}

/// Waits for the end or the stop flag, polling the load and the tracer meanwhile; the tracer
/// names the competitors once the run has started.
fn wait_for_the_end(
    start_ns: u64,
    end_ns: u64,
    stop: &AtomicBool,
    running_load: &mut Option<rtlab_session::load::RunningLoad>,
    tracer: &mut Option<crate::explain::Tracer>,
) {
    let mut competitors_named = false;
    while monotonic_ns() < end_ns && !stop.load(Ordering::Relaxed) {
        if let Some(load) = running_load.as_mut() {
            load.poll();
        }
        if let Some(tracer) = tracer.as_mut() {
            if !competitors_named && monotonic_ns() > start_ns {
                tracer.name_competitors();
                competitors_named = true;
            }
            tracer.poll();
        }
        sleep_until_ns(end_ns.min(monotonic_ns() + WAIT_SLICE_NS));
    }
}

/// The started threads; dropping it (an error before the start) releases and joins them.
struct Started {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<ThreadResult>>,
    devices: Vec<JoinHandle<DeviceResult>>,
}

impl Started {
    fn join(mut self) -> (Vec<ThreadResult>, Vec<DeviceResult>) {
        let threads = self
            .threads
            .drain(..)
            .filter_map(|handle| handle.join().ok())
            .collect();
        let devices = self
            .devices
            .drain(..)
            .filter_map(|handle| handle.join().ok())
            .collect();
        (threads, devices)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.shared.go.load(Ordering::Acquire) == 0 {
            self.shared.go.store(2, Ordering::Release);
            rtlab_sys::futex::wake(&self.shared.go, u32::MAX);
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
        for handle in self.devices.drain(..) {
            let _ = handle.join();
        }
    }
}
