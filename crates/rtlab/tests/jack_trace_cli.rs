//! `rtlab trace` held against a real application (issue 26): Debian's jackd2 with its dummy
//! driver, a JACK client that counts its own xruns (`bench/jack/xrun_client.c`) and a SCHED_FIFO
//! competitor (`bench/jack/fifo_hog.c`, threads `qhog<CPU>`). JACK's xrun count is the truth the
//! late activations are judged by, and the competitor is the culprit they must name — through
//! the BPF recorder, the tracefs recorder and a trace-cmd trace.dat. The two recorders' tests
//! record JACK's own cycle starts and the client's callback returns (`--cycle-marker jack
//! --work-done-marker CLIENT:process`) and hold the issue's ±20 %; the trace.dat test keeps the
//! rule inferred from the scheduler's events alone, with its own bounds.
//!
//! The set-up is the issue's — JACK's dummy driver at 128 frames (2.667 ms), the client working
//! 30 % of each period, FIFO 95 spinners 6 ms every 20 ms on every CPU — with the spinners'
//! bursts aligned (`fifo_hog -A`): with free time on another CPU during a burst the kernel moves
//! JACK's threads there, and whether it can depends on the bursts' phases (from 28 to 480 xruns
//! in 10 s on this 2-vCPU VM), which a test cannot rely on.
//!
//! Needs root (SCHED_FIFO, tracefs/BPF), jackd2, libjack-jackd2-dev, cc and trace-cmd:
//! `ignore`d, run as root in CI with `--include-ignored`.

mod common;

use common::jack::{count_between, Burst, ClientProcess, ClientReport, HogProcess, JackServer};
use common::Sandbox;
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// One JACK set-up at a time in this binary: two servers and competitors at once would be
/// another experiment.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts JACK with the client (30 % of each period), starts the competitor, runs
/// `record` (which records for about 10 s), waits for the client; returns its report and the
/// competitor's bursts.
fn with_jack_under_the_competitor(record: impl FnOnce(u32)) -> (ClientReport, Vec<Burst>) {
    // One set-up at a time: two competitors on CPU 0 would be another experiment.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "culprit", 30, 13.0);
    assert!(
        client.wait_until_active(Duration::from_secs(20)),
        "the JACK client never became active"
    );
    let hog = HogProcess::issue_competitor_aligned(12.0);
    record(client.pid());
    let report = client.wait();
    (report, hog.finish())
}

fn analyze_json(sandbox: &Sandbox, trace: &Path) -> Value {
    let json = sandbox.file("analysis.json");
    sandbox.run_expecting(
        0,
        [
            "trace".as_ref(),
            "analyze".as_ref(),
            "--json".as_ref(),
            json.as_os_str(),
            trace.as_os_str(),
        ],
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// How the late activations were judged, and the bounds JACK's xrun count must fall in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// By JACK's own cycle starts (`--cycle-marker jack`) and the client's callback returns
    /// (`--work-done-marker`): the issue's ±20 %.
    CycleMarker,
    /// Inferred from the scheduler's events alone: 0.7x to 1.2x (see below).
    Inferred,
}

/// The late activations of the client's process thread match JACK's xruns in the trace's
/// window (by the rule's bounds), and ≥ 95 % of those the competitor could have caused (during
/// or just after its bursts, not blamed on the hypervisor) name it.
fn assert_matches_jack(analysis: &Value, client: &ClientReport, bursts: &[Burst], rule: Rule) {
    let first = analysis["first_ns"].as_u64().unwrap();
    let last = analysis["last_ns"].as_u64().unwrap();
    let xruns = count_between(&client.xrun_times_ns, first, last);
    assert!(
        xruns >= 20,
        "the competitor hit JACK only {xruns} times in the trace's window: the set-up failed ({})",
        client.json
    );
    let tid = client.process_tid;
    let row = analysis["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["tid"] == tid)
        .unwrap_or_else(|| panic!("the client's process thread {tid} is not in the analysis"));
    let period = row["period_ns"].as_u64().expect("a period was found");
    assert!(
        period.abs_diff(client.period_ns) * 20 < client.period_ns,
        "period {period} vs JACK's {}",
        client.period_ns
    );
    let late = row["late_activations"].as_u64().unwrap();
    eprintln!(
        "{late} late activations vs {xruns} JACK xruns: {:.2}x ({rule:?})",
        late as f64 / xruns as f64
    );
    match rule {
        Rule::CycleMarker => {
            assert_eq!(analysis["deadline_source"], "cycle_marker");
            assert_eq!(row["deadline_source"], "cycle_marker");
            assert!(
                late * 10 >= xruns * 8 && late * 5 <= xruns * 6,
                "{late} late activations by JACK's cycle markers vs {xruns} JACK xruns (the issue's ±20 %)"
            );
        }
        Rule::Inferred => {
            assert_eq!(analysis["deadline_source"], "inferred");
            // Counted as JACK counts (docs/trace.md) from the scheduler's events alone. JACK's
            // own count varies with a race between its driver and the client resuming together
            // on two CPUs after a burst (a second xrun in about a third of those bursts), which
            // this rule counts once. Measured: 0.75x to 1.01x JACK's count over 18 runs of
            // these tests on the loaded machine (the issue's ±20 % in 16), 0.83x to 1.00x over
            // 12 rounds of BENCHMARKS.md; the bound is 0.7x to 1.2x. The cycle-marker rule
            // sees the race and holds ±20 %.
            assert!(
                late * 10 >= xruns * 7 && late * 5 <= xruns * 6,
                "{late} late activations (of them {} missed periods) vs {xruns} JACK xruns",
                row["missed_periods"]
            );
        }
    }
    let listed: Vec<&Value> = analysis["late_activations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|late| late["thread"]["tid"] == tid)
        .collect();
    assert!(!listed.is_empty());
    // A late activation blamed on the hypervisor (nothing of this machine ran: the virtual CPU
    // was taken away) is a cause the competitor could not have made, and this VM has
    // multi-millisecond stalls whose rate varies with the host's load: they are reported apart,
    // not counted for or against the competitor (issue 40, item 5: 8 of 104 such stalls failed a
    // fresh clone's CI). They must stay a minority, so an attribution that blamed everything on
    // the hypervisor would still fail.
    let (stalls, listed): (Vec<&Value>, Vec<&Value>) = listed
        .into_iter()
        .partition(|late| late["culprit"]["kind"] == "hypervisor");
    // What the competitor could have caused: a late activation whose span (from its start to
    // the end of its response, at least a period) meets one of its bursts (`fifo_hog -L`), or
    // the period after one. The others (another program's work on a busy machine) are reported
    // apart; they must stay a minority, so the filter cannot excuse a wrong attribution.
    let period_ns = client.period_ns;
    let meets_a_burst = |late: &&Value| {
        let at = late["at_ns"].as_u64().unwrap();
        let span = late["response_ns"].as_u64().unwrap().max(period_ns);
        bursts
            .iter()
            .any(|burst| at <= burst.end_ns + period_ns && burst.start_ns <= at + span)
    };
    let (listed, elsewhere): (Vec<&Value>, Vec<&Value>) =
        listed.into_iter().partition(meets_a_burst);
    eprintln!(
        "{} late activations outside the competitor's bursts, reported apart: {:?}",
        elsewhere.len(),
        elsewhere
            .iter()
            .take(3)
            .map(|late| late["explanation"].to_string())
            .collect::<Vec<_>>()
    );
    assert!(
        elsewhere.len() < listed.len(),
        "{} of {} late activations are outside the competitor's {} bursts",
        elsewhere.len(),
        elsewhere.len() + listed.len(),
        bursts.len()
    );
    eprintln!(
        "{} late activations blamed on the hypervisor, reported apart: {:?}",
        stalls.len(),
        stalls
            .iter()
            .take(3)
            .map(|late| late["explanation"].to_string())
            .collect::<Vec<_>>()
    );
    assert!(
        stalls.len() < listed.len(),
        "{} of {} late activations blamed on the hypervisor",
        stalls.len(),
        stalls.len() + listed.len()
    );
    let naming_the_competitor = listed
        .iter()
        .filter(|late| {
            late["culprit"]["kind"] == "thread"
                && late["culprit"]["name"]
                    .as_str()
                    .is_some_and(|name| name.starts_with("qhog"))
        })
        .count();
    let others: Vec<String> = listed
        .iter()
        .filter(|late| {
            !late["culprit"]["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("qhog"))
        })
        .take(5)
        .map(|late| late["explanation"].to_string())
        .collect();
    assert!(
        naming_the_competitor * 100 >= listed.len() * 95,
        "{naming_the_competitor} of {} late activations name qhog; others: {others:?}",
        listed.len()
    );
    // Every segment says who, where the trace knows: the competitor's waits name it as an
    // object with its policy and priority.
    for late in &listed {
        for step in late["critical_path"].as_array().unwrap() {
            assert!(
                step.get("by").is_some() && step["culprits"].is_array(),
                "{step}"
            );
            if step["kind"] == "cpu" && step["ns"].as_u64().unwrap() > 1_000_000 {
                assert!(
                    step["by"].is_object(),
                    "a 1 ms wait without a culprit: {late}"
                );
            }
        }
    }
}

fn late_activations_match_jack_through(recorder: &str, rule: Rule) {
    let sandbox = Sandbox::new();
    let trace = sandbox.file("jack.rtlt");
    let (client, bursts) = with_jack_under_the_competitor(|pid| {
        let pid = pid.to_string();
        let mut arguments = vec![
            "trace",
            "record",
            "--recorder",
            recorder,
            "--pid",
            &pid,
            "-D",
            "10s",
            "-o",
            trace.to_str().unwrap(),
        ];
        // JACK's engine's cycle start, and the client's process callback's return (the client
        // finishes one cycle's work and goes on with the next without blocking after a burst).
        let work_done = format!("{}:process", common::jack::binaries().client.display());
        if rule == Rule::CycleMarker {
            arguments.extend(["--cycle-marker", "jack", "--work-done-marker", &work_done]);
        }
        let output = sandbox.run_expecting(0, arguments);
        if rule == Rule::CycleMarker {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains("cycle markers at _ZN4Jack10JackEngine11ProcessNextEm"),
                "{stderr}"
            );
            assert!(
                stderr.contains("work-done markers at the return of process"),
                "{stderr}"
            );
        }
    });
    let analysis = analyze_json(&sandbox, &trace);
    assert_matches_jack(&analysis, &client, &bursts, rule);
    // The recorder read the competitor's policy: named as a person would.
    let text = sandbox.run_expecting(0, ["trace", "analyze", trace.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("(SCHED_FIFO 95) ran"), "{text}");
    let judged_by = match rule {
        Rule::CycleMarker => "Deadlines judged by the program's own cycle starts",
        Rule::Inferred => "Deadlines judged by periods inferred",
    };
    assert!(text.contains(judged_by), "{text}");
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO) and BPF"]
fn bpf_late_activations_by_jacks_cycle_markers_match_its_xruns_within_20_percent() {
    late_activations_match_jack_through("bpf", Rule::CycleMarker);
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO) and tracefs"]
fn tracefs_late_activations_by_jacks_cycle_markers_match_its_xruns_within_20_percent() {
    late_activations_match_jack_through("tracefs", Rule::CycleMarker);
}

/// The probe is global (`uprobe_events`): after a SIGKILL mid-recording it is left behind, and
/// the next rtlab that starts a tracefs recorder removes it (by the dead pid in its group).
#[test]
#[ignore = "needs root: tracefs and uprobe_events"]
fn a_killed_cycle_marker_recording_leaves_no_probe_after_the_next_start() {
    common::require_root_and_tracefs();
    let sandbox = Sandbox::new();
    let mut target = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let mut recording = common::KillOnDrop(
        sandbox
            .command()
            .args([
                "trace",
                "record",
                "--cycle-marker",
                "jack",
                "--recorder",
                "tracefs",
            ])
            .args(["--pid", &pid, "-D", "60s", "-o"])
            .arg(sandbox.file("killed.rtlt"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let group = format!("rtlab_{}/cycle", recording.id());
    let probes = || std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap();
    assert!(
        common::wait::eventually(Duration::from_secs(30), || probes().contains(&group)),
        "the recording never added its probe {group}: {}",
        probes()
    );
    recording.kill().unwrap();
    recording.wait().unwrap();
    assert!(probes().contains(&group), "SIGKILL cannot have removed it");
    // The next start (any tracefs recording) sweeps it.
    let output = sandbox.run_expecting(
        0,
        [
            "trace",
            "record",
            "--recorder",
            "tracefs",
            "--pid",
            &pid,
            "-D",
            "1s",
            "-o",
            sandbox.file("next.rtlt").to_str().unwrap(),
        ],
    );
    let _ = target.kill();
    let _ = target.wait();
    let left = probes();
    assert!(!left.contains(&group), "left behind: {left}");
    assert!(
        !left.lines().any(|line| line.contains("rtlab_")
            && !line.contains(&format!("rtlab_{}/", std::process::id()))),
        "an rtlab probe is left: {left}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&group), "the sweep is reported: {stderr}");
}

/// A SPEC that cannot be probed is an input error naming it, before anything is set up (with
/// either recorder).
#[test]
fn bad_cycle_markers_are_input_errors_naming_them() {
    let sandbox = Sandbox::new();
    let record = |spec: &str, recorder: &str| {
        sandbox.run([
            "trace",
            "record",
            "--pid",
            "1",
            "--recorder",
            recorder,
            "--cycle-marker",
            spec,
            "-o",
            sandbox.file("never.rtlt").to_str().unwrap(),
        ])
    };
    common::assert_input_error(
        &record("/no/such/library.so:main", "auto"),
        "/no/such/library.so",
    );
    let exe = env!("CARGO_BIN_EXE_rtlab");
    common::assert_input_error(
        &record(&format!("{exe}:no_such_function_here"), "auto"),
        "no function symbol \"no_such_function_here\"",
    );
    common::assert_input_error(&record("jack-without-a-symbol", "bpf"), "PATH:SYMBOL");
    let output = sandbox.run([
        "trace",
        "record",
        "--pid",
        "1",
        "--cycle-marker",
        "jack",
        "--work-done-marker",
        &format!("{exe}:no_such_callback"),
        "-o",
        sandbox.file("never.rtlt").to_str().unwrap(),
    ]);
    common::assert_input_error(&output, "--work-done-marker: marker:");
    // `trace watch` and `reserve --auto` take the same flag, checked the same way.
    let watch = sandbox.run([
        "trace",
        "watch",
        "--pid",
        "1",
        "--cycle-marker",
        "/no/such.so:f",
    ]);
    common::assert_input_error(&watch, "/no/such.so");
    let reserve = sandbox.run([
        "reserve",
        "--auto",
        "--pid",
        "1",
        "--dry-run",
        "--cycle-marker",
        "/no/such.so:f",
    ]);
    common::assert_input_error(&reserve, "/no/such.so");
    assert!(!sandbox.file("never.rtlt").exists());
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO) and tracefs"]
fn a_trace_cmd_trace_dat_of_jack_names_the_fifo_competitor() {
    let sandbox = Sandbox::new();
    let dat = sandbox.file("jack.dat");
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rtlab-trace/test_data/capture.sh");
    let (client, bursts) = with_jack_under_the_competitor(|_| {
        let status = std::process::Command::new(&capture)
            .arg(&dat)
            .args(["sleep", "6"])
            .env("BUFFER_KB", "65536")
            .env("CLOCK", "mono")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run capture.sh (needs trace-cmd)");
        assert!(status.success());
    });
    let analysis = analyze_json(&sandbox, &dat);
    assert!(
        analysis["source"]["format"]
            .as_str()
            .unwrap()
            .starts_with("trace.dat"),
        "{}",
        analysis["source"]
    );
    assert_matches_jack(&analysis, &client, &bursts, Rule::Inferred);
}

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO)"]
fn the_jack_harness_runs_a_client_against_its_own_server() {
    let _turn = one_at_a_time();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "harness", 10, 2.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let report = client.wait();
    assert_eq!(report.period_ns, 2_666_666);
    assert!(report.callbacks > 100, "{:?}", report.json);
    assert!(report.process_tid > 0);
}
