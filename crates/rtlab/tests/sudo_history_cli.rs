//! `sudo rtlab run` keeps the run in the history of the user who typed it.
//!
//! sudo is simulated the way sudo itself tells a program who called it: rtlab runs as root with
//! SUDO_UID, SUDO_GID and SUDO_USER naming a throw-away user (made with useradd for the test and
//! removed after it) and HOME left as root's. The user then reads the history as themselves
//! (setpriv, no root).

mod common;

use common::{assert_exit_code, stderr_text, stdout_text};
use std::os::unix::fs::MetadataExt as _;
use std::process::Command;

/// A system user with a home of its own, removed on drop.
struct ThrowAwayUser {
    name: String,
    home: tempfile::TempDir,
}

impl ThrowAwayUser {
    fn create() -> ThrowAwayUser {
        let name = format!("rtlabt{}", std::process::id());
        let home = tempfile::Builder::new()
            .prefix("rtlab-sudo-home")
            .tempdir_in("/tmp")
            .unwrap();
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg("--home-dir")
            .arg(home.path())
            .arg(&name)
            .status()
            .expect("useradd (Debian package passwd)");
        assert!(status.success(), "useradd {name} failed");
        let uid = ThrowAwayUser::id_of(&name, "-u");
        let gid = ThrowAwayUser::id_of(&name, "-g");
        std::os::unix::fs::chown(home.path(), Some(uid), Some(gid)).unwrap();
        ThrowAwayUser { name, home }
    }

    fn id_of(name: &str, flag: &str) -> u32 {
        let output = Command::new("id").arg(flag).arg(name).output().unwrap();
        String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn uid(&self) -> u32 {
        ThrowAwayUser::id_of(&self.name, "-u")
    }

    fn gid(&self) -> u32 {
        ThrowAwayUser::id_of(&self.name, "-g")
    }
}

impl Drop for ThrowAwayUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

#[test]
#[ignore = "needs root: runs as root for a user made with useradd"]
fn sudo_rtlab_run_stores_into_the_invoking_users_history() {
    assert_eq!(
        rtlab_sys::users::effective_uid(),
        0,
        "this test needs root (CI runs it as root)"
    );
    let user = ThrowAwayUser::create();
    let (uid, gid) = (user.uid(), user.gid());
    // Root's HOME as sudo leaves it (a directory of its own here, to see nothing lands in it).
    let root_home = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rtlab"))
        .args(["run", "--duration", "1s", "--warmup", "100ms"])
        .env_remove("RTLAB_HOME")
        .env_remove("XDG_DATA_HOME")
        .env("HOME", root_home.path())
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", &user.name)
        .output()
        .unwrap();
    assert_exit_code(&output, 0);
    let database = user.home.path().join(".local/share/rtlab/rtlab.db");
    let stderr = stderr_text(&output);
    assert!(
        stderr.contains(&format!(
            "the run goes into {}'s history ({})",
            user.name,
            database.display()
        )),
        "{stderr}"
    );
    for path in [
        user.home.path().join(".local"),
        user.home.path().join(".local/share"),
        user.home.path().join(".local/share/rtlab"),
        database.clone(),
    ] {
        let metadata =
            std::fs::metadata(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert_eq!(
            (metadata.uid(), metadata.gid()),
            (uid, gid),
            "{} belongs to the user",
            path.display()
        );
    }
    assert!(
        !root_home.path().join(".local").exists(),
        "nothing goes into root's history"
    );
    let stdout = stdout_text(&output);
    let short_id = stdout
        .split("stored as run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no 'stored as run' line: {stdout}"))
        .to_owned();
    // The user, without root, reads the history (in WAL mode that writes its -shm file beside
    // it) and may write the database and its directory.
    let as_user = |program: &str, args: &[&str]| {
        Command::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            .arg(program)
            .args(args)
            .env_remove("RTLAB_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("SUDO_UID")
            .env("HOME", user.home.path())
            .output()
            .expect("setpriv (Debian package util-linux)")
    };
    let history = as_user(env!("CARGO_BIN_EXE_rtlab"), &["history"]);
    assert_exit_code(&history, 0);
    let listed = stdout_text(&history);
    assert!(
        listed.contains(&short_id),
        "the user's own history lists the sudo run {short_id}: {listed}"
    );
    let database_text = database.display().to_string();
    let directory_text = database.parent().unwrap().display().to_string();
    let writable = as_user(
        "sh",
        &[
            "-c",
            "test -w \"$1\" && test -w \"$2\"",
            "sh",
            &database_text,
            &directory_text,
        ],
    );
    assert!(
        writable.status.success(),
        "the user may write {database_text} and its directory"
    );
}
