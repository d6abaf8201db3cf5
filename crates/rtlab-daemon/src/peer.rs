//! Who is on the other end of a connection, decided from a pidfd of the peer rather than from its
//! pid number.
//!
//! SO_PEERCRED gives the uid and pid the kernel recorded at `connect`. The uid cannot change; the
//! pid can come to name another process once the peer exits and is reaped (a client that
//! connects, hands its socket to a child and exits, waiting for a privileged process to take its
//! pid). So the daemon takes a pidfd of the peer (SO_PEERPIDFD, Linux 6.5+) when it accepts, and
//! reads the peer's capabilities from `/proc/PID/status` only between two checks that the pidfd's
//! process is still there: if it is there after the read, the pid named it throughout. That is
//! done once per connection, as the kernel fixes SO_PEERCRED at `connect` (a process that drops
//! CAP_SYS_NICE later keeps it on connections it already has, as with any descriptor opened with a
//! privilege); before each request only the pidfd is asked again (one `poll`, about a
//! microsecond, where a status read costs 25-35): a peer that has exited is refused, and its
//! connection closed. A connection acts for the process that made it.
//!
//! On kernels without SO_PEERPIDFD the pidfd is opened from the SO_PEERCRED pid at accept
//! (`pidfd_open`), which a pid reused before that moment would fool; [`peer_pidfd_warning`] says
//! so at start.

use crate::registry::Caller;
use rtlab_core::rpc::{ErrorCode, RpcError};
use rtlab_sys::ipc::{self, PeerCredentials};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// A connection's peer: its credentials from `connect` and a pidfd of its process.
#[derive(Debug)]
pub struct Peer {
    credentials: PeerCredentials,
    /// `None` when the peer's pid is not visible here (another pid namespace) or no pidfd could
    /// be had: then only uid 0 is privileged.
    pidfd: Option<OwnedFd>,
    /// Decided at accept, under the pidfd.
    privileged: bool,
}

fn gone(pid: u32) -> RpcError {
    RpcError::new(
        ErrorCode::Permission,
        format!(
            "the process that opened this connection (pid {pid}) has exited; a connection acts for the process that made it: connect again"
        ),
    )
}

impl Peer {
    /// The peer of an accepted `stream` whose SO_PEERCRED is `credentials`, its privilege read
    /// under its pidfd; an error when it has exited already.
    pub fn of(stream: &UnixStream, credentials: PeerCredentials) -> Result<Peer, RpcError> {
        let pidfd = match ipc::peer_pidfd(stream) {
            Ok(pidfd) => Some(pidfd),
            Err(error) if ipc::is_unsupported_option(&error) => {
                match ipc::pidfd_open_process(credentials.pid) {
                    Ok(pidfd) => Some(pidfd),
                    Err(error) if ipc::is_no_such_process(&error) && credentials.pid != 0 => {
                        return Err(gone(credentials.pid))
                    }
                    Err(_) => None,
                }
            }
            // Out of descriptors: the peer is there, the daemon cannot look at it now.
            Err(error) if ipc::is_out_of_resources(&error) => {
                return Err(RpcError::new(
                    ErrorCode::Busy,
                    format!("the daemon is out of resources ({error}); try again later"),
                ))
            }
            // ESRCH or EINVAL: the peer is gone (reaped) before its connection was accepted.
            Err(_) => return Err(gone(credentials.pid)),
        };
        let privileged = caller_of_pidfd(credentials, pidfd.as_ref().map(AsFd::as_fd))?.privileged;
        Ok(Peer {
            credentials,
            pidfd,
            privileged,
        })
    }

    /// Who is asking now: an error when the peer has exited.
    pub fn caller(&self) -> Result<Caller, RpcError> {
        if let Some(pidfd) = &self.pidfd {
            if ipc::pidfd_process_exited(pidfd.as_fd()).unwrap_or(true) {
                return Err(gone(self.credentials.pid));
            }
        }
        Ok(Caller {
            pid: self.credentials.pid,
            uid: self.credentials.uid,
            privileged: self.privileged,
        })
    }
}

/// The caller behind `credentials` (uid from the kernel, pid as seen here), its privilege read from
/// `/proc/PID/status` between two checks that `pidfd` (a pidfd of that same process) has not
/// exited. Without a pidfd, or with pid 0 (not visible in this pid namespace), only uid 0 is
/// privileged. An error when the process has exited.
pub fn caller_of_pidfd(
    credentials: PeerCredentials,
    pidfd: Option<BorrowedFd<'_>>,
) -> Result<Caller, RpcError> {
    let exited = |pidfd: BorrowedFd<'_>| ipc::pidfd_process_exited(pidfd).unwrap_or(true);
    // Without a pidfd (or not visible here) only uid 0 is privileged.
    let mut privileged = credentials.uid == 0;
    if let Some(pidfd) = pidfd {
        if exited(pidfd) {
            return Err(gone(credentials.pid));
        }
        if credentials.pid != 0 {
            privileged = privilege_in_our_user_namespace(credentials);
        }
        if exited(pidfd) {
            return Err(gone(credentials.pid));
        }
    }
    Ok(Caller {
        pid: credentials.pid,
        uid: credentials.uid,
        privileged,
    })
}

/// Whether the process behind `credentials` is root or holds CAP_SYS_NICE *in the daemon's own
/// user namespace*. Inside a user namespace of its own (`unshare -Ur`) every process shows a full
/// `CapEff` and may call itself root, while it holds nothing over the machine: a peer in any
/// other user namespace is unprivileged, whatever its uid or capabilities (docs/reservations.md,
/// "Who may do what").
fn privilege_in_our_user_namespace(credentials: PeerCredentials) -> bool {
    use rtlab_sys::user_namespace::{user_namespace_of, Relation};
    if !matches!(user_namespace_of(credentials.pid), Ok(Relation::Same)) {
        return false;
    }
    credentials.uid == 0
        || rtlab_sys::proc_thread::thread_status(credentials.pid)
            .is_ok_and(|status| status.has_capability(rtlab_sys::proc_thread::CAP_SYS_NICE))
}

impl Caller {
    /// The caller behind a pid and uid known some other way than from a socket the daemon
    /// accepted (a D-Bus sender's): a pidfd is opened from the pid and the privilege read under
    /// it, as [`caller_of_pidfd`]; a process gone by then is unprivileged. A pid reused before the
    /// pidfd is opened could fool it: prefer a pidfd from the kernel where there is one.
    pub fn from_credentials(credentials: PeerCredentials) -> Caller {
        let unprivileged = Caller {
            pid: credentials.pid,
            uid: credentials.uid,
            privileged: false,
        };
        match ipc::pidfd_open_process(credentials.pid) {
            Ok(pidfd) => caller_of_pidfd(credentials, Some(pidfd.as_fd())).unwrap_or(unprivileged),
            Err(_) => unprivileged,
        }
    }
}

/// How many descriptors the daemon asks for (`LimitNOFILE=` in rtlabd.service says the same): a
/// socket per connection (`max_connections`, 512) and a pidfd per watched thread, with room.
pub const OPEN_FILES_WANTED: u64 = 16_384;

/// Raises the soft RLIMIT_NOFILE to [`OPEN_FILES_WANTED`] (or the hard limit); a warning for the
/// operator when less was had, `None` otherwise. Out of descriptors the daemon still runs: new
/// connections wait (the accept loop backs off) and are refused if they wait too long.
pub fn open_files_warning() -> Option<String> {
    match rtlab_sys::thread_control::raise_open_files_limit(OPEN_FILES_WANTED) {
        Ok(limit) if limit >= OPEN_FILES_WANTED => None,
        Ok(limit) => Some(format!(
            "rtlab daemon: warning: it may open {limit} files (RLIMIT_NOFILE's hard limit), fewer than the {OPEN_FILES_WANTED} it asks for; raise LimitNOFILE= (or `ulimit -Hn`) if clients are turned away"
        )),
        Err(error) => Some(format!(
            "rtlab daemon: warning: cannot raise RLIMIT_NOFILE: {error}"
        )),
    }
}

/// A warning for the operator when this kernel cannot give a pidfd of a socket's peer
/// (SO_PEERPIDFD, Linux 6.5+); `None` when it can.
pub fn peer_pidfd_warning() -> Option<String> {
    let (left, _right) = UnixStream::pair().ok()?;
    match ipc::peer_pidfd(&left) {
        Ok(_) => None,
        Err(error) => Some(format!(
            "rtlab daemon: warning: this kernel gives no pidfd of a socket's peer (SO_PEERPIDFD: {error}); a caller's privilege is read from /proc of the pid SO_PEERCRED names, opened as a pidfd at accept, which a pid reused before that moment could fool (Linux 6.5+ closes this)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_peer_is_its_own_uid_and_an_exited_one_is_refused() {
        let (left, _right) = UnixStream::pair().unwrap();
        let credentials = ipc::peer_credentials(&left).unwrap();
        let peer = Peer::of(&left, credentials).unwrap();
        let caller = peer.caller().unwrap();
        assert_eq!(caller.uid, rtlab_sys::proc_thread::current_uid());
        assert_eq!(caller.pid, std::process::id());
        assert_eq!(
            caller.privileged,
            caller.uid == 0 || {
                let status = rtlab_sys::proc_thread::thread_status(std::process::id()).unwrap();
                status.has_capability(rtlab_sys::proc_thread::CAP_SYS_NICE)
            }
        );
        // A process that has exited: its pidfd decides, not its pid (which names no one now, or
        // someone else).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pidfd = ipc::pidfd_open_process(child.id()).unwrap();
        child.wait().unwrap();
        let error = caller_of_pidfd(
            PeerCredentials {
                pid: child.id(),
                ..credentials
            },
            Some(pidfd.as_fd()),
        )
        .unwrap_err();
        assert_eq!(error.code, ErrorCode::Permission);
        assert!(error.message.contains("has exited"), "{error}");
        // Known only by its pid (a D-Bus sender): decided under a pidfd opened from it.
        assert_eq!(Caller::from_credentials(credentials), caller);
    }
}
