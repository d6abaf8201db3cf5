//! Table 3-2's experiments one after another as a library call (`rtlab study media-player`):
//! the selection checked, each experiment run on the study's CPU until `stop`, its WAV file
//! written when asked, and the lines that say how each reserved thread was granted.

use crate::study::{
    run_experiment, study_cpu, Experiment, ExperimentOutcome, StudyError, EXPERIMENTS,
};
use rtlab_core::Nanos;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Which experiments, for how long each, and where their WAV files go.
#[derive(Clone, Debug)]
pub struct StudyRequest {
    /// Experiment numbers (1-9); empty: all of them.
    pub experiments: Vec<u32>,
    pub duration: Nanos,
    /// Write `experiment-N.wav` into this directory (created if missing).
    pub wav_dir: Option<PathBuf>,
    /// Trace each experiment and name the cause of each glitch (`--explain`).
    pub explain: bool,
}

/// Why the study stopped.
#[derive(Debug, thiserror::Error)]
pub enum StudyRunError {
    /// A number that is not an experiment of Table 3-2 (setting `experiments`).
    #[error("{0} is not an experiment of Table 3-2 (1-9)")]
    NoSuchExperiment(u32),
    #[error("creating {}: {source}", path.display())]
    WavDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Study(#[from] StudyError),
    #[error("writing {path}: {source}")]
    Wav {
        path: String,
        #[source]
        source: crate::wav::WavError,
    },
}

impl StudyRunError {
    /// True when the request was at fault, not the system.
    pub fn is_input(&self) -> bool {
        match self {
            StudyRunError::NoSuchExperiment(_) | StudyRunError::WavDir { .. } => true,
            StudyRunError::Study(StudyError::Run { source, .. }) => source.is_input(),
            _ => false,
        }
    }

    /// The setting an input error is about.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            StudyRunError::NoSuchExperiment(_) => Some("experiments"),
            StudyRunError::WavDir { .. } => Some("wav_dir"),
            _ => None,
        }
    }
}

/// The experiments of `request`, checked before anything runs.
pub fn select(request: &StudyRequest) -> Result<Vec<&'static Experiment>, StudyRunError> {
    if let Some(bad) = request
        .experiments
        .iter()
        .find(|number| !(1..=9).contains(*number))
    {
        return Err(StudyRunError::NoSuchExperiment(*bad));
    }
    Ok(EXPERIMENTS
        .iter()
        .filter(|experiment| {
            request.experiments.is_empty() || request.experiments.contains(&experiment.number)
        })
        .collect())
}

/// The study as it ran.
#[derive(Debug)]
pub struct StudyRun {
    pub cpu: usize,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub outcomes: Vec<ExperimentOutcome>,
    pub interrupted: bool,
}

/// Runs the selected experiments in turn (until `stop`), telling `progress` when each starts
/// (`None`) and ends (`Some`).
pub fn run_study(
    request: &StudyRequest,
    stop: &Arc<AtomicBool>,
    progress: &mut dyn FnMut(&Experiment, usize, Option<&ExperimentOutcome>),
) -> Result<StudyRun, StudyRunError> {
    let selection = select(request)?;
    if let Some(path) = &request.wav_dir {
        std::fs::create_dir_all(path).map_err(|source| StudyRunError::WavDir {
            path: path.clone(),
            source,
        })?;
    }
    let cpu = study_cpu()?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut outcomes = Vec::new();
    for experiment in selection {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        progress(experiment, cpu, None);
        let mut outcome = run_experiment(experiment, request.duration, cpu, request.explain, stop)?;
        progress(experiment, cpu, Some(&outcome));
        if let Some(directory) = &request.wav_dir {
            let path = directory.join(format!("experiment-{}.wav", experiment.number));
            let name = path.display().to_string();
            crate::wav::write_play_log(&path, 10_000_000, &outcome.play_log).map_err(|source| {
                StudyRunError::Wav {
                    path: name.clone(),
                    source,
                }
            })?;
            outcome.wav = Some(name);
        }
        outcomes.push(outcome);
    }
    Ok(StudyRun {
        cpu,
        started_at,
        outcomes,
        interrupted: stop.load(Ordering::Relaxed),
    })
}

impl StudyRun {
    /// The table beside the paper's column, the notes on where Linux differs and the threads
    /// granted reservations, as `rtlab study media-player` prints them.
    pub fn report(&self, duration: Nanos) -> String {
        let mut text = crate::study::render_table(&self.outcomes, duration);
        text.push_str(&crate::study::render_notes(&self.outcomes));
        text.push_str(&render_granted(&self.outcomes));
        text
    }

    /// Each experiment's number and its explained underruns (none for an experiment without).
    pub fn glitches(&self) -> Vec<(u32, Vec<rtlab_core::ExplainedEvent>)> {
        self.outcomes
            .iter()
            .map(|outcome| {
                let glitches = crate::explain::underruns_only(&outcome.explained);
                (outcome.experiment, glitches)
            })
            .collect()
    }

    /// `--json`'s document (`rtlab.study-media-player/1`): the header with this machine and the
    /// study's start, each experiment's outcome; pretty-printed with a final newline.
    pub fn to_json(&self, duration: Nanos) -> serde_json::Result<String> {
        let document = crate::study::StudyJson {
            header: rtlab_core::OutputHeader {
                started_at: self.started_at.clone(),
                ..rtlab_core::OutputHeader::now(
                    "rtlab.study-media-player/1",
                    Some(rtlab_sys::host::describe(None)),
                )
            },
            duration_ns: duration.0,
            cpu: self.cpu,
            experiments: &self.outcomes,
        };
        Ok(serde_json::to_string_pretty(&document)? + "\n")
    }
}

/// `granted in N: …`, one line per reserved thread.
pub fn render_granted(outcomes: &[ExperimentOutcome]) -> String {
    outcomes
        .iter()
        .flat_map(|outcome| {
            outcome
                .granted
                .iter()
                .map(move |granted| format!("granted in {}: {granted}\n", outcome.experiment))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_outside_table_3_2_is_refused_before_anything_runs() {
        let request = |experiments: Vec<u32>| StudyRequest {
            experiments,
            duration: Nanos::from_secs(1),
            wav_dir: None,
            explain: false,
        };
        assert_eq!(select(&request(Vec::new())).unwrap().len(), 9);
        let two: Vec<u32> = select(&request(vec![3, 1]))
            .unwrap()
            .iter()
            .map(|experiment| experiment.number)
            .collect();
        assert_eq!(two, vec![1, 3]);
        let error = select(&request(vec![10])).unwrap_err();
        assert!(error.is_input() && error.setting() == Some("experiments"));
        assert_eq!(
            error.to_string(),
            "10 is not an experiment of Table 3-2 (1-9)"
        );
    }
}
