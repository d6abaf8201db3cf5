//! What the daemon needs from the kernel to serve local clients: who is on the other end of a Unix
//! socket (SO_PEERCRED, and a pidfd of that process with SO_PEERPIDFD), systemd socket activation (`LISTEN_FDS`), thread pidfds that become
//! readable when the thread exits (`pidfd_open` with `PIDFD_THREAD`, Linux 6.9+), and `poll`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The credentials of a Unix socket's peer, as the kernel recorded them at `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// SO_PEERCRED: the peer's pid, uid and gid (the kernel's record, which a client cannot forge).
pub fn peer_credentials(stream: &UnixStream) -> io::Result<PeerCredentials> {
    let mut credentials = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a live socket owned by `stream`; `credentials` is writable and `length`
    // holds its size, which the kernel will not exceed.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut length,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    if length as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "SO_PEERCRED returned a short ucred",
        ));
    }
    Ok(PeerCredentials {
        pid: credentials.pid as u32,
        uid: credentials.uid,
        gid: credentials.gid,
    })
}

/// `SO_PEERPIDFD` in asm-generic/socket.h, which x86 and arm use (not in every libc release).
const SO_PEERPIDFD: libc::c_int = 77;

/// SO_PEERPIDFD (Linux 6.5+): a pidfd of the process that connected, taken by the kernel at
/// `connect`. Unlike the pid in SO_PEERCRED it cannot come to name another process: once that
/// process has exited the pidfd says so ([`pidfd_process_exited`]) even if its pid is reused.
/// Kernels without it answer `ENOPROTOOPT` ([`is_unsupported_option`]); a peer already gone may
/// be answered with `ESRCH` or `EINVAL`, or with a pidfd of an exited process.
pub fn peer_pidfd(stream: &UnixStream) -> io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is a live socket owned by `stream`; `fd` is a writable c_int and `length`
    // holds its size, which the kernel will not exceed.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut length,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    if fd < 0 || length as usize != std::mem::size_of::<libc::c_int>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "SO_PEERPIDFD returned no descriptor",
        ));
    }
    // SAFETY: the kernel just installed this descriptor for this process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether a socket option error means this kernel does not know the option (`ENOPROTOOPT`).
pub fn is_unsupported_option(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOPROTOOPT)
}

/// Whether the process of a process pidfd has exited (a zombie counts: it runs no more), without
/// waiting. A pidfd polls readable once its process has exited; unlike `pidfd_send_signal(0)`
/// this needs no permission to signal the process.
pub fn pidfd_process_exited(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    loop {
        let mut entry = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `entry` is one valid pollfd naming a descriptor the caller keeps open.
        let result = unsafe { libc::poll(&mut entry, 1, 0) };
        if result < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if entry.revents & libc::POLLNVAL != 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        return Ok(entry.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0);
    }
}

/// The first file descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// Takes the sockets systemd passed by socket activation, as `sd_listen_fds(1)` does: only when
/// `LISTEN_PID` is this process, marks them close-on-exec and removes `LISTEN_PID`, `LISTEN_FDS`
/// and `LISTEN_FDNAMES` from the environment so that no child takes them too. Empty when the
/// process was not socket-activated.
///
/// Call it once, early, before any thread is started (it changes the environment).
pub fn take_listen_fds() -> io::Result<Vec<OwnedFd>> {
    let pid_matches = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|text| text.parse::<u32>().ok())
        .is_some_and(|pid| pid == std::process::id());
    if !pid_matches {
        return Ok(Vec::new());
    }
    let count: i32 = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "LISTEN_PID is set but LISTEN_FDS is not a number",
            )
        })?;
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(name);
    }
    let mut fds = Vec::new();
    for fd in LISTEN_FDS_START..LISTEN_FDS_START + count.clamp(0, 64) {
        // SAFETY: F_GETFD only reads the descriptor's flags; a closed fd gives EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above; setting FD_CLOEXEC changes nothing but exec behaviour.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: systemd passed this descriptor to this process (LISTEN_PID matched) and nothing
        // else in the process owns it; it was checked open above.
        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(fds)
}

/// Opens a pidfd for one thread (`PIDFD_THREAD`, Linux 6.9+): it polls readable when that thread
/// exits, not only when the whole process does. Older kernels answer `EINVAL`.
pub fn pidfd_open_thread(tid: u32) -> io::Result<OwnedFd> {
    pidfd_open(tid, libc::O_EXCL as libc::c_uint)
}

/// Opens a pidfd for a process (its thread-group leader): readable when the process exits.
pub fn pidfd_open_process(pid: u32) -> io::Result<OwnedFd> {
    pidfd_open(pid, 0)
}

fn pidfd_open(id: u32, flags: libc::c_uint) -> io::Result<OwnedFd> {
    if id == 0 || id > i32::MAX as u32 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let result = unsafe { libc::syscall(libc::SYS_pidfd_open, id as libc::pid_t, flags) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(result as RawFd) })
}

/// What `PIDFD_GET_INFO` (Linux 6.13+) tells about a pidfd's thread: its ids and uids, read from
/// the task itself in one `ioctl` (a /proc/TID/status read costs an open, the kernel formatting
/// fifty lines, and a close: 25-35 µs on the development VM against about 1 µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidfdInfo {
    pub pid: u32,
    pub tgid: u32,
    pub real_uid: u32,
    pub effective_uid: u32,
}

/// `struct pidfd_info` as of its first version (`PIDFD_INFO_SIZE_VER0`, 64 bytes); the kernel
/// answers every version from its size in the ioctl number.
#[repr(C)]
#[derive(Default)]
struct PidfdInfoVer0 {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

/// `_IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info)` for the 64-byte version.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PidfdInfoVer0>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;
/// `PIDFD_INFO_PID | PIDFD_INFO_CREDS`: always answered.
const PIDFD_INFO_PID_AND_CREDS: u64 = 0b11;

/// The ids and uids of a pidfd's thread. Kernels before 6.13 answer `ENOTTY` or `EINVAL`; a thread
/// that has exited, `ESRCH`.
pub fn pidfd_info(pidfd: BorrowedFd<'_>) -> io::Result<PidfdInfo> {
    let mut info = PidfdInfoVer0 {
        mask: PIDFD_INFO_PID_AND_CREDS,
        ..PidfdInfoVer0::default()
    };
    // SAFETY: `pidfd` is a live descriptor; `info` is a writable struct of exactly the size encoded
    // in the request number, which bounds what the kernel writes.
    let result = unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO as _, &mut info) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    if info.mask & PIDFD_INFO_PID_AND_CREDS != PIDFD_INFO_PID_AND_CREDS {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "PIDFD_GET_INFO answered without ids or credentials",
        ));
    }
    Ok(PidfdInfo {
        pid: info.pid,
        tgid: info.tgid,
        real_uid: info.ruid,
        effective_uid: info.euid,
    })
}

/// Whether a pidfd_open error means the thread or process does not exist (any more).
pub fn is_no_such_process(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ESRCH)
}

/// Whether an error is the want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM) rather than
/// something about the request: trying again later may work.
pub fn is_out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Waits until one of `fds` is readable (or hung up), or `timeout` passes (`None`: forever).
/// Returns, per fd, whether it is ready. EINTR returns with nothing ready.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut entries: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = match timeout {
        None => -1,
        Some(duration) => duration
            .as_millis()
            .saturating_add(u128::from(duration.subsec_nanos() % 1_000_000 != 0))
            .min(i32::MAX as u128) as libc::c_int,
    };
    // SAFETY: `entries` is a valid array of `entries.len()` pollfds, each naming a descriptor the
    // caller keeps open for the call (they are borrowed).
    let result = unsafe {
        libc::poll(
            entries.as_mut_ptr(),
            entries.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if result < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(error);
    }
    Ok(entries
        .iter()
        .map(|entry| entry.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
        .collect())
}

/// Opens the file at `path` itself with `O_PATH | O_NOFOLLOW`: a descriptor of that inode (a
/// socket, say) for `fstat` and for changes made through `/proc/self/fd`, never of what a
/// symbolic link there points to (a link is opened as the link, and is then not a socket).
pub fn open_path_no_follow(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn peer_credentials_are_our_own_on_a_socket_pair() {
        let (left, _right) = UnixStream::pair().unwrap();
        let credentials = peer_credentials(&left).unwrap();
        assert_eq!(credentials.pid, std::process::id());
        assert_eq!(credentials.uid, crate::users::current_uid());
    }

    #[test]
    fn peer_pidfd_names_a_live_process_where_the_kernel_has_it() {
        let (left, _right) = UnixStream::pair().unwrap();
        let has_peer_pidfd = crate::thread_control::kernel_release()
            .ok()
            .and_then(|release| crate::thread_control::parse_kernel_version(&release))
            .is_some_and(|version| version >= (6, 5));
        match peer_pidfd(&left) {
            Ok(pidfd) => assert!(!pidfd_process_exited(pidfd.as_fd()).unwrap()),
            Err(error) => assert!(
                !has_peer_pidfd && is_unsupported_option(&error),
                "SO_PEERPIDFD failed: {error}"
            ),
        }
    }

    #[test]
    fn a_process_pidfd_says_when_its_process_has_exited() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pidfd = pidfd_open_process(child.id()).unwrap();
        child.wait().unwrap();
        assert!(pidfd_process_exited(pidfd.as_fd()).unwrap());
        let me = pidfd_open_process(std::process::id()).unwrap();
        assert!(!pidfd_process_exited(me.as_fd()).unwrap());
    }

    #[test]
    fn pidfd_info_names_a_thread_its_process_and_uids_where_the_kernel_has_it() {
        let thread = crate::test_thread::WaitingThread::spawn();
        let tid = thread.tid;
        let pidfd = pidfd_open_thread(tid).unwrap();
        let has_get_info = crate::thread_control::kernel_release()
            .ok()
            .and_then(|release| crate::thread_control::parse_kernel_version(&release))
            .is_some_and(|version| version >= (6, 13));
        match pidfd_info(pidfd.as_fd()) {
            Ok(info) => {
                assert_eq!(info.pid, tid);
                assert_eq!(info.tgid, std::process::id());
                assert_eq!(info.real_uid, crate::users::current_uid());
                assert_eq!(info.effective_uid, crate::users::current_uid());
            }
            Err(error) => assert!(!has_get_info, "PIDFD_GET_INFO failed on 6.13+: {error}"),
        }
        thread.finish();
    }

    #[test]
    fn a_thread_pidfd_becomes_readable_when_the_thread_exits() {
        let thread = crate::test_thread::WaitingThread::spawn();
        let tid = thread.tid;
        let pidfd = pidfd_open_thread(tid).unwrap();
        assert_eq!(
            poll_readable(&[pidfd.as_fd()], Some(Duration::ZERO)).unwrap(),
            vec![false]
        );
        thread.finish();
        assert_eq!(poll_readable(&[pidfd.as_fd()], None).unwrap(), vec![true]);
    }

    #[test]
    fn poll_reports_which_fd_is_ready() {
        let (quiet, _quiet_peer) = UnixStream::pair().unwrap();
        let (ready, mut ready_peer) = UnixStream::pair().unwrap();
        ready_peer.write_all(b"x").unwrap();
        let result = poll_readable(
            &[quiet.as_fd(), ready.as_fd()],
            Some(Duration::from_secs(5)),
        );
        assert_eq!(result.unwrap(), vec![false, true]);
    }

    #[test]
    fn pidfd_of_no_thread_is_esrch() {
        let error = pidfd_open_thread(0).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ESRCH));
    }

    #[test]
    fn without_listen_pid_nothing_is_taken() {
        // The test harness is never socket-activated.
        assert!(std::env::var("LISTEN_PID").is_err());
        assert!(take_listen_fds().unwrap().is_empty());
    }
}
