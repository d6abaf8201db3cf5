//! The packaging: the systemd units' hardening scores, the D-Bus files as dbus-daemon reads
//! them, and the Debian package built by `packaging/build-deb`, installed, used through socket
//! activation (and its RealtimeKit1 service on a bus with the installed policy), and removed.

mod common;

use common::{assert_exit_code, stderr_text, stdout_text, wait_until, KillOnDrop, Sandbox};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The "Overall exposure level" systemd-analyze gives a unit file, e.g. 1.4.
fn exposure(unit: &str) -> f64 {
    let path = workspace_root().join("packaging").join(unit);
    let output = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian package systemd)");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find(|line| line.contains("Overall exposure level for"))
        .unwrap_or_else(|| {
            panic!(
                "no exposure level for {unit}: {text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    line.rsplit_once(": ")
        .and_then(|(_, score)| score.split_whitespace().next())
        .and_then(|score| score.parse().ok())
        .unwrap_or_else(|| panic!("unreadable exposure line: {line}"))
}

#[test]
fn the_units_bound_descriptors_and_real_time_runaways() {
    let unit = |name: &str| {
        std::fs::read_to_string(workspace_root().join("packaging").join(name)).unwrap()
    };
    // The daemon asks for as many descriptors at start (rtlab_daemon::peer::OPEN_FILES_WANTED).
    assert!(unit("rtlabd.service").contains(&format!(
        "\nLimitNOFILE={}\n",
        rtlab_daemon::peer::OPEN_FILES_WANTED
    )));
    // SCHED_FIFO allowed to the monitor's user comes with a CPU-time bound (issue 39).
    let monitor = unit("rtlab-monitor.service");
    assert!(monitor.contains("\nLimitRTPRIO=99\n"), "{monitor}");
    assert!(monitor.contains("\nLimitRTTIME=200ms:1s\n"), "{monitor}");
}

#[test]
fn the_units_meet_their_hardening_targets() {
    let daemon = exposure("rtlabd.service");
    assert!(
        daemon <= 4.9,
        "rtlabd.service exposure {daemon} (target: 4.9, OK)"
    );
    let monitor = exposure("rtlab-monitor.service");
    assert!(
        monitor <= 3.0,
        "rtlab-monitor.service exposure {monitor} (target: 3.0)"
    );
}

#[test]
fn the_units_run_the_packaged_binary_and_document_with_man_pages() {
    for unit in ["rtlabd.service", "rtlab-monitor.service", "rtlabd.socket"] {
        let text = std::fs::read_to_string(workspace_root().join("packaging").join(unit)).unwrap();
        for line in text.lines() {
            if let Some(exec) = line.strip_prefix("ExecStart=") {
                assert!(exec.starts_with("/usr/bin/rtlab "), "{unit}: {line}");
            }
            if let Some(documentation) = line.strip_prefix("Documentation=") {
                assert!(!documentation.contains("example.invalid"), "{unit}: {line}");
                assert!(documentation.contains("man:rtlab"), "{unit}: {line}");
            }
        }
    }
}

/// The names a bus can activate (`ListActivatableNames`).
fn activatable_names(address: &str) -> String {
    run_ok(Command::new("dbus-send").args([
        &format!("--bus={address}"),
        "--print-reply",
        "--dest=org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.ListActivatableNames",
    ]))
}

#[test]
fn dbus_daemon_accepts_the_realtimekit1_policy_and_activation_files() {
    let dbus = workspace_root().join("packaging/dbus");
    let directory = tempfile::tempdir().unwrap();
    let (_bus, address) = common::dbus::dbus_daemon_with(
        directory.path(),
        &dbus.join("org.freedesktop.RealtimeKit1.conf"),
        Some(&dbus),
    )
    .unwrap_or_else(|error| panic!("dbus-daemon refused the packaged policy: {error}"));
    let names = activatable_names(&address);
    assert!(
        names.contains("\"org.freedesktop.RealtimeKit1\""),
        "the activation file is not read: {names}"
    );
    let activation =
        std::fs::read_to_string(dbus.join("org.freedesktop.RealtimeKit1.service")).unwrap();
    assert!(
        activation.contains("\nSystemdService=rtlabd.service\n"),
        "{activation}"
    );
    assert!(
        activation.contains("\nExec=/usr/bin/rtlab daemon --rtkit\n"),
        "{activation}"
    );
    // The packaged configuration is what makes the activated rtlabd.service serve the name.
    let config = std::fs::read_to_string(workspace_root().join("packaging/rtlabd.toml")).unwrap();
    assert!(config.contains("\n[rtkit]\nenabled = true\n"), "{config}");

    // The check can fail: dbus-daemon refuses a policy file it cannot read as one.
    let broken = directory.path().join("broken.conf");
    std::fs::write(&broken, "<busconfig><allow own=\"x\"/></busconfig>\n").unwrap();
    let other = tempfile::tempdir().unwrap();
    let refused = common::dbus::dbus_daemon_with(other.path(), &broken, Some(&dbus)).map(|_| ());
    assert!(refused.is_err(), "dbus-daemon took a broken policy file");
}

#[test]
fn the_debian_changelog_is_at_the_crates_version() {
    let changelog =
        std::fs::read_to_string(workspace_root().join("packaging/debian/changelog")).unwrap();
    let first = changelog.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("rtlab ({}) ", env!("CARGO_PKG_VERSION"))),
        "packaging/debian/changelog starts with {first:?}, not version {}",
        env!("CARGO_PKG_VERSION")
    );
}

/// Reads sd_notify datagrams until one contains `wanted` (or panics after `within`).
fn receive_until(
    receiver: &std::os::unix::net::UnixDatagram,
    wanted: &str,
    within: Duration,
) -> Vec<String> {
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while started.elapsed() < within {
        if let Ok(length) = receiver.recv(&mut buffer) {
            let message = String::from_utf8_lossy(&buffer[..length]).into_owned();
            let done = message.contains(wanted);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
    panic!("no {wanted:?} within {within:?}; received {seen:?}");
}

/// The service manager's side of `Type=notify` with `WatchdogSec=400ms`, played by the test:
/// rtlab `arguments` started with NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID set as systemd
/// sets them (WATCHDOG_PID must be the service's own pid: the shell's, kept by exec). `check_ready`
/// gets the READY=1 message; then two watchdog pings (every 200 ms, half of 400 ms) within a
/// generous 30 s each, and after SIGTERM, STOPPING=1 and a successful exit.
fn notify_lifecycle(sandbox: &Sandbox, arguments: &[&OsStr], check_ready: impl FnOnce(&str)) {
    let notify_path = sandbox.file("notify");
    let receiver = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut service = KillOnDrop(
        Command::new("sh")
            .arg("-c")
            .arg("WATCHDOG_PID=$$ exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_rtlab"))
            .args(arguments)
            .env("RTLAB_HOME", sandbox.path())
            .env("NOTIFY_SOCKET", &notify_path)
            .env("WATCHDOG_USEC", "400000")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready = receive_until(&receiver, "READY=1", Duration::from_secs(30));
    check_ready(ready.last().unwrap());
    receive_until(&receiver, "WATCHDOG=1", Duration::from_secs(30));
    receive_until(&receiver, "WATCHDOG=1", Duration::from_secs(30));
    rtlab_sys::signals::send(service.0.id(), rtlab_sys::signals::SIGTERM).unwrap();
    receive_until(&receiver, "STOPPING=1", Duration::from_secs(30));
    assert!(service.0.wait().unwrap().success());
}

/// `Type=notify` and `WatchdogSec=` of rtlabd.service: READY=1 once the socket listens.
#[test]
fn the_daemon_reports_ready_pings_the_watchdog_and_reports_stopping() {
    let sandbox = Sandbox::new();
    let config = sandbox.write(
        "rtlabd.toml",
        format!("state_dir = \"{}\"\n", sandbox.file("state").display()),
    );
    let socket = sandbox.file("rtlabd.sock");
    let arguments = [
        OsStr::new("daemon"),
        OsStr::new("--socket"),
        socket.as_os_str(),
        OsStr::new("--config"),
        config.as_os_str(),
    ];
    notify_lifecycle(&sandbox, &arguments, |ready| {
        assert!(
            ready.contains(&format!("STATUS=serving on {}", socket.display())),
            "{ready}"
        );
        assert!(socket.exists(), "READY=1 comes once the socket listens");
    });
}

/// `Type=notify` and `WatchdogSec=` of rtlab-monitor.service: READY=1 once /metrics is served,
/// watchdog pings from the HTTP loop, STOPPING=1 at the end.
#[test]
#[ignore = "needs root: the monitor's measuring threads (run as root in CI)"]
fn the_monitor_reports_ready_pings_the_watchdog_and_reports_stopping() {
    let sandbox = Sandbox::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let arguments = [
        "monitor",
        "--prometheus",
        address.as_str(),
        "--window",
        "1s",
        "--classes",
        "normal",
        "--stop-after",
        "60s",
    ]
    .map(OsStr::new);
    notify_lifecycle(&sandbox, &arguments, |ready| {
        assert!(
            ready.contains(&format!("STATUS=serving http://{address}/metrics")),
            "{ready}"
        );
        assert!(
            std::net::TcpStream::connect(&address).is_ok(),
            "READY=1 comes once /metrics listens"
        );
    });
}

#[test]
fn completions_man_out_dir_writes_a_page_per_subcommand() {
    let sandbox = Sandbox::new();
    let directory = sandbox.file("man");
    std::fs::create_dir(&directory).unwrap();
    let output = sandbox.run([
        "completions",
        "man",
        "--out-dir",
        directory.to_str().unwrap(),
    ]);
    assert_exit_code(&output, 0);
    for page in [
        "rtlab.1",
        "rtlab-run.1",
        "rtlab-daemon.1",
        "rtlab-monitor.1",
        "rtlab-trace-analyze.1",
    ] {
        let text = std::fs::read_to_string(directory.join(page))
            .unwrap_or_else(|error| panic!("{page}: {error}"));
        assert!(text.starts_with(".ie"), "{page} is roff: {text:.40}");
    }
    // --out-dir is for man pages; a shell's completions go to stdout.
    let output = sandbox.run(["completions", "bash", "--out-dir", "x"]);
    assert_exit_code(&output, 2);
    let output = sandbox.run(["completions", "man", "--out-dir", "/nonexistent/dir"]);
    assert_exit_code(&output, 2);
    assert!(stderr_text(&output).contains("--out-dir /nonexistent/dir"));
}

fn run_ok(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        stdout_text(&output),
        stderr_text(&output)
    );
    stdout_text(&output)
}

fn is_installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "rtlab"])
        .output()
        .is_ok_and(|output| stdout_text(&output).contains("installed"))
}

/// Every path the package puts on the machine (besides directories shared with others).
const INSTALLED: &[&str] = &[
    "/usr/bin/rtlab",
    "/etc/rtlab/rtlabd.toml",
    "/usr/share/man/man1/rtlab.1.gz",
    "/usr/share/man/man1/rtlab-daemon.1.gz",
    "/usr/share/man/man1/rtlab-run.1.gz",
    "/usr/share/man/man1/rtlab-monitor.1.gz",
    "/usr/share/man/man1/rtlab-reserve.1.gz",
    "/usr/share/bash-completion/completions/rtlab",
    "/usr/share/zsh/vendor-completions/_rtlab",
    "/usr/share/fish/vendor_completions.d/rtlab.fish",
    "/usr/share/rtlab/grafana-rtlab-dashboard.json",
    "/usr/share/doc/rtlab/copyright",
    "/usr/share/doc/rtlab/changelog.gz",
    "/usr/share/doc/rtlab/rtkit.md",
    "/usr/share/dbus-1/system.d/org.freedesktop.RealtimeKit1.conf",
    "/usr/share/dbus-1/system-services/org.freedesktop.RealtimeKit1.service",
];

/// Where the package's units land (cargo-deb's systemd directory).
fn unit_path(unit: &str) -> Option<PathBuf> {
    ["/lib/systemd/system", "/usr/lib/systemd/system"]
        .iter()
        .map(|directory| Path::new(directory).join(unit))
        .find(|path| path.exists())
}

#[test]
#[ignore = "needs root: builds the package, dpkg -i, dpkg -r"]
fn the_debian_package_installs_serves_through_socket_activation_and_removes_cleanly() {
    assert_eq!(
        rtlab_sys::users::effective_uid(),
        0,
        "this test needs root (dpkg): CI runs it as root"
    );
    // A package left by an interrupted run of this test goes first.
    if is_installed() {
        run_ok(Command::new("dpkg").args(["--purge", "rtlab"]));
    }
    let root = workspace_root();
    // The debug rtlab this test build made (target/debug/rtlab), packed as the release one is:
    // the same source and asset list, without building every dependency again, optimised
    // (minutes of CI), nor again with `cargo build -p rtlab`'s narrower features; compressed
    // fast (xz took 10 s of the test's 17 s).
    assert!(
        Path::new(env!("CARGO_BIN_EXE_rtlab")).ends_with("debug/rtlab"),
        "{}",
        env!("CARGO_BIN_EXE_rtlab")
    );
    let built = run_ok(
        Command::new(root.join("packaging/build-deb"))
            .args(["--profile", "dev", "--no-build", "--fast"])
            .current_dir("/"),
    );
    let deb = PathBuf::from(built.lines().last().unwrap_or_default().trim());
    let deb = if deb.is_absolute() {
        deb
    } else {
        root.join(deb)
    };
    assert_eq!(
        deb.file_name().unwrap().to_string_lossy(),
        format!("rtlab_{}_amd64.deb", env!("CARGO_PKG_VERSION"))
    );
    assert!(deb.exists(), "{}", deb.display());
    // The D-Bus files are in the package, at rtkit's paths, and so are the relations that says.
    let contents = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for path in [
        "./usr/share/dbus-1/system.d/org.freedesktop.RealtimeKit1.conf",
        "./usr/share/dbus-1/system-services/org.freedesktop.RealtimeKit1.service",
    ] {
        assert!(
            contents.contains(path),
            "{path} not in the package: {contents}"
        );
    }
    let relations = run_ok(Command::new("dpkg-deb").arg("-f").arg(&deb).args([
        "Conflicts",
        "Provides",
        "Replaces",
    ]));
    assert!(relations.contains("Conflicts: rtkit"), "{relations}");
    assert!(relations.contains("Provides: rtkit"), "{relations}");
    assert!(!relations.contains("Replaces"), "{relations}");

    run_ok(Command::new("dpkg").arg("-i").arg(&deb));
    for path in INSTALLED {
        assert!(Path::new(path).exists(), "{path} is installed");
    }
    let units: Vec<PathBuf> = ["rtlabd.service", "rtlabd.socket", "rtlab-monitor.service"]
        .iter()
        .map(|unit| unit_path(unit).unwrap_or_else(|| panic!("{unit} is installed")))
        .collect();
    // Installed, the units' commands and man pages exist: systemd's own check passes.
    run_ok(Command::new("systemd-analyze").arg("verify").args(&units));
    let conffiles = run_ok(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "rtlab"]));
    assert!(
        conffiles.contains("/etc/rtlab/rtlabd.toml"),
        "the configuration is a conffile: {conffiles}"
    );
    // A man page for every subcommand the binary has.
    let man_pages = std::fs::read_dir("/usr/share/man/man1")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("rtlab"))
        .count();
    assert!(man_pages >= 20, "{man_pages} rtlab man pages");
    // rtlabd.socket is enabled (deb-systemd-helper works without a running systemd).
    assert!(
        Path::new("/etc/systemd/system/sockets.target.wants/rtlabd.socket").exists(),
        "rtlabd.socket is enabled"
    );

    // The installed daemon, socket-activated as systemd would (systemctl needs systemd as PID 1,
    // which this machine does not run): the socket unit's own path, the installed config.
    let socket_unit = std::fs::read_to_string(&units[1]).unwrap();
    let socket = socket_unit
        .lines()
        .find_map(|line| line.strip_prefix("ListenStream="))
        .expect("ListenStream= in rtlabd.socket")
        .trim()
        .to_owned();
    let socket_directory = Path::new(&socket).parent().unwrap().to_owned();
    let made_directory = !socket_directory.exists();
    std::fs::create_dir_all(&socket_directory).unwrap();
    // A socket file an interrupted run left would be taken for the new one.
    let _ = std::fs::remove_file(&socket);
    // A system bus with the installed D-Bus files (this machine runs none): the installed
    // configuration enables RealtimeKit1, so the daemon owns the name there.
    let bus_directory = tempfile::tempdir().unwrap();
    let (_bus, bus_address) = common::dbus::dbus_daemon_with(
        bus_directory.path(),
        Path::new("/usr/share/dbus-1/system.d/org.freedesktop.RealtimeKit1.conf"),
        Some(Path::new("/usr/share/dbus-1/system-services")),
    )
    .unwrap_or_else(|error| panic!("dbus-daemon refused the installed policy: {error}"));
    assert!(activatable_names(&bus_address).contains("\"org.freedesktop.RealtimeKit1\""));
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut activator = KillOnDrop(
        Command::new("systemd-socket-activate")
            .arg("-l")
            .arg(&socket)
            // systemd-socket-activate passes on only the environment it is told to.
            .arg(format!("--setenv=DBUS_SYSTEM_BUS_ADDRESS={bus_address}"))
            .args(["/usr/bin/rtlab", "daemon"])
            .stdin(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("systemd-socket-activate (Debian package systemd)"),
    );
    wait_until(Duration::from_secs(30), "the socket exists", || {
        Path::new(&socket).exists()
    });
    let target = KillOnDrop(
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let tid = target.0.id().to_string();
    let reserve = Command::new("/usr/bin/rtlab")
        .args(["reserve", "1ms/10ms", "--tid", &tid, "--socket", &socket])
        .output()
        .unwrap();
    assert_exit_code(&reserve, 0);
    assert!(
        stdout_text(&reserve).contains("requested  1ms every 10ms"),
        "{}",
        stdout_text(&reserve)
    );
    assert!(rtlab_sys::sched::thread_policy(target.0.id())
        .unwrap()
        .is_realtime());
    // The daemon started for the socket serves RealtimeKit1 too (it reached the bus meanwhile).
    let started = Instant::now();
    while !std::fs::read_to_string(log.path())
        .unwrap_or_default()
        .contains("owns org.freedesktop.RealtimeKit1")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the installed daemon does not serve RealtimeKit1: {}",
            std::fs::read_to_string(log.path()).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let property = run_ok(Command::new("busctl").args([
        &format!("--address={bus_address}"),
        "get-property",
        "org.freedesktop.RealtimeKit1",
        "/org/freedesktop/RealtimeKit1",
        "org.freedesktop.RealtimeKit1",
        "MaxRealtimePriority",
    ]));
    assert_eq!(property.trim(), "i 20");
    let release = Command::new("/usr/bin/rtlab")
        .args(["release", "--tid", &tid, "--socket", &socket])
        .output()
        .unwrap();
    assert_exit_code(&release, 0);
    rtlab_sys::signals::send(activator.0.id(), rtlab_sys::signals::SIGTERM).unwrap();
    assert!(activator.0.wait().unwrap().success());
    let log_text = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        log_text.contains("listening on the socket systemd passed"),
        "{log_text}"
    );
    drop(target);
    let _ = std::fs::remove_file(&socket);
    if made_directory {
        // The daemon's journal directory is empty after a clean stop.
        std::fs::remove_dir(&socket_directory)
            .unwrap_or_else(|error| panic!("{} is not empty: {error}", socket_directory.display()));
    }

    run_ok(Command::new("dpkg").args(["-r", "rtlab"]));
    for path in INSTALLED.iter().filter(|path| !path.starts_with("/etc/")) {
        assert!(!Path::new(path).exists(), "{path} is removed");
    }
    for unit in &units {
        assert!(!unit.exists(), "{} is removed", unit.display());
    }
    assert!(
        Path::new("/etc/rtlab/rtlabd.toml").exists(),
        "dpkg -r keeps the conffile"
    );
    run_ok(Command::new("dpkg").args(["--purge", "rtlab"]));
    assert!(
        !Path::new("/etc/rtlab").exists(),
        "purge removes /etc/rtlab"
    );
    assert!(!Path::new("/etc/systemd/system/sockets.target.wants/rtlabd.socket").exists());
    assert!(!is_installed());
}
