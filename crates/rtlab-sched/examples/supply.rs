//! The reservation supply benchmark: the CPU a CPU-bound thread really receives in every sliding
//! window of its period, under SCHED_FIFO 95 spinners on every CPU (900 ms of every second) and,
//! optionally, `stress-ng --cpu N`, for one way of protecting it.
//!
//! ```text
//! supply --mode none|fifo50|deadline|dispatch|default --amount 2ms --period 10ms --duration 3s [--stress N]
//!        [--no-spinners] [--no-placement] [--runs FILE]
//! supply --mode command --reserve-cmd 'rtlab reserve 2ms/10ms --tid {tid}' …
//! ```
//!
//! `command` reserves through another program (the daemon's CLI): `{tid}` is replaced by the
//! measured thread's id, the command must exit 0, and its output is the grant; the daemon then
//! holds the reservation until the thread exits.
//!
//! Prints one JSON object: the mode, the grant, the sliding-window report (share of windows that
//! held the amount, minimum, p1), the steal time of every CPU over the run and over the 100 ms
//! around the worst window, and for `dispatch` the dispatchers' own cost and lateness. Root only.
//! Everything it starts stops on its own: spinners at the end of the run + 2 s, stress-ng by its
//! `--timeout`, reservations on drop.

use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use rtlab_analysis::supply::{sliding_window_supply, DEFAULT_STEP};
use rtlab_core::{parse_duration, Nanos};
use rtlab_sched::enforce::{BackendKind, Enforcement, Enforcer, ReserveRequest};
use rtlab_sched::Owner;
use rtlab_sys::sched::Policy;
use rtlab_trace::supply::RunRecorder;

#[path = "../tests/support/spinner.rs"]
mod spinner;
use spinner::Spinner;

struct Args {
    mode: String,
    amount: Nanos,
    period: Nanos,
    duration: Duration,
    stress: usize,
    spinners: bool,
    runs_file: Option<String>,
    placement: bool,
    reserve_command: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        mode: "deadline".into(),
        amount: Nanos::from_millis(2),
        period: Nanos::from_millis(10),
        duration: Duration::from_secs(3),
        stress: 0,
        spinners: true,
        runs_file: None,
        placement: true,
        reserve_command: None,
    };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        let mut value = |name: &str| iter.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "--mode" => args.mode = value("--mode")?,
            "--amount" => {
                args.amount = parse_duration(&value("--amount")?).map_err(|e| e.to_string())?
            }
            "--period" => {
                args.period = parse_duration(&value("--period")?).map_err(|e| e.to_string())?
            }
            "--duration" => {
                args.duration = parse_duration(&value("--duration")?)
                    .map_err(|e| e.to_string())?
                    .as_std()
            }
            "--stress" => {
                args.stress = value("--stress")?
                    .parse()
                    .map_err(|_| "--stress: not a number")?
            }
            "--no-spinners" => args.spinners = false,
            "--no-placement" => args.placement = false,
            "--reserve-cmd" => args.reserve_command = Some(value("--reserve-cmd")?),
            "--runs" => args.runs_file = Some(value("--runs")?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.mode == "command" && args.reserve_command.is_none() {
        return Err("--mode command needs --reserve-cmd".into());
    }
    if ![
        "none", "fifo50", "deadline", "dispatch", "default", "command",
    ]
    .contains(&args.mode.as_str())
    {
        return Err(format!("--mode: unknown mode '{}'", args.mode));
    }
    Ok(args)
}

/// How long after the tracing instance is made the judged windows begin.
const SETTLE: Duration = Duration::from_millis(100);

struct StressGuard(Option<Child>);

impl Drop for StressGuard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn steal_by_cpu() -> Vec<u64> {
    rtlab_sys::proc_stat::cpu_times()
        .map(|times| times.values().map(|cpu| cpu.steal_ns).collect())
        .unwrap_or_default()
}

fn stalls_as_runs(stalls: &[(u64, u64)]) -> Vec<(Nanos, Nanos)> {
    stalls.iter().map(|&(a, b)| (Nanos(a), Nanos(b))).collect()
}

/// Total time two sorted lists of disjoint intervals share.
fn overlap(first: &[(Nanos, Nanos)], second: &[(Nanos, Nanos)]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < first.len() && j < second.len() {
        let start = first[i].0.max(second[j].0);
        let end = first[i].1.min(second[j].1);
        if start < end {
            total += end.0 - start.0;
        }
        if first[i].1 < second[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

fn run(args: Args) -> Result<serde_json::Value, String> {
    let cpus = rtlab_sys::cpu::online_cpus().map_err(|e| e.to_string())?;
    // The controlling thread must not starve under the spinners it starts: FIFO 97, above them,
    // below a dispatch slot owner (98) and the dispatchers (99); it sleeps between 100 ms polls.
    // Reset on fork: the threads and processes it starts begin at SCHED_OTHER.
    rtlab_sys::thread_control::set_thread_policy_with_flags(
        0,
        Policy::Fifo { priority: 97 },
        rtlab_sys::thread_control::SCHED_FLAG_RESET_ON_FORK,
    )
    .map_err(|e| format!("SCHED_FIFO 97 for the controlling thread (needs root): {e}"))?;
    let until = Instant::now() + args.duration + Duration::from_secs(10);
    let measured = Spinner::start_recording(until)?;
    let directory = std::env::temp_dir().join(format!("rtlab-supply-{}", std::process::id()));
    let mut enforcer = None;
    let mut grant_json = serde_json::Value::Null;
    match args.mode.as_str() {
        "none" => {}
        "command" => {
            let command = args
                .reserve_command
                .as_deref()
                .unwrap_or_default()
                .replace("{tid}", &measured.tid.to_string());
            let output = Command::new("sh")
                .args(["-c", &command])
                .output()
                .map_err(|e| format!("--reserve-cmd: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "--reserve-cmd '{command}' failed ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
            grant_json = serde_json::json!({
                "command": command,
                "output": String::from_utf8_lossy(&output.stdout).trim(),
            });
        }
        "fifo50" => {
            rtlab_sys::sched::set_thread_policy(measured.tid, Policy::Fifo { priority: 50 })
                .map_err(|e| format!("chrt -f 50: {e}"))?
        }
        mode => {
            // "default": no backend named; the enforcer chooses for this machine and request.
            let backend: Option<BackendKind> = match mode {
                "default" => None,
                name => Some(
                    name.parse()
                        .map_err(|e: rtlab_sched::enforce::UnknownBackend| e.to_string())?,
                ),
            };
            let mut opened = Enforcer::open(&directory, backend).map_err(|e| e.to_string())?;
            opened.set_placement(args.placement);
            let grant = opened
                .reserve(ReserveRequest {
                    owner: Owner::Thread(measured.tid),
                    threads: vec![measured.tid],
                    amount: args.amount,
                    period: args.period,
                    backend,
                })
                .map_err(|e| format!("reserve: {e}"))?;
            grant_json = serde_json::json!({
                "backend": grant.backend.as_str(),
                "granted_amount_ns": grant.grant.granted.amount.0,
                "granted_period_ns": grant.grant.granted.period.0,
                "cpu": grant.cpu,
                "deadline_params": grant.deadline_params.map(|p| serde_json::json!({
                    "runtime_ns": p.runtime.0, "deadline_ns": p.deadline.0, "period_ns": p.period.0})),
                "granularity": opened.facts().granularity.describe(),
                "placement": match opened.placement() {
                    Ok(cpus) => serde_json::json!({"partitioned_cpus": cpus}),
                    Err(reason) => serde_json::json!({"none": reason}),
                },
            });
            enforcer = Some(opened);
        }
    }
    let _stress = StressGuard(if args.stress > 0 {
        Some(
            Command::new("stress-ng")
                .args([
                    "--cpu",
                    &args.stress.to_string(),
                    "--timeout",
                    &format!("{}s", args.duration.as_secs() + 3),
                    "--quiet",
                ])
                .spawn()
                .map_err(|e| format!("stress-ng: {e}"))?,
        )
    } else {
        None
    });
    let _spinners: Vec<Spinner> = if args.spinners {
        cpus.iter()
            .map(|&cpu| {
                Spinner::start(
                    until,
                    Some(Policy::Fifo { priority: 95 }),
                    Some(cpu),
                    Some((Duration::from_millis(900), Duration::from_secs(1))),
                )
            })
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    std::thread::sleep(Duration::from_millis(200));
    let steal_start = steal_by_cpu();
    let mut steal_samples: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut schedstat_samples: Vec<(u64, u64, &str)> = Vec::new();
    let mut recorder = RunRecorder::start(measured.tid).map_err(|e| e.to_string())?;
    // Creating the tracing instance stalls the CPUs for some milliseconds (the thread's own view
    // shows it too): windows are judged from SETTLE after it, and the run lasts that much longer.
    std::thread::sleep(SETTLE);
    let judged_from = rtlab_sys::clock::monotonic_ns();
    let end = Instant::now() + args.duration;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100).min(end - Instant::now()));
        steal_samples.push((rtlab_sys::clock::monotonic_ns(), steal_by_cpu()));
        schedstat_samples.push((
            rtlab_sys::clock::monotonic_ns(),
            rtlab_sys::thread_control::thread_cpu_time_ns(measured.tid).unwrap_or(0),
            rtlab_sys::sched::thread_policy(measured.tid)
                .map(|policy| policy.name())
                .unwrap_or("gone"),
        ));
        recorder.poll().map_err(|e| e.to_string())?;
    }
    let mut runs = recorder.finish().map_err(|e| e.to_string())?;
    runs.from = Nanos(judged_from.max(runs.from.0));
    let from = runs.from;
    runs.runs.retain(|(_, end)| *end > from);
    if let Some(first) = runs.runs.first_mut() {
        first.0 = first.0.max(from);
    }
    let steal_end = steal_by_cpu();
    let measured_tid = measured.tid;
    let stalls = measured.finish();
    let self_runs = spinner::runs_between_stalls(&stalls, runs.from.0, runs.to.0);
    if let Some(path) = &args.runs_file {
        let text = |list: &[(Nanos, Nanos)]| -> String {
            list.iter()
                .map(|(start, end)| format!("{} {}\n", start.0 - runs.from.0, end.0 - runs.from.0))
                .collect()
        };
        std::fs::write(path, text(&runs.runs)).map_err(|e| format!("--runs {path}: {e}"))?;
        let own = format!("{path}.self");
        std::fs::write(&own, text(&self_runs)).map_err(|e| format!("--runs {own}: {e}"))?;
    }
    let dispatcher_stats = enforcer
        .as_ref()
        .map(|enforcer: &Enforcer| enforcer.dispatcher_stats())
        .unwrap_or_default();
    drop(enforcer);
    let _ = std::fs::remove_dir_all(&directory);
    let judge = |list: &[(Nanos, Nanos)]| {
        sliding_window_supply(
            list,
            runs.from,
            runs.to,
            args.amount,
            args.period,
            DEFAULT_STEP,
        )
        .map_err(|e| e.to_string())
    };
    let report = judge(&runs.runs)?;
    let self_report = judge(&self_runs)?;
    // Where the two views disagree: time the kernel had the thread on a CPU that the thread itself
    // did not see (stalls inside traced runs: interrupts, and the hypervisor's steal), and time the
    // thread ran that the trace does not show (switches the trace missed).
    let stalled_while_on_cpu = overlap(&stalls_as_runs(&stalls), &runs.runs);
    let traced_total: u64 = runs.runs.iter().map(|(a, b)| b.0 - a.0).sum();
    let self_total: u64 = self_runs.iter().map(|(a, b)| b.0 - a.0).sum();
    let ran_untraced = self_total.saturating_sub(traced_total.saturating_sub(stalled_while_on_cpu));
    let steal_total: Vec<u64> = steal_end
        .iter()
        .zip(&steal_start)
        .map(|(end, start)| end.saturating_sub(*start))
        .collect();
    // Steal in the 100 ms sample interval that holds the worst window.
    let worst = report.min_window_start_ns;
    let mut steal_at_worst = Vec::new();
    for pair in steal_samples.windows(2) {
        if pair[0].0 <= worst && worst < pair[1].0 {
            steal_at_worst = pair[1]
                .1
                .iter()
                .zip(&pair[0].1)
                .map(|(end, start)| end.saturating_sub(*start))
                .collect();
        }
    }
    let elapsed = runs.to.0 - runs.from.0;
    Ok(serde_json::json!({
        "mode": args.mode,
        "amount_ns": args.amount.0,
        "period_ns": args.period.0,
        "stress_cpu": args.stress,
        "fifo95_spinners": args.spinners,
        "grant": grant_json,
        "report": report,
        "self_report": self_report,
        "measured_tid": measured_tid,
        "stalls": stalls.len(),
        "stalled_while_on_cpu_ns": stalled_while_on_cpu,
        "ran_untraced_ns": ran_untraced,
        "switches": runs.n_switches,
        "schedstat_every_100ms": schedstat_samples.iter().map(|(time, cpu, policy)| serde_json::json!([time.saturating_sub(runs.from.0), cpu, policy])).collect::<Vec<_>>(),
        "lost_events": runs.lost_events,
        "measured_ns": elapsed,
        "steal_ns_by_cpu": steal_total,
        "steal_ns_by_cpu_around_worst_window": steal_at_worst,
        "dispatchers": dispatcher_stats.iter().map(|stats| serde_json::json!({
            "cpu": stats.cpu,
            "edges": stats.edges,
            "cpu_time_ns": stats.cpu_time.0,
            "cpu_share_of_run": stats.cpu_time.0 as f64 / elapsed as f64,
            "lateness_mean_ns": stats.lateness_sum.0.checked_div(stats.edges).unwrap_or(0),
            "lateness_max_ns": stats.lateness_max.0,
            "late_over_50us": stats.late_over_50us,
        })).collect::<Vec<_>>(),
    }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("supply: error: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("supply: error: {message}");
            ExitCode::from(3)
        }
    }
}
