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
    let periodic = match selection.label.split_once('/') {
        Some((class, "wakeup")) => periodic_in_run(record, class),
        _ => Vec::new(),
    };
    let context = StudyContext {
        request,
        model,
        measured_cpus: &selection.cpus,
        horizon_ns: record.duration_ns,
        periodic: &periodic,
        evidence: LatencyEvidence {
            histogram: &selection.histogram,
            tail: tail.as_ref().map(|tail| tail as &dyn TailModel),
            probe: probe.as_ref(),
            chain: request.chain.unwrap_or(1),
            counting: request.counting.unwrap_or_default(),
        },
    };
    let asked = if let Some(name) = &request.class {
        context.one_class(name)?
    } else if let Some(buffer_period) = request.buffer_period {
        context.one_configuration(buffer_period)?
    } else {
        context.every_class()?
    };
    let evidence = LatencyEvidence {
        chain: asked.chain_of_tables,
        counting: asked.counting_of_tables,
        ..context.evidence
    };
    let least_buffering = match &asked.search {
        Some(search) => Some(LeastBuffering {
            target_mttf_s: search.target.mean_interval_s(),
            found: least_buffering(
                evidence,
                search.target,
                &search.periods,
                search.compute,
                64,
                model,
            )
            .map_err(with_field(None))?,
        }),
        None => None,
    };
    let table = match asked.table {
        Some(table) => buffer_table(
            evidence,
            table.buffer_period,
            table.compute,
            table.max_buffers,
            model,
        )
        .map_err(with_field(None))?,
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
        rows: asked.rows,
        least_buffering,
        table,
        passed: asked.passed,
        asked_target: request.target.is_some(),
    })
}

/// What every row of one study shares: the request, the model, the series' evidence and the
/// periodic interferers the run shows.
struct StudyContext<'a> {
    request: &'a ForecastRequest,
    model: Model,
    /// The CPUs the chosen series pooled.
    measured_cpus: &'a [u32],
    /// The run's length, ns: the horizon of the periodic-interference analysis.
    horizon_ns: u64,
    periodic: &'a [PeriodicInterferer],
    /// The request's evidence, before a class overrides its chain or counting.
    evidence: LatencyEvidence<'a>,
}

/// The rows a request asks for, with the buffer table and least-buffering search they call for.
struct RowsAsked {
    rows: Vec<StudyRow>,
    /// False when the one class asked for is not suitable.
    passed: bool,
    table: Option<TableAsked>,
    search: Option<SearchAsked>,
    /// The chain and counting the table and the search use.
    chain_of_tables: u32,
    counting_of_tables: Counting,
}

/// The buffer table to compute: MTTF by number of buffers, 2 to `max_buffers`.
struct TableAsked {
    buffer_period: Nanos,
    compute: Nanos,
    max_buffers: u32,
}

/// The least-buffering search to run: the least buffers reaching `target` at each period.
struct SearchAsked {
    target: Rate,
    periods: Vec<Nanos>,
    compute: Nanos,
}

impl StudyContext<'_> {
    /// The evidence as `class` reads it: its chain and counting unless the request overrides them.
    fn class_evidence(&self, class: &ApplicationClass) -> LatencyEvidence<'_> {
        LatencyEvidence {
            chain: self.request.chain.unwrap_or(class.chain),
            counting: self.request.counting.unwrap_or(class.counting),
            ..self.evidence
        }
    }

    /// The buffer configuration of `class`, with the request's compute time when it gives one.
    fn class_config(&self, class: &ApplicationClass) -> BufferConfig {
        let mut config = BufferConfig::of_class(class);
        if let Some(compute) = self.request.compute {
            config.compute = compute;
        }
        config
    }

    /// The periodic-interference answer for one configuration, when the run shows an interferer.
    fn periodic_of(
        &self,
        evidence: LatencyEvidence<'_>,
        config: BufferConfig,
        clock: AppClock,
    ) -> Option<PeriodicAnswer> {
        let interferer = self.periodic.first()?;
        let context = PeriodicContext {
            interferer,
            measured: self.measured_cpus,
            clock,
            horizon_ns: self.horizon_ns,
        };
        Some(periodic_answer(&context, evidence, config, self.model))
    }

    /// One class's row: its forecast, adjusted beside a periodic interferer, and its verdict.
    fn class_row(
        &self,
        class: &ApplicationClass,
        evidence: LatencyEvidence<'_>,
        config: BufferConfig,
    ) -> Result<StudyRow, StudyError> {
        let mut row = forecast(evidence, config, self.model).map_err(with_field(None))?;
        let answer = self.periodic_of(evidence, config, self.request.clock.unwrap_or(class.clock));
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
    }

    /// The class named `name` alone: its row decides whether the study passed, and the table and
    /// search are for its configuration.
    fn one_class(&self, name: &str) -> Result<RowsAsked, StudyError> {
        let request = self.request;
        let class = request
            .classes
            .iter()
            .find(|class| class.name == name)
            .ok_or_else(|| StudyError::UnknownClass {
                name: name.to_owned(),
                known: request
                    .classes
                    .iter()
                    .map(|class| class.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let config = self.class_config(class);
        let evidence = self.class_evidence(class);
        let row = self.class_row(class, evidence, config)?;
        let passed =
            row.verdict.as_ref().map(|verdict| verdict.kind) != Some(VerdictKind::NotSuitable);
        Ok(RowsAsked {
            rows: vec![row],
            passed,
            table: Some(TableAsked {
                buffer_period: config.buffer_period,
                compute: config.compute,
                max_buffers: config.buffers.max(2) + 4,
            }),
            search: Some(SearchAsked {
                target: request.target.unwrap_or(class.acceptable),
                periods: vec![config.buffer_period],
                compute: config.compute,
            }),
            chain_of_tables: evidence.chain,
            counting_of_tables: evidence.counting,
        })
    }

    /// One buffer configuration, `buffers × buffer_period`, with no class and so no verdict.
    fn one_configuration(&self, buffer_period: Nanos) -> Result<RowsAsked, StudyError> {
        let request = self.request;
        let compute = request.compute.unwrap_or(Nanos::ZERO);
        let buffers = request.buffers.unwrap_or(2);
        if buffer_period.0 == 0 {
            return Err(StudyError::ZeroBufferPeriod);
        }
        let config = BufferConfig {
            buffers,
            buffer_period,
            compute,
        };
        let mut row = forecast(self.evidence, config, self.model)
            .map_err(with_field(Some(RequestField::Buffers)))?;
        let answer = self.periodic_of(self.evidence, config, request.clock.unwrap_or_default());
        if let Some(answer) = &answer {
            apply(&mut row, answer);
        }
        let (alignment, refused) = split(answer);
        Ok(RowsAsked {
            rows: vec![StudyRow {
                class: None,
                forecast: row,
                verdict: None,
                alignment,
                refused,
            }],
            passed: true,
            table: Some(TableAsked {
                buffer_period,
                compute,
                max_buffers: (buffers + 4).max(8),
            }),
            search: request.target.map(|target| SearchAsked {
                target,
                periods: vec![buffer_period],
                compute,
            }),
            chain_of_tables: self.evidence.chain,
            counting_of_tables: self.evidence.counting,
        })
    }

    /// Every known class, one row each; no table, and a search over the default periods.
    fn every_class(&self) -> Result<RowsAsked, StudyError> {
        let request = self.request;
        let mut rows = Vec::new();
        for class in &request.classes {
            rows.push(self.class_row(
                class,
                self.class_evidence(class),
                self.class_config(class),
            )?);
        }
        Ok(RowsAsked {
            rows,
            passed: true,
            table: None,
            search: request.target.map(|target| SearchAsked {
                target,
                periods: default_periods(),
                compute: request.compute.unwrap_or(Nanos::ZERO),
            }),
            chain_of_tables: self.evidence.chain,
            counting_of_tables: self.evidence.counting,
        })
    }
}
