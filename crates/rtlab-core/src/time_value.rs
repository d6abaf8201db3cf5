//! Times as people type them as option values: a number with its unit (`150us`, `2.5ms`, `1s`;
//! see [`parse_duration`]), one spelling everywhere. Where a bare number once meant a fixed
//! unit (`--explain-above 150` in µs, `--buffer 4` in ms, `--cpu-dma-latency 10` in µs) it still
//! does, and the value carries a deprecation note for the caller to show.

use crate::units::{parse_duration, Nanos};

/// Why a time value was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeValueError {
    #[error(transparent)]
    Unit(#[from] crate::units::UnitError),
    #[error("'{0}' is not a usable time")]
    NotUsable(String),
    #[error("must be more than 0")]
    Zero,
    #[error("'{0}' must be a positive time (e.g. 150us)")]
    NotPositive(String),
    #[error("'{0}' is not a whole number of µs")]
    NotWholeMicros(String),
    #[error("'{0}' is too long")]
    TooLong(String),
}

/// A parsed value and, when it was given in a deprecated form, the note to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Noted<T> {
    pub value: T,
    /// `a bare number is deprecated here; write the unit: 150us`.
    pub note: Option<String>,
}

/// A duration above zero (`1ms`; `0s` is refused).
pub fn positive_duration(text: &str) -> Result<Nanos, TimeValueError> {
    match parse_duration(text)? {
        Nanos(0) => Err(TimeValueError::Zero),
        positive => Ok(positive),
    }
}

/// A time with its unit; a bare number is read in `legacy_unit` (`us` or `ms`) with a note
/// (none for 0, which means the same in every unit).
pub fn time_or_bare(text: &str, legacy_unit: &str) -> Result<Noted<Nanos>, TimeValueError> {
    let trimmed = text.trim();
    let Ok(value) = trimmed.parse::<f64>() else {
        return Ok(Noted {
            value: parse_duration(trimmed)?,
            note: None,
        });
    };
    if !(value.is_finite() && (0.0..1e12).contains(&value)) {
        return Err(TimeValueError::NotUsable(text.to_owned()));
    }
    let with_unit = format!("{trimmed}{legacy_unit}");
    let note = (value != 0.0)
        .then(|| format!("a bare number is deprecated here; write the unit: {with_unit}"));
    Ok(Noted {
        value: parse_duration(&with_unit)?,
        note,
    })
}

/// A time above zero, bare numbers in µs (`--explain-above`).
pub fn positive_time_or_bare_micros(text: &str) -> Result<Noted<Nanos>, TimeValueError> {
    let time = time_or_bare(text, "us")?;
    if time.value == Nanos(0) {
        return Err(TimeValueError::NotPositive(text.to_owned()));
    }
    Ok(time)
}

/// A time below a million seconds, bare numbers in ms (`--buffer`, `--compute`).
pub fn time_or_bare_millis(text: &str) -> Result<Noted<Nanos>, TimeValueError> {
    let time = time_or_bare(text, "ms")?;
    if time.value.as_u64() >= 1_000_000_000_000_000 {
        return Err(TimeValueError::NotUsable(text.to_owned()));
    }
    Ok(time)
}

/// A whole number of µs that fits an `i32`, bare numbers in µs (`--cpu-dma-latency`: how long
/// the CPUs may take to leave an idle state; 0 keeps them out of idle states).
pub fn whole_micros_or_bare(text: &str) -> Result<Noted<i32>, TimeValueError> {
    let Noted { value, note } = time_or_bare(text, "us")?;
    if value.as_u64() % 1_000 != 0 {
        return Err(TimeValueError::NotWholeMicros(text.to_owned()));
    }
    let micros = i32::try_from(value.as_u64() / 1_000)
        .map_err(|_| TimeValueError::TooLong(text.to_owned()))?;
    Ok(Noted {
        value: micros,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<T>(parsed: Result<Noted<T>, TimeValueError>) -> Result<T, TimeValueError> {
        parsed.map(|noted| noted.value)
    }

    #[test]
    fn times_take_units_and_bare_numbers_keep_their_old_unit() {
        let threshold = positive_time_or_bare_micros;
        assert_eq!(value(threshold("150us")), Ok(Nanos(150_000)));
        assert_eq!(value(threshold("150")), Ok(Nanos(150_000)));
        assert_eq!(value(threshold("2.5")), Ok(Nanos(2_500)));
        assert_eq!(value(threshold("1ms")), Ok(Nanos(1_000_000)));
        for bad in ["0", "-3", "abc", "inf", "0us"] {
            assert!(threshold(bad).is_err(), "{bad}");
        }
        assert_eq!(value(time_or_bare_millis("4")), Ok(Nanos(4_000_000)));
        assert_eq!(value(time_or_bare_millis("0.5")), Ok(Nanos(500_000)));
        assert_eq!(value(time_or_bare_millis("250us")), Ok(Nanos(250_000)));
        assert!(time_or_bare_millis("1e300").is_err());
        assert_eq!(value(whole_micros_or_bare("0")), Ok(0));
        assert_eq!(value(whole_micros_or_bare("10us")), Ok(10));
        assert_eq!(value(whole_micros_or_bare("10")), Ok(10));
        assert!(whole_micros_or_bare("1500ns").is_err());
        assert_eq!(positive_duration("1ms"), Ok(Nanos(1_000_000)));
        assert_eq!(positive_duration("0s"), Err(TimeValueError::Zero));
    }

    #[test]
    fn only_a_bare_number_carries_a_note() {
        assert_eq!(
            threshold_note("150"),
            Some("a bare number is deprecated here; write the unit: 150us".to_owned())
        );
        assert_eq!(threshold_note("150us"), None);
        assert_eq!(time_or_bare("0", "ms").unwrap().note, None);
        assert_eq!(
            positive_time_or_bare_micros("0").unwrap_err().to_string(),
            "'0' must be a positive time (e.g. 150us)"
        );
    }

    fn threshold_note(text: &str) -> Option<String> {
        positive_time_or_bare_micros(text).unwrap().note
    }
}
