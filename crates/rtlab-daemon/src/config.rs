//! `/etc/rtlab/rtlabd.toml`: the daemon's limits and defaults. Every key is optional; a missing file
//! (when none was named) means the defaults.
//!
//! ```toml
//! socket = "/run/rtlab/rtlabd.sock"
//! state_dir = "/run/rtlab"
//! default_backend = "deadline"   # or "dispatch"; unset: the enforcer picks what works best here
//! deadline_placement = true      # a deadline reservation gets a cpuset partition of its own CPU
//! placement_linger = "2s"        # how long an emptied partition is kept for the next reservation
//! user_limit = 0.2               # fraction of one CPU each unprivileged uid may hold
//! hysteresis = "2s"              # how long an activity's reservation outlives its last thread
//! max_connections = 512
//! max_connections_per_user = 64
//! max_threads_per_user = 64      # threads each unprivileged uid may have managed at once
//! request_timeout = "5s"         # from a request's first byte to its newline
//! idle_timeout = "10m"           # between requests
//! requests_per_burst = 2000      # requests each unprivileged uid may send per burst_interval
//! burst_interval = "5s"
//!
//! [rtkit]                        # org.freedesktop.RealtimeKit1: see crate::rtkit::config
//! enabled = true
//! ```

use rtlab_core::{parse_duration, Nanos};
use rtlab_sched::enforce::BackendKind;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the daemon looks for its configuration when no `--config` is given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/rtlab/rtlabd.toml";

/// The daemon's settings after defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    /// Where the enforcer keeps its journal (so a restart after SIGKILL can revert threads).
    pub state_dir: PathBuf,
    /// `None`: the enforcer's own choice for this machine.
    pub default_backend: Option<BackendKind>,
    /// Whether `deadline` reservations are placed alone on one CPU in a cpuset partition (where
    /// the machine allows it); off: global EDF.
    pub deadline_placement: bool,
    /// How long a cpuset partition outlives its last reservation, so that the next one on that CPU
    /// does not make it again (a rebuild of the scheduling domains, ~10 ms); zero: removed at once.
    pub placement_linger: Duration,
    /// Fraction of one CPU (granted amount / period, summed) each unprivileged uid may hold.
    pub user_limit: f64,
    /// How long an activity's reservation outlives its last thread (paper 003 §4.3).
    pub hysteresis: Duration,
    pub max_connections: usize,
    pub max_connections_per_user: usize,
    /// Threads each unprivileged uid may have under reservations and Time Constraints at once.
    pub max_threads_per_user: usize,
    /// Longest time from a request's first byte to its newline; a slower client is cut off.
    pub request_timeout: Duration,
    /// Longest wait for the next request on an open connection.
    pub idle_timeout: Duration,
    /// How many requests each unprivileged uid may send within one `burst_interval` (over all its
    /// connections); more get `rate_limited` until the interval is over (as rtkit's
    /// actions-per-burst). Root and CAP_SYS_NICE callers have no budget.
    pub requests_per_burst: u32,
    pub burst_interval: Duration,
    /// The `[rtkit]` table: the org.freedesktop.RealtimeKit1 front-end (`crate::rtkit`).
    pub rtkit: crate::rtkit::config::RtkitConfig,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from(rtlab_core::rpc::DEFAULT_SOCKET),
            state_dir: PathBuf::from("/run/rtlab"),
            default_backend: None,
            deadline_placement: true,
            placement_linger: Duration::from_secs(2),
            user_limit: 0.2,
            hysteresis: Duration::from_secs(2),
            max_connections: 512,
            max_connections_per_user: 64,
            max_threads_per_user: 64,
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(600),
            // 400 requests a second on average: a program that begins and ends a Time
            // Constraint every frame at 120 frames a second uses 240 (rtkit allows 25 actions per
            // 20 s, but its actions are rare promotions, not per-frame calls).
            requests_per_burst: 2000,
            burst_interval: Duration::from_secs(5),
            rtkit: crate::rtkit::config::RtkitConfig::default(),
        }
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    socket: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    default_backend: Option<toml::Spanned<String>>,
    deadline_placement: Option<bool>,
    placement_linger: Option<toml::Spanned<String>>,
    user_limit: Option<toml::Spanned<f64>>,
    hysteresis: Option<toml::Spanned<String>>,
    max_connections: Option<toml::Spanned<usize>>,
    max_connections_per_user: Option<toml::Spanned<usize>>,
    max_threads_per_user: Option<toml::Spanned<usize>>,
    request_timeout: Option<toml::Spanned<String>>,
    idle_timeout: Option<toml::Spanned<String>>,
    requests_per_burst: Option<toml::Spanned<u32>>,
    burst_interval: Option<toml::Spanned<String>>,
    rtkit: Option<crate::rtkit::config::RtkitFile>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl DaemonConfig {
    /// Parses a configuration file's text; `path` only names it in errors (with the line).
    pub fn parse(text: &str, path: &str) -> Result<DaemonConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        };
        let file: ConfigFile = toml::from_str(text).map_err(|error| {
            let line = error
                .span()
                .map(|span| format!("line {}: ", line_of(text, span.start)))
                .unwrap_or_default();
            invalid(format!("{line}{}", error.message()))
        })?;
        let at = |span: std::ops::Range<usize>, key: &str, message: String| {
            invalid(format!(
                "line {}: {key}: {message}",
                line_of(text, span.start)
            ))
        };
        let duration = |value: Option<toml::Spanned<String>>,
                        key: &str,
                        default: Duration|
         -> Result<Duration, ConfigError> {
            match value {
                None => Ok(default),
                Some(spanned) => parse_duration(spanned.get_ref())
                    .map(Nanos::as_std)
                    .map_err(|error| at(spanned.span(), key, error.to_string())),
            }
        };
        let defaults = DaemonConfig::default();
        let mut config = DaemonConfig {
            socket: file.socket.unwrap_or(defaults.socket),
            state_dir: file.state_dir.unwrap_or(defaults.state_dir),
            default_backend: None,
            deadline_placement: file
                .deadline_placement
                .unwrap_or(defaults.deadline_placement),
            placement_linger: duration(
                file.placement_linger,
                "placement_linger",
                defaults.placement_linger,
            )?,
            user_limit: defaults.user_limit,
            hysteresis: duration(file.hysteresis, "hysteresis", defaults.hysteresis)?,
            max_connections: defaults.max_connections,
            max_connections_per_user: defaults.max_connections_per_user,
            max_threads_per_user: defaults.max_threads_per_user,
            request_timeout: duration(
                file.request_timeout,
                "request_timeout",
                defaults.request_timeout,
            )?,
            idle_timeout: duration(file.idle_timeout, "idle_timeout", defaults.idle_timeout)?,
            requests_per_burst: defaults.requests_per_burst,
            burst_interval: duration(
                file.burst_interval,
                "burst_interval",
                defaults.burst_interval,
            )?,
            rtkit: defaults.rtkit,
        };
        if let Some(spanned) = file.requests_per_burst {
            if *spanned.get_ref() == 0 {
                return Err(at(
                    spanned.span(),
                    "requests_per_burst",
                    "must be at least 1".to_owned(),
                ));
            }
            config.requests_per_burst = *spanned.get_ref();
        }
        if let Some(spanned) = file.default_backend {
            config.default_backend = Some(spanned.get_ref().parse().map_err(
                |error: rtlab_sched::enforce::UnknownBackend| {
                    at(spanned.span(), "default_backend", error.to_string())
                },
            )?);
        }
        if let Some(spanned) = file.user_limit {
            let limit = *spanned.get_ref();
            if !(0.0..=1.0).contains(&limit) {
                return Err(at(
                    spanned.span(),
                    "user_limit",
                    format!("{limit} is not a fraction of one CPU in [0, 1]"),
                ));
            }
            config.user_limit = limit;
        }
        // After user_limit: it is the default of rtkit.user_share.
        config.rtkit = match file.rtkit {
            None => crate::rtkit::config::RtkitConfig {
                user_share: config.user_limit,
                ..config.rtkit
            },
            Some(table) => table
                .resolve(config.user_limit)
                .map_err(|(span, message)| {
                    invalid(format!("line {}: {message}", line_of(text, span.start)))
                })?,
        };
        for (value, key, target) in [
            (
                file.max_connections,
                "max_connections",
                &mut config.max_connections,
            ),
            (
                file.max_connections_per_user,
                "max_connections_per_user",
                &mut config.max_connections_per_user,
            ),
            (
                file.max_threads_per_user,
                "max_threads_per_user",
                &mut config.max_threads_per_user,
            ),
        ] {
            if let Some(spanned) = value {
                if *spanned.get_ref() == 0 {
                    return Err(at(spanned.span(), key, "must be at least 1".to_owned()));
                }
                *target = *spanned.get_ref();
            }
        }
        if config.request_timeout.is_zero() || config.idle_timeout.is_zero() {
            return Err(invalid("timeouts must be positive".to_owned()));
        }
        if config.burst_interval.is_zero() {
            return Err(invalid("burst_interval must be positive".to_owned()));
        }
        Ok(config)
    }

    /// Reads `path`; when `required` is false a missing file means the defaults.
    pub fn load(path: &Path, required: bool) -> Result<DaemonConfig, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => DaemonConfig::parse(&text, &path.display().to_string()),
            Err(error) if !required && error.kind() == std::io::ErrorKind::NotFound => {
                Ok(DaemonConfig::default())
            }
            Err(source) => Err(ConfigError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_parses_and_missing_keys_keep_their_defaults() {
        let config = DaemonConfig::parse(
            "socket = \"/tmp/s\"\ndefault_backend = \"dispatch\"\ndeadline_placement = false\nuser_limit = 0.5\nhysteresis = \"250ms\"\nmax_connections = 4\nplacement_linger = \"0s\"\n",
            "rtlabd.toml",
        )
        .unwrap();
        assert_eq!(config.socket, PathBuf::from("/tmp/s"));
        assert_eq!(config.default_backend, Some(BackendKind::Dispatch));
        assert!(!config.deadline_placement);
        assert_eq!(config.user_limit, 0.5);
        assert_eq!(config.hysteresis, Duration::from_millis(250));
        assert_eq!(config.placement_linger, Duration::ZERO);
        assert_eq!(config.max_connections, 4);
        assert_eq!(config.max_connections_per_user, 64);
        assert_eq!(config.requests_per_burst, 2000);
        let config =
            DaemonConfig::parse("requests_per_burst = 30\nburst_interval = \"20s\"\n", "x")
                .unwrap();
        assert_eq!(config.requests_per_burst, 30);
        assert_eq!(config.burst_interval, Duration::from_secs(20));
        let error = DaemonConfig::parse("\nrequests_per_burst = 0\n", "rtlabd.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 2: requests_per_burst: must be at least 1"),
            "{error}"
        );
        assert_eq!(
            DaemonConfig::parse("", "x").unwrap(),
            DaemonConfig::default()
        );
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let error = DaemonConfig::parse("user_limit = 0.1\nhysteresis = \"2\"\n", "rtlabd.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("rtlabd.toml: line 2: hysteresis:"),
            "{error}"
        );
        let error = DaemonConfig::parse("\nuser_limit = 3.0\n", "rtlabd.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 2: user_limit"), "{error}");
        let error = DaemonConfig::parse("backend = \"x\"\n", "rtlabd.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 1") && error.contains("unknown field"),
            "{error}"
        );
        let error = DaemonConfig::parse("default_backend = \"fifo\"\n", "f")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown backend 'fifo'"), "{error}");
    }

    #[test]
    fn a_missing_optional_file_means_the_defaults_and_a_named_one_must_exist() {
        let missing = Path::new("/nonexistent/rtlabd.toml");
        assert_eq!(
            DaemonConfig::load(missing, false).unwrap(),
            DaemonConfig::default()
        );
        assert!(DaemonConfig::load(missing, true).is_err());
    }
}
