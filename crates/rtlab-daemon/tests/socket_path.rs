//! The socket path as a hostile local user would prepare it: a symbolic link to a file the daemon
//! (root) could change, a regular file, a directory, another user's socket. Each is refused and
//! left as it was; only a stale socket of the daemon's own uid is replaced.

use rtlab_daemon::socket::bind;
use rtlab_daemon::SocketError;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn refused(path: &Path, what: &str) {
    let error = bind(path).unwrap_err();
    assert!(
        matches!(error, SocketError::Occupied { .. }),
        "expected the path refused: {error}"
    );
    let text = error.to_string();
    assert!(
        text.contains(what) && text.contains("refusing to remove or follow it"),
        "{text}"
    );
}

#[test]
fn a_symlink_at_the_socket_path_is_refused_and_neither_removed_nor_followed() {
    let directory = tempfile::tempdir().unwrap();
    let victim = directory.path().join("shadow");
    std::fs::write(&victim, "secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let socket = directory.path().join("rtlabd.sock");
    std::os::unix::fs::symlink(&victim, &socket).unwrap();
    refused(&socket, "is a symbolic link");
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(mode(&victim), 0o600, "the link's target was not chmod-ed");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    // A dangling link too: binding through it would create the socket where it points.
    let elsewhere = directory.path().join("elsewhere.sock");
    std::fs::remove_file(&socket).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &socket).unwrap();
    refused(&socket, "is a symbolic link");
    assert!(!elsewhere.exists());
}

#[test]
fn a_regular_file_or_directory_at_the_socket_path_is_refused_and_kept() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("rtlabd.sock");
    std::fs::write(&socket, "not a socket\n").unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o640)).unwrap();
    refused(&socket, "exists and is not a socket");
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "not a socket\n");
    assert_eq!(mode(&socket), 0o640);
    std::fs::remove_file(&socket).unwrap();
    std::fs::create_dir(&socket).unwrap();
    refused(&socket, "exists and is not a socket");
    assert!(socket.is_dir());
}

#[test]
fn only_a_stale_socket_of_our_own_is_replaced_and_a_live_one_is_kept() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("rtlabd.sock");
    // A stale socket: bound, then its listener closed.
    drop(UnixListener::bind(&socket).unwrap());
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_socket());
    let listening = bind(&socket).unwrap();
    assert_eq!(mode(&socket), 0o666, "every user may connect");
    // A second daemon finds it live.
    let error = bind(&socket).unwrap_err();
    assert!(matches!(error, SocketError::AlreadyRunning(_)), "{error}");
    drop(listening);
    assert!(!socket.exists(), "removed at exit");
}

#[test]
fn the_socket_file_is_removed_at_exit_only_while_it_is_still_ours() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("rtlabd.sock");
    let listening = bind(&socket).unwrap();
    // Someone swaps a link in while the daemon runs: exit removes nothing.
    let target = directory.path().join("target");
    std::fs::write(&target, "x").unwrap();
    std::fs::remove_file(&socket).unwrap();
    std::os::unix::fs::symlink(&target, &socket).unwrap();
    drop(listening);
    assert!(std::fs::symlink_metadata(&socket).is_ok());
    assert!(target.exists());
}

#[test]
#[ignore = "needs root: makes a socket owned by nobody"]
fn another_users_stale_socket_is_refused() {
    assert_eq!(
        rtlab_sys::proc_thread::current_effective_uid(),
        0,
        "this test needs root: run it as root (CI does, with --include-ignored)"
    );
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("rtlabd.sock");
    drop(UnixListener::bind(&socket).unwrap());
    std::os::unix::fs::lchown(&socket, Some(65534), Some(65534)).unwrap();
    refused(&socket, "is a socket of uid 65534");
    assert_eq!(std::fs::symlink_metadata(&socket).unwrap().uid(), 65534);
}
