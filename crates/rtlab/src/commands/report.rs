//! `rtlab report RUN… --html FILE`: one self-contained HTML report (inline CSS and SVG, no script,
//! no network) of one or several runs, for people who read plots rather than tables; with
//! `--trace`, an application's deadline misses beside them, on a timeline coloured by culprit.
//! The Windows build reports runs too; `--trace` is Linux only (the trace analysis is).

use crate::output::PendingOutput;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Runs to report: ids (or unique prefixes, or `latest`) or Run record JSON files
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// Write the HTML report to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE", required = true)]
    pub html: PathBuf,
    /// Also show an application's trace (`rtlab trace record`, or a trace.dat) beside the runs:
    /// its deadline misses on a timeline coloured by culprit; repeatable
    #[arg(long, value_name = "TRACE")]
    pub trace: Vec<PathBuf>,
}

/// One section per trace: the misses' timeline and the culprits in words.
#[cfg(target_os = "linux")]
fn trace_sections(traces: &[PathBuf]) -> anyhow::Result<String> {
    let mut html = String::new();
    for path in traces {
        let header = crate::output::header(rtlab_trace::analyze::report::SCHEMA, None);
        let (report, _) = rtlab_trace::source::analyze_path(
            path,
            rtlab_trace::analyze::AnalysisConfig::default(),
            header,
        )
        .map_err(|error| crate::exit::input(format!("--trace {}: {error}", path.display())))?;
        html.push_str(&rtlab_render::misses_svg::trace_section(
            &path.display().to_string(),
            &report,
        ));
    }
    Ok(html)
}

/// Windows has no application trace analysis (rtlab-trace reads Linux kernel events): a
/// `--trace` is refused, plainly, before anything is written.
#[cfg(not(target_os = "linux"))]
fn trace_sections(traces: &[PathBuf]) -> anyhow::Result<String> {
    match traces.first() {
        None => Ok(String::new()),
        Some(path) => Err(crate::exit::input(format!(
            "--trace {}: not available on Windows: {}",
            path.display(),
            rtlab_render::windows_absent::absent_command("trace")
        ))),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let output = PendingOutput::prepare(&args.html, "--html")?;
    let records = args
        .runs
        .iter()
        .map(|run| super::load_record(run))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sections = trace_sections(&args.trace)?;
    let html = rtlab_render::report_html::render_with(&records, &sections);
    output.commit(&html)?;
    Ok(ExitCode::SUCCESS)
}
