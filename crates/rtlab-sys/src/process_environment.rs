//! What another process runs with: the shared libraries it has mapped (/proc/PID/maps) and its
//! environment (/proc/PID/environ). `trace watch` reads them to tell that a program is a
//! PipeWire client and which PipeWire server it talks to.

use std::io;

/// Whether process `pid` has a file mapped whose name starts with `library` (e.g.
/// `libpipewire-0.3.so`): the file name only, not the directory.
pub fn maps_library(pid: u32, library: &str) -> io::Result<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(maps_name_library(&maps, library))
}

fn maps_name_library(maps: &str, library: &str) -> bool {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .any(|name| name.starts_with(library))
}

/// The value of `key` in process `pid`'s environment (as it was when the process started),
/// `None` when it has none.
pub fn environment_variable(pid: u32, key: &str) -> io::Result<Option<String>> {
    let environ = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(find_variable(&environ, key))
}

fn find_variable(environ: &[u8], key: &str) -> Option<String> {
    environ.split(|byte| *byte == 0).find_map(|entry| {
        let text = std::str::from_utf8(entry).ok()?;
        let (name, value) = text.split_once('=')?;
        (name == key).then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_is_found_by_its_file_name() {
        let maps = "7f0-7f1 r--p 00000000 fe:01 123 /usr/lib/x86_64-linux-gnu/libpipewire-0.3.so.0.365.0\n\
                    7f2-7f3 rw-p 00000000 00:00 0 \n";
        assert!(maps_name_library(maps, "libpipewire-0.3.so"));
        assert!(!maps_name_library(maps, "libjack.so"));
    }

    #[test]
    fn a_variable_is_read_from_an_environ_block() {
        let environ = b"HOME=/root\0XDG_RUNTIME_DIR=/run/user/0\0EMPTY=\0";
        assert_eq!(
            find_variable(environ, "XDG_RUNTIME_DIR").as_deref(),
            Some("/run/user/0")
        );
        assert_eq!(find_variable(environ, "EMPTY").as_deref(), Some(""));
        assert_eq!(find_variable(environ, "PATH"), None);
    }

    #[test]
    fn this_process_has_an_environment() {
        let pid = std::process::id();
        assert!(environment_variable(pid, "RTLAB_NO_SUCH_VARIABLE")
            .unwrap()
            .is_none());
        assert!(!maps_library(pid, "libpipewire-0.3.so").unwrap());
    }
}
