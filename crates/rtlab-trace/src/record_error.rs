//! Why `rtlab trace record` failed: one error type for the recording (`record.rs`) and the two
//! recorders under it (`recorders.rs`), in a module below both so neither imports the other's.

use crate::file::FileError;
use rtlab_explain::recorder::TraceError;
use thiserror::Error;

/// Why a recording could not start or stopped early.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("tracing: {0}")]
    Trace(#[from] TraceError),
    #[error("BPF recorder: {0}")]
    Bpf(#[from] rtlab_bpf::BpfError),
    #[error("BPF recorder: a record: {0}")]
    Record(String),
    #[error("{0}")]
    File(#[from] FileError),
    #[error("decoding a recorded event: {0}")]
    Decode(#[from] crate::decode::DecodeError),
    #[error("no process to record: {0}")]
    NoTarget(String),
    /// Starting the command failed (named by the caller as [`RecordError::Spawn`]).
    #[error("starting the command: {0}")]
    SpawnIo(std::io::Error),
    #[error("starting the command {command:?}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
}
