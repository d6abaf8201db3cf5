//! Named pipes: a helper program that writes only to a file it names (`pw-profiler -o FILE`) is
//! given a FIFO instead, read as it writes, so a long watch leaves no growing file behind.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates a FIFO at `path`, readable and writable by its owner only.
pub fn make_fifo(path: &Path) -> io::Result<()> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the FIFO's path"))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let result = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens the FIFO at `path` for reading without waiting for a writer: reads return what is
/// there, `WouldBlock` while a writer has written nothing new, and 0 while none is open.
pub fn open_fifo_reader(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_fifo_passes_what_is_written() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("fifo");
        make_fifo(&path).unwrap();
        let mut reader = open_fifo_reader(&path).unwrap();
        let mut buffer = [0u8; 16];
        assert_eq!(reader.read(&mut buffer).unwrap(), 0, "no writer yet");
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writer.write_all(b"line\n").unwrap();
        assert_eq!(reader.read(&mut buffer).unwrap(), 5);
        assert_eq!(&buffer[..5], b"line\n");
        assert!(make_fifo(&path).is_err(), "it exists");
    }
}
