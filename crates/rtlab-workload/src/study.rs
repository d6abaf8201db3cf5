//! Paper 003's media-player study (Table 3-2) on Linux: the player of `examples/media-player.toml`
//! against a competitor spinning at the Linux equivalent of each experiment's priority, with the
//! experiment's reservations, counting sound-card underruns (the audible glitches) and mixer
//! starvations, beside the paper's column.
//!
//! Equivalents (the model's own comment says why): Windows 8 → SCHED_OTHER (`other:0`), 9 (the
//! decoder's) → SCHED_RR 9 (`rr:9`), 10 → SCHED_FIFO 10 (`fifo:10`); reservations are rtlab
//! reservations (SCHED_DEADLINE by default on this kernel). The whole player and the competitor
//! share one CPU, as on the paper's uniprocessor.

use crate::model::{Reservation, Workload};
use crate::runner::{run, RunError, RunResult, RunSettings};
use rtlab_core::Nanos;
use rtlab_sys::sched::Policy;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The model the study runs (the same file as `examples/media-player.toml`).
pub const MEDIA_PLAYER_TOML: &str = include_str!("../../../examples/media-player.toml");

/// One row of Table 3-2.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    pub number: u32,
    /// The paper's Windows priority of the competitor (None: no competitor).
    pub windows_priority: Option<u32>,
    /// Decoder and mixer reservations, (amount ms, period ms).
    pub decoder: Option<(u64, u64)>,
    pub mixer: Option<(u64, u64)>,
    /// 003's "audible glitches" and "kernel mixer starvations detected".
    pub paper_glitches: &'static str,
    pub paper_starvations: &'static str,
}

/// Table 3-2's nine experiments.
pub const EXPERIMENTS: [Experiment; 9] = [
    Experiment {
        number: 1,
        windows_priority: None,
        decoder: None,
        mixer: None,
        paper_glitches: "0",
        paper_starvations: "0",
    },
    Experiment {
        number: 2,
        windows_priority: Some(8),
        decoder: None,
        mixer: None,
        paper_glitches: "0",
        paper_starvations: "0",
    },
    Experiment {
        number: 3,
        windows_priority: Some(10),
        decoder: None,
        mixer: None,
        paper_glitches: "many",
        paper_starvations: "many",
    },
    Experiment {
        number: 4,
        windows_priority: Some(9),
        decoder: None,
        mixer: None,
        paper_glitches: "4",
        paper_starvations: "many",
    },
    Experiment {
        number: 5,
        windows_priority: Some(10),
        decoder: Some((40, 1024)),
        mixer: None,
        paper_glitches: "4",
        paper_starvations: "many",
    },
    Experiment {
        number: 6,
        windows_priority: Some(10),
        decoder: Some((40, 1024)),
        mixer: Some((1, 16)),
        paper_glitches: "0",
        paper_starvations: "0",
    },
    Experiment {
        number: 7,
        windows_priority: Some(10),
        decoder: Some((20, 512)),
        mixer: None,
        paper_glitches: "0",
        paper_starvations: "0",
    },
    Experiment {
        number: 8,
        windows_priority: Some(10),
        decoder: Some((1, 16)),
        mixer: None,
        paper_glitches: "0",
        paper_starvations: "0",
    },
    Experiment {
        number: 9,
        windows_priority: Some(9),
        decoder: Some((1, 16)),
        mixer: None,
        paper_glitches: "1",
        paper_starvations: "0",
    },
];

/// The Linux competitor for a Windows priority, on `cpu`.
pub fn competitor_for(windows_priority: u32, cpu: usize) -> String {
    match windows_priority {
        0..=8 => format!("other:0@{cpu}"),
        9 => format!("rr:9@{cpu}"),
        priority => format!("fifo:{priority}@{cpu}"),
    }
}

/// What one experiment gave.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentOutcome {
    pub experiment: u32,
    /// The Linux competitor (`fifo:10@1`), or null.
    pub competitor: Option<String>,
    /// `decoder 40ms/1024ms, mixer 1ms/16ms`, or empty.
    pub reservations: Vec<String>,
    pub underruns: u64,
    pub starvations: u64,
    pub worst_mixer_lateness_ns: u64,
    /// When the first underruns happened, s since the start (at most 12).
    pub underrun_times_s: Vec<f64>,
    pub decoder_activations: u64,
    pub mixer_activations: u64,
    /// How each reserved thread was granted.
    pub granted: Vec<String>,
    pub paper_glitches: String,
    pub paper_starvations: String,
    /// The WAV file's path, when written.
    pub wav: Option<String>,
    /// With `--explain`: each glitch (the first ones) with its cause.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explained: Vec<rtlab_core::ExplainedEvent>,
    /// With `--explain`: how many glitches the hypervisor caused and how many anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glitch_causes: Option<GlitchAttribution>,
    #[serde(skip)]
    pub play_log: Vec<bool>,
    #[serde(skip)]
    pub record: Option<rtlab_core::RunRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("the media-player model: {0}")]
    Model(#[from] crate::toml_file::FileError),
    #[error("experiment {experiment}: {source}")]
    Run {
        experiment: u32,
        #[source]
        source: RunError,
    },
    #[error("experiment {experiment}: {source}")]
    Record {
        experiment: u32,
        #[source]
        source: crate::record::RecordBuildError,
    },
    #[error("reading the online CPUs: {0}")]
    Cpus(#[source] std::io::Error),
}

/// The model with the whole player on `cpu` and the experiment's reservations.
pub fn model_for(experiment: &Experiment, cpu: usize) -> Result<Workload, StudyError> {
    let mut workload = crate::toml_file::parse_workload_toml(MEDIA_PLAYER_TOML, "media-player")?;
    for thread in &mut workload.threads {
        thread.cpus = vec![cpu];
        let reservation = match thread.name.as_str() {
            "decoder" => experiment.decoder,
            "mixer" => experiment.mixer,
            _ => None,
        };
        if let Some((amount, period)) = reservation {
            thread.policy = Policy::Other { nice: 0 };
            thread.reserve = Some(Reservation {
                amount: Nanos::from_millis(amount),
                period: Nanos::from_millis(period),
                backend: None,
            });
        }
    }
    Ok(workload)
}

/// Runs one experiment for `duration` on `cpu`.
pub fn run_experiment(
    experiment: &Experiment,
    duration: Nanos,
    cpu: usize,
    explain: bool,
    stop: &Arc<AtomicBool>,
) -> Result<ExperimentOutcome, StudyError> {
    let workload = model_for(experiment, cpu)?;
    let competitor = experiment
        .windows_priority
        .map(|priority| competitor_for(priority, cpu));
    let settings = RunSettings {
        duration,
        competitors: competitor.iter().cloned().collect(),
        load: None,
        force: false,
        keep_play_log: true,
        explain,
    };
    let result: RunResult = run(&workload, &settings, stop).map_err(|source| StudyError::Run {
        experiment: experiment.number,
        source,
    })?;
    let record = crate::record::build(
        &workload,
        &result,
        &crate::record::Source {
            path: "examples/media-player.toml".into(),
            format: "toml".into(),
            cmdline: std::env::args().collect(),
        },
    )
    .map_err(|source| StudyError::Record {
        experiment: experiment.number,
        source,
    })?;
    let thread = |name: &str| result.threads.iter().find(|thread| thread.name == name);
    let mixer = thread("mixer");
    let decoder = thread("decoder");
    let mut reservations = Vec::new();
    if let Some((amount, period)) = experiment.decoder {
        reservations.push(format!("decoder {amount}ms/{period}ms"));
    }
    if let Some((amount, period)) = experiment.mixer {
        reservations.push(format!("mixer {amount}ms/{period}ms"));
    }
    let granted = result
        .threads
        .iter()
        .filter(|thread| thread.scheduling.starts_with("reserve"))
        .map(|thread| format!("{}: {}", thread.name, thread.scheduling))
        .collect();
    let device = result.devices.first();
    Ok(ExperimentOutcome {
        experiment: experiment.number,
        competitor,
        reservations,
        underruns: device.map_or(0, |device| device.underruns),
        starvations: mixer.map_or(0, |mixer| mixer.starvations),
        worst_mixer_lateness_ns: mixer.map_or(0, |mixer| mixer.wakeup.max()),
        underrun_times_s: device.map_or_else(Vec::new, |device| {
            device
                .underrun_events
                .iter()
                .take(12)
                .map(|event| (event.at_ns as f64 / 1e7).round() / 100.0)
                .collect()
        }),
        decoder_activations: decoder.map_or(0, |decoder| decoder.activations),
        mixer_activations: mixer.map_or(0, |mixer| mixer.activations),
        granted,
        paper_glitches: experiment.paper_glitches.to_owned(),
        paper_starvations: experiment.paper_starvations.to_owned(),
        wav: None,
        explained: result.explained.clone(),
        glitch_causes: explain.then(|| {
            attribute_glitches(
                &result.explained,
                device.map_or(0, |device| device.underruns),
            )
        }),
        play_log: device.map_or_else(Vec::new, |device| device.play_log.clone()),
        record: Some(record),
    })
}

/// Who caused an experiment's glitches, from `--explain`: the hypervisor (its CPU silent while
/// busy: time taken from every thread) or anything else (a competitor, a thread of the player,
/// the device thread's own scheduling).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GlitchAttribution {
    /// Glitches whose main cause was time that vanished from the machine.
    pub hypervisor: u64,
    /// The longest vanished stretch in each of those glitches' windows, ms.
    pub hypervisor_stalls_ms: Vec<f64>,
    /// Every other explained glitch.
    pub workload: u64,
    /// Glitches beyond the explained ones (none unless more than `EXPLAINED_KEPT`).
    pub unexplained: u64,
}

/// Sorts the explained underruns of `explained` by cause; `underruns` is the device's count.
pub fn attribute_glitches(
    explained: &[rtlab_core::ExplainedEvent],
    underruns: u64,
) -> GlitchAttribution {
    let mut attribution = GlitchAttribution::default();
    let mut seen = 0;
    for event in explained.iter().filter(|event| event.kind == "underrun") {
        seen += 1;
        if event.cause_kind == rtlab_core::LatenessKind::Vanished {
            attribution.hypervisor += 1;
            let stall = event
                .accounts
                .iter()
                .flat_map(|account| account.parts.iter())
                .filter(|part| part.kind == rtlab_core::LatenessKind::Vanished)
                .map(|part| part.ns)
                .max()
                .unwrap_or(0);
            attribution
                .hypervisor_stalls_ms
                .push((stall as f64 / 1e5).round() / 10.0);
        } else {
            attribution.workload += 1;
        }
    }
    attribution.unexplained = underruns.saturating_sub(seen);
    attribution
}

/// The CPU the study puts the player on: the last online CPU (CPU 0 takes most housekeeping).
pub fn study_cpu() -> Result<usize, StudyError> {
    let online = rtlab_sys::cpu::online_cpus().map_err(StudyError::Cpus)?;
    Ok(online.last().copied().unwrap_or(0))
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// Table 3-2 with this machine's column beside the paper's.
pub fn render_table(outcomes: &[ExperimentOutcome], duration: Nanos) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Table 3-2 on Linux: {} per experiment; glitches = sound-card underruns (10 ms each){}",
        duration,
        if outcomes
            .iter()
            .any(|outcome| outcome.glitch_causes.is_some())
        {
            ", hv = of them caused by the hypervisor (--explain)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "{:>3}  {:<10} {:<36} {:>11} {:>8} {:>9}  {:>8} {:>8}",
        "exp",
        "competitor",
        "reservations",
        "glitches",
        "starved",
        "worst ms",
        "003 glit",
        "003 starv"
    );
    for outcome in outcomes {
        let experiment = EXPERIMENTS
            .iter()
            .find(|experiment| experiment.number == outcome.experiment);
        let competitor = match (
            experiment.and_then(|e| e.windows_priority),
            &outcome.competitor,
        ) {
            (Some(windows), Some(linux)) => {
                format!("{windows}→{}", linux.split('@').next().unwrap_or(linux))
            }
            _ => "-".to_owned(),
        };
        let reservations = if outcome.reservations.is_empty() {
            "-".to_owned()
        } else {
            outcome.reservations.join(", ")
        };
        // With --explain, how many of the glitches the hypervisor caused ("3 (3 hv)").
        let glitches = match &outcome.glitch_causes {
            Some(causes) if outcome.underruns > 0 => {
                format!("{} ({} hv)", outcome.underruns, causes.hypervisor)
            }
            _ => outcome.underruns.to_string(),
        };
        let _ = writeln!(
            out,
            "{:>3}  {:<10} {:<36} {:>11} {:>8} {:>9}  {:>8} {:>8}",
            outcome.experiment,
            competitor,
            reservations,
            glitches,
            outcome.starvations,
            ms(outcome.worst_mixer_lateness_ns),
            outcome.paper_glitches,
            outcome.paper_starvations
        );
    }
    out
}

/// Where Linux differs from Rialto/NT, said once under the table, with this run's numbers.
pub fn render_notes(outcomes: &[ExperimentOutcome]) -> String {
    let get = |number: u32| outcomes.iter().find(|outcome| outcome.experiment == number);
    let mut notes = Vec::new();
    if let Some(outcome) = get(3) {
        notes.push(format!(
            "3: a SCHED_FIFO 10 spinner outranks the SCHED_RR 9 decoder for good (Linux has no \
             starvation boost like Windows 2000's), so once the 300 ms of decoded audio is played \
             the mixer starves every period: {} glitches",
            outcome.underruns
        ));
    }
    if let Some(outcome) = get(4) {
        notes.push(format!(
            "4: an equal-priority SCHED_RR spinner takes turns with the decoder in 100 ms slices; \
             the decoder's 300 ms of decoded audio outlasts a slice: {} glitches",
            outcome.underruns
        ));
    }
    if let Some(outcome) = get(5) {
        notes.push(format!(
            "5: on Rialto/NT the decoder's 40 ms/1024 ms reservation ran as one 40 ms stretch at \
             priority 30 above the mixer, after it had starved for the rest of the second. On \
             Linux the reservation is SCHED_DEADLINE, which outranks every FIFO thread just the \
             same, but its server runs the decoder on demand, whenever it is woken with budget \
             left, so no backlog builds and each stretch is one activation (~3 ms), far below \
             the mixer's 20 ms of slack; the {} glitches here come at the times listed under RT \
             throttling, below. The danger is real when a \
             deadline thread's own activation is longer than the slack of a FIFO thread on its CPU",
            outcome.underruns
        ));
    }
    let throttled: Vec<String> = outcomes
        .iter()
        .filter(|outcome| {
            outcome.underruns > 0
                && outcome.competitor.is_some()
                && outcome.underruns < 40
                && !outcome.reservations.iter().any(|r| r.starts_with("mixer"))
        })
        .map(|outcome| {
            let times: Vec<String> = outcome
                .underrun_times_s
                .iter()
                .map(|time| format!("{time:.2}"))
                .collect();
            format!("{} at {} s", outcome.experiment, times.join(", "))
        })
        .collect();
    notes.push(format!(
        "RT throttling: Linux keeps 5 % of every second from RT threads that use up a CPU \
         (sched_rt_runtime_us = 950000 of 1 s; since 6.12 the fair server runs SCHED_OTHER \
         threads then, above every RT thread). A spinning FIFO/RR competitor uses the budget up, so \
         the mixer — a FIFO thread too — loses up to 50 ms once a second, more than its 20 ms of \
         slack: glitches about 1 s apart{}. Rialto/NT had no such rule. A reserved mixer (6) is \
         SCHED_DEADLINE, outside RT throttling, and does not glitch: on Linux the right threads \
         to reserve are the decoder and the mixer",
        if throttled.is_empty() {
            String::new()
        } else {
            format!(" ({})", throttled.join("; "))
        }
    ));
    if get(6).is_some() || get(8).is_some() {
        notes.push(
            "6-9: a SCHED_DEADLINE thread must be allowed every CPU (global EDF here), so a \
             reserved decoder or mixer may also run on another CPU; the mapping adds one tick \
             to each budget when HRTICK_DL is off, so 1 ms/16 ms is 5 ms/16 ms to the kernel at \
             HZ=250 (the 'granted' lines)"
                .to_owned(),
        );
    }
    for outcome in outcomes {
        let Some(causes) = &outcome.glitch_causes else {
            continue;
        };
        let stalls = if causes.hypervisor_stalls_ms.is_empty() {
            String::new()
        } else {
            let lengths: Vec<String> = causes
                .hypervisor_stalls_ms
                .iter()
                .map(|ms| format!("{ms:.1}"))
                .collect();
            format!(" (CPU stalls of {} ms)", lengths.join(", "))
        };
        notes.push(format!(
            "{} (--explain): {} glitches caused by the workload, a competitor or the device \
             thread, {} by the hypervisor{stalls}{}",
            outcome.experiment,
            causes.workload,
            causes.hypervisor,
            if causes.unexplained > 0 {
                format!(
                    ", {} not explained (beyond the first ones)",
                    causes.unexplained
                )
            } else {
                String::new()
            }
        ));
    }
    let mut out = String::new();
    for note in notes {
        let _ = writeln!(out, "note {note}");
    }
    out
}

/// The `--json` document: `{"experiments": [...]}` after the common header.
#[derive(Serialize)]
pub struct StudyJson<'a> {
    #[serde(flatten)]
    pub header: rtlab_core::OutputHeader,
    pub duration_ns: u64,
    pub cpu: usize,
    pub experiments: &'a [ExperimentOutcome],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_builds_a_valid_model() {
        for experiment in &EXPERIMENTS {
            let workload = model_for(experiment, 0).unwrap();
            workload.check().unwrap();
            let decoder = &workload.threads[workload.thread_index("decoder").unwrap()];
            assert_eq!(decoder.reserve.is_some(), experiment.decoder.is_some());
        }
        assert_eq!(competitor_for(8, 1), "other:0@1");
        assert_eq!(competitor_for(9, 1), "rr:9@1");
        assert_eq!(competitor_for(10, 1), "fifo:10@1");
    }

    fn underrun(kind: rtlab_core::LatenessKind, vanished_ns: u64) -> rtlab_core::ExplainedEvent {
        rtlab_core::ExplainedEvent {
            kind: "underrun".into(),
            source: "sound-card".into(),
            at_ns: 1_000_000_000,
            window_start_ns: 970_000_000,
            window_ns: 30_000_000,
            accounts: vec![rtlab_core::ThreadAccount {
                thread: "mixer".into(),
                tid: 7,
                parts: vec![rtlab_core::LatenessPart {
                    kind: rtlab_core::LatenessKind::Vanished,
                    name: "vanished".into(),
                    pid: None,
                    ns: vanished_ns,
                    detail: None,
                }],
            }],
            device_late_ns: None,
            steal_ns: None,
            cause: String::new(),
            cause_kind: kind,
        }
    }

    #[test]
    fn glitches_are_split_between_the_hypervisor_and_everything_else() {
        use rtlab_core::LatenessKind;
        let explained = vec![
            underrun(LatenessKind::Vanished, 31_260_000),
            underrun(LatenessKind::Throttled, 0),
            underrun(LatenessKind::Task, 0),
        ];
        let attribution = attribute_glitches(&explained, 5);
        assert_eq!(attribution.hypervisor, 1);
        assert_eq!(attribution.hypervisor_stalls_ms, vec![31.3]);
        assert_eq!(attribution.workload, 2);
        assert_eq!(attribution.unexplained, 2);
        assert_eq!(attribute_glitches(&[], 0), GlitchAttribution::default());
    }
}
