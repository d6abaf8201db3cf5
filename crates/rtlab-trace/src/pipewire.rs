//! PipeWire's own count of a program's glitches, for the window rtlab watches it: `pw-profiler`
//! (Debian: pipewire-bin) attached to the program's PipeWire server logs, each cycle, every
//! follower node's status when the driver began the next cycle, and a follower that was not
//! finished (status triggered or awake, not finished) is what `pw-top`'s ERR column counts.
//!
//! The log's layout is pw-profiler's `dump_point` (PipeWire 0.3.65, `src/tools/pw-profiler.c`):
//! one line per cycle, tab-separated, 4 driver columns (period and driver time in µs, delay,
//! quantum in µs), then for each of up to 64 followers 8 columns (node id, signal, awake and
//! finish times from the driver's signal in µs, scheduling delay, processing time, status, 0),
//! blank when the follower has status 0 (not triggered) or was not in that cycle. Its standard
//! output names them in slot order (`logging follower 19 ("jackload")`). The log holds no
//! absolute time: it is written into a FIFO and read as it comes, each line stamped with the
//! CLOCK_MONOTONIC time it arrived less the periods of the lines after it in the same batch
//! (the profiler module sends a batch when 16 KiB are waiting, every 0.1 s at a 2.7 ms
//! quantum), and the count is taken over rtlab's window, in 20 ms buckets. Which node is the watched program's comes from `pw-dump` (a client's
//! `application.process.id`). pw-profiler writes its plot scripts into its working directory:
//! it runs in a private directory, removed with the session.

use rtlab_core::pipewire_count::{PipewireFollower, PipewireProfile};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The PipeWire server a program talks to: the environment its library reads to find the
/// socket (`PIPEWIRE_REMOTE`, `PIPEWIRE_RUNTIME_DIR`, `XDG_RUNTIME_DIR`), as the program has it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipewireServer {
    pub environment: Vec<(String, String)>,
}

const SERVER_VARIABLES: [&str; 3] = ["PIPEWIRE_REMOTE", "PIPEWIRE_RUNTIME_DIR", "XDG_RUNTIME_DIR"];

impl PipewireServer {
    /// The server process `pid` uses, when it has libpipewire mapped (a PipeWire client, a JACK
    /// program run through `pw-jack`); `None` when it is not a PipeWire client or is gone.
    pub fn of_process(pid: u32) -> Option<PipewireServer> {
        let library = rtlab_sys::process_environment::maps_library(pid, "libpipewire-0.3.so");
        if !library.unwrap_or(false) {
            return None;
        }
        Some(PipewireServer {
            environment: SERVER_VARIABLES
                .iter()
                .filter_map(|key| {
                    rtlab_sys::process_environment::environment_variable(pid, key)
                        .ok()
                        .flatten()
                        .map(|value| ((*key).to_owned(), value))
                })
                .collect(),
        })
    }

    /// The server rtlab's own environment names (`--pipewire` for a program that is not a
    /// client yet).
    pub fn of_this_process() -> PipewireServer {
        PipewireServer {
            environment: SERVER_VARIABLES
                .iter()
                .filter_map(|key| {
                    std::env::var(key)
                        .ok()
                        .map(|value| ((*key).to_owned(), value))
                })
                .collect(),
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        for key in SERVER_VARIABLES {
            command.env_remove(key);
        }
        command.envs(self.environment.iter().map(|(key, value)| (key, value)));
        command
    }
}

/// Why PipeWire's count could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PipewireError {
    #[error("{0} is not installed (Debian: apt-get install pipewire-bin)")]
    ToolMissing(&'static str),
    #[error("the PipeWire server has no profiler (load libpipewire-module-profiler in its context.modules)")]
    NoProfilerModule,
    #[error("no PipeWire server to connect to ({0})")]
    NoServer(String),
    #[error("pw-profiler ended: {0}")]
    ProfilerFailed(String),
    #[error("pw-profiler's log: {0}")]
    Io(#[from] std::io::Error),
}

/// Removes the profiler directories of rtlab processes that no longer run (a watch killed with
/// SIGKILL could not remove its own): `rtlab-pw-profiler-PID-N` in the temporary directory.
fn sweep_stale_directories() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("rtlab-pw-profiler-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `pw-profiler` attached to a server, logging into a private directory; stopped and its
/// directory removed when finished or dropped.
pub struct ProfilerSession {
    child: Option<Child>,
    directory: PathBuf,
    server: PipewireServer,
    /// The FIFO's reader: the log's cycles counted per bucket of arrival time.
    reader: Option<JoinHandle<()>>,
    reader_stop: Arc<AtomicBool>,
    buckets: Arc<Mutex<Buckets>>,
    /// The graph's nodes when the profiler attached (a client that leaves mid-watch is no
    /// longer in `pw-dump` at the end).
    nodes_at_start: Vec<NodeOwner>,
}

/// How long `start` waits for the profiler to attach or fail.
const ATTACH_WAIT: Duration = Duration::from_secs(3);

impl ProfilerSession {
    /// Starts `pw-profiler` against `server` and waits until it logs its first cycles, or fails
    /// (no server, no profiler module), or [`ATTACH_WAIT`] passes with the graph idle.
    pub fn start(server: &PipewireServer) -> Result<ProfilerSession, PipewireError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        sweep_stale_directories();
        let directory = std::env::temp_dir().join(format!(
            "rtlab-pw-profiler-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&directory)?;
        let mut session = ProfilerSession {
            child: None,
            directory,
            server: server.clone(),
            nodes_at_start: Vec::new(),
            reader: None,
            reader_stop: Arc::new(AtomicBool::new(false)),
            buckets: Arc::default(),
        };
        let log = session.directory.join("profiler.log");
        rtlab_sys::fifo::make_fifo(&log)?;
        let mut fifo = rtlab_sys::fifo::open_fifo_reader(&log)?;
        let (stop, buckets) = (
            Arc::clone(&session.reader_stop),
            Arc::clone(&session.buckets),
        );
        session.reader = Some(std::thread::spawn(move || {
            read_log(&mut fifo, &stop, &buckets)
        }));
        let mut command = server.command("pw-profiler");
        // Its own process group, and SIGTERM when rtlab dies (a SIGKILL included): no profiler
        // outlives the watch.
        rtlab_sys::load_syscalls::configure_load_command(&mut command);
        let spawned = command
            .arg("-o")
            .arg(&log)
            .current_dir(&session.directory)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(session.directory.join("stdout"))?)
            .stderr(std::fs::File::create(session.directory.join("stderr"))?)
            .spawn();
        session.child = Some(match spawned {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(PipewireError::ToolMissing("pw-profiler"))
            }
            Err(error) => return Err(error.into()),
        });
        let started = Instant::now();
        while started.elapsed() < ATTACH_WAIT {
            if let Some(status) = session.child_mut().try_wait()? {
                let (stdout, stderr) = (session.read("stdout"), session.read("stderr"));
                session.child = None;
                return Err(profiler_error(&stdout, &stderr, &status.to_string()));
            }
            if has_cycles(&session.buckets) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        session.nodes_at_start = session.node_owners();
        Ok(session)
    }

    fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("a running pw-profiler")
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.directory.join(name)).unwrap_or_default()
    }

    /// Stops the profiler (SIGINT: it closes its log) and counts what it logged over `window`
    /// (CLOCK_MONOTONIC ns, first and last; all of it when `None`); the followers whose client
    /// process is one of `watched_pids` are marked watched.
    pub fn finish(
        mut self,
        watched_pids: &[u32],
        window: Option<(u64, u64)>,
    ) -> Result<PipewireProfile, PipewireError> {
        let mut nodes = self.node_owners();
        nodes.append(&mut self.nodes_at_start);
        let mut child = self.child.take().expect("a running pw-profiler");
        if let Some(status) = child.try_wait()? {
            return Err(profiler_error(
                &self.read("stdout"),
                &self.read("stderr"),
                &status.to_string(),
            ));
        }
        let _ = rtlab_sys::signals::interrupt(child.id());
        let stopped = Instant::now();
        while child.try_wait()?.is_none() {
            if stopped.elapsed() > Duration::from_secs(3) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PipewireError::ProfilerFailed(
                    "it did not stop on SIGINT within 3 s".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop_reader();
        let buckets = std::mem::take(&mut *self.buckets.lock().expect("the reader ended"));
        let mut profile = buckets.profile(&self.read("stdout"), window);
        for follower in &mut profile.followers {
            follower.watched = nodes
                .iter()
                .any(|node| node.id == follower.node_id && watched_pids.contains(&node.pid));
        }
        if let Some(driver) = profile.driver_id {
            profile.driver_name = nodes
                .iter()
                .find(|node| node.id == driver)
                .map(|node| node.name.clone());
        }
        Ok(profile)
    }

    /// Each node's name and its client's process id, from `pw-dump` (empty when it fails).
    fn node_owners(&self) -> Vec<NodeOwner> {
        let output = self
            .server
            .command("pw-dump")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match output {
            Ok(output) if output.status.success() => {
                node_owners(&String::from_utf8_lossy(&output.stdout))
            }
            _ => Vec::new(),
        }
    }
}

impl ProfilerSession {
    fn stop_reader(&mut self) {
        self.reader_stop.store(true, Ordering::SeqCst);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for ProfilerSession {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_reader();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// Why a `pw-profiler` that ended by itself ended, from its output: connected (it printed
/// `Logging to …`, which comes after the connection) but never attached to a profiler (no
/// `Attaching to Profiler`) is a server without the module (its own message, "no Profiler
/// Interface found", is a log line that PipeWire's default log level does not show).
fn profiler_error(stdout: &str, stderr: &str, status: &str) -> PipewireError {
    let connected_unattached =
        stdout.contains("Logging to") && !stdout.contains("Attaching to Profiler");
    if stderr.contains("no Profiler Interface found") || connected_unattached {
        PipewireError::NoProfilerModule
    } else if stderr.contains("connect") {
        PipewireError::NoServer(last_line(stderr))
    } else {
        let said = last_line(stderr);
        PipewireError::ProfilerFailed(if said.is_empty() {
            status.to_owned()
        } else {
            format!("{status}: {said}")
        })
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The width of the buckets cycles are counted in, by arrival time.
const BUCKET_NS: u64 = 20_000_000;

/// The log's cycles counted per [`BUCKET_NS`] of their time: per bucket, the cycles and per
/// follower node (cycles scheduled, unfinished). Bounded by the watch's length (50 buckets a
/// second), not by the number of cycles.
#[derive(Debug, Default)]
struct Buckets {
    by_time: BTreeMap<u64, Bucket>,
    /// A line cut by a read, completed by the next.
    partial: String,
}

#[derive(Debug, Default)]
struct Bucket {
    cycles: u64,
    followers: Vec<(u32, u64, u64)>,
}

/// One cycle of the log: its quantum in ns and each follower's node id and status.
struct Cycle {
    quantum_ns: u64,
    followers: Vec<(u32, i32)>,
}

/// One line of the log (see the module's `//!`), `None` for anything else.
fn parse_cycle(line: &str) -> Option<Cycle> {
    let columns: Vec<&str> = line.split('\t').collect();
    if columns.len() < 4 || columns[0].trim().parse::<i64>().is_err() {
        return None;
    }
    let quantum_ns = columns[3].trim().parse::<u64>().unwrap_or(0) * 1_000;
    let followers = columns[4..]
        .chunks(8)
        .filter(|block| block.len() >= 7)
        .filter_map(|block| {
            Some((
                block[0].trim().parse::<u32>().ok()?,
                block[6].trim().parse::<i32>().ok()?,
            ))
        })
        .collect();
    Some(Cycle {
        quantum_ns,
        followers,
    })
}

impl Buckets {
    /// Adds `text` that arrived at `arrived_ns`: its whole lines are cycles that ended one
    /// quantum apart, the last at `arrived_ns`.
    fn add(&mut self, text: &str, arrived_ns: u64) {
        self.partial.push_str(text);
        let Some(end) = self.partial.rfind('\n') else {
            return;
        };
        let complete: String = self.partial.drain(..=end).collect();
        let cycles: Vec<Cycle> = complete.lines().filter_map(parse_cycle).collect();
        let mut time_ns = arrived_ns;
        for cycle in cycles.iter().rev() {
            self.add_cycle(cycle, time_ns);
            time_ns = time_ns.saturating_sub(cycle.quantum_ns);
        }
    }

    fn add_cycle(&mut self, cycle: &Cycle, time_ns: u64) {
        let bucket = self.by_time.entry(time_ns / BUCKET_NS).or_default();
        bucket.cycles += 1;
        for &(node_id, status) in &cycle.followers {
            let index = match bucket.followers.iter().position(|f| f.0 == node_id) {
                Some(index) => index,
                None => {
                    bucket.followers.push((node_id, 0, 0));
                    bucket.followers.len() - 1
                }
            };
            bucket.followers[index].1 += 1;
            // 3 is PW_NODE_ACTIVATION_FINISHED; 1 triggered and 2 awake are unfinished.
            if status != 3 {
                bucket.followers[index].2 += 1;
            }
        }
    }

    /// The profile of the buckets within `window` (all when `None`), the followers named by
    /// `stdout`.
    fn profile(&self, stdout: &str, window: Option<(u64, u64)>) -> PipewireProfile {
        let mut profile = profile_names(stdout);
        let range = match window {
            Some((first, last)) => first / BUCKET_NS..=last / BUCKET_NS,
            None => 0..=u64::MAX,
        };
        for bucket in self.by_time.range(range).map(|(_, bucket)| bucket) {
            profile.cycles += bucket.cycles;
            for &(node_id, cycles, unfinished) in &bucket.followers {
                let follower = follower_entry(&mut profile, node_id);
                follower.cycles += cycles;
                follower.unfinished += unfinished;
            }
        }
        profile
    }
}

fn follower_entry(profile: &mut PipewireProfile, node_id: u32) -> &mut PipewireFollower {
    let index = match profile.followers.iter().position(|f| f.node_id == node_id) {
        Some(index) => index,
        None => {
            profile.followers.push(PipewireFollower {
                node_id,
                name: format!("node {node_id}"),
                cycles: 0,
                unfinished: 0,
                watched: false,
            });
            profile.followers.len() - 1
        }
    };
    &mut profile.followers[index]
}

fn has_cycles(buckets: &Mutex<Buckets>) -> bool {
    buckets
        .lock()
        .is_ok_and(|buckets| !buckets.by_time.is_empty())
}

/// Reads the profiler's FIFO until `stop` and nothing more is waiting, counting its cycles.
fn read_log(fifo: &mut std::fs::File, stop: &AtomicBool, buckets: &Mutex<Buckets>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match fifo.read(&mut buffer) {
            Ok(0) if stop.load(Ordering::SeqCst) => return,
            Ok(read) if read > 0 => {
                let now = rtlab_sys::clock::monotonic_ns();
                let text = String::from_utf8_lossy(&buffer[..read]);
                if let Ok(mut buckets) = buckets.lock() {
                    buckets.add(&text, now);
                }
                continue;
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => return,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Counts a whole `pw-profiler` log (`stdout`: what it printed, which names the followers).
pub fn parse_profile(log: &str, stdout: &str) -> PipewireProfile {
    let mut buckets = Buckets::default();
    buckets.add(log, 0);
    buckets.profile(stdout, None)
}

/// The driver and followers `pw-profiler`'s standard output names.
fn profile_names(stdout: &str) -> PipewireProfile {
    let mut profile = PipewireProfile::default();
    for line in stdout.split(['\n', '\r']) {
        if let Some(rest) = line.strip_prefix("logging driver ") {
            profile.driver_id = rest.trim().parse().ok();
        } else if let Some(rest) = line.strip_prefix("logging follower ") {
            let Some((id, name)) = rest.split_once(' ') else {
                continue;
            };
            let Ok(node_id) = id.parse() else { continue };
            profile.followers.push(PipewireFollower {
                node_id,
                name: name
                    .trim()
                    .trim_start_matches("(\"")
                    .trim_end_matches("\")")
                    .to_owned(),
                cycles: 0,
                unfinished: 0,
                watched: false,
            });
        }
    }
    profile
}

#[derive(Debug, PartialEq)]
struct NodeOwner {
    id: u32,
    name: String,
    pid: u32,
}

#[derive(Deserialize)]
struct DumpObject {
    id: u32,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    info: Option<DumpInfo>,
}

#[derive(Deserialize)]
struct DumpInfo {
    #[serde(default)]
    props: Option<DumpProps>,
}

#[derive(Deserialize, Default)]
struct DumpProps {
    #[serde(rename = "node.name")]
    node_name: Option<String>,
    #[serde(rename = "client.id")]
    client_id: Option<u32>,
    #[serde(rename = "application.process.id")]
    process_id: Option<u32>,
}

/// Nodes with their client's process id, from `pw-dump`'s JSON (nodes of the server itself,
/// such as the driver, get pid 0).
fn node_owners(dump: &str) -> Vec<NodeOwner> {
    let Ok(objects) = serde_json::from_str::<Vec<DumpObject>>(dump) else {
        return Vec::new();
    };
    fn props(object: &DumpObject) -> Option<&DumpProps> {
        object.info.as_ref().and_then(|info| info.props.as_ref())
    }
    let client_pid = |client: u32| {
        objects
            .iter()
            .find(|object| object.id == client && object.kind.ends_with(":Client"))
            .and_then(|object| props(object).and_then(|props| props.process_id))
    };
    objects
        .iter()
        .filter(|object| object.kind.ends_with(":Node"))
        .map(|object| {
            let props = props(object);
            NodeOwner {
                id: object.id,
                name: props
                    .and_then(|props| props.node_name.clone())
                    .unwrap_or_default(),
                pid: props
                    .and_then(|props| props.client_id)
                    .and_then(client_pid)
                    .unwrap_or(0),
            }
        })
        .collect()
}

/// Whether a directory is one of this module's (tests check nothing is left behind).
pub fn is_profiler_directory(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with("rtlab-pw-profiler-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank_followers(n: usize) -> String {
        " \t".repeat(8 * n)
    }

    #[test]
    fn a_log_counts_each_followers_unfinished_cycles() {
        let stdout = "Logging to /tmp/x/profiler.log\nAttaching to Profiler id:4\n\
                      logging driver 16\nlogging follower 19 (\"jackload\")\n\
                      logging 376 samples  0 seconds [CPU 0.3 0.3 0.3]\r\
                      logging follower 23 (\"synth\")\n";
        let finished = format!(
            "2683\t857\t0\t2666\t19\t0\t21\t822\t0\t801\t3\t0\t{}\n",
            blank_followers(63)
        );
        let awake = format!(
            "2668\t870\t0\t2666\t19\t0\t41\t842\t0\t801\t2\t0\t23\t5\t9\t20\t4\t11\t1\t0\t{}\n",
            blank_followers(62)
        );
        let absent = format!("2668\t870\t0\t2666\t{}\n", blank_followers(64));
        let log = format!("{finished}{awake}{absent}{finished}");
        let profile = parse_profile(&log, stdout);
        assert_eq!(profile.driver_id, Some(16));
        assert_eq!(profile.cycles, 4);
        assert_eq!(profile.followers.len(), 2);
        assert_eq!(profile.followers[0].name, "jackload");
        assert_eq!(
            (profile.followers[0].cycles, profile.followers[0].unfinished),
            (3, 1)
        );
        assert_eq!(profile.followers[1].name, "synth");
        assert_eq!(
            (profile.followers[1].cycles, profile.followers[1].unfinished),
            (1, 1)
        );
    }

    #[test]
    fn cycles_are_counted_over_the_window_by_their_arrival() {
        let line =
            |status: u32| format!("2666\t800\t0\t2666\t19\t0\t21\t822\t0\t801\t{status}\t0\t\n");
        let mut buckets = Buckets::default();
        // Two batches: the first's lines end at 1 s, the second's at 2 s, cut mid-line.
        buckets.add(&(line(3) + &line(2)), 1_000_000_000);
        let second = line(1) + &line(3);
        buckets.add(&second[..10], 2_000_000_000);
        buckets.add(&second[10..], 2_000_000_000);
        let stdout = "logging follower 19 (\"jackload\")\n";
        let whole = buckets.profile(stdout, None);
        assert_eq!(whole.cycles, 4);
        assert_eq!(whole.followers[0].unfinished, 2);
        let late = buckets.profile(stdout, Some((1_500_000_000, 2_500_000_000)));
        assert_eq!((late.cycles, late.followers[0].unfinished), (2, 1));
        let early = buckets.profile(stdout, Some((0, 1_000_000_000)));
        assert_eq!((early.cycles, early.followers[0].unfinished), (2, 1));
    }

    #[test]
    fn garbage_is_skipped() {
        let profile = parse_profile("\n\nnot a number\tx\n1\t2\n", "");
        assert_eq!(profile.cycles, 0);
        assert!(profile.followers.is_empty());
    }

    #[test]
    fn pw_dump_gives_each_node_its_clients_process() {
        let dump = r#"[
          {"id": 16, "type": "PipeWire:Interface:Node", "info": {"props": {"node.name": "Dummy-Driver", "node.driver": true}}},
          {"id": 18, "type": "PipeWire:Interface:Client", "info": {"props": {"application.process.id": 16662}}},
          {"id": 19, "type": "PipeWire:Interface:Node", "info": {"props": {"client.id": 18, "node.name": "jackload"}}},
          {"id": 17, "type": "PipeWire:Interface:Metadata", "props": {}, "metadata": []}
        ]"#;
        assert_eq!(
            node_owners(dump),
            vec![
                NodeOwner {
                    id: 16,
                    name: "Dummy-Driver".into(),
                    pid: 0
                },
                NodeOwner {
                    id: 19,
                    name: "jackload".into(),
                    pid: 16662
                },
            ]
        );
        assert!(node_owners("not json").is_empty());
    }

    #[test]
    fn a_profiler_that_ended_says_why() {
        assert!(matches!(
            profiler_error("Logging to /tmp/x/profiler.log\n", "", "exit status: 0"),
            PipewireError::NoProfilerModule
        ));
        assert!(matches!(
            profiler_error(
                "",
                "[E] no Profiler Interface found, please load one in the server\n",
                "exit status: 0"
            ),
            PipewireError::NoProfilerModule
        ));
        assert!(matches!(
            profiler_error("", "Can't connect: Host is down\n", "exit status: 255"),
            PipewireError::NoServer(_)
        ));
    }
}
