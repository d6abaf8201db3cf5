//! Every flag value is parsed here, so a time is spelt the same way on every flag: a number with
//! its unit (`150us`, `2.5ms`, `1s`; see `rtlab_core::parse_duration`). Flags that took a bare
//! number in a fixed unit before (`--explain-above 150` in µs, `--buffer-ms 4` in ms,
//! `--cpu-dma-latency 10` in µs) still take one, with a deprecation note on stderr.

use rtlab_analysis::classes::{parse_rate, Rate};
use rtlab_analysis::tail::UsageModel;
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

/// A duration with its unit (`10s`, `250us`).
pub fn duration(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

/// A duration above zero.
pub fn positive_duration(text: &str) -> Result<Nanos, String> {
    match duration(text)? {
        Nanos(0) => Err("must be more than 0".to_owned()),
        positive => Ok(positive),
    }
}

/// A time with its unit; a bare number is read in `legacy_unit` (`us` or `ms`) with a note.
fn time_or_bare(text: &str, legacy_unit: &str) -> Result<Nanos, String> {
    let trimmed = text.trim();
    if let Ok(value) = trimmed.parse::<f64>() {
        if !(value.is_finite() && (0.0..1e12).contains(&value)) {
            return Err(format!("'{text}' is not a usable time"));
        }
        if value != 0.0 {
            eprintln!(
                "rtlab: note: a bare number is deprecated here; write the unit: {trimmed}{legacy_unit}"
            );
        }
        return duration(&format!("{trimmed}{legacy_unit}"));
    }
    duration(trimmed)
}

/// `--explain-above`: a time above zero (bare numbers: µs).
pub fn explain_threshold(text: &str) -> Result<Nanos, String> {
    match time_or_bare(text, "us")? {
        Nanos(0) => Err(format!("'{text}' must be a positive time (e.g. 150us)")),
        threshold => Ok(threshold),
    }
}

/// `--buffer-ms`, `--compute-ms`: a time (bare numbers: ms).
pub fn millis_time(text: &str) -> Result<Nanos, String> {
    let time = time_or_bare(text, "ms")?;
    if time.as_u64() >= 1_000_000_000_000_000 {
        return Err(format!("'{text}' is not a usable time"));
    }
    Ok(time)
}

/// `--cpu-dma-latency`: the latency the CPUs may take to leave an idle state, in whole µs
/// (bare numbers: µs; 0 keeps them out of idle states).
pub fn dma_latency_us(text: &str) -> Result<i32, String> {
    let time = time_or_bare(text, "us")?;
    if time.as_u64() % 1_000 != 0 {
        return Err(format!("'{text}' is not a whole number of µs"));
    }
    i32::try_from(time.as_u64() / 1_000).map_err(|_| format!("'{text}' is too long"))
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
    match text.split_once(':') {
        None if text == "normal" => Ok(Policy::Other { nice: 0 }),
        Some(("fifo", priority)) => priority
            .parse::<u32>()
            .ok()
            .filter(|priority| (1..=98).contains(priority))
            .map(|priority| Policy::Fifo { priority })
            .ok_or_else(|| {
                format!("'{priority}' is not a FIFO priority below the device's (1-98)")
            }),
        _ => Err(format!(
            "'{text}' is not a producer class (normal or fifo:PRIO)"
        )),
    }
}

/// `--confidence`: a percentage from 50 to below 100.
pub fn confidence(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a percentage"))?;
    if !(50.0..100.0).contains(&value) {
        return Err(format!("'{text}': give a confidence from 50 to below 100"));
    }
    Ok(value)
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

    #[test]
    fn times_take_units_and_bare_numbers_keep_their_old_unit() {
        assert_eq!(explain_threshold("150us"), Ok(Nanos(150_000)));
        assert_eq!(explain_threshold("150"), Ok(Nanos(150_000)));
        assert_eq!(explain_threshold("2.5"), Ok(Nanos(2_500)));
        assert_eq!(explain_threshold("1ms"), Ok(Nanos(1_000_000)));
        for bad in ["0", "-3", "abc", "inf", "0us"] {
            assert!(explain_threshold(bad).is_err(), "{bad}");
        }
        assert_eq!(millis_time("4"), Ok(Nanos(4_000_000)));
        assert_eq!(millis_time("0.5"), Ok(Nanos(500_000)));
        assert_eq!(millis_time("250us"), Ok(Nanos(250_000)));
        assert!(millis_time("1e300").is_err());
        assert_eq!(dma_latency_us("0"), Ok(0));
        assert_eq!(dma_latency_us("10us"), Ok(10));
        assert_eq!(dma_latency_us("10"), Ok(10));
        assert!(dma_latency_us("1500ns").is_err());
        assert_eq!(positive_duration("1ms"), Ok(Nanos(1_000_000)));
        assert!(positive_duration("0s").is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn policies_and_lists() {
        assert_eq!(
            producer_policy("fifo:50"),
            Ok(Policy::Fifo { priority: 50 })
        );
        assert!(producer_policy("fifo:99").is_err());
        assert!(producer_policy("rr:5").is_err());
        assert_eq!(cpu_list("0-2,5").unwrap().0, vec![0, 1, 2, 5]);
    }
}
