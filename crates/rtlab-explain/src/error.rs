//! [`TraceError`]: what recording or decoding the kernel's trace can fail with, for every recorder
//! of this crate (`recorder/`, `supply.rs`), rtlab-trace's `app_recorder.rs`, and the instance they share
//! (`instance.rs`). Re-exported as `rtlab_explain::recorder::TraceError`, where it always was.

use crate::event::EventError;
use crate::format::FormatError;
use crate::page::PageError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("tracefs: {0}")]
    Io(#[from] std::io::Error),
    #[error("{file}: {source}")]
    Format { file: String, source: FormatError },
    #[error("{0}")]
    Event(#[from] EventError),
    #[error("CPU {cpu}: {source}")]
    Page { cpu: usize, source: PageError },
    #[error("required trace event {0} is not available on this kernel")]
    MissingEvent(String),
    #[error("the explainer thread panicked")]
    ThreadPanicked,
    #[error("{0}")]
    Bpf(String),
}
