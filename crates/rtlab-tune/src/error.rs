//! The errors of `rtlab tune`'s library, and which of them are the caller's input.

/// Why tuning could not go on.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("unknown setting '{name}' (known: {known})")]
    UnknownSetting { name: String, known: String },
    #[error("every setting was skipped: nothing to measure")]
    NothingToMeasure,
    #[error("another rtlab tune is running (it holds {0})")]
    Busy(String),
    #[error("the tune journal {path}: {source}")]
    Journal {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{setting}: {source}")]
    Setting {
        setting: String,
        #[source]
        source: std::io::Error,
    },
    #[error("measuring: {0}")]
    Measure(#[from] rtlab_session::SessionError),
    #[error("judging the rounds: {0}")]
    Compare(#[from] rtlab_analysis::compare::CompareError),
    #[error("pooling the rounds: {0}")]
    Histogram(#[from] rtlab_core::HistogramError),
    /// `--app COMM`: no process has that name.
    #[error("--app {0}: no running program has that name (/proc/PID/comm); start it first")]
    AppNotRunning(String),
    /// `--app COMM`: the program ended before the tune did.
    #[error(
        "--app {0}: the program exited mid-tune, so its deadline misses cannot be counted any more"
    )]
    AppGone(String),
    /// `--app COMM`: its deadline misses could not be counted (tracing unavailable, …).
    #[error("--app {comm}: counting its deadline misses: {reason}")]
    App { comm: String, reason: String },
    #[error("putting back: {0}")]
    Restore(String),
    /// A file of the boot profile (`rtlab tune --apply`): one that cannot be written, read or
    /// understood; `path` names it.
    #[error("the tune profile {path}: {reason}")]
    Profile { path: String, reason: String },
}

impl TuneError {
    /// True when the caller's input was at fault (a setting name, a CPU list).
    pub fn is_input(&self) -> bool {
        match self {
            TuneError::UnknownSetting { .. }
            | TuneError::NothingToMeasure
            | TuneError::AppNotRunning(_) => true,
            TuneError::Measure(error) => error.is_input(),
            _ => false,
        }
    }
}

/// [`TuneError::is_input`] for anything in an error chain.
pub fn is_input_error(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<TuneError>()
        .is_some_and(TuneError::is_input)
}
