//! The daemon's listening socket: taken from systemd (socket activation) or bound at a path.
//!
//! The daemon runs as root and its socket's directory may be one others can write to, so the path
//! is never trusted: a symbolic link or any file other than a socket there is refused, not removed
//! or followed; only a stale socket of the daemon's own uid that nobody listens on is replaced.
//! The mode is set on the inode opened with `O_PATH | O_NOFOLLOW` (through /proc/self/fd), after
//! checking it is a socket of ours, so a file swapped in after `bind` is never changed.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// A listening socket and whether the daemon owns its file (and removes it on exit).
#[derive(Debug)]
pub struct Listening {
    pub listener: UnixListener,
    /// `Some(path)` when the daemon bound it; `None` when systemd passed it.
    pub bound_path: Option<PathBuf>,
}

impl Drop for Listening {
    /// Removes the socket file it bound, if a socket of ours is still what is there.
    fn drop(&mut self) {
        if let Some(path) = &self.bound_path {
            if std::fs::symlink_metadata(path).is_ok_and(|metadata| is_our_socket(&metadata)) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// A socket file owned by this process's effective uid.
fn is_our_socket(metadata: &Metadata) -> bool {
    metadata.file_type().is_socket()
        && metadata.uid() == rtlab_sys::proc_thread::current_effective_uid()
}

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("another rtlab daemon is already listening on {0}")]
    AlreadyRunning(String),
    #[error("{path} {what}; refusing to remove or follow it (remove it yourself if it is not needed, or choose another --socket)")]
    Occupied { path: String, what: String },
    #[error("systemd passed {0} sockets; rtlabd.socket must pass exactly one")]
    ActivationCount(usize),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// The socket systemd passed (socket activation), else `path` bound by the daemon: its directory
/// is created (mode 0755), a stale socket file nobody listens on is replaced, and the socket is
/// made connectable by every user (mode 0666; who may do what is decided per request by
/// SO_PEERCRED).
pub fn listen(path: &Path) -> Result<Listening, SocketError> {
    let activated = rtlab_sys::ipc::take_listen_fds().map_err(|source| SocketError::Io {
        context: "taking the sockets systemd passed (LISTEN_FDS)".into(),
        source,
    })?;
    match activated.len() {
        0 => {}
        1 => {
            let fd = activated.into_iter().next().expect("one");
            return Ok(Listening {
                listener: UnixListener::from(fd),
                bound_path: None,
            });
        }
        count => return Err(SocketError::ActivationCount(count)),
    }
    bind(path)
}

/// Binds `path` (see [`listen`]), connectable by every user (mode 0666).
pub fn bind(path: &Path) -> Result<Listening, SocketError> {
    bind_with_mode(path, 0o666)
}

/// Binds root's own socket at `path` (`rtlab_core::rpc::root_socket_path`), the same way as
/// [`bind`] but mode 0600: only root can connect (connecting needs write permission on the
/// file). The server still refuses any peer but uid 0 on it.
pub fn bind_root(path: &Path) -> Result<Listening, SocketError> {
    bind_with_mode(path, 0o600)
}

fn bind_with_mode(path: &Path, mode: u32) -> Result<Listening, SocketError> {
    let io = |context: String| move |source| SocketError::Io { context, source };
    if let Some(directory) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        if !directory.exists() {
            std::fs::create_dir_all(directory)
                .map_err(io(format!("creating {}", directory.display())))?;
            std::fs::set_permissions(directory, std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("setting the mode of {}", directory.display())))?;
        }
    }
    let occupied = |what: String| SocketError::Occupied {
        path: path.display().to_string(),
        what,
    };
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(format!("looking at {}", path.display()))(error)),
        Ok(metadata) => {
            let kind = metadata.file_type();
            if kind.is_symlink() {
                return Err(occupied("is a symbolic link".into()));
            }
            if !kind.is_socket() {
                return Err(occupied("exists and is not a socket".into()));
            }
            if !is_our_socket(&metadata) {
                return Err(occupied(format!(
                    "is a socket of uid {}, not of this daemon's uid {}",
                    metadata.uid(),
                    rtlab_sys::proc_thread::current_effective_uid()
                )));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(SocketError::AlreadyRunning(path.display().to_string()));
            }
            // unlink(2) removes the name, never what a link points to.
            std::fs::remove_file(path)
                .map_err(io(format!("removing the stale socket {}", path.display())))?;
        }
    }
    let listener = UnixListener::bind(path).map_err(io(format!("binding {}", path.display())))?;
    let listening = Listening {
        listener,
        bound_path: Some(path.to_owned()),
    };
    set_mode(path, mode).map_err(io(format!("setting the mode of {}", path.display())))?;
    Ok(listening)
}

/// `mode` on the socket file at `path`, never following a link: the inode is opened with
/// `O_PATH | O_NOFOLLOW`, checked to be a socket of ours, and changed through its descriptor.
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    let file = rtlab_sys::ipc::open_path_no_follow(path)?;
    if !is_our_socket(&file.metadata()?) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the file at the path is no longer the socket this daemon bound",
        ));
    }
    let through_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    std::fs::set_permissions(through_fd, std::fs::Permissions::from_mode(mode))
}
