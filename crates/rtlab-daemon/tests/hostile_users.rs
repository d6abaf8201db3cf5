//! The daemon against an unprivileged local user who means harm: `tests/support/hostile_client.c`
//! compiled with `cc` and run as nobody (`setpriv --reuid nobody --regid nogroup
//! --clear-groups`) against a daemon served in-process (root) with the fake enforcement. They
//! need root (setpriv, and a daemon that can read other users' /proc) and are
//! `#[ignore = "needs root: …"]`; without root they fail, they do not pass.

mod support;

use rtlab_core::rpc::{ErrorCode, Target};
use rtlab_core::Nanos;
use rtlab_testkit::{c_example, require_root_for_turns, KillOnDrop};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::TestDaemon;

/// What the tests need root for; they take turns (the flood test counts the process's connection
/// threads).
const NEEDS_ROOT: &str = "setpriv, other users' /proc";

/// A daemon whose socket nobody can reach (its directory opened to all).
fn daemon_for_everyone(configure: impl FnOnce(&mut rtlab_daemon::DaemonConfig)) -> TestDaemon {
    let daemon = TestDaemon::start(configure);
    std::fs::set_permissions(
        daemon.directory.path(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    daemon
}

/// The hostile client compiled into a directory every user may read.
struct HostileClient {
    binary: PathBuf,
    _directory: tempfile::TempDir,
}

impl HostileClient {
    fn compile() -> HostileClient {
        let directory = tempfile::tempdir().unwrap();
        std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = directory.path().join("hostile_client");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hostile_client.c");
        c_example::compile(
            Command::new("cc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&binary)
                .arg(source),
        );
        HostileClient {
            binary,
            _directory: directory,
        }
    }

    /// The client as nobody, talking to `daemon`.
    fn as_nobody(&self, daemon: &TestDaemon, args: &[&str]) -> Command {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .arg(&self.binary)
            .args(args)
            .env("RTLAB_SOCKET", &daemon.socket);
        command
    }

    /// Runs to the end; its stdout.
    fn run_as_nobody(&self, daemon: &TestDaemon, args: &[&str]) -> String {
        let output = self
            .as_nobody(daemon, args)
            .stdin(Stdio::null())
            .output()
            .expect("setpriv (util-linux)");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "hostile client failed: {}\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

#[test]
#[ignore = "needs root: runs a client as nobody (setpriv)"]
fn nobody_cannot_exceed_its_limit_with_time_constraints() {
    let _turn = require_root_for_turns(NEEDS_ROOT);
    let daemon = daemon_for_everyone(|config| config.user_limit = 0.2);
    let client = HostileClient::compile();
    // The issue's attack: 29 back-to-back constraints of 60 ms in 100 ms (60 % of a CPU each),
    // against a limit of 20 %. All 29 were admitted before.
    let stdout = client.run_as_nobody(&daemon, &["constraints", "29", "60", "100"]);
    assert!(stdout.contains("admitted 0 of 29"), "{stdout}");
    let refusals = stdout
        .lines()
        .filter(|line| line.contains("\"code\":\"limit\""))
        .count();
    assert_eq!(refusals, 29, "{stdout}");
    // 60 % counted from each request's arrival: a little more on a busy machine (the client's
    // "now" is earlier than the daemon's).
    assert!(
        stdout.contains("uid 65534 holds 0.0 % of a CPU (reservations and Time Constraints); 6")
            && stdout.contains(" % more would exceed its limit of 20.0 %"),
        "{stdout}"
    );
    // Within the limit it is served: 15 ms in 100 ms, one at a time.
    let stdout = client.run_as_nobody(&daemon, &["constraints", "5", "15", "100"]);
    assert!(stdout.contains("admitted 5 of 5"), "{stdout}");
}

#[test]
#[ignore = "needs root: runs a client as nobody (setpriv)"]
fn nobody_flooding_requests_is_rate_limited_and_others_are_not() {
    let _turn = require_root_for_turns(NEEDS_ROOT);
    let daemon = daemon_for_everyone(|config| {
        config.requests_per_burst = 50;
        config.burst_interval = Duration::from_secs(600);
    });
    let client = HostileClient::compile();
    let stdout = client.run_as_nobody(&daemon, &["requests", "200"]);
    assert!(stdout.contains("ok 50 rate_limited 150"), "{stdout}");
    assert!(
        stdout.contains("uid 65534 sent 50 requests within 10m, its budget (requests_per_burst and burst_interval")
            && stdout.contains("try again in"),
        "{stdout}"
    );
    // Root (privileged) has no budget, and is served while nobody is refused.
    let mut root = daemon.client();
    for _ in 0..200 {
        root.ping().unwrap();
    }
    let stdout = client.run_as_nobody(&daemon, &["requests", "1"]);
    assert!(stdout.contains("ok 0 rate_limited 1"), "{stdout}");
}

#[test]
#[ignore = "needs root: runs a client as nobody (setpriv)"]
fn nobody_lists_other_users_grants_without_their_names() {
    let _turn = require_root_for_turns(NEEDS_ROOT);
    let daemon = daemon_for_everyone(|_| {});
    let (tid_sender, tid_receiver) = std::sync::mpsc::channel();
    let (exit, exit_receiver) = std::sync::mpsc::channel::<()>();
    let secret = std::thread::Builder::new()
        .name("secret-worker".into())
        .spawn(move || {
            tid_sender.send(rtlab_client::current_thread_id()).unwrap();
            let _ = exit_receiver.recv();
        })
        .unwrap();
    let tid = tid_receiver.recv().unwrap();
    let mut root = daemon.client();
    let grant = root
        .reserve(
            Target::Comm {
                name: "secret-worker".into(),
            },
            Nanos::from_millis(1),
            Nanos::from_millis(10),
            None,
        )
        .unwrap();
    let client = HostileClient::compile();
    let stdout = client.run_as_nobody(&daemon, &["list"]);
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let seen = &answer["result"]["grants"][0];
    assert_eq!(seen["grant_id"], grant.grant_id, "{stdout}");
    assert_eq!(seen["owner_uid"], 0);
    // Nothing that names the process (issue 39: pid, tid and owner were shown before).
    assert_eq!(seen["threads"][0]["tid"], 0, "{stdout}");
    assert_eq!(seen["threads"][0]["pid"], 0, "{stdout}");
    assert_eq!(seen["threads"][0]["comm"], "", "{stdout}");
    assert_eq!(seen["owner"], "", "{stdout}");
    assert!(!stdout.contains("secret-worker"), "{stdout}");
    assert!(!stdout.contains(&format!(":{tid}")), "{stdout}");
    // Root sees the name.
    let listed = root.list().unwrap();
    assert_eq!(listed.grants[0].threads[0].comm, "secret-worker");
    drop(exit);
    secret.join().unwrap();
}

/// Makes the next process spawned get `pid` (root: /proc/sys/kernel/ns_last_pid), retrying while
/// other processes of the machine take it first; the process, a `sleep` running as root.
fn spawn_root_process_with_pid(pid: u32) -> KillOnDrop {
    for _ in 0..500 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let child = KillOnDrop(
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        if child.0.id() == pid {
            return child;
        }
    }
    panic!("pid {pid} could not be had again in 500 tries (a busy machine took it each time)");
}

#[test]
#[ignore = "needs root: runs a client as nobody and reuses its pid (ns_last_pid)"]
fn a_peer_that_exits_is_refused_even_when_a_root_process_has_its_pid() {
    let _turn = require_root_for_turns(NEEDS_ROOT);
    let daemon = daemon_for_everyone(|_| {});
    let client = HostileClient::compile();
    // Reserving for pid 1 (root's) needs privilege.
    let request = r#"{"rpc":"rtlab.rpc/1","id":9,"method":"reserve","params":{"tid":1,"amount_ns":1000000,"period_ns":10000000}}"#;
    let mut peer = client
        .as_nobody(&daemon, &["connect-then-exit", request])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux)");
    let mut go = peer.stdin.take().unwrap();
    let mut stdout = BufReader::new(peer.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid: u32 = line
        .trim()
        .strip_prefix("peer ")
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("expected the peer's pid: {line}"));
    assert_eq!(pid, peer.id(), "setpriv ran the client in its own process");
    // The peer exits and is reaped; its socket lives on in its child. A root process takes the
    // pid: /proc/PID/status now shows root with every capability.
    assert!(peer.wait().unwrap().success());
    let _impostor = spawn_root_process_with_pid(pid);
    let status = rtlab_sys::proc_thread::thread_status(pid).unwrap();
    assert_eq!(status.real_uid(), 0);
    go.write_all(b"go\n").unwrap();
    let mut rest = String::new();
    for line in stdout.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    // Refused when it asked (its id), after its pid was taken: the pidfd decided, not the pid.
    assert!(
        rest.contains(&format!(
            "the process that opened this connection (pid {pid}) has exited"
        )) && rest.contains("\"id\":9,\"error\":{\"code\":\"permission\""),
        "{rest}"
    );
    assert!(rest.contains("closed after: yes"), "{rest}");
    assert!(
        daemon.log.lock().unwrap().managed.is_empty(),
        "nothing was reserved for pid 1"
    );
}

fn connection_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "rtlabd-conn")
        .count()
}

#[test]
#[ignore = "needs root: runs a client as nobody (setpriv)"]
fn a_flood_of_connections_from_nobody_is_bounded_and_others_are_served() {
    let _turn = require_root_for_turns(NEEDS_ROOT);
    let daemon = daemon_for_everyone(|_| {});
    let client = HostileClient::compile();
    let mut flood = KillOnDrop(
        client
            .as_nobody(&daemon, &["hold", "500"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv (util-linux)"),
    );
    let mut line = String::new();
    BufReader::new(flood.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // 500 open, 64 (max_connections_per_user) admitted: the other 436 got `busy` at once.
    assert_eq!(line.trim(), "open 500 busy 436", "{line}");
    assert!(
        connection_threads() <= 64,
        "{} connection threads",
        connection_threads()
    );
    // While nobody holds its 64, root is served.
    let mut root = daemon.client();
    for _ in 0..20 {
        root.ping().unwrap();
    }
    let error = root
        .release(rtlab_core::rpc::ReleaseTarget::Grant { grant_id: 77 })
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NotFound));
    drop(flood.0.stdin.take());
    let _ = flood.0.wait();
    // Its slots are free again (its threads are kept for the next connections, not ended):
    // nobody is admitted its 64 once more.
    rtlab_testkit::wait_until(Duration::from_secs(20), "nobody's slots are free", || {
        let output = client
            .as_nobody(&daemon, &["hold", "64"])
            .stdin(Stdio::null())
            .output()
            .expect("setpriv (util-linux)");
        String::from_utf8_lossy(&output.stdout).trim() == "open 64 busy 0"
    });
}
