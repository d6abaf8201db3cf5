//! The cpuset controller's files, for putting one SCHED_DEADLINE thread alone on one CPU.
//!
//! The kernel lets a SCHED_DEADLINE thread be pinned only if its affinity spans its whole root
//! domain. A root domain of one CPU comes from the cpuset controller: with cgroup v1, an exclusive
//! child cpuset that balances load inside itself while the top cpuset does not
//! (`cpuset.sched_load_balance` 0); with cgroup v2, a partition root (`cpuset.cpus.partition`).
//! This module only finds the hierarchy and reads and writes its files; which cpusets to make, in
//! what order, and how they are journalled and removed is `rtlab-sched`'s (enforce/placement.rs).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Which cgroup version holds the cpuset controller, and where it is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpusetHierarchy {
    /// A cgroup v1 hierarchy mounted with the `cpuset` option.
    V1(PathBuf),
    /// The cgroup v2 hierarchy whose root lists `cpuset` in `cgroup.controllers`.
    V2(PathBuf),
}

impl CpusetHierarchy {
    pub fn root(&self) -> &Path {
        match self {
            CpusetHierarchy::V1(root) | CpusetHierarchy::V2(root) => root,
        }
    }
}

/// The mounts that may hold the cpuset controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpusetMounts {
    /// The cgroup v1 hierarchy mounted with the `cpuset` option, if any.
    pub v1: Option<PathBuf>,
    /// Every cgroup2 mount (whose controllers must still be checked).
    pub v2: Vec<PathBuf>,
}

/// The cpuset mounts in a /proc/self/mounts text: the v1 hierarchy with the `cpuset` option, and
/// every cgroup2 mount (whose controllers must still be checked).
pub fn parse_mounts(text: &str) -> CpusetMounts {
    let mut v1 = None;
    let mut v2 = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            continue;
        }
        // Mount points escape spaces as \040; cgroup mounts never have them in practice.
        let mount_point = PathBuf::from(fields[1].replace("\\040", " "));
        match fields[2] {
            "cgroup" if fields[3].split(',').any(|option| option == "cpuset") => {
                v1.get_or_insert(mount_point);
            }
            "cgroup2" => v2.push(mount_point),
            _ => {}
        }
    }
    CpusetMounts { v1, v2 }
}

/// Finds the hierarchy that holds the cpuset controller: v1 if mounted, else a v2 mount whose
/// root offers `cpuset`. `Ok(None)`: neither.
pub fn find_hierarchy() -> io::Result<Option<CpusetHierarchy>> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    let CpusetMounts { v1, v2 } = parse_mounts(&mounts);
    if let Some(root) = v1 {
        return Ok(Some(CpusetHierarchy::V1(root)));
    }
    for root in v2 {
        let controllers =
            std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|name| name == "cpuset") {
            return Ok(Some(CpusetHierarchy::V2(root)));
        }
    }
    Ok(None)
}

/// Reads one cgroup file, trimmed.
pub fn read_value(directory: &Path, file: &str) -> io::Result<String> {
    std::fs::read_to_string(directory.join(file))
        .map(|text| text.trim().to_owned())
        .map_err(|error| named(error, directory, file))
}

/// Writes one cgroup file (one `write(2)`; the kernel applies it or returns the error).
pub fn write_value(directory: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(directory.join(file), value).map_err(|error| named(error, directory, file))
}

fn named(error: io::Error, directory: &Path, file: &str) -> io::Error {
    io::Error::new(
        error.kind(),
        format!("{}: {error}", directory.join(file).display()),
    )
}

/// The thread ids in a cpuset (`tasks` in v1, `cgroup.threads` in v2).
pub fn threads_in(hierarchy: &CpusetHierarchy, directory: &Path) -> io::Result<Vec<u32>> {
    let file = match hierarchy {
        CpusetHierarchy::V1(_) => "tasks",
        CpusetHierarchy::V2(_) => "cgroup.threads",
    };
    Ok(read_value(directory, file)?
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect())
}

/// Moves one thread into a v1 cpuset (its affinity becomes the cpuset's CPUs).
pub fn move_thread_v1(directory: &Path, tid: u32) -> io::Result<()> {
    write_value(directory, "tasks", &tid.to_string())
}

/// A v1 cpuset's `tasks` file held open: moving a thread is then one `write`, where
/// [`move_thread_v1`] opens and closes the file each time (opening a cgroup file cost about 20 µs
/// on the development VM under load, more than the move itself). The kernel answers a write to
/// the file of a cpuset removed meanwhile with an error, never with a move elsewhere.
#[derive(Debug)]
pub struct TasksFile {
    file: File,
    directory: PathBuf,
}

impl TasksFile {
    /// Opens `directory`'s `tasks` file for writing.
    pub fn open(directory: &Path) -> io::Result<TasksFile> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(directory.join("tasks"))
            .map_err(|error| named(error, directory, "tasks"))?;
        Ok(TasksFile {
            file,
            directory: directory.to_owned(),
        })
    }

    /// The cpuset directory whose `tasks` file this is.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// Moves thread `tid` into this cpuset.
    pub fn move_thread(&self, tid: u32) -> io::Result<()> {
        use std::io::Write as _;
        (&self.file)
            .write_all(tid.to_string().as_bytes())
            .map_err(|error| named(error, &self.directory, "tasks"))
    }
}

/// The cpuset of thread `tid` relative to its hierarchy's root ("/" for the root), from
/// /proc/TID/cpuset.
pub fn thread_cpuset(tid: u32) -> io::Result<String> {
    Ok(
        crate::thread_control::read_proc_file(&format!("/proc/{tid}/cpuset"))?
            .trim()
            .to_owned(),
    )
}

/// The directory of a cpuset named by its path relative to the hierarchy root ("/a/b").
pub fn directory_of(hierarchy: &CpusetHierarchy, relative: &str) -> PathBuf {
    hierarchy.root().join(relative.trim_start_matches('/'))
}

/// An exclusive lock on the hierarchy's root directory (flock), held until dropped or until the
/// process dies: one enforcer at a time changes the top cpuset's load balancing.
#[derive(Debug)]
pub struct HierarchyLock {
    _file: File,
}

impl HierarchyLock {
    /// Takes the lock without waiting; `Ok(None)` when another process holds it.
    pub fn try_lock(hierarchy: &CpusetHierarchy) -> io::Result<Option<HierarchyLock>> {
        let file = File::open(hierarchy.root())?;
        // SAFETY: flock on an open descriptor we own; LOCK_NB makes it return at once.
        let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if result == 0 {
            return Ok(Some(HierarchyLock { _file: file }));
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_name_the_v1_hierarchy_and_every_cgroup2() {
        let text = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
        let CpusetMounts { v1, v2 } = parse_mounts(text);
        assert_eq!(v1, Some(PathBuf::from("/sys/fs/cgroup/cpuset")));
        assert_eq!(v2, vec![PathBuf::from("/sys/fs/cgroup/unified")]);
        let CpusetMounts { v1, v2 } =
            parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        assert_eq!(v1, None);
        assert_eq!(v2, vec![PathBuf::from("/sys/fs/cgroup")]);
        // "cpuset" must be an option of its own, not part of another word.
        assert_eq!(
            parse_mounts("cgroup /x cgroup rw,cpusetx 0 0\n"),
            CpusetMounts::default()
        );
    }

    #[test]
    fn relative_cpuset_paths_join_the_root() {
        let hierarchy = CpusetHierarchy::V1(PathBuf::from("/sys/fs/cgroup/cpuset"));
        assert_eq!(
            directory_of(&hierarchy, "/"),
            PathBuf::from("/sys/fs/cgroup/cpuset/")
        );
        assert_eq!(
            directory_of(&hierarchy, "/a/b"),
            PathBuf::from("/sys/fs/cgroup/cpuset/a/b")
        );
    }
}
