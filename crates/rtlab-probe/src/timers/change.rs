//! Paper 004's pair on Linux: one process changes a setting that affects others (Dawson's
//! `change_interval`), this one measures its own sleeps meanwhile (`measure_interval`).
//!
//! The changer is a separate process (the caller passes the command that starts it, `rtlab`
//! re-executed with a hidden subcommand served by [`serve_changer`]); it holds
//! /dev/cpu_dma_latency at each value in turn and writes the measuring thread's
//! `/proc/TID/timerslack_ns`. The measuring thread is SCHED_OTHER (timer slack applies to it) and
//! alternates a relative sleep of one period (its delay) and an absolute one (its wake-up
//! latency), counting into the current step's histograms; a SCHED_FIFO 90 thread on another CPU
//! does the same, so cpu_dma_latency's effect shows without slack in the way.
//!
//! Restoring: the changer's cpu_dma_latency request ends when its descriptor closes, which the
//! kernel does when it exits for any reason; it exits when told, when its input closes (rtlab
//! died) or by its parent-death signal. The only timer slack it changes is the measuring
//! thread's, which puts its own back at the end (and dies with rtlab on SIGKILL).

use rtlab_core::timer_study::{ChangeExperiment, ChangeStep, DelayStats, Restoration};
use rtlab_core::LatencyHistogram;
use rtlab_sys::sched::Policy;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use rtlab_core::timer_change::{ChangeConfig, Setting};

/// The settings to cycle through: untouched, then cpu_dma_latency just below each idle state's
/// exit latency (deepest first, each disabling one more state) down to 0, then the measuring
/// thread's slack at 1 ms and at 1 ns.
pub fn settings_for(idle_exit_latencies_us: &[u64]) -> Vec<Setting> {
    let mut latencies: Vec<u64> = idle_exit_latencies_us
        .iter()
        .copied()
        .filter(|&latency| latency > 0)
        .collect();
    latencies.sort_unstable_by(|a, b| b.cmp(a));
    latencies.dedup();
    let mut settings = vec![Setting::Untouched];
    for latency in latencies {
        let value = (latency - 1).min(i32::MAX as u64) as i32;
        if !settings.contains(&Setting::DmaLatency(value)) {
            settings.push(Setting::DmaLatency(value));
        }
    }
    if !settings.contains(&Setting::DmaLatency(0)) {
        settings.push(Setting::DmaLatency(0));
    }
    settings.push(Setting::TimerSlack(1_000_000));
    settings.push(Setting::TimerSlack(1));
    settings
}

#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("starting the changer process: {0}")]
    SpawnChanger(std::io::Error),
    #[error("starting the measuring thread: {0}")]
    SpawnMeasurer(std::io::Error),
    #[error("the changer process: {0}")]
    Changer(String),
    #[error("the measuring thread panicked")]
    Panicked,
}

/// The experiment's outcome and whether it ran to the end.
#[derive(Debug)]
pub struct ChangeOutcome {
    pub experiment: ChangeExperiment,
    pub interrupted: bool,
    pub changer_pid: u32,
}

/// Serves the changer's side: one command per input line, one reply line each (`ok` or
/// `error: …`). `dma N` holds /dev/cpu_dma_latency at N µs, `dma off` releases it,
/// `slack TID NS` writes /proc/TID/timerslack_ns, `quit` (or the end of input) ends it.
pub fn serve_changer(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    let mut held: Option<rtlab_sys::dma_latency::DmaLatencyGuard> = None;
    for line in input.lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["quit"] => break,
            ["dma", "off"] => {
                held = None;
                Ok(())
            }
            ["dma", value] => match value.parse::<i32>() {
                Ok(micros) => {
                    held = None;
                    rtlab_sys::dma_latency::DmaLatencyGuard::hold(micros)
                        .map(|guard| held = Some(guard))
                        .map_err(|error| format!("{}: {error}", rtlab_sys::dma_latency::PATH))
                }
                Err(_) => Err(format!("'{value}' is not a number of µs")),
            },
            ["slack", tid, ns] => match (tid.parse::<u32>(), ns.parse::<u64>()) {
                (Ok(tid), Ok(ns)) => rtlab_sys::timer_audit::write_timer_slack_of(tid, ns)
                    .map_err(|error| format!("/proc/{tid}/timerslack_ns: {error}")),
                _ => Err(format!("bad slack command '{line}'")),
            },
            _ => Err(format!("unknown command '{line}'")),
        };
        match reply {
            Ok(()) => writeln!(output, "ok")?,
            Err(message) => writeln!(output, "error: {message}")?,
        }
        output.flush()?;
    }
    drop(held);
    Ok(())
}

struct Changer {
    child: Child,
    input: ChildStdin,
    replies: BufReader<ChildStdout>,
}

impl Changer {
    fn send(&mut self, command: &str) -> Result<(), ChangeError> {
        writeln!(self.input, "{command}")
            .and_then(|()| self.input.flush())
            .map_err(|error| ChangeError::Changer(format!("sending '{command}': {error}")))?;
        let mut reply = String::new();
        self.replies
            .read_line(&mut reply)
            .map_err(|error| ChangeError::Changer(format!("reading its reply: {error}")))?;
        match reply.trim() {
            "ok" => Ok(()),
            "" => Err(ChangeError::Changer(format!(
                "it exited before answering '{command}'"
            ))),
            other => Err(ChangeError::Changer(format!("'{command}': {other}"))),
        }
    }

    /// Asks it to quit and waits up to two seconds; then kills it. True once it has exited.
    fn end(mut self) -> bool {
        let _ = writeln!(self.input, "quit").and_then(|()| self.input.flush());
        drop(self.input);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = self.child.kill();
                    return self.child.wait().is_ok();
                }
            }
        }
    }
}

/// One step's counts, taken by a measuring thread.
struct StepCounts {
    /// Lateness of the absolute sleeps.
    wakeup: LatencyHistogram,
    /// Length of the relative sleeps of one period.
    sleep: LatencyHistogram,
    /// The thread's timer slack while the step was counted, ns.
    timer_slack_ns: u64,
}

/// What the measuring thread hands back.
struct Measured {
    steps: Vec<StepCounts>,
    slack_before: u64,
    slack_after: u64,
    /// It ran at the RT policy it was given.
    realtime: bool,
}

/// How one measuring thread runs.
struct Measuring {
    cpu: usize,
    /// None: SCHED_OTHER as started.
    policy: Option<Policy>,
    sleep_ns: u64,
    n_steps: usize,
    /// It stops by this CLOCK_MONOTONIC time on its own.
    deadline_ns: u64,
}

/// What the measuring threads share with the thread that drives the changer.
struct MeasuringSignals {
    /// The step being counted; `usize::MAX` while a change settles.
    current_step: Arc<AtomicUsize>,
    /// Set once the changer is done: the measuring threads end.
    finished: Arc<AtomicBool>,
}

/// What driving the changer through the settings gave.
struct ChangerRun {
    changer_pid: u32,
    /// The cpu_dma_latency in force during each step that started (µs; None: unreadable).
    in_force: Vec<Option<i64>>,
    /// Steps that ran to their end.
    completed: usize,
    changer_exited: bool,
}

/// Runs the experiment. `changer` is the command that starts the changer process (stdin and
/// stdout are set here); spawn from the thread that lives as long as the experiment, so a
/// parent-death signal set in it fires only when rtlab dies.
pub fn run(
    config: &ChangeConfig,
    changer: Command,
    stop: &Arc<AtomicBool>,
) -> Result<ChangeOutcome, ChangeError> {
    let n_steps = config.settings.len();
    let signals = MeasuringSignals {
        current_step: Arc::new(AtomicUsize::new(usize::MAX)),
        finished: Arc::new(AtomicBool::new(false)),
    };
    let measurer_tid = Arc::new(AtomicU32::new(0));
    // Every measuring thread stops on its own by this time, whatever happens here.
    let deadline_ns = rtlab_sys::clock::monotonic_ns()
        + n_steps as u64 * (config.hold.as_u64() + 200_000_000)
        + 10_000_000_000;
    let how = |cpu: usize, policy: Option<Policy>| Measuring {
        cpu,
        policy,
        sleep_ns: config.sleep.as_u64().max(1),
        n_steps,
        deadline_ns,
    };
    let measurer = spawn_measurer(
        "rtlab-measure",
        how(config.cpu, None),
        &signals,
        Arc::clone(&measurer_tid),
    )?;
    let rt_measurer = match config.rt_cpu {
        Some(cpu) => Some(spawn_measurer(
            "rtlab-measure-rt",
            how(cpu, Some(Policy::Fifo { priority: 90 })),
            &signals,
            Arc::new(AtomicU32::new(0)),
        )?),
        None => None,
    };
    while measurer_tid.load(Ordering::Acquire) == 0 && !measurer.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let tid = measurer_tid.load(Ordering::Acquire);
    let dma_before = rtlab_sys::dma_latency::current().ok().map(i64::from);

    let outcome = drive_changer(config, changer, tid, stop, &signals.current_step);

    signals.finished.store(true, Ordering::Release);
    let measured = measurer.join().map_err(|_| ChangeError::Panicked)?;
    let rt_measured = match rt_measurer {
        Some(handle) => Some(handle.join().map_err(|_| ChangeError::Panicked)?),
        None => None,
    };
    let rt_steps: Vec<Option<DelayStats>> = match &rt_measured {
        Some(rt) if rt.realtime => rt
            .steps
            .iter()
            .map(|counts| Some(delay_stats(&counts.wakeup)))
            .collect(),
        _ => vec![None; n_steps],
    };
    let changer_run = outcome?;
    let dma_after = rtlab_sys::dma_latency::current().ok().map(i64::from);
    Ok(ChangeOutcome {
        experiment: ChangeExperiment {
            hold_ns: config.hold.as_u64(),
            sleep_ns: config.sleep.as_u64(),
            policy: "SCHED_OTHER".to_owned(),
            steps: change_steps(
                &config.settings,
                measured.steps,
                changer_run.in_force,
                rt_steps,
                changer_run.completed,
            ),
            restored: Restoration {
                timer_slack_ns_before: measured.slack_before,
                timer_slack_ns_after: measured.slack_after,
                cpu_dma_latency_before_us: dma_before,
                cpu_dma_latency_after_us: dma_after,
                changer_exited: changer_run.changer_exited,
            },
        },
        interrupted: stop.load(Ordering::Relaxed),
        changer_pid: changer_run.changer_pid,
    })
}

/// Starts a measuring thread named `name`; it writes its thread id into `tid_out` once set up.
fn spawn_measurer(
    name: &str,
    how: Measuring,
    signals: &MeasuringSignals,
    tid_out: Arc<AtomicU32>,
) -> Result<std::thread::JoinHandle<Measured>, ChangeError> {
    let current_step = Arc::clone(&signals.current_step);
    let finished = Arc::clone(&signals.finished);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || measure(&how, &current_step, &tid_out, &finished))
        .map_err(ChangeError::SpawnMeasurer)
}

/// Starts the changer process and has it apply each setting in turn while the measuring
/// thread `tid` counts; then has it put back what it changed and ends it.
fn drive_changer(
    config: &ChangeConfig,
    mut command: Command,
    tid: u32,
    stop: &AtomicBool,
    current_step: &AtomicUsize,
) -> Result<ChangerRun, ChangeError> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(ChangeError::SpawnChanger)?;
    let input = child.stdin.take().expect("stdin was piped");
    let replies = BufReader::new(child.stdout.take().expect("stdout was piped"));
    let changer_pid = child.id();
    let mut changer = Changer {
        child,
        input,
        replies,
    };
    let slack_before = rtlab_sys::timer_audit::read_timer_slack_of(tid).unwrap_or(50_000);
    let mut in_force = Vec::with_capacity(config.settings.len());
    let mut completed = 0;
    let result = (|| {
        for (index, setting) in config.settings.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            apply_setting(&mut changer, *setting, tid, slack_before)?;
            in_force.push(rtlab_sys::dma_latency::current().ok().map(i64::from));
            // Let the change settle (idle governors, the thread's next sleep), then count.
            sleep_unless_stopped(Duration::from_millis(200), stop);
            current_step.store(index, Ordering::Release);
            sleep_unless_stopped(config.hold.as_std(), stop);
            current_step.store(usize::MAX, Ordering::Release);
            completed = index + 1;
        }
        // Put back what the changer changed before it goes.
        changer.send("dma off")?;
        changer.send(&format!("slack {tid} {slack_before}"))?;
        Ok::<(), ChangeError>(())
    })();
    let changer_exited = changer.end();
    result.map(|()| ChangerRun {
        changer_pid,
        in_force,
        completed,
        changer_exited,
    })
}

/// Has the changer put `setting` in force for the measuring thread `tid` (and undo the other
/// kind of setting).
fn apply_setting(
    changer: &mut Changer,
    setting: Setting,
    tid: u32,
    slack_before: u64,
) -> Result<(), ChangeError> {
    match setting {
        Setting::Untouched => {
            changer.send("dma off")?;
            changer.send(&format!("slack {tid} {slack_before}"))?;
        }
        Setting::DmaLatency(micros) => {
            changer.send(&format!("slack {tid} {slack_before}"))?;
            changer.send(&format!("dma {micros}"))?;
        }
        Setting::TimerSlack(ns) => {
            changer.send("dma off")?;
            changer.send(&format!("slack {tid} {ns}"))?;
        }
    }
    Ok(())
}

/// The experiment's steps that ran to their end, each with its counts and what was in force.
fn change_steps(
    settings: &[Setting],
    counts: Vec<StepCounts>,
    in_force: Vec<Option<i64>>,
    rt_steps: Vec<Option<DelayStats>>,
    completed: usize,
) -> Vec<ChangeStep> {
    settings
        .iter()
        .zip(counts)
        .zip(in_force)
        .zip(rt_steps)
        .take(completed)
        .map(|(((setting, counts), in_force), rt_wakeup)| ChangeStep {
            setting: setting.describe(),
            cpu_dma_latency_us: match setting {
                Setting::DmaLatency(micros) => Some(*micros),
                _ => None,
            },
            cpu_dma_latency_in_force_us: in_force,
            timer_slack_ns: counts.timer_slack_ns,
            wakeup: delay_stats(&counts.wakeup),
            sleep: delay_stats(&counts.sleep),
            rt_wakeup,
        })
        .collect()
}

fn sleep_unless_stopped(duration: Duration, stop: &AtomicBool) {
    let end = std::time::Instant::now() + duration;
    while !stop.load(Ordering::Relaxed) {
        let now = std::time::Instant::now();
        if now >= end {
            return;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

fn delay_stats(histogram: &LatencyHistogram) -> DelayStats {
    let summary = histogram.summary();
    DelayStats {
        count: summary.count,
        mean_ns: summary.mean_ns,
        p50_ns: summary.percentiles.get("50").copied().unwrap_or(0),
        p99_ns: summary.percentiles.get("99").copied().unwrap_or(0),
        max_ns: summary.max_ns,
        hdr: histogram.to_base64().unwrap_or_default(),
    }
}

/// A measuring thread: pinned, at its policy, alternating a relative and an absolute sleep
/// until told to finish or its deadline passes.
fn measure(
    how: &Measuring,
    current_step: &AtomicUsize,
    tid_out: &AtomicU32,
    finished: &AtomicBool,
) -> Measured {
    let _ = rtlab_sys::cpu::pin_current_thread(how.cpu);
    let realtime = how
        .policy
        .is_some_and(|policy| rtlab_sys::sched::set_current_thread_policy(policy).is_ok());
    let slack_before = rtlab_sys::clock::timer_slack_ns();
    // Allocated before measuring; recording into an HdrHistogram does not allocate.
    let mut steps: Vec<StepCounts> = (0..how.n_steps)
        .map(|_| StepCounts {
            wakeup: LatencyHistogram::new(),
            sleep: LatencyHistogram::new(),
            timer_slack_ns: 0,
        })
        .collect();
    tid_out.store(rtlab_sys::cpu::current_tid(), Ordering::Release);
    let mut last_step = usize::MAX;
    let sleep_ns = how.sleep_ns;
    while !finished.load(Ordering::Acquire) && rtlab_sys::clock::monotonic_ns() < how.deadline_ns {
        let step = current_step.load(Ordering::Acquire);
        if step != last_step && step < how.n_steps {
            // Once per step: the slack the other process gave this thread.
            steps[step].timer_slack_ns = rtlab_sys::clock::timer_slack_ns();
        }
        last_step = step;
        let before = rtlab_sys::clock::monotonic_ns();
        rtlab_sys::timer_apis::sleep_for_ns(sleep_ns);
        let after = rtlab_sys::clock::monotonic_ns();
        let deadline = after + sleep_ns;
        rtlab_sys::clock::sleep_until_ns(deadline);
        let woke = rtlab_sys::clock::monotonic_ns();
        if let Some(counts) = steps.get_mut(step) {
            if current_step.load(Ordering::Acquire) == step {
                counts.sleep.record(after - before);
                counts.wakeup.record(woke.saturating_sub(deadline));
            }
        }
    }
    // Put the slack back explicitly, whatever the other process left, and leave RT.
    let _ = rtlab_sys::clock::set_timer_slack_ns(slack_before);
    if realtime {
        let _ = rtlab_sys::sched::set_current_thread_policy(Policy::Other { nice: 0 });
    }
    Measured {
        steps,
        slack_before,
        slack_after: rtlab_sys::clock::timer_slack_ns(),
        realtime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_disable_one_idle_state_at_a_time_then_change_the_slack() {
        assert_eq!(
            settings_for(&[0, 2, 80, 2]),
            vec![
                Setting::Untouched,
                Setting::DmaLatency(79),
                Setting::DmaLatency(1),
                Setting::DmaLatency(0),
                Setting::TimerSlack(1_000_000),
                Setting::TimerSlack(1),
            ]
        );
        assert_eq!(
            settings_for(&[0, 1]),
            vec![
                Setting::Untouched,
                Setting::DmaLatency(0),
                Setting::TimerSlack(1_000_000),
                Setting::TimerSlack(1),
            ]
        );
    }

    #[test]
    fn the_changer_answers_every_line_and_rejects_nonsense() {
        let input = b"dma twelve\nslack x 1\nfly\nquit\ndma 0\n" as &[u8];
        let mut output = Vec::new();
        serve_changer(input, &mut output).unwrap();
        let text = String::from_utf8(output).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines.iter().all(|line| line.starts_with("error: ")),
            "{text}"
        );
    }
}
