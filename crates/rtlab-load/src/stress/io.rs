//! The io stressor: file writes with fsync, and O_DIRECT reads where the filesystem allows them.
//!
//! Each worker owns a directory `rtlab-io-PID-N` under the temporary directory (TMPDIR). A step
//! writes 1 MiB; every 4 MiB the file is fsynced (block-layer and completion-interrupt work). When
//! the file reaches 32 MiB the worker reads it back with O_DIRECT in 1 MiB steps (bypassing the
//! page cache, so the device really works) — on filesystems that refuse O_DIRECT (tmpfs) it says
//! so in a note and skips the read-back — then truncates and starts over. The directory is removed
//! when the worker finishes, whatever the exit path (Drop).

use super::{FinishOutcome, StepOutcome, Stressor};
use rtlab_sys::load_syscalls::{AnonymousMapping, OPEN_DIRECT_FLAG};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const CHUNK_BYTES: usize = 1 << 20;
const SYNC_EVERY_BYTES: u64 = 4 << 20;
const FILE_LIMIT_BYTES: u64 = 32 << 20;

enum Phase {
    Writing,
    Reading { reader: File, offset: u64 },
}

pub(crate) struct IoStressor {
    directory: PathBuf,
    path: PathBuf,
    file: File,
    written_in_file: u64,
    unsynced: u64,
    pattern: Vec<u8>,
    direct_buffer: AnonymousMapping,
    direct_supported: Option<bool>,
    phase: Phase,
    fsyncs: u64,
}

impl IoStressor {
    pub fn new(temp_dir: &Path, worker_index: u32) -> std::io::Result<IoStressor> {
        let directory = temp_dir.join(format!("rtlab-io-{}-{worker_index}", std::process::id()));
        std::fs::create_dir_all(&directory).map_err(|error| {
            std::io::Error::new(error.kind(), format!("{}: {error}", directory.display()))
        })?;
        let path = directory.join("data.bin");
        let file = match OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&directory);
                return Err(std::io::Error::new(
                    error.kind(),
                    format!("{}: {error}", path.display()),
                ));
            }
        };
        let pattern = (0..CHUNK_BYTES)
            .map(|index| (index * 31 + 7) as u8)
            .collect();
        Ok(IoStressor {
            directory,
            path,
            file,
            written_in_file: 0,
            unsynced: 0,
            pattern,
            direct_buffer: AnonymousMapping::new(CHUNK_BYTES)?,
            direct_supported: None,
            phase: Phase::Writing,
            fsyncs: 0,
        })
    }

    fn start_reading(&mut self) -> std::io::Result<()> {
        self.file.sync_all()?;
        self.fsyncs += 1;
        self.unsynced = 0;
        if self.direct_supported == Some(false) {
            return self.restart_file();
        }
        match OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_DIRECT_FLAG)
            .open(&self.path)
        {
            Ok(reader) => {
                self.phase = Phase::Reading { reader, offset: 0 };
                Ok(())
            }
            Err(_) => {
                self.direct_supported = Some(false);
                self.restart_file()
            }
        }
    }

    fn restart_file(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.written_in_file = 0;
        self.phase = Phase::Writing;
        Ok(())
    }
}

impl Stressor for IoStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        match &mut self.phase {
            Phase::Writing => {
                self.file.write_all(&self.pattern)?;
                self.written_in_file += CHUNK_BYTES as u64;
                self.unsynced += CHUNK_BYTES as u64;
                if self.unsynced >= SYNC_EVERY_BYTES {
                    self.file.sync_data()?;
                    self.fsyncs += 1;
                    self.unsynced = 0;
                }
                if self.written_in_file >= FILE_LIMIT_BYTES {
                    self.start_reading()?;
                }
                Ok(StepOutcome {
                    operations: 1,
                    bytes: CHUNK_BYTES as u64,
                })
            }
            Phase::Reading { reader, offset } => {
                let buffer = self.direct_buffer.as_mut_slice();
                match reader.read(buffer) {
                    Ok(0) => self.restart_file()?,
                    Ok(read) => {
                        *offset += read as u64;
                        self.direct_supported = Some(true);
                        if *offset >= self.written_in_file {
                            self.restart_file()?;
                        }
                    }
                    Err(_) if self.direct_supported.is_none() => {
                        // EINVAL on the first O_DIRECT read: the filesystem accepts the flag but
                        // not the access; keep writing only.
                        self.direct_supported = Some(false);
                        self.restart_file()?;
                    }
                    Err(error) => return Err(error),
                }
                Ok(StepOutcome {
                    operations: 0,
                    bytes: 0,
                })
            }
        }
    }

    fn finish(&mut self) -> FinishOutcome {
        let mut notes = vec![format!("{} fsync calls", self.fsyncs)];
        if self.direct_supported == Some(false) {
            notes.push(format!(
                "O_DIRECT reads not supported under {}: write and fsync load only",
                self.directory.parent().unwrap_or(&self.directory).display()
            ));
        }
        let _ = std::fs::remove_dir_all(&self.directory);
        FinishOutcome {
            helper_usage: Default::default(),
            notes,
        }
    }
}

impl Drop for IoStressor {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}
