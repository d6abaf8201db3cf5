//! The tune journal: every kernel setting `rtlab tune` is about to change, with the value to put
//! back, written *before* the change, so the next `rtlab tune` (or `rtlab tune --revert`) puts
//! back what a SIGKILL left changed.
//!
//! The same rules as the enforcer's journal (`rtlab-sched`'s `enforce/journal.rs`): one line per
//! fact, each written with one `write(2)` and never synced, because it guards against the death of
//! the process, not of the machine (it lives in `/run`, a tmpfs, and the kernel's settings are
//! back to their boot values after a reboot anyway); what keeps it safe is the order, the line
//! before the change. A lock file beside it lets one `rtlab tune` run at a time.
//!
//! ```text
//! rtlab.tune-journal/1
//! set ID OLD_VALUE
//! reset ID
//! ```
//!
//! `ID` names a [`Knob`] (`timer_migration`, `irq/24`, …), never a path, so a journal can only
//! make rtlab write one of the files it changes itself; a value is one word of the characters such
//! files hold. A `set` with no later `reset` is pending: repair writes the old value back.

use rtlab_sys::tunables::Knob;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The journal's first line.
pub const JOURNAL_HEADER: &str = "rtlab.tune-journal/1";
/// Where the journal and its lock live (the directory the tracefs journal uses too).
pub const STATE_DIR: &str = "/run/rtlab";
const JOURNAL_FILE: &str = "tune.journal";
const LOCK_FILE: &str = "tune.lock";

/// One line of the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalLine {
    Set { knob: Knob, old_value: String },
    Reset(Knob),
}

/// A value a journal may hold: one non-empty word of the characters sysfs and procfs settings
/// use (`madvise`, `defer+madvise`, `-1`, `0-1,3`, `ff,ffffffff`).
pub fn is_plain_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && value
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "-+,_.".contains(character))
}

impl JournalLine {
    pub fn to_line(&self) -> String {
        match self {
            JournalLine::Set { knob, old_value } => format!("set {} {old_value}", knob.id()),
            JournalLine::Reset(knob) => format!("reset {}", knob.id()),
        }
    }

    /// A line, or `None` for anything that is not one (ignored, never guessed at).
    pub fn parse(line: &str) -> Option<JournalLine> {
        let mut words = line.split(' ');
        let line = match (words.next()?, words.next().and_then(Knob::from_id)) {
            ("set", Some(knob)) => {
                let old_value = words.next()?;
                if !is_plain_value(old_value) {
                    return None;
                }
                JournalLine::Set {
                    knob,
                    old_value: old_value.to_owned(),
                }
            }
            ("reset", Some(knob)) => JournalLine::Reset(knob),
            _ => return None,
        };
        words.next().is_none().then_some(line)
    }
}

/// The settings a journal says are still changed, with the value to put back, in the order they
/// were changed (the first value journalled for a knob wins: it is the one from before rtlab).
pub fn pending(text: &str) -> Vec<(Knob, String)> {
    let mut lines = text.lines();
    if lines.next() != Some(JOURNAL_HEADER) {
        return Vec::new();
    }
    let mut pending: Vec<(Knob, String)> = Vec::new();
    for line in lines.filter_map(JournalLine::parse) {
        match line {
            JournalLine::Set { knob, old_value } => {
                if !pending.iter().any(|(changed, _)| *changed == knob) {
                    pending.push((knob, old_value));
                }
            }
            JournalLine::Reset(knob) => pending.retain(|(changed, _)| *changed != knob),
        }
    }
    pending
}

/// The open journal, holding the lock: one `rtlab tune` at a time.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    _lock: File,
}

fn journal_error(path: &Path, source: io::Error) -> crate::error::TuneError {
    crate::error::TuneError::Journal {
        path: path.display().to_string(),
        source,
    }
}

impl Journal {
    /// Takes the lock in `state_dir`, puts back what an earlier, killed `rtlab tune` left
    /// changed, and starts a new journal. Returns it with what was put back (`name=value`).
    pub fn open(state_dir: &Path) -> Result<(Journal, Vec<String>), crate::error::TuneError> {
        std::fs::create_dir_all(state_dir).map_err(|error| journal_error(state_dir, error))?;
        let lock_path = state_dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| journal_error(&lock_path, error))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(crate::error::TuneError::Busy(
                    lock_path.display().to_string(),
                ))
            }
            Err(std::fs::TryLockError::Error(error)) => {
                return Err(journal_error(&lock_path, error))
            }
        }
        let path = state_dir.join(JOURNAL_FILE);
        let repaired = repair(&path)?;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|error| journal_error(&path, error))?;
        file.write_all(format!("{JOURNAL_HEADER}\n").as_bytes())
            .map_err(|error| journal_error(&path, error))?;
        Ok((
            Journal {
                file,
                path,
                _lock: lock,
            },
            repaired,
        ))
    }

    /// Writes one line (one `write(2)`).
    pub fn append(&mut self, line: &JournalLine) -> Result<(), crate::error::TuneError> {
        self.file
            .write_all(format!("{}\n", line.to_line()).as_bytes())
            .map_err(|error| journal_error(&self.path, error))
    }

    /// Removes the journal: everything it named is back.
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Puts back every pending setting of the journal at `path`; the journal goes once all are back
/// (one that cannot be written back keeps it, and the error says which).
fn repair(path: &Path) -> Result<Vec<String>, crate::error::TuneError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(journal_error(path, error)),
    };
    let mut repaired = Vec::new();
    let mut failed = Vec::new();
    for (knob, old_value) in pending(&text).into_iter().rev() {
        match knob.write(&old_value) {
            Ok(()) => repaired.push(format!("{}={old_value}", knob.id())),
            Err(error) => failed.push(format!("{}: {error}", knob.id())),
        }
    }
    if !failed.is_empty() {
        return Err(crate::error::TuneError::Restore(format!(
            "{} left changed by a killed rtlab tune could not be put back ({}); {} keeps them",
            failed.len(),
            failed.join("; "),
            path.display()
        )));
    }
    let _ = std::fs::remove_file(path);
    repaired.reverse();
    Ok(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_written() {
        for line in [
            JournalLine::Set {
                knob: Knob::ThpDefrag,
                old_value: "defer+madvise".into(),
            },
            JournalLine::Set {
                knob: Knob::IrqAffinity(24),
                old_value: "0-1".into(),
            },
            JournalLine::Reset(Knob::Swappiness),
        ] {
            assert_eq!(JournalLine::parse(&line.to_line()), Some(line));
        }
    }

    #[test]
    fn a_journal_names_only_rtlabs_knobs_and_plain_values() {
        for line in [
            "set /etc/passwd x",
            "set swappiness",
            "set swappiness 1 2",
            "set swappiness a;b",
            "set swappiness $(reboot)",
            "reset",
            "frobnicate swappiness",
        ] {
            assert_eq!(JournalLine::parse(line), None, "{line}");
        }
    }

    #[test]
    fn pending_is_what_was_set_and_not_reset_with_the_first_old_value() {
        let text = format!(
            "{JOURNAL_HEADER}\nset swappiness 60\nset timer_migration 1\nreset swappiness\nset irq/24 0-1\nset irq/24 0\ngarbage\n"
        );
        assert_eq!(
            pending(&text),
            vec![
                (Knob::TimerMigration, "1".to_owned()),
                (Knob::IrqAffinity(24), "0-1".to_owned())
            ]
        );
        assert!(pending("not a journal\nset swappiness 60\n").is_empty());
    }

    #[test]
    fn a_second_journal_in_the_same_directory_is_refused_while_the_first_is_open() {
        let directory = tempfile::tempdir().unwrap();
        let (journal, repaired) = Journal::open(directory.path()).unwrap();
        assert!(repaired.is_empty());
        let error = Journal::open(directory.path()).unwrap_err();
        assert!(matches!(error, crate::error::TuneError::Busy(_)), "{error}");
        journal.finish();
        assert!(!directory.path().join(JOURNAL_FILE).exists());
        Journal::open(directory.path()).unwrap();
    }
}
