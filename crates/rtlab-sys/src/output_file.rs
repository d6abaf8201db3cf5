//! Output files that appear complete or not at all, even if rtlab is killed with SIGKILL.
//!
//! The file is created at the start of a run (so a bad path fails in the first second) as an
//! unnamed O_TMPFILE in the target's directory; only at the end is it given a name, by linkat
//! through /proc/self/fd and an atomic rename. A run that dies leaves no file behind. Where the
//! filesystem has no O_TMPFILE, a hidden named temporary is used instead (removed on drop).

use crate::output_target::temporary_name;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct PendingFile {
    file: File,
    target: PathBuf,
    /// Set when the fallback (a named temporary) is in use.
    named_temporary: Option<PathBuf>,
}

impl PendingFile {
    /// Creates the (still invisible) file for `target`.
    pub fn create(target: &Path) -> io::Result<PendingFile> {
        let directory = crate::output_target::checked_directory(target)?;
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o644)
            .open(&directory)
        {
            Ok(file) => Ok(PendingFile {
                file,
                target: target.to_owned(),
                named_temporary: None,
            }),
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
                ) =>
            {
                let temporary = temporary_name(target);
                let file = File::create(&temporary)?;
                Ok(PendingFile {
                    file,
                    target: target.to_owned(),
                    named_temporary: Some(temporary),
                })
            }
            Err(error) => Err(error),
        }
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes `contents` and gives the file its name, replacing any file already there.
    pub fn commit(mut self, contents: &[u8]) -> io::Result<()> {
        self.file.write_all(contents)?;
        self.file.sync_all()?;
        let temporary = match self.named_temporary.take() {
            Some(temporary) => temporary,
            None => {
                let temporary = temporary_name(&self.target);
                let _ = std::fs::remove_file(&temporary);
                let source = format!("/proc/self/fd/{}", self.file.as_raw_fd());
                let source = std::ffi::CString::new(source).expect("no NUL in a /proc path");
                let destination = std::ffi::CString::new(temporary.as_os_str().as_encoded_bytes())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in file name"))?;
                // SAFETY: both paths are valid NUL-terminated C strings that outlive the call.
                let result = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        source.as_ptr(),
                        libc::AT_FDCWD,
                        destination.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                if result != 0 {
                    return Err(io::Error::last_os_error());
                }
                temporary
            }
        };
        let renamed = std::fs::rename(&temporary, &self.target);
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        renamed
    }
}

/// Streams into the still unnamed file (for outputs too large to hold: `rtlab trace record`);
/// `commit(&[])` then names it.
impl Write for PendingFile {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.file.write(buffer)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if let Some(temporary) = self.named_temporary.take() {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_until_committed() {
        let directory = tempfile_directory();
        let target = directory.join("out.json");
        let pending = PendingFile::create(&target).unwrap();
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 0);
        pending.commit(b"hello").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 1);
        // Replaces an existing file.
        PendingFile::create(&target)
            .unwrap()
            .commit(b"again")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "again");
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn dropped_without_commit_leaves_nothing() {
        let directory = tempfile_directory();
        drop(PendingFile::create(&directory.join("never.json")).unwrap());
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 0);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn missing_directory_is_an_error() {
        assert!(PendingFile::create(Path::new("/nonexistent-rtlab-dir/x.json")).is_err());
    }

    fn tempfile_directory() -> PathBuf {
        let directory = std::env::temp_dir().join(format!(
            "rtlab-sys-output-{}-{}",
            std::process::id(),
            crate::clock::monotonic_ns()
        ));
        std::fs::create_dir_all(&directory).unwrap();
        directory
    }
}
