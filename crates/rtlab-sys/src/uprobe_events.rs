//! User-space probes through tracefs's `uprobe_events`: rtlab's only global tracing setting that
//! outlives an instance, so it is kept recognisable and removable.
//!
//! `uprobe_events` is one file for the whole machine: writing it without `O_APPEND` (or with
//! `O_TRUNC`) removes every user's probes, so every write here appends one line. rtlab's probes
//! live in groups `rtlab_<pid>` (the owning process), so that [`remove_stale`] can remove the
//! ones a killed rtlab left behind, by the dead pid in the name, and nobody else's.

use crate::tracefs::{process_alive, with_path};
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

/// Name prefix of rtlab's probe groups; the suffix is the owning process id.
pub const GROUP_PREFIX: &str = "rtlab_";

/// The probe group of this process: `rtlab_<pid>`.
pub fn own_group() -> String {
    format!("{GROUP_PREFIX}{}", std::process::id())
}

/// Appends one command line to `<tracefs>/uprobe_events` (never truncating it).
fn append(tracefs_root: &Path, line: &str) -> io::Result<()> {
    let path = tracefs_root.join("uprobe_events");
    let mut file = OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|error| with_path(error, &path))?;
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|error| with_path(error, &path))
}

/// Adds the probe `group/event` at `offset` (a file offset) in the ELF file `binary`: at the
/// function's entry, or when it returns (`at_return`), recording `fetch_args` (the kernel's
/// fetch-argument syntax, `flags=%si:s32`; empty: none) so that a filter can read them. The
/// event then appears as `events/<group>/<event>` in tracefs and every instance, disabled.
pub fn add(
    tracefs_root: &Path,
    group: &str,
    event: &str,
    binary: &Path,
    offset: u64,
    at_return: bool,
    fetch_args: &str,
) -> io::Result<()> {
    let binary = binary.to_str().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a probed file's path must be UTF-8",
        )
    })?;
    if binary.contains(char::is_whitespace) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{binary}: a probed file's path cannot hold spaces (uprobe_events syntax)"),
        ));
    }
    let kind = if at_return { 'r' } else { 'p' };
    let mut line = format!("{kind}:{group}/{event} {binary}:{offset:#x}");
    if !fetch_args.is_empty() {
        line.push(' ');
        line.push_str(fetch_args);
    }
    append(tracefs_root, &line)
}

/// Removes the probe `group/event` (it must be disabled in every instance first).
pub fn remove(tracefs_root: &Path, group: &str, event: &str) -> io::Result<()> {
    append(tracefs_root, &format!("-:{group}/{event}"))
}

/// An rtlab probe of `uprobe_events` and the process that added it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOwner<'a> {
    pub pid: u32,
    /// The probe's `group/event`.
    pub name: &'a str,
}

/// The owning pid of an rtlab probe line of `uprobe_events` (`p:rtlab_123/cycle /lib…:0x…`),
/// with its `group/event`.
pub fn probe_owner(line: &str) -> Option<ProbeOwner<'_>> {
    let name = line.split_whitespace().next()?.split_once(':')?.1;
    let (group, _) = name.split_once('/')?;
    let pid = group.strip_prefix(GROUP_PREFIX)?.parse().ok()?;
    Some(ProbeOwner { pid, name })
}

/// Removes rtlab's probes whose owning process no longer exists (a killed rtlab's); returns
/// their `group/event` names. Run after the stale instances are removed (a probe still enabled
/// in an instance cannot be removed).
pub fn remove_stale(tracefs_root: &Path) -> io::Result<Vec<String>> {
    let listing = match crate::tracefs::read_control_file(&tracefs_root.join("uprobe_events")) {
        Ok(listing) => listing,
        // A kernel without uprobes has nothing to sweep.
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut removed = Vec::new();
    for line in listing.lines() {
        let Some(ProbeOwner { pid, name }) = probe_owner(line) else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let (group, event) = name.split_once('/').expect("probe_owner split it");
        remove(tracefs_root, group, event)?;
        removed.push(name.to_owned());
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_name_their_owner() {
        assert_eq!(
            probe_owner("p:rtlab_123/cycle /usr/lib/libjackserver.so.0:0x0000000000058340"),
            Some(ProbeOwner {
                pid: 123,
                name: "rtlab_123/cycle"
            })
        );
        assert_eq!(
            probe_owner("r:rtlab_9/done0 /bin/client:0x1860"),
            Some(ProbeOwner {
                pid: 9,
                name: "rtlab_9/done0"
            })
        );
        assert_eq!(probe_owner("p:uprobes/p_bash_0x4 /bin/bash:0x4"), None);
        assert_eq!(probe_owner("p:rtlab_x/cycle /bin/a:0x4"), None);
        assert_eq!(probe_owner(""), None);
    }

    #[test]
    fn stale_probes_of_dead_owners_are_removed_and_live_ones_kept() {
        let directory = std::env::temp_dir().join(format!("rtlab-uprobe-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let live = std::process::id();
        // A pid above the kernel's maximum is never alive.
        std::fs::write(
            directory.join("uprobe_events"),
            format!("p:rtlab_4194305/cycle /bin/a:0x10\np:rtlab_{live}/cycle /bin/a:0x10\np:other/x /bin/a:0x10\n"),
        )
        .unwrap();
        let removed = remove_stale(&directory).unwrap();
        assert_eq!(removed, vec!["rtlab_4194305/cycle".to_owned()]);
        let written = std::fs::read_to_string(directory.join("uprobe_events")).unwrap();
        assert!(written.ends_with("-:rtlab_4194305/cycle\n"), "{written}");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
