//! Who a reservation or constraint belongs to: one thread, or an activity (a named set of threads that
//! share one reservation, as in Rialto). Enforcement maps an activity to its member threads.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A single thread, by its Linux thread id.
    Thread(u32),
    /// A named set of threads sharing one reservation.
    Activity(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OwnerError {
    #[error("owner name is empty")]
    Empty,
    #[error("owner '{0}' contains whitespace")]
    Whitespace(String),
    #[error("'{0}' is not a thread id (expected tid:NUMBER)")]
    BadThreadId(String),
}

impl Owner {
    /// Parses `tid:1234` as a thread and any other word as an activity name.
    pub fn parse(text: &str) -> Result<Owner, OwnerError> {
        if text.is_empty() {
            return Err(OwnerError::Empty);
        }
        if text.chars().any(char::is_whitespace) {
            return Err(OwnerError::Whitespace(text.to_owned()));
        }
        match text.strip_prefix("tid:") {
            Some(number) => number
                .parse::<u32>()
                .map(Owner::Thread)
                .map_err(|_| OwnerError::BadThreadId(text.to_owned())),
            None => Ok(Owner::Activity(text.to_owned())),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Thread(thread_id) => write!(formatter, "tid:{thread_id}"),
            Owner::Activity(name) => formatter.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_threads_and_activities_and_round_trips() {
        assert_eq!(Owner::parse("tid:42"), Ok(Owner::Thread(42)));
        assert_eq!(
            Owner::parse("decoder"),
            Ok(Owner::Activity("decoder".into()))
        );
        assert_eq!(
            Owner::parse("tid:x"),
            Err(OwnerError::BadThreadId("tid:x".into()))
        );
        assert_eq!(Owner::parse(""), Err(OwnerError::Empty));
        for text in ["tid:7", "mixer"] {
            assert_eq!(Owner::parse(text).unwrap().to_string(), text);
        }
    }
}
