//! The timer study on Windows (papers 000 and 004): every way to wait a period, each with and
//! without this process's timeBeginPeriod(1), one cell (api × class × interval) at a time on a
//! fresh thread that stamps each return with QueryPerformanceCounter into a buffer allocated
//! before it starts and stops on its own at the cell's end.

use rtlab_core::Nanos;
use rtlab_sys::windows::clock::{monotonic_ns, qpc_frequency, ticks_to_ns};
use rtlab_sys::windows::priority::pin_current_thread;
use rtlab_sys::windows::resolution::{self, PeriodRequest};
use rtlab_sys::windows::timers::{sleep_ms, MultimediaTimer, TimeoutEvent, WaitableTimer};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// One way to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WindowsTimerApi {
    /// Sleep(ms).
    Sleep,
    /// WaitForSingleObject on an event nobody sets, with a timeout of ms.
    WaitForSingleObject,
    /// A waitable timer armed for the interval each time (expires at a clock interrupt).
    WaitableTimer,
    /// The same with CREATE_WAITABLE_TIMER_HIGH_RESOLUTION.
    WaitableTimerHighResolution,
    /// timeSetEvent periodic: paper 000's multimedia timer, stamped in its callback.
    TimeSetEvent,
}

impl WindowsTimerApi {
    pub const ALL: [WindowsTimerApi; 5] = [
        WindowsTimerApi::Sleep,
        WindowsTimerApi::WaitForSingleObject,
        WindowsTimerApi::WaitableTimer,
        WindowsTimerApi::WaitableTimerHighResolution,
        WindowsTimerApi::TimeSetEvent,
    ];

    /// The function's name, as `--apis` takes it.
    pub fn function(self) -> &'static str {
        match self {
            WindowsTimerApi::Sleep => "Sleep",
            WindowsTimerApi::WaitForSingleObject => "WaitForSingleObject",
            WindowsTimerApi::WaitableTimer | WindowsTimerApi::WaitableTimerHighResolution => {
                "SetWaitableTimer"
            }
            WindowsTimerApi::TimeSetEvent => "timeSetEvent",
        }
    }

    pub fn mode(self) -> &'static str {
        match self {
            WindowsTimerApi::Sleep => "ms",
            WindowsTimerApi::WaitForSingleObject => "timeout",
            WindowsTimerApi::WaitableTimer => "relative",
            WindowsTimerApi::WaitableTimerHighResolution => "high-res",
            WindowsTimerApi::TimeSetEvent => "periodic",
        }
    }

    /// Whether the API takes whole milliseconds.
    pub fn takes_milliseconds(self) -> bool {
        !matches!(
            self,
            WindowsTimerApi::WaitableTimer | WindowsTimerApi::WaitableTimerHighResolution
        )
    }

    /// What the call is really given for `requested_ns`: whole milliseconds (rounded, at least
    /// one) or 100 ns units.
    pub fn effective_request_ns(self, requested_ns: u64) -> u64 {
        if self.takes_milliseconds() {
            ((requested_ns + 500_000) / 1_000_000).max(1) * 1_000_000
        } else {
            requested_ns.div_ceil(100).max(1) * 100
        }
    }
}

/// A study thread's class: whether this process holds timeBeginPeriod(1) while it measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WindowsTimerClass {
    /// No request from rtlab (the resolution in force is whatever other processes asked for).
    Normal,
    /// timeBeginPeriod(1) held by this process during the cell.
    Period1ms,
}

impl WindowsTimerClass {
    pub const ALL: [WindowsTimerClass; 2] =
        [WindowsTimerClass::Normal, WindowsTimerClass::Period1ms];

    pub fn name(self) -> &'static str {
        match self {
            WindowsTimerClass::Normal => "normal",
            WindowsTimerClass::Period1ms => "period-1ms",
        }
    }
}

impl std::str::FromStr for WindowsTimerClass {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        WindowsTimerClass::ALL
            .into_iter()
            .find(|class| class.name() == text)
            .ok_or_else(|| format!("unknown class '{text}' (expected normal or period-1ms)"))
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct WindowsStudyConfig {
    pub apis: Vec<WindowsTimerApi>,
    pub classes: Vec<WindowsTimerClass>,
    pub intervals: Vec<Nanos>,
    pub cell_duration: Nanos,
    pub cpu: usize,
}

impl WindowsStudyConfig {
    pub fn cell_count(&self) -> usize {
        self.apis.len() * self.classes.len() * self.intervals.len()
    }

    /// The `index`th cell in measuring order (interval, then API, then class).
    pub fn cell(&self, index: usize) -> Option<(Nanos, WindowsTimerApi, WindowsTimerClass)> {
        if index >= self.cell_count() {
            return None;
        }
        let classes = self.classes.len();
        let per_interval = self.apis.len() * classes;
        let within = index % per_interval;
        Some((
            self.intervals[index / per_interval],
            self.apis[within / classes],
            self.classes[within % classes],
        ))
    }
}

/// One cell's measurement.
#[derive(Clone, Debug)]
pub struct WindowsCellResult {
    pub api: WindowsTimerApi,
    pub class: WindowsTimerClass,
    pub requested_ns: u64,
    pub asked_ns: u64,
    /// Times between consecutive returns (or callbacks), ns.
    pub intervals: Vec<u64>,
    /// The timer resolution in force while the cell measured (NtQueryTimerResolution), ns.
    pub resolution_in_force_ns: Option<u64>,
    /// Why the cell could not be measured.
    pub unavailable: Option<String>,
    /// The cell ended early.
    pub error: Option<String>,
}

/// The study's result.
#[derive(Debug)]
pub struct WindowsStudyResult {
    pub cells: Vec<WindowsCellResult>,
    pub interrupted: bool,
}

/// A study running on its own thread, one cell after another.
#[derive(Debug)]
pub struct RunningWindowsStudy {
    handle: JoinHandle<Vec<WindowsCellResult>>,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl RunningWindowsStudy {
    pub fn start(
        config: WindowsStudyConfig,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<RunningWindowsStudy> {
        let done = Arc::new(AtomicUsize::new(0));
        let thread_done = Arc::clone(&done);
        let thread_stop = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("rtlab-timers".to_owned())
            .spawn(move || {
                let mut cells = Vec::with_capacity(config.cell_count());
                for index in 0..config.cell_count() {
                    if thread_stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let (interval, api, class) = config.cell(index).expect("index in range");
                    cells.push(measure_cell(
                        api,
                        class,
                        interval.as_u64(),
                        config.cell_duration.as_u64(),
                        config.cpu,
                        &thread_stop,
                    ));
                    thread_done.fetch_add(1, Ordering::Relaxed);
                }
                cells
            })?;
        Ok(RunningWindowsStudy { handle, done, stop })
    }

    /// Cells finished so far.
    pub fn progress(&self) -> usize {
        self.done.load(Ordering::Relaxed)
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    pub fn finish(self) -> std::io::Result<WindowsStudyResult> {
        let cells = self
            .handle
            .join()
            .map_err(|_| std::io::Error::other("the study thread panicked"))?;
        Ok(WindowsStudyResult {
            cells,
            interrupted: self.stop.load(Ordering::SeqCst),
        })
    }
}

/// Measures one cell on a fresh thread (so no cell inherits another's state).
fn measure_cell(
    api: WindowsTimerApi,
    class: WindowsTimerClass,
    requested_ns: u64,
    duration_ns: u64,
    cpu: usize,
    stop: &Arc<AtomicBool>,
) -> WindowsCellResult {
    let asked_ns = api.effective_request_ns(requested_ns);
    let mut result = WindowsCellResult {
        api,
        class,
        requested_ns,
        asked_ns,
        intervals: Vec::new(),
        resolution_in_force_ns: None,
        unavailable: None,
        error: None,
    };
    let stop = Arc::clone(stop);
    let joined = std::thread::Builder::new()
        .name("rtlab-timer-cell".to_owned())
        .spawn(move || cell_thread(api, class, asked_ns, duration_ns, cpu, &stop))
        .map_err(|error| error.to_string())
        .and_then(|handle| {
            handle
                .join()
                .map_err(|_| "the cell's thread panicked".to_owned())
        });
    match joined {
        Ok(Ok((stamps, resolution, error))) => {
            result.intervals = stamps.windows(2).map(|pair| pair[1] - pair[0]).collect();
            result.resolution_in_force_ns = resolution;
            result.error = error;
        }
        Ok(Err(reason)) => result.unavailable = Some(reason),
        Err(reason) => result.error = Some(reason),
    }
    result
}

type CellStamps = (Vec<u64>, Option<u64>, Option<String>);

/// The cell's thread: returns the stamps (ns), the resolution in force, and an error that ended
/// it early; or why the cell could not be measured at all.
fn cell_thread(
    api: WindowsTimerApi,
    class: WindowsTimerClass,
    asked_ns: u64,
    duration_ns: u64,
    cpu: usize,
    stop: &AtomicBool,
) -> Result<CellStamps, String> {
    pin_current_thread(cpu).map_err(|error| error.to_string())?;
    let _request = match class {
        WindowsTimerClass::Normal => None,
        WindowsTimerClass::Period1ms => {
            Some(PeriodRequest::begin(1).map_err(|error| error.to_string())?)
        }
    };
    let resolution = resolution::query()
        .ok()
        .map(|value| u64::from(value.current_100ns) * 100);
    // Room for every return plus a margin (catch-up bursts of the multimedia timer); bounded.
    let capacity = ((duration_ns / asked_ns.max(1)) as usize)
        .saturating_mul(2)
        .saturating_add(64)
        .min(4_000_000);
    let milliseconds = (asked_ns / 1_000_000) as u32;
    let end_ns = monotonic_ns() + duration_ns;
    if api == WindowsTimerApi::TimeSetEvent {
        let timer =
            MultimediaTimer::start(milliseconds, capacity).map_err(|error| error.to_string())?;
        while monotonic_ns() < end_ns && !stop.load(Ordering::Relaxed) {
            sleep_ms(20);
        }
        let (ticks, _beyond) = timer.stop();
        let frequency = qpc_frequency();
        let stamps = ticks
            .into_iter()
            .map(|tick| ticks_to_ns(tick, frequency))
            .collect();
        return Ok((stamps, resolution, None));
    }
    let event = match api {
        WindowsTimerApi::WaitForSingleObject => {
            Some(TimeoutEvent::new().map_err(|error| error.to_string())?)
        }
        _ => None,
    };
    let timer = match api {
        WindowsTimerApi::WaitableTimer => {
            Some(WaitableTimer::new(false).map_err(|error| error.to_string())?)
        }
        WindowsTimerApi::WaitableTimerHighResolution => {
            Some(WaitableTimer::new(true).map_err(|error| error.to_string())?)
        }
        _ => None,
    };
    let mut stamps = Vec::with_capacity(capacity);
    let mut error = None;
    stamps.push(monotonic_ns());
    while stamps.len() < capacity {
        let waited = match (api, &event, &timer) {
            (WindowsTimerApi::Sleep, _, _) => {
                sleep_ms(milliseconds);
                Ok(())
            }
            (_, Some(event), _) => event.wait_ms(milliseconds),
            (_, _, Some(timer)) => timer.wait_ns(asked_ns),
            _ => unreachable!("every API has its waiter"),
        };
        let now = monotonic_ns();
        if let Err(failed) = waited {
            error = Some(failed.to_string());
            break;
        }
        stamps.push(now);
        if now >= end_ns || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok((stamps, resolution, error))
}
