//! rtlab-trace: what an application's threads really do (paper 003, section 3).
//!
//! From a recording of the scheduler's events (`rtlab trace record`, or a trace-cmd `trace.dat`
//! someone already has) this crate recovers the thread structure of an application — each
//! thread's period, CPU per activation and who wakes it (003's Table 3-1) — and finds what the
//! paper's authors found by hand with Perl scripts: priority inversions, hangs and deadlocks,
//! starvation, and late activations with what they waited for. It owns the rtlab trace file
//! format (`file`), the trace.dat reader (`tracedat`) and the analyses (`analyze`), whose report
//! (plain data in `rtlab_core::apptrace_report`) rtlab-render writes as text, SVG and Perfetto.
//! Recording goes through `rtlab-bpf`'s application-trace programs where they load, else
//! `rtlab-explain`'s tracefs recorder (`recorders`).

pub mod analyze;
pub mod app_recorder;
#[cfg(target_os = "linux")]
pub mod auto_observe;
#[cfg(target_os = "linux")]
pub mod counters;
pub mod cycle_marker;
pub mod decode;
pub mod file;
pub mod forecast;
pub mod live;
pub mod model;
pub mod pipewire;
pub mod record;
mod record_error;
mod recorders;
pub mod source;
pub mod tracedat;
pub mod watch;
pub mod watch_app;
pub mod watch_pipewire;

pub use model::{Comm, Event, EventKind};
