//! rtlab-render: everything rtlab shows, as text. Terminal tables of a run, the verdict block, the
//! explain report and its Perfetto trace, forecasts, checks, plans, comparisons and timer studies;
//! the daemon's answers and `reserve --auto`'s progress and JSON;
//! `rtlab trace`'s text report, SVG and Perfetto timelines and misses timeline; the HTML report and
//! its hand-built SVG plots. Every renderer returns a `String` (or writes into any
//! `std::fmt::Write`), so a test or another program uses the same text the CLI prints; the CLI
//! only decides where it goes. Output is deterministic, so it is snapshot-tested (insta).
//!
//! Numbers are stored in ns and printed in µs with one decimal (the unit cyclictest users read);
//! terminal text fits 80 columns.

pub mod apptrace_json;
pub mod apptrace_perfetto;
pub mod apptrace_svg;
pub mod apptrace_text;
pub mod apptrace_words;
pub mod buffer;
pub mod check;
pub mod compare;
pub mod explain;
pub mod explain_perfetto;
pub mod forecast;
pub mod history;
pub mod misses_svg;
pub mod monitor;
pub mod pipewire;
pub mod plan;
pub mod report_html;
pub mod reserve;
pub mod reserve_auto;
pub mod run_verdict;
pub mod summary;
pub mod svg_plots;
pub mod svg_timers;
pub mod text;
pub mod timers;
pub mod trace_forecast;
pub mod trace_record;
pub mod tune;
pub mod tune_profile;
pub mod watch;
pub mod windows_absent;
pub mod workload;

pub use summary::{metric_explanation, micros};

/// The text a `std::fmt::Write` renderer produces. Writing into a `String` cannot fail; a
/// `Display` implementation that reports an error would be a bug, and its text is cut there.
pub(crate) fn to_text(render: impl FnOnce(&mut String) -> std::fmt::Result) -> String {
    let mut text = String::new();
    let _ = render(&mut text);
    text
}
