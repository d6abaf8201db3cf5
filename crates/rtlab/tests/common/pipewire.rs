//! PipeWire for the tests (issue 40): a private `pipewire` (Debian's 0.3.65) with no session
//! manager, its Dummy-Driver at a forced quantum of 128 frames at 48 kHz, in a runtime
//! directory of its own; the JACK tests' `xrun_client` and Debian's `fluidsynth`
//! ([`Fluidsynth`]) run through `pw-jack`; and `pw-profiler`, PipeWire's own judge, against that
//! server. [`PipewireServer`], [`PwJackClient`], [`Fluidsynth`] and [`Profiler`] stop what they
//! started when dropped (a failing assertion included), and the server's directory goes with it.
//!
//! Needs `pipewire`, `pipewire-bin` (pw-profiler, pw-metadata, pw-dump), `pipewire-jack`
//! (pw-jack), `fluidsynth` and `timgm6mb-soundfont` (its soundfont), which `.ci/run` installs,
//! and the JACK tests' compiled helpers ([`super::jack::binaries`]).

use rtlab_core::pipewire_count::PipewireProfile;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{end, eventually};

/// The server's configuration: only the modules a JACK client needs, the profiler unless left
/// out, and the Dummy-Driver as the graph's clock (no device, no session manager: a JACK
/// node is always processed, so the driver picks it up without links).
fn configuration(with_profiler: bool) -> String {
    let profiler = if with_profiler {
        "    { name = libpipewire-module-profiler }\n"
    } else {
        ""
    };
    format!(
        r#"context.properties = {{
    core.daemon = true
    core.name = pipewire-0
    link.max-buffers = 16
    default.clock.rate = 48000
    default.clock.quantum = {quantum}
    default.clock.min-quantum = 16
    default.clock.max-quantum = 2048
    mem.allow-mlock = false
}}
context.spa-libs = {{
    audio.convert.* = audioconvert/libspa-audioconvert
    support.* = support/libspa-support
}}
context.modules = [
    {{ name = libpipewire-module-rt args = {{ rt.prio = 88 }} flags = [ ifexists nofail ] }}
    {{ name = libpipewire-module-protocol-native }}
{profiler}    {{ name = libpipewire-module-metadata }}
    {{ name = libpipewire-module-spa-node-factory }}
    {{ name = libpipewire-module-client-node }}
    {{ name = libpipewire-module-access args = {{ }} }}
    {{ name = libpipewire-module-adapter }}
    {{ name = libpipewire-module-link-factory }}
]
context.objects = [
    {{ factory = spa-node-factory
        args = {{
            factory.name = support.node.driver
            node.name = Dummy-Driver
            node.group = pipewire.dummy
            priority.driver = 20000
        }}
    }}
]
"#,
        quantum = QUANTUM
    )
}

/// The forced quantum (frames) at 48 kHz: 2.667 ms, JACK's set-up of the JACK tests.
pub const QUANTUM: u32 = 128;

/// `program` with the environment that makes it a client of the server in `runtime_dir`.
fn client_command(program: impl AsRef<std::ffi::OsStr>, runtime_dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .env("PIPEWIRE_RUNTIME_DIR", runtime_dir)
        .env_remove("PIPEWIRE_REMOTE");
    command
}

/// A private PipeWire server; killed on drop.
pub struct PipewireServer {
    child: Child,
    directory: tempfile::TempDir,
}

impl PipewireServer {
    /// Starts the server with the profiler module and forces the quantum.
    pub fn start() -> PipewireServer {
        Self::start_with(true)
    }

    /// A server without `libpipewire-module-profiler` (PipeWire's count cannot be had).
    pub fn start_without_profiler() -> PipewireServer {
        Self::start_with(false)
    }

    fn start_with(with_profiler: bool) -> PipewireServer {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let config = directory.path().join("pipewire.conf");
        std::fs::write(&config, configuration(with_profiler)).expect("write pipewire.conf");
        std::fs::create_dir(directory.path().join("run")).expect("the runtime directory");
        let runtime_dir = directory.path().join("run");
        let child = client_command("pipewire", &runtime_dir)
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pipewire (Debian: apt-get install pipewire)");
        let server = PipewireServer { child, directory };
        let socket = server.runtime_dir().join("pipewire-0");
        assert!(
            eventually(Duration::from_secs(10), || socket.exists()),
            "pipewire made no socket in 10 s"
        );
        // The settings metadata appears once the server runs; pw-metadata waits for it.
        let forced = server
            .command("timeout")
            .args([
                "10",
                "pw-metadata",
                "-n",
                "settings",
                "0",
                "clock.force-quantum",
            ])
            .arg(QUANTUM.to_string())
            .stdout(Stdio::null())
            .status()
            .expect("run pw-metadata (Debian: apt-get install pipewire-bin)");
        assert!(forced.success(), "pw-metadata clock.force-quantum failed");
        server
    }

    /// Where its socket is: the `XDG_RUNTIME_DIR` and `PIPEWIRE_RUNTIME_DIR` of its clients.
    pub fn runtime_dir(&self) -> PathBuf {
        self.directory.path().join("run")
    }

    /// `program` with the environment that makes it a client of this server.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        client_command(program, &self.runtime_dir())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the server runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for PipewireServer {
    fn drop(&mut self) {
        end(&mut self.child, Duration::from_secs(3));
    }
}

/// `xrun_client` (the JACK tests' client: works `-l` percent of each cycle) through `pw-jack`;
/// killed on drop. It gets no xrun callback on PipeWire 0.3.65: the profiler is the judge.
pub struct PwJackClient {
    child: Child,
}

impl PwJackClient {
    /// `pw-jack xrun_client -n NAME -w -l LOAD -d SECONDS` on `server` (its process is named
    /// `xrun_client`: pw-jack execs it).
    pub fn start(
        server: &PipewireServer,
        name: &str,
        load_percent: u32,
        seconds: f64,
    ) -> PwJackClient {
        let child = server
            .command("pw-jack")
            .arg(&super::jack::binaries().client)
            .args(["-n", name, "-w", "-l"])
            .arg(load_percent.to_string())
            .arg("-d")
            .arg(seconds.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pw-jack xrun_client (Debian: apt-get install pipewire-jack)");
        PwJackClient { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether PipeWire runs its callback: a SCHED_FIFO thread in the client (PipeWire's data
    /// thread), polled for up to `timeout`.
    pub fn wait_until_active(&self, timeout: Duration) -> bool {
        let task = format!("/proc/{}/task", self.pid());
        eventually(timeout, || realtime_thread_in(&task))
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for it to end by itself.
    pub fn wait(mut self) {
        let _ = self.child.wait();
    }
}

impl Drop for PwJackClient {
    fn drop(&mut self) {
        end(&mut self.child, Duration::from_secs(2));
    }
}

/// `pw-profiler` against a server, logging into a directory of its own (it writes its plot
/// scripts into its working directory); stopped with SIGINT by [`Profiler::stop`], killed on
/// drop.
pub struct Profiler {
    child: Option<Child>,
    directory: tempfile::TempDir,
}

impl Profiler {
    /// Starts it and waits until it has logged its first cycles.
    pub fn start(server: &PipewireServer) -> Profiler {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let log = directory.path().join("profiler.log");
        let child = server
            .command("pw-profiler")
            .arg("-o")
            .arg(&log)
            .current_dir(directory.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(directory.path().join("stdout")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pw-profiler (Debian: apt-get install pipewire-bin)");
        let profiler = Profiler {
            child: Some(child),
            directory,
        };
        assert!(
            eventually(Duration::from_secs(10), || std::fs::metadata(&log)
                .is_ok_and(|meta| meta.len() > 0)),
            "pw-profiler logged nothing in 10 s"
        );
        profiler
    }

    fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    /// Stops it and counts its log (each follower's unfinished cycles).
    pub fn stop(mut self) -> PipewireProfile {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        if !eventually(Duration::from_secs(5), || {
            matches!(child.try_wait(), Ok(Some(_)))
        }) {
            let _ = child.kill();
        }
        let _ = child.wait();
        read_profile(&self.path("profiler.log"), &self.path("stdout"))
    }
}

fn read_profile(log: &Path, stdout: &Path) -> PipewireProfile {
    rtlab_trace::pipewire::parse_profile(
        &std::fs::read_to_string(log).unwrap_or_default(),
        &std::fs::read_to_string(stdout).unwrap_or_default(),
    )
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            end(child, Duration::from_secs(2));
        }
    }
}

/// Whether any `pw-profiler` started by rtlab (in an `rtlab-pw-profiler-*` directory) or such a
/// directory is left.
pub fn rtlab_profiler_left() -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| rtlab_trace::pipewire::is_profiler_directory(&entry.path()))
                .map(|entry| entry.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.starts_with("pw-profiler") && cmdline.contains("rtlab-pw-profiler-") {
            left.push(cmdline);
        }
    }
    left
}

/// Debian's General MIDI soundfont (`timgm6mb-soundfont`).
pub const SOUNDFONT: &str = "/usr/share/sounds/sf2/TimGM6mb.sf2";

/// Why a fluidsynth test cannot run here (fluidsynth or the soundfont missing), or `None`.
pub fn fluidsynth_missing() -> Option<String> {
    let found = Command::new("fluidsynth")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        return Some("fluidsynth is not installed (apt-get install fluidsynth)".into());
    }
    if !Path::new(SOUNDFONT).exists() {
        return Some(format!(
            "{SOUNDFONT} is missing (apt-get install timgm6mb-soundfont)"
        ));
    }
    None
}

/// Debian's `fluidsynth` through `pw-jack` (its JACK driver, no MIDI input), playing the
/// TimGM6mb soundfont's drawbar organ (one voice a held note, until released) with 7-point
/// interpolation, driven through its command shell on stdin. Its real-time thread (PipeWire's
/// data thread, running its JACK process callback) is named `fluidsynth`. It ends when its stdin
/// closes (dropped: stdin closed, then ended) and after `seconds` in any case (`timeout`).
pub struct Fluidsynth {
    child: Child,
    shell: Option<std::process::ChildStdin>,
    held: u32,
}

impl Fluidsynth {
    /// Starts it on `server` for at most `seconds`.
    pub fn start(server: &PipewireServer, seconds: u32) -> Fluidsynth {
        let mut child = server
            .command("timeout")
            .arg(seconds.to_string())
            .args([
                "pw-jack",
                "fluidsynth",
                "-n",
                "-a",
                "jack",
                "-o",
                "synth.polyphony=512",
            ])
            .arg(SOUNDFONT)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pw-jack fluidsynth (Debian: apt-get install fluidsynth)");
        let shell = child.stdin.take();
        let mut fluidsynth = Fluidsynth {
            child,
            shell,
            held: 0,
        };
        fluidsynth.send("prog 0 16\nprog 1 16\ninterp 7\n");
        fluidsynth
    }

    fn send(&mut self, commands: &str) {
        use std::io::Write;
        let shell = self.shell.as_mut().expect("fluidsynth's stdin is open");
        shell
            .write_all(commands.as_bytes())
            .and_then(|()| shell.flush())
            .expect("write to fluidsynth's shell");
    }

    /// Holds `notes` notes (at most 128), releasing those held before.
    pub fn hold(&mut self, notes: u32) {
        assert!(notes <= 128);
        let key = |k: u32| format!("{} {}", k / 64, 24 + k % 64);
        let mut commands: String = (0..self.held)
            .map(|k| format!("noteoff {}\n", key(k)))
            .collect();
        commands.extend((0..notes).map(|k| format!("noteon {} 100\n", key(k))));
        self.send(&commands);
        self.held = notes;
    }

    /// The pid of fluidsynth itself (`timeout` runs pw-jack, which execs fluidsynth), polled for
    /// up to 10 s.
    pub fn pid(&self) -> u32 {
        let parent = self.child.id();
        let mut found = None;
        assert!(
            eventually(Duration::from_secs(10), || {
                found = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
                    .ok()
                    .and_then(|children| children.split_whitespace().next()?.parse().ok());
                found.is_some()
            }),
            "timeout started no fluidsynth"
        );
        found.unwrap()
    }

    /// Whether PipeWire runs its process callback: a SCHED_FIFO thread in fluidsynth, polled
    /// for up to `timeout`.
    pub fn wait_until_active(&self, timeout: Duration) -> bool {
        let task = format!("/proc/{}/task", self.pid());
        eventually(timeout, || realtime_thread_in(&task))
    }

    /// Closes its stdin and waits until it ends (it quits at the end of its input).
    pub fn quit(mut self) {
        self.shell = None;
        assert!(
            eventually(Duration::from_secs(10), || matches!(
                self.child.try_wait(),
                Ok(Some(_))
            )),
            "fluidsynth still runs 10 s after its stdin closed"
        );
    }
}

/// Whether a thread of the process whose task directory is `task` runs SCHED_FIFO.
fn realtime_thread_in(task: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(task) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // Field 41 (policy) after the comm's closing parenthesis: 1 = SCHED_FIFO.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.split_whitespace().nth(38) == Some("1"))
    })
}

impl Drop for Fluidsynth {
    fn drop(&mut self) {
        self.shell = None;
        end(&mut self.child, Duration::from_secs(3));
    }
}
