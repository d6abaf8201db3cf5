//! rtlab-tune: `rtlab tune`. The machine's real-time settings, listed with why each matters;
//! then each one rtlab can change at run time changed alone, measured in interleaved A/B rounds
//! against the `rtlab run` probe, judged with `rtlab compare`'s bootstrap interval, and kept only
//! if it helps beyond noise. A placebo goes through the same machinery, so the rate at which noise
//! alone gets kept can be measured.
//!
//! Nothing outlives the command: every change is journalled before it is made
//! ([`journal`]), put back when the setting's rounds end, and whatever is still changed is put
//! back on return, error, panic or the stop flag ([`changes::Changes`]'s drop); after a SIGKILL
//! the next `rtlab tune` (or [`revert`]) puts it back from the journal.

pub mod app;
pub mod catalogue;
pub mod changes;
pub mod error;
pub mod inventory;
pub mod journal;
pub mod measure;
pub mod pool;
pub mod profile;
pub mod profile_apply;
pub mod report_file;
pub mod tuned;

pub use app::AppWatcher;
pub use catalogue::SettingName;
pub use error::{is_input_error, TuneError};
pub use measure::Figure;

use changes::{Changes, NotApplied};
use journal::Journal;
use measure::RoundConfig;
use rtlab_core::tune_report::{AppEffect, AppRound, SettingResult, TuneReport};
use rtlab_core::{Nanos, RunRecord};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Everything `rtlab tune` needs.
#[derive(Clone, Debug)]
pub struct TuneConfig {
    /// The settings to measure, in order (see [`catalogue::select`]).
    pub settings: Vec<SettingName>,
    /// CPUs to measure; `None`: every online CPU but the first (when there are two or more), so
    /// that IRQs and workqueues have somewhere else to go.
    pub cpus: Option<Vec<usize>>,
    /// Length of one round; `None`: the budget shared out.
    pub round: Option<Nanos>,
    /// A/B pairs per setting.
    pub rounds: u32,
    pub warmup: Nanos,
    pub period: Nanos,
    /// The whole measurement stops starting settings once this is spent.
    pub budget: Nanos,
    pub figure: Figure,
    /// Two-sided confidence, e.g. 0.95.
    pub confidence: f64,
    /// False: the inventory only, nothing changed.
    pub measure: bool,
    /// Where the journal and its lock live ([`journal::STATE_DIR`]).
    pub state_dir: PathBuf,
    pub cmdline: Vec<String>,
}

/// Shortest round the budget may share out.
pub const MIN_ROUND: Nanos = Nanos(2_000_000_000);

/// Where `rtlab tune` reports while it goes on. Every method has a default that does nothing.
pub trait TuneObserver {
    /// The planned measuring time, ns (before the first setting).
    fn planned(&mut self, _total_ns: u64) {}
    /// A setting's rounds begin.
    fn setting(&mut self, _name: &str, _index: usize, _count: usize) {}
    /// Measuring time so far, ns.
    fn elapsed(&mut self, _elapsed_ns: u64) {}
}

/// The CPUs to measure and the housekeeping CPUs (the online ones not measured).
fn choose_cpus(requested: Option<&Vec<usize>>) -> Result<(Vec<usize>, Vec<usize>), TuneError> {
    let online = rtlab_sys::cpu::online_cpus().map_err(|source| TuneError::Setting {
        setting: "the online CPUs".into(),
        source,
    })?;
    let cpus = match requested {
        Some(cpus) => cpus.clone(),
        None if online.len() > 1 => online[1..].to_vec(),
        None => online.clone(),
    };
    let housekeeping = online
        .into_iter()
        .filter(|cpu| !cpus.contains(cpu))
        .collect();
    Ok((cpus, housekeeping))
}

fn not_measured(setting: SettingName, reason: String) -> SettingResult {
    SettingResult {
        name: setting.name().into(),
        before: "-".into(),
        tried: "-".into(),
        effect: None,
        kept: false,
        reason,
        placebo: setting == SettingName::Placebo,
        app: None,
    }
}

/// Puts back what a killed `rtlab tune` left changed: `name=value` for each setting put back.
pub fn revert(state_dir: &std::path::Path) -> Result<Vec<String>, TuneError> {
    let (journal, repaired) = Journal::open(state_dir)?;
    journal.finish();
    Ok(repaired)
}

/// The inventory, then (as root, unless `config.measure` is false) each setting measured; with
/// `app`, each round also counts that program's deadline misses.
pub fn tune(
    config: &TuneConfig,
    app: Option<&dyn AppWatcher>,
    observer: &mut dyn TuneObserver,
    stop: &Arc<AtomicBool>,
) -> Result<TuneReport, TuneError> {
    let started = Instant::now();
    if let Some(app) = app {
        if config.measure && !app.running() {
            return Err(TuneError::AppNotRunning(app.comm().to_owned()));
        }
    }
    let (cpus, housekeeping_cpus) = choose_cpus(config.cpus.as_ref())?;
    let as_root = rtlab_sys::users::effective_uid() == 0;
    let measuring = config.measure && as_root;
    let (journal, repaired) = if as_root {
        let (journal, repaired) = Journal::open(&config.state_dir)?;
        (Some(journal), repaired)
    } else {
        (None, Vec::new())
    };
    let measured = config.settings.len().max(1) as u64;
    let round = config.round.unwrap_or_else(|| {
        let share = config.budget.as_u64() / (measured * 2 * u64::from(config.rounds.max(1)));
        Nanos(
            share
                .saturating_sub(config.warmup.as_u64())
                .max(MIN_ROUND.as_u64()),
        )
    });
    let mut report = TuneReport {
        figure: config.figure.name().into(),
        confidence: config.confidence,
        cpus: cpus.clone(),
        housekeeping_cpus: housekeeping_cpus.clone(),
        round_ns: round.as_u64(),
        rounds: config.rounds,
        as_root,
        repaired,
        inventory: inventory::inventory(&cpus, &housekeeping_cpus),
        settings: Vec::new(),
        app: app.map(|app| app.comm().to_owned()),
        interrupted: false,
        duration_ns: 0,
    };
    if config.measure && !as_root {
        report.settings = config
            .settings
            .iter()
            .map(|setting| {
                not_measured(
                    *setting,
                    "not measured: changing kernel settings needs root".into(),
                )
            })
            .collect();
    }
    let journal = match journal {
        Some(journal) if !measuring => {
            journal.finish();
            None
        }
        journal => journal,
    };
    if let Some(journal) = journal {
        let round_config = RoundConfig {
            cpus: cpus.clone(),
            round,
            warmup: config.warmup,
            period: config.period,
            cmdline: config.cmdline.clone(),
        };
        let mut changes = Changes::new(journal);
        let result = measure_settings(
            config,
            app,
            &round_config,
            &housekeeping_cpus,
            &mut changes,
            &mut report,
            observer,
            stop,
        );
        // Put everything back whatever happened; an error measuring comes first.
        let restored = changes.restore_all();
        result?;
        restored?;
    }
    report.duration_ns = started.elapsed().as_nanos() as u64;
    Ok(report)
}

/// Which arm a round measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arm {
    AsItWas,
    Changed,
}

/// The arms of `pairs` A/B pairs, interleaved ABBA so a drift over the rounds falls on both.
fn arms(pairs: u32) -> Vec<Arm> {
    (0..pairs)
        .flat_map(|pair| {
            if pair % 2 == 0 {
                [Arm::AsItWas, Arm::Changed]
            } else {
                [Arm::Changed, Arm::AsItWas]
            }
        })
        .collect()
}

/// One round: the probe and, with `app`, the program's misses recorded at the same time (until
/// the probe's round ends).
fn measure_round_with_app(
    round_config: &RoundConfig,
    app: Option<&dyn AppWatcher>,
    stop: &Arc<AtomicBool>,
    offset_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<(RunRecord, Option<AppRound>), TuneError> {
    let Some(app) = app else {
        return Ok((
            measure::measure_round(round_config, stop, offset_ns, progress)?,
            None,
        ));
    };
    let round_over = AtomicBool::new(false);
    let (record, watched) = std::thread::scope(|scope| {
        let watching = scope.spawn(|| app.watch(&round_over));
        let record = measure::measure_round(round_config, stop, offset_ns, progress);
        round_over.store(true, Ordering::SeqCst);
        let watched = watching
            .join()
            .unwrap_or_else(|_| Err("the recording's thread panicked".to_owned()));
        (record, watched)
    });
    // Gone first: a recording that failed because the program ended is said as that.
    if !app.running() {
        return Err(TuneError::AppGone(app.comm().to_owned()));
    }
    let record = record?;
    let watched = watched.map_err(|reason| TuneError::App {
        comm: app.comm().to_owned(),
        reason,
    })?;
    Ok((record, Some(watched)))
}

#[allow(clippy::too_many_arguments)] // Each is one thing the loop needs; a struct would only rename them.
fn measure_settings(
    config: &TuneConfig,
    app: Option<&dyn AppWatcher>,
    round_config: &RoundConfig,
    housekeeping_cpus: &[usize],
    changes: &mut Changes,
    report: &mut TuneReport,
    observer: &mut dyn TuneObserver,
    stop: &Arc<AtomicBool>,
) -> Result<(), TuneError> {
    let per_round = round_config.round.as_u64() + round_config.warmup.as_u64();
    let per_setting = per_round * 2 * u64::from(config.rounds);
    let measuring = Measuring {
        config,
        app,
        round_config,
        housekeeping_cpus,
        stop,
        per_round,
    };
    observer.planned(per_setting * config.settings.len() as u64);
    let mut elapsed_ns = 0u64;
    let measuring_started = Instant::now();
    for (index, &setting) in config.settings.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            report
                .settings
                .push(not_measured(setting, "not measured: interrupted".into()));
            continue;
        }
        let spent = measuring_started.elapsed().as_nanos() as u64;
        if spent + per_setting > config.budget.as_u64() {
            report.settings.push(not_measured(
                setting,
                format!(
                    "not measured: the budget ({} s) would be exceeded",
                    config.budget.as_u64() / 1_000_000_000
                ),
            ));
            continue;
        }
        observer.setting(setting.name(), index, config.settings.len());
        let applied = match changes.apply(setting, housekeeping_cpus)? {
            Ok(applied) => applied,
            Err(not_applied) => {
                report
                    .settings
                    .push(not_applied_result(setting, not_applied));
                elapsed_ns += per_setting;
                observer.elapsed(elapsed_ns);
                continue;
            }
        };
        let rounds = measuring.rounds(setting, changes, observer, &mut elapsed_ns)?;
        if stop.load(Ordering::Relaxed) {
            changes.restore(setting)?;
            report.interrupted = true;
            let mut result = not_measured(setting, "not measured: interrupted".into());
            result.before = applied.before;
            result.tried = applied.tried;
            report.settings.push(result);
            continue;
        }
        let [before, after] = &rounds.records;
        let (Some(pooled_before), Some(pooled_after)) = (pool::pool(before)?, pool::pool(after)?)
        else {
            changes.restore(setting)?;
            report.settings.push(not_measured(
                setting,
                "not measured: no round measured".into(),
            ));
            continue;
        };
        let seed = 0x7475_6e65 ^ index as u64;
        let judgement =
            measuring.judge_rounds([&pooled_before, &pooled_after], before, after, seed)?;
        let [app_before, app_after] = rounds.app_rounds;
        let decision = measuring.decide(&judgement, app_before, app_after);
        if decision.kept && rounds.last_arm != Arm::Changed {
            change_again(changes, setting, housekeeping_cpus)?;
        } else if !decision.kept {
            changes.restore(setting)?;
        }
        report.settings.push(SettingResult {
            name: setting.name().into(),
            before: applied.before,
            tried: applied.tried,
            effect: judgement.effect,
            kept: decision.kept,
            reason: decision.reason,
            placebo: setting == SettingName::Placebo,
            app: decision.app_effect,
        });
    }
    Ok(())
}

/// What the rounds of every setting share.
struct Measuring<'a> {
    config: &'a TuneConfig,
    app: Option<&'a dyn AppWatcher>,
    round_config: &'a RoundConfig,
    housekeeping_cpus: &'a [usize],
    stop: &'a Arc<AtomicBool>,
    /// One round with its warm-up, ns.
    per_round: u64,
}

/// One setting's rounds, sorted by arm.
struct SettingRounds {
    /// The probe's records: as it was, then changed.
    records: [Vec<RunRecord>; 2],
    /// With `--app`, the program's misses in the same rounds: as it was, then changed.
    app_rounds: [Vec<AppRound>; 2],
    /// The arm the setting was left in after the last round.
    last_arm: Arm,
}

/// Whether a setting is kept, why, and what the program's misses said.
struct Decision {
    kept: bool,
    reason: String,
    app_effect: Option<AppEffect>,
}

impl Measuring<'_> {
    /// Measures one setting's A/B rounds (it arrives changed), switching the setting between
    /// arms; stops early when a round is interrupted or the stop flag is set.
    fn rounds(
        &self,
        setting: SettingName,
        changes: &mut Changes,
        observer: &mut dyn TuneObserver,
        elapsed_ns: &mut u64,
    ) -> Result<SettingRounds, TuneError> {
        let mut state = Arm::Changed;
        let mut rounds: [Vec<RunRecord>; 2] = [Vec::new(), Vec::new()];
        let mut app_rounds: [Vec<AppRound>; 2] = [Vec::new(), Vec::new()];
        for arm in arms(self.config.rounds) {
            if arm != state {
                match arm {
                    Arm::AsItWas => changes.restore(setting)?,
                    Arm::Changed => change_again(changes, setting, self.housekeeping_cpus)?,
                }
                state = arm;
            }
            let (record, app_round) = measure_round_with_app(
                self.round_config,
                self.app,
                self.stop,
                *elapsed_ns,
                &mut |ns| observer.elapsed(ns),
            )?;
            *elapsed_ns += self.per_round;
            let interrupted = record.interrupted;
            rounds[(arm == Arm::Changed) as usize].push(record);
            if let Some(app_round) = app_round {
                app_rounds[(arm == Arm::Changed) as usize].push(app_round);
            }
            if interrupted || self.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok(SettingRounds {
            records: rounds,
            app_rounds,
            last_arm: state,
        })
    }

    /// Judges the pooled rounds, then keeps "better" only if every A/B pair agrees.
    fn judge_rounds(
        &self,
        [pooled_before, pooled_after]: [&RunRecord; 2],
        before: &[RunRecord],
        after: &[RunRecord],
        seed: u64,
    ) -> Result<measure::Judgement, TuneError> {
        let config = self.config;
        let mut judgement = measure::judge(
            pooled_before,
            pooled_after,
            config.figure,
            config.confidence,
            seed,
        )?;
        // Rounds differ by more than samples within a round do (a busier host, a stall): the
        // pooled interval sees only the latter, so every pair must also agree.
        let mut pairs_better = 0;
        for (round_before, round_after) in before.iter().zip(after) {
            let (Some(one_before), Some(one_after)) = (
                pool::pool(std::slice::from_ref(round_before))?,
                pool::pool(std::slice::from_ref(round_after))?,
            ) else {
                continue;
            };
            let pair = measure::judge(
                &one_before,
                &one_after,
                config.figure,
                config.confidence,
                seed,
            )?;
            if pair.effect.is_some_and(|effect| effect.difference_ns < 0) {
                pairs_better += 1;
            }
        }
        let pairs = before.len().min(after.len());
        if judgement.better && pairs_better < pairs {
            judgement.better = false;
            judgement.reason = format!(
                "put back: the pooled interval is below 0 but only {pairs_better} of {pairs} pairs are better (noise between rounds)"
            );
        } else if judgement.better {
            judgement
                .reason
                .push_str(&format!(", better in {pairs} of {pairs} pairs"));
        }
        Ok(judgement)
    }

    /// Keeps the setting on the probe's judgement, or with `--app` on the probe's and the
    /// program's together.
    fn decide(
        &self,
        judgement: &measure::Judgement,
        app_before: Vec<AppRound>,
        app_after: Vec<AppRound>,
    ) -> Decision {
        match self.app {
            Some(app) => {
                let (effect, change) =
                    app::judge_app(app.comm(), app_before, app_after, self.config.confidence);
                let (kept, reason) = app::decide(
                    judgement.better,
                    judgement.worse,
                    &judgement.reason,
                    change,
                    &effect,
                );
                Decision {
                    kept,
                    reason,
                    app_effect: Some(effect),
                }
            }
            None => Decision {
                kept: judgement.better,
                reason: judgement.reason.clone(),
                app_effect: None,
            },
        }
    }
}

/// Changes `setting` again after it was put back; that it cannot be is an error, since it could
/// be a moment ago.
fn change_again(
    changes: &mut Changes,
    setting: SettingName,
    housekeeping_cpus: &[usize],
) -> Result<(), TuneError> {
    if let Err(not_applied) = changes.apply(setting, housekeeping_cpus)? {
        return Err(TuneError::Restore(format!(
            "{} could not be changed again: {not_applied:?}",
            setting.name()
        )));
    }
    Ok(())
}

fn not_applied_result(setting: SettingName, not_applied: NotApplied) -> SettingResult {
    let (before, reason) = match not_applied {
        NotApplied::AlreadySet { value } => (
            value.clone(),
            format!("not measured: already {value}, the value rtlab would try"),
        ),
        NotApplied::Absent { reason } => (
            "absent".to_owned(),
            format!("not measured: absent on this machine ({reason})"),
        ),
        NotApplied::NoHousekeepingCpu => (
            "-".to_owned(),
            "not measured: every online CPU is measured, none is left to move it to (--cpus a subset)".to_owned(),
        ),
        NotApplied::Refused { before, reason } => {
            (before, format!("not measured: the kernel refused the change ({reason})"))
        }
    };
    let mut result = not_measured(setting, reason);
    result.before = before;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_interleave_so_each_arm_leads_in_turn() {
        use Arm::{AsItWas as A, Changed as B};
        assert_eq!(arms(3), vec![A, B, B, A, A, B]);
        assert!(arms(0).is_empty());
    }
}
