//! Every flag value parser clap calls, so a time is spelt the same way on every flag: a number
//! with its unit (`150us`, `2.5ms`, `1s`). The parsing is the libraries' (`rtlab_core::time_value`
//! keeps bare numbers working where a flag once took one); this module turns their errors into
//! clap's and shows their deprecation notes on stderr.

use rtlab_analysis::classes::{parse_rate, Rate};
use rtlab_analysis::tail::UsageModel;
use rtlab_core::time_value::{self, Noted, TimeValueError};
use rtlab_core::{parse_duration, Nanos};
use rtlab_import::{Format, ValueUnit};
#[cfg(target_os = "linux")]
use rtlab_sys::sched::Policy;

/// The flag of a library setting: `load_cmd` → `--load-cmd`; the few whose flag differs are
/// listed (the probe's `cpu_dma_latency_us` is `--cpu-dma-latency`).
pub fn flag_of(setting: &str) -> String {
    match setting {
        "cpu_dma_latency_us" => "--cpu-dma-latency".to_owned(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// A library error with the flag of the setting it is about as context (`--period: …`);
/// `exit.rs` still tells input from system errors by the error's kind.
pub fn naming_flag<E>(error: E, setting: Option<&str>) -> anyhow::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    match setting.map(flag_of) {
        Some(flag) => anyhow::Error::new(error).context(flag),
        None => anyhow::Error::new(error),
    }
}

/// `--recorder` and `--explain-recorder`: `auto`, `bpf` or `tracefs` (listed in the help).
#[cfg(not(windows))]
pub fn recorder(
) -> impl clap::builder::TypedValueParser<Value = rtlab_core::recorder::RecorderChoice> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["auto", "bpf", "tracefs"])
        .map(|word| rtlab_core::recorder::RecorderChoice::from_name(&word).unwrap_or_default())
}

/// `--explain-events`: `standard` or `full` (listed in the help).
#[cfg(not(windows))]
pub fn event_set() -> impl clap::builder::TypedValueParser<Value = rtlab_explain::EventSet> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["standard", "full"])
        .map(|word| rtlab_explain::EventSet::from_name(&word).unwrap_or_default())
}

/// A duration with its unit (`10s`, `250us`).
pub fn duration(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

/// A duration above zero.
pub fn positive_duration(text: &str) -> Result<Nanos, String> {
    time_value::positive_duration(text).map_err(|error| error.to_string())
}

/// A value the library parsed, its deprecation note (a bare number) shown on stderr.
fn noting<T>(parsed: Result<Noted<T>, TimeValueError>) -> Result<T, String> {
    let Noted { value, note } = parsed.map_err(|error| error.to_string())?;
    if let Some(note) = note {
        eprintln!("rtlab: note: {note}");
    }
    Ok(value)
}

/// `--explain-above`: a time above zero (bare numbers: µs).
pub fn explain_threshold(text: &str) -> Result<Nanos, String> {
    noting(time_value::positive_time_or_bare_micros(text))
}

/// `--buffer-ms`, `--compute-ms`: a time (bare numbers: ms).
pub fn millis_time(text: &str) -> Result<Nanos, String> {
    noting(time_value::time_or_bare_millis(text))
}

/// `--cpu-dma-latency`: the latency the CPUs may take to leave an idle state, in whole µs
/// (bare numbers: µs; 0 keeps them out of idle states).
pub fn dma_latency_us(text: &str) -> Result<i32, String> {
    noting(time_value::whole_micros_or_bare(text))
}

/// A kernel CPU list (`0-3,6`), parsed once.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

/// `--cpus LIST` of the commands that measure on several CPUs.
#[cfg(target_os = "linux")]
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CpusArgs {
    /// CPUs to measure, as a kernel CPU list (e.g. 0-3,6); default: every online CPU
    #[arg(long = "cpus", value_name = "LIST", value_parser = cpu_list)]
    pub list: Option<CpuList>,
}

#[cfg(target_os = "linux")]
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    rtlab_sys::cpu::parse_cpu_list(text).map(CpuList)
}

/// `Nh/day,Nd/week`.
pub fn usage(text: &str) -> Result<UsageModel, String> {
    text.parse::<UsageModel>()
        .map_err(|error| error.to_string())
}

/// `1/hour`, `1/day`, `1/10min`.
pub fn rate(text: &str) -> Result<Rate, String> {
    parse_rate(text).map_err(|error| error.to_string())
}

/// `normal` or `fifo:PRIO` (below the buffer experiment's device at 99).
#[cfg(target_os = "linux")]
pub fn producer_policy(text: &str) -> Result<Policy, String> {
    rtlab_probe::buffer_experiment::parse_producer_class(text).map_err(|error| error.to_string())
}

/// `--confidence`: a percentage from 50 to below 100.
pub fn confidence(text: &str) -> Result<f64, String> {
    rtlab_analysis::compare::parse_confidence_percent(text).map_err(|error| error.to_string())
}

/// An import format name.
pub fn import_format(text: &str) -> Result<Format, String> {
    text.parse()
}

/// `ns`, `us`, `ms`.
pub fn value_unit(text: &str) -> Result<ValueUnit, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("0-2,5").unwrap().0, vec![0, 1, 2, 5]);
    }
}
