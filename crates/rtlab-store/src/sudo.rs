//! `sudo rtlab run`: the run history belongs to the user who typed the command.
//!
//! Run under sudo (effective uid 0, `SUDO_UID` naming another user), rtlab keeps its history in
//! that user's home (`~/.local/share/rtlab/rtlab.db`, from the password database, since sudo sets
//! `HOME` to root's), and gives what it creates there (directories, the database, SQLite's -wal
//! and -shm files) to that user, so a later `rtlab history` without sudo finds the run and can
//! add to the file.

use crate::SudoCaller;
use std::path::{Path, PathBuf};

/// The user behind sudo, when rtlab runs as root through sudo for someone else.
pub fn caller() -> Option<SudoCaller> {
    if rtlab_sys::users::effective_uid() != 0 {
        return None;
    }
    let uid: u32 = std::env::var("SUDO_UID").ok()?.trim().parse().ok()?;
    if uid == 0 {
        return None;
    }
    let entry = rtlab_sys::users::user_by_uid(uid).ok()??;
    let gid = std::env::var("SUDO_GID")
        .ok()
        .and_then(|gid| gid.trim().parse().ok())
        .unwrap_or(entry.gid);
    Some(SudoCaller {
        name: entry.name,
        uid,
        gid,
        home: entry.home,
    })
}

/// The directories from `path`'s parent up that do not exist yet (created by the store next).
pub fn missing_directories(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .skip(1)
        .take_while(|directory| !directory.as_os_str().is_empty() && !directory.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Gives `paths` (those that exist) to `caller`.
pub fn give(caller: &SudoCaller, paths: &[PathBuf]) -> std::io::Result<()> {
    for path in paths.iter().filter(|path| path.exists()) {
        std::os::unix::fs::chown(path, Some(caller.uid), Some(caller.gid))?;
    }
    Ok(())
}
