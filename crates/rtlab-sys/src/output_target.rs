//! What both platforms' `output_file` check before creating an output: the target names a file in
//! a directory that exists, and the name of the hidden temporary beside it.

use std::io;
use std::path::{Path, PathBuf};

/// The hidden temporary for `target`: `.NAME.rtlab-PID.tmp` in the same directory.
pub(crate) fn temporary_name(target: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(format!(".rtlab-{}.tmp", std::process::id()));
    target.with_file_name(name)
}

/// The directory `target` will be created in, once checked: `target` names a file and the
/// directory exists.
pub(crate) fn checked_directory(target: &Path) -> io::Result<PathBuf> {
    if target.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        ));
    }
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    if !directory.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("directory {} does not exist", directory.display()),
        ));
    }
    Ok(directory)
}
