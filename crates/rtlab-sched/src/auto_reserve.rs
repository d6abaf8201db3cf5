//! `rtlab reserve --auto`'s decisions, pure: which observed threads need a reservation, how much
//! CPU in which window, and which backend can enforce it on this machine.
//!
//! The input is what a short trace of the program found (each thread's policy, detected period,
//! CPU per activation and usual waker); the output is a list of reservations to ask the daemon
//! for, each with the reason for its size and backend in words. Nothing here reads the machine:
//! the enforcement granularity and the deadline admission come in as [`AutoMachine`].
//!
//! Why a window of several periods: SCHED_DEADLINE without HRTICK_DL notices an exhausted budget
//! only at the next tick, so "X in every window of Y" maps to runtime `X + T`, period `Y`, and
//! needs `Y ≥ X + 2T` (see [`crate::enforce::deadline_map`] on Linux). At HZ=250 (`T` = 4 ms) a
//! JACK period of 2.667 ms is refused outright. A periodic thread that needs `X` of every `P` is
//! given `k·X` of every `k·P` instead: under SCHED_DEADLINE it outranks every SCHED_FIFO thread,
//! so it runs as soon as it is woken while its budget lasts, and a budget of `k·X + T` per `k·P`
//! lasts as long as each activation takes no more than `X`. The tick's overrun `T` is then paid
//! once per `k·P`, not once per period: `k` is chosen so that it costs at most
//! [`TICK_OVERHEAD_SHARE`] of a CPU and at most [`TICK_OVERHEAD_OF_NEED`] of the need itself (the
//! least over-provisioning that still maps: a tiny need, such as JACK's or PipeWire's server
//! thread at 1–3 % of a CPU, gets a long window rather than a tick that costs four times what it
//! needs), and no longer than [`LONGEST_WINDOW`].

pub use rtlab_core::auto_plan::{
    AutoBackend, AutoPlan, AutoReservation, SIZING_MARGIN, SIZING_PERCENTILE,
};
use rtlab_core::Nanos;

/// The tick's overrun, paid once per window, may cost at most this share of one CPU.
pub const TICK_OVERHEAD_SHARE: f64 = 0.10;
/// … and at most this share of the need (with its margin): measured on JACK's and PipeWire's
/// audio pairs, a 40 ms window for every thread took 2.2–3.0 times the CPU the pair used, most of
/// it the server thread's tick (11 % of a CPU for a 1 % need).
pub const TICK_OVERHEAD_OF_NEED: f64 = 0.20;
/// The longest window a periodic need is reserved over.
pub const LONGEST_WINDOW: Nanos = Nanos(200_000_000);
/// A thread counts as periodic with at least this many activations in the observation.
pub const MIN_ACTIVATIONS: u64 = 20;
/// The jitter of a periodic thread's activations may be at most this share of its period.
pub const MAX_JITTER_SHARE: f64 = 0.25;

/// One thread as the observation saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedThread {
    pub tid: u32,
    pub name: String,
    /// Its process, when known.
    pub pid: Option<u32>,
    /// One of the program's own threads (false: a thread of another program that woke them).
    pub in_target: bool,
    /// Real-time policy (SCHED_FIFO, SCHED_RR or SCHED_DEADLINE).
    pub real_time: bool,
    /// Its policy as the trace names it, for the report.
    pub policy: String,
    pub priority: i32,
    pub activations: u64,
    pub period: Option<Nanos>,
    pub period_jitter: Option<Nanos>,
    /// CPU per cycle of its period at [`SIZING_PERCENTILE`] (an activation that ran several
    /// cycles back to back counts as those cycles: `rtlab_trace::analyze::cycles`).
    pub cpu_per_cycle_high: Nanos,
    /// Its usual waker's tid, if another thread.
    pub usual_waker: Option<u32>,
}

/// What the machine can enforce, as [`crate::enforce::MachineFacts`] detects it.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoMachine {
    pub n_cpus: usize,
    /// How far past its budget a SCHED_DEADLINE job may run before the kernel notices (the tick,
    /// or ~100 µs under HRTICK_DL).
    pub deadline_overrun: Nanos,
    /// A sentence on that granularity: "4ms tick (HZ=250), HRTICK_DL off".
    pub granularity_described: String,
    /// The share of one CPU SCHED_DEADLINE reservations may take (the daemon's cap, the kernel's
    /// limit less its fair server).
    pub deadline_share_per_cpu: f64,
    /// Whether SCHED_DEADLINE is this machine's best backend (see `MachineFacts::best_backend`).
    pub deadline_preferred: bool,
}

/// Why nothing can be reserved.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AutoRefused {
    #[error("no periodic real-time thread found{0}")]
    NoPeriodicThread(String),
    #[error("{name} ({tid}) needs {need} of every {period}: more than one CPU can give")]
    NeedsMoreThanACpu {
        tid: u32,
        name: String,
        need: Nanos,
        period: Nanos,
    },
}

/// The need of one activation: the high percentile plus [`SIZING_MARGIN`], at least 10 µs.
pub fn sized_need(cpu_per_cycle_high: Nanos) -> Nanos {
    let with_margin = (cpu_per_cycle_high.0 as f64 * (1.0 + SIZING_MARGIN)).ceil() as u64;
    Nanos(with_margin.max(10_000))
}

fn periodic_reason(thread: &ObservedThread) -> Result<Nanos, String> {
    if !thread.real_time {
        return Err(format!(
            "{} is not real-time ({})",
            thread.name, thread.policy
        ));
    }
    let Some(period) = thread.period else {
        return Err(format!(
            "{} ({}) has no regular period ({} activations)",
            thread.name, thread.tid, thread.activations
        ));
    };
    if thread.activations < MIN_ACTIVATIONS {
        return Err(format!(
            "{} ({}) ran {} times, fewer than {MIN_ACTIVATIONS}",
            thread.name, thread.tid, thread.activations
        ));
    }
    let jitter = thread.period_jitter.unwrap_or(Nanos(0));
    if jitter.0 as f64 > period.0 as f64 * MAX_JITTER_SHARE {
        return Err(format!(
            "{} ({}) wakes irregularly (jitter {jitter} on a {period} period)",
            thread.name, thread.tid
        ));
    }
    Ok(period)
}

/// How one periodic need is reserved: what [`decide`] asks for a thread, and what
/// [`crate::auto_follow`] asks again when the need or the period changes.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoSize {
    pub periods_per_window: u32,
    /// `periods_per_window · need` of every `window`.
    pub amount: Nanos,
    pub window: Nanos,
    pub backend: AutoBackend,
    /// The share of one CPU the kernel will be asked for (see [`AutoReservation`]).
    pub expected_share: f64,
    pub why_backend: String,
}

/// The window, amount and backend that hold `need` of every `period` on `machine`.
pub fn size_for(need: Nanos, period: Nanos, machine: &AutoMachine) -> AutoSize {
    let (periods_per_window, amount, window, backend, expected_share, why_backend) =
        size(need, period, machine);
    AutoSize {
        periods_per_window,
        amount,
        window,
        backend,
        expected_share,
        why_backend,
    }
}

/// The window, amount and backend for one periodic need.
fn size(
    need: Nanos,
    period: Nanos,
    machine: &AutoMachine,
) -> (u32, Nanos, Nanos, AutoBackend, f64, String) {
    let overrun = machine.deadline_overrun.0;
    let share_needed = need.0 as f64 / period.0 as f64;
    let native_maps = period.0 >= need.0 + 2 * overrun;
    if machine.deadline_preferred && need < period {
        // Least k with k·P ≥ k·X + 2T (the mapping) and T/(k·P) ≤ the overhead share.
        let slack = period.0 - need.0;
        let k_map = (2 * overrun).div_ceil(slack).max(1);
        let overhead_share = TICK_OVERHEAD_SHARE.min(TICK_OVERHEAD_OF_NEED * share_needed);
        let k_overhead = ((overrun as f64) / (overhead_share * period.0 as f64)).ceil() as u64;
        let k_longest = (LONGEST_WINDOW.0 / period.0).max(1);
        let k = k_map.max(k_overhead).max(1).min(k_longest.max(k_map));
        let window = Nanos(period.0 * k);
        let amount = Nanos(need.0 * k);
        let share = (amount.0 + overrun) as f64 / window.0 as f64;
        if k_map <= k_longest && share <= machine.deadline_share_per_cpu {
            let why = if k == 1 {
                format!(
                    "SCHED_DEADLINE at the thread's own period: it outranks every SCHED_FIFO thread; \
                     runtime {} includes one {} of overrun ({})",
                    Nanos(amount.0 + overrun),
                    Nanos(overrun),
                    machine.granularity_described
                )
            } else {
                format!(
                    "SCHED_DEADLINE outranks every SCHED_FIFO thread, but {} here lets a budget \
                     overrun by {}, so a window must be at least need + 2 x {}{}; {k} periods per \
                     window ({window}) pay that overrun once and cost {:.1} % of a CPU for a need \
                     of {:.1} %",
                    machine.granularity_described,
                    Nanos(overrun),
                    Nanos(overrun),
                    if native_maps {
                        String::new()
                    } else {
                        format!(" ({period} is refused)")
                    },
                    share * 100.0,
                    share_needed * 100.0
                )
            };
            return (k as u32, amount, window, AutoBackend::Deadline, share, why);
        }
    }
    let why = if machine.deadline_preferred {
        format!(
            "the plan dispatcher: SCHED_DEADLINE cannot hold {need} of every {period} within \
             {:.0} % of a CPU at {}",
            machine.deadline_share_per_cpu * 100.0,
            machine.granularity_described
        )
    } else {
        format!(
            "the plan dispatcher: its hrtimer slots are finer than SCHED_DEADLINE's {}",
            machine.granularity_described
        )
    };
    (1, need, period, AutoBackend::Dispatch, share_needed, why)
}

/// Chooses the reservations for a program from its observed threads.
///
/// Every periodic real-time thread of the program is reserved, and so is the real-time thread
/// of another program that wakes it every period (JACK's server waking its client), when that
/// waker is periodic too. Threads that are not real-time are left alone: a reservation would
/// change their policy.
pub fn decide(threads: &[ObservedThread], machine: &AutoMachine) -> Result<AutoPlan, AutoRefused> {
    let mut chosen: Vec<(&ObservedThread, Nanos, String)> = Vec::new();
    let mut passed_over = Vec::new();
    for thread in threads.iter().filter(|thread| thread.in_target) {
        match periodic_reason(thread) {
            Ok(period) => chosen.push((
                thread,
                period,
                format!(
                    "periodic {} {} thread of the program ({} activations)",
                    thread.policy, thread.priority, thread.activations
                ),
            )),
            Err(reason) if thread.real_time => passed_over.push(reason),
            Err(_) => {}
        }
    }
    if chosen.is_empty() {
        let detail = if passed_over.is_empty() {
            String::new()
        } else {
            format!(": {}", passed_over.join("; "))
        };
        return Err(AutoRefused::NoPeriodicThread(detail));
    }
    // The wake-up chain: a periodic real-time waker from outside the program.
    let mut wakers = Vec::new();
    for (thread, period, _) in &chosen {
        let Some(waker_tid) = thread.usual_waker else {
            continue;
        };
        if chosen.iter().any(|(other, _, _)| other.tid == waker_tid)
            || wakers
                .iter()
                .any(|(other, _, _): &(&ObservedThread, _, _)| other.tid == waker_tid)
        {
            continue;
        }
        let Some(waker) = threads.iter().find(|other| other.tid == waker_tid) else {
            continue;
        };
        if let Ok(waker_period) = periodic_reason(waker) {
            let within = waker_period.0.abs_diff(period.0) * 10 <= period.0;
            if within {
                wakers.push((
                    waker,
                    waker_period,
                    format!(
                        "wakes {} ({}) every period: {} {} thread of another program",
                        thread.name, thread.tid, waker.policy, waker.priority
                    ),
                ));
            }
        }
    }
    chosen.extend(wakers);
    let mut reservations = Vec::new();
    for (thread, period, why_thread) in chosen {
        let need = sized_need(thread.cpu_per_cycle_high);
        if need >= period {
            return Err(AutoRefused::NeedsMoreThanACpu {
                tid: thread.tid,
                name: thread.name.clone(),
                need,
                period,
            });
        }
        let (periods_per_window, amount, window, backend, expected_share, why_backend) =
            size(need, period, machine);
        reservations.push(AutoReservation {
            tid: thread.tid,
            name: thread.name.clone(),
            pid: thread.pid,
            why_thread,
            period,
            need_per_activation: need,
            amount,
            window,
            periods_per_window,
            backend,
            expected_share,
            why_backend,
        });
    }
    // More SCHED_DEADLINE reservations than CPUs cannot each start at their release: the rest go
    // to the dispatcher, largest need first kept on deadline.
    reservations.sort_by(|left, right| right.expected_share.total_cmp(&left.expected_share));
    let mut deadline_count = 0;
    for reservation in &mut reservations {
        if reservation.backend != AutoBackend::Deadline {
            continue;
        }
        deadline_count += 1;
        if deadline_count > machine.n_cpus {
            reservation.backend = AutoBackend::Dispatch;
            reservation.amount = reservation.need_per_activation;
            reservation.window = reservation.period;
            reservation.periods_per_window = 1;
            reservation.expected_share =
                reservation.need_per_activation.0 as f64 / reservation.period.0 as f64;
            reservation.why_backend = format!(
                "the plan dispatcher: the {} CPUs already hold one SCHED_DEADLINE reservation each",
                machine.n_cpus
            );
        }
    }
    Ok(AutoPlan {
        reservations,
        passed_over,
    })
}

/// Whether the misses counted after reserving are worse than before: more than a quarter above,
/// and more than the count's own noise above (2 + 3 standard deviations of a Poisson count of
/// `misses_before`: a few misses either way, or a busier neighbour, are not the reservation).
pub fn worse_after(misses_before: u64, misses_after: u64) -> bool {
    let noise = 2.0 + 3.0 * (misses_before as f64).sqrt();
    misses_after as f64 > misses_before as f64 + noise && misses_after * 4 > misses_before * 5
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn machine_hz250() -> AutoMachine {
        AutoMachine {
            n_cpus: 2,
            deadline_overrun: Nanos(4 * MS),
            granularity_described: "4ms tick (HZ=250), HRTICK_DL off".into(),
            deadline_share_per_cpu: 0.9,
            deadline_preferred: true,
        }
    }

    fn thread(
        tid: u32,
        name: &str,
        in_target: bool,
        period: Option<u64>,
        cpu: u64,
    ) -> ObservedThread {
        ObservedThread {
            tid,
            name: name.into(),
            pid: Some(tid),
            in_target,
            real_time: true,
            policy: "SCHED_FIFO".into(),
            priority: 65,
            activations: 900,
            period: period.map(Nanos),
            period_jitter: Some(Nanos(20_000)),
            cpu_per_cycle_high: Nanos(cpu),
            usual_waker: None,
        }
    }

    #[test]
    fn a_jack_period_gets_a_deadline_window_of_several_periods() {
        // The JACK client of issue 26: 0.84 ms p99 of every 2.667 ms, woken by jackd's thread.
        let mut client = thread(20, "xrun_client", true, Some(2_666_667), 838_000);
        client.usual_waker = Some(10);
        let server = thread(10, "jackd", false, Some(2_666_900), 58_000);
        let plan = decide(&[client, server], &machine_hz250()).unwrap();
        assert_eq!(plan.reservations.len(), 2);
        let client = plan.reservations.iter().find(|r| r.tid == 20).unwrap();
        assert_eq!(client.backend, AutoBackend::Deadline);
        assert_eq!(client.need_per_activation, Nanos(1_005_600));
        // k = 20: the overrun costs at most a fifth of the need of 37.7 % (4 ms / 53.3 ms = 7.5 %).
        assert_eq!(client.periods_per_window, 20);
        assert_eq!(client.window, Nanos(2_666_667 * 20));
        assert_eq!(client.amount, Nanos(1_005_600 * 20));
        // The mapping holds: window ≥ amount + 2 ticks.
        assert!(client.window.0 >= client.amount.0 + 8 * MS);
        assert!(
            client.expected_share < 0.378 + 0.076,
            "{}",
            client.expected_share
        );
        assert!(
            client.why_backend.contains("is refused"),
            "{}",
            client.why_backend
        );
        let server = plan.reservations.iter().find(|r| r.tid == 10).unwrap();
        // jackd's 2.6 % is reserved over the longest window: its tick costs 2 %, not 10 %.
        assert_eq!(server.window, Nanos(2_666_900 * 74));
        assert!(
            server.expected_share < 0.027 + 0.021,
            "{}",
            server.expected_share
        );
        assert!(
            server.why_thread.contains("wakes xrun_client"),
            "{}",
            server.why_thread
        );
    }

    #[test]
    fn a_long_period_maps_at_its_own_period() {
        // 24 ms with the margin: the tick costs 8 % of a CPU at the thread's own 50 ms, under
        // 10 % and under a fifth of the need.
        let plan = decide(
            &[thread(1, "audio", true, Some(50 * MS), 20 * MS)],
            &machine_hz250(),
        )
        .unwrap();
        let reservation = &plan.reservations[0];
        assert_eq!(reservation.periods_per_window, 1);
        assert_eq!(reservation.window, Nanos(50 * MS));
        assert_eq!(reservation.backend, AutoBackend::Deadline);
    }

    #[test]
    fn a_tiny_need_gets_a_long_window_so_the_tick_does_not_cost_more_than_it_needs() {
        // 2.4 ms of every 50 ms with the margin (4.8 % of a CPU): at its own period the tick's
        // 4 ms would cost 8 %, more than the need; over the longest window (200 ms) 2 %.
        let plan = decide(
            &[thread(1, "audio", true, Some(50 * MS), 2 * MS)],
            &machine_hz250(),
        )
        .unwrap();
        let reservation = &plan.reservations[0];
        assert_eq!(reservation.periods_per_window, 4);
        assert_eq!(reservation.window, LONGEST_WINDOW);
        assert!(
            (reservation.expected_share - (4.0 * 2.4 + 4.0) / 200.0).abs() < 1e-9,
            "{}",
            reservation.expected_share
        );
    }

    #[test]
    fn non_periodic_and_normal_threads_are_refused_with_the_reason() {
        let mut normal = thread(1, "worker", true, Some(10 * MS), MS);
        normal.real_time = false;
        normal.policy = "SCHED_OTHER".into();
        let irregular = thread(2, "rt", true, None, MS);
        let refused = decide(&[normal, irregular], &machine_hz250()).unwrap_err();
        let text = refused.to_string();
        assert!(
            text.starts_with("no periodic real-time thread found"),
            "{text}"
        );
        assert!(text.contains("no regular period"), "{text}");
        assert!(!text.contains("worker"), "{text}");
    }

    #[test]
    fn a_jittery_or_rare_thread_is_not_periodic() {
        let mut jittery = thread(1, "rt", true, Some(10 * MS), MS);
        jittery.period_jitter = Some(Nanos(5 * MS));
        let mut rare = thread(2, "rt2", true, Some(10 * MS), MS);
        rare.activations = 3;
        assert!(decide(&[jittery, rare], &machine_hz250()).is_err());
    }

    #[test]
    fn without_deadline_preference_the_dispatcher_gets_the_native_rate() {
        let machine = AutoMachine {
            deadline_preferred: false,
            ..machine_hz250()
        };
        let plan = decide(&[thread(1, "rt", true, Some(2_666_667), 800_000)], &machine).unwrap();
        let reservation = &plan.reservations[0];
        assert_eq!(reservation.backend, AutoBackend::Dispatch);
        assert_eq!(reservation.window, Nanos(2_666_667));
        assert_eq!(reservation.amount, Nanos(960_000));
    }

    #[test]
    fn more_deadline_threads_than_cpus_send_the_smallest_to_the_dispatcher() {
        let threads: Vec<ObservedThread> = (1..=3)
            .map(|tid| thread(tid, "rt", true, Some(10 * MS), u64::from(tid) * 100_000))
            .collect();
        let plan = decide(&threads, &machine_hz250()).unwrap();
        let dispatch: Vec<u32> = plan
            .reservations
            .iter()
            .filter(|r| r.backend == AutoBackend::Dispatch)
            .map(|r| r.tid)
            .collect();
        assert_eq!(dispatch, [1]);
    }

    #[test]
    fn a_need_of_a_whole_period_is_refused() {
        let refused = decide(
            &[thread(1, "rt", true, Some(MS), 900_000)],
            &machine_hz250(),
        )
        .unwrap_err();
        assert!(matches!(refused, AutoRefused::NeedsMoreThanACpu { .. }));
    }

    #[test]
    fn worse_after_allows_the_noise_of_a_few_misses() {
        assert!(!worse_after(4, 6));
        assert!(!worse_after(0, 2));
        assert!(worse_after(0, 3));
        assert!(worse_after(7, 85));
        assert!(!worse_after(100, 130));
        assert!(worse_after(100, 140));
    }
}
