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
use rtlab_explain::supply::RunRecorder;
use rtlab_plan::Owner;
use rtlab_sched::enforce::{BackendKind, Enforcement, Enforcer, ReserveRequest};
use rtlab_sys::sched::Policy;

use rtlab_testkit::spinner::{self, Spinner};

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

/// Where the time inside the reserved thread's dispatch slots went, by its own clock: for every
/// slot instance in the judged span, the slot's length less the thread's own stalls inside it.
/// `start_delay` is the stall covering the slot's start (the dispatcher's lateness, its raise and
/// the switch); `interior` the rest (interrupts, softirqs, the dispatcher's other wake-ups, the
/// fair server, the hypervisor).
struct SlotLosses {
    slots: Vec<(u64, u64)>,
    loss: Vec<u64>,
    start_delay: Vec<u64>,
    interior: Vec<u64>,
    /// Own-view stalls wholly inside slots, by length bucket: (upper bound µs, count, total ns).
    buckets: Vec<(u64, u64, u64)>,
    /// Stalls of at least LONG_STALL_NS inside slots, the start delay included: (start, end).
    long_stalls: Vec<(u64, u64)>,
}

/// A stall inside a slot at least this long is not an interrupt (those measure < 50 µs here)
/// nor the dispatcher's ordinary lateness: the raised owner lost its CPU to something above
/// SCHED_FIFO 99 (the kernel's fair server) or the hypervisor stopped the vCPU, or stalled the
/// dispatcher's wake-up as long.
const LONG_STALL_NS: u64 = 200_000;

fn slot_instances(
    plan: &rtlab_plan::Plan,
    owner: &Owner,
    epoch: u64,
    from: u64,
    to: u64,
) -> Vec<(u64, u64)> {
    let mut instances = Vec::new();
    for schedule in &plan.cpus {
        let cycle = schedule.cycle.0.max(1);
        let own: Vec<_> = schedule
            .slots
            .iter()
            .filter(|slot| &slot.owner == owner)
            .collect();
        if own.is_empty() {
            continue;
        }
        let mut base = from.saturating_sub(epoch) / cycle * cycle;
        while epoch + base < to {
            for slot in &own {
                let start = epoch + base + slot.start.0;
                let end = start + slot.length.0;
                if start >= from && end <= to {
                    instances.push((start, end));
                }
            }
            base += cycle;
        }
    }
    instances.sort_unstable();
    instances
}

fn slot_losses(slots: Vec<(u64, u64)>, stalls: &[(u64, u64)]) -> SlotLosses {
    let bounds = [10u64, 50, 200, 1000, u64::MAX];
    let mut result = SlotLosses {
        loss: Vec::with_capacity(slots.len()),
        start_delay: Vec::with_capacity(slots.len()),
        interior: Vec::with_capacity(slots.len()),
        buckets: bounds.iter().map(|&bound| (bound, 0, 0)).collect(),
        long_stalls: Vec::new(),
        slots: Vec::new(),
    };
    let mut first = 0;
    for &(start, end) in &slots {
        while first < stalls.len() && stalls[first].1 <= start {
            first += 1;
        }
        let (mut lost, mut delay) = (0, 0);
        for &(stall_start, stall_end) in stalls[first..].iter().take_while(|stall| stall.0 < end) {
            let (a, b) = (stall_start.max(start), stall_end.min(end));
            lost += b - a;
            if b - a >= LONG_STALL_NS {
                result.long_stalls.push((a, b));
            }
            if stall_start <= start {
                delay = b - a;
            } else {
                let length = b - a;
                let bucket = bounds
                    .iter()
                    .position(|&bound| length < bound * 1_000)
                    .unwrap_or(bounds.len() - 1);
                result.buckets[bucket].1 += 1;
                result.buckets[bucket].2 += length;
            }
        }
        result.loss.push(lost);
        result.start_delay.push(delay);
        result.interior.push(lost - delay);
    }
    result.slots = slots;
    result
}

fn quantile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn distribution(values: &[u64]) -> serde_json::Value {
    let mean = values
        .iter()
        .sum::<u64>()
        .checked_div(values.len() as u64)
        .unwrap_or(0);
    serde_json::json!({
        "mean_ns": mean,
        "p50_ns": quantile(values, 0.5),
        "p99_ns": quantile(values, 0.99),
        "p999_ns": quantile(values, 0.999),
        "max_ns": values.iter().max().copied().unwrap_or(0),
    })
}

/// The sliding windows (every `step` from `from`) whose own-view supply fell short of `amount`,
/// as start times.
fn missed_windows(
    runs: &[(Nanos, Nanos)],
    from: u64,
    to: u64,
    amount: u64,
    period: u64,
    step: u64,
) -> Vec<u64> {
    let mut prefix = Vec::with_capacity(runs.len() + 1);
    prefix.push(0u64);
    for (start, end) in runs {
        prefix.push(prefix.last().copied().unwrap_or(0) + (end.0 - start.0));
    }
    // Run time in [from, t).
    let ran_until = |t: u64| -> u64 {
        let index = runs.partition_point(|(start, _)| start.0 < t);
        let mut total = prefix[index];
        if index > 0 {
            let (start, end) = runs[index - 1];
            if end.0 > t {
                total -= end.0 - t.max(start.0);
            }
        }
        total
    };
    let mut missed = Vec::new();
    let mut t = from;
    while t + period <= to {
        if ran_until(t + period) - ran_until(t) < amount {
            missed.push(t);
        }
        t += step;
    }
    missed
}

fn irq_steal_by_cpu() -> Vec<(u64, u64, u64)> {
    rtlab_sys::proc_stat::cpu_times()
        .map(|times| {
            times
                .values()
                .map(|cpu| (cpu.irq_ns, cpu.softirq_ns, cpu.steal_ns))
                .collect()
        })
        .unwrap_or_default()
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
                    reclaim: false,
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
    let interrupts_start = irq_steal_by_cpu();
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
    let interrupts_end = irq_steal_by_cpu();
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
    // The dispatch slots of the measured thread, as absolute CLOCK_MONOTONIC intervals.
    let dispatch_slots = enforcer.as_ref().and_then(|enforcer: &Enforcer| {
        let owner = Owner::Thread(measured_tid);
        let plan = enforcer.planner().plan();
        let instances = slot_instances(&plan, &owner, enforcer.epoch(), runs.from.0, runs.to.0);
        (grant_json["backend"] == "dispatch" && !instances.is_empty()).then_some(instances)
    });
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
    let missed = missed_windows(
        &self_runs,
        runs.from.0,
        runs.to.0,
        args.amount.0,
        args.period.0,
        DEFAULT_STEP.0,
    );
    // Steal per 100 ms sample interval and CPU, to place missed windows near steal.
    let steal_near = |t: u64| -> bool {
        steal_samples.windows(2).any(|pair| {
            pair[0].0 <= t + args.period.0
                && t < pair[1].0
                && pair[1]
                    .1
                    .iter()
                    .zip(&pair[0].1)
                    .any(|(end, start)| end > start)
        })
    };
    let slots_json = dispatch_slots.map(|instances| {
        let losses = slot_losses(instances, &stalls);
        let total_length: u64 = losses.slots.iter().map(|(a, b)| b - a).sum();
        let interior: u64 = losses.interior.iter().sum();
        let during_long_stall = missed.iter().filter(|&&t| {
            losses.long_stalls.iter().any(|&(a, b)| a < t + args.period.0 && b > t)
        }).count();
        serde_json::json!({
            "slots": losses.slots.len(),
            "slot_length_ns": losses.slots.first().map(|(a, b)| b - a),
            "loss": distribution(&losses.loss),
            "start_delay": distribution(&losses.start_delay),
            "interior": distribution(&losses.interior),
            "interior_share_of_slot_time": interior as f64 / total_length.max(1) as f64,
            "interior_stalls_by_length_us": losses.buckets.iter().map(|(bound, count, total)| serde_json::json!({
                "below_us": if *bound == u64::MAX { serde_json::Value::Null } else { serde_json::json!(bound) },
                "count": count, "total_ns": total})).collect::<Vec<_>>(),
            // Each as (offset, length, how much of it the kernel's trace had the thread on a CPU:
            // the vCPU stopped under a running thread, or a switch the trace missed).
            "long_stalls": losses.long_stalls.iter().map(|&(a, b)| serde_json::json!([
                a - runs.from.0, b - a, overlap(&[(Nanos(a), Nanos(b))], &runs.runs)])).collect::<Vec<_>>(),
            "missed_windows_during_long_stall": during_long_stall,
            // Slots that lost more than 100 µs: (offset from the judged start, start delay, interior).
            "worst_slots": losses.slots.iter().zip(losses.start_delay.iter().zip(&losses.interior))
                .filter(|(_, (delay, interior))| *delay + *interior > 100_000)
                .map(|((start, _), (delay, interior))| serde_json::json!([start - runs.from.0, delay, interior]))
                .collect::<Vec<_>>(),
        })
    });
    let irq_by_cpu: Vec<serde_json::Value> = interrupts_end
        .iter()
        .zip(&interrupts_start)
        .map(|(end, start)| {
            serde_json::json!({
                "irq_ns": end.0.saturating_sub(start.0),
                "softirq_ns": end.1.saturating_sub(start.1),
                "steal_ns": end.2.saturating_sub(start.2),
            })
        })
        .collect();
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
        "missed_windows": missed.len(),
        "missed_windows_near_steal": missed.iter().filter(|&&t| steal_near(t)).count(),
        "dispatch_slots": slots_json,
        "irq_softirq_steal_by_cpu": irq_by_cpu,
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
            "spun_ns": stats.spun.0,
            "lead_ns": stats.lead.0,
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
