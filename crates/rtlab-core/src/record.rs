//! The Run record (schema `rtlab.run/1`): the one hand-off between measuring and analysing.
//!
//! Field names and meanings are the contract in DESIGN.md; tags are strings, times are integer
//! nanoseconds. Readers reject a record whose `schema` they do not know instead of guessing.

pub use crate::cause::{Cause, CauseKind};
use crate::histogram::{HistogramError, LatencyHistogram};
pub use crate::metric::Metric;
pub use crate::peak::Peak;
use crate::run_config::{null_as_default, RecordConfig};
use crate::run_load::Load;
use crate::run_tail::Tail;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const RUN_SCHEMA: &str = "rtlab.run/1";

/// One measured distribution: one (metric, class, cpu).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub metric: Metric,
    pub class: String,
    pub cpu: u32,
    /// `SCHED_FIFO`, `SCHED_OTHER`, `SCHED_DEADLINE`, …
    pub policy: String,
    /// RT priority for FIFO/RR, nice value for OTHER.
    pub priority: i32,
    pub period_ns: u64,
    pub count: u64,
    /// Periods in which no wake-up happened at all because an earlier one ran so late.
    pub missed: u64,
    /// Samples measured but not stored (should be 0; counted, never silently dropped).
    #[serde(default)]
    pub lost: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub percentiles: BTreeMap<String, u64>,
    /// HdrHistogram V2 compressed, base64.
    pub hdr: String,
    /// Largest sample in each second of measurement (packed when long: `crate::packed`).
    #[serde(with = "crate::packed::u64_list")]
    pub max_per_second: Vec<u64>,
    /// The largest samples with their times (kept for tail projection and cause analysis),
    /// largest first (packed when long: `crate::packed`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "crate::packed::peak_list"
    )]
    pub peaks: Vec<Peak>,
    /// Tail projection (expected worst case per hour/day/week), when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<Tail>,
}

impl Series {
    /// `class/metric@cpu`, the name used in tables and in `--series` selectors.
    pub fn label(&self) -> String {
        crate::label::SeriesLabel {
            class: &self.class,
            metric: self.metric,
            cpu: self.cpu,
        }
        .to_string()
    }

    pub fn histogram(&self) -> Result<LatencyHistogram, HistogramError> {
        LatencyHistogram::from_base64(&self.hdr)
    }
}

/// The machine a run was made on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    /// `none`, `voluntary`, `full`, `rt`, `lazy`, or what uname says.
    pub preemption: String,
    pub cpu_model: String,
    pub cpu_count: u32,
    /// `none` on bare metal, else the hypervisor's name (`kvm`, `vmware`, `microsoft`, …).
    pub virtualization: String,
    pub clocksource: String,
    /// The /dev/cpu_dma_latency value rtlab held during the run, µs; None when not held.
    pub cpu_dma_latency_us: Option<i32>,
    /// What only a Windows host has (absent on Linux records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsHost>,
}

/// The Windows facts that change timing: the system timer's resolution, the power plan, and
/// whether "Windows" was really Wine (whose timings are the Linux host's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowsHost {
    /// `10.0.22631.4317 (Windows 11 Pro 23H2)`, as the registry and RtlGetVersion say.
    pub version: String,
    /// The timer period in force when the run started, ns (NtQueryTimerResolution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_resolution_ns: Option<u64>,
    /// The finest period a timeBeginPeriod request can get, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_resolution_finest_ns: Option<u64>,
    /// The default (coarsest) period, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_resolution_coarsest_ns: Option<u64>,
    /// The active power plan (`Balanced`, `High performance`, … or its GUID); None if unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_plan: Option<String>,
    /// The Wine version when running under Wine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wine: Option<String>,
}

/// One stretch of an episode's window with a single cause, in time order: what a trace viewer
/// shows (the causes are the same time summed by name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Since the intended wake time, ns.
    pub start_ns: u64,
    pub ns: u64,
    pub kind: CauseKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A late wake-up and what the CPU did instead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// The series label (`class/metric@cpu`).
    pub series: String,
    pub cpu: u32,
    /// Intended wake time, ns since the start of measurement.
    pub at_ns: u64,
    pub latency_ns: u64,
    pub causes: Vec<Cause>,
    /// Steal time /proc/stat reported on that CPU around the episode, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<String>>,
    /// The window in time order (`rtlab explain --perfetto` draws it); empty in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Segment>,
}

impl Episode {
    /// The cause that held the CPU longest in the window (the last of equals), or None when
    /// nothing was attributed: what "caused by" means when an episode is named by one cause.
    pub fn largest_cause(&self) -> Option<&Cause> {
        self.causes.iter().max_by_key(|cause| cause.ns)
    }
}

/// One run: everything measured, with what is needed to repeat and to judge it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub id: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub duration_ns: u64,
    pub tool_version: String,
    #[serde(default)]
    pub cmdline: Vec<String>,
    pub host: Host,
    /// Every setting of the run after defaults, enough to repeat it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub config: RecordConfig,
    pub series: Vec<Series>,
    /// What load ran, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    #[serde(default)]
    pub episodes: Vec<Episode>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// True when the run ended early (SIGINT/SIGTERM); the record then holds what was measured.
    #[serde(default)]
    pub interrupted: bool,
    /// The timer study (`rtlab timers`, `--change-experiment`); absent in every other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timers: Option<crate::TimerStudy>,
    /// How busy the machine was with other work during the run; absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<crate::RunConditions>,
    /// What a workload run counted (`rtlab workload`): per thread and per device; absent in every
    /// other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::WorkloadOutcome>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("not JSON or not a Run record: at '{path}': {message}")]
    Parse { path: String, message: String },
    #[error("schema: unknown schema '{0}' (this rtlab reads {RUN_SCHEMA})")]
    Schema(String),
    #[error("series: the record holds no series")]
    NoSeries,
    #[error("series[{index}].{field} ({label}): {message}")]
    Series {
        index: usize,
        /// The offending field of the series (`hdr`, `period_ns`, …).
        field: &'static str,
        label: String,
        message: String,
    },
}

impl RecordError {
    /// The JSON path of the offending field (`series[2].period_ns`), when known.
    pub fn path(&self) -> String {
        match self {
            RecordError::Parse { path, .. } => path.clone(),
            RecordError::Schema(_) => "schema".to_owned(),
            RecordError::NoSeries => "series".to_owned(),
            RecordError::Series { index, field, .. } => format!("series[{index}].{field}"),
        }
    }
}

/// Who made a record, where and when: the fields every producer fills. The rest of a record
/// starts empty ([`RunRecord::with_header`]).
#[derive(Clone, Debug, Default)]
pub struct RecordHeader {
    pub id: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub duration_ns: u64,
    pub cmdline: Vec<String>,
    pub host: Host,
}

impl RunRecord {
    /// A record at this version's schema from its header, config and series, with the optional
    /// parts empty (no load, episodes, warnings, timer study, conditions or workload; not
    /// interrupted): producers set what they have, so a new optional field touches no producer.
    pub fn with_header(
        header: RecordHeader,
        config: RecordConfig,
        series: Vec<Series>,
    ) -> RunRecord {
        RunRecord {
            schema: RUN_SCHEMA.to_owned(),
            id: header.id,
            started_at: header.started_at,
            duration_ns: header.duration_ns,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            cmdline: header.cmdline,
            host: header.host,
            config,
            series,
            load: None,
            episodes: Vec::new(),
            warnings: Vec::new(),
            interrupted: false,
            timers: None,
            conditions: None,
            workload: None,
        }
    }

    /// A record of `series` with everything else empty: no host details, no config, no load,
    /// episodes or warnings. Producers fill in what they know; tests use it as it is.
    pub fn new(id: &str, started_at: &str, duration_ns: u64, series: Vec<Series>) -> RunRecord {
        let header = RecordHeader {
            id: id.to_owned(),
            started_at: started_at.to_owned(),
            duration_ns,
            ..RecordHeader::default()
        };
        RunRecord::with_header(header, RecordConfig::default(), series)
    }

    /// Parses and validates a record; errors name the JSON path of the offending field.
    pub fn from_json(text: &str) -> Result<RunRecord, RecordError> {
        let deserializer = &mut serde_json::Deserializer::from_str(text);
        let record: RunRecord =
            serde_path_to_error::deserialize(deserializer).map_err(|error| RecordError::Parse {
                path: error.path().to_string(),
                message: error.inner().to_string(),
            })?;
        record.validate()?;
        Ok(record)
    }

    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a Run record always serialises")
    }

    /// Like [`RunRecord::to_json_pretty`], with `max_per_second` and `peaks` as plain arrays
    /// (`[ns, …]` and `[{"at_ns", "value_ns"}, …]`) however long, never `rtlab-packed/1`.
    pub fn to_json_pretty_plain(&self) -> String {
        crate::packed::plain_arrays(|| self.to_json_pretty())
    }

    /// Checks the invariants every consumer relies on: a known schema, at least one series, and
    /// per series a readable histogram that agrees with `count`, ordered percentiles and a period
    /// (`period_ns` may be 0, "unknown", only in an imported record).
    /// The series of one metric, in record order.
    pub fn series_of(&self, metric: Metric) -> Vec<&Series> {
        self.series
            .iter()
            .filter(|series| series.metric == metric)
            .collect()
    }

    pub fn validate(&self) -> Result<(), RecordError> {
        if self.schema != RUN_SCHEMA {
            return Err(RecordError::Schema(self.schema.clone()));
        }
        if let Some(study) = &self.timers {
            study
                .validate()
                .map_err(|(path, message)| RecordError::Parse { path, message })?;
        }
        // A timer study's rows are its measurements; every other record has series.
        if self.series.is_empty() && self.timers.is_none() {
            return Err(RecordError::NoSeries);
        }
        let imported = self.config.import.is_some();
        for (index, series) in self.series.iter().enumerate() {
            let fail = |field: &'static str, message: String| RecordError::Series {
                index,
                field,
                label: series.label(),
                message,
            };
            if series.period_ns == 0 && !imported {
                return Err(fail(
                    "period_ns",
                    "is 0: a measured series has a period (only an import may leave it unknown)"
                        .to_owned(),
                ));
            }
            if series.count > 0 {
                let p50 = series.percentiles.get("50").copied().unwrap_or(0);
                let p99 = series.percentiles.get("99").copied().unwrap_or(0);
                if !(series.min_ns <= p50 && p50 <= p99 && p99 <= series.max_ns) {
                    return Err(fail(
                        "percentiles",
                        format!(
                            "out of order: min {} p50 {} p99 {} max {}",
                            series.min_ns, p50, p99, series.max_ns
                        ),
                    ));
                }
            }
            let histogram = series
                .histogram()
                .map_err(|error| fail("hdr", error.to_string()))?;
            if histogram.count() != series.count {
                return Err(fail(
                    "hdr",
                    format!(
                        "holds {} samples but 'count' says {}",
                        histogram.count(),
                        series.count
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Builds a series' statistics fields from a histogram.
    #[allow(clippy::too_many_arguments)]
    pub fn series_from_histogram(
        metric: Metric,
        class: &str,
        cpu: u32,
        policy: &str,
        priority: i32,
        period_ns: u64,
        histogram: &LatencyHistogram,
        missed: u64,
        lost: u64,
        max_per_second: Vec<u64>,
        peaks: Vec<Peak>,
    ) -> Result<Series, HistogramError> {
        let summary = histogram.summary();
        Ok(Series {
            metric,
            class: class.to_owned(),
            cpu,
            policy: policy.to_owned(),
            priority,
            period_ns,
            count: summary.count,
            missed,
            lost,
            min_ns: summary.min_ns,
            max_ns: summary.max_ns,
            mean_ns: summary.mean_ns,
            stddev_ns: summary.stddev_ns,
            percentiles: summary.percentiles,
            hdr: histogram.to_base64()?,
            max_per_second,
            peaks,
            tail: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_config::ImportSource;

    fn series(period_ns: u64) -> Series {
        let mut histogram = LatencyHistogram::new();
        for value in [10_000, 20_000, 30_000] {
            histogram.record(value);
        }
        RunRecord::series_from_histogram(
            Metric::Wakeup,
            "rt-high",
            2,
            "SCHED_FIFO",
            90,
            period_ns,
            &histogram,
            0,
            0,
            vec![30_000],
            vec![],
        )
        .unwrap()
    }

    fn record(series: Vec<Series>) -> RunRecord {
        RunRecord::new("id", "2026-01-01T00:00:00Z", 1_000_000_000, series)
    }

    #[test]
    fn the_largest_cause_is_the_one_with_the_most_time() {
        let cause = |name: &str, ns: u64| Cause {
            kind: CauseKind::Task,
            name: name.to_owned(),
            pid: None,
            ns,
            detail: None,
        };
        let mut episode = Episode {
            series: "rt-high/wakeup@0".to_owned(),
            cpu: 0,
            at_ns: 0,
            latency_ns: 100_000,
            causes: vec![],
            steal_ns: None,
            stack: None,
            timeline: vec![],
        };
        assert_eq!(episode.largest_cause(), None);
        episode.causes = vec![cause("a", 10), cause("b", 70), cause("c", 20)];
        assert_eq!(
            episode.largest_cause().map(|cause| cause.name.as_str()),
            Some("b")
        );
    }

    #[test]
    fn a_complete_record_validates() {
        record(vec![series(1_000_000)]).validate().unwrap();
    }

    #[test]
    fn a_record_without_series_is_refused() {
        let error = record(vec![]).validate().unwrap_err();
        assert!(matches!(error, RecordError::NoSeries));
        assert_eq!(error.path(), "series");
    }

    #[test]
    fn a_zero_period_is_refused_unless_imported() {
        let mut zero = record(vec![series(1_000_000), series(0)]);
        let error = zero.validate().unwrap_err();
        assert_eq!(error.path(), "series[1].period_ns");
        assert!(error.to_string().contains("rt-high/wakeup@2"), "{error}");
        zero.config.import = Some(ImportSource {
            format: "cyclictest".into(),
            source: "hist.txt".into(),
            period_ns: 0,
        });
        zero.validate().unwrap();
    }

    #[test]
    fn statistics_that_disagree_with_the_histogram_are_refused() {
        let mut out_of_order = record(vec![series(1_000_000)]);
        out_of_order.series[0].min_ns = 25_000;
        let error = out_of_order.validate().unwrap_err();
        assert_eq!(error.path(), "series[0].percentiles");

        let mut miscounted = record(vec![series(1_000_000)]);
        miscounted.series[0].count = 4;
        let error = miscounted.validate().unwrap_err();
        assert_eq!(error.path(), "series[0].hdr");
        assert!(error.to_string().contains("holds 3 samples"), "{error}");

        let mut unreadable = record(vec![series(1_000_000)]);
        unreadable.series[0].hdr = "not a histogram".into();
        assert_eq!(unreadable.validate().unwrap_err().path(), "series[0].hdr");
    }

    #[test]
    fn an_unknown_schema_is_refused() {
        let mut other = record(vec![series(1_000_000)]);
        other.schema = "rtlab.run/2".into();
        assert_eq!(other.validate().unwrap_err().path(), "schema");
    }
}
