//! The daemon's listening socket: taken from systemd (socket activation) or bound at a path.

use std::io;
use std::os::unix::fs::PermissionsExt;
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
    fn drop(&mut self) {
        if let Some(path) = &self.bound_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("another rtlab daemon is already listening on {0}")]
    AlreadyRunning(String),
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

/// Binds `path` (see [`listen`]).
pub fn bind(path: &Path) -> Result<Listening, SocketError> {
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
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(SocketError::AlreadyRunning(path.display().to_string()));
        }
        std::fs::remove_file(path)
            .map_err(io(format!("removing the stale socket {}", path.display())))?;
    }
    let listener = UnixListener::bind(path).map_err(io(format!("binding {}", path.display())))?;
    let listening = Listening {
        listener,
        bound_path: Some(path.to_owned()),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(io(format!("setting the mode of {}", path.display())))?;
    Ok(listening)
}
