//! The hostile-client harness as CI runs it (issue 39, item 7): 20 s of nobody and daemon (uid
//! 1), every second process in `unshare -Ur`, against the real daemon (`target/debug/rtlab`,
//! `user_limit` 0.2, RealtimeKit1 on a private system bus), over its socket and the bus, with no
//! violation; and three runs where the checker must fail, so a checker that cannot fail does not
//! pass for one that saw nothing. They need root (the daemon, dbus-daemon, setpriv, other users'
//! /proc) and are `#[ignore = "needs root: …"]`; CI runs them with `--run-ignored all`, as root.
//! Without root they fail, they do not pass.
//!
//! `RTLAB_HOSTILE_SEED=N` repeats a run's requests (each run prints its seed).

use rtlab_hostile::action::{Action, RtkitCall, RtkitId, ThreadRef};
use rtlab_hostile::checker::ViolationKind;
use rtlab_hostile::world::Identity;
use rtlab_hostile::{Report, RunConfig};
use std::path::PathBuf;

/// The daemon under test: the workspace's `rtlab` beside this crate's binary.
fn rtlab_binary() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_rtlab-hostile")).with_file_name("rtlab");
    assert!(
        binary.exists(),
        "{} is not built: `cargo build -p rtlab` first (CI builds the whole workspace)",
        binary.display()
    );
    binary
}

fn config(seconds: f64) -> RunConfig {
    rtlab_testkit::require_root("setpriv, unshare, other users' /proc");
    let seed = std::env::var("RTLAB_HOSTILE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (RTLAB_HOSTILE_SEED={seed} repeats these requests)");
    let mut config = RunConfig::standard(
        PathBuf::from(env!("CARGO_BIN_EXE_rtlab-hostile")),
        rtlab_binary(),
        seed,
        seconds,
    );
    // A violation's replay and shrinking, within two minutes of CI's time.
    config.shrink_time = std::time::Duration::from_secs(120);
    // Root's answer is held to 100 ms by the benchmark (bench/daemon-hostile.sh, which counts and
    // reports every late answer). Here the bound is what the share rule allows by design: the
    // attacking users' RealtimeKit1 threads may, within their shares, hold every CPU at SCHED_RR
    // for their budgets over the window together, (users × share × window) / CPUs — 1 s with
    // two users, 20 % and 5 s on 2 CPUs — while the daemon's threads (SCHED_OTHER) get only the
    // kernel's fair server (50 ms of every 1 s a CPU), so one more second to be served. CI's
    // 602 ms and a loaded run's 678 ms were within it; a hung or deadlocked daemon is not. Every
    // run here has it, so that a late answer is not the first violation of a run that is to
    // catch another (it was once, at 100 ms).
    let cpus = rtlab_sys::cpu::online_cpus().map_or(1, |cpus| cpus.len().max(1));
    let users = config.cast.attacking_uids.len() as f64;
    let budgets =
        users * config.cast.limit * config.cast.daemon.rtkit_user_share_window.as_secs_f64()
            / cpus as f64;
    config.answer_bound = std::time::Duration::from_secs_f64(budgets + 1.0);
    config
}

/// The replay showed the violation again and shrank it, or (a race, a flaky oracle) says it
/// could not: shrinking is best effort, catching is not.
fn assert_replayed(report: &Report) {
    let replay = report.replay.as_ref().expect("a replay");
    if replay.reproduced {
        assert!(
            !replay.shrunk.is_empty() && replay.shrunk.len() <= replay.sequence_length,
            "{}",
            report.summary()
        );
    }
}

fn run(config: &RunConfig) -> Report {
    let report = rtlab_hostile::run(config).expect("the harness runs");
    eprintln!("{}", report.summary());
    report
}

#[test]
#[ignore = "needs root: starts the daemon and a bus and attacks them as nobody and daemon (setpriv, unshare -Ur)"]
fn hostile_users_for_twenty_seconds_change_nothing_they_may_not() {
    let config = config(20.0);
    let report = run(&config);
    assert!(report.passed(), "{}", report.summary());
    assert!(report.daemon_stopped_by_sigterm, "{}", report.summary());
    // It did attack: thousands of requests, some granted, every kind of refusal, on the socket
    // and on the bus.
    assert!(report.requests_tried > 5_000, "{}", report.summary());
    for answer in [
        "ok",
        "permission",
        "limit",
        "bad_request",
        "not_found",
        "rtkit_access_denied",
        "rtkit_failed",
        "rtkit_unknown_method",
        "rtkit_handshake",
    ] {
        assert!(
            report.outcomes.contains_key(answer),
            "no request was answered {answer}: {}",
            report.summary()
        );
    }
    assert!(report.rtkit_granted > 0, "{}", report.summary());
    // RealtimeKit1's threads did spin, and the checker metered them.
    assert!(report.largest_rtkit_ran > 0.0, "{}", report.summary());
    assert!(report.checks >= 150, "{}", report.summary());
    assert_eq!(report.pings_answered, report.pings_asked);
}

/// A daemon that lets each user have 90 % of a CPU: the checker (20 %) must see a user over it,
/// and the replay try to bring it down to the requests that did it.
#[test]
#[ignore = "needs root: starts the daemon and attacks it as nobody and daemon (setpriv, unshare -Ur)"]
fn the_checker_catches_a_daemon_whose_user_limit_is_too_large() {
    let mut config = config(20.0);
    config.cast.daemon.user_limit = 0.9;
    // The socket alone: RealtimeKit1's share (by default the user_limit) would be caught too,
    // and this run is about the SCHED_DEADLINE bandwidth.
    config.cast.daemon.rtkit = false;
    config.shrink_tries = 30;
    let (mut report, log) = rtlab_hostile::harness::attack(&config).expect("the harness runs");
    eprintln!("{}", report.summary());
    // SIGINT or SIGTERM (the stop flag) during the replay: it stops before its next request, so
    // one that comes before it replays nothing (it ignored both once and ran its minutes).
    config
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    rtlab_hostile::harness::replay_first(&config, &mut report, &log).expect("the replay runs");
    let stopped = report.replay.take().expect("a replay, stopped");
    assert_eq!(stopped.tries, 0, "{}", report.replay_summary());
    assert!(!stopped.reproduced);
    config
        .stop
        .store(false, std::sync::atomic::Ordering::Relaxed);
    rtlab_hostile::harness::replay_first(&config, &mut report, &log).expect("the replay runs");
    eprintln!("{}", report.replay_summary());
    let first = report.violations.first().expect("a violation");
    assert!(
        matches!(first.kind, ViolationKind::OverLimit { .. }),
        "{}",
        report.summary()
    );
    assert!(
        first.detail.contains("over its limit of 20.0 %"),
        "{}",
        first.detail
    );
    assert_replayed(&report);
}

/// A privileged attacker (root, whose requests the daemon rightly grants) changes root's victims
/// and the users' bystanders: the checker must see it, and a shrunk sequence must name root.
/// A daemon that lets each user's RealtimeKit1 threads run 90 % of a CPU: the checker (20 % and
/// the demotion latency) must see a user's SCHED_RR thread run over it.
#[test]
#[ignore = "needs root: starts the daemon and a bus and attacks them as nobody and daemon (setpriv, unshare -Ur)"]
fn the_checker_catches_a_daemon_whose_rtkit_share_is_too_large() {
    let mut config = config(20.0);
    config.cast.daemon.rtkit_user_share = Some(0.9);
    // Directed, not random: nobody makes its own duty-cycled spinner (90 ms of every 100 ms)
    // SCHED_RR 5, which this daemon lets run; the checker (20 % and the demotion latency) must
    // see it. A random run reaches that in seconds, or not at all in 20 s (seen): the replay
    // and shrinking are the user-limit test's to show.
    let steps = [Action::Rtkit {
        call: RtkitCall::MakeThreadRealtime {
            thread: RtkitId::Thread(ThreadRef::Own { k: 0 }),
            priority: 5,
        },
    }];
    let probed = rtlab_hostile::probe::directed(&config, &steps).expect("the probe runs");
    assert!(
        probed.answers[0].contains("\"o\":\"ok\""),
        "{:?}",
        probed.answers
    );
    let over = probed
        .violations
        .iter()
        .find(|violation| matches!(violation.kind, ViolationKind::OverShare { .. }))
        .unwrap_or_else(|| panic!("no user seen over its share: {:#?}", probed.violations));
    assert!(
        over.detail.contains("its share of 20.0 %"),
        "{}",
        over.detail
    );
}

#[test]
#[ignore = "needs root: starts the daemon and a bus and attacks them as root, nobody and daemon (setpriv, unshare -Ur)"]
fn the_checker_catches_a_privileged_attacker_changing_a_victim() {
    let mut config = config(20.0);
    config.attackers.push(Identity {
        uid: 0,
        user_namespace: false,
    });
    config.shrink_tries = 30;
    // Not about root's answer time (root's own attacker keeps the daemon busy too).
    config.answer_bound = std::time::Duration::from_secs(10);
    let report = run(&config);
    let first = report.violations.first().expect("a violation");
    assert_eq!(
        first.kind,
        ViolationKind::VictimChanged,
        "{}",
        report.summary()
    );
    assert_replayed(&report);
    let replay = report.replay.as_ref().expect("a replay");
    if replay.reproduced {
        assert!(
            replay.shrunk.iter().any(|step| step.identity == "root"),
            "{}",
            report.summary()
        );
    }
}

/// The directed probe of `rtlab_hostile::probe::reserved_rtkit_spinner`: nobody's thread made
/// SCHED_RR through RealtimeKit1 and then reserved by nobody, on each backend, spinning 90 ms of
/// every 100 ms, stays within nobody's share. With the dispatch backend it rested at SCHED_RR
/// between its slots and took 86–90 % of a CPU, never demoted (this test failed so before the
/// registry put such a thread back to its own policy for the reservation's time).
#[test]
#[ignore = "needs root: the daemon, dbus-daemon, setpriv"]
fn a_reserved_rtkit_thread_gets_its_reservation_and_no_more_on_every_backend() {
    let config = config(30.0);
    for backend in ["dispatch", "deadline"] {
        let probed = rtlab_hostile::probe::reserved_rtkit_spinner(&config, backend)
            .unwrap_or_else(|error| panic!("the probe failed ({backend}): {error:#}"));
        assert!(
            probed
                .answers
                .iter()
                .all(|answer| answer.contains("\"o\":\"ok\"")),
            "both requests must be granted for the probe to mean anything ({backend}): {:#?}",
            probed.answers
        );
        assert!(
            probed.violations.is_empty(),
            "{backend}: {:#?}",
            probed.violations
        );
    }
}

/// A Time Constraint on a RealtimeKit1 thread whose user is demoted while the constraint holds
/// it: at the deadline the thread must not come back to SCHED_RR unmetered (the daemon once gave
/// it its SCHED_RR back there, and it ran 70–80 % of a CPU, never demoted).
#[test]
#[ignore = "needs root: starts the daemon and a bus and calls them as nobody (setpriv)"]
fn a_constraint_on_an_rtkit_thread_ends_without_giving_back_what_its_user_lost_meanwhile() {
    let config = config(30.0);
    let probed = rtlab_hostile::probe::constrained_rtkit_spinner(&config)
        .unwrap_or_else(|error| panic!("the probe failed: {error:#}"));
    assert!(
        probed
            .answers
            .iter()
            .all(|answer| answer.contains("\"o\":\"ok\"")),
        "every request must be granted for the probe to mean anything: {:#?}",
        probed.answers
    );
    assert!(probed.violations.is_empty(), "{:#?}", probed.violations);
}
