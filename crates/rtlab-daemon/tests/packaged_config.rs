//! The example configuration shipped in `packaging/rtlabd.toml` parses and states the defaults,
//! but for `[rtkit] enabled`, which the package turns on (docs/rtkit.md, "Installing").

use rtlab_daemon::DaemonConfig;

#[test]
fn the_packaged_config_is_valid_and_states_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/rtlabd.toml");
    let config = DaemonConfig::load(std::path::Path::new(path), true).unwrap();
    let mut expected = DaemonConfig::default();
    expected.rtkit.enabled = true;
    assert_eq!(config, expected);
}
