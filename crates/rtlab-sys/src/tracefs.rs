//! tracefs: finding (or mounting) the tracing file system and owning a private trace instance.
//!
//! rtlab records through its own instance (`instances/rtlab-<pid>`) so it never touches the global
//! buffer another tool may be using, and so that an instance left behind by a killed rtlab is
//! recognisable and removable (its pid is dead). The [`Instance`] guard disables tracing and removes
//! the directory on drop, which covers normal exit, errors and panics; instances of processes that
//! died harder are removed by [`remove_stale_instances`] at the next start.
//!
//! One global setting is touched, for the moment an instance is created: `options/record-cmd`.
//! With it on, every `sched_switch` also copies task names into a global table (about 0.2 µs per
//! switch in a VM, on the measured thread's wake-up path), which rtlab does not need because the
//! events carry the names. An instance copies the global options when it is created and this one
//! can only be set globally, so rtlab turns it off around its `mkdir` and straight back on, under a
//! lock and with a journal in `/run/rtlab` that the next start replays if rtlab was killed in
//! between ([`Tracefs::repair_options`]).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where tracefs lives on current kernels.
pub const TRACEFS_PATH: &str = "/sys/kernel/tracing";
/// Where it lived before 4.1, through debugfs.
const LEGACY_TRACEFS_PATH: &str = "/sys/kernel/debug/tracing";
/// Name prefix of rtlab's instances; the suffix is the owning process id.
pub const INSTANCE_PREFIX: &str = "rtlab-";

/// Where the lock and the journal of global options rtlab changed live.
const STATE_DIR: &str = "/run/rtlab";
/// The global option turned off while an instance is created.
const COMM_RECORDING_OPTION: &str = "record-cmd";
/// Journal files in the state directory: `option-<name>` holds the value to put back.
const JOURNAL_PREFIX: &str = "option-";

/// A tracefs mount: either found already mounted, or mounted by us (then unmounted on drop).
#[derive(Debug)]
pub struct Tracefs {
    root: PathBuf,
    mounted_by_us: bool,
    state_dir: PathBuf,
}

fn is_tracefs(path: &Path) -> bool {
    path.join("instances").is_dir() && path.join("events").is_dir()
}

impl Tracefs {
    /// Finds tracefs, mounting it at /sys/kernel/tracing when it is not mounted anywhere.
    pub fn open() -> io::Result<Tracefs> {
        for candidate in [TRACEFS_PATH, LEGACY_TRACEFS_PATH] {
            if is_tracefs(Path::new(candidate)) {
                return Ok(Tracefs {
                    root: PathBuf::from(candidate),
                    mounted_by_us: false,
                    state_dir: PathBuf::from(STATE_DIR),
                });
            }
        }
        mount_tracefs(Path::new(TRACEFS_PATH))?;
        if !is_tracefs(Path::new(TRACEFS_PATH)) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("mounted tracefs at {TRACEFS_PATH} but it has no instances/ or events/"),
            ));
        }
        Ok(Tracefs {
            root: PathBuf::from(TRACEFS_PATH),
            mounted_by_us: true,
            state_dir: PathBuf::from(STATE_DIR),
        })
    }

    /// A tracefs tree at an arbitrary path (tests point this at a fake directory), with its lock
    /// and journal in `state_dir`.
    pub fn at(root: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Tracefs {
        Tracefs {
            root: root.into(),
            mounted_by_us: false,
            state_dir: state_dir.into(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when rtlab mounted tracefs itself (and will unmount it).
    pub fn mounted_by_us(&self) -> bool {
        self.mounted_by_us
    }

    /// Reads a file below the root, e.g. `events/header_page`.
    pub fn read(&self, relative: &str) -> io::Result<String> {
        read_control_file(&self.root.join(relative))
    }

    /// Creates `instances/<name>` with task-name recording off (see the module docs). Returns the
    /// instance and whether recording is off in it; when the option cannot be changed safely (no
    /// state directory, an unexpected value) the instance is created as it is.
    pub fn create_instance_without_comm_recording(
        &self,
        name: &str,
    ) -> io::Result<(Instance, bool)> {
        let option = self.root.join("options").join(COMM_RECORDING_OPTION);
        let Ok(_lock) = self.lock_state() else {
            return Ok((self.create_instance(name)?, false));
        };
        self.repair_options_locked();
        let current = read_control_file(&option).map(|value| value.trim().to_owned());
        match current.as_deref() {
            Ok("0") => Ok((self.create_instance(name)?, true)),
            Ok("1") => {
                let journal = self
                    .state_dir
                    .join(format!("{JOURNAL_PREFIX}{COMM_RECORDING_OPTION}"));
                if std::fs::write(&journal, "1").is_err() {
                    return Ok((self.create_instance(name)?, false));
                }
                write_control_file(&option, "0")?;
                let created = self.create_instance(name);
                // Put it back whatever mkdir said; the journal goes only once it is back.
                write_control_file(&option, "1")?;
                let _ = std::fs::remove_file(&journal);
                Ok((created?, true))
            }
            _ => Ok((self.create_instance(name)?, false)),
        }
    }

    /// Puts back global options a killed rtlab left changed (from the journal). Returns what it
    /// restored, as `option=value`.
    pub fn repair_options(&self) -> Vec<String> {
        match self.lock_state() {
            Ok(_lock) => self.repair_options_locked(),
            Err(_) => Vec::new(),
        }
    }

    fn repair_options_locked(&self) -> Vec<String> {
        let mut repaired = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.state_dir) else {
            return repaired;
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some(option) = file_name
                .to_str()
                .and_then(|name| name.strip_prefix(JOURNAL_PREFIX))
            else {
                continue;
            };
            // Only the option rtlab changes, and only a 0/1 value: never write what a journal
            // file merely claims.
            if option != COMM_RECORDING_OPTION {
                continue;
            }
            let Ok(value) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            let value = value.trim();
            if value != "0" && value != "1" {
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            if write_control_file(&self.root.join("options").join(option), value).is_ok() {
                let _ = std::fs::remove_file(entry.path());
                repaired.push(format!("{option}={value}"));
            }
        }
        repaired
    }

    /// An exclusive lock on the state directory, shared by every rtlab process.
    fn lock_state(&self) -> io::Result<File> {
        std::fs::create_dir_all(&self.state_dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.state_dir.join("tracefs.lock"))?;
        lock.lock()?;
        Ok(lock)
    }

    /// Creates `instances/<name>`; the guard removes it again.
    pub fn create_instance(&self, name: &str) -> io::Result<Instance> {
        let path = self.root.join("instances").join(name);
        std::fs::create_dir(&path).map_err(|error| with_path(error, &path))?;
        Ok(Instance { path })
    }

    /// Removes `instances/rtlab-<pid>` directories whose process is gone. Returns their names.
    pub fn remove_stale_instances(&self) -> io::Result<Vec<String>> {
        remove_stale_instances(&self.root.join("instances"))
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            if let Ok(path) = CString::new(self.root.as_os_str().as_encoded_bytes()) {
                // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

fn mount_tracefs(target: &Path) -> io::Result<()> {
    let source = CString::new("nodev").expect("literal has no NUL");
    let fstype = CString::new("tracefs").expect("literal has no NUL");
    let target_c = CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "tracefs path contains NUL"))?;
    // SAFETY: all three strings are valid and NUL-terminated for the duration of the call; the
    // data pointer may be null for tracefs.
    let result = unsafe {
        libc::mount(
            source.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        let error = io::Error::last_os_error();
        Err(io::Error::new(
            error.kind(),
            format!("mounting tracefs at {}: {error}", target.display()),
        ))
    }
}

pub(crate) fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// Reads a tracefs file with large reads. Some of them (`events/header_page`) answer a small first
/// read with a truncated text and then end-of-file, so `read_to_string`'s 32-byte probe read would
/// lose most of the file.
pub fn read_control_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path).map_err(|error| with_path(error, path))?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let length = file
            .read(&mut chunk)
            .map_err(|error| with_path(error, path))?;
        if length == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..length]);
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not UTF-8", path.display()),
        )
    })
}

/// Writes a control file that must already exist (never creates one).
fn write_control_file(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|error| with_path(error, path))?;
    file.write_all(value.as_bytes())
        .map_err(|error| with_path(error, path))
}

/// Writes to a control file that must already exist (never creates one); errors are ignored
/// because this runs on clean-up paths.
fn write_existing(path: &Path, value: &str) {
    if let Ok(mut file) = OpenOptions::new().write(true).open(path) {
        let _ = file.write_all(value.as_bytes());
    }
}

/// The pid encoded in an rtlab instance name (`rtlab-<pid>` or `rtlab-<pid>-<n>`), if it is one.
pub fn instance_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let pid = rest.split('-').next()?;
    pid.parse().ok()
}

/// The text of /proc/kallsyms (kernel symbol addresses; zeros unless root or kptr_restrict=0).
pub fn read_kallsyms() -> io::Result<String> {
    std::fs::read_to_string("/proc/kallsyms")
        .map_err(|error| with_path(error, Path::new("/proc/kallsyms")))
}

pub(crate) fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes rtlab instances (below `instances_dir`) whose owning process no longer exists.
pub fn remove_stale_instances(instances_dir: &Path) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    let entries =
        std::fs::read_dir(instances_dir).map_err(|error| with_path(error, instances_dir))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = instance_owner(&name) else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        write_existing(&entry.path().join("tracing_on"), "0");
        std::fs::remove_dir(entry.path()).map_err(|error| with_path(error, &entry.path()))?;
        removed.push(name);
    }
    Ok(removed)
}

/// A private trace instance; tracing is switched off and the directory removed on drop.
///
/// Open files inside the instance (per-CPU readers, the marker) keep it busy: drop them first.
#[derive(Debug)]
pub struct Instance {
    path: PathBuf,
}

impl Instance {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `value` to a control file of the instance (`trace_clock`, `events/sched/enable`, …).
    pub fn write(&self, relative: &str, value: &str) -> io::Result<()> {
        write_control_file(&self.path.join(relative), value)
    }

    pub fn read(&self, relative: &str) -> io::Result<String> {
        read_control_file(&self.path.join(relative))
    }

    pub fn exists(&self, relative: &str) -> bool {
        self.path.join(relative).exists()
    }

    /// Opens `per_cpu/cpuN/trace_pipe_raw` non-blocking: reads return whole (or partial) ring
    /// buffer pages and `WouldBlock` when the CPU has nothing new.
    pub fn open_cpu_raw(&self, cpu: usize) -> io::Result<RawPipe> {
        let path = self.path.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|error| with_path(error, &path))?;
        Ok(RawPipe { file, cpu })
    }

    /// Opens the instance's `trace_marker` for writing markers into its buffer.
    pub fn open_marker(&self) -> io::Result<Marker> {
        let path = self.path.join("trace_marker");
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|error| with_path(error, &path))?;
        Ok(Marker::new(file))
    }

    /// Per-CPU ring buffer statistics (`per_cpu/cpuN/stats`): overrun and dropped counts.
    pub fn cpu_stats(&self, cpu: usize) -> io::Result<CpuBufferStats> {
        Ok(parse_cpu_stats(
            &self.read(&format!("per_cpu/cpu{cpu}/stats"))?,
        ))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        write_existing(&self.path.join("tracing_on"), "0");
        write_existing(&self.path.join("events/enable"), "0");
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Counters from `per_cpu/cpuN/stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuBufferStats {
    /// Events overwritten because the buffer was full before we read it.
    pub overrun: u64,
    /// Events dropped because the buffer was full (non-overwrite mode).
    pub dropped: u64,
    pub entries: u64,
}

/// Parses the text of a `per_cpu/cpuN/stats` file; unknown lines are ignored.
pub fn parse_cpu_stats(text: &str) -> CpuBufferStats {
    let mut stats = CpuBufferStats::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match key.trim() {
            "overrun" => stats.overrun = value,
            "dropped events" => stats.dropped = value,
            "entries" => stats.entries = value,
            _ => {}
        }
    }
    stats
}

/// A non-blocking reader of one CPU's binary ring buffer pages.
#[derive(Debug)]
pub struct RawPipe {
    file: File,
    cpu: usize,
}

impl RawPipe {
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Reads one page into `page` (which must be one ring-buffer page long). Returns `Ok(None)`
    /// when nothing is available now, `Ok(Some(length))` otherwise.
    pub fn read_page(&mut self, page: &mut [u8]) -> io::Result<Option<usize>> {
        match self.file.read(page) {
            Ok(0) => Ok(None),
            Ok(length) => Ok(Some(length)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// The instance's `trace_marker`: each write becomes one `ftrace/print` event in the buffer of the
/// CPU that wrote it.
///
/// Shared (behind an `Arc`) by the recorder and the probe's measuring threads, which mark a late
/// sample the moment they take it, so a write takes no lock: it counts itself in, checks that the
/// marker is not revoked, writes, and counts itself out. `revoke` first marks it revoked, then waits
/// for the writers already in, then closes the file for every holder at once, so the instance can be
/// removed (the kernel refuses to remove an instance while one of its files is open). Both sides use
/// sequentially consistent operations, so a writer either sees the revocation or is waited for.
#[derive(Debug)]
pub struct Marker {
    /// The descriptor writers use; open until `revoke` closes `file` after the last writer left.
    raw_fd: std::os::fd::RawFd,
    /// The owner's handle, taken (closed) by `revoke`; writers never touch it.
    file: std::sync::Mutex<Option<File>>,
    revoked: std::sync::atomic::AtomicBool,
    writers: std::sync::atomic::AtomicUsize,
}

impl Marker {
    fn new(file: File) -> Marker {
        use std::os::fd::AsRawFd;
        Marker {
            raw_fd: file.as_raw_fd(),
            file: std::sync::Mutex::new(Some(file)),
            revoked: std::sync::atomic::AtomicBool::new(false),
            writers: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Writes one marker; false when it was not written (revoked, or the write failed). One
    /// `write(2)`, no allocation, no lock.
    pub fn write(&self, bytes: &[u8]) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.writers.fetch_add(1, SeqCst);
        let written = !self.revoked.load(SeqCst) && {
            // SAFETY: `raw_fd` belongs to `file`, which `revoke` closes only after setting
            // `revoked` and seeing no writer counted in; this writer counted itself in before
            // reading `revoked` as false, so the descriptor is open for the whole call. `bytes` is
            // a valid slice for `bytes.len()` bytes.
            let result = unsafe { libc::write(self.raw_fd, bytes.as_ptr().cast(), bytes.len()) };
            result >= 0
        };
        self.writers.fetch_sub(1, SeqCst);
        written
    }

    /// Closes the file; later writes do nothing. Waits for writes in progress (one syscall each).
    pub fn revoke(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.revoked.store(true, SeqCst);
        while self.writers.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        let mut guard = match self.file.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.take();
    }
}

/// The size of one ring buffer page (sub-buffer) as trace_pipe_raw returns it.
pub fn ring_page_size(tracefs: &Tracefs) -> usize {
    if let Ok(text) = tracefs.read("buffer_subbuf_size_kb") {
        if let Ok(kib) = text.trim().parse::<usize>() {
            if kib > 0 {
                return kib * 1024;
            }
        }
    }
    // SAFETY: sysconf takes a constant and has no side effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_carry_their_owner() {
        assert_eq!(instance_owner("rtlab-1234"), Some(1234));
        assert_eq!(instance_owner("rtlab-"), None);
        assert_eq!(instance_owner("rtlab-12x"), None);
        assert_eq!(instance_owner("rtlab-12-3"), Some(12));
        assert_eq!(instance_owner("other-1"), None);
    }

    #[test]
    fn stale_instances_of_dead_processes_are_removed() {
        let directory = tempdir();
        let instances = directory.join("instances");
        std::fs::create_dir_all(&instances).unwrap();
        // pid_max is at most 2^22, so this pid cannot exist.
        std::fs::create_dir(instances.join("rtlab-99999999")).unwrap();
        let own = format!("rtlab-{}", std::process::id());
        std::fs::create_dir(instances.join(&own)).unwrap();
        std::fs::create_dir(instances.join("someone-else")).unwrap();
        let removed = remove_stale_instances(&instances).unwrap();
        assert_eq!(removed, vec!["rtlab-99999999".to_owned()]);
        assert!(instances.join(&own).exists());
        assert!(instances.join("someone-else").exists());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    /// The kernel refuses to remove an instance whose files are open; a revoked marker must not
    /// keep it, however many holders are left.
    #[test]
    #[ignore = "needs root and tracefs"]
    fn a_revoked_marker_lets_the_instance_go() {
        let tracefs = Tracefs::open()
            .unwrap_or_else(|error| panic!("this test needs tracefs (run it as root): {error}"));
        let name = format!("{INSTANCE_PREFIX}{}-marker-test", std::process::id());
        let instance = tracefs.create_instance(&name).unwrap();
        let path = instance.path().to_owned();
        let marker = std::sync::Arc::new(instance.open_marker().unwrap());
        let held_elsewhere = std::sync::Arc::clone(&marker);
        assert!(marker.write(b"rtlab test marker\n"));
        assert_eq!(
            std::fs::remove_dir(&path).map_err(|error| error.raw_os_error()),
            Err(Some(libc::EBUSY)),
            "the open marker keeps the instance"
        );
        // Writers on other threads while it is revoked: none may write through a closed (or
        // reused) descriptor, and the revocation may not leave the file open.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let marker = std::sync::Arc::clone(&marker);
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut written = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        written += u64::from(marker.write(b"rtlab test marker\n"));
                    }
                    written
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        marker.revoke();
        assert!(!held_elsewhere.write(b"after revoke\n"));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written: u64 = writers
            .into_iter()
            .map(|writer| writer.join().unwrap())
            .sum();
        assert!(written > 0, "the writers wrote before the revocation");
        drop(instance);
        assert!(!path.exists(), "{} was left behind", path.display());
    }

    /// A fake tracefs tree: `options/record-cmd` holding `value`, and an `instances/` directory.
    fn fake_tracefs(value: &str) -> (Tracefs, PathBuf) {
        let directory = tempdir();
        std::fs::create_dir_all(directory.join("tree/options")).unwrap();
        std::fs::create_dir_all(directory.join("tree/instances")).unwrap();
        std::fs::write(directory.join("tree/options/record-cmd"), value).unwrap();
        (
            Tracefs::at(directory.join("tree"), directory.join("state")),
            directory,
        )
    }

    fn record_cmd(directory: &Path) -> String {
        std::fs::read_to_string(directory.join("tree/options/record-cmd")).unwrap()
    }

    #[test]
    fn comm_recording_is_off_only_while_the_instance_is_created() {
        let (tracefs, directory) = fake_tracefs("1");
        let (instance, off) = tracefs
            .create_instance_without_comm_recording("rtlab-1-test")
            .unwrap();
        assert!(off);
        assert!(instance.path().is_dir());
        assert_eq!(record_cmd(&directory), "1", "the global option is back");
        let journal: Vec<_> = std::fs::read_dir(directory.join("state"))
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name())
            .filter(|name| name.to_string_lossy().starts_with(JOURNAL_PREFIX))
            .collect();
        assert!(journal.is_empty(), "journal left: {journal:?}");
        std::fs::remove_dir_all(directory).unwrap();
    }

    #[test]
    fn a_journal_left_by_a_killed_rtlab_is_replayed_and_nothing_else_is_written() {
        let (tracefs, directory) = fake_tracefs("0");
        std::fs::create_dir_all(directory.join("state")).unwrap();
        std::fs::write(directory.join("state/option-record-cmd"), "1\n").unwrap();
        // A journal for an option rtlab never changes, and a hostile value: both ignored.
        std::fs::write(directory.join("state/option-tracing_on"), "1").unwrap();
        assert_eq!(tracefs.repair_options(), vec!["record-cmd=1".to_owned()]);
        assert_eq!(record_cmd(&directory), "1");
        assert!(!directory.join("state/option-record-cmd").exists());
        assert!(!directory.join("tree/options/tracing_on").exists());
        std::fs::write(directory.join("state/option-record-cmd"), "rm -rf").unwrap();
        assert!(tracefs.repair_options().is_empty());
        assert_eq!(record_cmd(&directory), "1");
        std::fs::remove_dir_all(directory).unwrap();
    }

    #[test]
    fn an_option_already_off_is_left_alone() {
        let (tracefs, directory) = fake_tracefs("0");
        let (_instance, off) = tracefs
            .create_instance_without_comm_recording("rtlab-1-test")
            .unwrap();
        assert!(off);
        assert_eq!(record_cmd(&directory), "0");
        std::fs::remove_dir_all(directory).unwrap();
    }

    #[test]
    fn parses_buffer_stats() {
        let text = "entries: 12\noverrun: 3\ncommit overrun: 0\nbytes: 100\noldest event ts:  1.0\ndropped events: 7\n";
        let stats = parse_cpu_stats(text);
        assert_eq!(
            stats,
            CpuBufferStats {
                overrun: 3,
                dropped: 7,
                entries: 12
            }
        );
    }

    fn tempdir() -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "rtlab-sys-tracefs-test-{}-{}",
            std::process::id(),
            crate::clock::monotonic_ns()
        ));
        std::fs::create_dir_all(&path).unwrap();
        path
    }
}
