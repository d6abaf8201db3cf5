//! rtlab-workload: does *my application* glitch here, and does a reservation fix it?
//!
//! A probe thread says how late a thread can be; a workload says what that does to an
//! application. A [`Workload`] models one (paper 003 §3, paper 002 §6.1): threads with a policy
//! and priority or a CPU reservation, released by a timer, by another thread or by a free
//! buffer, doing CPU work measured on their own CPU clock, passing buffers through rings to a
//! device that drains one buffer per period like a sound card, and sharing plain or
//! priority-inheritance locks. [`runner::run`] runs it on real threads and counts what the user
//! would notice — underruns, deadline misses, starvations, each with its time — into a Run
//! record ([`record::build`]); [`wav`] turns a device's play log into audio; [`study`] is paper
//! 003's media-player study (Tables 3-1 and 3-2) on Linux. The two file formats are
//! [`toml_file`] (rtlab's own) and [`rt_app`] (rt-app's JSON, the common subset).

pub mod explain;
pub mod model;
pub mod record;
pub mod reserve;
pub mod results;
pub mod ring;
pub mod rt_app;
pub mod runner;
pub mod study;
pub mod study_run;
pub mod toml_file;
pub mod wav;

pub use model::Workload;

/// True when `cause` is one of this crate's errors and the request is at fault, not the system.
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<study_run::StudyRunError>()
        .is_some_and(study_run::StudyRunError::is_input)
}

/// Why a workload file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadFileError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Toml {
        path: String,
        #[source]
        source: toml_file::FileError,
    },
    #[error("{path}: {source}")]
    RtApp {
        path: String,
        #[source]
        source: rt_app::RtAppError,
    },
}

/// The file's format: rt-app JSON when it ends in `.json` or starts with `{`, else TOML.
pub fn format_of(path: &str, text: &str) -> &'static str {
    if path.ends_with(".json") || text.trim_start().starts_with('{') {
        "rt-app"
    } else {
        "toml"
    }
}

/// Reads a workload file of either format.
pub fn read_workload(path: &str) -> Result<(Workload, &'static str), LoadFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let stem = std::path::Path::new(path).file_stem().map_or_else(
        || "workload".to_owned(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    match format_of(path, &text) {
        "rt-app" => rt_app::parse_rt_app(&text, &stem)
            .map(|workload| (workload, "rt-app"))
            .map_err(|source| LoadFileError::RtApp {
                path: path.to_owned(),
                source,
            }),
        _ => toml_file::parse_workload_toml(&text, &stem)
            .map(|workload| (workload, "toml"))
            .map_err(|source| LoadFileError::Toml {
                path: path.to_owned(),
                source,
            }),
    }
}
