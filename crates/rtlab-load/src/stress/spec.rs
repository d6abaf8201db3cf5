//! The `--load` grammar: `KIND[:INTENSITY]`, comma-separated.
//!
//! One small grammar for every stressor, so a load can be written on the command line, stored in
//! the Run record as text and parsed back: `cpu:50%` (one worker per online CPU, each busy 50 % of
//! every 20 ms slice), `io:4` (four workers, always busy), `memory:2@30%` (two workers at 30 %).

use std::fmt;
use std::str::FromStr;

/// What a stressor loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StressorKind {
    /// Integer and floating-point spinning, SCHED_OTHER.
    Cpu,
    /// Streaming memory bandwidth plus page-fault churn (mmap / touch / munmap).
    Memory,
    /// File writes with fsync in a temporary directory, and O_DIRECT reads where supported.
    Io,
    /// Loopback TCP and UDP floods between threads: network softirq load.
    Net,
    /// Process creation: fork + exec of `true`, then wait.
    Fork,
    /// Many short sleeps with 1 ns timer slack: hrtimer interrupts and wake-ups.
    Timers,
    /// Last-level-cache thrash: random cache-line writes over twice the LLC size.
    Cache,
}

pub const ALL_KINDS: [StressorKind; 7] = [
    StressorKind::Cpu,
    StressorKind::Memory,
    StressorKind::Io,
    StressorKind::Net,
    StressorKind::Fork,
    StressorKind::Timers,
    StressorKind::Cache,
];

impl StressorKind {
    pub fn name(self) -> &'static str {
        match self {
            StressorKind::Cpu => "cpu",
            StressorKind::Memory => "memory",
            StressorKind::Io => "io",
            StressorKind::Net => "net",
            StressorKind::Fork => "fork",
            StressorKind::Timers => "timers",
            StressorKind::Cache => "cache",
        }
    }

    /// What the stressor does, in one line (for `--help` and the README).
    pub fn description(self) -> &'static str {
        match self {
            StressorKind::Cpu => "integer and float spin, SCHED_OTHER",
            StressorKind::Memory => "streaming copies plus mmap/touch/munmap page-fault churn",
            StressorKind::Io => {
                "1 MiB writes with fsync every 4 MiB, O_DIRECT read-back where supported"
            }
            StressorKind::Net => {
                "loopback TCP stream and UDP datagrams between threads (softirq load)"
            }
            StressorKind::Fork => "fork + exec of `true` and wait, back to back",
            StressorKind::Timers => {
                "short sleeps with 1 ns timer slack (hrtimer interrupts, wake-ups)"
            }
            StressorKind::Cache => "random cache-line writes over twice the last-level cache",
        }
    }
}

impl fmt::Display for StressorKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// How many workers run and how busy each one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// One worker per online CPU.
    PerCpu,
    Count(u32),
}

/// One parsed `KIND[:INTENSITY]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StressSpec {
    pub kind: StressorKind,
    pub workers: Workers,
    /// Share of every 20 ms slice each worker is busy, 1..=100.
    pub duty_percent: u8,
}

/// Largest worker count accepted (a typo guard, not a machine limit).
pub const MAX_WORKERS: u32 = 1024;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("empty load spec (expected KIND[:INTENSITY], e.g. cpu:50% or io:4)")]
    Empty,
    #[error("unknown stressor '{kind}' in '{spec}' (expected one of cpu, memory, io, net, fork, timers, cache)")]
    UnknownKind { spec: String, kind: String },
    #[error("bad intensity '{intensity}' in '{spec}': {reason}")]
    BadIntensity {
        spec: String,
        intensity: String,
        reason: String,
    },
    #[error(
        "stressor '{kind}' is given twice ('{first}' and '{second}'); merge them into one spec"
    )]
    Duplicate {
        kind: String,
        first: String,
        second: String,
    },
}

impl StressSpec {
    /// The default intensity of a bare `KIND`: `cpu` loads every CPU, the others run one worker.
    pub fn default_for(kind: StressorKind) -> StressSpec {
        let workers = match kind {
            StressorKind::Cpu => Workers::PerCpu,
            _ => Workers::Count(1),
        };
        StressSpec {
            kind,
            workers,
            duty_percent: 100,
        }
    }

    /// Number of worker threads on a machine with `online_cpus` CPUs.
    pub fn worker_count(&self, online_cpus: usize) -> u32 {
        match self.workers {
            Workers::PerCpu => online_cpus.max(1) as u32,
            Workers::Count(count) => count,
        }
    }
}

impl fmt::Display for StressSpec {
    /// The canonical text form, which parses back to the same spec.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.workers, self.duty_percent) {
            (Workers::PerCpu, 100) if self.kind == StressorKind::Cpu => {
                write!(formatter, "{}", self.kind)
            }
            (Workers::PerCpu, duty) => write!(formatter, "{}:{duty}%", self.kind),
            (Workers::Count(count), 100) => write!(formatter, "{}:{count}", self.kind),
            (Workers::Count(count), duty) => write!(formatter, "{}:{count}@{duty}%", self.kind),
        }
    }
}

fn parse_percent(spec: &str, text: &str) -> Result<u8, SpecError> {
    let bad = |reason: &str| SpecError::BadIntensity {
        spec: spec.to_owned(),
        intensity: text.to_owned(),
        reason: reason.to_owned(),
    };
    let digits = text
        .strip_suffix('%')
        .ok_or_else(|| bad("a duty cycle ends with %"))?;
    let value: u32 = digits
        .trim()
        .parse()
        .map_err(|_| bad("the duty cycle is not a whole number"))?;
    if !(1..=100).contains(&value) {
        return Err(bad("the duty cycle must be between 1% and 100%"));
    }
    Ok(value as u8)
}

fn parse_count(spec: &str, text: &str) -> Result<u32, SpecError> {
    let bad = |reason: String| SpecError::BadIntensity {
        spec: spec.to_owned(),
        intensity: text.to_owned(),
        reason,
    };
    let value: u32 = text.trim().parse().map_err(|_| {
        bad(
            "expected a worker count (io:4), a duty cycle (cpu:50%) or both (memory:2@30%)"
                .to_owned(),
        )
    })?;
    if value == 0 || value > MAX_WORKERS {
        return Err(bad(format!(
            "the worker count must be between 1 and {MAX_WORKERS}"
        )));
    }
    Ok(value)
}

impl FromStr for StressSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<StressSpec, SpecError> {
        let spec = text.trim();
        if spec.is_empty() {
            return Err(SpecError::Empty);
        }
        let (kind_text, intensity) = match spec.split_once(':') {
            Some((kind, intensity)) => (kind.trim(), Some(intensity.trim())),
            None => (spec, None),
        };
        let kind = ALL_KINDS
            .iter()
            .copied()
            .find(|kind| kind.name().eq_ignore_ascii_case(kind_text))
            .ok_or_else(|| SpecError::UnknownKind {
                spec: spec.to_owned(),
                kind: kind_text.to_owned(),
            })?;
        let Some(intensity) = intensity else {
            return Ok(StressSpec::default_for(kind));
        };
        if intensity.is_empty() {
            return Err(SpecError::BadIntensity {
                spec: spec.to_owned(),
                intensity: String::new(),
                reason: "nothing after ':'".to_owned(),
            });
        }
        let (workers, duty_percent) = if let Some((count, duty)) = intensity.split_once('@') {
            (
                Workers::Count(parse_count(spec, count)?),
                parse_percent(spec, duty.trim())?,
            )
        } else if intensity.ends_with('%') {
            (Workers::PerCpu, parse_percent(spec, intensity)?)
        } else {
            (Workers::Count(parse_count(spec, intensity)?), 100)
        };
        Ok(StressSpec {
            kind,
            workers,
            duty_percent,
        })
    }
}

/// Parses `SPEC[,SPEC…]` of stressors only (profiles are resolved by the caller first).
/// A kind may appear once; the order is kept.
pub fn parse_stress_list(text: &str) -> Result<Vec<StressSpec>, SpecError> {
    let mut specs: Vec<(StressSpec, String)> = Vec::new();
    for part in text.split(',') {
        let spec: StressSpec = part.parse()?;
        if let Some((_, first)) = specs.iter().find(|(earlier, _)| earlier.kind == spec.kind) {
            return Err(SpecError::Duplicate {
                kind: spec.kind.name().to_owned(),
                first: first.clone(),
                second: part.trim().to_owned(),
            });
        }
        specs.push((spec, part.trim().to_owned()));
    }
    Ok(specs.into_iter().map(|(spec, _)| spec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let cases = [
            ("cpu", StressorKind::Cpu, Workers::PerCpu, 100),
            ("cpu:50%", StressorKind::Cpu, Workers::PerCpu, 50),
            ("io:4", StressorKind::Io, Workers::Count(4), 100),
            ("memory:2@30%", StressorKind::Memory, Workers::Count(2), 30),
            (" NET : 1 ", StressorKind::Net, Workers::Count(1), 100),
            ("timers", StressorKind::Timers, Workers::Count(1), 100),
            ("cache:100%", StressorKind::Cache, Workers::PerCpu, 100),
        ];
        for (text, kind, workers, duty_percent) in cases {
            let spec: StressSpec = text
                .parse()
                .unwrap_or_else(|error| panic!("{text}: {error}"));
            assert_eq!(
                spec,
                StressSpec {
                    kind,
                    workers,
                    duty_percent
                },
                "{text}"
            );
            // The canonical form parses back to the same spec.
            assert_eq!(
                spec.to_string().parse::<StressSpec>().unwrap(),
                spec,
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_bad_specs_with_the_offending_part() {
        let cases = [
            ("", "empty load spec"),
            ("gpu:3", "unknown stressor 'gpu' in 'gpu:3'"),
            ("cpu:", "nothing after ':'"),
            ("cpu:0%", "between 1% and 100%"),
            ("cpu:101%", "between 1% and 100%"),
            ("cpu:x%", "not a whole number"),
            ("io:0", "between 1 and 1024"),
            ("io:-1", "expected a worker count"),
            ("io:2@", "ends with %"),
            ("io:@5%", "expected a worker count"),
            ("io:99999", "between 1 and 1024"),
        ];
        for (text, expected) in cases {
            let error = text.parse::<StressSpec>().unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(!error.ends_with('.'), "{error}");
        }
    }

    #[test]
    fn lists_keep_order_and_refuse_duplicates() {
        let specs = parse_stress_list("io:2,cpu:50%").unwrap();
        assert_eq!(specs[0].kind, StressorKind::Io);
        assert_eq!(specs[1].kind, StressorKind::Cpu);
        let error = parse_stress_list("cpu,io,cpu:20%").unwrap_err().to_string();
        assert!(error.contains("'cpu' and 'cpu:20%'"), "{error}");
        assert!(parse_stress_list("cpu,,io").is_err());
    }

    #[test]
    fn worker_counts_follow_the_machine_for_per_cpu_specs() {
        let spec: StressSpec = "cpu:30%".parse().unwrap();
        assert_eq!(spec.worker_count(8), 8);
        let spec: StressSpec = "io:3".parse().unwrap();
        assert_eq!(spec.worker_count(8), 3);
    }
}
