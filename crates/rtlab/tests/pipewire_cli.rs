//! PipeWire as the real application (issue 40): a private PipeWire server (Dummy-Driver, quantum
//! 128 at 48 kHz, no session manager), the JACK tests' `xrun_client` through `pw-jack` working
//! 30 % of each cycle, the issue's SCHED_FIFO 95 competitor (6 ms every 20 ms on every CPU) with
//! its bursts aligned (unaligned, their phases decide whether PipeWire has a free CPU: in one
//! benchmark round of three it hardly hit, 19 unfinished cycles in 20 s against 2,967), and
//! PipeWire's own judge, `pw-profiler`. `trace watch` prints PipeWire's count beside rtlab's,
//! judged by PipeWire's own cycle (it takes `--cycle-marker pipewire` for a PipeWire client),
//! and rtlab's count is within ±20 % of PipeWire's (without the marker the inferred rule counts
//! 0.30–0.67 of it on this set-up, BENCHMARKS.md); `reserve --auto` brings PipeWire's
//! unfinished cycles back to the idle level; what rtlab started or reserved goes with the
//! programs. The same for a real instrument: Debian's fluidsynth through `pw-jack`.

mod common;

use common::daemon::Daemon;
use common::jack::{cycles_stalls_may_cost, reserve_auto_try, HogProcess, LateWakeup, StallWatch};
use common::pipewire::{
    fluidsynth_missing, rtlab_profiler_left, Fluidsynth, PipewireServer, Profiler, PwJackClient,
    QUANTUM,
};
use common::{assert_exit_code, stderr_text, stdout_text, wait_until, Sandbox};
use serde_json::Value;
use std::time::Duration;

/// Whether a culprit object names the competitor (`qhog<CPU>`).
/// `rtlab ARGS` in `sandbox` with `server` as the PipeWire server of its own environment (for
/// `trace watch --pipewire -- COMMAND`, whose program is not a client yet).
fn rtlab_with_server(
    sandbox: &Sandbox,
    server: &PipewireServer,
    args: &[&str],
) -> std::process::Command {
    let mut command = sandbox.command();
    command
        .env("XDG_RUNTIME_DIR", server.runtime_dir())
        .env("PIPEWIRE_RUNTIME_DIR", server.runtime_dir())
        .args(args);
    command
}

/// Nothing of rtlab's profiling is left: no `pw-profiler`, no directory.
fn assert_no_profiler_left() {
    assert!(
        rtlab_profiler_left().is_empty(),
        "{:?}",
        rtlab_profiler_left()
    );
}

fn is_competitor(culprit: &Value) -> bool {
    culprit["kind"] == "thread"
        && culprit["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("qhog"))
}

#[test]
#[ignore = "needs root: tracing, SCHED_FIFO competitor, pipewire's RT data threads"]
fn trace_watch_prints_pipewires_count_beside_rtlabs_and_names_the_competitor() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let server = PipewireServer::start();
    let client = PwJackClient::start(&server, "jackload", 30, 30.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let hog = HogProcess::issue_competitor_aligned(16.0);
    let watched = watch_beside_the_competitor(&sandbox, "xrun_client");
    drop(hog);
    drop(client);
    watched.assert_counted_as_pipewire_and_naming_the_competitor(Some("jackload"));
}

/// What `trace watch --comm COMM -D 12s` printed and wrote (its summary and its misses).
struct Watched {
    output: std::process::Output,
    summary: Value,
    misses: Vec<Value>,
}

/// `trace watch --comm COMM -D 12s --summary-json --json` (the caller runs the competitor).
fn watch_beside_the_competitor(sandbox: &Sandbox, comm: &str) -> Watched {
    let summary_path = sandbox.file("summary.json");
    let misses_path = sandbox.file("misses.jsonl");
    let output = sandbox.run([
        "trace",
        "watch",
        "--comm",
        comm,
        "-D",
        "12s",
        "--summary-json",
        summary_path.to_str().unwrap(),
        "--json",
        misses_path.to_str().unwrap(),
    ]);
    assert_exit_code(&output, 0);
    let summary = serde_json::from_str(&std::fs::read_to_string(&summary_path).unwrap()).unwrap();
    let misses = std::fs::read_to_string(&misses_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    Watched {
        output,
        summary,
        misses,
    }
}

impl Watched {
    /// PipeWire's count of the window.
    fn pipewire_count(&self) -> u64 {
        self.summary["pipewire"]["pipewire_unfinished"]
            .as_u64()
            .unwrap()
    }

    /// PipeWire's count printed beside rtlab's, judged by PipeWire's cycle, for the watched
    /// follower (`node`, when its name is known); hundreds of unfinished cycles (the competitor
    /// holds every CPU 6 ms of every 20), rtlab's count within ±20 % of PipeWire's, and >= 95 %
    /// of the late activations during the competitor's bursts naming it.
    fn assert_counted_as_pipewire_and_naming_the_competitor(&self, node: Option<&str>) {
        let text = stdout_text(&self.output);
        assert!(text.contains("PipeWire counted"), "{text}");
        let stderr = stderr_text(&self.output);
        assert!(
            stderr.contains("judged by PipeWire's cycle"),
            "a PipeWire client is judged by PipeWire's cycle marker: {stderr}"
        );
        let summary = &self.summary;
        assert_eq!(summary["schema"], "rtlab.watch-summary/1", "{summary}");
        let pipewire = &summary["pipewire"];
        assert_eq!(pipewire["status"], "counted", "{summary}");
        let pipewire_count = self.pipewire_count();
        let rtlab_count = summary["misses"].as_u64().unwrap();
        assert_eq!(pipewire["rtlab_misses"].as_u64(), Some(rtlab_count));
        let followers = pipewire["profile"]["followers"].as_array().unwrap();
        assert!(
            followers
                .iter()
                .any(|f| f["watched"] == true && node.is_none_or(|node| f["name"] == node)),
            "the client's node is the watched one: {pipewire}"
        );
        assert!(
            pipewire_count >= 100,
            "PipeWire counted {pipewire_count}: {pipewire}"
        );
        assert!(rtlab_count > 0, "{text}");
        // Attribution, judged by what the competitor could have caused: the misses whose
        // critical path holds a burst of it (the competitor among the culprits of a segment).
        // Misses rtlab blamed on the hypervisor (time no thread of the machine had) are reported
        // apart, also during a burst: a vCPU held for milliseconds makes a cycle late whoever
        // else ran.
        let during_bursts: Vec<&Value> = self
            .misses
            .iter()
            .filter(|miss| miss["culprit"]["kind"] != "hypervisor")
            .filter(|miss| {
                miss["critical_path"].as_array().is_some_and(|path| {
                    path.iter().any(|segment| {
                        segment["culprits"]
                            .as_array()
                            .is_some_and(|culprits| culprits.iter().any(is_competitor))
                    })
                })
            })
            .collect();
        let naming = during_bursts
            .iter()
            .filter(|miss| is_competitor(&miss["culprit"]))
            .count();
        let hypervisor = self
            .misses
            .iter()
            .filter(|miss| miss["culprit"]["kind"] == "hypervisor")
            .count();
        eprintln!(
            "PipeWire counted {pipewire_count} unfinished cycles, rtlab {rtlab_count} (ratio \
             {:.2}); {} of {} late activations during the competitor's bursts name it, \
             {hypervisor} blamed on the hypervisor (these apart)",
            rtlab_count as f64 / pipewire_count as f64,
            naming,
            during_bursts.len()
        );
        // Counted as PipeWire counts (its cycle's marker and rule): within ±20 % of PipeWire's
        // own count over the same window, a ratio of counts, not a timing.
        assert!(
            rtlab_count * 5 >= pipewire_count * 4 && rtlab_count * 4 <= pipewire_count * 5,
            "rtlab counted {rtlab_count}, PipeWire {pipewire_count}: not within ±20 %"
        );
        assert!(!during_bursts.is_empty(), "no miss during a burst: {text}");
        assert!(
            naming * 100 >= during_bursts.len() * 95,
            "{naming} of {} misses during the competitor's bursts name it",
            during_bursts.len()
        );
        assert!(
            rtlab_profiler_left().is_empty(),
            "left behind: {:?}",
            rtlab_profiler_left()
        );
    }
}

/// A stall that matters, as in the JACK tests: `stall_watch`'s timer fired at least 0.8 ms
/// late (the client's slack is 70 % of 2.667 ms).
const STALL_MIN_NS: u64 = 800_000;

/// One cycle of the forced quantum, ns.
const CYCLE_NS: u64 = QUANTUM as u64 * 1_000_000_000 / 48_000;

/// What one 8 s round counted: PipeWire's unfinished cycles, and the cycles the machine's own
/// stalls (a hypervisor holding a vCPU, seen by `stall_watch`) may have cost meanwhile.
struct Round {
    unfinished: u64,
    stalls: usize,
    stalled_ns: u64,
    may_cost: u64,
}

impl Round {
    /// The unfinished cycles no stall of the machine can account for: what a reservation is
    /// judged by (it cannot keep a vCPU running).
    fn unexplained(&self) -> u64 {
        self.unfinished.saturating_sub(self.may_cost)
    }

    fn describe(&self) -> String {
        format!(
            "{} unfinished ({} stalls >= 0.8 ms of the machine, {:.1} ms in all, may cost {} \
             cycles; {} not explained by them)",
            self.unfinished,
            self.stalls,
            self.stalled_ns as f64 / 1e6,
            self.may_cost,
            self.unexplained()
        )
    }
}

/// `reserve --auto --pid PID --observe 3s --json -` against `daemon`; tried again, up to four
/// times, when it rolled back or was refused: its check compares two 3 s windows, and its sizing
/// reads the CPU a thread held, which counts the time a hypervisor held the vCPU under it (on
/// CI's VM one try sized the 30 % client at 90 % of a cycle and the daemon rightly refused it).
/// Each try says how much the machine stalled meanwhile.
fn reserve_auto(sandbox: &Sandbox, daemon: &Daemon, pid: u32) -> Value {
    let mut tries = 0;
    loop {
        tries += 1;
        let tried = reserve_auto_try(sandbox, daemon, pid, STALL_MIN_NS);
        let json = &tried.json;
        if (json["outcome"] == "rolled_back" || json["outcome"] == "refused") && tries < 4 {
            eprintln!(
                "reserve --auto {} ({}); the machine stalled {} times >= 0.8 ms, {:.1} ms in all, \
                 while it ran; trying again",
                json["outcome"],
                json["reason"],
                tried.stalls.len(),
                tried.stalled_ms()
            );
            continue;
        }
        assert_exit_code(&tried.output, 0);
        return tried.json;
    }
}

/// PipeWire's unfinished cycles of a fresh 30 % client over 8 s: idle, beside the competitor,
/// or with `reserve --auto --pid` first (its JSON and the still running client returned).
fn round(
    sandbox: &Sandbox,
    daemon: &Daemon,
    server: &PipewireServer,
    reserve: bool,
    competitor: bool,
) -> (Round, Option<Value>, Option<PwJackClient>) {
    let client = PwJackClient::start(server, "jackload", 30, if reserve { 40.0 } else { 12.0 });
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let auto = reserve.then(|| reserve_auto(sandbox, daemon, client.pid()));
    let round = count_unfinished(server, competitor);
    // The reserved client is kept: the test checks that its reservation goes with it.
    (round, auto, reserve.then_some(client))
}

/// PipeWire's unfinished cycles over 8 s of what runs on `server`, beside the competitor or not,
/// with the machine's own stalls meanwhile.
fn count_unfinished(server: &PipewireServer, competitor: bool) -> Round {
    let hog = competitor.then(|| HogProcess::issue_competitor_aligned(10.0));
    let watch = StallWatch::start(12.0);
    let profiler = Profiler::start(server);
    std::thread::sleep(Duration::from_secs(8));
    let profile = profiler.stop();
    let stalls = watch.finish().stalls(STALL_MIN_NS);
    drop(hog);
    Round {
        unfinished: profile.unfinished(),
        stalls: stalls.len(),
        stalled_ns: stalls.iter().map(LateWakeup::timer_late_ns).sum(),
        may_cost: cycles_stalls_may_cost(&stalls, CYCLE_NS),
    }
}

/// The unfinished cycles a reservation may leave: the idle level, generously (a noisy 2-vCPU VM
/// with multi-ms hypervisor stalls), judged by the cycles no stall of the machine accounts for.
fn idle_level(idle: &Round) -> u64 {
    (3 * idle.unexplained()).max(idle.unexplained() + 20)
}

/// The tids of `reserve --auto`'s reservations for the program itself (not the thread that
/// wakes it, PipeWire's data thread, which goes with the server).
fn program_tids(auto: &Value) -> Vec<u64> {
    auto["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["why_thread"].as_str().unwrap_or("").starts_with("wakes "))
        .filter_map(|r| r["tid"].as_u64())
        .collect()
}

/// Waits until the daemon holds no reservation (the server and its clients ended).
fn wait_until_nothing_is_reserved(sandbox: &Sandbox, daemon: &Daemon, what: &str) {
    wait_until(Duration::from_secs(10), what, || {
        daemon.reservation_tids(sandbox).is_empty()
    });
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, the daemon, tracing, a SCHED_FIFO competitor"]
fn reserve_auto_brings_pipewires_unfinished_cycles_to_the_idle_level() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let mut server = PipewireServer::start();
    let (idle, _, _) = round(&sandbox, &daemon, &server, false, false);
    let (unreserved, _, _) = round(&sandbox, &daemon, &server, false, true);
    let (mut reserved, mut auto, mut client) = round(&sandbox, &daemon, &server, true, true);
    // Judged by the unfinished cycles no stall of the machine accounts for (reported apart, as
    // the JACK tests do).
    let limit = idle_level(&idle);
    if reserved.unexplained() > limit {
        // One more round from a clean start: a new server, so that the data thread the first
        // reservation also held (it goes with the server) is not still reserved.
        eprintln!(
            "reserve --auto: PipeWire counted {}, above the idle level ({}: at most {limit}); \
             one more round with a new server; {}",
            reserved.describe(),
            idle.describe(),
            auto.as_ref().expect("reserve --auto's JSON")
        );
        drop(client);
        drop(server);
        wait_until_nothing_is_reserved(
            &sandbox,
            &daemon,
            "the first server's reservations are gone",
        );
        server = PipewireServer::start();
        (reserved, auto, client) = round(&sandbox, &daemon, &server, true, true);
    }
    let auto = auto.expect("reserve --auto's JSON");
    eprintln!(
        "PipeWire's unfinished cycles in 8 s: idle {}; competitor {}; competitor after reserve \
         --auto {}; {auto}",
        idle.describe(),
        unreserved.describe(),
        reserved.describe()
    );
    assert_eq!(auto["outcome"], "kept", "{auto}");
    assert!(
        reserved.unexplained() <= limit,
        "reserve --auto: PipeWire counted {}, above the idle level ({}: at most {limit})",
        reserved.describe(),
        idle.describe()
    );
    assert!(
        reserved.unexplained() * 4 < unreserved.unexplained(),
        "the reservation did not protect (unreserved {}, reserved {})",
        unreserved.describe(),
        reserved.describe()
    );
    // The reservations go with the programs: the client's when it ends, the server's data
    // thread's (the waker) with the server.
    let client_tids = program_tids(&auto);
    assert!(!client_tids.is_empty(), "{auto}");
    drop(client);
    wait_until(
        Duration::from_secs(10),
        "the client's reservations are gone",
        || {
            let held = daemon.reservation_tids(&sandbox);
            client_tids.iter().all(|tid| !held.contains(tid))
        },
    );
    assert!(server.running());
    drop(server);
    wait_until_nothing_is_reserved(
        &sandbox,
        &daemon,
        "every reservation is gone with the server",
    );
}

/// A real instrument (issue 40, item 3): Debian's fluidsynth through pw-jack, 32 held organ
/// notes. Beside the competitor `trace watch --comm fluidsynth` counts within ±20 % of
/// PipeWire's own count and names the competitor for >= 95 % of the misses during its bursts;
/// `reserve --auto` brings PipeWire's unfinished cycles to the idle level; the reservations go
/// with fluidsynth and the server. Without fluidsynth or its soundfont it fails, saying which
/// (`.ci/run` installs them): a test that cannot run is not a pass.
#[test]
#[ignore = "needs root: SCHED_DEADLINE, the daemon, tracing, a SCHED_FIFO competitor"]
fn fluidsynth_beside_the_competitor_is_counted_as_pipewire_counts_named_and_protected() {
    if let Some(missing) = fluidsynth_missing() {
        panic!("{missing}");
    }
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let daemon = Daemon::start(&sandbox, "");
    let mut server = PipewireServer::start();
    let mut synth = Fluidsynth::start(&server, 120);
    assert!(synth.wait_until_active(Duration::from_secs(15)));
    synth.hold(32);
    std::thread::sleep(Duration::from_secs(1));
    let idle = count_unfinished(&server, false);

    let hog = HogProcess::issue_competitor_aligned(16.0);
    let watched = watch_beside_the_competitor(&sandbox, "fluidsynth");
    drop(hog);
    watched.assert_counted_as_pipewire_and_naming_the_competitor(None);

    let auto = reserve_auto(&sandbox, &daemon, synth.pid());
    assert_eq!(auto["outcome"], "kept", "{auto}");
    let limit = idle_level(&idle);
    let mut reserved = count_unfinished(&server, true);
    if reserved.unexplained() > limit {
        // One more window, the reservation unchanged: one of 8 s can hold a burst of the VM's
        // stalls shorter than stall_watch's 0.8 ms each.
        eprintln!(
            "reserve --auto: PipeWire counted {}, above the idle level ({}: at most {limit}); \
             counting 8 s more",
            reserved.describe(),
            idle.describe()
        );
        reserved = count_unfinished(&server, true);
    }
    // The unreserved window was 12 s.
    let unreserved_in_8_s = watched.pipewire_count() * 8 / 12;
    eprintln!(
        "fluidsynth, 32 voices, PipeWire's unfinished cycles in 8 s: idle {}; competitor about \
         {unreserved_in_8_s}; competitor after reserve --auto {}; {auto}",
        idle.describe(),
        reserved.describe()
    );
    assert!(
        reserved.unexplained() <= limit,
        "reserve --auto: PipeWire counted {}, above the idle level ({}: at most {limit})",
        reserved.describe(),
        idle.describe()
    );
    assert!(
        reserved.unexplained() * 4 < unreserved_in_8_s,
        "the reservation did not protect (unreserved about {unreserved_in_8_s}, reserved {})",
        reserved.describe()
    );

    // The reservations go with the programs: fluidsynth's when it quits, the data thread's of
    // the server (the waker) with the server.
    let synth_tids = program_tids(&auto);
    assert!(!synth_tids.is_empty(), "{auto}");
    synth.quit();
    wait_until(
        Duration::from_secs(10),
        "fluidsynth's reservations are gone",
        || {
            let held = daemon.reservation_tids(&sandbox);
            synth_tids.iter().all(|tid| !held.contains(tid))
        },
    );
    assert!(server.running());
    drop(server);
    wait_until_nothing_is_reserved(
        &sandbox,
        &daemon,
        "every reservation is gone with the server",
    );
}

#[test]
fn pipewire_without_its_profiler_module_is_a_clear_error_and_leaves_nothing() {
    let sandbox = Sandbox::new();
    let server = PipewireServer::start_without_profiler();
    let client = PwJackClient::start(&server, "jackload", 10, 20.0);
    assert!(common::eventually(Duration::from_secs(15), || {
        rtlab_sys::process_environment::maps_library(client.pid(), "libpipewire-0.3.so")
            .unwrap_or(false)
    }));
    let pid = client.pid().to_string();
    let output = sandbox.run(["trace", "watch", "--pid", &pid, "--pipewire", "-D", "2s"]);
    assert_exit_code(&output, 3);
    let stderr = stderr_text(&output);
    assert!(
        stderr.contains("--pipewire") && stderr.contains("libpipewire-module-profiler"),
        "{stderr}"
    );
    assert_no_profiler_left();
}

#[test]
fn pipewire_without_pw_profiler_is_a_clear_error() {
    let sandbox = Sandbox::new();
    let output = sandbox
        .command()
        .env("PATH", sandbox.path())
        .args(["trace", "watch", "--pid", "1", "--pipewire", "-D", "1s"])
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    let stderr = stderr_text(&output);
    assert!(
        stderr.contains("pw-profiler is not installed") && stderr.contains("pipewire-bin"),
        "{stderr}"
    );
    assert_no_profiler_left();
}

#[test]
#[ignore = "needs root: tracing"]
fn a_graph_with_no_follower_says_so() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let server = PipewireServer::start();
    let output = rtlab_with_server(
        &sandbox,
        &server,
        &[
            "trace",
            "watch",
            "--pipewire",
            "-D",
            "3s",
            "--",
            "sleep",
            "2",
        ],
    )
    .output()
    .unwrap();
    assert_exit_code(&output, 0);
    let text = stdout_text(&output);
    assert!(
        text.contains("PipeWire counted 0 unfinished cycles") && text.contains("no follower"),
        "{text}"
    );
    assert_no_profiler_left();
}

#[test]
#[ignore = "needs root: tracing"]
fn a_client_that_leaves_mid_watch_is_still_counted_and_nothing_is_left() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let server = PipewireServer::start();
    let client = PwJackClient::start(&server, "leaving", 30, 5.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let pid = client.pid().to_string();
    let summary_path = sandbox.file("summary.json");
    let output = sandbox.run([
        "trace",
        "watch",
        "--pid",
        &pid,
        "-D",
        "30s",
        "--summary-json",
        summary_path.to_str().unwrap(),
    ]);
    client.wait();
    assert_exit_code(&output, 0);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary_path).unwrap()).unwrap();
    let pipewire = &summary["pipewire"];
    assert_eq!(pipewire["status"], "counted", "{summary}");
    let followers = pipewire["profile"]["followers"].as_array().unwrap();
    assert!(
        followers
            .iter()
            .any(|f| f["name"] == "leaving" && f["watched"] == true),
        "the node of the client that left is still its: {pipewire}"
    );
    assert!(summary["seconds"].as_f64().unwrap() < 20.0, "{summary}");
    assert_no_profiler_left();
}

/// A watch killed with SIGKILL cannot stop its `pw-profiler` or remove its directory: the kernel
/// stops the profiler (its parent-death signal) and the next watch removes the directory.
#[test]
#[ignore = "needs root: tracing"]
fn a_sigkilled_watch_leaves_no_profiler_and_the_next_removes_its_directory() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let server = PipewireServer::start();
    let mut watch = rtlab_with_server(
        &sandbox,
        &server,
        &[
            "trace",
            "watch",
            "--pipewire",
            "-D",
            "60s",
            "--",
            "sleep",
            "60",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let profiler_runs = || {
        rtlab_profiler_left()
            .iter()
            .any(|left| left.starts_with("pw-profiler"))
    };
    wait_until(
        Duration::from_secs(30),
        "the watch's pw-profiler runs",
        profiler_runs,
    );
    watch.kill().unwrap();
    watch.wait().unwrap();
    wait_until(
        Duration::from_secs(10),
        "the killed watch's pw-profiler has stopped",
        || !profiler_runs(),
    );
    // The directory is left by the SIGKILL, and removed by the next watch.
    assert!(!rtlab_profiler_left().is_empty());
    let output = rtlab_with_server(
        &sandbox,
        &server,
        &[
            "trace",
            "watch",
            "--pipewire",
            "-D",
            "2s",
            "--",
            "sleep",
            "1",
        ],
    )
    .output()
    .unwrap();
    assert_exit_code(&output, 0);
    assert_no_profiler_left();
}
