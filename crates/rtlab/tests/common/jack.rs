//! A real application for the tests: Debian's `jackd2` with its dummy driver, the JACK client
//! `bench/jack/xrun_client.c` (works a share of each period, counts xruns with JACK's own
//! `jack_set_xrun_callback`) and the SCHED_FIFO competitor `bench/jack/fifo_hog.c` (threads
//! `qhog<CPU>`, stops on its own, logs its bursts), compiled once per test binary with `cc`; and
//! `bench/jack/stall_watch.c`, which sees the time the machine itself took a CPU away (a
//! hypervisor stall), so that a test can tell the xruns its competitor could have caused from
//! the others.
//!
//! Every server gets a unique name (`jackd -n`) and `JACK_NO_AUDIO_RESERVATION=1`, so tests in
//! parallel never share one; [`JackServer`], [`ClientProcess`] and [`HogProcess`] kill what they
//! started when dropped (a failing assertion included).
//!
//! Needs `jackd2`, `libjack-jackd2-dev` and `cc` (`.ci/run` installs them); the tests that use it
//! need root (SCHED_FIFO) and are `#[ignore = "needs root: …"]`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::{end, eventually};

/// The JACK set-up of issue 26: 128 frames at 48 kHz (a 2.667 ms period).
pub const SAMPLE_RATE: u32 = 48_000;
pub const PERIOD_FRAMES: u32 = 128;

/// The compiled harness, in a directory that lives as long as the test binary.
pub struct JackBinaries {
    pub client: PathBuf,
    pub hog: PathBuf,
    pub stall_watch: PathBuf,
    _directory: tempfile::TempDir,
}

fn bench_jack() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/jack")
}

fn compile(source: &Path, output: &Path, libraries: &[&str]) {
    let result = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(output)
        .arg(source)
        .args(libraries)
        .output()
        .expect("running cc (Debian: apt-get install gcc)");
    assert!(
        result.status.success(),
        "cc {} failed (Debian: apt-get install libjack-jackd2-dev):\n{}",
        source.display(),
        String::from_utf8_lossy(&result.stderr)
    );
}

/// `xrun_client`, `fifo_hog` and `stall_watch`, compiled on first use.
pub fn binaries() -> &'static JackBinaries {
    static BUILT: OnceLock<JackBinaries> = OnceLock::new();
    BUILT.get_or_init(|| {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let client = directory.path().join("xrun_client");
        let hog = directory.path().join("fifo_hog");
        compile(
            &bench_jack().join("xrun_client.c"),
            &client,
            &["-ljack", "-lpthread"],
        );
        compile(&bench_jack().join("fifo_hog.c"), &hog, &["-lpthread"]);
        let stall_watch = directory.path().join("stall_watch");
        compile(
            &bench_jack().join("stall_watch.c"),
            &stall_watch,
            &["-lpthread"],
        );
        JackBinaries {
            client,
            hog,
            stall_watch,
            _directory: directory,
        }
    })
}

/// Spawns `command` with no input and its output discarded; `what` names it if it cannot start.
fn spawn_silent(command: &mut Command, what: &str) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("start {what}: {error}"))
}

/// A unique server name for this test process and call.
fn unique_server_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "rtlabtest{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `program`, under `taskset -c CPUS` when `cpus` is given.
fn pinned(program: impl AsRef<std::ffi::OsStr>, cpus: Option<&str>) -> Command {
    match cpus {
        Some(cpus) => {
            let mut command = Command::new("taskset");
            command.arg("-c").arg(cpus).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A running `jackd -R -P 70 -d dummy -r 48000 -p 128` under a unique name; killed on drop.
pub struct JackServer {
    pub name: String,
    child: Child,
}

impl JackServer {
    /// Starts the server (clients wait for it with `-w`).
    pub fn start() -> JackServer {
        Self::start_with_period(PERIOD_FRAMES)
    }

    pub fn start_with_period(period_frames: u32) -> JackServer {
        Self::start_on(None, period_frames)
    }

    /// Starts the server with its threads allowed only on `cpus` (`taskset -c`, e.g. "0"):
    /// with the competitor on the same CPU, every burst of it hits JACK (on a free CPU the
    /// kernel would move JACK's threads there, and whether it can depends on the bursts'
    /// phases).
    pub fn start_on(cpus: Option<&str>, period_frames: u32) -> JackServer {
        let name = unique_server_name();
        let child = spawn_silent(
            pinned("jackd", cpus)
                .env("JACK_NO_AUDIO_RESERVATION", "1")
                .args(["-n", &name, "-R", "-P", "70", "-d", "dummy", "-r"])
                .arg(SAMPLE_RATE.to_string())
                .arg("-p")
                .arg(period_frames.to_string()),
            "jackd (Debian: apt-get install jackd2)",
        );
        JackServer { name, child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the server process runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for JackServer {
    fn drop(&mut self) {
        end(&mut self.child, Duration::from_secs(3));
    }
}

/// What `xrun_client` printed at its end, and the xrun times it logged (`-x`).
#[derive(Clone, Debug)]
pub struct ClientReport {
    pub xruns: u64,
    pub callbacks: u64,
    pub period_ns: u64,
    pub process_tid: i32,
    pub started_monotonic_ns: u64,
    pub duration_ns: u64,
    /// CLOCK_MONOTONIC ns of each xrun callback, in order.
    pub xrun_times_ns: Vec<u64>,
    pub json: Value,
}

/// A running `xrun_client`; killed on drop unless waited for.
pub struct ClientProcess {
    child: Option<Child>,
    xrun_log: PathBuf,
    _directory: tempfile::TempDir,
}

impl ClientProcess {
    /// Starts `xrun_client -s SERVER -n NAME -w -l LOAD -d SECONDS -x LOG`.
    pub fn start(
        server: &JackServer,
        name: &str,
        load_percent: u32,
        seconds: f64,
    ) -> ClientProcess {
        Self::start_on(None, server, name, load_percent, seconds)
    }

    /// [`ClientProcess::start`] whose work steps through `steps` (percent of the period),
    /// `step_seconds` each, from the moment it is active, then ends (`-S`, `-t`).
    pub fn start_stepping(
        server: &JackServer,
        name: &str,
        steps: &[u32],
        step_seconds: f64,
    ) -> ClientProcess {
        let steps_text: Vec<String> = steps.iter().map(u32::to_string).collect();
        let extra = [
            "-S".to_owned(),
            steps_text.join(","),
            "-t".to_owned(),
            step_seconds.to_string(),
        ];
        // -d bounds the run; the steps end it first.
        let bound = step_seconds * steps.len() as f64 + 30.0;
        Self::start_with(None, server, name, steps[0], bound, &extra)
    }

    /// [`ClientProcess::start`] with its threads allowed only on `cpus` (`taskset -c`).
    pub fn start_on(
        cpus: Option<&str>,
        server: &JackServer,
        name: &str,
        load_percent: u32,
        seconds: f64,
    ) -> ClientProcess {
        Self::start_with(cpus, server, name, load_percent, seconds, &[])
    }

    fn start_with(
        cpus: Option<&str>,
        server: &JackServer,
        name: &str,
        load_percent: u32,
        seconds: f64,
        extra: &[String],
    ) -> ClientProcess {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let xrun_log = directory.path().join("xruns.log");
        let child = pinned(&binaries().client, cpus)
            .env("JACK_NO_AUDIO_RESERVATION", "1")
            .args(["-s", &server.name, "-n", name, "-w", "-l"])
            .arg(load_percent.to_string())
            .arg("-d")
            .arg(seconds.to_string())
            .arg("-x")
            .arg(&xrun_log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start xrun_client");
        ClientProcess {
            child: Some(child),
            xrun_log,
            _directory: directory,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The client's thread running the process callback, once JACK has called it: the thread
    /// of the client process whose name is not the process's (JACK names none) and that is
    /// SCHED_FIFO; polled for up to `timeout`.
    pub fn wait_until_active(&self, timeout: Duration) -> bool {
        let task = format!("/proc/{}/task", self.pid());
        eventually(timeout, || {
            let Ok(entries) = std::fs::read_dir(&task) else {
                return false;
            };
            entries.flatten().any(|entry| {
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                // Field 41 (policy) after the comm's closing parenthesis: 1 = SCHED_FIFO.
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.split_whitespace().nth(38) == Some("1"))
            })
        })
    }

    /// Waits for the client to end by itself and returns what it reported.
    pub fn wait(self) -> ClientReport {
        self.report(false)
    }

    /// Ends the client now (SIGTERM: it ends its run early and reports as at its end) and
    /// returns what it reported: for a test whose checks are done before `-d` runs out.
    pub fn stop(self) -> ClientReport {
        self.report(true)
    }

    fn report(mut self, stop: bool) -> ClientReport {
        let child = self.child.take().expect("running");
        if stop {
            // Not yet reaped (it is waited for below), so the pid is still the client's.
            let killed = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("run kill");
            assert!(killed.success(), "kill -TERM xrun_client: {killed}");
        }
        let output = child.wait_with_output().expect("wait for xrun_client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "xrun_client failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let json: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|error| panic!("xrun_client printed no JSON ({error}): {stdout}"));
        let field = |name: &str| {
            json[name]
                .as_u64()
                .unwrap_or_else(|| panic!("{name} in {json}"))
        };
        let xrun_times_ns = std::fs::read_to_string(&self.xrun_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        ClientReport {
            xruns: field("xruns"),
            callbacks: field("callbacks"),
            period_ns: field("period_ns"),
            process_tid: field("process_tid") as i32,
            started_monotonic_ns: field("started_monotonic_ns"),
            duration_ns: field("duration_ns"),
            xrun_times_ns,
            json,
        }
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            end(child, Duration::from_secs(2));
        }
    }
}

/// One burst of the competitor on one CPU (a line of `fifo_hog -L`), CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    pub cpu: u32,
    /// When the spinner began spinning.
    pub start_ns: u64,
    /// When it stopped.
    pub end_ns: u64,
    /// The longest time between two of its clock reads inside the burst: the time it did not
    /// have its CPU (a reserved thread, an interrupt, the hypervisor).
    pub longest_gap_ns: u64,
}

/// A running `fifo_hog` (SCHED_FIFO spinners `qhog<CPU>` on every CPU), logging its bursts
/// (`-L`); killed on drop, and it stops on its own after its duration anyway.
pub struct HogProcess {
    child: Child,
    burst_log: PathBuf,
    _directory: tempfile::TempDir,
}

impl HogProcess {
    /// `fifo_hog -p PRIORITY -b BURST_US -P PERIOD_US -d SECONDS` on every CPU.
    pub fn start(priority: u32, burst_us: u32, period_us: u32, seconds: f64) -> HogProcess {
        Self::start_on(None, priority, burst_us, period_us, seconds)
    }

    /// [`HogProcess::start`] with spinners on `cpus` only (`fifo_hog -c`, e.g. "0").
    pub fn start_on(
        cpus: Option<&str>,
        priority: u32,
        burst_us: u32,
        period_us: u32,
        seconds: f64,
    ) -> HogProcess {
        let mut arguments = Vec::new();
        if let Some(cpus) = cpus {
            arguments.extend(["-c".to_string(), cpus.to_string()]);
        }
        arguments.extend([
            "-p".to_string(),
            priority.to_string(),
            "-b".to_string(),
            burst_us.to_string(),
            "-P".to_string(),
            period_us.to_string(),
            "-d".to_string(),
            seconds.to_string(),
        ]);
        Self::spawn(&arguments)
    }

    fn spawn(arguments: &[String]) -> HogProcess {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let burst_log = directory.path().join("bursts.log");
        let child = spawn_silent(
            Command::new(&binaries().hog)
                .args(arguments)
                .arg("-L")
                .arg(&burst_log),
            "fifo_hog",
        );
        HogProcess {
            child,
            burst_log,
            _directory: directory,
        }
    }

    /// The issue's competitor: FIFO 95, 6 ms every 20 ms.
    pub fn issue_competitor(seconds: f64) -> HogProcess {
        Self::start(95, 6000, 20_000, seconds)
    }

    /// The issue's competitor with its bursts aligned on every CPU (`fifo_hog -A`): JACK has
    /// no free CPU to move to during a burst, so every burst hits it (without, the bursts'
    /// phases decide, and a loaded machine's scheduling decides the phases).
    pub fn issue_competitor_aligned(seconds: f64) -> HogProcess {
        Self::spawn(
            &["-p", "95", "-b", "6000", "-P", "20000", "-A", "-d"]
                .map(String::from)
                .into_iter()
                .chain([seconds.to_string()])
                .collect::<Vec<_>>(),
        )
    }

    /// Stalls of every CPU at once, like the hypervisor's that CI's host gave JACK's client:
    /// FIFO 99, 3 ms every 17 ms (not a multiple of JACK's period), aligned (`fifo_hog -A`).
    pub fn stalls(seconds: f64) -> HogProcess {
        Self::spawn(
            &["-p", "99", "-b", "3000", "-P", "17000", "-A", "-d"]
                .map(String::from)
                .into_iter()
                .chain([seconds.to_string()])
                .collect::<Vec<_>>(),
        )
    }

    /// The issue's competitor on `cpus` only.
    pub fn issue_competitor_on(cpus: &str, seconds: f64) -> HogProcess {
        Self::start_on(Some(cpus), 95, 6000, 20_000, seconds)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the competitor (SIGTERM: it ends its bursts and writes its log) and returns every
    /// burst it spun, in order of start.
    pub fn finish(mut self) -> Vec<Burst> {
        end(&mut self.child, Duration::from_secs(3));
        let text = std::fs::read_to_string(&self.burst_log)
            .unwrap_or_else(|error| panic!("fifo_hog's burst log: {error}"));
        let mut bursts: Vec<Burst> = text
            .lines()
            .map(|line| {
                let fields: Vec<u64> = line
                    .split_whitespace()
                    .map(|field| {
                        field
                            .parse()
                            .unwrap_or_else(|_| panic!("burst log: {line}"))
                    })
                    .collect();
                let [cpu, start_ns, end_ns, longest_gap_ns] = fields[..] else {
                    panic!("burst log: {line}")
                };
                Burst {
                    cpu: cpu as u32,
                    start_ns,
                    end_ns,
                    longest_gap_ns,
                }
            })
            .collect();
        bursts.sort_by_key(|burst| burst.start_ns);
        bursts
    }
}

impl Drop for HogProcess {
    fn drop(&mut self) {
        end(&mut self.child, Duration::from_secs(1));
    }
}

/// A wake-up of `stall_watch`'s FIFO 99 thread on `cpu` later than its threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateWakeup {
    pub cpu: u32,
    pub due_ns: u64,
    pub woke_ns: u64,
    /// How long it then waited on the run queue (held by SCHED_DEADLINE threads or a kernel
    /// section that does not preempt).
    pub run_delay_ns: u64,
}

impl LateWakeup {
    /// How late its timer fired: the time the vCPU did not run (a hypervisor stall) or ran with
    /// interrupts off — nothing a thread of this machine could have taken from it.
    pub fn timer_late_ns(&self) -> u64 {
        (self.woke_ns - self.due_ns).saturating_sub(self.run_delay_ns)
    }
}

/// What `stall_watch` saw: its late wake-ups and every CPU's steal time every 20 ms.
#[derive(Clone, Debug, Default)]
pub struct StallReport {
    pub late_wakeups: Vec<LateWakeup>,
    /// (cpu, CLOCK_MONOTONIC ns, the CPU's steal time so far in ns, in USER_HZ ticks).
    pub steal: Vec<(u32, u64, u64)>,
}

impl StallReport {
    /// The steal time of every CPU together between the watch's first and last sample, ns.
    pub fn steal_ns(&self) -> u64 {
        let mut cpus: Vec<u32> = self.steal.iter().map(|&(cpu, _, _)| cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus.iter()
            .map(|&cpu| {
                let of_cpu = self.steal.iter().filter(|&&(c, _, _)| c == cpu);
                let first = of_cpu.clone().map(|&(_, _, ns)| ns).min().unwrap_or(0);
                let last = of_cpu.map(|&(_, _, ns)| ns).max().unwrap_or(0);
                last - first
            })
            .sum()
    }

    /// Whether `cpu`'s steal time grew between the last sample before `from_ns - margin_ns` and
    /// the first after `to_ns + margin_ns` (None without such samples).
    pub fn steal_grew(&self, cpu: u32, from_ns: u64, to_ns: u64, margin_ns: u64) -> Option<bool> {
        let of_cpu = || self.steal.iter().filter(move |&&(c, _, _)| c == cpu);
        let before = of_cpu()
            .filter(|&&(_, at, _)| at + margin_ns <= from_ns)
            .max_by_key(|&&(_, at, _)| at)?;
        let after = of_cpu()
            .filter(|&&(_, at, _)| at >= to_ns + margin_ns)
            .min_by_key(|&&(_, at, _)| at)?;
        Some(after.2 > before.2)
    }

    /// The stalls: late wake-ups whose timer fired at least `min_ns` late, in order of time.
    pub fn stalls(&self, min_ns: u64) -> Vec<LateWakeup> {
        let mut stalls: Vec<LateWakeup> = self
            .late_wakeups
            .iter()
            .filter(|late| late.timer_late_ns() >= min_ns)
            .copied()
            .collect();
        stalls.sort_by_key(|late| late.due_ns);
        stalls
    }
}

/// The driver cycles that `stalls` (of every CPU) may have left unfinished, at `period_ns` a
/// cycle: the time the machine did not run merged across CPUs (two vCPUs held at once are one
/// stall), and for each such span of S ns, S / period rounded up plus the cycle it began in. An
/// over-estimate when a stall held a CPU the application did not need; the tests that count a
/// real program's glitches report the glitches above it as the ones a reservation is judged by.
pub fn cycles_stalls_may_cost(stalls: &[LateWakeup], period_ns: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = stalls
        .iter()
        .map(|late| (late.due_ns, late.due_ns + late.timer_late_ns()))
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
        .iter()
        .map(|&(start, end)| (end - start).div_ceil(period_ns.max(1)) + 1)
        .sum()
}

/// One try of `rtlab reserve --auto --pid PID --observe 3s --json -` against `daemon`, with
/// `stall_watch` watching the machine while it ran: its sizing reads the CPU a thread held and
/// its check counts deadline misses, and a hypervisor holding a vCPU meanwhile moves both.
pub struct AutoTry {
    pub output: std::process::Output,
    pub json: Value,
    /// The machine's stalls of at least the asked length while it ran, in order of time.
    pub stalls: Vec<LateWakeup>,
    /// CLOCK_MONOTONIC ns it was started and ended.
    pub started_ns: u64,
    pub ended_ns: u64,
}

impl AutoTry {
    /// The stalls between `from_ns` and `to_ns`.
    pub fn stalls_between(&self, from_ns: u64, to_ns: u64) -> usize {
        self.stalls
            .iter()
            .filter(|late| late.woke_ns >= from_ns && late.due_ns <= to_ns)
            .count()
    }

    /// How long the machine stalled while it ran, ms.
    pub fn stalled_ms(&self) -> f64 {
        self.stalls
            .iter()
            .map(LateWakeup::timer_late_ns)
            .sum::<u64>() as f64
            / 1e6
    }
}

/// [`AutoTry`]: `reserve --auto` for `pid` once, the stalls of at least `stall_min_ns` noted.
pub fn reserve_auto_try(
    sandbox: &super::Sandbox,
    daemon: &super::daemon::Daemon,
    pid: u32,
    stall_min_ns: u64,
) -> AutoTry {
    let pid = pid.to_string();
    let arguments = [
        "reserve",
        "--auto",
        "--pid",
        &pid,
        "--observe",
        "3s",
        "--json",
        "-",
    ];
    let watch = StallWatch::start(30.0);
    let started_ns = monotonic_ns();
    let output = daemon.rtlab(sandbox, &arguments);
    let ended_ns = monotonic_ns();
    let stalls = watch.finish().stalls(stall_min_ns);
    let json = super::stdout_json(&output);
    AutoTry {
        output,
        json,
        stalls,
        started_ns,
        ended_ns,
    }
}

/// A running `stall_watch -t 500` (a FIFO 99 thread per CPU waking every millisecond); killed
/// on drop.
pub struct StallWatch {
    child: Child,
    log: PathBuf,
    _directory: tempfile::TempDir,
}

impl StallWatch {
    /// Watches for at most `seconds` (it ends earlier with [`StallWatch::finish`]).
    pub fn start(seconds: f64) -> StallWatch {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let log = directory.path().join("stalls.log");
        let child = spawn_silent(
            Command::new(&binaries().stall_watch)
                .args(["-t", "500", "-d"])
                .arg(seconds.to_string())
                .arg("-o")
                .arg(&log),
            "stall_watch",
        );
        StallWatch {
            child,
            log,
            _directory: directory,
        }
    }

    /// Ends the watch and returns what it saw.
    pub fn finish(mut self) -> StallReport {
        end(&mut self.child, Duration::from_secs(3));
        let text = std::fs::read_to_string(&self.log)
            .unwrap_or_else(|error| panic!("stall_watch's log: {error}"));
        let mut report = StallReport::default();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let kind = fields.next();
            let numbers: Vec<u64> = fields
                .map(|field| {
                    field
                        .parse()
                        .unwrap_or_else(|_| panic!("stall log: {line}"))
                })
                .collect();
            match (kind, &numbers[..]) {
                (Some("late"), &[cpu, due_ns, woke_ns, run_delay_ns]) => {
                    report.late_wakeups.push(LateWakeup {
                        cpu: cpu as u32,
                        due_ns,
                        woke_ns,
                        run_delay_ns,
                    })
                }
                (Some("steal"), &[cpu, at_ns, steal_ns]) => {
                    report.steal.push((cpu as u32, at_ns, steal_ns))
                }
                _ => panic!("stall log: {line}"),
            }
        }
        report
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        end(&mut self.child, Duration::from_secs(1));
    }
}

/// Of `times` (CLOCK_MONOTONIC ns, an xrun log), those within `first..=last`.
pub fn count_between(times: &[u64], first: u64, last: u64) -> u64 {
    times
        .iter()
        .filter(|time| (first..=last).contains(*time))
        .count() as u64
}

/// CLOCK_MONOTONIC now, ns (the clock of the xrun log and of rtlab's traces).
pub fn monotonic_ns() -> u64 {
    rtlab_sys::clock::monotonic_ns()
}
