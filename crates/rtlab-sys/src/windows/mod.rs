//! The Windows side of the platform boundary: the Win32 calls `rtlab run` and `rtlab timers`
//! need on Windows, behind safe functions and guards, with the same rules as the Linux modules
//! (every `unsafe` block has a `// SAFETY:` comment; nothing here prints).
//!
//! Built only for `cfg(windows)`; cross-built with `x86_64-pc-windows-gnu` and tested under Wine
//! in CI (`.ci/windows-smoke`). Under Wine the timings are Linux's, not Windows': the code paths
//! are exercised, the figures need a real Windows machine.

pub mod clock;
pub mod console;
pub mod host;
pub mod priority;
pub mod resolution;
pub mod timers;

/// The error of the last failed Win32 call, as an `io::Error` naming `what` was being done.
pub(crate) fn last_error(what: &str) -> std::io::Error {
    let error = std::io::Error::last_os_error();
    std::io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// A NUL-terminated UTF-16 copy of `text` for the `W` functions.
pub(crate) fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().chain(std::iter::once(0)).collect()
}
