//! `rtlab daemon --rtkit` against real parts: a private `dbus-daemon` with a system-bus
//! configuration (its own file and socket in a temporary directory, the packaged policy file
//! `packaging/dbus/org.freedesktop.RealtimeKit1.conf` included), systemd's `busctl` and dbus's
//! `dbus-send` calling as the unprivileged user `nobody` (setpriv) for threads of `nobody`
//! processes started with `prlimit --rttime`. `dbus-send` is used where the D-Bus error *name*
//! matters (busctl prints only the message). The tests need root (the daemon changes other users'
//! threads, setpriv) and are `#[ignore = "needs root"]`; they fail, not pass, without it.

mod common;

use common::{assert_exit_code, stdout_json, KillOnDrop, Sandbox};
use rtlab_sys::sched::{thread_policy, Policy};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);
const NOBODY: [&str; 5] = ["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"];
const DESTINATION: &str = "org.freedesktop.RealtimeKit1";
const PATH: &str = "/org/freedesktop/RealtimeKit1";

/// One test at a time: each owns the canary's CPUs and real-time threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn require_root() -> std::sync::MutexGuard<'static, ()> {
    assert!(
        rtlab_sys::proc_thread::current_uid() == 0,
        "this test needs root: run it as root (CI does, with --include-ignored)"
    );
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A private bus with the system bus's policy and rtlab's RealtimeKit1 policy file.
struct Bus {
    _process: KillOnDrop,
    address: String,
}

impl Bus {
    fn start(sandbox: &Sandbox) -> Bus {
        // nobody must reach the socket inside the sandbox.
        std::fs::set_permissions(sandbox.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../packaging/dbus/org.freedesktop.RealtimeKit1.conf")
            .canonicalize()
            .expect("the packaged policy file");
        let (process, address) = common::dbus::dbus_daemon_with(sandbox.path(), &policy, None)
            .unwrap_or_else(|error| panic!("dbus-daemon refused the test bus: {error}"));
        Bus {
            _process: process,
            address,
        }
    }

    /// busctl as nobody: `busctl --address=… -- ARGS…`.
    fn busctl(&self, args: &[&str]) -> Output {
        Command::new("setpriv")
            .args(NOBODY)
            .args(["busctl", &format!("--address={}", self.address), "--"])
            .args(args)
            .output()
            .expect("run busctl (package systemd)")
    }

    /// busctl as nobody calling a RealtimeKit1 method.
    fn call(&self, method: &str, signature: &str, args: &[String]) -> Output {
        let mut all = vec!["call", DESTINATION, PATH, DESTINATION, method, signature];
        all.extend(args.iter().map(String::as_str));
        self.busctl(&all)
    }

    /// dbus-send as nobody; returns the D-Bus error line ("Error NAME: message"), or "" when the
    /// call succeeded.
    fn error_of(&self, method: &str, args: &[String]) -> String {
        let output = Command::new("setpriv")
            .args(NOBODY)
            .args([
                "dbus-send",
                &format!("--bus={}", self.address),
                "--print-reply",
                &format!("--dest={DESTINATION}"),
                PATH,
                &format!("{DESTINATION}.{method}"),
            ])
            .args(args)
            .output()
            .expect("run dbus-send (package dbus-bin)");
        if output.status.success() {
            String::new()
        } else {
            text(&output.stderr).trim().to_owned()
        }
    }
}

/// `rtlab daemon --rtkit` on the private bus, its state in the sandbox.
struct Daemon {
    process: KillOnDrop,
    log: PathBuf,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Daemon {
    fn spawn(sandbox: &Sandbox, bus: &Bus, rtkit_table: &str, args: &[&str], name: &str) -> Daemon {
        let config = sandbox.write(
            &format!("{name}.toml"),
            format!(
                "state_dir = \"{}\"\nhysteresis = \"0s\"\n[rtkit]\n{rtkit_table}",
                sandbox.file(&format!("{name}-state")).display()
            ),
        );
        let socket = sandbox.file(&format!("{name}.sock"));
        let log = sandbox.file(&format!("{name}.log"));
        let process = sandbox
            .command()
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start rtlab daemon");
        Daemon {
            process: KillOnDrop(process),
            log,
            socket,
        }
    }

    /// Starts a daemon and waits until it owns the name (`--rtkit`) or listens (without).
    fn start(sandbox: &Sandbox, bus: &Bus, rtkit_table: &str, args: &[&str]) -> Daemon {
        let mut daemon = Daemon::spawn(sandbox, bus, rtkit_table, args, "rtlabd");
        let ready = if args.contains(&"--rtkit") {
            "owns org.freedesktop.RealtimeKit1"
        } else {
            "listening on"
        };
        wait_until("the daemon is ready", || {
            if let Ok(Some(status)) = daemon.process.try_wait() {
                panic!("the daemon exited with {status}: {}", daemon.log_text());
            }
            daemon.log_text().contains(ready)
        });
        daemon
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits for it to exit (it puts every thread back first).
    fn stop(&mut self) {
        if let Ok(None) = self.process.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.process.id().to_string()])
                .status();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = self.process.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// `rtlab reservations --json -`'s `realtimekit` array.
    fn realtimekit(&self, sandbox: &Sandbox) -> Vec<serde_json::Value> {
        let output = sandbox
            .command()
            .args(["reservations", "--json", "-"])
            .env("RTLAB_SOCKET", &self.socket)
            .output()
            .unwrap();
        assert_exit_code(&output, 0);
        stdout_json(&output)["realtimekit"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// A `sleep` of nobody's, with RLIMIT_RTTIME set to `rttime_us` (None: unlimited).
fn nobody_sleeper(rttime_us: Option<u64>) -> KillOnDrop {
    let mut command = Command::new("setpriv");
    command.args(NOBODY);
    if let Some(limit) = rttime_us {
        command.args(["prlimit", &format!("--rttime={limit}")]);
    }
    let child = command.args(["sleep", "60"]).spawn().expect("setpriv");
    let process = KillOnDrop(child);
    let pid = process.id();
    // setpriv and prlimit exec in place: the pid is sleep's once its uid is nobody's.
    wait_until("the sleeper runs as nobody", || {
        rtlab_sys::proc_thread::thread_comm(pid).is_ok_and(|comm| comm == "sleep")
    });
    process
}

fn ids(pid: u32) -> Vec<String> {
    vec![format!("uint64:{pid}"), format!("uint64:{pid}")]
}

fn with(mut args: Vec<String>, last: String) -> Vec<String> {
    args.push(last);
    args
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv"]
fn busctl_as_nobody_gets_real_time_and_every_refusal_carries_rtkit_s_error_name() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(&sandbox, &bus, "threads_per_user_max = 2\n", &["--rtkit"]);

    let properties = bus.busctl(&[
        "get-property",
        DESTINATION,
        PATH,
        DESTINATION,
        "RTTimeUSecMax",
        "MaxRealtimePriority",
        "MinNiceLevel",
    ]);
    assert_exit_code(&properties, 0);
    assert_eq!(text(&properties.stdout), "x 200000\ni 20\ni -15\n");

    let limited = nobody_sleeper(Some(200_000));
    let pid = limited.id();
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "10".to_owned()],
    );
    assert_exit_code(&granted, 0);
    assert_eq!(
        thread_policy(pid).unwrap(),
        Policy::RoundRobin { priority: 10 }
    );

    // The refusals, each with rtkit's error name.
    let access_denied = "Error org.freedesktop.DBus.Error.AccessDenied";
    let failed = "Error org.freedesktop.DBus.Error.Failed";
    let unlimited = nobody_sleeper(None);
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(unlimited.id()), "uint32:5".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("no RLIMIT_RTTIME"),
        "{error}"
    );
    let too_long = nobody_sleeper(Some(10_000_000));
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(too_long.id()), "uint32:5".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("RTTimeUSecMax"),
        "{error}"
    );
    let roots = KillOnDrop(
        Command::new("prlimit")
            .args(["--rttime=200000", "sleep", "60"])
            .spawn()
            .unwrap(),
    );
    wait_until("root's sleeper runs", || {
        rtlab_sys::proc_thread::thread_comm(roots.id()).is_ok_and(|comm| comm == "sleep")
    });
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(roots.id()), "uint32:5".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("belongs to uid 0"),
        "{error}"
    );
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(pid), "uint32:21".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("MaxRealtimePriority"),
        "{error}"
    );
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(pid), "uint32:0".into()),
    );
    assert!(error.starts_with(failed), "{error}");
    for thread in [roots.id(), unlimited.id(), too_long.id()] {
        assert!(!thread_policy(thread).unwrap().is_realtime());
    }

    // High priority needs no RLIMIT_RTTIME; below MinNiceLevel is denied.
    let error = bus.error_of(
        "MakeThreadHighPriorityWithPID",
        &with(ids(unlimited.id()), "int32:-16".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("MinNiceLevel"),
        "{error}"
    );
    let nice = bus.call(
        "MakeThreadHighPriorityWithPID",
        "tti",
        &[
            unlimited.id().to_string(),
            unlimited.id().to_string(),
            "-10".to_owned(),
        ],
    );
    assert_exit_code(&nice, 0);
    assert_eq!(
        thread_policy(unlimited.id()).unwrap(),
        Policy::Other { nice: -10 }
    );

    // threads_per_user_max = 2: a third thread of nobody's is over the limit.
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(too_long.id()), "uint32:5".into()),
    );
    assert!(error.starts_with(access_denied), "{error}");
    let third = nobody_sleeper(Some(100_000));
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(third.id()), "uint32:5".into()),
    );
    assert!(
        error.starts_with(access_denied) && error.contains("threads_per_user_max"),
        "{error}"
    );

    // Root's methods are refused to nobody (by the packaged bus policy).
    for method in ["ResetKnown", "ResetAll", "Exit"] {
        let error = bus.error_of(method, &[]);
        assert!(error.starts_with(access_denied), "{method}: {error}");
    }

    // The grants show, with who asked.
    let listed = daemon.realtimekit(&sandbox);
    let entry = listed
        .iter()
        .find(|entry| entry["tid"] == pid)
        .unwrap_or_else(|| panic!("thread {pid} in {listed:?}"));
    assert_eq!(entry["uid"], 65534);
    assert_eq!(entry["policy"], "SCHED_RR");
    assert_eq!(entry["priority"], 10);
    assert_eq!(entry["method"], "MakeThreadRealtimeWithPID");
    assert!(listed
        .iter()
        .any(|entry| entry["tid"] == unlimited.id() && entry["nice"] == -10));

    // A grant ends when its thread exits.
    drop(limited);
    wait_until("the exited thread leaves the list", || {
        !daemon
            .realtimekit(&sandbox)
            .iter()
            .any(|entry| entry["tid"] == pid)
    });

    // SIGTERM puts the rest back.
    let mut daemon = daemon;
    daemon.stop();
    assert_eq!(
        thread_policy(unlimited.id()).unwrap(),
        Policy::Other { nice: 0 }
    );
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv"]
fn threads_a_killed_daemon_made_real_time_are_put_back_at_the_next_start() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let mut daemon = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    let sleeper = nobody_sleeper(Some(200_000));
    let pid = sleeper.id();
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "3".to_owned()],
    );
    assert_exit_code(&granted, 0);
    daemon.process.kill().unwrap();
    daemon.process.wait().unwrap();
    assert_eq!(
        thread_policy(pid).unwrap(),
        Policy::RoundRobin { priority: 3 }
    );
    // The next start, even without --rtkit, reads the journal and puts it back.
    let next = Daemon::start(&sandbox, &bus, "", &[]);
    assert_eq!(thread_policy(pid).unwrap(), Policy::Other { nice: 0 });
    assert!(
        next.log_text().contains("put back 1 threads"),
        "{}",
        next.log_text()
    );
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv"]
fn a_second_daemon_refuses_to_take_the_name_and_says_who_owns_it() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let _first = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    let mut second = Daemon::spawn(&sandbox, &bus, "", &["--rtkit", "--replace"], "second");
    let status = second.process.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{}", second.log_text());
    let log = second.log_text();
    assert!(log.contains("already owned by rtlab (pid"), "{log}");
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; SCHED_DEADLINE"]
fn a_configured_program_gets_a_reservation_and_rtlab_reserve_upgrades_a_plain_grant() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(
        &sandbox,
        &bus,
        "[[rtkit.reserve]]\nprogram = \"sleep\"\namount = \"1ms\"\nperiod = \"10ms\"\n",
        &["--rtkit"],
    );
    let sleeper = nobody_sleeper(Some(200_000));
    let pid = sleeper.id();
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "5".to_owned()],
    );
    assert_exit_code(&granted, 0);
    assert!(matches!(
        thread_policy(pid).unwrap(),
        Policy::Deadline { .. }
    ));
    let listed = daemon.realtimekit(&sandbox);
    let entry = listed.iter().find(|entry| entry["tid"] == pid).unwrap();
    assert_eq!(entry["policy"], "reservation");
    assert!(entry["grant_id"].is_u64(), "{entry}");
    drop(daemon);
    assert!(!thread_policy(pid).unwrap().is_realtime());

    // Without the policy: SCHED_RR, then `rtlab reserve` upgrades it and its release gives it back.
    let daemon = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "5".to_owned()],
    );
    assert_exit_code(&granted, 0);
    let reserve = sandbox
        .command()
        .args(["reserve", "--tid", &pid.to_string(), "1ms/10ms"])
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&reserve, 0);
    assert!(matches!(
        thread_policy(pid).unwrap(),
        Policy::Deadline { .. }
    ));
    let listed = daemon.realtimekit(&sandbox);
    let entry = listed.iter().find(|entry| entry["tid"] == pid).unwrap();
    assert_eq!(entry["policy"], "SCHED_RR");
    assert!(entry["grant_id"].is_u64(), "{entry}");
    let release = sandbox
        .command()
        .args(["release", "--tid", &pid.to_string()])
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&release, 0);
    assert_eq!(
        thread_policy(pid).unwrap(),
        Policy::RoundRobin { priority: 5 }
    );
    // With SCHED_RESET_ON_FORK, as the program was given it (the enforcer's restore keeps the
    // policy, the book puts the flag back).
    let chrt = Command::new("chrt")
        .args(["-p", &pid.to_string()])
        .output()
        .unwrap();
    let chrt = text(&chrt.stdout);
    assert!(
        chrt.contains("SCHED_RR|SCHED_RESET_ON_FORK") && chrt.contains("priority: 5"),
        "{chrt}"
    );
    drop(daemon);
    assert_eq!(thread_policy(pid).unwrap(), Policy::Other { nice: 0 });
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv; a C compiler"]
fn the_canary_demotes_a_runaway_pair_that_stays_inside_rlimit_rttime() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let runaway = sandbox.file("runaway");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/rtkit/runaway.c");
    let compiled = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&runaway)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(compiled.success());
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(&sandbox, &bus, "canary_refusal = \"1s\"\n", &["--rtkit"]);
    let cpu = rtlab_sys::cpu::online_cpus()
        .unwrap()
        .last()
        .copied()
        .unwrap();
    let mut child = KillOnDrop(
        Command::new("setpriv")
            .args(NOBODY)
            .args(["prlimit", "--rttime=200000"])
            .arg(&runaway)
            .args(["-c", &cpu.to_string(), "-d", "8"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"tids"), "{line}");
    for tid in &words[2..4] {
        let granted = bus.call(
            "MakeThreadRealtimeWithPID",
            "ttu",
            &[words[1].to_owned(), (*tid).to_owned(), "5".to_owned()],
        );
        assert_exit_code(&granted, 0);
    }
    let mut result = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut result).unwrap();
    let result: serde_json::Value = serde_json::from_str(result.trim()).expect(&result);
    assert_eq!(result["made_realtime"], true, "{result}");
    assert_eq!(result["demoted"], true, "{result}");
    assert!(
        daemon.log_text().contains("starved"),
        "{}",
        daemon.log_text()
    );
    // For a while after, requests are refused with AccessDenied, as rtkit does.
    let sleeper = nobody_sleeper(Some(200_000));
    let error = bus.error_of(
        "MakeThreadRealtimeWithPID",
        &with(ids(sleeper.id()), "uint32:5".into()),
    );
    assert!(
        error.is_empty() || error.contains("canary"),
        "refused for another reason: {error}"
    );
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv; pipewire"]
fn pipewire_s_own_rt_module_gets_its_data_thread_real_time_through_rtlab() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    // PipeWire as nobody, headless: its runtime directory in the sandbox, no session bus (its
    // portal module fails and is optional), the system bus ours. module-rt cannot raise its own
    // priority (nobody's RLIMIT_RTPRIO is 0), so it asks RealtimeKit1 on the system bus.
    let runtime = sandbox.file("pipewire-runtime");
    std::fs::create_dir(&runtime).unwrap();
    let chown = Command::new("chown")
        .args(["nobody:nogroup"])
        .arg(&runtime)
        .status()
        .unwrap();
    assert!(chown.success());
    let log = sandbox.file("pipewire.log");
    let pipewire = KillOnDrop(
        Command::new("setpriv")
            .args(NOBODY)
            .args(["env", "-i", "PATH=/usr/bin:/bin", "PIPEWIRE_DEBUG=3"])
            .arg(format!("HOME={}", runtime.display()))
            .arg(format!("XDG_RUNTIME_DIR={}", runtime.display()))
            .arg(format!("DBUS_SYSTEM_BUS_ADDRESS={}", bus.address))
            .arg("pipewire")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start pipewire"),
    );
    let pid = pipewire.id();
    let mut realtime_tid = None;
    wait_until("a pipewire thread is real-time", || {
        realtime_tid = rtlab_sys::sched::process_thread_ids(pid)
            .unwrap_or_default()
            .into_iter()
            .find(|tid| thread_policy(*tid).is_ok_and(|policy| policy.is_realtime()));
        realtime_tid.is_some()
    });
    let tid = realtime_tid.unwrap();
    // What `chrt -p` shows, and pipewire's own word for it.
    let chrt = Command::new("chrt")
        .args(["-p", &tid.to_string()])
        .output()
        .unwrap();
    let chrt = text(&chrt.stdout);
    assert!(
        chrt.contains("SCHED_RR|SCHED_RESET_ON_FORK") && chrt.contains("priority: 20"),
        "{chrt}"
    );
    wait_until("pipewire logs its real-time", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("using RTKit")
    });
    let listed = daemon.realtimekit(&sandbox);
    let entry = listed
        .iter()
        .find(|entry| entry["tid"] == tid)
        .expect("listed");
    assert_eq!(entry["pid"], pid);
    assert_eq!(entry["uid"], 65534);
    assert_eq!(entry["method"], "MakeThreadRealtimeWithPID");
    drop(pipewire);
    wait_until("pipewire's threads leave the list", || {
        daemon.realtimekit(&sandbox).is_empty()
    });
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv"]
fn a_caller_s_own_thread_and_root_s_reset_known_and_exit() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    // MakeThreadRealtime for the caller's own main thread (0): busctl itself, under prlimit.
    for (method, signature, value) in [
        ("MakeThreadRealtime", "tu", "5"),
        ("MakeThreadHighPriority", "ti", "-5"),
    ] {
        let own = Command::new("setpriv")
            .args(NOBODY)
            .args(["prlimit", "--rttime=200000", "busctl"])
            .arg(format!("--address={}", bus.address))
            .args([
                "--",
                "call",
                DESTINATION,
                PATH,
                DESTINATION,
                method,
                signature,
                "0",
                value,
            ])
            .output()
            .unwrap();
        assert_exit_code(&own, 0);
    }
    assert!(
        daemon.log_text().contains("MakeThreadRealtime: thread"),
        "{}",
        daemon.log_text()
    );
    // Root may reset and end the service; the daemon goes on.
    let sleeper = nobody_sleeper(Some(200_000));
    let pid = sleeper.id();
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "4".to_owned()],
    );
    assert_exit_code(&granted, 0);
    let as_root = |method: &str| {
        Command::new("busctl")
            .arg(format!("--address={}", bus.address))
            .args(["call", DESTINATION, PATH, DESTINATION, method])
            .output()
            .unwrap()
    };
    assert_exit_code(&as_root("ResetKnown"), 0);
    assert_eq!(thread_policy(pid).unwrap(), Policy::Other { nice: 0 });
    assert!(daemon.realtimekit(&sandbox).is_empty());
    assert_exit_code(
        &bus.call(
            "MakeThreadRealtimeWithPID",
            "ttu",
            &[pid.to_string(), pid.to_string(), "4".to_owned()],
        ),
        0,
    );
    assert_exit_code(&as_root("Exit"), 0);
    assert_eq!(thread_policy(pid).unwrap(), Policy::Other { nice: 0 });
    wait_until("the name is given up", || {
        let listed = Command::new("busctl")
            .arg(format!("--address={}", bus.address))
            .arg("list")
            .output()
            .unwrap();
        !text(&listed.stdout).contains(DESTINATION)
    });
    // The daemon still answers its own clients.
    assert!(daemon.realtimekit(&sandbox).is_empty());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// GET `path` from 127.0.0.1:`port` with HTTP/1.0; the body, or "" when nothing answers yet.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// The exported line of metric `name` whose labels include `tid="TID"`, if any.
fn metric_line(metrics: &str, name: &str, tid: u32) -> Option<String> {
    metrics
        .lines()
        .find(|line| {
            line.starts_with(&format!("{name}{{")) && line.contains(&format!("tid=\"{tid}\""))
        })
        .map(str::to_owned)
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv; SCHED_DEADLINE"]
fn the_monitor_exports_threads_made_real_time_through_realtimekit1_and_their_upgrade() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(&sandbox, &bus, "", &["--rtkit"]);
    let sleeper = nobody_sleeper(Some(200_000));
    let pid = sleeper.id();
    // busctl as nobody asks, as a program would.
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), pid.to_string(), "7".to_owned()],
    );
    assert_exit_code(&granted, 0);
    let port = free_port();
    let _monitor = KillOnDrop(
        sandbox
            .command()
            .args([
                "monitor",
                "--prometheus",
                &format!("127.0.0.1:{port}"),
                "--classes",
                "normal",
                "--window",
                "1s",
                "--stop-after",
                "5min",
                "--socket",
            ])
            .arg(&daemon.socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rtlab monitor"),
    );
    let mut line = None;
    wait_until("the monitor exports the RealtimeKit1 thread", || {
        line = metric_line(&http_get(port, "/metrics"), "rtlab_realtimekit_thread", pid);
        line.is_some()
    });
    let line = line.unwrap();
    let listed = daemon.realtimekit(&sandbox);
    let entry = listed.iter().find(|entry| entry["tid"] == pid).unwrap();
    // Who asked (the bus's uid and pid of busctl), what it got, which thread.
    for label in [
        format!("pid=\"{pid}\""),
        "comm=\"sleep\"".to_owned(),
        "uid=\"65534\"".to_owned(),
        format!("caller_pid=\"{}\"", entry["caller_pid"]),
        "method=\"MakeThreadRealtimeWithPID\"".to_owned(),
        "policy=\"SCHED_RR\"".to_owned(),
        "priority=\"7\"".to_owned(),
        "grant=\"\"".to_owned(),
    ] {
        assert!(line.contains(&label), "{label} not in {line}");
    }
    assert!(line.ends_with(" 1"), "{line}");
    let metrics = http_get(port, "/metrics");
    assert!(metrics.contains("rtlab_daemon_listed 1"), "{metrics}");
    let since = metric_line(
        &metrics,
        "rtlab_realtimekit_thread_since_timestamp_seconds",
        pid,
    )
    .expect("when it was granted");
    let since: f64 = since.rsplit(' ').next().unwrap().parse().unwrap();
    let expected = humantime::parse_rfc3339_weak(entry["since"].as_str().unwrap())
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((since - expected).abs() < 0.01, "{since} vs {expected}");
    // /reservations is `rtlab reservations --json`'s document; / shows the thread.
    let document: serde_json::Value =
        serde_json::from_str(&http_get(port, "/reservations")).expect("JSON on /reservations");
    assert_eq!(document["schema"], "rtlab.reservations/1", "{document}");
    let served = document["realtimekit"]
        .as_array()
        .and_then(|threads| threads.iter().find(|thread| thread["tid"] == pid))
        .expect("the thread on /reservations");
    assert_eq!(served, entry);
    let index = http_get(port, "/");
    assert!(
        index.contains(&format!(
            "<td>{pid}</td><td>sleep</td><td>{pid}</td><td>65534</td>"
        )),
        "{index}"
    );

    // `rtlab reserve` upgrades it: the reservation and its thread are exported, the RealtimeKit1
    // thread names the reservation holding it.
    let reserve = sandbox
        .command()
        .args(["reserve", "--tid", &pid.to_string(), "1ms/10ms"])
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&reserve, 0);
    let grant = daemon
        .realtimekit(&sandbox)
        .iter()
        .find(|entry| entry["tid"] == pid)
        .and_then(|entry| entry["grant_id"].as_u64())
        .expect("the upgrade's grant");
    wait_until("the monitor exports the upgrade", || {
        let metrics = http_get(port, "/metrics");
        metric_line(&metrics, "rtlab_realtimekit_thread", pid)
            .is_some_and(|line| line.contains(&format!("grant=\"{grant}\"")))
            && metric_line(&metrics, "rtlab_reservation_thread", pid).is_some_and(|line| {
                line.contains(&format!("grant=\"{grant}\"")) && line.contains("comm=\"sleep\"")
            })
    });
    assert!(http_get(port, "/metrics").contains(&format!(
        "rtlab_reservation_granted_period_seconds{{grant=\"{grant}\""
    )));
    // The thread ends: its grants leave the export.
    drop(sleeper);
    wait_until("the ended thread leaves the export", || {
        let metrics = http_get(port, "/metrics");
        metrics.contains("rtlab_daemon_listed 1")
            && metric_line(&metrics, "rtlab_realtimekit_thread", pid).is_none()
            && metric_line(&metrics, "rtlab_reservation_thread", pid).is_none()
    });
}

/// rt-app (the scheduler developers' workload generator, Debian package rt-app) as nobody under `prlimit --rttime`: one SCHED_OTHER
/// thread that runs 300 µs every 10 ms for a minute; returns it and its periodic thread's tid.
fn nobody_rt_app(sandbox: &Sandbox) -> (KillOnDrop, u32) {
    let logs = sandbox.file("rt-app-logs");
    std::fs::create_dir_all(&logs).unwrap();
    let chown = Command::new("chown")
        .args(["nobody:nogroup"])
        .arg(&logs)
        .status()
        .unwrap();
    assert!(chown.success());
    let config = sandbox.write(
        "rt-app.json",
        format!(
            r#"{{
  "tasks": {{ "periodic": {{ "policy": "SCHED_OTHER", "run": 300, "timer": {{ "ref": "tick", "period": 10000 }} }} }},
  "global": {{ "duration": 60, "default_policy": "SCHED_OTHER", "calibration": 100, "logdir": "{}", "log_basename": "rtkit", "lock_pages": false }}
}}
"#,
            logs.display()
        ),
    );
    let process = KillOnDrop(
        Command::new("setpriv")
            .args(NOBODY)
            .args(["prlimit", "--rttime=200000", "rt-app"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rt-app (package rt-app)"),
    );
    let pid = process.id();
    let mut worker = None;
    wait_until("rt-app's periodic thread runs", || {
        worker = rtlab_sys::sched::process_thread_ids(pid)
            .unwrap_or_default()
            .into_iter()
            .find(|tid| *tid != pid);
        worker.is_some()
            && rtlab_sys::proc_thread::thread_comm(pid).is_ok_and(|comm| comm == "rt-app")
    });
    (process, worker.unwrap())
}

#[test]
#[ignore = "needs root: the daemon changes nobody's threads; setpriv; the trace; SCHED_DEADLINE"]
fn a_program_sized_by_observation_gets_sched_rr_at_once_then_the_observed_reservation() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let bus = Bus::start(&sandbox);
    let daemon = Daemon::start(
        &sandbox,
        &bus,
        "[[rtkit.reserve]]\nprogram = \"rt-app\"\nobserve = \"4s\"\n[[rtkit.reserve]]\nprogram = \"sleep\"\nsize = \"auto\"\nobserve = \"1s\"\n",
        &["--rtkit"],
    );
    let (rt_app, tid) = nobody_rt_app(&sandbox);
    let pid = rt_app.id();
    let entry_of = |tid: u32| {
        daemon
            .realtimekit(&sandbox)
            .into_iter()
            .find(|entry| entry["tid"] == tid)
            .expect("listed")
    };
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[pid.to_string(), tid.to_string(), "5".to_owned()],
    );
    assert_exit_code(&granted, 0);
    // The reply did not wait for the observation: SCHED_RR now, and the listing says it is being
    // observed (for 4 s from the grant).
    assert_eq!(
        thread_policy(tid).unwrap(),
        Policy::RoundRobin { priority: 5 }
    );
    let entry = entry_of(tid);
    assert_eq!(entry["policy"], "SCHED_RR", "{entry}");
    assert!(
        entry["sizing"]
            .as_str()
            .is_some_and(|sizing| sizing.starts_with("observing for 4s")),
        "{entry}"
    );
    // Then the observed reservation replaces it.
    let mut entry = entry;
    wait_until("the observed reservation replaces SCHED_RR", || {
        entry = entry_of(tid);
        let sizing = entry["sizing"].as_str().unwrap_or_default().to_owned();
        assert!(
            !sizing.contains("stays SCHED_RR"),
            "no reservation came of the observation: {entry}\n{}",
            daemon.log_text()
        );
        entry["policy"] == "reservation"
    });
    let sizing = entry["sizing"].as_str().unwrap();
    assert!(sizing.starts_with("observed: period "), "{entry}");
    assert!(sizing.contains("per activation (p99 plus 20 %)"), "{entry}");
    let grant_id = entry["grant_id"].as_u64().expect("the reservation's id");
    let output = sandbox
        .command()
        .args(["reservations", "--json", "-"])
        .env("RTLAB_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let listed = stdout_json(&output);
    let row = listed["reservations"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["grant_id"] == grant_id))
        .expect("the observed reservation among the reservations");
    assert_eq!(row["tid"], tid, "{row}");
    // What was asked is sized from rt-app's 10 ms period (a window of whole periods, where the
    // tick makes SCHED_DEADLINE need one) and its CPU per activation: a small share of a CPU,
    // not the whole CPU SCHED_RR would let it take.
    let window = row["requested"]["period_ns"].as_f64().unwrap();
    let periods = window / 10_000_000.0;
    assert!(
        periods >= 1.0 && (periods - periods.round()).abs() < 0.02,
        "{row}"
    );
    let share = row["requested"]["amount_ns"].as_f64().unwrap() / window;
    assert!(share > 0.0001 && share < 0.2, "{row}");
    let policy = thread_policy(tid).unwrap();
    assert!(
        policy.is_realtime() && policy != Policy::RoundRobin { priority: 5 },
        "{policy:?}"
    );
    assert!(daemon.log_text().contains("instead of SCHED_RR"));

    // A thread with no period (sleep): SCHED_RR stays, and the listing says why.
    let sleeper = nobody_sleeper(Some(200_000));
    let sleeper_pid = sleeper.id();
    let granted = bus.call(
        "MakeThreadRealtimeWithPID",
        "ttu",
        &[
            sleeper_pid.to_string(),
            sleeper_pid.to_string(),
            "5".to_owned(),
        ],
    );
    assert_exit_code(&granted, 0);
    wait_until("the observation of sleep ends", || {
        entry_of(sleeper_pid)["sizing"]
            .as_str()
            .is_some_and(|sizing| sizing.ends_with("stays SCHED_RR"))
    });
    let entry = entry_of(sleeper_pid);
    assert!(
        entry["sizing"]
            .as_str()
            .unwrap()
            .starts_with("no reservation from the observation: "),
        "{entry}"
    );
    assert_eq!(entry["policy"], "SCHED_RR");
    assert_eq!(
        thread_policy(sleeper_pid).unwrap(),
        Policy::RoundRobin { priority: 5 }
    );
    drop(daemon);
    assert_eq!(thread_policy(tid).unwrap(), Policy::Other { nice: 0 });
    assert_eq!(
        thread_policy(sleeper_pid).unwrap(),
        Policy::Other { nice: 0 }
    );
}

#[test]
#[ignore = "needs root: the daemon's enforcer and its canary"]
fn enabled_by_the_configuration_without_a_bus_the_daemon_serves_reservations_and_says_why() {
    let _serial = require_root();
    let sandbox = Sandbox::new();
    let config = sandbox.write(
        "rtlabd.toml",
        format!(
            "state_dir = \"{}\"\n[rtkit]\nenabled = true\n",
            sandbox.file("state").display()
        ),
    );
    let socket = sandbox.file("rtlabd.sock");
    let no_bus = format!("unix:path={}", sandbox.file("no-bus-here").display());
    let log = sandbox.file("daemon.log");
    let mut daemon = KillOnDrop(
        sandbox
            .command()
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &no_bus)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("the daemon says it serves without RealtimeKit1", || {
        if let Ok(Some(status)) = daemon.try_wait() {
            panic!("the daemon exited with {status}: {}", log_text());
        }
        log_text().contains("serving reservations without RealtimeKit1")
    });
    assert!(
        log_text().contains("connecting to the system bus"),
        "{}",
        log_text()
    );
    let target = nobody_sleeper(None);
    let reserve = sandbox
        .command()
        .args(["reserve", "--tid", &target.id().to_string(), "1ms/10ms"])
        .env("RTLAB_SOCKET", &socket)
        .output()
        .unwrap();
    assert_exit_code(&reserve, 0);
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    assert!(daemon.wait().unwrap().success());
    assert!(!thread_policy(target.id()).unwrap().is_realtime());

    // Asked for on the command line, RealtimeKit1 is required: no bus, no daemon (exit 3).
    let output = sandbox
        .command()
        .args(["daemon", "--rtkit", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .env("DBUS_SYSTEM_BUS_ADDRESS", &no_bus)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit_code(&output, 3);
    assert!(
        text(&output.stderr).contains("connecting to the system bus"),
        "{}",
        text(&output.stderr)
    );
}
