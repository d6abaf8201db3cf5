//! Units: integer nanoseconds internally, microseconds only at the printing edge.
//!
//! A `Nanos` newtype keeps a period from being added to a count by accident, and one parser for
//! durations (`10s`, `5m`, `2h`, `50us`, `1ms`) serves every flag and file that takes a time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A span of time, or a point on CLOCK_MONOTONIC, in integer nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    pub const fn from_micros(micros: u64) -> Nanos {
        Nanos(micros * 1_000)
    }

    pub const fn from_millis(millis: u64) -> Nanos {
        Nanos(millis * 1_000_000)
    }

    pub const fn from_secs(secs: u64) -> Nanos {
        Nanos(secs * 1_000_000_000)
    }

    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Microseconds as a float, for printing.
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl From<std::time::Duration> for Nanos {
    fn from(duration: std::time::Duration) -> Nanos {
        Nanos(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Nanos {
    /// Human form with the largest unit that keeps the number readable: `850ns`, `12.3us`, `4.1ms`, `2.5s`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.0;
        if value < 1_000 {
            write!(formatter, "{value}ns")
        } else if value < 1_000_000 {
            write!(formatter, "{}us", trim(value as f64 / 1e3))
        } else if value < 1_000_000_000 {
            write!(formatter, "{}ms", trim(value as f64 / 1e6))
        } else {
            write!(formatter, "{}s", trim(value as f64 / 1e9))
        }
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("'{0}' is not a duration (examples: 50us, 1ms, 10s, 5m, 2h)")]
    NotADuration(String),
    #[error("'{0}' is too long a duration")]
    Overflow(String),
}

/// Parses `50us`, `1.5ms`, `10s`, `5m`, `2h`, `1d`, `250ns` and compound forms like `1h30m`.
/// A bare number is rejected: rtlab never guesses a unit.
pub fn parse_duration(text: &str) -> Result<Nanos, UnitError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(UnitError::NotADuration(text.to_owned()));
    }
    let mut total: f64 = 0.0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let number_end = rest
            .find(|character: char| !(character.is_ascii_digit() || character == '.'))
            .ok_or_else(|| UnitError::NotADuration(text.to_owned()))?;
        if number_end == 0 {
            return Err(UnitError::NotADuration(text.to_owned()));
        }
        let number: f64 = rest[..number_end]
            .parse()
            .map_err(|_| UnitError::NotADuration(text.to_owned()))?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|character: char| character.is_ascii_digit() || character == '.')
            .unwrap_or(rest.len());
        let multiplier = match rest[..unit_end].trim() {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" | "sec" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => return Err(UnitError::NotADuration(text.to_owned())),
        };
        total += number * multiplier;
        rest = &rest[unit_end..];
    }
    if !total.is_finite() || total >= u64::MAX as f64 {
        return Err(UnitError::Overflow(text.to_owned()));
    }
    Ok(Nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_users_type() {
        assert_eq!(parse_duration("10s"), Ok(Nanos::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Nanos::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Nanos::from_secs(7200)));
        assert_eq!(parse_duration("50us"), Ok(Nanos::from_micros(50)));
        assert_eq!(parse_duration("1.5ms"), Ok(Nanos(1_500_000)));
        assert_eq!(parse_duration("1h30m"), Ok(Nanos::from_secs(5400)));
        assert_eq!(parse_duration("250ns"), Ok(Nanos(250)));
    }

    #[test]
    fn rejects_bare_numbers_and_junk() {
        for bad in ["", "10", "s", "10 parsecs", "1..2s", "-1s", "ms5"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn displays_readably() {
        assert_eq!(Nanos(850).to_string(), "850ns");
        assert_eq!(Nanos(12_300).to_string(), "12.3us");
        assert_eq!(Nanos(4_000_000).to_string(), "4ms");
        assert_eq!(Nanos(2_500_000_000).to_string(), "2.5s");
    }
}
