//! The enforcer's journal: what every managed thread had before rtlab changed it, written
//! *before* the change, so that the next start after a SIGKILL can put it back.
//!
//! Lines are written with one `write(2)` each and never synced. The journal guards against the
//! death of the enforcing process, not of the machine: a line is in the page cache, and seen by the
//! next reader, the moment `write` returns, whatever becomes of the writer; after a machine crash
//! no thread it names still exists (and start times tell a reused id from the thread journalled).
//! So `fsync` would buy nothing on any filesystem, and it cost a reservation most of its time
//! (BENCHMARKS.md, "The daemon: reserve/release round trip"). What keeps the journal crash-safe
//! is the order: the line is written before the change it announces.
//!
//! One line per fact, appended:
//!
//! ```text
//! rtlab.enforce-journal/1
//! save TID START_TIME POLICY ARGS… cpus CPU_LIST
//! done TID START_TIME
//! cpuset-made DIRECTORY
//! cpuset-removed DIRECTORY
//! cpuset-set FILE OLD_VALUE DIRECTORY
//! cpuset-reset FILE DIRECTORY
//! cpuset-thread TID START_TIME FROM_DIRECTORY
//! ```
//!
//! The `cpuset-` lines are the per-CPU placement's (`super::placement`): a cpuset directory rtlab
//! is about to make (removed at repair, after moving out anything inside), a cpuset file it is
//! about to change with the value to put back, and a thread it is about to move out of the cpuset
//! `FROM_DIRECTORY` (moved back when the thread is restored; its `done` line ends this too).
//! Directories are absolute and come last on their line, so they may hold spaces.
//!
//! `POLICY ARGS` is `other NICE`, `batch NICE`, `idle`, `fifo PRIO`, `rr PRIO` or
//! `deadline RUNTIME DEADLINE PERIOD`; `START_TIME` is /proc/TID/stat's field 22, so a thread id
//! reused by a new thread is never touched. A thread saved and not done is restored by
//! [`Enforcer::repair`](super::Enforcer::repair) if it is still the same thread.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use rtlab_sys::sched::Policy;

/// The journal's first line.
pub const JOURNAL_HEADER: &str = "rtlab.enforce-journal/1";
/// The journal's file name inside the state directory.
pub const JOURNAL_FILE: &str = "enforce.journal";

/// What a thread had before rtlab changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedThread {
    pub tid: u32,
    pub start_time: u64,
    pub policy: Policy,
    pub affinity: Vec<usize>,
}

/// One journal line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalEntry {
    Save(SavedThread),
    Done {
        tid: u32,
        start_time: u64,
    },
    /// A cpuset directory about to be made.
    CpusetMade(PathBuf),
    /// A cpuset directory removed.
    CpusetRemoved(PathBuf),
    /// A cpuset file about to be changed, and the value it had.
    CpusetSet {
        directory: PathBuf,
        file: String,
        old_value: String,
    },
    /// A cpuset file put back.
    CpusetReset {
        directory: PathBuf,
        file: String,
    },
    /// A thread about to be moved out of the cpuset `from`.
    CpusetThread {
        tid: u32,
        start_time: u64,
        from: PathBuf,
    },
}

/// What a journal says is still to be undone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Threads saved and not done, in the order saved.
    pub threads: Vec<SavedThread>,
    /// Threads moved out of a cpuset and not done: (tid, start time, the cpuset to go back to).
    pub moved_threads: Vec<(u32, u64, PathBuf)>,
    /// Cpuset files changed and not reset: (directory, file, old value), in the order changed.
    pub settings: Vec<(PathBuf, String, String)>,
    /// Cpuset directories made and not removed, in the order made.
    pub directories: Vec<PathBuf>,
}

pub use rtlab_core::enforce_repair::JournalLineError;

fn format_policy(policy: Policy) -> String {
    match policy {
        Policy::Other { nice } => format!("other {nice}"),
        Policy::Batch { nice } => format!("batch {nice}"),
        Policy::Idle => "idle".into(),
        Policy::Fifo { priority } => format!("fifo {priority}"),
        Policy::RoundRobin { priority } => format!("rr {priority}"),
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        } => format!("deadline {runtime_ns} {deadline_ns} {period_ns}"),
    }
}

fn format_cpus(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "-".into();
    }
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl JournalEntry {
    /// The entry as one line (without the newline).
    pub fn to_line(&self) -> String {
        match self {
            JournalEntry::Save(saved) => format!(
                "save {} {} {} cpus {}",
                saved.tid,
                saved.start_time,
                format_policy(saved.policy),
                format_cpus(&saved.affinity)
            ),
            JournalEntry::Done { tid, start_time } => format!("done {tid} {start_time}"),
            JournalEntry::CpusetMade(directory) => format!("cpuset-made {}", directory.display()),
            JournalEntry::CpusetRemoved(directory) => {
                format!("cpuset-removed {}", directory.display())
            }
            JournalEntry::CpusetSet {
                directory,
                file,
                old_value,
            } => format!("cpuset-set {file} {old_value} {}", directory.display()),
            JournalEntry::CpusetReset { directory, file } => {
                format!("cpuset-reset {file} {}", directory.display())
            }
            JournalEntry::CpusetThread {
                tid,
                start_time,
                from,
            } => format!("cpuset-thread {tid} {start_time} {}", from.display()),
        }
    }

    /// Parses the `cpuset-` lines: `head` words, then an absolute directory (the rest of the line).
    fn parse_cpuset(line: &str) -> Result<JournalEntry, String> {
        let kind = line.split(' ').next().unwrap_or_default();
        let heads = match kind {
            "cpuset-made" | "cpuset-removed" => 0,
            "cpuset-reset" => 1,
            "cpuset-set" | "cpuset-thread" => 2,
            _ => return Err(format!("not a journal line: '{line}'")),
        };
        let mut parts = line.splitn(heads + 2, ' ');
        parts.next();
        let words: Vec<&str> = parts.by_ref().take(heads).collect();
        let rest = parts.next().unwrap_or_default();
        if words.len() != heads || words.iter().any(|word| word.is_empty()) {
            return Err(format!(
                "{kind}: expected {heads} words before the directory"
            ));
        }
        if !rest.starts_with('/') {
            return Err(format!(
                "{kind}: the directory must be absolute, not '{rest}'"
            ));
        }
        let directory = PathBuf::from(rest);
        let number = |text: &str, what: &str| -> Result<u64, String> {
            text.parse::<u64>()
                .map_err(|_| format!("{what} '{text}' is not a number"))
        };
        Ok(match kind {
            "cpuset-made" => JournalEntry::CpusetMade(directory),
            "cpuset-removed" => JournalEntry::CpusetRemoved(directory),
            "cpuset-reset" => JournalEntry::CpusetReset {
                directory,
                file: words[0].to_owned(),
            },
            "cpuset-set" => JournalEntry::CpusetSet {
                directory,
                file: words[0].to_owned(),
                old_value: words[1].to_owned(),
            },
            _ => JournalEntry::CpusetThread {
                tid: u32::try_from(number(words[0], "thread id")?)
                    .map_err(|_| "thread id too large")?,
                start_time: number(words[1], "start time")?,
                from: directory,
            },
        })
    }

    /// Parses one line written by [`JournalEntry::to_line`].
    pub fn parse(line: &str) -> Result<JournalEntry, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |index: usize, what: &str| -> Result<u64, String> {
            words
                .get(index)
                .ok_or_else(|| format!("{what} missing"))?
                .parse::<u64>()
                .map_err(|_| format!("{what} '{}' is not a number", words[index]))
        };
        let signed = |index: usize, what: &str| -> Result<i32, String> {
            words
                .get(index)
                .ok_or_else(|| format!("{what} missing"))?
                .parse::<i32>()
                .map_err(|_| format!("{what} '{}' is not a number", words[index]))
        };
        if words
            .first()
            .is_some_and(|word| word.starts_with("cpuset-"))
        {
            return JournalEntry::parse_cpuset(line);
        }
        match words.first().copied() {
            Some("done") if words.len() == 3 => Ok(JournalEntry::Done {
                tid: u32::try_from(number(1, "thread id")?).map_err(|_| "thread id too large")?,
                start_time: number(2, "start time")?,
            }),
            Some("save") => {
                let tid =
                    u32::try_from(number(1, "thread id")?).map_err(|_| "thread id too large")?;
                let start_time = number(2, "start time")?;
                let (policy, next) = match words.get(3).copied() {
                    Some("other") => (
                        Policy::Other {
                            nice: signed(4, "nice")?,
                        },
                        5,
                    ),
                    Some("batch") => (
                        Policy::Batch {
                            nice: signed(4, "nice")?,
                        },
                        5,
                    ),
                    Some("idle") => (Policy::Idle, 4),
                    Some("fifo") => (
                        Policy::Fifo {
                            priority: number(4, "priority")? as u32,
                        },
                        5,
                    ),
                    Some("rr") => (
                        Policy::RoundRobin {
                            priority: number(4, "priority")? as u32,
                        },
                        5,
                    ),
                    Some("deadline") => (
                        Policy::Deadline {
                            runtime_ns: number(4, "runtime")?,
                            deadline_ns: number(5, "deadline")?,
                            period_ns: number(6, "period")?,
                        },
                        7,
                    ),
                    Some(other) => return Err(format!("unknown policy '{other}'")),
                    None => return Err("policy missing".into()),
                };
                if words.get(next) != Some(&"cpus") || words.len() != next + 2 {
                    return Err("expected 'cpus LIST' at the end".into());
                }
                let affinity = match words[next + 1] {
                    "-" => Vec::new(),
                    list => list
                        .split(',')
                        .map(|cpu| cpu.parse::<usize>().map_err(|_| format!("bad CPU '{cpu}'")))
                        .collect::<Result<Vec<_>, _>>()?,
                };
                Ok(JournalEntry::Save(SavedThread {
                    tid,
                    start_time,
                    policy,
                    affinity,
                }))
            }
            _ => Err(format!("not a journal line: '{line}'")),
        }
    }
}

impl Pending {
    /// Applies one journal entry to what is still to be undone.
    pub fn apply(&mut self, entry: JournalEntry) {
        match entry {
            JournalEntry::Save(saved) => {
                if !self
                    .threads
                    .iter()
                    .any(|known| known.tid == saved.tid && known.start_time == saved.start_time)
                {
                    self.threads.push(saved);
                }
            }
            JournalEntry::Done { tid, start_time } => {
                self.threads
                    .retain(|saved| !(saved.tid == tid && saved.start_time == start_time));
                self.moved_threads
                    .retain(|moved| !(moved.0 == tid && moved.1 == start_time));
            }
            JournalEntry::CpusetThread {
                tid,
                start_time,
                from,
            } => {
                if !self
                    .moved_threads
                    .iter()
                    .any(|moved| moved.0 == tid && moved.1 == start_time)
                {
                    self.moved_threads.push((tid, start_time, from));
                }
            }
            JournalEntry::CpusetMade(directory) => {
                if !self.directories.contains(&directory) {
                    self.directories.push(directory);
                }
            }
            JournalEntry::CpusetRemoved(directory) => {
                self.directories.retain(|made| *made != directory);
            }
            JournalEntry::CpusetSet {
                directory,
                file,
                old_value,
            } => {
                // The first value seen is the one to go back to.
                if !self
                    .settings
                    .iter()
                    .any(|setting| setting.0 == directory && setting.1 == file)
                {
                    self.settings.push((directory, file, old_value));
                }
            }
            JournalEntry::CpusetReset { directory, file } => {
                self.settings
                    .retain(|setting| !(setting.0 == directory && setting.1 == file));
            }
        }
    }

    /// The entries that say exactly this and nothing else: reading them back
    /// ([`pending`]) gives `self` again. What a compacted journal holds.
    pub fn entries(&self) -> Vec<JournalEntry> {
        let mut entries = Vec::new();
        entries.extend(
            self.directories
                .iter()
                .cloned()
                .map(JournalEntry::CpusetMade),
        );
        entries.extend(self.settings.iter().map(|(directory, file, old_value)| {
            JournalEntry::CpusetSet {
                directory: directory.clone(),
                file: file.clone(),
                old_value: old_value.clone(),
            }
        }));
        entries.extend(self.threads.iter().cloned().map(JournalEntry::Save));
        entries.extend(self.moved_threads.iter().map(|(tid, start_time, from)| {
            JournalEntry::CpusetThread {
                tid: *tid,
                start_time: *start_time,
                from: from.clone(),
            }
        }));
        entries
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
            && self.moved_threads.is_empty()
            && self.settings.is_empty()
            && self.directories.is_empty()
    }
}

/// Reads a journal text: what is still to be undone. Lines that cannot be read are returned as
/// errors beside (a torn last line after a crash is expected).
pub fn pending(text: &str, path: &str) -> (Pending, Vec<JournalLineError>) {
    let mut pending = Pending::default();
    let mut errors = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if index == 0 && line == JOURNAL_HEADER {
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        match JournalEntry::parse(line) {
            Ok(entry) => pending.apply(entry),
            Err(message) => errors.push(JournalLineError {
                path: path.to_owned(),
                line: index + 1,
                message,
            }),
        }
    }
    (pending, errors)
}

/// The threads saved and not yet done, in the order saved (see [`pending`]).
pub fn pending_threads(text: &str, path: &str) -> (Vec<SavedThread>, Vec<JournalLineError>) {
    let (pending, errors) = pending(text, path);
    (pending.threads, errors)
}

/// The journal is rewritten to its live state once appends since the last rewrite pass this many
/// bytes (and twice the live state's own size), so a long-lived daemon's journal stays bounded.
pub const COMPACT_AFTER_BYTES: u64 = 64 * 1024;

/// The open journal of one enforcer.
///
/// It keeps what is still to be undone in memory as it appends ([`Pending::apply`]), and when the
/// file has grown past its bound it *compacts*: writes the live state's lines to a temporary file
/// beside it and renames that over the journal. A reader (the next start after a SIGKILL) sees
/// either the old journal, which already holds the line just appended, or the new one, which says
/// the same: the rename is atomic, and the line is always written to the old file first.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    live: Pending,
    /// Bytes in the file now.
    bytes: u64,
    /// Compact once `bytes` passes this.
    compact_at: u64,
    compact_after: u64,
    compactions: u64,
}

impl Journal {
    /// What a previous instance left changed (threads saved and not done, cpusets), and the
    /// unreadable lines.
    pub fn read_pending(state_dir: &Path) -> io::Result<(Pending, Vec<JournalLineError>)> {
        let path = state_dir.join(JOURNAL_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok((Pending::default(), Vec::new()))
            }
            Err(error) => return Err(error),
        };
        let mut text = String::new();
        for line in BufReader::new(file).lines() {
            // A torn line may not be UTF-8; keep it as an unreadable line.
            match line {
                Ok(line) => text.push_str(&line),
                Err(_) => text.push('?'),
            }
            text.push('\n');
        }
        Ok(pending(&text, &path.display().to_string()))
    }

    /// Starts a fresh, empty journal (after repair).
    pub fn create(state_dir: &Path) -> io::Result<Journal> {
        std::fs::create_dir_all(state_dir)?;
        let path = state_dir.join(JOURNAL_FILE);
        let (file, bytes) = Journal::write_fresh(&path, &Pending::default())?;
        Ok(Journal {
            path,
            file,
            live: Pending::default(),
            bytes,
            compact_at: COMPACT_AFTER_BYTES,
            compact_after: COMPACT_AFTER_BYTES,
            compactions: 0,
        })
    }

    /// Writes `live`'s lines under the header to `path` through a temporary file renamed over it;
    /// returns the new file, open for appending, and its size.
    fn write_fresh(path: &Path, live: &Pending) -> io::Result<(File, u64)> {
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let mut text = format!("{JOURNAL_HEADER}\n");
        for entry in live.entries() {
            text.push_str(&entry.to_line());
            text.push('\n');
        }
        // A temporary file left by a killed instance is stale: start it afresh. Opened for
        // appending from the start, so the same descriptor serves every later line after the
        // rename (no reopening that could fail once the old journal is replaced).
        let _ = std::fs::remove_file(&temporary);
        let written = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&temporary)
            .and_then(|mut file| file.write_all(text.as_bytes()).map(|()| file))
            .and_then(|file| std::fs::rename(&temporary, path).map(|()| file));
        match written {
            Ok(file) => Ok((file, text.len() as u64)),
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                Err(error)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What this journal says is still to be undone (what a reader of the file would find).
    pub fn live(&self) -> &Pending {
        &self.live
    }

    /// The file's size now.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    /// How many times the journal was rewritten to its live state.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// Compacts once the appends since the last rewrite pass `bytes` (tests use a small bound).
    pub fn set_compact_after(&mut self, bytes: u64) {
        self.compact_after = bytes.max(1);
        self.compact_at = self.bytes + self.compact_after;
    }

    /// Appends one entry (one `write(2)`, not synced: see the module docs) before returning, and
    /// compacts the journal when it has grown past its bound.
    pub fn append(&mut self, entry: &JournalEntry) -> io::Result<()> {
        let mut line = entry.to_line();
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.bytes += line.len() as u64;
        self.live.apply(entry.clone());
        if self.bytes >= self.compact_at {
            self.compact();
        }
        Ok(())
    }

    /// Rewrites the journal to its live state. A failure (disk full, say) keeps the old journal,
    /// which is still complete, and tries again after as many bytes more.
    pub fn compact(&mut self) {
        match Journal::write_fresh(&self.path, &self.live) {
            Ok((file, bytes)) => {
                self.file = file;
                self.bytes = bytes;
                self.compactions += 1;
                // A large live state (many threads) is not rewritten at every line.
                self.compact_at = bytes + self.compact_after.max(bytes);
            }
            Err(_) => self.compact_at = self.bytes + self.compact_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(tid: u32, policy: Policy) -> SavedThread {
        SavedThread {
            tid,
            start_time: 1000 + u64::from(tid),
            policy,
            affinity: vec![0, 1],
        }
    }

    #[test]
    fn lines_round_trip_for_every_policy() {
        for policy in [
            Policy::Other { nice: -5 },
            Policy::Batch { nice: 3 },
            Policy::Idle,
            Policy::Fifo { priority: 50 },
            Policy::RoundRobin { priority: 2 },
            Policy::Deadline {
                runtime_ns: 1,
                deadline_ns: 2,
                period_ns: 3,
            },
        ] {
            let entry = JournalEntry::Save(saved(7, policy));
            assert_eq!(JournalEntry::parse(&entry.to_line()), Ok(entry));
        }
        let done = JournalEntry::Done {
            tid: 7,
            start_time: 9,
        };
        assert_eq!(JournalEntry::parse(&done.to_line()), Ok(done));
    }

    #[test]
    fn pending_is_saved_minus_done_and_torn_lines_are_named() {
        let text = format!(
            "{JOURNAL_HEADER}\n{}\n{}\n{}\nsave 9 10",
            JournalEntry::Save(saved(1, Policy::Other { nice: 0 })).to_line(),
            JournalEntry::Save(saved(2, Policy::Fifo { priority: 3 })).to_line(),
            JournalEntry::Done {
                tid: 1,
                start_time: 1001
            }
            .to_line(),
        );
        let (pending, errors) = pending_threads(&text, "j");
        assert_eq!(pending, vec![saved(2, Policy::Fifo { priority: 3 })]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].line, 5);
    }

    #[test]
    fn cpuset_lines_round_trip_and_pend_until_undone() {
        let made = PathBuf::from("/sys/fs/cgroup/cpuset/rtlab 7 cpu1");
        let root = PathBuf::from("/sys/fs/cgroup/cpuset");
        let entries = [
            JournalEntry::CpusetMade(made.clone()),
            JournalEntry::CpusetSet {
                directory: root.clone(),
                file: "cpuset.sched_load_balance".into(),
                old_value: "1".into(),
            },
            JournalEntry::CpusetThread {
                tid: 9,
                start_time: 1009,
                from: PathBuf::from("/sys/fs/cgroup/cpuset/"),
            },
            JournalEntry::CpusetReset {
                directory: root.clone(),
                file: "cpuset.sched_load_balance".into(),
            },
            JournalEntry::CpusetRemoved(made.clone()),
        ];
        for entry in &entries {
            assert_eq!(JournalEntry::parse(&entry.to_line()).as_ref(), Ok(entry));
        }
        let text = |count: usize| {
            entries[..count]
                .iter()
                .map(|entry| entry.to_line() + "\n")
                .collect::<String>()
        };
        let (found, errors) = pending(&text(3), "j");
        assert!(errors.is_empty());
        assert_eq!(found.directories, vec![made.clone()]);
        assert_eq!(
            found.settings,
            vec![(root.clone(), "cpuset.sched_load_balance".into(), "1".into())]
        );
        assert_eq!(
            found.moved_threads,
            vec![(9, 1009, PathBuf::from("/sys/fs/cgroup/cpuset/"))]
        );
        let done = JournalEntry::Done {
            tid: 9,
            start_time: 1009,
        };
        let (found, _) = pending(&(text(5) + &done.to_line()), "j");
        assert_eq!(found, Pending::default());
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert!(JournalEntry::parse("cpuset-made relative/dir")
            .unwrap_err()
            .contains("absolute"));
        assert!(JournalEntry::parse("cpuset-thread x 1 /a")
            .unwrap_err()
            .contains("thread id"));
        assert!(JournalEntry::parse("cpuset-set only")
            .unwrap_err()
            .contains("2 words"));
        assert!(JournalEntry::parse("save x 1 other 0 cpus 0")
            .unwrap_err()
            .contains("thread id"));
        assert!(JournalEntry::parse("save 1 1 warp 0 cpus 0")
            .unwrap_err()
            .contains("unknown policy"));
        assert!(JournalEntry::parse("save 1 1 other 0")
            .unwrap_err()
            .contains("cpus"));
        assert!(JournalEntry::parse("hello").is_err());
    }

    #[test]
    fn create_append_read_back() {
        let directory = std::env::temp_dir().join(format!(
            "rtlab-journal-test-{}-{}",
            std::process::id(),
            line!()
        ));
        let mut journal = Journal::create(&directory).unwrap();
        journal
            .append(&JournalEntry::Save(saved(4, Policy::Idle)))
            .unwrap();
        let (pending, errors) = Journal::read_pending(&directory).unwrap();
        assert_eq!(pending.threads, vec![saved(4, Policy::Idle)]);
        assert!(errors.is_empty());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn many_save_done_cycles_keep_the_journal_bounded_and_its_meaning_whole() {
        let directory = std::env::temp_dir().join(format!(
            "rtlab-journal-test-{}-{}",
            std::process::id(),
            line!()
        ));
        let mut journal = Journal::create(&directory).unwrap();
        journal.set_compact_after(2_000);
        // Two threads and a partition that stay, many that come and go.
        let root = PathBuf::from("/sys/fs/cgroup/cpuset");
        let made = root.join("rtlab-1-cpu1");
        journal
            .append(&JournalEntry::Save(saved(1, Policy::Other { nice: 0 })))
            .unwrap();
        journal
            .append(&JournalEntry::CpusetMade(made.clone()))
            .unwrap();
        journal
            .append(&JournalEntry::CpusetSet {
                directory: root.clone(),
                file: "cpuset.sched_load_balance".into(),
                old_value: "1".into(),
            })
            .unwrap();
        let mut largest = 0;
        for cycle in 0..5_000u32 {
            let tid = 100 + cycle;
            journal
                .append(&JournalEntry::Save(saved(
                    tid,
                    Policy::Fifo { priority: 3 },
                )))
                .unwrap();
            journal
                .append(&JournalEntry::CpusetThread {
                    tid,
                    start_time: 1000 + u64::from(tid),
                    from: root.clone(),
                })
                .unwrap();
            journal
                .append(&JournalEntry::Done {
                    tid,
                    start_time: 1000 + u64::from(tid),
                })
                .unwrap();
            largest = largest.max(std::fs::metadata(journal.path()).unwrap().len());
        }
        journal
            .append(&JournalEntry::Save(saved(2, Policy::Idle)))
            .unwrap();
        assert!(journal.compactions() > 10, "{}", journal.compactions());
        assert!(
            largest < 2_000 + 1_000,
            "the journal grew to {largest} bytes"
        );
        assert_eq!(
            std::fs::metadata(journal.path()).unwrap().len(),
            journal.len_bytes()
        );
        let (found, errors) = Journal::read_pending(&directory).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(&found, journal.live());
        assert_eq!(
            found.threads,
            vec![saved(1, Policy::Other { nice: 0 }), saved(2, Policy::Idle)]
        );
        assert_eq!(found.directories, vec![made]);
        assert_eq!(found.settings.len(), 1);
        assert!(found.moved_threads.is_empty());
        assert!(!directory.join(format!("{JOURNAL_FILE}.tmp")).exists());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_compacted_journal_reads_back_as_the_live_state() {
        let root = PathBuf::from("/sys/fs/cgroup/cpuset");
        let mut live = Pending::default();
        let entries = [
            JournalEntry::CpusetMade(root.join("a b")),
            JournalEntry::Save(saved(
                5,
                Policy::Deadline {
                    runtime_ns: 1,
                    deadline_ns: 2,
                    period_ns: 3,
                },
            )),
            JournalEntry::CpusetThread {
                tid: 5,
                start_time: 1005,
                from: root.clone(),
            },
            JournalEntry::CpusetSet {
                directory: root.clone(),
                file: "f".into(),
                old_value: "1".into(),
            },
            JournalEntry::Save(saved(6, Policy::Other { nice: 1 })),
            JournalEntry::CpusetMade(root.join("c")),
        ];
        for entry in entries {
            live.apply(entry);
        }
        let text = live
            .entries()
            .iter()
            .map(|entry| entry.to_line() + "\n")
            .collect::<String>();
        assert_eq!(pending(&text, "j"), (live, Vec::new()));
    }
}
