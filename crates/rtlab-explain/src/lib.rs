//! rtlab-explain: tracefs recording, trace parsing and cause attribution of late wake-ups
//! (`rtlab run --explain`). `rtlab trace record`'s tracefs recorder and cycle markers are
//! rtlab-trace's, over this crate's `InstanceBuilder`.
//!
//! The probe says *that* a wake-up was late; this crate says *why*. It records the kernel's
//! scheduling, interrupt and timer events through a private tracefs instance (binary ring-buffer
//! pages, decoded with the kernel's own `format` descriptions) or rtlab-bpf's programs, keeps a
//! bounded window of them per CPU, and for each late sample decomposes [intended, actual] into
//! named causes that add up to the measured latency (paper 002's latency cause tool, with names
//! and durations).

pub mod attribution;
pub mod error;
pub mod event;
pub mod fields;
pub mod format;
pub mod instance;
pub mod page;
pub mod recorder;
pub mod stacks;
pub mod supply;
pub mod symbols;
pub mod window;

pub use attribution::{
    attribute, attribute_with_timeline, describe_prio, AttributionContext, LateWakeup,
};
pub use event::{Comm, EventDecoder, EventKind, EventSet, TraceEvent};
pub use recorder::{
    BpfExplainer, BpfExplainerConfig, BpfSummary, Explainer, ExplainerConfig, ExplainerReport,
    PollOutcome, Recorder, RecorderConfig, TimerlatSplit, TraceError,
};
pub use symbols::KernelSymbols;
