//! A `--load-cmd` that cannot outlive rtlab, whatever kills rtlab.
//!
//! The parent-death signal alone is not enough: it reaches only the shell rtlab started, and the
//! shell's own children (`make -j8`'s compilers, `sleep 100 &`) run on, reparented to init. So the
//! load is started by a tiny **supervisor**: a forked copy of rtlab (no exec) that starts the shell
//! in a process group of its own and then waits on a pipe whose only writer is rtlab. Every way
//! rtlab can die, SIGKILL included, closes that pipe; the supervisor then sends SIGTERM to the
//! load's whole group, SIGKILL 2 s later, reaps the shell and exits.
//!
//! While rtlab lives, it signals the group itself ([`SupervisedLoad::signal_group`]) and learns the
//! shell's exit status from the supervisor over a second pipe ([`SupervisedLoad::try_wait`]): the
//! supervisor observes the exit without reaping (`waitid(WNOWAIT)`), so the shell's pid, which is
//! also the group id, cannot be reused by another process while rtlab may still signal it.
//!
//! Between `fork` and `exec` (and in the supervisor, which never execs) a multi-threaded process may
//! only call async-signal-safe functions: everything the children need (the argument vector,
//! `/dev/null`, the pipes) is prepared before forking, and the children make raw syscalls only, no
//! allocation, no lock.

use crate::load_syscalls::{signal_process_group, GroupSignal};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// How long the supervisor waits between SIGTERM and SIGKILL once rtlab is gone.
const SUPERVISOR_GRACE_NS: i64 = 2_000_000_000;

/// A shell command running as load under a supervisor (see the module documentation).
#[derive(Debug)]
pub struct SupervisedLoad {
    supervisor_pid: libc::pid_t,
    /// The shell's pid, which is also its process group's id.
    load_pid: u32,
    /// rtlab's end of the pipe whose closing tells the supervisor to kill the group.
    control: Option<OwnedFd>,
    /// Where the supervisor writes the shell's wait status when it exits.
    status: OwnedFd,
    exit_status: Option<ExitStatus>,
    reaped: bool,
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// A pipe with both ends close-on-exec: `(read, write)`.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(last_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `bytes` to `fd`; async-signal-safe.
fn write_all_raw(fd: libc::c_int, bytes: &[u8]) -> bool {
    let mut written = 0;
    while written < bytes.len() {
        // SAFETY: the pointer and length describe the unwritten rest of `bytes`.
        let result =
            unsafe { libc::write(fd, bytes[written..].as_ptr().cast(), bytes.len() - written) };
        if result < 0 {
            // SAFETY: reading errno is async-signal-safe.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return false;
        }
        written += result as usize;
    }
    true
}

/// Reads exactly 4 bytes (an i32) from `fd`, blocking; `None` at end of file.
fn read_i32(fd: &OwnedFd) -> io::Result<Option<i32>> {
    let mut buffer = [0u8; 4];
    let mut filled = 0;
    while filled < buffer.len() {
        // SAFETY: the pointer and length describe the unfilled rest of `buffer`.
        let result = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buffer[filled..].as_mut_ptr().cast(),
                buffer.len() - filled,
            )
        };
        match result {
            0 => return Ok(None),
            n if n > 0 => filled += n as usize,
            _ => {
                let error = last_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(Some(i32::from_ne_bytes(buffer)))
}

/// Whether `fd` has data (or end of file) to read now.
fn readable_now(fd: &OwnedFd) -> io::Result<bool> {
    let mut poll_fd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let result = unsafe { libc::poll(&mut poll_fd, 1, 0) };
    if result < 0 {
        return Err(last_error());
    }
    Ok(result > 0 && poll_fd.revents & (libc::POLLIN | libc::POLLHUP) != 0)
}

/// Closes every descriptor from `first` up, except those in `keep` (sorted ascending);
/// async-signal-safe (close_range(2), Linux 5.9).
fn close_descriptors_except(first: libc::c_int, keep: &[libc::c_int]) {
    let mut from = first as libc::c_uint;
    for &kept in keep {
        let kept = kept as libc::c_uint;
        if kept >= from {
            if kept > from {
                // SAFETY: close_range only closes descriptors; none of those closed is used again.
                unsafe { libc::syscall(libc::SYS_close_range, from, kept - 1, 0) };
            }
            from = kept + 1;
        }
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) };
}

/// The signals whose disposition the supervisor changes and the shell gets back at their default.
const TERMINAL_SIGNALS: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE];

impl SupervisedLoad {
    /// Starts `/bin/sh -c shell_command` under a supervisor, with standard input and output on
    /// /dev/null, in a process group of its own. The shell also gets SIGTERM if the supervisor
    /// dies.
    pub fn spawn(shell_command: &str) -> io::Result<SupervisedLoad> {
        let shell = CString::new("/bin/sh").expect("no NUL");
        let dash_c = CString::new("-c").expect("no NUL");
        let text = CString::new(shell_command).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the command contains a NUL byte",
            )
        })?;
        let argv = [
            shell.as_ptr(),
            dash_c.as_ptr(),
            text.as_ptr(),
            std::ptr::null(),
        ];
        let null_path = CString::new("/dev/null").expect("no NUL");
        // SAFETY: a valid C string and flags.
        let dev_null = unsafe { libc::open(null_path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if dev_null == -1 {
            return Err(last_error());
        }
        // SAFETY: open succeeded; the descriptor is ours.
        let dev_null = unsafe { OwnedFd::from_raw_fd(dev_null) };
        let (control_read, control_write) = pipe()?;
        let (status_read, status_write) = pipe()?;
        let rtlab_pid = std::process::id() as libc::pid_t;

        // SAFETY: fork duplicates the process; the child below only makes async-signal-safe
        // calls (see `supervise`) on memory prepared before the fork, and ends with _exit.
        let supervisor_pid = unsafe { libc::fork() };
        if supervisor_pid == -1 {
            return Err(last_error());
        }
        if supervisor_pid == 0 {
            // SAFETY: in the forked child; `supervise` never returns.
            unsafe {
                supervise(
                    rtlab_pid,
                    &argv,
                    dev_null.as_raw_fd(),
                    control_read.as_raw_fd(),
                    control_write.as_raw_fd(),
                    status_read.as_raw_fd(),
                    status_write.as_raw_fd(),
                )
            }
        }
        drop(control_read);
        drop(status_write);
        drop(dev_null);
        let mut load = SupervisedLoad {
            supervisor_pid,
            load_pid: 0,
            control: Some(control_write),
            status: status_read,
            exit_status: None,
            reaped: false,
        };
        match read_i32(&load.status)? {
            Some(pid) if pid > 1 => {
                load.load_pid = pid as u32;
                Ok(load)
            }
            Some(negative_errno) => Err(io::Error::from_raw_os_error(-negative_errno)),
            None => Err(io::Error::other(
                "the load supervisor exited before starting the load",
            )),
        }
    }

    /// The shell's pid, which is also the id of the load's process group.
    pub fn id(&self) -> u32 {
        self.load_pid
    }

    /// The supervisor's pid.
    pub fn supervisor_id(&self) -> u32 {
        self.supervisor_pid as u32
    }

    /// Signals every process of the load's group; `Ok(false)` when none is left.
    pub fn signal_group(&self, signal: GroupSignal) -> io::Result<bool> {
        signal_process_group(self.load_pid, signal)
    }

    /// The shell's exit status if it has ended, without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.exit_status.is_none() && readable_now(&self.status)? {
            self.read_status()?;
        }
        Ok(self.exit_status)
    }

    /// Waits for the shell to end, then stops the supervisor (which signals whatever is left of
    /// the group) and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if self.exit_status.is_none() {
            self.read_status()?;
        }
        self.finish_supervisor();
        self.exit_status
            .ok_or_else(|| io::Error::other("the load supervisor ended without the shell's status"))
    }

    fn read_status(&mut self) -> io::Result<()> {
        match read_i32(&self.status)? {
            Some(raw) => self.exit_status = Some(ExitStatus::from_raw(raw)),
            // The supervisor is gone without reporting (it was killed): the shell died with it.
            None => self.exit_status = Some(ExitStatus::from_raw(libc::SIGKILL)),
        }
        Ok(())
    }

    /// Closes the control pipe (the supervisor then terminates the group) and reaps the
    /// supervisor.
    fn finish_supervisor(&mut self) {
        self.control = None;
        if self.reaped {
            return;
        }
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child; `status` is a valid int.
            let result = unsafe { libc::waitpid(self.supervisor_pid, &mut status, 0) };
            if result != -1 || last_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        self.reaped = true;
    }
}

impl Drop for SupervisedLoad {
    /// The supervisor terminates the group (SIGTERM, SIGKILL after 2 s) and is reaped.
    fn drop(&mut self) {
        self.finish_supervisor();
    }
}

/// The supervisor: runs in the forked child and never returns.
///
/// # Safety
/// Must be called only in a freshly forked child of a (possibly multi-threaded) process: it uses
/// only async-signal-safe system calls and the memory `argv` points into.
#[allow(clippy::too_many_arguments)]
unsafe fn supervise(
    rtlab_pid: libc::pid_t,
    argv: &[*const libc::c_char; 4],
    dev_null: libc::c_int,
    control_read: libc::c_int,
    control_write: libc::c_int,
    status_read: libc::c_int,
    status_write: libc::c_int,
) -> ! {
    // SAFETY: the whole function makes raw syscalls on descriptors and memory set up before
    // the fork, as the caller guarantees; nothing allocates or takes a lock.
    unsafe {
        // Only rtlab may hold the control pipe's write end, or its closing would go unseen.
        libc::close(control_write);
        libc::close(status_read);
        // rtlab died before we got here: start nothing.
        if libc::getppid() != rtlab_pid {
            libc::_exit(1);
        }
        let supervisor = libc::getpid();
        let shell = libc::fork();
        if shell == -1 {
            let errno = -*libc::__errno_location();
            write_all_raw(status_write, &errno.to_ne_bytes());
            libc::_exit(1);
        }
        if shell == 0 {
            start_shell(supervisor, argv, dev_null);
        }
        // Group the shell before reporting its pid, so rtlab never signals a group that does not
        // exist yet (the shell does the same itself; whichever runs first wins, both agree).
        libc::setpgid(shell, shell);
        // Stay alive through the terminal's signals: rtlab decides when the load ends.
        for signal in TERMINAL_SIGNALS {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Hold nothing of rtlab's (trace instances, output files, the terminal): only the pipes.
        libc::dup2(dev_null, 0);
        libc::dup2(dev_null, 1);
        libc::dup2(dev_null, 2);
        let mut keep = [control_read, status_write];
        keep.sort_unstable();
        close_descriptors_except(3, &keep);
        write_all_raw(status_write, &shell.to_ne_bytes());

        // A pidfd makes the shell's exit wake the poll below; without one, look every 100 ms.
        let pidfd = libc::syscall(libc::SYS_pidfd_open, shell, 0) as libc::c_int;
        let mut reported = false;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: control_read,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if reported { -1 } else { pidfd },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let timeout = if pidfd >= 0 || reported { -1 } else { 100 };
            libc::poll(fds.as_mut_ptr(), 2, timeout);
            if !reported {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let observed = libc::waitid(
                    libc::P_PID,
                    shell as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                );
                if observed == 0 && info.si_pid() == shell {
                    let raw = wait_status(info.si_code, info.si_status());
                    write_all_raw(status_write, &raw.to_ne_bytes());
                    reported = true;
                }
            }
            if fds[0].revents != 0 {
                // rtlab never writes: readable means end of file, rtlab has closed it or died.
                break;
            }
        }
        // Whatever is left of the group: SIGTERM, then SIGKILL after the grace period.
        libc::killpg(shell, libc::SIGTERM);
        let mut start = std::mem::zeroed::<libc::timespec>();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut start);
        loop {
            // Reap the shell as soon as it ends, so an empty group reads as gone.
            let mut status = 0;
            libc::waitpid(shell, &mut status, libc::WNOHANG);
            if libc::kill(-shell, 0) == -1 {
                break;
            }
            let mut now = std::mem::zeroed::<libc::timespec>();
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
            let elapsed =
                (now.tv_sec - start.tv_sec) * 1_000_000_000 + (now.tv_nsec - start.tv_nsec);
            if elapsed >= SUPERVISOR_GRACE_NS {
                libc::killpg(shell, libc::SIGKILL);
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 20_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        let mut status = 0;
        libc::waitpid(shell, &mut status, 0);
        libc::_exit(0);
    }
}

/// A `waitpid`-style status word from `waitid`'s code and status.
fn wait_status(code: libc::c_int, status: libc::c_int) -> libc::c_int {
    match code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => status & 0x7f,
    }
}

/// The shell: its own process group, /dev/null for standard streams, default signals, SIGTERM
/// when the supervisor dies, then exec. Never returns.
///
/// # Safety
/// As [`supervise`]: only in a freshly forked child.
unsafe fn start_shell(
    supervisor: libc::pid_t,
    argv: &[*const libc::c_char; 4],
    dev_null: libc::c_int,
) -> ! {
    // SAFETY: raw syscalls on memory prepared before the fork, as the caller guarantees.
    unsafe {
        libc::setpgid(0, 0);
        libc::dup2(dev_null, 0);
        libc::dup2(dev_null, 1);
        libc::dup2(dev_null, 2);
        close_descriptors_except(3, &[]);
        for signal in TERMINAL_SIGNALS {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        ) == -1
            || libc::getppid() != supervisor
        {
            libc::_exit(126);
        }
        libc::execv(argv[0], argv.as_ptr());
        libc::_exit(127);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn group_members(group: u32) -> usize {
        crate::load_syscalls::live_process_group_members(group)
            .unwrap()
            .len()
    }

    fn wait_until(mut condition: impl FnMut() -> bool, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        condition()
    }

    #[test]
    fn reports_the_shells_exit_status() {
        let mut load = SupervisedLoad::spawn("exit 3").unwrap();
        assert!(wait_until(
            || load.try_wait().unwrap().is_some(),
            Duration::from_secs(10)
        ));
        assert_eq!(load.try_wait().unwrap().unwrap().code(), Some(3));
        assert_eq!(load.wait().unwrap().code(), Some(3));
    }

    #[test]
    fn dropping_it_ends_the_whole_group() {
        // What happens when rtlab dies: the control pipe closes without any signal from rtlab.
        let load = SupervisedLoad::spawn("sleep 600 & sleep 600").unwrap();
        let group = load.id();
        assert!(wait_until(
            || group_members(group) >= 2,
            Duration::from_secs(10)
        ));
        drop(load);
        assert_eq!(group_members(group), 0, "the whole group is gone");
    }

    #[test]
    fn the_group_is_signalled_while_the_supervisor_waits() {
        let mut load = SupervisedLoad::spawn("sleep 600 & sleep 600").unwrap();
        let group = load.id();
        assert!(wait_until(
            || group_members(group) >= 2,
            Duration::from_secs(10)
        ));
        assert!(load.signal_group(GroupSignal::Kill).unwrap());
        let status = load.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert_eq!(group_members(group), 0);
    }

    #[test]
    fn a_nul_byte_is_an_input_error() {
        let error = SupervisedLoad::spawn("a\0b").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}
