//! Fuzzes the parser of `rtlab tune --apply`'s state file (`/var/lib/rtlab/tune-profile.json`),
//! which `--revert` and the boot unit trust: no input may panic, and an accepted state must write
//! back to text that parses to the same state, with only plain values in the files it renders.
//!
//! Run: `cargo +nightly fuzz run profile_state`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rtlab_tune::profile::ProfileState;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(state) = ProfileState::parse(text) else {
        return;
    };
    assert_eq!(ProfileState::parse(&state.to_json()).as_ref(), Ok(&state));
    for rendered in [
        state.sysctl_text().unwrap_or_default(),
        state.apply_unit_text(),
    ] {
        for line in rendered.lines().filter(|line| !line.starts_with('#')) {
            assert!(!line.contains(char::is_control), "{line:?}");
        }
    }
});
