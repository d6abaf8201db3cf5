//! `rtlab daemon`, `rtlab reserve`, `rtlab release` and `rtlab reservations` against a daemon
//! started on a socket in a temporary directory (never /run/rtlab), its journal there too.
//! Tests that reserve for real threads need root (SCHED_DEADLINE, SCHED_FIFO, setpriv) and are
//! `#[ignore = "needs root"]`; they fail, not pass, without it.

mod common;

use common::daemon::Daemon;
use common::{assert_exit_code, assert_input_error, stderr_text, stdout_json, stdout_text};
use common::{require_root_taking_turns as require_root, wait_until, KillOnDrop, Sandbox};
use rtlab_core::Nanos;
use rtlab_sys::sched::{thread_policy, Policy};
use rtlab_testkit::c_example;

use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// A daemon whose reservations are released 200 ms after their thread goes.
fn start_daemon(sandbox: &Sandbox) -> Daemon {
    Daemon::start(sandbox, "hysteresis = \"200ms\"\n")
}

/// A sandbox every user may enter, so that nobody reaches the daemon's socket in it.
fn sandbox_open_to_all() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::set_permissions(
        sandbox.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    sandbox
}

/// A process that sleeps until killed, its only thread's id being its pid.
fn sleeper() -> KillOnDrop {
    common::start_at_the_default_priority();
    KillOnDrop(
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A process of nobody's that sleeps until killed, its only thread's id being its pid; returned
/// once it runs as nobody (`setpriv` has exec'd `sleep`).
fn nobody_sleeper() -> KillOnDrop {
    common::start_at_the_default_priority();
    let sleeper = KillOnDrop(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let tid = sleeper.id();
    wait_until(LIMIT, "the sleeper runs as nobody", || {
        std::fs::read_to_string(format!("/proc/{tid}/comm")).is_ok_and(|comm| comm == "sleep\n")
    });
    sleeper
}

/// A request the daemon refused: exit 1, each of `words` in what it said, and `target` still
/// an ordinary thread (SCHED_OTHER, nice 0).
fn assert_refused_leaving_untouched(output: &std::process::Output, words: &[&str], target: u32) {
    assert_exit_code(output, 1);
    let stderr = stderr_text(output);
    for word in words {
        assert!(stderr.contains(word), "{word:?} not in: {stderr}");
    }
    assert_eq!(thread_policy(target).unwrap(), Policy::Other { nice: 0 });
}

fn is_raised(policy: Policy) -> bool {
    policy.is_realtime() || matches!(policy, Policy::Other { nice } if nice < 0)
}

#[test]
fn without_a_daemon_every_client_command_says_how_to_start_one() {
    let sandbox = Sandbox::new();
    let socket = sandbox.file("none.sock");
    for args in [
        vec!["reserve", "2ms/10ms", "--tid", "1"],
        vec!["release", "--all-mine"],
        vec!["reservations"],
    ] {
        let output = sandbox
            .command()
            .args(&args)
            .arg("--socket")
            .arg(&socket)
            .output()
            .unwrap();
        assert_exit_code(&output, 3);
        let stderr = stderr_text(&output);
        assert!(stderr.contains("cannot reach the rtlab daemon"), "{stderr}");
        assert!(stderr.contains("rtlab daemon"), "{stderr}");
        assert!(stderr.contains(&socket.display().to_string()), "{stderr}");
    }
    // RTLAB_SOCKET is honoured as well as --socket.
    let output = sandbox
        .command()
        .env("RTLAB_SOCKET", &socket)
        .arg("reservations")
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    assert!(stderr_text(&output).contains(&socket.display().to_string()));
}

#[test]
fn malformed_rates_and_missing_targets_are_input_errors() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(["reserve", "2ms", "--tid", "1"]);
    assert_input_error(&output, "is not AMOUNT/PERIOD");
    let output = sandbox.run(["reserve", "20ms/10ms", "--tid", "1"]);
    assert_input_error(&output, "exceeds the period");
    let output = sandbox.run(["reserve", "2ms/10ms"]);
    assert_exit_code(&output, 2);
    let output = sandbox.run(["reserve", "2ms/10ms", "--tid", "1", "--pid", "1"]);
    assert_exit_code(&output, 2);
    let output = sandbox.run(["reserve", "2ms/10ms", "--tid", "1", "--all-threads"]);
    assert_input_error(&output, "--all-threads goes with --pid");
    let output = sandbox.run(["release"]);
    assert_exit_code(&output, 2);
}

#[test]
fn a_bad_config_file_is_an_input_error_naming_its_line() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("rtlabd.toml", "user_limit = 0.1\nhysteresis = \"soon\"\n");
    let output = sandbox
        .command()
        .args(["daemon", "--socket"])
        .arg(sandbox.file("s.sock"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_input_error(&output, "line 2: hysteresis");
    let output = sandbox.run(["daemon", "--config", "/nonexistent/rtlabd.toml"]);
    assert_input_error(&output, "/nonexistent/rtlabd.toml");
}

#[test]
fn an_empty_daemon_lists_nothing_and_has_nothing_to_release() {
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let output = daemon.rtlab(&sandbox, &["reservations"]);
    assert_exit_code(&output, 0);
    assert!(stdout_text(&output).contains("no reservations"));
    let output = daemon.rtlab(&sandbox, &["reservations", "--json", "-"]);
    assert_exit_code(&output, 0);
    let json = stdout_json(&output);
    assert_eq!(json["schema"], "rtlab.reservations/1");
    assert_eq!(json["reservations"].as_array().unwrap().len(), 0);
    let cpus = json["cpus"].as_array().unwrap();
    assert_eq!(
        cpus.len(),
        rtlab_sys::cpu::online_cpus().unwrap().iter().max().unwrap() + 1
    );
    assert_eq!(cpus[0]["reserved_fraction"], 0.0);
    let output = daemon.rtlab(&sandbox, &["release", "--all-mine"]);
    assert_exit_code(&output, 0);
    assert!(stdout_text(&output).contains("nothing to release"));
    let output = daemon.rtlab(&sandbox, &["release", "--tid", "1"]);
    assert_input_error(&output, "thread 1 holds no reservation");
    let output = daemon.rtlab(&sandbox, &["reserve", "1ms/10ms", "--tid", "2147483647"]);
    assert_input_error(&output, "no thread 2147483647");
    let output = daemon.rtlab(&sandbox, &["reserve", "1ms/10ms", "--comm", "no-such-prog"]);
    assert_input_error(&output, "no thread is named 'no-such-prog'");
}

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start_and_sigterm_stops_cleanly() {
    let sandbox = Sandbox::new();
    let mut daemon = start_daemon(&sandbox);
    let output = sandbox
        .command()
        .args(["daemon", "--socket"])
        .arg(&daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    assert!(stderr_text(&output).contains("already listening"));
    rtlab_sys::signals::send(daemon.process.id(), rtlab_sys::signals::SIGTERM).unwrap();
    let status = daemon.process.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
    assert!(!daemon.socket.exists(), "the socket file is removed");
    assert!(daemon.log_text().contains("stopped"));
}

#[test]
fn a_symlink_at_the_socket_path_stops_the_daemon_before_it_touches_anything() {
    let sandbox = Sandbox::new();
    let victim = sandbox.write("victim", "keep me\n");
    std::fs::set_permissions(&victim, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let socket = sandbox.file("rtlabd.sock");
    std::os::unix::fs::symlink(&victim, &socket).unwrap();
    let output = sandbox
        .command()
        .args(["daemon", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    let stderr = stderr_text(&output);
    assert!(
        stderr.contains("is a symbolic link; refusing to remove or follow it"),
        "{stderr}"
    );
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_symlink());
    let victim_mode = std::fs::metadata(&victim).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&victim_mode.permissions()) & 0o777,
        0o600
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
}

// ---- as root, with the real enforcer

#[test]
#[ignore = "needs root"]
fn reserve_list_and_release_a_thread_of_another_program() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let tid = target.id();
    let tid_text = tid.to_string();
    let grant_file = sandbox.file("grant.json");
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "2ms/10ms",
            "--tid",
            &tid_text,
            "--backend",
            "deadline",
            "--json",
            grant_file.to_str().unwrap(),
        ],
    );
    assert_exit_code(&output, 0);
    let text = stdout_text(&output);
    assert!(text.contains("requested  2ms every 10ms"), "{text}");
    assert!(text.contains("backend    deadline"), "{text}");
    let grant: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&grant_file).unwrap()).unwrap();
    assert_eq!(grant["schema"], "rtlab.grant/1");
    assert_eq!(grant["grant"]["backend"], "deadline");
    assert!(matches!(
        thread_policy(tid).unwrap(),
        Policy::Deadline { .. }
    ));

    let rows = daemon.reservation_rows(&sandbox);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["tid"], tid);
    assert_eq!(rows[0]["pid"], tid);
    assert_eq!(rows[0]["comm"], "sleep");
    assert_eq!(rows[0]["owner"], 0);
    assert_eq!(rows[0]["requested"]["amount_ns"], 2_000_000);
    assert_eq!(rows[0]["backend"], "deadline");
    assert!(rows[0]["since"].as_str().unwrap().ends_with('Z'));

    let output = daemon.rtlab(&sandbox, &["release", "--tid", &tid_text]);
    assert_exit_code(&output, 0);
    assert_eq!(thread_policy(tid).unwrap(), Policy::Other { nice: 0 });
    assert!(daemon.reservation_rows(&sandbox).is_empty());
}

/// The line of `text` that starts (after its indent) with `label`.
fn line_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find_map(|line| line.strip_prefix(label))
        .unwrap_or_else(|| panic!("no line {label:?} in:\n{text}"))
        .trim_start()
}

/// What `reserve` and `reservations` say the kernel holds is what `sched_getattr` reads from the
/// thread (deadline), and what the dispatcher's slots give (dispatch) is at least the amount asked
/// in each window of it. Before, neither said what the kernel held: the planner's internal rate
/// (`granted`) stood where a user looked for it.
#[test]
#[ignore = "needs root"]
fn reserve_and_reservations_print_what_the_kernel_holds() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let tid = target.id();
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "1ms/20ms",
            "--tid",
            &tid.to_string(),
            "--backend",
            "deadline",
        ],
    );
    assert_exit_code(&output, 0);
    let text = stdout_text(&output);
    let Policy::Deadline {
        runtime_ns,
        deadline_ns,
        period_ns,
    } = thread_policy(tid).unwrap()
    else {
        panic!("thread {tid} is not SCHED_DEADLINE after the grant:\n{text}");
    };
    let share = runtime_ns as f64 / period_ns as f64 * 100.0;
    let expected = format!(
        "{} every {} ({share:.1} % of a CPU): SCHED_DEADLINE read back with sched_getattr from thread {tid}, deadline {}",
        Nanos(runtime_ns),
        Nanos(period_ns),
        Nanos(deadline_ns)
    );
    assert_eq!(line_after(&text, "holds"), expected, "{text}");
    let rows = daemon.reservation_rows(&sandbox);
    let held = &rows[0]["kernel_held"];
    assert_eq!(held["read_from"], "sched_getattr", "{held}");
    assert_eq!(held["runtime_ns"], runtime_ns);
    assert_eq!(held["window_ns"], period_ns);
    assert_eq!(held["deadline_ns"], deadline_ns);
    assert_eq!(held["tid"], tid);
    let table = stdout_text(&daemon.rtlab(&sandbox, &["reservations"]));
    let cell = format!("{}/{} {share:.1} %", Nanos(runtime_ns), Nanos(period_ns));
    let row = table
        .lines()
        .find(|line| line.contains(&format!(" {tid} ")))
        .unwrap_or_else(|| panic!("no row for {tid}:\n{table}"));
    assert!(table.contains("KERNEL HOLDS"), "{table}");
    assert!(row.contains("1ms/20ms 5.0 %"), "{row}");
    assert!(row.contains(&cell), "{cell} not in {row}");
    assert_exit_code(
        &daemon.rtlab(&sandbox, &["release", "--tid", &tid.to_string()]),
        0,
    );

    // The dispatcher: its slot table gives at least the amount in every window of the grant.
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "1ms/20ms",
            "--tid",
            &tid.to_string(),
            "--backend",
            "dispatch",
            "--json",
            "-",
        ],
    );
    assert_exit_code(&output, 0);
    let grant = stdout_json(&output);
    let held = &grant["grant"]["kernel_held"];
    assert_eq!(held["read_from"], "dispatcher", "{grant}");
    let window = held["window_ns"].as_u64().unwrap();
    let runtime = held["runtime_ns"].as_u64().unwrap();
    assert_eq!(window, grant["grant"]["granted"]["period_ns"], "{grant}");
    // At least the share asked: 1 ms of 20 ms, in windows of the granted period.
    assert!(
        runtime as f64 / window as f64 >= 0.05,
        "the dispatcher gives {runtime} ns of every {window} ns: {grant}"
    );
    assert!(held["slots_per_window"].as_u64().unwrap() >= 1, "{grant}");
}

/// A thread reserved twice (issue 37). The same user asking the same budget again is told the
/// thread is already reserved — what the kernel holds for it (sched_getattr of the thread), by
/// which reservation — and it exits 0, the JSON being that reservation with `already_held`;
/// another budget, or a reservation of another user's, is a refusal (exit 1) that says the same
/// and what to do. Before, the second request failed with "denied (already_reserved): thread N
/// already holds a reservation (grant K)", exit 1, whoever held it and whatever was asked: this
/// test failed at its second request.
#[test]
#[ignore = "needs root"]
fn reserving_a_thread_twice_says_it_is_already_reserved_and_by_what() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let tid = target.id();
    let tid_text = tid.to_string();
    let reserve = |rate: &str, json: bool| {
        let mut args = vec!["reserve", rate, "--tid", &tid_text, "--backend", "deadline"];
        if json {
            args.extend(["--json", "-"]);
        }
        daemon.rtlab(&sandbox, &args)
    };
    let first = reserve("1ms/20ms", true);
    assert_exit_code(&first, 0);
    let grant_id = stdout_json(&first)["grant"]["grant_id"].as_u64().unwrap();
    let Policy::Deadline {
        runtime_ns,
        period_ns,
        ..
    } = thread_policy(tid).unwrap()
    else {
        panic!("thread {tid} is not SCHED_DEADLINE after the grant");
    };
    let holds = format!(
        "{} of every {} ({:.1} % of a CPU)",
        Nanos(runtime_ns),
        Nanos(period_ns),
        runtime_ns as f64 / period_ns as f64 * 100.0
    );

    // The same budget again: met.
    let again = reserve("1ms/20ms", false);
    assert_exit_code(&again, 0);
    assert_eq!(
        stdout_text(&again).trim_end(),
        format!(
            "sleep (tid {tid}) is already reserved: {holds}, by reservation #{grant_id}; this asked 1ms of every 20ms (5.0 % of a CPU): left as it is"
        )
    );
    let again = reserve("1ms/20ms", true);
    assert_exit_code(&again, 0);
    let document = stdout_json(&again);
    assert_eq!(document["already_held"], true, "{document}");
    assert_eq!(document["grant"]["grant_id"], grant_id, "{document}");
    assert_eq!(document["grant"]["kernel_held"]["runtime_ns"], runtime_ns);
    assert_eq!(document["grant"]["kernel_held"]["window_ns"], period_ns);
    // `reservations --json` has the asked rate beside the kernel's, one row, unchanged.
    let rows = daemon.reservation_rows(&sandbox);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["requested"]["amount_ns"], 1_000_000);
    assert_eq!(rows[0]["requested"]["period_ns"], 20_000_000);
    assert_eq!(rows[0]["kernel_held"]["runtime_ns"], runtime_ns);
    assert_eq!(rows[0]["kernel_held"]["window_ns"], period_ns);
    assert_eq!(rows[0]["kernel_held"]["tid"], tid);

    // Another budget: refused, saying what is held and how to change it.
    let other = reserve("2ms/20ms", false);
    assert_exit_code(&other, 1);
    let said = stderr_text(&other);
    assert!(
        said.contains(&format!(
            "denied (already_reserved): sleep (tid {tid}) is already reserved: {holds}, by reservation #{grant_id}, asked as 1ms of every 20ms (5.0 % of a CPU)"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("`rtlab release --tid {tid}` first")),
        "{said}"
    );
    assert_eq!(
        thread_policy(tid).unwrap(),
        Policy::Deadline {
            runtime_ns,
            deadline_ns: period_ns,
            period_ns
        },
        "the reservation held is unchanged"
    );
    assert_exit_code(&daemon.rtlab(&sandbox, &["release", "--tid", &tid_text]), 0);

    // Another user's reservation: root asking the same budget is refused, naming the owner.
    let nobody_s = nobody_sleeper();
    let nobody_tid = nobody_s.id().to_string();
    let rate_and_target = [
        "reserve",
        "2ms/100ms",
        "--tid",
        &nobody_tid,
        "--backend",
        "deadline",
    ];
    assert_exit_code(&daemon.rtlab_as_nobody(&rate_and_target), 0);
    let by_root = daemon.rtlab(&sandbox, &rate_and_target);
    assert_exit_code(&by_root, 1);
    let said = stderr_text(&by_root);
    assert!(
        said.contains(&format!(
            "sleep (tid {nobody_tid}) is already reserved by another user (uid {}), by reservation #",
            std::os::unix::fs::MetadataExt::uid(
                &std::fs::metadata(format!("/proc/{nobody_tid}")).unwrap()
            )
        )),
        "{said}"
    );
}

#[test]
#[ignore = "needs root"]
fn an_unprivileged_user_cannot_reserve_for_roots_thread() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let output =
        daemon.rtlab_as_nobody(&["reserve", "1ms/10ms", "--tid", &target.id().to_string()]);
    assert_refused_leaving_untouched(
        &output,
        &[
            "denied (permission)",
            &format!("thread {} is another user's", target.id()),
        ],
        target.id(),
    );
}

#[test]
#[ignore = "needs root"]
fn an_unprivileged_user_sees_roots_reservation_without_its_thread_name() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let tid = target.id().to_string();
    assert_exit_code(
        &daemon.rtlab(&sandbox, &["reserve", "1ms/10ms", "--tid", &tid]),
        0,
    );
    let output = daemon.rtlab_as_nobody(&["reservations", "--json", "-"]);
    assert_exit_code(&output, 0);
    let rows = stdout_json(&output)["reservations"].clone();
    // Nothing that names the process: no pid, tid or thread name (issue 39, privacy).
    assert_eq!(rows[0]["tid"], serde_json::Value::Null, "{rows}");
    assert_eq!(rows[0]["pid"], serde_json::Value::Null, "{rows}");
    assert_eq!(rows[0]["owner"], 0);
    assert_eq!(rows[0]["comm"], "", "{rows}");
    let output = daemon.rtlab_as_nobody(&["reservations"]);
    assert_exit_code(&output, 0);
    let table = stdout_text(&output);
    assert!(
        table.contains("(hidden)") && !table.contains("sleep"),
        "{table}"
    );
    // Root sees the name.
    assert_eq!(daemon.reservation_rows(&sandbox)[0]["comm"], "sleep");
}

#[test]
#[ignore = "needs root"]
fn a_reservation_disappears_when_its_thread_exits() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let mut target = sleeper();
    let output = daemon.rtlab(
        &sandbox,
        &["reserve", "1ms/10ms", "--pid", &target.id().to_string()],
    );
    assert_exit_code(&output, 0);
    target.kill().unwrap();
    target.wait().unwrap();
    wait_until(LIMIT, "the reservation is gone", || {
        daemon.reservation_rows(&sandbox).is_empty()
    });
}

#[test]
#[ignore = "needs root"]
fn comm_finds_the_thread_of_an_unmodified_program() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    // A program named uniquely for this test: its comm is its file name.
    let name = format!("rtlsleep{}", std::process::id() % 100_000);
    let program = sandbox.file(&name);
    std::fs::copy("/bin/sleep", &program).unwrap();
    let target = KillOnDrop(Command::new(&program).arg("600").spawn().unwrap());
    wait_until(LIMIT, "the program runs under its name", || {
        rtlab_sys::proc_thread::thread_comm(target.id()).is_ok_and(|comm| comm == name)
    });
    let output = daemon.rtlab(&sandbox, &["reserve", "1ms/10ms", "--comm", &name]);
    assert_exit_code(&output, 0);
    assert!(stdout_text(&output).contains(&format!("{} ({name}", target.id())));
    let output = daemon.rtlab(&sandbox, &["release", "--all-mine"]);
    assert_exit_code(&output, 0);
    assert_eq!(
        thread_policy(target.id()).unwrap(),
        Policy::Other { nice: 0 }
    );
}

#[test]
#[ignore = "needs root"]
fn a_command_runs_with_its_main_thread_reserved_and_its_exit_code_passes_through() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "1ms/10ms",
            "--backend",
            "deadline",
            "--",
            "sh",
            "-c",
            "chrt -p $$; exit 7",
        ],
    );
    assert_exit_code(&output, 7);
    assert!(
        stdout_text(&output).contains("SCHED_DEADLINE"),
        "{}",
        stdout_text(&output)
    );
    assert!(
        stderr_text(&output).contains("reservation"),
        "the grant goes to stderr"
    );
    wait_until(LIMIT, "the command's reservation is gone", || {
        daemon.reservation_rows(&sandbox).is_empty()
    });
}

#[test]
#[ignore = "needs root"]
fn after_kill_9_a_restarted_daemon_leaves_no_thread_raised() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let cpuset_root = match rtlab_sys::cpuset::find_hierarchy().unwrap() {
        Some(rtlab_sys::cpuset::CpusetHierarchy::V1(root)) => Some(root),
        _ => None,
    };
    let balance = |root: &std::path::Path| {
        rtlab_sys::cpuset::read_value(root, "cpuset.sched_load_balance").unwrap()
    };
    let rtlab_cpusets = |_root: &std::path::Path| rtlab_sched::enforce::placement::rtlab_cpusets();
    let balance_before = cpuset_root.as_deref().map(balance);
    let mut daemon = start_daemon(&sandbox);
    let deadline_target = sleeper();
    let dispatch_target = sleeper();
    for (target, backend) in [
        (&deadline_target, "deadline"),
        (&dispatch_target, "dispatch"),
    ] {
        let output = daemon.rtlab(
            &sandbox,
            &[
                "reserve",
                "1ms/10ms",
                "--tid",
                &target.id().to_string(),
                "--backend",
                backend,
            ],
        );
        assert_exit_code(&output, 0);
    }
    assert!(is_raised(thread_policy(deadline_target.id()).unwrap()));
    // Where a v1 cpuset hierarchy balances two or more CPUs, the deadline thread sits alone in a
    // partition the daemon made.
    let placed = cpuset_root.as_deref().is_some_and(|root| {
        balance_before.as_deref() == Some("1")
            && rtlab_sys::cpu::online_cpus().unwrap().len() >= 2
            && {
                assert_eq!(balance(root), "0");
                assert_eq!(rtlab_cpusets(root).len(), 2, "{:?}", rtlab_cpusets(root));
                true
            }
    });
    daemon.process.kill().unwrap();
    daemon.process.wait().unwrap();
    // The kill left the deadline thread changed; the next start repairs it from the journal.
    let restarted = start_daemon(&sandbox);
    let all_cpus = rtlab_sys::cpu::online_cpus().unwrap();
    for target in [&deadline_target, &dispatch_target] {
        let policy = thread_policy(target.id()).unwrap();
        assert_eq!(policy, Policy::Other { nice: 0 }, "thread {}", target.id());
        assert_eq!(
            rtlab_sys::thread_control::thread_affinity(target.id()).unwrap(),
            all_cpus,
            "thread {}",
            target.id()
        );
    }
    if let Some(root) = &cpuset_root {
        assert!(rtlab_cpusets(root).is_empty(), "{:?}", rtlab_cpusets(root));
        assert_eq!(Some(balance(root)), balance_before);
        if placed {
            assert!(
                restarted
                    .log_text()
                    .contains("removed the cpuset partitions"),
                "{}",
                restarted.log_text()
            );
        }
    }
    assert!(
        restarted.log_text().contains("restored threads"),
        "{}",
        restarted.log_text()
    );
    assert!(restarted.reservation_rows(&sandbox).is_empty());
}

#[test]
#[ignore = "needs root"]
fn the_c_example_runs_against_the_real_daemon() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let binary = c_example::compile_example(sandbox.path());
    let output = Command::new(&binary)
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let stdout = stdout_text(&output);
    assert!(stdout.contains("1000000/10000000 ns granted"), "{stdout}");
    assert!(stdout.contains("released"), "{stdout}");
}

#[test]
fn a_socket_activated_daemon_serves_the_socket_systemd_passed() {
    let sandbox = Sandbox::new();
    let config = sandbox.write(
        "rtlabd.toml",
        format!("state_dir = \"{}\"\n", sandbox.file("state").display()),
    );
    let socket = sandbox.file("activated.sock");
    let log = sandbox.file("daemon.log");
    // systemd's own tool (package systemd) passes the socket as fd 3 with LISTEN_FDS/LISTEN_PID.
    let mut activator = KillOnDrop(
        Command::new("systemd-socket-activate")
            .arg("-l")
            .arg(&socket)
            .arg(env!("CARGO_BIN_EXE_rtlab"))
            .args(["daemon", "--config"])
            .arg(&config)
            .env("RTLAB_HOME", sandbox.path())
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("systemd-socket-activate (Debian package systemd)"),
    );
    wait_until(LIMIT, "the socket exists", || socket.exists());
    let output = sandbox
        .command()
        .arg("reservations")
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    assert!(stdout_text(&output).contains("no reservations"));
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("listening on the socket systemd passed"),
        "{log_text}"
    );
    rtlab_sys::signals::send(activator.id(), rtlab_sys::signals::SIGTERM).unwrap();
    activator.wait().unwrap();
}

#[test]
#[ignore = "needs root"]
fn verify_measures_the_supply_a_busy_reserved_thread_received() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    // A CPU-bound shell that stops on its own after 30 s (killed earlier on drop).
    let target = KillOnDrop(
        Command::new("bash")
            .args([
                "-c",
                "end=$((SECONDS+30)); while [ $SECONDS -lt $end ]; do :; done",
            ])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "2ms/10ms",
            "--tid",
            &target.id().to_string(),
            "--verify",
            "1s",
            "--json",
            "-",
        ],
    );
    assert_exit_code(&output, 0);
    let grant = stdout_json(&output);
    let verify = &grant["verify"];
    assert_eq!(verify["tid"], target.id());
    // Behaviour, not timing: about a second of 10 µs steps was measured, and a thread that
    // never sleeps received CPU in it (the share is the benchmark's to report).
    let windows = verify["windows"].as_u64().unwrap();
    assert!(windows > 50_000, "{verify}");
    assert!(verify["windows_meeting"].as_u64().unwrap() <= windows);
    assert!(verify["total_run_ns"].as_u64().unwrap() > 0, "{verify}");
}

/// Issue 39's first finding: in a user namespace of its own (`unshare -Ur`, which any user may
/// make) every process shows a full CapEff, and the daemon took that for CAP_SYS_NICE. Before
/// the fix nobody's request below was granted and root's sleeper became SCHED_DEADLINE.
#[test]
#[ignore = "needs root"]
fn nobody_in_a_user_namespace_of_its_own_cannot_reserve_for_roots_process() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let pid = target.id().to_string();
    let output = daemon.rtlab_wrapped(
        true,
        &["unshare", "-Ur"],
        &["reserve", "1ms/100ms", "--pid", &pid],
    );
    assert_refused_leaving_untouched(
        &output,
        &["denied (permission)", "is another user's"],
        target.id(),
    );
    // Nor does it escape its limit on its own threads (its uid is still 65534 here).
    assert!(daemon.reservation_rows(&sandbox).is_empty());
}

/// Root confined to a user namespace holds no capability over the machine: the daemon holds it
/// to a user's limit (20 % by default), while root outside is not held (before the fix both
/// were granted).
#[test]
#[ignore = "needs root"]
fn root_confined_to_a_user_namespace_is_held_to_a_users_limit() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = sleeper();
    let tid = target.id().to_string();
    let output = daemon.rtlab_wrapped(
        false,
        &["unshare", "-Ur"],
        &["reserve", "50ms/100ms", "--tid", &tid],
    );
    assert_refused_leaving_untouched(&output, &["would exceed its limit"], target.id());
    let output = daemon.rtlab(&sandbox, &["reserve", "50ms/100ms", "--tid", &tid]);
    assert_exit_code(&output, 0);
    assert!(is_raised(thread_policy(target.id()).unwrap()));
}

/// `tests/support/hostile_client.c` of the daemon crate, compiled into a directory nobody may
/// read.
fn hostile_client(directory: &std::path::Path) -> std::path::PathBuf {
    std::fs::set_permissions(
        directory,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let binary = directory.join("hostile_client");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../rtlab-daemon/tests/support/hostile_client.c");
    c_example::compile(
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&binary)
            .arg(source),
    );
    binary
}

/// Nobody's `constraint-hold` client: its stdout's lines (the answer, `tid T`, `deadline D`)
/// once printed, and the client, which holds its thread until dropped.
fn hold_constraint_as_nobody(
    daemon: &Daemon,
    client: &std::path::Path,
    args: &[&str],
) -> (Vec<String>, KillOnDrop) {
    use std::io::BufRead;
    let mut child = KillOnDrop(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(client)
            .arg("constraint-hold")
            .args(args)
            .env("RTLAB_SOCKET", &daemon.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv (util-linux)"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let lines: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .take(3)
        .map(Result::unwrap)
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    (lines, child)
}

/// Issue 39's second finding: a Time Constraint with its start in the past (`start_ns: 1`) had
/// its density computed over a window reaching back to boot, counted as nothing, and was never
/// ended: 2 s after its deadline the thread still held SCHED_DEADLINE 84 ms / 96 ms, 87 % of a
/// CPU, for a user whose limit is 20 %. Now the start is the request's arrival, the constraint
/// counts until it ends, and it ends at its deadline.
#[test]
#[ignore = "needs root"]
fn nobody_s_time_constraint_counts_from_its_arrival_and_ends_at_its_deadline() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let directory = tempfile::tempdir().unwrap();
    let client = hostile_client(directory.path());
    // The finding's request: 80 ms by 100 ms from now, from a start at 1 ns: 80 % of a CPU from
    // its arrival, over nobody's 20 %.
    let (lines, _held) = hold_constraint_as_nobody(&daemon, &client, &["1", "80", "100"]);
    assert!(lines[0].contains("\"code\":\"limit\""), "{lines:?}");
    let tid: u32 = lines[1].strip_prefix("tid ").unwrap().parse().unwrap();
    assert_eq!(thread_policy(tid).unwrap(), Policy::Other { nice: 0 });
    // Within the limit from its arrival (10 ms by 300 ms), still started at 1 ns: admitted,
    // SCHED_DEADLINE until its deadline, then its own policy again.
    let (lines, _held) = hold_constraint_as_nobody(&daemon, &client, &["1", "10", "300"]);
    assert!(lines[0].contains("\"constraint_id\""), "{lines:?}");
    let tid: u32 = lines[1].strip_prefix("tid ").unwrap().parse().unwrap();
    let deadline_ns: u64 = lines[2].strip_prefix("deadline ").unwrap().parse().unwrap();
    let policy = thread_policy(tid).unwrap();
    if rtlab_sys::clock::monotonic_ns() < deadline_ns {
        assert!(is_raised(policy), "{policy:?} before the deadline");
    }
    wait_until(
        Duration::from_secs(5),
        "the constraint ended at its deadline and the thread has its own policy again",
        || thread_policy(tid).unwrap() == Policy::Other { nice: 0 },
    );
    assert!(rtlab_sys::clock::monotonic_ns() >= deadline_ns);
    // And it no longer counts: 15 % more fits nobody's 20 % at once.
    let (lines, _held) = hold_constraint_as_nobody(&daemon, &client, &["0", "15", "100"]);
    assert!(lines[0].contains("\"constraint_id\""), "{lines:?}");
}

/// CPU time (user + system) of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Out of descriptors (a low RLIMIT_NOFILE, or a user holding many connections) `accept` fails
/// with EMFILE while the client stays queued: the daemon says so once, waits longer each time
/// instead of retrying at once, and serves the queued clients when descriptors are free again.
#[test]
#[ignore = "needs root"]
fn out_of_descriptors_the_daemon_backs_off_and_recovers() {
    let _turn = require_root();
    let sandbox = Sandbox::new();
    let daemon = start_daemon(&sandbox);
    let pid = daemon.process.id();
    let output = Command::new("prlimit")
        .args([&format!("--pid={pid}"), "--nofile=40:40"])
        .output()
        .expect("prlimit (util-linux)");
    assert!(output.status.success(), "{output:?}");
    let held: Vec<std::os::unix::net::UnixStream> = (0..50)
        .map(|_| std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    wait_until(LIMIT, "the daemon says accepting failed", || {
        daemon.log_text().contains("accepting a client failed")
    });
    // Waiting, not spinning: well under half a CPU over 2 s (a spin takes all of one).
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let ticks_per_second = 100; // USER_HZ
    let used = cpu_ticks(pid) - before;
    assert!(
        used < ticks_per_second,
        "the daemon used {used} ticks of CPU in 2 s while out of descriptors"
    );
    drop(held);
    let output = daemon.rtlab(&sandbox, &["reservations", "--json", "-"]);
    assert_exit_code(&output, 0);
    // Said once, not once per try (accepts near the limit succeed and fail by turns).
    let log = daemon.log_text();
    let said = log.matches("accepting a client failed").count();
    assert_eq!(said, 1, "said {said} times: {log}");
}

/// A SCHED_DEADLINE budget is the amount plus a tick of possible overrun: nobody's 1 µs every
/// 10 ms held runtime 4 ms / period 10 ms, 40 % of a CPU, and was counted as 0.01 % against its
/// 20 % (granted before the fix). Now the kernel's share is what counts.
#[test]
#[ignore = "needs root"]
fn nobody_s_tiny_deadline_requests_count_as_the_budget_the_kernel_gives() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = nobody_sleeper();
    let tid = target.id().to_string();
    let output = daemon.rtlab_as_nobody(&[
        "reserve",
        "1us/10ms",
        "--backend",
        "deadline",
        "--tid",
        &tid,
    ]);
    assert_refused_leaving_untouched(&output, &["would exceed its limit"], target.id());
    assert!(daemon.reservation_rows(&sandbox).is_empty());
}

/// Every policy other than SCHED_OTHER the kernel gave thread `tid` while it was watched, read
/// back-to-back (`sched_getattr`, a few µs apart) from a thread of its own until `stop`.
struct PolicyWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reads: std::thread::JoinHandle<(u64, Vec<Policy>)>,
}

impl PolicyWatch {
    fn start(tid: u32) -> PolicyWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reads = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let (mut reads, mut seen) = (0, Vec::new());
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(policy) = thread_policy(tid) {
                        reads += 1;
                        if !matches!(policy, Policy::Other { .. }) && !seen.contains(&policy) {
                            seen.push(policy);
                        }
                    }
                }
                (reads, seen)
            }
        });
        PolicyWatch { stop, reads }
    }

    /// How many times the policy was read, and what other than SCHED_OTHER was seen.
    fn stop(self) -> (u64, Vec<Policy>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.reads.join().unwrap()
    }
}

/// The tick of overrun a SCHED_DEADLINE budget carries on this machine (HRTICK_DL off), or
/// `None` when budgets are enforced finer than that.
fn deadline_overrun_ns() -> Option<u64> {
    match rtlab_sys::thread_control::hrtick_dl_enabled() {
        Ok(Some(true)) => None,
        _ => rtlab_sys::thread_control::tick_ns().ok(),
    }
}

/// Issue 39: a request whose rate fits the user's limit but whose SCHED_DEADLINE budget, its
/// tick of overrun added, does not, was refused only after the kernel had been given it: in CI
/// the hostile harness's checker saw nobody hold 26.3 % of a CPU (16.1 ms of every 61.1 ms,
/// 19.8 % without the overrun) under its 20 %, in the moment before the refusal undid it. Now
/// what the kernel would hold is counted before it is asked: watched back-to-back all along, the
/// thread is never SCHED_DEADLINE, for a reservation (17 ms of every 100 ms) nor for a Time
/// Constraint's one-shot budget (10 ms by 60 ms from now).
#[test]
#[ignore = "needs root"]
fn nobody_s_budget_over_its_limit_only_with_the_overrun_is_never_given_to_the_kernel() {
    let _turn = require_root();
    let Some(overrun_ns) = deadline_overrun_ns().filter(|&ns| ns >= 2_000_000) else {
        panic!("this test needs budgets enforced at the tick (HRTICK_DL off, HZ ≤ 500)");
    };
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = nobody_sleeper();
    let tid = target.id();
    let watch = PolicyWatch::start(tid);
    let output = daemon.rtlab_as_nobody(&[
        "reserve",
        "17ms/100ms",
        "--backend",
        "deadline",
        "--tid",
        &tid.to_string(),
    ]);
    let (reads, seen) = watch.stop();
    assert_refused_leaving_untouched(&output, &["would exceed its limit"], tid);
    assert!(reads > 0 && seen.is_empty(), "{reads} reads saw {seen:?}");
    assert!(daemon.reservation_rows(&sandbox).is_empty());

    // 10 ms by 60 ms from now is 16.7 % of a CPU; its one-shot budget, 10 ms and the overrun of
    // every 60 ms, is over 20 %.
    assert!((10_000_000 + overrun_ns) as f64 / 60e6 > 0.2);
    let directory = tempfile::tempdir().unwrap();
    let client = hostile_client(directory.path());
    let mut child = KillOnDrop(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(&client)
            .args(["constraint-hold", "0", "10", "60"])
            .env("RTLAB_SOCKET", &daemon.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv (util-linux)"),
    );
    // The client's constraint is for its main thread, whose tid is the pid setpriv execs into.
    let watch = PolicyWatch::start(child.id());
    let mut answer = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.0.stdout.take().unwrap()),
        &mut answer,
    )
    .unwrap();
    let (reads, seen) = watch.stop();
    assert!(answer.contains("\"code\":\"limit\""), "{answer}");
    assert!(reads > 0 && seen.is_empty(), "{reads} reads saw {seen:?}");
}

/// The kernel's SCHED_DEADLINE (runtime, period) of `tid`; panics at any other policy.
fn deadline_of(tid: u32) -> (u64, u64) {
    match thread_policy(tid).unwrap() {
        Policy::Deadline {
            runtime_ns,
            period_ns,
            ..
        } => (runtime_ns, period_ns),
        other => panic!("thread {tid} is {other:?}, not SCHED_DEADLINE"),
    }
}

/// Issue 37, item 2: a reservation changes size in place (`reserve --resize`, the `resize`
/// method), with admission. Nobody grows and shrinks its own reservation and `sched_getattr`
/// follows each answer; a growth past its 20 % limit is refused naming the reservation and by
/// how much, and the kernel still holds the old size. Before the change there was no way to
/// change a reservation's size (`--resize` was an unknown flag, exit 2).
#[test]
#[ignore = "needs root"]
fn nobody_resizes_its_reservation_within_its_limit_and_a_refused_growth_keeps_the_old_size() {
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let target = nobody_sleeper();
    let tid = target.id();
    let tid_text = tid.to_string();
    let output = daemon.rtlab_as_nobody(&[
        "reserve",
        "1ms/40ms",
        "--backend",
        "deadline",
        "--tid",
        &tid_text,
        "--json",
        "-",
    ]);
    assert_exit_code(&output, 0);
    let grant = stdout_json(&output);
    let grant_id = grant["grant"]["grant_id"].as_u64().unwrap().to_string();
    let (first_runtime, first_period) = deadline_of(tid);
    assert_eq!(first_period, 40_000_000);

    let resize = |rate: &str| {
        daemon.rtlab_as_nobody(&["reserve", rate, "--resize", &grant_id, "--json", "-"])
    };
    let output = resize("2ms/40ms");
    assert_exit_code(&output, 0);
    let grown = stdout_json(&output);
    assert_eq!(grown["grant"]["grant_id"].to_string(), grant_id);
    assert_eq!(grown["grant"]["requested"]["amount_ns"], 2_000_000);
    let (grown_runtime, grown_period) = deadline_of(tid);
    assert_eq!(grown_runtime, first_runtime + 1_000_000, "{grown}");
    assert_eq!(grown_period, 40_000_000);
    assert_eq!(grown["grant"]["kernel_held"]["runtime_ns"], grown_runtime);

    // 9 ms of every 40 ms is 22.5 % before the tick's overrun: past nobody's 20 % however fine
    // the tick.
    let output = resize("9ms/40ms");
    assert_exit_code(&output, 1);
    let stderr = stderr_text(&output);
    for words in [
        format!("reservation {grant_id}"),
        "short".to_owned(),
        "limit of 20.0 %".to_owned(),
    ] {
        assert!(stderr.contains(&words), "{words:?} not in: {stderr}");
    }
    assert_eq!(deadline_of(tid), (grown_runtime, grown_period));
    let rows = daemon.reservation_rows(&sandbox);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["requested"]["amount_ns"], 2_000_000);

    // Re-mapped to a longer window and shrunk.
    let output = resize("1ms/80ms");
    assert_exit_code(&output, 0);
    let (shrunk_runtime, shrunk_period) = deadline_of(tid);
    assert_eq!(shrunk_period, 80_000_000);
    assert_eq!(shrunk_runtime, first_runtime);
    let rows = daemon.reservation_rows(&sandbox);
    assert_eq!(rows[0]["requested"]["period_ns"], 80_000_000);
    assert_eq!(rows[0]["kernel_held"]["window_ns"], 80_000_000);

    // Another user's reservation is not nobody's to change.
    let root_target = sleeper();
    let output = daemon.rtlab(
        &sandbox,
        &[
            "reserve",
            "1ms/40ms",
            "--backend",
            "deadline",
            "--tid",
            &root_target.id().to_string(),
            "--json",
            "-",
        ],
    );
    assert_exit_code(&output, 0);
    let roots = stdout_json(&output)["grant"]["grant_id"].to_string();
    let before = deadline_of(root_target.id());
    let output = daemon.rtlab_as_nobody(&["reserve", "2ms/40ms", "--resize", &roots]);
    assert_exit_code(&output, 1);
    assert_eq!(deadline_of(root_target.id()), before);
}

/// The daemon's threads named `name`, by their tids (/proc/PID/task/*/comm).
fn daemon_threads_named(pid: u32, name: &str) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .collect()
}

/// Issue 39, root's answer: a daemon run as root also listens on root's own socket, mode 0600,
/// served by a thread at SCHED_FIFO one above RealtimeKit1's highest priority (20 by default),
/// and `rtlab` run as root uses it. Before, root was answered at SCHED_OTHER on the shared
/// socket only, and users' granted threads holding both CPUs kept it waiting up to 459 ms.
/// Nobody cannot connect to it, from a user namespace of its own neither, and a peer of another
/// uid that reaches it anyway (the file's mode loosened) is refused by its credentials.
#[test]
#[ignore = "needs root"]
fn roots_own_socket_is_served_above_realtimekit_and_refuses_everyone_else() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let _turn = require_root();
    let sandbox = sandbox_open_to_all();
    let daemon = start_daemon(&sandbox);
    let root_socket = rtlab_core::rpc::root_socket_path(&daemon.socket);
    let metadata = std::fs::symlink_metadata(&root_socket).unwrap();
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    assert_eq!(metadata.uid(), 0);
    let accept_threads = daemon_threads_named(daemon.process.id(), "rtlabd-root");
    assert_eq!(
        accept_threads.len(),
        1,
        "one accept thread for root's socket"
    );
    assert_eq!(
        thread_policy(accept_threads[0]).unwrap(),
        Policy::Fifo { priority: 21 }
    );
    // Its connection threads are born at that policy: with SCHED_RESET_ON_FORK (as at first)
    // they started at SCHED_OTHER and waited for the fair server before running at all, and
    // root's answer with them (100–430 ms in a hostile run, all between spawn and start).
    assert!(!rtlab_sys::thread_control::resets_on_fork(accept_threads[0]).unwrap());

    // Root's rtlab is answered through it: with the shared socket's name moved away, root still
    // reserves and lists; nobody, on the shared socket's name, cannot reach the daemon.
    let target = sleeper();
    let tid = target.id().to_string();
    let moved = sandbox.file("shared-moved-away.sock");
    std::fs::rename(&daemon.socket, &moved).unwrap();
    let reserved = daemon.rtlab(&sandbox, &["reserve", "1ms/10ms", "--tid", &tid]);
    let as_nobody = daemon.rtlab_as_nobody(&["reservations"]);
    std::fs::rename(&moved, &daemon.socket).unwrap();
    assert_exit_code(&reserved, 0);
    assert!(is_raised(thread_policy(target.id()).unwrap()));
    assert_exit_code(&as_nobody, 3);
    assert_eq!(daemon.reservation_tids(&sandbox), [u64::from(target.id())]);
    // Its connections are served by threads kept for the next one, at root's policy: nothing on
    // root's path starts a thread. Starting one took process-wide locks in the kernel that a
    // starved connection thread of the daemon held: root's accept thread slept in state D for
    // 100 ms (a tracefs capture of rtlab-hostile).
    wait_until(LIMIT, "root's connection thread is kept", || {
        !daemon_threads_named(daemon.process.id(), "rtlabd-rootconn").is_empty()
    });
    for tid in daemon_threads_named(daemon.process.id(), "rtlabd-rootconn") {
        assert_eq!(thread_policy(tid).unwrap(), Policy::Fifo { priority: 21 });
    }

    // Nobody cannot open it, neither as itself nor as "root" of a user namespace of its own.
    let root_socket_text = root_socket.display().to_string();
    let direct = daemon.rtlab_as_nobody(&["reservations", "--socket", &root_socket_text]);
    assert_exit_code(&direct, 3);
    assert!(
        stderr_text(&direct).contains("ermission denied"),
        "{}",
        stderr_text(&direct)
    );
    let namespaced = daemon.rtlab_wrapped(
        true,
        &["unshare", "-Ur"],
        &["release", "--tid", &tid, "--socket", &root_socket_text],
    );
    assert_exit_code(&namespaced, 3);

    // Loosened to 0666, it still serves nobody nothing.
    std::fs::set_permissions(&root_socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let refused =
        daemon.rtlab_as_nobody(&["release", "--tid", &tid, "--socket", &root_socket_text]);
    assert_exit_code(&refused, 1);
    let stderr = stderr_text(&refused);
    assert!(
        stderr.contains("this is root's socket; uid 65534"),
        "{stderr}"
    );
    assert!(is_raised(thread_policy(target.id()).unwrap()));
}
