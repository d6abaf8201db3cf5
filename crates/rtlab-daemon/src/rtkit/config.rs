//! The `[rtkit]` table of `/etc/rtlab/rtlabd.toml`: whether the daemon answers
//! `org.freedesktop.RealtimeKit1`, rtkit's limits (same names and defaults as rtkit-daemon's
//! command-line options), the canary, and which programs get a reservation instead of SCHED_RR.
//!
//! ```toml
//! [rtkit]
//! enabled = true                 # or `rtlab daemon --rtkit`
//! replace = false                # take the name over from an owner that allows it (--replace)
//! max_realtime_priority = 20     # highest SCHED_RR priority granted
//! min_nice_level = -15           # lowest nice value granted
//! rttime_usec_max = 200000       # the target's RLIMIT_RTTIME hard limit must be set and ≤ this
//! users_max = 2048
//! processes_per_user_max = 15
//! threads_per_user_max = 25
//! actions_burst = "20s"          # per user: at most actions_per_burst_max requests per burst
//! actions_per_burst_max = 25
//! canary = true
//! canary_timeout = "500ms"       # a CPU whose canary did not run for this long is starving
//! canary_refusal = "5min"        # after the canary fired, its users are refused this long
//! user_share = 0.2               # per user: CPU its SCHED_RR threads may run (default: user_limit)
//! user_share_window = "5s"       # ... over this sliding window, with its reservations
//! user_share_refusal = "1min"    # a user over its share is refused this long
//!
//! [[rtkit.reserve]]              # pipewire's threads get 2 ms every 10 ms instead of SCHED_RR
//! program = "pipewire"
//! amount = "2ms"
//! period = "10ms"
//!
//! [[rtkit.reserve]]              # jackd's: SCHED_RR at once, then what 3 s of observation call for
//! program = "jackd"
//! size = "auto"                  # (the default without amount and period)
//! observe = "3s"
//! follow = true                  # then kept sized to the thread, window after window (default)
//! follow_window = "250ms"        # ... each window this long (250ms–60s; default 250ms)
//! ```

use rtlab_core::{parse_duration, Nanos};
use serde::Deserialize;
use std::time::Duration;

/// A program whose RealtimeKit1 requests become reservations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservePolicy {
    /// The process's name (/proc/PID/comm, as `ps -o comm` shows it).
    pub program: String,
    pub size: ReserveSize,
}

/// How a `[[rtkit.reserve]]` reservation is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReserveSize {
    /// `amount` every `period`, as configured.
    Fixed { amount: Nanos, period: Nanos },
    /// By observation (`reserve --auto`'s rules): the thread gets SCHED_RR at once, is observed
    /// for `observe`, then gets the reservation its period and CPU per activation call for.
    /// With `follow` (a window), the reservation is then kept sized to the thread as `reserve
    /// --auto --follow` keeps it (`rtkit::follow`); `None`: sized once.
    Observed {
        observe: Nanos,
        follow: Option<Nanos>,
    },
}

/// How long an observed `[[rtkit.reserve]]` thread is watched by default (`observe`).
pub const DEFAULT_OBSERVE: Nanos = Nanos(3_000_000_000);
/// A followed `[[rtkit.reserve]]` reservation's window by default (`follow_window`): as `rtlab
/// reserve --auto --follow`'s.
pub const DEFAULT_FOLLOW_WINDOW: Nanos = Nanos(250_000_000);

/// The RealtimeKit1 front-end's settings after defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct RtkitConfig {
    pub enabled: bool,
    /// Set by `rtlab daemon --rtkit` (never by the file): without the system bus, or without the
    /// name, the daemon does not start. Enabled by the file alone (as the package ships it), the
    /// daemon says why it cannot serve RealtimeKit1 and serves reservations without it.
    pub required: bool,
    /// Ask the bus to hand the name over (DBUS_NAME_FLAG_REPLACE_EXISTING); it does only when the
    /// current owner allowed replacement. rtkit-daemon does not, so it is never taken from it.
    pub replace: bool,
    pub max_realtime_priority: u32,
    pub min_nice_level: i32,
    pub rttime_usec_max: u64,
    pub users_max: usize,
    pub processes_per_user_max: usize,
    pub threads_per_user_max: usize,
    pub actions_burst: Duration,
    pub actions_per_burst_max: u32,
    pub canary: bool,
    pub canary_timeout: Duration,
    pub canary_refusal: Duration,
    /// The fraction of one CPU a user's SCHED_RR threads may run over `user_share_window`,
    /// together with what the registry holds for the user (reservations, Time Constraints); a
    /// user over it has its threads demoted (`super::meter`). Default: the daemon's `user_limit`.
    pub user_share: f64,
    pub user_share_window: Duration,
    /// How long a user demoted for its share is refused.
    pub user_share_refusal: Duration,
    pub reserve: Vec<ReservePolicy>,
}

impl Default for RtkitConfig {
    fn default() -> Self {
        RtkitConfig {
            enabled: false,
            required: false,
            replace: false,
            max_realtime_priority: 20,
            min_nice_level: -15,
            rttime_usec_max: 200_000,
            users_max: 2048,
            processes_per_user_max: 15,
            threads_per_user_max: 25,
            actions_burst: Duration::from_secs(20),
            actions_per_burst_max: 25,
            canary: true,
            canary_timeout: Duration::from_millis(500),
            canary_refusal: Duration::from_secs(300),
            // The daemon's default user_limit; DaemonConfig::parse sets the file's user_limit.
            user_share: 0.2,
            user_share_window: Duration::from_secs(5),
            user_share_refusal: Duration::from_secs(60),
            reserve: Vec::new(),
        }
    }
}

/// The `[rtkit]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtkitFile {
    enabled: Option<bool>,
    replace: Option<bool>,
    max_realtime_priority: Option<toml::Spanned<u32>>,
    min_nice_level: Option<toml::Spanned<i32>>,
    rttime_usec_max: Option<toml::Spanned<u64>>,
    users_max: Option<usize>,
    processes_per_user_max: Option<usize>,
    threads_per_user_max: Option<usize>,
    actions_burst: Option<toml::Spanned<String>>,
    actions_per_burst_max: Option<u32>,
    canary: Option<bool>,
    canary_timeout: Option<toml::Spanned<String>>,
    canary_refusal: Option<toml::Spanned<String>>,
    user_share: Option<toml::Spanned<f64>>,
    user_share_window: Option<toml::Spanned<String>>,
    user_share_refusal: Option<toml::Spanned<String>>,
    #[serde(default)]
    reserve: Vec<ReserveFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReserveFile {
    program: toml::Spanned<String>,
    amount: Option<toml::Spanned<String>>,
    period: Option<toml::Spanned<String>>,
    /// `"auto"`: sized by observation (also what no amount and period mean).
    size: Option<toml::Spanned<String>>,
    /// How long to observe (with `size = "auto"`).
    observe: Option<toml::Spanned<String>>,
    /// Whether an observed reservation follows its thread afterwards (default true).
    follow: Option<toml::Spanned<bool>>,
    /// The follower's window.
    follow_window: Option<toml::Spanned<String>>,
}

/// A bad value: its byte span in the file and what is wrong (`rtkit.KEY: message`).
pub type FieldError = (std::ops::Range<usize>, String);

/// An entry's size: `amount` and `period` both, or neither (or `size = "auto"`): observed.
fn reserve_size(entry: &ReserveFile) -> Result<ReserveSize, FieldError> {
    let parse = |spanned: &toml::Spanned<String>, key: &str| {
        parse_duration(spanned.get_ref())
            .map_err(|error| (spanned.span(), format!("rtkit.reserve.{key}: {error}")))
    };
    if let Some(size) = &entry.size {
        if size.get_ref() != "auto" {
            return Err((
                size.span(),
                format!(
                    "rtkit.reserve.size: '{}' is not a size; the only value is \"auto\" (sized by observation); a fixed size is amount and period",
                    size.get_ref()
                ),
            ));
        }
    }
    match (&entry.amount, &entry.period) {
        (Some(amount_text), Some(period_text)) => {
            if let Some(size) = &entry.size {
                return Err((
                    size.span(),
                    "rtkit.reserve.size: \"auto\" and an amount and period contradict each other; keep one".to_owned(),
                ));
            }
            if let Some(observe) = &entry.observe {
                return Err((
                    observe.span(),
                    "rtkit.reserve.observe: only for a reservation sized by observation (no amount and period)".to_owned(),
                ));
            }
            if let Some(follow) = &entry.follow {
                return Err((
                    follow.span(),
                    "rtkit.reserve.follow: only for a reservation sized by observation (no amount and period)".to_owned(),
                ));
            }
            if let Some(window) = &entry.follow_window {
                return Err((
                    window.span(),
                    "rtkit.reserve.follow_window: only for a reservation sized by observation (no amount and period)".to_owned(),
                ));
            }
            let amount = parse(amount_text, "amount")?;
            let period = parse(period_text, "period")?;
            if amount.0 == 0 || amount > period {
                return Err((
                    amount_text.span(),
                    format!("rtkit.reserve.amount: {amount} must be positive and at most the period {period}"),
                ));
            }
            Ok(ReserveSize::Fixed { amount, period })
        }
        (None, None) => {
            let observe = match &entry.observe {
                None => DEFAULT_OBSERVE,
                Some(text) => {
                    let observe = parse(text, "observe")?;
                    if observe < Nanos(500_000_000) || observe > Nanos(60_000_000_000) {
                        return Err((
                            text.span(),
                            format!(
                                "rtkit.reserve.observe: {observe} must be between 500ms and 60s"
                            ),
                        ));
                    }
                    observe
                }
            };
            let window = match &entry.follow_window {
                None => DEFAULT_FOLLOW_WINDOW,
                Some(text) => {
                    let window = parse(text, "follow_window")?;
                    if window < Nanos(250_000_000) || window > Nanos(60_000_000_000) {
                        return Err((
                            text.span(),
                            format!(
                                "rtkit.reserve.follow_window: {window} must be between 250ms and 60s"
                            ),
                        ));
                    }
                    window
                }
            };
            let follow = match &entry.follow {
                Some(follow) if !*follow.get_ref() => {
                    if let Some(window) = &entry.follow_window {
                        return Err((
                            window.span(),
                            "rtkit.reserve.follow_window: the reservation does not follow (follow = false); keep one".to_owned(),
                        ));
                    }
                    None
                }
                _ => Some(window),
            };
            Ok(ReserveSize::Observed { observe, follow })
        }
        (Some(amount), None) => Err((
            amount.span(),
            "rtkit.reserve.amount: needs a period too (or neither, to size by observation)"
                .to_owned(),
        )),
        (None, Some(period)) => Err((
            period.span(),
            "rtkit.reserve.period: needs an amount too (or neither, to size by observation)"
                .to_owned(),
        )),
    }
}

/// The largest `user_share`: a share of more CPUs than any machine has is no limit.
const USER_SHARE_MAX: f64 = 1024.0;

impl RtkitFile {
    /// The settings this table gives, over the defaults; `user_limit` is the daemon's, the
    /// default `user_share`.
    pub fn resolve(self, user_limit: f64) -> Result<RtkitConfig, FieldError> {
        let defaults = RtkitConfig {
            user_share: user_limit,
            ..RtkitConfig::default()
        };
        let duration =
            |value: Option<toml::Spanned<String>>, key: &str, default: Duration| match value {
                None => Ok(default),
                Some(spanned) => parse_duration(spanned.get_ref())
                    .map(Nanos::as_std)
                    .map_err(|error| (spanned.span(), format!("rtkit.{key}: {error}"))),
            };
        let max_realtime_priority = match self.max_realtime_priority {
            None => defaults.max_realtime_priority,
            Some(spanned) if (1..=98).contains(spanned.get_ref()) => *spanned.get_ref(),
            Some(spanned) => {
                return Err((
                    spanned.span(),
                    format!(
                        "rtkit.max_realtime_priority: {} is not a SCHED_RR priority in 1..=98 (99 is the canary's watchdog)",
                        spanned.get_ref()
                    ),
                ))
            }
        };
        let min_nice_level = match self.min_nice_level {
            None => defaults.min_nice_level,
            Some(spanned) if (-20..=19).contains(spanned.get_ref()) => *spanned.get_ref(),
            Some(spanned) => {
                return Err((
                    spanned.span(),
                    format!(
                        "rtkit.min_nice_level: {} is not a nice value in -20..=19",
                        spanned.get_ref()
                    ),
                ))
            }
        };
        let rttime_usec_max = match self.rttime_usec_max {
            None => defaults.rttime_usec_max,
            Some(spanned) if *spanned.get_ref() > 0 && *spanned.get_ref() <= i64::MAX as u64 => {
                *spanned.get_ref()
            }
            Some(spanned) => {
                return Err((
                    spanned.span(),
                    "rtkit.rttime_usec_max: must be at least 1 µs".to_owned(),
                ))
            }
        };
        let canary_span = self.canary_timeout.as_ref().map(toml::Spanned::span);
        let canary_timeout = duration(
            self.canary_timeout,
            "canary_timeout",
            defaults.canary_timeout,
        )?;
        if canary_timeout < Duration::from_millis(100) {
            return Err((
                canary_span.unwrap_or_default(),
                "rtkit.canary_timeout: must be at least 100ms (the canaries run every 50 ms)"
                    .to_owned(),
            ));
        }
        let user_share = match self.user_share {
            None => defaults.user_share,
            Some(spanned) if (0.0..=USER_SHARE_MAX).contains(spanned.get_ref()) => {
                *spanned.get_ref()
            }
            Some(spanned) => {
                return Err((
                    spanned.span(),
                    format!(
                        "rtkit.user_share: {} is not a fraction of one CPU in [0, {USER_SHARE_MAX}] (0.2: a fifth of one CPU)",
                        spanned.get_ref()
                    ),
                ))
            }
        };
        let window_span = self.user_share_window.as_ref().map(toml::Spanned::span);
        let user_share_window = duration(
            self.user_share_window,
            "user_share_window",
            defaults.user_share_window,
        )?;
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&user_share_window) {
            return Err((
                window_span.unwrap_or_default(),
                "rtkit.user_share_window: must be between 1s and 60s".to_owned(),
            ));
        }
        let mut reserve = Vec::new();
        for entry in self.reserve {
            let size = reserve_size(&entry)?;
            let program = entry.program.get_ref().clone();
            if program.is_empty() || program.len() > 15 {
                return Err((
                    entry.program.span(),
                    format!("rtkit.reserve.program: '{program}' is not a process name (1 to 15 bytes, as /proc/PID/comm)"),
                ));
            }
            reserve.push(ReservePolicy { program, size });
        }
        Ok(RtkitConfig {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            required: defaults.required,
            replace: self.replace.unwrap_or(defaults.replace),
            max_realtime_priority,
            min_nice_level,
            rttime_usec_max,
            users_max: self.users_max.unwrap_or(defaults.users_max),
            processes_per_user_max: self
                .processes_per_user_max
                .unwrap_or(defaults.processes_per_user_max),
            threads_per_user_max: self
                .threads_per_user_max
                .unwrap_or(defaults.threads_per_user_max),
            actions_burst: duration(self.actions_burst, "actions_burst", defaults.actions_burst)?,
            actions_per_burst_max: self
                .actions_per_burst_max
                .unwrap_or(defaults.actions_per_burst_max),
            canary: self.canary.unwrap_or(defaults.canary),
            canary_timeout,
            canary_refusal: duration(
                self.canary_refusal,
                "canary_refusal",
                defaults.canary_refusal,
            )?,
            user_share,
            user_share_window,
            user_share_refusal: duration(
                self.user_share_refusal,
                "user_share_refusal",
                defaults.user_share_refusal,
            )?,
            reserve,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DaemonConfig;

    #[test]
    fn the_table_parses_over_the_defaults() {
        let config = DaemonConfig::parse(
            "[rtkit]\nenabled = true\nmax_realtime_priority = 10\ncanary_timeout = \"250ms\"\n[[rtkit.reserve]]\nprogram = \"pipewire\"\namount = \"2ms\"\nperiod = \"10ms\"\n",
            "rtlabd.toml",
        )
        .unwrap();
        let rtkit = config.rtkit;
        assert!(rtkit.enabled);
        assert_eq!(rtkit.max_realtime_priority, 10);
        assert_eq!(rtkit.canary_timeout, Duration::from_millis(250));
        assert_eq!(rtkit.min_nice_level, -15);
        assert_eq!(
            rtkit.reserve,
            vec![ReservePolicy {
                program: "pipewire".into(),
                size: ReserveSize::Fixed {
                    amount: Nanos(2_000_000),
                    period: Nanos(10_000_000),
                },
            }]
        );
        assert_eq!(
            DaemonConfig::parse("", "x").unwrap().rtkit,
            RtkitConfig::default()
        );
    }

    #[test]
    fn the_user_share_is_the_user_limit_unless_stated() {
        let config = DaemonConfig::parse(
            "user_limit = 0.3
",
            "x",
        )
        .unwrap();
        assert_eq!(config.rtkit.user_share, 0.3);
        let config = DaemonConfig::parse(
            "user_limit = 0.3
[rtkit]
enabled = true
",
            "x",
        )
        .unwrap();
        assert_eq!(config.rtkit.user_share, 0.3);
        let config = DaemonConfig::parse(
            "user_limit = 0.3
[rtkit]
user_share = 1.5
user_share_window = \"10s\"\nuser_share_refusal = \"2min\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(config.rtkit.user_share, 1.5);
        assert_eq!(config.rtkit.user_share_window, Duration::from_secs(10));
        assert_eq!(config.rtkit.user_share_refusal, Duration::from_secs(120));
    }

    #[test]
    fn the_packaged_configuration_parses_and_enables_realtimekit1_without_requiring_it() {
        let text = include_str!("../../../../packaging/rtlabd.toml");
        let config = DaemonConfig::parse(text, "packaging/rtlabd.toml").unwrap();
        assert!(config.rtkit.enabled);
        assert!(!config.rtkit.required, "only --rtkit requires the bus");
    }

    #[test]
    fn a_reserve_entry_without_a_size_is_sized_by_observation() {
        for text in [
            "[[rtkit.reserve]]\nprogram = \"jackd\"\n",
            "[[rtkit.reserve]]\nprogram = \"jackd\"\nsize = \"auto\"\n",
        ] {
            let config = DaemonConfig::parse(text, "x").unwrap();
            assert_eq!(
                config.rtkit.reserve[0].size,
                ReserveSize::Observed {
                    observe: DEFAULT_OBSERVE,
                    follow: Some(DEFAULT_FOLLOW_WINDOW)
                }
            );
        }
        let config = DaemonConfig::parse(
            "[[rtkit.reserve]]\nprogram = \"jackd\"\nsize = \"auto\"\nobserve = \"2s\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(
            config.rtkit.reserve[0].size,
            ReserveSize::Observed {
                observe: Nanos(2_000_000_000),
                follow: Some(DEFAULT_FOLLOW_WINDOW)
            }
        );
        for (text, follow) in [
            ("follow = false\n", None),
            ("follow_window = \"2s\"\n", Some(Nanos(2_000_000_000))),
            (
                "follow = true\nfollow_window = \"500ms\"\n",
                Some(Nanos(500_000_000)),
            ),
        ] {
            let config = DaemonConfig::parse(
                &format!("[[rtkit.reserve]]\nprogram = \"jackd\"\n{text}"),
                "x",
            )
            .unwrap();
            assert_eq!(
                config.rtkit.reserve[0].size,
                ReserveSize::Observed {
                    observe: DEFAULT_OBSERVE,
                    follow
                },
                "{text}"
            );
        }
    }

    #[test]
    fn bad_values_name_the_line_and_key() {
        for (text, expected) in [
            (
                "[rtkit]\nmax_realtime_priority = 99\n",
                "line 2: rtkit.max_realtime_priority",
            ),
            (
                "[rtkit]\n\nmin_nice_level = -21\n",
                "line 3: rtkit.min_nice_level",
            ),
            (
                "[rtkit]\ncanary_timeout = \"10ms\"\n",
                "line 2: rtkit.canary_timeout",
            ),
            (
                "[rtkit]\nactions_burst = \"soon\"\n",
                "line 2: rtkit.actions_burst",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"pipewire\"\namount = \"20ms\"\nperiod = \"10ms\"\n",
                "line 3: rtkit.reserve.amount",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\nperiod = \"10ms\"\n",
                "line 3: rtkit.reserve.period: needs an amount",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\nsize = \"big\"\n",
                "line 3: rtkit.reserve.size",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\nobserve = \"1h\"\n",
                "line 3: rtkit.reserve.observe",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\nfollow_window = \"10ms\"\n",
                "line 3: rtkit.reserve.follow_window",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\nfollow = false\nfollow_window = \"2s\"\n",
                "line 4: rtkit.reserve.follow_window: the reservation does not follow",
            ),
            (
                "[[rtkit.reserve]]\nprogram = \"jackd\"\namount = \"1ms\"\nperiod = \"10ms\"\nfollow = true\n",
                "line 5: rtkit.reserve.follow: only for a reservation sized by observation",
            ),
            ("[rtkit]\nuser_share = -0.1\n", "line 2: rtkit.user_share"),
            (
                "[rtkit]\nuser_share_window = \"50ms\"\n",
                "line 2: rtkit.user_share_window",
            ),
            ("[rtkit]\nenable = true\n", "unknown field"),
        ] {
            let error = DaemonConfig::parse(text, "rtlabd.toml")
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
