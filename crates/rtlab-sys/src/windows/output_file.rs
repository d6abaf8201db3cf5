//! Output files that appear complete or not at all (the Windows side of `output_file`).
//!
//! Windows has no unnamed files: the output is written to a hidden temporary beside the target
//! (created at the start of a run, so a bad path fails in the first second) and renamed over the
//! target, whole, by `commit`; a failed or interrupted run removes it on drop. A run killed
//! outright (TerminateProcess) can leave the temporary, `.NAME.rtlab-PID.tmp`, never the target
//! half-written.

use crate::output_target::temporary_name;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct PendingFile {
    file: Option<File>,
    target: PathBuf,
    temporary: PathBuf,
}

impl PendingFile {
    /// Creates the temporary for `target`.
    pub fn create(target: &Path) -> io::Result<PendingFile> {
        crate::output_target::checked_directory(target)?;
        let temporary = temporary_name(target);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)?;
        Ok(PendingFile {
            file: Some(file),
            target: target.to_owned(),
            temporary,
        })
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes `contents` and renames the temporary over the target.
    pub fn commit(mut self, contents: &[u8]) -> io::Result<()> {
        let mut file = self.file.take().expect("committed once");
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.temporary, &self.target)
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_appears_only_when_committed() {
        let directory = std::env::temp_dir().join(format!("rtlab-output-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let target = directory.join("out.json");
        let pending = PendingFile::create(&target).unwrap();
        assert!(!target.exists());
        pending.commit(b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"{}");
        let dropped = PendingFile::create(&directory.join("never.json")).unwrap();
        drop(dropped);
        assert!(!directory.join("never.json").exists());
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 1);
        std::fs::remove_dir_all(&directory).unwrap();
        assert!(PendingFile::create(&directory.join("missing").join("x")).is_err());
    }
}
