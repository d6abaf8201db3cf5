//! The load of a run: stressors (a profile and/or `KIND[:N|:P%|:N@P%]`), a shell command, and
//! competitor threads.
//!
//! A latency figure without its load means nothing, so the load is part of the run: validated
//! before measuring (a typo fails in the first second, not after an hour), started once warm-up
//! is over, stopped with the run on every exit path (the running pieces stop themselves on drop
//! and at their deadline), and written into the record's `load` field with what each part
//! measurably consumed. The usage model chosen here (profile, the request's own, or 24 h × 7 d)
//! sizes the "day" and "week" of the tail projection that `attach_tails` stores on each series.

use rtlab_analysis::tail::UsageModel;
use rtlab_core::{
    CommandRun, CompetitorEntry, CompetitorRun, Load, LoadProfile, LoadUsage, StressorRun,
};
use rtlab_load::competitor::{self, CompetitorSpec, RunningCompetitors};
use rtlab_load::profile::{find_profile, profile_names, Profile};
use rtlab_load::stress::{self, RunningStress, StressOptions, StressSpec};
use rtlab_sys::load_supervisor::SupervisedLoad;
use rtlab_sys::load_syscalls::{signal_process_group, GroupSignal};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What load to run during measurement (the `--load`, `--load-cmd`, `--competitor`, `--usage` and
/// `--force` of `rtlab run`).
#[derive(Clone, Debug, Default)]
pub struct LoadRequest {
    /// Comma-separated: a profile (office, workstation, gaming, web, build, none) and/or
    /// stressors `KIND[:N | :P% | :N@P%]`.
    pub load: Option<String>,
    /// A shell command run as extra load (own process group, stopped as a group at the end).
    pub load_cmd: Option<String>,
    /// Competitor threads, `POLICY:PRIO[@CPU]` each.
    pub competitor: Vec<String>,
    /// Usage model of the tail projection; default: the profile's, else continuous use.
    pub usage: Option<UsageModel>,
    /// Run RT competitors even when RT throttling is off.
    pub force: bool,
}

/// Which part of a [`LoadRequest`] an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadField {
    Load,
    LoadCmd,
    Competitor,
}

impl LoadField {
    /// The request's field name (`load`, `load_cmd`, `competitor`).
    pub fn name(self) -> &'static str {
        match self {
            LoadField::Load => "load",
            LoadField::LoadCmd => "load_cmd",
            LoadField::Competitor => "competitor",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The request is wrong (an input error).
    #[error("{message}")]
    Invalid { field: LoadField, message: String },
    /// A valid part could not start (a system error).
    #[error("{message}")]
    Start { field: LoadField, message: String },
    #[error("reading the online CPUs: {0}")]
    OnlineCpus(#[source] std::io::Error),
}

impl LoadError {
    /// The request field the error is about.
    pub fn field(&self) -> Option<LoadField> {
        match self {
            LoadError::Invalid { field, .. } | LoadError::Start { field, .. } => Some(*field),
            LoadError::OnlineCpus(_) => None,
        }
    }

    pub fn is_input(&self) -> bool {
        matches!(self, LoadError::Invalid { .. })
    }
}

fn invalid(field: LoadField, message: impl Into<String>) -> LoadError {
    LoadError::Invalid {
        field,
        message: message.into(),
    }
}

/// `usage_source` when the request gave the usage model.
const USAGE_GIVEN: &str = "requested";

/// Everything checked before measuring.
#[derive(Debug)]
pub struct LoadPlan {
    spec: Option<String>,
    profile: Option<&'static Profile>,
    stressors: Vec<StressSpec>,
    command: Option<String>,
    competitors: Vec<CompetitorSpec>,
    usage: UsageModel,
    usage_source: String,
    warnings: Vec<String>,
}

/// Splits `--load` into at most one profile and a list of stressors (a kind at most once).
fn resolve_load(text: &str) -> Result<(Option<&'static Profile>, Vec<StressSpec>), LoadError> {
    let mut profile: Option<&'static Profile> = None;
    let mut stressors: Vec<StressSpec> = Vec::new();
    for part in text.split(',') {
        let name = part.split(':').next().unwrap_or("").trim();
        if let Some(found) = find_profile(name) {
            if part.contains(':') {
                return Err(invalid(
                    LoadField::Load,
                    format!("profile '{name}' takes no intensity ('{}')", part.trim()),
                ));
            }
            if let Some(earlier) = profile {
                return Err(invalid(
                    LoadField::Load,
                    format!(
                        "two profiles ('{}' and '{}'); give one profile and add stressors to it",
                        earlier.name, found.name
                    ),
                ));
            }
            profile = Some(found);
            stressors.extend(found.stressors());
        } else {
            let spec: StressSpec = part.parse().map_err(|error| {
                invalid(
                    LoadField::Load,
                    format!("{error} (profiles: {})", profile_names()),
                )
            })?;
            stressors.push(spec);
        }
    }
    for (index, spec) in stressors.iter().enumerate() {
        if stressors[..index]
            .iter()
            .any(|earlier| earlier.kind == spec.kind)
        {
            return Err(invalid(
                LoadField::Load,
                format!(
                    "stressor '{}' is given twice (a profile's mix counts: see README, section load)",
                    spec.kind
                ),
            ));
        }
    }
    Ok((profile, stressors))
}

/// Checks every part of the request; nothing starts yet.
pub fn validate(args: &LoadRequest) -> Result<LoadPlan, LoadError> {
    let (profile, stressors) = match args.load.as_deref() {
        Some(text) => resolve_load(text)?,
        None => (None, Vec::new()),
    };
    let command = match args.load_cmd.as_deref().map(str::trim) {
        Some("") => return Err(invalid(LoadField::LoadCmd, "the command is empty")),
        Some(text) => Some(text.to_owned()),
        None => None,
    };
    if command.is_some() && !std::path::Path::new("/bin/sh").exists() {
        return Err(invalid(LoadField::LoadCmd, "/bin/sh does not exist"));
    }
    let competitors = args
        .competitor
        .iter()
        .map(|text| {
            text.parse::<CompetitorSpec>()
                .map_err(|error| invalid(LoadField::Competitor, error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let online = rtlab_sys::cpu::online_cpus().map_err(LoadError::OnlineCpus)?;
    for spec in &competitors {
        if let Some(cpu) = spec.cpu {
            if !online.contains(&cpu) {
                return Err(invalid(
                    LoadField::Competitor,
                    format!("{spec}: CPU {cpu} is not online"),
                ));
            }
        }
    }
    let rt_runtime = rtlab_sys::sched::rt_runtime_us().ok();
    let warnings = competitor::check_rt_throttling(rt_runtime, &competitors, args.force)
        .map_err(|error| invalid(LoadField::Competitor, error.to_string()))?;
    let (usage, usage_source) = match (args.usage, profile) {
        (Some(usage), _) => (usage, USAGE_GIVEN.to_owned()),
        (None, Some(profile)) => (
            UsageModel {
                hours_per_day: profile.hours_per_day,
                days_per_week: profile.days_per_week,
            },
            format!("profile {}: {}", profile.name, profile.usage_source),
        ),
        (None, None) => (UsageModel::CONTINUOUS, "default: continuous use".to_owned()),
    };
    Ok(LoadPlan {
        spec: args.load.clone(),
        profile,
        stressors,
        command,
        competitors,
        usage,
        usage_source,
        warnings,
    })
}

impl LoadPlan {
    /// The usage model for the tail projection.
    pub fn usage(&self) -> UsageModel {
        self.usage
    }

    /// Warnings for the record (RT throttling state).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// True when nothing would run.
    pub fn is_idle(&self) -> bool {
        self.stressors.is_empty() && self.command.is_none() && self.competitors.is_empty()
    }

    /// True when the user asked for any load (even the `none` profile) or a usage model: the
    /// record then gets a `load` value.
    pub fn is_requested(&self) -> bool {
        self.spec.is_some() || !self.is_idle() || self.usage_source == USAGE_GIVEN
    }

    /// Starts everything. `measure_start_ns` and `end_ns` are CLOCK_MONOTONIC times of the
    /// measurement; every part stops on its own shortly after `end_ns` even if never asked.
    pub fn start(&self, measure_start_ns: u64, end_ns: u64) -> Result<RunningLoad, LoadError> {
        let now_ns = rtlab_sys::clock::monotonic_ns();
        let deadline_ns = end_ns.max(now_ns) + GRACE.as_nanos() as u64;
        let softirqs_before = rtlab_sys::proc_stat::softirq_counts().ok();
        let mut running = RunningLoad {
            measure_start_ns,
            started_ns: now_ns,
            stress: None,
            command: None,
            competitors: None,
            softirqs_before,
        };
        if !self.competitors.is_empty() {
            running.competitors = Some(
                competitor::start(&self.competitors, deadline_ns)
                    .map_err(|error| invalid(LoadField::Competitor, error.to_string()))?,
            );
        }
        if !self.stressors.is_empty() {
            let mut options = StressOptions::new(Duration::from_nanos(deadline_ns - now_ns));
            options.deadline = Instant::now() + Duration::from_nanos(deadline_ns - now_ns);
            running.stress = Some(stress::start(&self.stressors, &options).map_err(|error| {
                LoadError::Start {
                    field: LoadField::Load,
                    message: error.to_string(),
                }
            })?);
        }
        if let Some(text) = &self.command {
            let child = SupervisedLoad::spawn(text).map_err(|error| LoadError::Start {
                field: LoadField::LoadCmd,
                message: format!("cannot start '{text}': {error}"),
            })?;
            running.command = Some(LoadCommand {
                text: text.clone(),
                started_ns: rtlab_sys::clock::monotonic_ns(),
                child: Some(child),
                exited: None,
            });
        }
        Ok(running)
    }

    /// The record's `load` when the run ended before the load started: the request only.
    pub fn describe_unstarted(&self) -> Load {
        Load {
            spec: self.spec.clone(),
            profile: self.profile.map(|profile| LoadProfile {
                name: profile.name.to_owned(),
                description: profile.description.to_owned(),
                mix: profile.mix.to_owned(),
            }),
            usage: LoadUsage {
                hours_per_day: self.usage.hours_per_day,
                days_per_week: self.usage.days_per_week,
                source: self.usage_source.clone(),
            },
            load_cmd: self.command.clone(),
            competitors: self
                .competitors
                .iter()
                .map(|spec| CompetitorEntry::Requested(spec.to_string()))
                .collect(),
            ..Load::default()
        }
    }
}

/// Time every load part may outlive the end of measurement before it stops itself.
const GRACE: Duration = Duration::from_secs(2);
/// Time a `--load-cmd` gets between SIGTERM and SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);

struct LoadCommand {
    text: String,
    started_ns: u64,
    child: Option<SupervisedLoad>,
    /// (CLOCK_MONOTONIC ns, status text) when it ended on its own.
    exited: Option<(u64, String)>,
}

impl LoadCommand {
    /// Notes an early exit (called while the run goes on).
    fn poll(&mut self) {
        if self.exited.is_some() {
            return;
        }
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.exited = Some((rtlab_sys::clock::monotonic_ns(), status.to_string()));
            }
        }
    }

    /// SIGTERM to the whole group, SIGKILL after a grace period, then reap.
    fn stop(&mut self) -> Option<String> {
        self.poll();
        let child = self.child.as_mut()?;
        let group = child.id();
        let mut problem = None;
        if let Err(error) = signal_process_group(group, GroupSignal::Terminate) {
            problem = Some(format!("SIGTERM to process group {group}: {error}"));
        }
        let deadline = Instant::now() + TERMINATE_GRACE;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group (the leader or its children) is killed.
        let _ = signal_process_group(group, GroupSignal::Kill);
        let _ = child.wait();
        self.child = None;
        problem
    }
}

impl Drop for LoadCommand {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
    }
}

/// A running load; [`RunningLoad::stop`] returns the record's `load` value. Dropping it (error,
/// panic) stops everything too.
pub struct RunningLoad {
    measure_start_ns: u64,
    started_ns: u64,
    stress: Option<RunningStress>,
    command: Option<LoadCommand>,
    competitors: Option<RunningCompetitors>,
    softirqs_before: Option<BTreeMap<String, Vec<u64>>>,
}

impl std::fmt::Debug for RunningLoad {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunningLoad")
            .field("started_ns", &self.started_ns)
            .finish_non_exhaustive()
    }
}

impl RunningLoad {
    /// Checks on the `--load-cmd` (call from the run loop).
    pub fn poll(&mut self) {
        if let Some(command) = self.command.as_mut() {
            command.poll();
        }
    }

    /// Stops every part and describes what ran, when (ns since measurement start) and what it
    /// consumed; the second value lists what made the load lighter than asked (for `warnings`).
    pub fn stop(mut self, plan: &LoadPlan) -> (Load, Vec<String>) {
        let mut warnings = Vec::new();
        let relative = |ns: u64| ns.saturating_sub(self.measure_start_ns);
        let instant_now = Instant::now();
        let monotonic_now = rtlab_sys::clock::monotonic_ns();
        let instant_to_relative = |instant: Instant| {
            let back = instant_now.saturating_duration_since(instant).as_nanos() as u64;
            relative(monotonic_now.saturating_sub(back))
        };
        let mut load = plan.describe_unstarted();
        load.started = true;
        load.started_ns = Some(relative(self.started_ns));
        if let Some(stress) = self.stress.take() {
            let reports = stress.stop();
            for report in &reports {
                for error in &report.errors {
                    warnings.push(format!(
                        "load: stressor {} stopped early: {error}",
                        report.spec
                    ));
                }
            }
            load.stressors = reports
                .iter()
                .map(|report| StressorRun {
                    spec: report.spec.to_string(),
                    kind: report.spec.kind.name().to_owned(),
                    workers: u64::from(report.workers),
                    duty_percent: u64::from(report.spec.duty_percent),
                    started_ns: instant_to_relative(report.started_at),
                    stopped_ns: instant_to_relative(report.stopped_at),
                    operations: report.operations,
                    bytes: report.bytes,
                    cpu_time_ns: report.usage.cpu_time_ns,
                    minor_faults: report.usage.minor_faults,
                    major_faults: report.usage.major_faults,
                    voluntary_switches: report.usage.voluntary_switches,
                    involuntary_switches: report.usage.involuntary_switches,
                    errors: report.errors.clone(),
                    notes: report.notes.clone(),
                })
                .collect();
        }
        if let Some(mut command) = self.command.take() {
            let exited = {
                command.poll();
                command.exited.clone()
            };
            let problem = command.stop();
            let stopped_ns = rtlab_sys::clock::monotonic_ns();
            if let Some((at, status)) = &exited {
                warnings.push(format!(
                    "load: the load command exited on its own ({status}) {} after measurement started: \
                     the rest of the run had less load",
                    rtlab_core::Nanos(relative(*at))
                ));
            }
            load.command = Some(CommandRun {
                cmd: command.text.clone(),
                started_ns: relative(command.started_ns),
                stopped_ns: relative(exited.as_ref().map_or(stopped_ns, |(at, _)| *at)),
                ended: match &exited {
                    Some((_, status)) => format!("exited on its own ({status})"),
                    None => "stopped by rtlab (process group terminated)".to_owned(),
                },
                problem,
            });
        }
        if let Some(competitors) = self.competitors.take() {
            load.competitors = competitors
                .stop()
                .iter()
                .map(|report| {
                    CompetitorEntry::Ran(CompetitorRun {
                        spec: report.spec.to_string(),
                        thread_id: report.thread_id,
                        started_ns: relative(report.started_ns),
                        stopped_ns: relative(report.stopped_ns),
                        cpu_time_ns: report.usage.cpu_time_ns,
                        involuntary_switches: report.usage.involuntary_switches,
                        stop_reason: report.stop_reason.as_str().to_owned(),
                    })
                })
                .collect();
        }
        load.stopped_ns = Some(relative(rtlab_sys::clock::monotonic_ns()));
        if let (Some(before), Ok(after)) = (
            &self.softirqs_before,
            rtlab_sys::proc_stat::softirq_counts(),
        ) {
            load.softirqs_during_load = Some(softirq_deltas(before, &after));
        }
        (load, warnings)
    }
}

/// Softirqs raised (summed over CPUs) between two readings, by name.
fn softirq_deltas(
    before: &BTreeMap<String, Vec<u64>>,
    after: &BTreeMap<String, Vec<u64>>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, counts)| {
            let earlier: u64 = before.get(name).map_or(0, |counts| counts.iter().sum());
            (
                name.clone(),
                counts.iter().sum::<u64>().saturating_sub(earlier),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(load: Option<&str>) -> LoadRequest {
        LoadRequest {
            load: load.map(str::to_owned),
            ..LoadRequest::default()
        }
    }

    #[test]
    fn profiles_expand_and_bring_their_usage_model() {
        let plan = validate(&args(Some("office"))).unwrap();
        assert_eq!(plan.usage().hours_per_day, 8.0);
        assert_eq!(plan.usage().days_per_week, 5.0);
        assert!(!plan.stressors.is_empty());
        let plan = validate(&args(Some("gaming,io:2"))).unwrap();
        assert!(plan.stressors.iter().any(|spec| spec.to_string() == "io:2"));
        let plan = validate(&LoadRequest {
            load: Some("web".to_owned()),
            usage: Some("2h/day,3d/week".parse().unwrap()),
            ..LoadRequest::default()
        })
        .unwrap();
        assert_eq!(plan.usage().hours_per_day, 2.0);
        assert_eq!(plan.usage_source, USAGE_GIVEN);
        let plan = validate(&args(None)).unwrap();
        assert!(plan.is_idle());
        assert_eq!(plan.usage(), UsageModel::CONTINUOUS);
    }

    #[test]
    fn bad_loads_are_input_errors_naming_the_field() {
        for (load, expected) in [
            ("office,web", "two profiles"),
            ("office,cpu:10%", "'cpu' is given twice"),
            ("office:3", "takes no intensity"),
            ("gpu", "unknown stressor 'gpu'"),
            ("cpu:0%", "between 1% and 100%"),
        ] {
            let error = validate(&args(Some(load))).unwrap_err();
            assert!(error.is_input(), "{load}");
            assert_eq!(error.field(), Some(LoadField::Load), "{load}");
            let text = error.to_string();
            assert!(text.contains(expected), "{load}: {text}");
        }
        let error = validate(&LoadRequest {
            competitor: vec!["fifo:0".to_owned()],
            ..LoadRequest::default()
        })
        .unwrap_err();
        assert_eq!(error.field(), Some(LoadField::Competitor));
        let error = error.to_string();
        assert!(error.contains("1..99"), "{error}");
        let error = validate(&LoadRequest {
            competitor: vec!["fifo:5@4095".to_owned()],
            ..LoadRequest::default()
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("CPU 4095 is not online"), "{error}");
        let error = validate(&LoadRequest {
            load_cmd: Some("  ".to_owned()),
            ..LoadRequest::default()
        })
        .unwrap_err();
        assert_eq!(error.field(), Some(LoadField::LoadCmd));
        assert!(error.is_input());
        assert_eq!(error.to_string(), "the command is empty");
    }

    #[test]
    fn softirq_deltas_sum_over_cpus() {
        let before = BTreeMap::from([
            ("TIMER".to_owned(), vec![10, 20]),
            ("RCU".to_owned(), vec![5]),
        ]);
        let after = BTreeMap::from([
            ("TIMER".to_owned(), vec![15, 40]),
            ("RCU".to_owned(), vec![4]),
            ("NET_RX".to_owned(), vec![3, 3]),
        ]);
        let deltas = softirq_deltas(&before, &after);
        assert_eq!(deltas["TIMER"], 25);
        assert_eq!(deltas["RCU"], 0, "a counter that went back counts 0");
        assert_eq!(deltas["NET_RX"], 6);
    }

    #[test]
    fn load_command_is_stopped_as_a_group() {
        let plan = validate(&LoadRequest {
            load_cmd: Some("sleep 600 & sleep 600".to_owned()),
            ..LoadRequest::default()
        })
        .unwrap();
        let now = rtlab_sys::clock::monotonic_ns();
        let running = plan.start(now, now + 60_000_000_000).unwrap();
        let group = running
            .command
            .as_ref()
            .unwrap()
            .child
            .as_ref()
            .unwrap()
            .id();
        // Give the shell a moment to start both sleeps (behaviour, not timing, is asserted).
        for _ in 0..100 {
            if group_members(group) >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            group_members(group) >= 2,
            "both sleeps should be in the group"
        );
        let (load, warnings) = running.stop(&plan);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(group_members(group), 0, "the whole group is gone");
        assert_eq!(
            load.command.unwrap().ended,
            "stopped by rtlab (process group terminated)"
        );
    }

    /// Live (non-zombie) processes whose process group is `group`, from /proc.
    fn group_members(group: u32) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .filter(|stat| {
                let Some(rest) = stat.rfind(')').map(|index| &stat[index + 2..]) else {
                    return false;
                };
                let fields: Vec<&str> = rest.split_whitespace().collect();
                fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
            })
            .count()
    }
}
