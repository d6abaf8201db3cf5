//! A whole forecast of one run (what `rtlab forecast` shows): the series chosen, its tail
//! projection, one row per application class (with its verdict) or for one buffer configuration,
//! the buffer table over `n`, and the least buffering reaching a target. Pure: a function of the
//! record and the request.

use crate::application::AppClock;
use crate::classes::{ApplicationClass, Rate};
use crate::forecast::{
    buffer_table, default_periods, describe_seconds, forecast, least_buffering, probe_evidence,
    select_series, verdict, BufferConfig, Counting, Forecast, ForecastError, LatencyEvidence,
    Model, SelectionError, TailModel, Verdict, VerdictKind, CONFIDENCE,
};
use crate::forecast_periodic::{
    apply, describe_answer, periodic_answer, Alignment, PeriodicAnswer, PeriodicContext, Refusal,
};
use crate::interference::{describe, periodic_in_run, PeriodicInterferer};
use crate::projection::ProjectedTail;
use rtlab_core::{Nanos, RunRecord};
use serde::Serialize;

/// What to forecast.
#[derive(Clone, Debug)]
pub struct ForecastRequest {
    /// `CLASS/METRIC` (default: rt-high/wakeup pooled over CPUs).
    pub series: Option<String>,
    pub model: Model,
    /// The classes known (built-in ones plus a classes file's).
    pub classes: Vec<ApplicationClass>,
    /// One class only (its verdict decides [`ForecastStudy::passed`]).
    pub class: Option<String>,
    /// One buffer configuration `buffers × buffer_period` instead of classes.
    pub buffer_period: Option<Nanos>,
    pub buffers: Option<u32>,
    /// Compute time per buffer (overrides the classes').
    pub compute: Option<Nanos>,
    /// Find the least buffering reaching this rate.
    pub target: Option<Rate>,
    /// Threads in the wake-up chain (overrides the classes'; 1 for `buffers × buffer_period`
    /// when not given). Only the response model reads it.
    pub chain: Option<u32>,
    /// How the application counts a stall's failures (overrides the classes'; restart for
    /// `buffers × buffer_period` when not given). Only the response model reads it.
    pub counting: Option<Counting>,
    /// Whether the application's clock stops with the CPUs (overrides the classes'; a device's
    /// when not given). Only the periodic-interference analysis reads it.
    pub clock: Option<AppClock>,
}

/// Which part of a [`ForecastRequest`] an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestField {
    Series,
    Class,
    BufferPeriod,
    Buffers,
}

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error("no class '{name}' (known: {known})")]
    UnknownClass { name: String, known: String },
    #[error("must be more than 0")]
    ZeroBufferPeriod,
    #[error("{error}")]
    Forecast {
        field: Option<RequestField>,
        error: ForecastError,
    },
}

impl StudyError {
    /// The request field the error is about, when one is.
    pub fn field(&self) -> Option<RequestField> {
        match self {
            StudyError::Selection(_) => Some(RequestField::Series),
            StudyError::UnknownClass { .. } => Some(RequestField::Class),
            StudyError::ZeroBufferPeriod => Some(RequestField::BufferPeriod),
            StudyError::Forecast { field, .. } => *field,
        }
    }
}

/// One row: a class with its verdict, or one buffer configuration.
#[derive(Clone, Debug, Serialize)]
pub struct StudyRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(flatten)]
    pub forecast: Forecast,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Beside a steady periodic interferer: the range over alignments (issue 35).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<Alignment>,
    /// Beside a periodic interferer the analysis cannot handle: which assumption fails (the
    /// row then has no MTTF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
}

/// A periodic interferer the run shows, with its sentence.
#[derive(Clone, Debug, Serialize)]
pub struct FoundInterferer {
    #[serde(flatten)]
    pub interferer: PeriodicInterferer,
    /// "qhog7 (SCHED_FIFO 95) runs 2.6 ms every 70.0 ms on both CPUs (steady …)".
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct LeastBuffering {
    pub target_mttf_s: f64,
    pub found: Option<Forecast>,
}

/// The forecast of one run.
#[derive(Clone, Debug, Serialize)]
pub struct ForecastStudy {
    pub run_id: String,
    pub series: String,
    pub cpus: Vec<u32>,
    pub samples: u64,
    pub observed_max_ns: u64,
    pub missed_restored: u64,
    pub missed_unknown: u64,
    pub model: Model,
    pub model_description: &'static str,
    pub tail_projection: Option<String>,
    pub tail_refused: Option<String>,
    pub confidence: f64,
    /// Periodic interferers found in the run's stalls, the most bursts first; the rows are
    /// analysed against the first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub periodic: Vec<FoundInterferer>,
    pub rows: Vec<StudyRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub least_buffering: Option<LeastBuffering>,
    /// MTTF by number of buffers for the configuration asked (empty when classes were listed).
    #[serde(skip)]
    pub table: Vec<Forecast>,
    /// False when the one class asked for is not suitable.
    #[serde(skip)]
    pub passed: bool,
    /// Whether a target was asked for (not taken from the class).
    #[serde(skip)]
    pub asked_target: bool,
}

fn split(answer: Option<PeriodicAnswer>) -> (Option<Alignment>, Option<Refusal>) {
    match answer {
        Some(PeriodicAnswer::Alignment(alignment)) => (Some(alignment), None),
        Some(PeriodicAnswer::Refused(refusal)) => (None, Some(refusal)),
        None => (None, None),
    }
}

/// A class's verdict beside a periodic interferer: suitable when even the worst alignment
/// meets what the class needs, not when even the best misses it, else it depends on the
/// alignment; refused, it cannot tell and says why.
fn periodic_verdict(
    class: &ApplicationClass,
    row: &Forecast,
    answer: &PeriodicAnswer,
    counting: Counting,
) -> Verdict {
    let needed = class.acceptable.mean_interval_s();
    let meets = |mttf: Option<f64>| mttf.is_none_or(|mttf| mttf >= needed);
    let kind = match answer {
        PeriodicAnswer::Refused(_) => VerdictKind::Undetermined,
        PeriodicAnswer::Alignment(_) if meets(row.mttf_ci_s[0]) => VerdictKind::Suitable,
        PeriodicAnswer::Alignment(_) if !meets(row.mttf_ci_s[1]) => VerdictKind::NotSuitable,
        PeriodicAnswer::Alignment(_) => VerdictKind::Undetermined,
    };
    let head = match kind {
        VerdictKind::Suitable => "suitable for",
        VerdictKind::NotSuitable => "NOT suitable for",
        VerdictKind::Undetermined => "cannot tell for",
    };
    Verdict {
        kind,
        text: format!(
            "{head} {} ({}): {} (acceptable: one per {})",
            class.description,
            class.assumption(),
            describe_answer(answer, "glitch", counting),
            describe_seconds(needed)
        ),
    }
}

fn with_field(field: Option<RequestField>) -> impl Fn(ForecastError) -> StudyError {
    move |error| StudyError::Forecast { field, error }
}

/// Forecasts `request` from `record`.
pub fn study(record: &RunRecord, request: &ForecastRequest) -> Result<ForecastStudy, StudyError> {
    let selection = select_series(record, request.series.as_deref())?;
    let model = request.model;
    let (tail, tail_refused) = match ProjectedTail::fit(&selection.histogram) {
        Ok(tail) => (Some(tail), None),
        Err(reason) => (None, Some(reason)),
    };
    let probe = match selection.label.split_once('/') {
        Some((class, "wakeup")) => probe_evidence(record, class),
        _ => None,
    };
    // Without the probe's own series (an imported record, a series other than a wake-up one)
    // the response model has nothing to count stalls from: the per-period model it is.
    let model = match (model, &probe) {
        (Model::Response, None) => Model::PerPeriod,
        (model, _) => model,
    };
    let evidence = LatencyEvidence {
        histogram: &selection.histogram,
        tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
        probe: probe.as_ref(),
        chain: request.chain.unwrap_or(1),
        counting: request.counting.unwrap_or_default(),
    };
    let class_evidence = |class: &ApplicationClass| LatencyEvidence {
        chain: request.chain.unwrap_or(class.chain),
        counting: request.counting.unwrap_or(class.counting),
        ..evidence
    };
    let periodic = match selection.label.split_once('/') {
        Some((class, "wakeup")) => periodic_in_run(record, class),
        _ => Vec::new(),
    };
    let periodic_of = |evidence: LatencyEvidence<'_>, config: BufferConfig, clock| {
        let interferer = periodic.first()?;
        let context = PeriodicContext {
            interferer,
            measured: &selection.cpus,
            clock,
            horizon_ns: record.duration_ns,
        };
        Some(periodic_answer(&context, evidence, config, model))
    };
    let class_row = |class: &ApplicationClass,
                     evidence: LatencyEvidence<'_>,
                     config: BufferConfig|
     -> Result<StudyRow, StudyError> {
        let mut row = forecast(evidence, config, model).map_err(with_field(None))?;
        let answer = periodic_of(evidence, config, request.clock.unwrap_or(class.clock));
        let class_verdict = match &answer {
            Some(answer) => {
                apply(&mut row, answer);
                periodic_verdict(class, &row, answer, evidence.counting)
            }
            None => verdict(class, &row),
        };
        let (alignment, refused) = split(answer);
        Ok(StudyRow {
            class: Some(class.name.clone()),
            forecast: row,
            verdict: Some(class_verdict),
            alignment,
            refused,
        })
    };
    let compute = request.compute.unwrap_or(Nanos::ZERO);
    let mut rows = Vec::new();
    let mut passed = true;
    let mut table: Option<(Nanos, Nanos, u32)> = None;
    let mut search: Option<(Rate, Vec<Nanos>, Nanos)> = None;
    let mut chain_of_tables = evidence.chain;
    let mut counting_of_tables = evidence.counting;
    let class_config = |class: &ApplicationClass| {
        let mut config = BufferConfig::of_class(class);
        if let Some(compute) = request.compute {
            config.compute = compute;
        }
        config
    };
    if let Some(name) = &request.class {
        let class = request
            .classes
            .iter()
            .find(|class| &class.name == name)
            .ok_or_else(|| StudyError::UnknownClass {
                name: name.clone(),
                known: request
                    .classes
                    .iter()
                    .map(|class| class.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let config = class_config(class);
        let evidence = class_evidence(class);
        let row = class_row(class, evidence, config)?;
        passed = row.verdict.as_ref().map(|verdict| verdict.kind) != Some(VerdictKind::NotSuitable);
        rows.push(row);
        table = Some((
            config.buffer_period,
            config.compute,
            config.buffers.max(2) + 4,
        ));
        search = Some((
            request.target.unwrap_or(class.acceptable),
            vec![config.buffer_period],
            config.compute,
        ));
        chain_of_tables = evidence.chain;
        counting_of_tables = evidence.counting;
    } else if let Some(buffer_period) = request.buffer_period {
        let buffers = request.buffers.unwrap_or(2);
        if buffer_period.0 == 0 {
            return Err(StudyError::ZeroBufferPeriod);
        }
        let config = BufferConfig {
            buffers,
            buffer_period,
            compute,
        };
        let mut row =
            forecast(evidence, config, model).map_err(with_field(Some(RequestField::Buffers)))?;
        let answer = periodic_of(evidence, config, request.clock.unwrap_or_default());
        if let Some(answer) = &answer {
            apply(&mut row, answer);
        }
        let (alignment, refused) = split(answer);
        rows.push(StudyRow {
            class: None,
            forecast: row,
            verdict: None,
            alignment,
            refused,
        });
        table = Some((buffer_period, compute, (buffers + 4).max(8)));
        if let Some(target) = request.target {
            search = Some((target, vec![buffer_period], compute));
        }
    } else {
        for class in &request.classes {
            rows.push(class_row(
                class,
                class_evidence(class),
                class_config(class),
            )?);
        }
        if let Some(target) = request.target {
            search = Some((target, default_periods(), compute));
        }
    }
    let evidence = LatencyEvidence {
        chain: chain_of_tables,
        counting: counting_of_tables,
        ..evidence
    };
    let least_buffering = match &search {
        Some((target, periods, compute)) => Some(LeastBuffering {
            target_mttf_s: target.mean_interval_s(),
            found: least_buffering(evidence, *target, periods, *compute, 64, model)
                .map_err(with_field(None))?,
        }),
        None => None,
    };
    let table = match table {
        Some((period, compute, max_buffers)) => {
            buffer_table(evidence, period, compute, max_buffers, model).map_err(with_field(None))?
        }
        None => Vec::new(),
    };
    Ok(ForecastStudy {
        run_id: record.id.clone(),
        series: selection.label.clone(),
        cpus: selection.cpus.clone(),
        samples: selection.histogram.count(),
        observed_max_ns: selection.histogram.max(),
        missed_restored: selection.missed_restored,
        missed_unknown: selection.missed_unknown,
        model,
        model_description: model.describe(),
        tail_projection: tail.as_ref().map(|tail| tail.describe()),
        tail_refused,
        confidence: CONFIDENCE,
        periodic: periodic
            .iter()
            .map(|interferer| FoundInterferer {
                text: describe(interferer, &selection.cpus),
                interferer: interferer.clone(),
            })
            .collect(),
        rows,
        least_buffering,
        table,
        passed,
        asked_target: request.target.is_some(),
    })
}
