//! `rtlab reserve --auto --follow` against a real application (issue 37, item 2): Debian's jackd2
//! (dummy driver, 128 frames) and a JACK client whose work steps up while it is followed. The
//! follow loop must grow the client's reservation when the step comes, say so in one line, and
//! leave nothing behind: at the thread's end, and on SIGINT while the thread still runs (then the
//! thread is back at its own SCHED_FIFO).
//!
//! Needs root (SCHED_FIFO, SCHED_DEADLINE), jackd2, libjack-jackd2-dev and cc: `ignore`d, run as
//! root with `--run-ignored all`. Observed with `--observe-with schedstat` (no trace), so only
//! the client's own thread is reserved and followed.

mod common;

use common::daemon::Daemon;
use common::jack::{ClientProcess, JackServer};
use common::{require_root_taking_turns, wait_until, Sandbox};
use rtlab_testkit::thread_policy;
use std::process::Child;
use std::time::Duration;

/// `rtlab reserve --auto --follow 500ms --observe 2s --observe-with schedstat --pid PID`, its
/// output in the sandbox's `follow.out`/`follow.err` and its JSON in `follow.json`; returned once
/// it follows. Fails the test, with what it said, if it ends before.
fn following(sandbox: &Sandbox, daemon: &Daemon, pid: u32) -> Child {
    let mut follow = sandbox
        .command()
        .env("RTLAB_SOCKET", &daemon.socket)
        .args(["reserve", "--auto", "--follow", "500ms", "--observe", "2s"])
        .args(["--observe-with", "schedstat", "--pid", &pid.to_string()])
        .arg("--json")
        .arg(sandbox.file("follow.json"))
        .stdout(std::fs::File::create(sandbox.file("follow.out")).unwrap())
        .stderr(std::fs::File::create(sandbox.file("follow.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until(
        Duration::from_secs(30),
        "reserve --auto --follow follows",
        || {
            let out = said(sandbox);
            if let (false, Ok(Some(status))) = (out.contains("\nfollowing "), follow.try_wait()) {
                panic!("reserve --auto --follow ended ({status}) before following:\n{out}");
            }
            out.contains("\nfollowing ")
        },
    );
    follow
}

fn said(sandbox: &Sandbox) -> String {
    format!(
        "{}{}",
        std::fs::read_to_string(sandbox.file("follow.out")).unwrap_or_default(),
        std::fs::read_to_string(sandbox.file("follow.err")).unwrap_or_default()
    )
}

/// Waits up to `limit` for `child` to exit; its exit code.
fn exit_within(child: &mut Child, limit: Duration) -> i32 {
    let mut status = None;
    wait_until(limit, "reserve --auto --follow ends", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.unwrap().code().unwrap_or(-1)
}

/// Sends SIGINT to the follow, which must end with exit 0 within 10 s; what it said.
fn interrupted(sandbox: &Sandbox, follow: &mut Child) -> String {
    let status = std::process::Command::new("kill")
        .args(["-INT", &follow.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = exit_within(follow, Duration::from_secs(10));
    let out = said(sandbox);
    assert_eq!(code, 0, "{out}");
    out
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE"]
fn a_step_up_grows_the_followed_reservation_and_nothing_outlives_the_thread() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    // 20 % of the period for 6 s (observed for 2 s, reserved), then 50 % for 6 s, then it ends.
    let client = ClientProcess::start_stepping(&server, "follow", &[20, 50], 6.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let mut follow = following(&sandbox, &daemon, client.pid());
    let report = client.wait();
    let code = exit_within(&mut follow, Duration::from_secs(20));
    let out = said(&sandbox);
    assert_eq!(code, 0, "{out}");
    let grow = out
        .lines()
        .find(|line| line.contains(": grow "))
        .unwrap_or_else(|| panic!("no growth said after the step to 50 %:\n{out}"));
    assert!(
        grow.contains(" → ") && grow.contains("the kernel holds"),
        "{grow}"
    );
    assert!(out.contains("the thread ended"), "{out}");
    assert!(daemon.reservation_tids(&sandbox).is_empty(), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sandbox.file("follow.json")).unwrap())
            .unwrap();
    let log = json["follow"].as_array().expect("the follow log");
    assert!(
        log.iter()
            .any(|line| line.as_str().unwrap().contains(": grow ")),
        "{json}"
    );
    eprintln!("{out}\nclient: {} xruns", report.xruns);
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE"]
fn sigint_ends_the_follow_and_releases_the_reservation_while_the_thread_runs() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "follow", 20, 40.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let mut follow = following(&sandbox, &daemon, client.pid());
    let tids = daemon.reservation_tids(&sandbox);
    assert_eq!(tids.len(), 1, "{}", said(&sandbox));
    assert_eq!(thread_policy(client.pid(), tids[0]), Some(6));
    let out = interrupted(&sandbox, &mut follow);
    assert!(out.contains("stopped"), "{out}");
    assert!(daemon.reservation_tids(&sandbox).is_empty(), "{out}");
    // The client's thread runs on, at its own SCHED_FIFO again.
    assert_eq!(thread_policy(client.pid(), tids[0]), Some(1), "{out}");
}

/// jackd restarts its real-time thread when the buffer size changes (`jack_bufsize 256`): the
/// followed thread ends while jackd lives, and the new one, jackd's thread at the same SCHED_FIFO
/// priority, takes over its reservation and its following. Before, the follow of jackd ended
/// there and the new thread ran unreserved: beside the FIFO competitor of
/// `bench/jack/reserve-follow.sh`, 251 xruns in the 256-frame step (BENCHMARKS.md). SIGINT then
/// releases the successor's reservation too, and the new thread is back at SCHED_FIFO.
#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO), SCHED_DEADLINE"]
fn a_thread_jackd_starts_in_place_of_a_followed_one_is_reserved_and_followed() {
    let _turn = require_root_taking_turns();
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let server = JackServer::start();
    std::thread::sleep(Duration::from_millis(500));
    let mut follow = following(&sandbox, &daemon, server.pid());
    let before = daemon.reservation_tids(&sandbox);
    assert_eq!(
        before.len(),
        1,
        "jackd's real-time thread: {}",
        said(&sandbox)
    );
    let resized = std::process::Command::new("jack_bufsize")
        .arg("256")
        .env("JACK_DEFAULT_SERVER", &server.name)
        .output()
        .unwrap();
    assert!(resized.status.success(), "jack_bufsize: {resized:?}");
    wait_until(
        Duration::from_secs(15),
        "the follow takes jackd's new thread",
        || said(&sandbox).contains("took its place"),
    );
    let out = said(&sandbox);
    assert!(out.contains("the thread ended"), "{out}");
    let after = daemon.reservation_tids(&sandbox);
    assert_eq!(after.len(), 1, "{out}");
    assert_ne!(after, before, "{out}");
    let successor = after[0];
    assert_eq!(thread_policy(server.pid(), successor), Some(6), "{out}");
    let out = interrupted(&sandbox, &mut follow);
    assert!(daemon.reservation_tids(&sandbox).is_empty(), "{out}");
    assert_eq!(thread_policy(server.pid(), successor), Some(1), "{out}");
}
