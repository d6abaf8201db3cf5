//! `rtlab reserve --auto` and `rtlab trace watch` held against a real application (issue 26):
//! Debian's jackd2 (dummy driver, 128 frames, 2.667 ms), a JACK client working 30 % of each
//! period and counting its own xruns, and a SCHED_FIFO 95 competitor (6 ms every 20 ms on every
//! CPU). JACK's own xrun count is the judge, by cause: with the reservation the xruns the
//! competitor could have caused — during its bursts (`fifo_hog -L` logs them) — must stay at the
//! idle level measured in the same test. Xruns that follow a stall of the machine (a hypervisor
//! holding a vCPU for milliseconds, seen by `stall_watch` and matching the steal time) are
//! reported apart: a reservation cannot prevent them, and on CI's VM they come and go.
//!
//! Needs root (SCHED_FIFO, SCHED_DEADLINE, tracefs/BPF), jackd2, libjack-jackd2-dev and cc:
//! `ignore`d, run as root in CI with `--include-ignored`.

mod common;

use common::daemon::Daemon;
use common::jack::{
    reserve_auto_try, Burst, ClientProcess, HogProcess, JackServer, LateWakeup, StallReport,
    StallWatch,
};
use common::{assert_exit_code, stderr_text, stdout_json, stdout_text, wait_until, Sandbox};
use rtlab_testkit::thread_policy;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `rtlab reserve --auto --pid PID --observe OBSERVE` against `daemon`, spawned with its stdout
/// and stderr in the sandbox's `auto.out` and `auto.err`; returned once it has reserved (while it
/// checks the reservations it made). Fails the test, with what it said, if it ends before.
fn reserving_auto(
    sandbox: &Sandbox,
    daemon: &Daemon,
    pid: u32,
    observe: &str,
) -> std::process::Child {
    let mut auto = sandbox
        .command()
        .env("RTLAB_SOCKET", &daemon.socket)
        .args([
            "reserve",
            "--auto",
            "--pid",
            &pid.to_string(),
            "--observe",
            observe,
        ])
        .stdout(std::fs::File::create(sandbox.file("auto.out")).unwrap())
        .stderr(std::fs::File::create(sandbox.file("auto.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), "reserve --auto reserves", || {
        let reserved = !daemon.reservation_tids(sandbox).is_empty();
        if let (false, Ok(Some(status))) = (reserved, auto.try_wait()) {
            panic!(
                "reserve --auto ended ({status}) before it reserved:\n{}{}",
                std::fs::read_to_string(sandbox.file("auto.out")).unwrap_or_default(),
                std::fs::read_to_string(sandbox.file("auto.err")).unwrap_or_default()
            );
        }
        reserved
    });
    auto
}

/// How long each round counts JACK's xruns: the client alone, or beside the competitor. The
/// xruns the competitor causes unprotected (hundreds in a round) and the idle level (a few) are
/// far enough apart at 10 s.
const ROUND_S: f64 = 10.0;

/// One round's xruns and what could have caused them.
struct Round {
    /// The CLOCK_MONOTONIC times of JACK's xrun callbacks while the competitor ran (or, without
    /// a competitor, during the client's whole run).
    xruns: Vec<u64>,
    /// The competitor's bursts (none without a competitor).
    bursts: Vec<Burst>,
    /// What `stall_watch` saw during the round.
    stalls: StallReport,
    period_ns: u64,
    /// `reserve --auto --json`'s answer, in a reserved round.
    auto: Option<serde_json::Value>,
}

/// The xruns of a round sorted by what could have caused them.
#[derive(Debug, Default, PartialEq, Eq)]
struct XrunCauses {
    /// Reported within `lookback` of a competitor burst, with no stall of the machine in that
    /// span: the competitor's, the ones a reservation must prevent.
    competitor: Vec<u64>,
    /// Reported within `lookback` of a burst and of a stall: either could have caused them.
    competitor_and_stall: Vec<u64>,
    /// No burst within `lookback`, a stall within it: the machine's.
    stall: Vec<u64>,
    /// Neither: other noise (as in the idle round).
    other: Vec<u64>,
}

/// How long before its xrun callback the cause of an xrun can lie: JACK notices an unfinished
/// cycle when its driver thread runs next, and the client's notification thread calls the
/// callback after that. Measured unreserved (the test prints it): 99 % of the xruns are
/// reported within 0.83 periods of their burst's end (2026-12-06, 2-vCPU VM); two periods.
fn lookback(period_ns: u64) -> u64 {
    2 * period_ns
}

/// Sorts `xruns` (CLOCK_MONOTONIC ns of xrun callbacks) by cause: a competitor burst, or one
/// of `stalls` (from due to wake-up), overlapping the `lookback` ns before the callback. JACK
/// calls the callback in the client's SCHED_OTHER notification thread, which a burst holds up
/// until its end: for an xrun reported during or just after a burst, a stall up to `lookback`
/// before the burst's start counts too (measured: reserved, xruns reported 6 to 8 ms after a
/// stall's end, with a burst between).
fn xruns_by_cause(
    xruns: &[u64],
    bursts: &[Burst],
    stalls: &[LateWakeup],
    lookback: u64,
) -> XrunCauses {
    let mut causes = XrunCauses::default();
    for &at in xruns {
        let holding_up = bursts
            .iter()
            .filter(|burst| burst.start_ns <= at && burst.end_ns + lookback >= at)
            .map(|burst| burst.start_ns)
            .min();
        // The earliest a cause of this report can have ended.
        let since = holding_up.unwrap_or(at).min(at).saturating_sub(lookback);
        let stall = stalls
            .iter()
            .any(|late| late.due_ns <= at && late.woke_ns >= since);
        match (holding_up.is_some(), stall) {
            (true, false) => causes.competitor.push(at),
            (true, true) => causes.competitor_and_stall.push(at),
            (false, true) => causes.stall.push(at),
            (false, false) => causes.other.push(at),
        }
    }
    causes
}

/// A stall that matters: the timer of `stall_watch`'s thread fired at least 0.8 ms late. It
/// wakes every millisecond, so a stall of S ms shows as S - 1 to S ms late, and the stalls that
/// can make JACK's client miss a cycle are at least its slack (70 % of 2.667 ms, 1.87 ms) long.
const STALL_MIN_NS: u64 = 800_000;

impl Round {
    fn causes(&self) -> XrunCauses {
        xruns_by_cause(
            &self.xruns,
            &self.bursts,
            &self.stalls.stalls(STALL_MIN_NS),
            lookback(self.period_ns),
        )
    }

    /// One line for the test's output: the xruns by cause, the stalls and the steal time.
    fn describe(&self, name: &str) -> String {
        let causes = self.causes();
        let stalls = self.stalls.stalls(STALL_MIN_NS);
        let stalled_ns: u64 = stalls.iter().map(LateWakeup::timer_late_ns).sum();
        let longest = stalls.iter().map(LateWakeup::timer_late_ns).max();
        // /proc/stat's steal time counts in 10 ms ticks: a stall of 10 ms or more must show.
        let long: Vec<&LateWakeup> = stalls
            .iter()
            .filter(|late| late.timer_late_ns() >= 10_000_000)
            .collect();
        let long_with_steal = long
            .iter()
            .filter(|late| {
                self.stalls
                    .steal_grew(late.cpu, late.due_ns, late.woke_ns, 20_000_000)
                    .unwrap_or(false)
            })
            .count();
        let busiest_burst = self.bursts.iter().map(|b| b.longest_gap_ns).max();
        format!(
            "{name}: {} xruns: {} the competitor's (during its bursts), {} during bursts after a \
             stall, {} after a stall outside bursts, {} other; {} bursts (longest time a spinner \
             lost its CPU {:.2} ms); {} stalls >= 0.8 ms, {:.1} ms in all (longest {:.2} ms; of \
             those >= 10 ms, {long_with_steal} of {} with steal time on their CPU); steal {:.1} ms",
            self.xruns.len(),
            causes.competitor.len(),
            causes.competitor_and_stall.len(),
            causes.stall.len(),
            causes.other.len(),
            self.bursts.len(),
            busiest_burst.unwrap_or(0) as f64 / 1e6,
            stalls.len(),
            stalled_ns as f64 / 1e6,
            longest.unwrap_or(0) as f64 / 1e6,
            long.len(),
            self.stalls.steal_ns() as f64 / 1e6,
        )
    }

    /// One line per xrun that followed no stall (the competitor's and the others): when, and the
    /// last stall before it.
    fn describe_xruns_after_no_stall(&self) -> Vec<String> {
        let causes = self.causes();
        let stalls = self.stalls.stalls(STALL_MIN_NS);
        let first = self
            .bursts
            .first()
            .map_or(self.xruns.first().copied().unwrap_or(0), |b| b.start_ns);
        let cause_of = |at: &u64| {
            if causes.competitor.contains(at) {
                "the competitor's"
            } else {
                "other"
            }
        };
        let mut after_no_stall = [causes.competitor.clone(), causes.other.clone()].concat();
        after_no_stall.sort_unstable();
        after_no_stall
            .iter()
            .map(|at| {
                let stall = stalls
                    .iter()
                    .filter(|late| late.due_ns <= *at)
                    .max_by_key(|late| late.due_ns);
                format!(
                    "  xrun at +{:.4} s: {}; last stall {}",
                    (at - first) as f64 / 1e9,
                    cause_of(at),
                    stall.map_or("none".to_string(), |late| format!(
                        "{:.2} ms on CPU {}, ended {:.2} ms before",
                        late.timer_late_ns() as f64 / 1e6,
                        late.cpu,
                        at.saturating_sub(late.woke_ns) as f64 / 1e6
                    ))
                )
            })
            .collect()
    }
}

/// One round ([`ROUND_S`]): a fresh client, optionally reserved by `reserve --auto --pid` before the
/// competitor starts, optionally with the competitor; JACK's xruns, the competitor's bursts and
/// the machine's stalls.
fn round(
    sandbox: &Sandbox,
    daemon: &Daemon,
    server: &JackServer,
    reserve: bool,
    competitor: bool,
) -> Round {
    // Without a competitor the client runs one round; with one it is ended once the
    // competitor's round is over (after `reserve --auto`'s tries, however long they took).
    let seconds = if competitor { ROUND_S + 60.0 } else { ROUND_S };
    let client = ClientProcess::start(server, "auto", 30, seconds);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let auto = reserve.then(|| {
        // reserve --auto observes the program for 3 s, reserves, and checks for 3 s that its
        // deadline misses did not rise; a stall of the machine during the check (the hypervisor
        // holding a vCPU) raises them as much as a bad reservation would. Judged by cause: a
        // rollback is tried again only when the machine stalled more during the check than
        // during the observation, and said so; up to three tries.
        let mut tries = 0;
        loop {
            tries += 1;
            let tried = reserve_auto_try(sandbox, daemon, client.pid(), STALL_MIN_NS);
            if tried.json["outcome"] == "rolled_back" {
                let observing =
                    tried.stalls_between(tried.started_ns, tried.started_ns + 3_000_000_000);
                let checking = tried
                    .stalls_between(tried.ended_ns.saturating_sub(3_000_000_000), tried.ended_ns);
                eprintln!(
                    "reserve --auto rolled back ({}); stalls >= 0.8 ms of the machine: {observing} \
                     while it observed, {checking} while it checked",
                    tried.json["reason"]
                );
                if checking > observing && tries < 3 {
                    continue;
                }
            }
            assert_exit_code(&tried.output, 0);
            break tried.json;
        }
    });
    let watch = StallWatch::start(ROUND_S + 20.0);
    let hog_start = common::jack::monotonic_ns();
    let (report, bursts) = if competitor {
        let hog = HogProcess::issue_competitor_aligned(ROUND_S);
        std::thread::sleep(Duration::from_secs_f64(ROUND_S));
        let bursts = hog.finish();
        // The xruns of the competitor's last bursts are reported within `lookback`.
        std::thread::sleep(Duration::from_millis(100));
        (client.stop(), bursts)
    } else {
        (client.wait(), Vec::new())
    };
    let stalls = watch.finish();
    if competitor {
        // 6 ms every 20 ms on each CPU: 500 bursts a CPU in 10 s.
        assert!(
            bursts.len() >= 250,
            "the competitor spun only {} bursts",
            bursts.len()
        );
    }
    // The xruns while the competitor ran (the reserved client also ran while observed, and
    // after the competitor).
    let competitor_end = bursts
        .iter()
        .map(|burst| burst.end_ns + lookback(report.period_ns))
        .max();
    let xruns = report
        .xrun_times_ns
        .iter()
        .copied()
        .filter(|&at| {
            !competitor || (at >= hog_start && competitor_end.is_some_and(|end| at <= end))
        })
        .collect();
    Round {
        xruns,
        bursts,
        stalls,
        period_ns: report.period_ns,
        auto,
    }
}

/// For checking [`lookback`]: how long after the end of the latest burst that began before it
/// each xrun was reported, in periods (0 inside the burst).
fn report_delay_after_bursts(round: &Round) -> String {
    let mut delays: Vec<f64> = round
        .xruns
        .iter()
        .filter_map(|&at| {
            round
                .bursts
                .iter()
                .filter(|burst| burst.start_ns <= at)
                .map(|burst| at - burst.end_ns.min(at))
                .min()
        })
        .map(|ns| ns as f64 / round.period_ns as f64)
        .collect();
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| {
        delays
            .get(((delays.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    format!(
        "xruns reported after their burst's end, periods: median {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    )
}

#[test]
fn xruns_are_sorted_by_the_burst_or_stall_in_the_lookback_before_them() {
    let burst = |start_ns, end_ns| Burst {
        cpu: 0,
        start_ns,
        end_ns,
        longest_gap_ns: 0,
    };
    let stall = |due_ns, woke_ns| LateWakeup {
        cpu: 1,
        due_ns,
        woke_ns,
        run_delay_ns: 0,
    };
    let bursts = [burst(100, 106), burst(200, 206), burst(300, 306)];
    let stalls = [stall(150, 152), stall(203, 205), stall(295, 298)];
    let causes = xruns_by_cause(
        &[99, 100, 106, 109, 110, 153, 155, 156, 204, 308, 400],
        &bursts,
        &stalls,
        3,
    );
    assert_eq!(
        causes,
        XrunCauses {
            competitor: vec![100, 106, 109],
            // 308: reported after a burst that held the callback up; the stall ended 2 before
            // that burst began.
            competitor_and_stall: vec![204, 308],
            stall: vec![153, 155],
            other: vec![99, 110, 156, 400],
        }
    );
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE, tracing"]
fn reserve_auto_keeps_jack_at_its_idle_xruns_under_a_fifo_competitor() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let mut server = JackServer::start();
    let idle = round(&sandbox, &daemon, &server, false, false);
    let unreserved = round(&sandbox, &daemon, &server, false, true);
    let reserved = round(&sandbox, &daemon, &server, true, true);
    eprintln!("{}", idle.describe("idle"));
    eprintln!("{}", unreserved.describe("unreserved"));
    eprintln!("{}", reserved.describe("reserve --auto"));
    eprintln!("unreserved: {}", report_delay_after_bursts(&unreserved));
    eprintln!("reserve --auto: the xruns after no stall (at most 40):");
    for line in reserved.describe_xruns_after_no_stall().iter().take(40) {
        eprintln!("{line}");
    }
    let auto = reserved.auto.as_ref().expect("reserve --auto's JSON");
    eprintln!("{auto}");
    assert_eq!(auto["outcome"], "kept", "{auto}");
    let reservations = auto["reservations"].as_array().unwrap();
    // The client's process thread and the jackd thread that wakes it.
    assert_eq!(reservations.len(), 2, "{auto}");
    assert!(reservations
        .iter()
        .any(|r| r["why_thread"].as_str().unwrap().starts_with("wakes ")));
    // Judged by cause: the reservation protects JACK from the competitor, so the xruns the
    // competitor could have caused (reported during or just after one of its bursts, with no
    // stall of the machine then) stay at the idle round's level of xruns that followed no
    // stall either. Xruns after a stall — the hypervisor holding a vCPU, which no reservation
    // inside the guest can prevent — are reported above, not held against the reservation.
    let idle_level = idle.causes().other.len() as u64;
    let limit = (3 * idle_level).max(idle_level + 10);
    let by_competitor = reserved.causes().competitor.len() as u64;
    assert!(
        by_competitor <= limit,
        "reserve --auto: {by_competitor} xruns during the competitor's bursts with no stall, \
         above the idle level ({idle_level} xruns after no stall: at most {limit})"
    );
    // The stall watch cannot excuse what the competitor does: unprotected, most of JACK's xruns
    // are the competitor's, not the stalls'.
    let unreserved_causes = unreserved.causes();
    let unreserved_by_competitor = unreserved_causes.competitor.len() as u64;
    assert!(
        unreserved_by_competitor * 2 > unreserved.xruns.len() as u64,
        "unreserved, only {unreserved_by_competitor} of {} xruns counted as the competitor's: \
         {unreserved_causes:?}",
        unreserved.xruns.len()
    );
    // (Not `unreserved > limit`: another program's competitor on a shared machine can raise the
    // idle round too; that only loosens the limit above.)
    assert!(
        by_competitor * 4 < unreserved_by_competitor,
        "the reservation did not protect ({unreserved_by_competitor} xruns during the \
         competitor's bursts unreserved, {by_competitor} reserved)"
    );
    // The client's reservation went with it; the server's goes with the server.
    let client_tid = reservations
        .iter()
        .find(|r| !r["why_thread"].as_str().unwrap().starts_with("wakes "))
        .unwrap()["tid"]
        .as_u64()
        .unwrap();
    let server_tid = reservations
        .iter()
        .find(|r| r["why_thread"].as_str().unwrap().starts_with("wakes "))
        .unwrap()["tid"]
        .as_u64()
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the client's reservation is gone",
        || !daemon.reservation_tids(&sandbox).contains(&client_tid),
    );
    assert_eq!(
        thread_policy(server.pid(), server_tid),
        Some(6),
        "jackd's thread reserved"
    );
    assert!(server.running());
    drop(server);
    wait_until(
        Duration::from_secs(10),
        "the server's reservation is gone",
        || daemon.reservation_tids(&sandbox).is_empty(),
    );
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE, tracing"]
fn a_sigkilled_reserve_auto_leaves_nothing_once_the_program_ends() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "killed", 30, 12.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    // Killed while it checks the reservations it made.
    let mut auto = reserving_auto(&sandbox, &daemon, client.pid(), "4s");
    auto.kill().unwrap();
    auto.wait().unwrap();
    // The program ends (here, rather than waited out): its reservations go with it.
    let report = client.stop();
    assert!(report.callbacks > 0);
    let client_threads: Vec<u64> = daemon.reservation_tids(&sandbox);
    assert!(
        client_threads.len() <= 1,
        "only the server's thread may still be reserved: {client_threads:?}"
    );
    drop(server);
    wait_until(
        Duration::from_secs(10),
        "no reservation outlives its program",
        || daemon.reservation_tids(&sandbox).is_empty(),
    );
}

/// The row of `reservations --json` for thread `tid`.
fn row_of(rows: &[serde_json::Value], tid: u32) -> &serde_json::Value {
    rows.iter()
        .find(|row| row["tid"].as_u64() == Some(u64::from(tid)))
        .unwrap_or_else(|| panic!("no row for thread {tid}: {rows:?}"))
}

/// What `reserve --auto --dry-run --pid PID` would reserve: (tid, amount/window, backend) each,
/// the amount with a quarter more (capped at the window), so that a second observation sizing a
/// little higher is still covered by a reservation made at this rate.
fn chosen_by_auto(sandbox: &Sandbox, daemon: &Daemon, pid: u32) -> Vec<(u64, String, String)> {
    let output = daemon.rtlab(
        sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &pid.to_string(),
            "--observe",
            "2s",
            "--dry-run",
            "--json",
            "-",
        ],
    );
    assert_exit_code(&output, 0);
    let plan = stdout_json(&output);
    plan["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|chosen| {
            (
                chosen["tid"].as_u64().unwrap(),
                {
                    let window = chosen["window_ns"].as_u64().unwrap();
                    let amount = chosen["amount_ns"].as_u64().unwrap() * 5 / 4;
                    format!("{}ns/{window}ns", amount.min(window))
                },
                chosen["backend"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `reserve --auto` on a program whose chosen threads already hold reservations of the same user
/// that cover what it sizes — JACK's server thread taken as the waker of its client's
/// reservation, then `--auto` on the server — says which reservation holds each thread and what
/// it holds ("jackd (tid N) is already reserved: X of every Y (…), by reservation #K"), changes
/// nothing and exits 0: the wish is met. Before, it failed with "denied: … thread already holds a
/// reservation", exit 1 (issue 37); the wording "is already reserved … by reservation #K" is new
/// in this round (the line said "already holds reservation K").
#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE, tracing"]
fn reserve_auto_on_threads_already_reserved_says_so_and_succeeds() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "already", 30, 30.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    // Every thread `--auto` would take for the client (its thread and jackd's waker) and for the
    // server, reserved by hand at the sizes it chose. Sized again, up to three times, when the
    // daemon refuses one: the sizing reads the CPU a thread held, which counts the time a
    // hypervisor held the vCPU under it, and a stall while it observed sizes a thread at most of
    // its period. (A local run of the whole binary failed once at a hand reservation, 1 run of 11; its
    // message was not kept: a refusal is printed now, with what was chosen.)
    let mut tries = 0;
    loop {
        tries += 1;
        let mut chosen = chosen_by_auto(&sandbox, &daemon, client.pid());
        chosen.extend(chosen_by_auto(&sandbox, &daemon, server.pid()));
        chosen.sort();
        chosen.dedup_by_key(|(tid, ..)| *tid);
        assert!(!chosen.is_empty());
        let refused = chosen.iter().find_map(|(tid, rate, backend)| {
            let output = daemon.rtlab(
                &sandbox,
                &[
                    "reserve",
                    rate,
                    "--tid",
                    &tid.to_string(),
                    "--backend",
                    backend,
                ],
            );
            (!output.status.success()).then_some(output)
        });
        let Some(output) = refused else { break };
        if tries == 3 {
            assert_exit_code(&output, 0);
        }
        eprintln!(
            "a reservation at the size `--auto --dry-run` chose was refused ({}: {}); sizing \
             again: {chosen:?}",
            output.status,
            stderr_text(&output).trim()
        );
        assert_exit_code(&daemon.rtlab(&sandbox, &["release", "--all-mine"]), 0);
    }
    let before = daemon.reservation_rows(&sandbox);
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &server.pid().to_string(),
            "--observe",
            "2s",
        ],
    );
    assert_exit_code(&output, 0);
    let text = stdout_text(&output);
    assert!(
        text.contains("nothing more to reserve: every chosen thread already holds a reservation"),
        "{text}"
    );
    let already: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" is already reserved: "))
        .collect();
    assert!(!already.is_empty(), "{text}");
    // Each says what the kernel holds, as sched_getattr reads it now, and by which reservation.
    for line in &already {
        assert!(line.contains(", by reservation #"), "{line}");
        assert!(line.ends_with(": left as it is"), "{line}");
        let tid: u32 = line
            .split_once(" (tid ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .and_then(|(tid, _)| tid.parse().ok())
            .unwrap_or_else(|| panic!("no tid in {line}"));
        match rtlab_sys::sched::thread_policy(tid).unwrap() {
            rtlab_sys::sched::Policy::Deadline {
                runtime_ns,
                period_ns,
                ..
            } => {
                let held = format!(
                    "is already reserved: {} of every {} (",
                    rtlab_core::Nanos(runtime_ns),
                    rtlab_core::Nanos(period_ns)
                );
                assert!(line.contains(&held), "{held} not in {line}");
            }
            // The dispatcher's slots: what its table gives, read from the daemon's list.
            _ => {
                let row = row_of(&before, tid);
                let held = format!(
                    "is already reserved: {} of every {} (",
                    rtlab_core::Nanos(row["kernel_held"]["runtime_ns"].as_u64().unwrap()),
                    rtlab_core::Nanos(row["kernel_held"]["window_ns"].as_u64().unwrap())
                );
                assert!(line.contains(&held), "{held} not in {line}");
            }
        }
    }
    // Nothing was changed.
    let after = daemon.reservation_rows(&sandbox);
    let grants = |rows: &[serde_json::Value]| -> Vec<(u64, u64)> {
        rows.iter()
            .map(|row| {
                (
                    row["grant_id"].as_u64().unwrap(),
                    row["tid"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(grants(&before), grants(&after));
    drop(client);
    drop(server);
}

/// `reserve --auto --observe-with schedstat` finds JACK's client thread and sizes it from the
/// kernel's per-task counters, without a trace: its period is the program's own (128 frames at
/// 48 kHz), its need at least the work the client does each cycle (30 % of it), and the
/// reservation is made and kept unchecked (the counters count no misses).
#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE"]
fn reserve_auto_sizes_from_the_kernels_counters_without_a_trace() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "counted", 30, 30.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let pid = client.pid().to_string();
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &pid,
            "--observe",
            "2s",
            "--observe-with",
            "schedstat",
            "--json",
            "-",
        ],
    );
    assert_exit_code(&output, 0);
    let auto = stdout_json(&output);
    assert_eq!(auto["outcome"], "kept_unchecked", "{auto}");
    let chosen = auto["reservations"].as_array().unwrap();
    assert_eq!(
        chosen.len(),
        1,
        "the client's thread alone (no waker chain): {auto}"
    );
    let period = chosen[0]["period_ns"].as_u64().unwrap();
    let jack_period = 128.0 / 48_000.0 * 1e9;
    assert!(
        (period as f64 - jack_period).abs() < jack_period * 0.02,
        "period {period} ns, JACK's is {jack_period:.0} ns: {auto}"
    );
    let need = chosen[0]["need_per_activation_ns"].as_u64().unwrap();
    assert!(
        need as f64 >= 0.3 * jack_period,
        "need {need} ns, below the client's work of 30 % of {jack_period:.0} ns: {auto}"
    );
    let tid = chosen[0]["tid"].as_u64().unwrap();
    assert!(daemon.reservation_tids(&sandbox).contains(&tid), "{auto}");
    let read_from = chosen[0]["grant"]["kernel_held"]["read_from"].clone();
    assert!(
        read_from == "sched_getattr" || read_from == "dispatcher",
        "{auto}"
    );
    drop(client);
    wait_until(
        Duration::from_secs(10),
        "the reservation ends with the client",
        || !daemon.reservation_tids(&sandbox).contains(&tid),
    );
    drop(server);
}

/// rtlab run as `rtlabd.service` would run it, reproduced without systemd: a private mount
/// namespace with /sys, tracefs, debugfs, bpffs and /proc/sys read-only (ProtectKernelTunables),
/// the capability bounding set reduced to CAP_SYS_NICE (CapabilityBoundingSet), no new
/// privileges. Not reproduced: the unit's system-call filter.
fn under_the_units_restrictions(sandbox: &Sandbox, args: &[&str]) -> std::process::Output {
    let script = "for m in /sys /sys/kernel/tracing /sys/kernel/debug /sys/fs/bpf /proc/sys; do \
        if mountpoint -q $m; then mount --bind $m $m && mount -o remount,bind,ro $m || exit 90; fi; done; \
        exec setpriv --bounding-set=-all,+sys_nice --inh-caps=-all --no-new-privs \"$@\"";
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(env!("CARGO_BIN_EXE_rtlab"))
        .args(args)
        .env("RTLAB_HOME", sandbox.path())
        .output()
        .unwrap()
}

/// Under the hardened unit's restrictions the trace cannot be taken, and `--observe-with
/// schedstat` still finds JACK's client thread with its period from the kernel's counters.
#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), unshare, setpriv"]
fn the_counters_observe_under_the_units_restrictions_where_the_trace_cannot() {
    let sandbox = Sandbox::new();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "confined", 30, 20.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let pid = client.pid().to_string();
    let traced = under_the_units_restrictions(
        &sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &pid,
            "--observe",
            "1s",
            "--dry-run",
        ],
    );
    assert_ne!(traced.status.code(), Some(90), "{}", stderr_text(&traced));
    assert_exit_code(&traced, 3);
    let counted = under_the_units_restrictions(
        &sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &pid,
            "--observe",
            "2s",
            "--dry-run",
            "--observe-with",
            "schedstat",
            "--json",
            "-",
        ],
    );
    assert_exit_code(&counted, 0);
    let plan = stdout_json(&counted);
    let chosen = plan["reservations"].as_array().unwrap();
    assert_eq!(chosen.len(), 1, "{plan}");
    let period = chosen[0]["period_ns"].as_u64().unwrap() as f64;
    let jack_period = 128.0 / 48_000.0 * 1e9;
    assert!((period - jack_period).abs() < jack_period * 0.02, "{plan}");
    drop(client);
    drop(server);
}

#[test]
#[ignore = "needs root: tracing"]
fn reserve_auto_on_a_program_without_periodic_threads_says_so() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "--auto",
            "--pid",
            &sleeper.id().to_string(),
            "--observe",
            "1s",
        ],
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_exit_code(&output, 2);
    assert!(
        stderr_text(&output).contains("no periodic real-time thread found"),
        "{}",
        stderr_text(&output)
    );
    assert!(daemon.reservation_tids(&sandbox).is_empty());
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), tracing"]
fn trace_watch_ends_with_the_summary_when_the_program_exits() {
    let sandbox = Sandbox::new();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "watched", 30, 5.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let json = sandbox.file("misses.jsonl");
    let output = sandbox
        .command()
        .args([
            "trace",
            "watch",
            "--pid",
            &client.pid().to_string(),
            "-D",
            "120s",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let report = client.wait();
    assert_exit_code(&output, 0);
    let text = stdout_text(&output);
    assert!(text.contains("deadline misses ("), "{text}");
    assert!(text.contains("verdict: "), "{text}");
    // Every line of the JSON is one late activation, as `trace analyze --json` writes them.
    for line in std::fs::read_to_string(&json).unwrap().lines() {
        let miss: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            miss["thread"]["tid"].is_i64() && miss["critical_path"].is_array(),
            "{line}"
        );
    }
    assert!(report.callbacks > 0);
}

#[test]
fn trace_watch_of_a_name_nothing_has_exits_2_with_the_name() {
    let sandbox = Sandbox::new();
    let output = sandbox
        .command()
        .args(["trace", "watch", "--comm", "no-such-prog-26"])
        .output()
        .unwrap();
    assert_exit_code(&output, 2);
    assert!(
        stderr_text(&output).contains("no-such-prog-26"),
        "{}",
        stderr_text(&output)
    );
}

#[test]
fn reserve_auto_without_a_program_is_a_usage_error() {
    let sandbox = Sandbox::new();
    let output = sandbox
        .command()
        .args(["reserve", "--auto"])
        .output()
        .unwrap();
    assert_exit_code(&output, 2);
    let output = sandbox
        .command()
        .args(["reserve", "--auto", "--tid", "1"])
        .output()
        .unwrap();
    assert_exit_code(&output, 2);
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE, tracing"]
fn an_interrupted_reserve_auto_releases_what_it_reserved() {
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "interrupted", 30, 20.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let mut auto = reserving_auto(&sandbox, &daemon, client.pid(), "5s");
    // SIGINT while it checks: it releases, says why, and exits 130; the program still runs.
    Command::new("kill")
        .args(["-INT", &auto.id().to_string()])
        .status()
        .unwrap();
    let status = auto.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let said = std::fs::read_to_string(sandbox.file("auto.err")).unwrap();
    assert!(said.contains("released the reservations"), "{said}");
    assert!(daemon.reservation_tids(&sandbox).is_empty());
    // Still running after the interrupt: ended here rather than waited out.
    let report = client.stop();
    assert!(report.callbacks > 0);
}

#[test]
#[ignore = "needs root: tracing"]
fn trace_watch_wait_waits_for_the_name_to_appear() {
    let sandbox = Sandbox::new();
    let program = sandbox.file("rtlabwait26");
    std::fs::copy("/bin/sleep", &program).unwrap();
    let stderr_path = sandbox.file("watch.err");
    let watch = sandbox
        .command()
        .args([
            "trace",
            "watch",
            "--comm",
            "rtlabwait26",
            "--wait",
            "-D",
            "3s",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // The name appears only once the watch says it waits for it.
    wait_until(Duration::from_secs(30), "the watch waits", || {
        std::fs::read_to_string(&stderr_path)
            .unwrap_or_default()
            .contains("waiting for a process named \"rtlabwait26\"")
    });
    let mut named = Command::new(&program).arg("30").spawn().unwrap();
    let output = watch.wait_with_output().unwrap();
    let _ = named.kill();
    let _ = named.wait();
    assert_exit_code(&output, 0);
    assert!(
        stdout_text(&output).contains("watched comm rtlabwait26"),
        "{}",
        stdout_text(&output)
    );
}

/// Sized while every CPU stalls 3 ms every 17 ms (FIFO 99 spinners, aligned: what CI's host did
/// to JACK's client through the hypervisor), by the trace and by the kernel's counters: JACK's
/// client falls behind and runs cycles back to back without sleeping, one activation for two
/// cycles' work. Sized per activation, it asked 1.9 ms (trace) or 1.7 ms every 3.2 ms (counters,
/// the period stretched by the missing switches) for its 0.8 ms of every 2.67 ms, and on CI two
/// such no longer fitted on a CPU. Counted per cycle, the period is JACK's and the need one
/// cycle's work plus the margin, well under two cycles' (`analyze::cycles`,
/// `counters::cycle_counts`).
#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), FIFO 99 spinners, tracing"]
fn a_client_that_falls_behind_is_sized_per_cycle_not_per_activation() {
    let sandbox = Sandbox::new();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "behind", 30, 40.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let pid = client.pid().to_string();
    let jack_period = 128.0 / 48_000.0 * 1e9;
    for observe_with in ["trace", "schedstat"] {
        let stalls = HogProcess::stalls(6.0);
        std::thread::sleep(Duration::from_millis(300));
        let output = Command::new(env!("CARGO_BIN_EXE_rtlab"))
            .args([
                "reserve",
                "--auto",
                "--pid",
                &pid,
                "--observe",
                "2s",
                "--dry-run",
                "--observe-with",
                observe_with,
                "--json",
                "-",
            ])
            .env("RTLAB_HOME", sandbox.path())
            .output()
            .unwrap();
        let bursts = stalls.finish();
        assert!(
            bursts.len() >= 100,
            "the stalls ran: {} bursts",
            bursts.len()
        );
        assert_exit_code(&output, 0);
        let plan = stdout_json(&output);
        let chosen = plan["reservations"].as_array().unwrap();
        let row = chosen
            .iter()
            .find(|row| row["pid"] == client.pid())
            .unwrap_or_else(|| panic!("{observe_with}: the client's thread: {plan}"));
        let period = row["period_ns"].as_u64().unwrap() as f64;
        assert!(
            (period - jack_period).abs() < jack_period * 0.02,
            "{observe_with}: period {period} ns, JACK's is {jack_period:.0} ns: {plan}"
        );
        // 30 % of the period, plus 20 %: 36 %. Two cycles' work would be 72 %.
        let need = row["need_per_activation_ns"].as_u64().unwrap() as f64;
        assert!(
            need >= 0.3 * jack_period && need < 0.5 * jack_period,
            "{observe_with}: need {need} ns of a {jack_period:.0} ns period: {plan}"
        );
    }
    drop(client);
    drop(server);
}
