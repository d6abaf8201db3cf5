//! The timer study's measuring threads: every API of `rtlab_sys::timer_apis` in every class,
//! one cell (api × class × interval) at a time so no cell disturbs another.
//!
//! Each cell is a fresh thread pinned to the study's CPU that sets its class (policy, timer slack),
//! waits one period the API's way over and over, and stamps each return with CLOCK_MONOTONIC into
//! a buffer allocated before it starts. It stops on its own at the cell's end (every wait is
//! bounded: sleeps by their period, signals by a timeout), puts its timer slack back, and returns
//! the times between returns. A study thread never outlives its cell.

pub mod change;

use rtlab_core::Nanos;
use rtlab_sys::sched::Policy;
use rtlab_sys::timer_apis::{TimerApi, Waiter};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A measuring thread's class in the timer study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerClass {
    /// SCHED_OTHER with the timer slack it inherited (50 µs unless someone changed it).
    Normal,
    /// SCHED_OTHER with PR_SET_TIMERSLACK 1 ns.
    NormalSlack1ns,
    /// SCHED_FIFO 90 (RT threads get no timer slack).
    RtHigh,
}

impl TimerClass {
    pub const ALL: [TimerClass; 3] = [
        TimerClass::Normal,
        TimerClass::NormalSlack1ns,
        TimerClass::RtHigh,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TimerClass::Normal => "normal",
            TimerClass::NormalSlack1ns => "normal-slack1ns",
            TimerClass::RtHigh => "rt-high",
        }
    }

    pub fn policy(self) -> Policy {
        match self {
            TimerClass::Normal | TimerClass::NormalSlack1ns => Policy::Other { nice: 0 },
            TimerClass::RtHigh => Policy::Fifo { priority: 90 },
        }
    }
}

impl std::str::FromStr for TimerClass {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        TimerClass::ALL
            .into_iter()
            .find(|class| class.name() == text)
            .ok_or_else(|| {
                format!("unknown class '{text}' (expected normal, normal-slack1ns or rt-high)")
            })
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    pub apis: Vec<TimerApi>,
    pub classes: Vec<TimerClass>,
    pub intervals: Vec<Nanos>,
    /// How long each cell measures.
    pub cell_duration: Nanos,
    pub cpu: usize,
}

impl StudyConfig {
    pub fn cell_count(&self) -> usize {
        self.apis.len() * self.classes.len() * self.intervals.len()
    }

    /// The `index`th cell in measuring order (interval, then API, then class).
    pub fn cell(&self, index: usize) -> Option<(Nanos, TimerApi, TimerClass)> {
        let classes = self.classes.len();
        let per_interval = self.apis.len() * classes;
        if index >= self.cell_count() {
            return None;
        }
        let interval = self.intervals[index / per_interval];
        let within = index % per_interval;
        Some((
            interval,
            self.apis[within / classes],
            self.classes[within % classes],
        ))
    }
}

/// One cell's measurement.
#[derive(Clone, Debug)]
pub struct CellResult {
    pub api: TimerApi,
    pub class: TimerClass,
    pub requested_ns: u64,
    pub policy: Policy,
    /// The thread's slack while it measured.
    pub timer_slack_ns: u64,
    /// Times between consecutive returns, ns.
    pub intervals: Vec<u64>,
    /// Overruns the API reported (0 for APIs that report none).
    pub reported_overruns: u64,
    /// Why the cell could not be measured (the API or the class is not available here).
    pub unavailable: Option<String>,
    /// The cell ended early: the wait failed after measuring started.
    pub error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("starting the study's thread: {0}")]
    Spawn(std::io::Error),
    #[error("blocking SIGALRM before starting the study's threads: {0}")]
    Signals(std::io::Error),
    #[error("the study's thread panicked")]
    Panicked,
}

/// A study in progress.
pub struct RunningStudy {
    handle: JoinHandle<(Vec<CellResult>, Vec<String>)>,
    done: Arc<AtomicUsize>,
    total: usize,
    stop: Arc<AtomicBool>,
}

/// What the study measured, in cell order, with what lowered its quality.
#[derive(Debug)]
pub struct StudyResult {
    pub cells: Vec<CellResult>,
    pub warnings: Vec<String>,
    pub interrupted: bool,
}

impl RunningStudy {
    /// Starts the study. Call it before the process has other threads that could take SIGALRM
    /// (the CLI calls it from its main thread first thing): it blocks SIGALRM in the calling
    /// thread, so every thread it starts inherits the block, and setitimer's cells are measured
    /// only when every thread of the process blocks it.
    pub fn start(config: StudyConfig, stop: Arc<AtomicBool>) -> Result<RunningStudy, StudyError> {
        rtlab_sys::timer_apis::block_signal_in_current_thread(libc_sigalrm())
            .map_err(StudyError::Signals)?;
        let done = Arc::new(AtomicUsize::new(0));
        let total = config.cell_count();
        let handle = {
            let done = Arc::clone(&done);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("rtlab-timers".into())
                .spawn(move || run_cells(&config, &done, &stop))
                .map_err(StudyError::Spawn)?
        };
        Ok(RunningStudy {
            handle,
            done,
            total,
            stop,
        })
    }

    /// Cells finished so far, of `total`.
    pub fn progress(&self) -> (usize, usize) {
        (self.done.load(Ordering::Relaxed), self.total)
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn finish(self) -> Result<StudyResult, StudyError> {
        let interrupted = self.stop.load(Ordering::Relaxed);
        let (cells, warnings) = self.handle.join().map_err(|_| StudyError::Panicked)?;
        Ok(StudyResult {
            cells,
            warnings,
            interrupted,
        })
    }
}

fn libc_sigalrm() -> i32 {
    // SIGALRM is 14 on every Linux architecture.
    14
}

fn run_cells(
    config: &StudyConfig,
    done: &AtomicUsize,
    stop: &AtomicBool,
) -> (Vec<CellResult>, Vec<String>) {
    let mut warnings = Vec::new();
    let _memory_lock = match rtlab_sys::memory::MemoryLock::lock_all() {
        Ok(lock) => Some(lock),
        Err(error) => {
            warnings.push(format!(
                "could not lock memory ({error}): a page fault may lengthen an interval"
            ));
            None
        }
    };
    let mut cells = Vec::with_capacity(config.cell_count());
    for index in 0..config.cell_count() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (interval, api, class) = config.cell(index).expect("index below the cell count");
        let cpu = config.cpu;
        let cell_duration = config.cell_duration;
        let result = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("rtlab-timer-cell".into())
                .spawn_scoped(scope, move || {
                    measure_cell(api, class, interval, cell_duration, cpu, stop)
                })
                .map(|handle| handle.join())
        });
        let cell = match result {
            Ok(Ok(cell)) => cell,
            Ok(Err(_)) => unavailable(api, class, interval, "the thread panicked".into()),
            Err(error) => unavailable(
                api,
                class,
                interval,
                format!("could not start a thread: {error}"),
            ),
        };
        cells.push(cell);
        done.fetch_add(1, Ordering::Relaxed);
    }
    (cells, warnings)
}

fn unavailable(api: TimerApi, class: TimerClass, interval: Nanos, reason: String) -> CellResult {
    CellResult {
        api,
        class,
        requested_ns: interval.as_u64(),
        policy: class.policy(),
        timer_slack_ns: 0,
        intervals: Vec::new(),
        reported_overruns: 0,
        unavailable: Some(reason),
        error: None,
    }
}

/// One cell, in its own thread.
fn measure_cell(
    api: TimerApi,
    class: TimerClass,
    interval: Nanos,
    duration: Nanos,
    cpu: usize,
    stop: &AtomicBool,
) -> CellResult {
    let period_ns = interval.as_u64().max(1);
    if let Err(error) = rtlab_sys::cpu::pin_current_thread(cpu) {
        return unavailable(
            api,
            class,
            interval,
            format!("pinning to CPU {cpu}: {error}"),
        );
    }
    let original_slack = rtlab_sys::clock::timer_slack_ns();
    let policy = class.policy();
    if policy.is_realtime() {
        if let Err(error) = rtlab_sys::sched::set_current_thread_policy(policy) {
            return unavailable(
                api,
                class,
                interval,
                format!("cannot run {} ({error}): run as root", policy.name()),
            );
        }
    }
    if class == TimerClass::NormalSlack1ns {
        if let Err(error) = rtlab_sys::clock::set_timer_slack_ns(1) {
            return unavailable(api, class, interval, format!("PR_SET_TIMERSLACK: {error}"));
        }
    }
    let timer_slack_ns = rtlab_sys::clock::timer_slack_ns();
    let mut cell = measure_with(api, class, period_ns, duration.as_u64(), stop);
    cell.policy = policy;
    cell.timer_slack_ns = timer_slack_ns;
    // Put the slack back explicitly (the thread ends next, but nothing is left to chance), and
    // leave RT before the thread's last instructions.
    let _ = rtlab_sys::clock::set_timer_slack_ns(original_slack);
    if policy.is_realtime() {
        let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
    }
    cell
}

fn measure_with(
    api: TimerApi,
    class: TimerClass,
    period_ns: u64,
    duration_ns: u64,
    stop: &AtomicBool,
) -> CellResult {
    let mut cell = unavailable(api, class, Nanos(period_ns), String::new());
    cell.unavailable = None;
    let mut waiter = match Waiter::new(api, period_ns) {
        Ok(waiter) => waiter,
        Err(error) => {
            cell.unavailable = Some(format!("not available: {error}"));
            return cell;
        }
    };
    // Allocated before measuring: at most one return per period, plus the warm-up one.
    let capacity = (duration_ns / period_ns + 2).min(4_000_000) as usize;
    let mut stamps: Vec<u64> = Vec::with_capacity(capacity);
    if let Err(error) = waiter.start() {
        cell.unavailable = Some(format!("arming: {error}"));
        return cell;
    }
    // The first return is warm-up (caches, the first arming): the intervals start after it.
    match waiter.wait() {
        Ok(_) => stamps.push(rtlab_sys::clock::monotonic_ns()),
        Err(error) => {
            cell.unavailable = Some(format!("first wait: {error}"));
            return cell;
        }
    }
    let end_ns = stamps[0] + duration_ns;
    // ---- the sample path: one wait and one clock read per iteration, into preallocated memory
    while stamps.len() < capacity && !stop.load(Ordering::Relaxed) {
        match waiter.wait() {
            Ok(overruns) => cell.reported_overruns += overruns,
            Err(error) => {
                cell.error = Some(error.to_string());
                break;
            }
        }
        let now = rtlab_sys::clock::monotonic_ns();
        stamps.push(now);
        if now >= end_ns {
            break;
        }
    }
    // ---- end of the sample path
    drop(waiter);
    cell.intervals = stamps.windows(2).map(|pair| pair[1] - pair[0]).collect();
    cell
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_measures_intervals_and_puts_the_slack_back() {
        let stop = AtomicBool::new(false);
        let slack_before = std::thread::spawn(rtlab_sys::clock::timer_slack_ns)
            .join()
            .unwrap();
        let (cell, slack_after) = std::thread::spawn(move || {
            let cell = measure_cell(
                TimerApi::ClockNanosleepAbs,
                TimerClass::NormalSlack1ns,
                Nanos::from_millis(1),
                Nanos::from_millis(100),
                0,
                &stop,
            );
            (cell, rtlab_sys::clock::timer_slack_ns())
        })
        .join()
        .unwrap();
        assert_eq!(cell.unavailable, None);
        assert_eq!(cell.timer_slack_ns, 1);
        assert_eq!(slack_after, slack_before);
        // An absolute loop returns at most once per period (a late return is followed by
        // quick ones, never by extra ones), and at least once in 100 ms.
        assert!(
            (1..=101).contains(&cell.intervals.len()),
            "{} intervals",
            cell.intervals.len()
        );
        assert!(cell.intervals.iter().all(|&interval| interval > 0));
    }

    #[test]
    fn cells_go_interval_by_interval_then_api_then_class() {
        let config = StudyConfig {
            apis: vec![TimerApi::Nanosleep, TimerApi::Poll],
            classes: vec![TimerClass::Normal, TimerClass::RtHigh],
            intervals: vec![Nanos(1), Nanos(2)],
            cell_duration: Nanos(1),
            cpu: 0,
        };
        assert_eq!(config.cell_count(), 8);
        assert_eq!(
            config.cell(0),
            Some((Nanos(1), TimerApi::Nanosleep, TimerClass::Normal))
        );
        assert_eq!(
            config.cell(3),
            Some((Nanos(1), TimerApi::Poll, TimerClass::RtHigh))
        );
        assert_eq!(
            config.cell(5),
            Some((Nanos(2), TimerApi::Nanosleep, TimerClass::RtHigh))
        );
        assert_eq!(config.cell(8), None);
    }

    #[test]
    fn a_stop_request_ends_a_cell_at_once() {
        let stop = AtomicBool::new(true);
        let cell = measure_with(
            TimerApi::Nanosleep,
            TimerClass::Normal,
            1_000_000,
            60_000_000_000,
            &stop,
        );
        assert!(cell.intervals.is_empty());
    }
}
