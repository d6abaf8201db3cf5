//! Whether a process lives in this process's user namespace.
//!
//! Capabilities are relative to a user namespace: inside one of its own (`unshare -Ur`) any
//! process shows a full `CapEff` in /proc/PID/status, though it holds nothing over the rest of
//! the machine. So a capability read from /proc counts only when the process is in the reader's
//! own namespace.
//!
//! The namespace is compared by the device and inode of `/proc/PID/ns/user` where it can be
//! stat'ed. That needs ptrace read access to the process, which a daemon without
//! CAP_SYS_PTRACE lacks for other users' processes (EACCES); then the `uid_map`s are compared,
//! which anyone may read. Two namespaces with the same map are taken as one: only a process
//! privileged in this namespace could have written a child's map equal to this one's (the
//! initial namespace's is `0 0 4294967295`), and a map that differs is another namespace for
//! certain.

use std::io;
use std::os::unix::fs::MetadataExt;

/// Where a process's user namespace is, as seen from this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The same namespace as this process's.
    Same,
    /// Another namespace (a child's, such as `unshare -U`'s, or any other).
    Other,
}

/// The uid map's text normalised: runs of blanks as one, so two reads of one map compare equal
/// whatever the kernel's column padding.
fn normalised_map(text: &str) -> String {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Compares two `uid_map` texts as [`user_namespace_of`] does when it cannot stat the link.
pub fn same_uid_map(ours: &str, theirs: &str) -> bool {
    normalised_map(ours) == normalised_map(theirs)
}

/// Where process `pid`'s user namespace is relative to this process's. An error (kind
/// `NotFound` for a process that is gone) when neither the namespace link nor the uid map can
/// be read.
pub fn user_namespace_of(pid: u32) -> io::Result<Relation> {
    let own = std::fs::metadata("/proc/self/ns/user")?;
    match std::fs::metadata(format!("/proc/{pid}/ns/user")) {
        Ok(theirs) => {
            return Ok(if theirs.dev() == own.dev() && theirs.ino() == own.ino() {
                Relation::Same
            } else {
                Relation::Other
            });
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(error),
        Err(_) => {}
    }
    let ours = std::fs::read_to_string("/proc/self/uid_map")?;
    let theirs = std::fs::read_to_string(format!("/proc/{pid}/uid_map"))?;
    Ok(if same_uid_map(&ours, &theirs) {
        Relation::Same
    } else {
        Relation::Other
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_its_own_namespace() {
        assert_eq!(
            user_namespace_of(std::process::id()).unwrap(),
            Relation::Same
        );
        let error = user_namespace_of(u32::MAX - 1).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn uid_maps_compare_by_their_numbers_not_their_padding() {
        let initial = "         0          0 4294967295\n";
        assert!(same_uid_map(initial, "0 0 4294967295"));
        // `unshare -Ur` run by nobody: root inside is 65534 outside.
        assert!(!same_uid_map(initial, "         0      65534          1\n"));
        assert!(!same_uid_map(initial, ""));
    }

    #[test]
    fn a_child_namespace_is_another() {
        // `unshare -Ur` makes a user namespace of its own (unprivileged user namespaces are on
        // here; where they are not, unshare fails and there is nothing to compare).
        let Ok(mut child) = std::process::Command::new("unshare")
            .args(["-Ur", "sleep", "5"])
            .spawn()
        else {
            panic!("unshare (util-linux) is needed");
        };
        // unshare execs sleep once the namespace is made: wait for the exec.
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n"
        {
            assert!(std::time::Instant::now() < deadline, "unshare did not exec");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let relation = user_namespace_of(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(relation.unwrap(), Relation::Other);
    }
}
