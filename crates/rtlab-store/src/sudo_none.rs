//! `sudo` exists only on Unix: elsewhere the history is always the current user's.

use std::path::{Path, PathBuf};

/// The user who ran rtlab through sudo (never, here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SudoCaller {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

pub fn caller() -> Option<SudoCaller> {
    None
}

pub fn missing_directories(_path: &Path) -> Vec<PathBuf> {
    Vec::new()
}

pub fn give(_caller: &SudoCaller, _paths: &[PathBuf]) -> std::io::Result<()> {
    Ok(())
}
