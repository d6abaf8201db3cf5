//! The password database (getpwuid_r(3)): whose home directory a uid has, so that `sudo rtlab run`
//! can keep its run in the history of the user who typed it rather than root's.

use std::ffi::CStr;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

/// One user, as the password database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserEntry {
    pub name: String,
    pub uid: u32,
    /// The user's primary group.
    pub gid: u32,
    pub home: PathBuf,
}

/// The calling process's real uid.
pub fn current_uid() -> u32 {
    // SAFETY: getuid has no arguments and cannot fail.
    unsafe { libc::getuid() }
}

/// The calling thread's effective uid (who owns the files it creates).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The user with `uid`, or None when the database has none.
pub fn user_by_uid(uid: u32) -> io::Result<Option<UserEntry>> {
    let mut buffer = vec![0u8; 4096];
    loop {
        // SAFETY: passwd is plain old data; getpwuid_r fills it in.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer names memory owned by this frame (`entry`, `found`) or `buffer`,
        // whose length is passed; the strings getpwuid_r stores in `entry` point into `buffer`,
        // which outlives their use below.
        let result = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut found,
            )
        };
        if result == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        if result != 0 {
            return Err(io::Error::from_raw_os_error(result));
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: on success pw_name and pw_dir are NUL-terminated strings inside `buffer`.
        let (name, home) = unsafe { (CStr::from_ptr(entry.pw_name), CStr::from_ptr(entry.pw_dir)) };
        return Ok(Some(UserEntry {
            name: name.to_string_lossy().into_owned(),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
            home: PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes())),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_uid_0_with_a_home() {
        let root = user_by_uid(0).unwrap().expect("every system has root");
        assert_eq!(root.name, "root");
        assert_eq!(root.uid, 0);
        assert!(root.home.is_absolute(), "{root:?}");
    }

    #[test]
    fn a_uid_nobody_has_is_none() {
        assert_eq!(user_by_uid(3_999_999_999).unwrap(), None);
    }
}
