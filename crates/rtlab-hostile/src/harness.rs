//! One run: the stage up, the attackers sending for `seconds`, root pinging the daemon on a fresh
//! connection every 100 ms (`crate::root_ping`), the checker reading the kernel every 100 ms; at the first violation
//! the attack stops, and the requests sent until then are replayed against a fresh stage and
//! shrunk (ddmin) to the few that cause it.

use crate::action::Action;
use crate::checker::{CheckFindings, UidShare, Violation, ViolationKind};
use crate::roles::LogLine;
use crate::root_ping::{keep_first, LateAnswer, Lateness, PingerEnd, RootPinger};
use crate::shrink::ddmin;
use crate::stage::{Cast, Stage};
use crate::world::Identity;
use anyhow::Context;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the checker reads the kernel and root pings.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Root's ping must be answered within this (issue 39: "the daemon answers root within 100 ms").
pub const ANSWER_BOUND: Duration = Duration::from_millis(100);

/// A ping still unanswered after this is a violation at once: the daemon hangs.
const HUNG_AFTER: Duration = Duration::from_secs(5);

/// How a run goes.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub cast: Cast,
    /// The attacker processes, in order.
    pub attackers: Vec<Identity>,
    pub seed: u64,
    pub seconds: f64,
    pub senders_per_attacker: usize,
    pub max_pause_ms: u64,
    /// Longest root's ping may take (connect to answer) before it is late: a violation, unless
    /// a hypervisor stall covers the lateness (`crate::root_ping`).
    pub answer_bound: Duration,
    /// Replays a shrinking search may make (0: no replay).
    pub shrink_tries: usize,
    /// Longest the replays of a shrinking search may take together.
    pub shrink_time: Duration,
    /// Goes on attacking after a violation (the benchmark: every violation counted), instead of
    /// stopping at the first (CI: the sooner the replay, the shorter the sequence). A daemon
    /// that exited ends the run either way.
    pub keep_going: bool,
    /// Set (by SIGINT or SIGTERM, see `rtlab_sys::signals`): the attack ends early and everything
    /// is put away as at its end; a replay under way stops after the request it is sending, its
    /// fresh daemon stopped with SIGTERM.
    pub stop: Arc<AtomicBool>,
}

impl RunConfig {
    /// Whether SIGINT or SIGTERM asked the run to end.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The standard cast: nobody and daemon (uid 1), each with four attackers of which every second
    /// one sits in `unshare -Ur`; two root victims; user_limit 0.2 in both the daemon and the
    /// checker.
    pub fn standard(binary: PathBuf, rtlab: PathBuf, seed: u64, seconds: f64) -> RunConfig {
        let attacking_uids = vec![Identity::NOBODY, Identity::DAEMON];
        let attackers = (0..8)
            .map(|index| Identity {
                uid: attacking_uids[index % 2],
                user_namespace: (index / 2) % 2 == 1,
            })
            .collect();
        RunConfig {
            cast: Cast {
                binary,
                daemon: crate::daemon::DaemonSettings {
                    binary: rtlab,
                    user_limit: 0.2,
                    deadline_placement: false,
                    rtkit: true,
                    rtkit_user_share: None,
                    rtkit_user_share_window: Duration::from_secs(5),
                },
                attacking_uids,
                root_victims: 2,
                limit: 0.2,
                lifetime: Duration::from_secs_f64(seconds + 120.0),
            },
            attackers,
            seed,
            seconds,
            senders_per_attacker: 3,
            max_pause_ms: 20,
            answer_bound: ANSWER_BOUND,
            shrink_tries: 40,
            shrink_time: Duration::from_secs(300),
            keep_going: false,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// One request of a replayed sequence: who sent it and what.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub attacker: usize,
    pub identity: String,
    pub action: Action,
    /// What it got in the run.
    pub answer: String,
    /// When it was sent in the run (CLOCK_MONOTONIC ns).
    pub sent_at_ns: u64,
}

/// What replaying and shrinking a violation found.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    /// The violation replayed.
    pub violation: Violation,
    /// Requests in the replayed sequence (all those sent before it was seen, if none
    /// reproduced it).
    pub sequence_length: usize,
    /// Whether a fresh daemon, sent the sequence, showed it again.
    pub reproduced: bool,
    /// How the replay that showed it spaced the requests.
    pub pace: String,
    /// The smallest sub-sequence that still shows it (the whole sequence's last 30 if it did
    /// not reproduce).
    pub shrunk: Vec<Step>,
    pub tries: usize,
    pub out_of_tries: bool,
}

/// What a run did and found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub seed: u64,
    pub seconds_planned: f64,
    pub seconds_run: f64,
    pub attackers: Vec<String>,
    pub daemon_user_limit: f64,
    pub checked_limit: f64,
    pub slack: f64,
    pub overrun_us: u64,
    pub victim_threads: usize,
    /// Requests sent (lines and connections), by every attacker.
    pub requests_tried: u64,
    pub actions: u64,
    /// Requests the daemon answered `ok`.
    pub granted: u64,
    /// Of the actions, RealtimeKit1 calls on the bus, and those answered without an error.
    pub rtkit_calls: u64,
    pub rtkit_granted: u64,
    /// Actions by what came of them.
    pub outcomes: BTreeMap<String, u64>,
    pub checks: u64,
    /// Each attacking uid's largest share seen.
    pub largest_shares: Vec<UidShare>,
    /// The most any attacking uid's RealtimeKit1 threads ran over the share window at one check,
    /// as a fraction of one CPU: whether they ran at all, and the checker metered them (a uid's
    /// largest share is often its SCHED_DEADLINE bandwidth alone).
    pub largest_rtkit_ran: f64,
    pub pings_asked: u64,
    pub pings_answered: u64,
    pub worst_answer_ms: f64,
    pub p99_answer_ms: f64,
    pub median_answer_ms: f64,
    pub answer_bound_ms: u64,
    /// Root's pings answered after the bound, violations or not.
    pub late_answers: usize,
    /// Of those, the ones a hypervisor stall covers: not violations.
    pub late_in_hypervisor_stalls: usize,
    /// The first late answers (at most 20), with their evidence.
    pub late_answer_samples: Vec<LateAnswer>,
    /// Violations seen: one per subject (a victim thread, a uid, the daemon) at each check.
    pub violations_total: usize,
    /// Subjects seen in violation at a check after one where they were not.
    pub violation_episodes: usize,
    /// Times the daemon exited and (with `keep_going`) was started again.
    pub daemon_restarts: usize,
    /// The first violations (at most 20).
    pub violations: Vec<Violation>,
    pub replay: Option<Replay>,
    pub daemon_stopped_by_sigterm: bool,
    /// Each attacker's process and named threads (`own` k), to read a violation's thread ids.
    pub attacker_threads: Vec<crate::world::ProcessInfo>,
    /// The daemon's last 20 lines of log.
    pub daemon_log_tail: Vec<String>,
    /// The daemon's first 20 demotions of RealtimeKit1 threads (its log's lines saying
    /// "demoted"), in order: what its watchdog did, beside what the checker saw.
    pub daemon_demotions: Vec<String>,
    /// The requests granted (`ok`) in the 3 s before the first violation, in order.
    pub granted_before_violation: Vec<Step>,
    /// The first actions answered with no answer in 8 s, `system`, or a broken connection: not
    /// violations, but worth a look.
    pub oddities: Vec<LogLine>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations_total == 0
    }

    /// The figures in words.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "seed {} · {:.1} s of {:.0} s · attackers: {}\n\
             requests tried {} ({} actions, {} granted; RealtimeKit1 calls {}, {} granted) · violations {} ({} episodes)\n\
             root's pings asked {}, answered {}, worst answer {:.1} ms, p99 {:.1} ms, median {:.1} ms; \
             late (over {} ms) {}, of which {} in hypervisor stalls (not violations); daemon restarted {} times\n\
             checks {} (every 100 ms) of {} victim threads; limit {:.0} % + {:.0} points, overrun {} µs a thread\n",
            self.seed,
            self.seconds_run,
            self.seconds_planned,
            self.attackers.join(", "),
            self.requests_tried,
            self.actions,
            self.granted,
            self.rtkit_calls,
            self.rtkit_granted,
            self.violations_total,
            self.violation_episodes,
            self.pings_asked,
            self.pings_answered,
            self.worst_answer_ms,
            self.p99_answer_ms,
            self.median_answer_ms,
            self.answer_bound_ms,
            self.late_answers,
            self.late_in_hypervisor_stalls,
            self.daemon_restarts,
            self.checks,
            self.victim_threads,
            self.checked_limit * 100.0,
            self.slack * 100.0,
            self.overrun_us,
        );
        for share in &self.largest_shares {
            text.push_str(&format!(
                "uid {}: largest share {:.1} %: SCHED_DEADLINE held {:.1} % ({:.1} % without the overrun, {} threads), RealtimeKit1's SCHED_RR ran {:.1} % over the window\n",
                share.uid,
                (share.held + share.rtkit_ran) * 100.0,
                share.held * 100.0,
                share.asked * 100.0,
                share.deadline_threads,
                share.rtkit_ran * 100.0,
            ));
        }
        text.push_str(&format!(
            "RealtimeKit1's SCHED_RR threads of one uid ran at most {:.1} % of a CPU over the window at a check\n",
            self.largest_rtkit_ran * 100.0
        ));
        text.push_str(&format!("outcomes: {:?}\n", self.outcomes));
        for oddity in &self.oddities {
            text.push_str(&format!(
                "odd answer (not a violation): attacker {}: {} → {}\n",
                oddity.w,
                serde_json::to_string(&oddity.a).unwrap_or_default(),
                oddity.o
            ));
        }
        for late in self
            .late_answer_samples
            .iter()
            .filter(|late| late.lateness == Lateness::Hypervisor)
        {
            text.push_str(&format!(
                "hypervisor (not a violation): {}\n",
                late.describe(Duration::from_millis(self.answer_bound_ms))
            ));
        }
        for violation in &self.violations {
            text.push_str(&format!(
                "VIOLATION {:?}: {}\n",
                violation.kind, violation.detail
            ));
        }
        if !self.granted_before_violation.is_empty() {
            text.push_str("granted in the 3 s before the first violation:\n");
            for step in &self.granted_before_violation {
                text.push_str(&format!(
                    "  {} ms before: {} (attacker {}, threads {:?}): {}\n",
                    self.violations[0]
                        .seen_at_ns
                        .saturating_sub(step.sent_at_ns)
                        / 1_000_000,
                    step.identity,
                    step.attacker,
                    self.attacker_threads
                        .get(step.attacker)
                        .map(|process| &process.tids),
                    serde_json::to_string(&step.action).unwrap_or_default(),
                ));
            }
        }
        if !self.violations.is_empty() && !self.daemon_demotions.is_empty() {
            text.push_str(
                "the daemon's demotions of RealtimeKit1 threads, in order:
",
            );
            for line in &self.daemon_demotions {
                text.push_str(&format!(
                    "  {line}
"
                ));
            }
        }
        if !self.daemon_stopped_by_sigterm {
            text.push_str("the daemon did not stop within 10 s of SIGTERM and was killed\n");
        }
        text.push_str(&self.replay_summary());
        text
    }

    /// The replay of the first violation in words (empty if there was none).
    pub fn replay_summary(&self) -> String {
        let mut text = String::new();
        if let Some(replay) = &self.replay {
            text.push_str(&format!(
                "replay of {} requests against a fresh daemon ({}): {} {} in {} tries{}:\n",
                replay.sequence_length,
                replay.pace,
                if replay.reproduced {
                    "reproduced; shrunk to"
                } else {
                    "NOT reproduced; the last"
                },
                replay.shrunk.len(),
                replay.tries,
                if replay.out_of_tries {
                    " (out of tries)"
                } else {
                    ""
                },
            ));
            for step in &replay.shrunk {
                text.push_str(&format!(
                    "  {} (attacker {}): {} (in the run: {})\n",
                    step.identity,
                    step.attacker,
                    serde_json::to_string(&step.action).unwrap_or_default(),
                    step.answer
                ));
            }
        }
        text
    }
}

/// Counts of the attackers' log lines.
#[derive(Default)]
struct Tally {
    /// The first actions that got no answer, a `system` error or a broken connection.
    oddities: Vec<LogLine>,
    requests: u64,
    actions: u64,
    granted: u64,
    outcomes: BTreeMap<String, u64>,
    rtkit_calls: u64,
    rtkit_granted: u64,
}

impl Tally {
    /// Counts one log line: its requests, whether it was granted, its outcome, and (the first 20)
    /// an odd answer.
    fn count(&mut self, entry: &LogLine) {
        self.requests += u64::from(entry.n);
        self.actions += 1;
        self.granted += u64::from(entry.g);
        if let Action::Rtkit { .. } = entry.a {
            self.rtkit_calls += 1;
            self.rtkit_granted += u64::from(entry.g);
        }
        *self.outcomes.entry(entry.o.clone()).or_default() += 1;
        let odd = ["system", "closed", "unreadable"].contains(&entry.o.as_str())
            || entry.o.starts_with("no_answer")
            || (entry.o.starts_with("io_") && entry.o != "io_brokenpipe");
        if odd && self.oddities.len() < 20 {
            self.oddities.push(entry.clone());
        }
    }
}

/// Runs the attack and, on a violation, the replay. Needs root.
pub fn run(config: &RunConfig) -> anyhow::Result<Report> {
    let (mut report, log) = attack(config)?;
    replay_first(config, &mut report, &log)?;
    Ok(report)
}

/// The attackers' requests of a run, kept for its replay (removed when dropped).
pub struct ActionLog {
    directory: tempfile::TempDir,
}

impl ActionLog {
    fn path(&self) -> PathBuf {
        self.directory.path().join("actions.jsonl")
    }
}

/// Replays and shrinks the run's first violation, if it has one that a replay can show (a
/// late or refused ping cannot be replayed).
pub fn replay_first(
    config: &RunConfig,
    report: &mut Report,
    log: &ActionLog,
) -> anyhow::Result<()> {
    report.replay = match report.violations.first() {
        Some(first) if config.shrink_tries > 0 && first.kind != ViolationKind::Unanswered => {
            Some(replay_and_shrink(config, first, &log.path())?)
        }
        _ => None,
    };
    Ok(())
}

/// The calling thread at SCHED_FIFO [`crate::root_ping::CLIENT_PRIORITY`] while it lives, and
/// at the policy it had before afterwards.
struct AboveRealtimeKit {
    before: Option<rtlab_sys::sched::Policy>,
}

impl AboveRealtimeKit {
    fn enter() -> AboveRealtimeKit {
        let tid = rtlab_sys::cpu::current_tid();
        let before = rtlab_sys::sched::thread_policy(tid).ok();
        let raised = rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Fifo {
            priority: crate::root_ping::CLIENT_PRIORITY,
        });
        AboveRealtimeKit {
            before: before.filter(|_| raised.is_ok()),
        }
    }
}

impl AboveRealtimeKit {
    /// Runs `work` at the policy from before (a process started there inherits it).
    fn aside<R>(&self, work: impl FnOnce() -> R) -> R {
        let Some(before) = self.before else {
            return work();
        };
        let _ = rtlab_sys::sched::set_current_thread_policy(before);
        let result = work();
        let _ = rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Fifo {
            priority: crate::root_ping::CLIENT_PRIORITY,
        });
        result
    }
}

impl Drop for AboveRealtimeKit {
    fn drop(&mut self) {
        if let Some(before) = self.before.take() {
            let _ = rtlab_sys::sched::set_current_thread_policy(before);
        }
    }
}

/// The attack alone: the report without its replay, and the log to replay from.
pub fn attack(config: &RunConfig) -> anyhow::Result<(Report, ActionLog)> {
    anyhow::ensure!(
        rtlab_sys::proc_thread::current_uid() == 0,
        "the hostile harness needs root (it starts the daemon and runs processes as other users)"
    );
    let started = Instant::now();
    let log = ActionLog {
        directory: tempfile::tempdir()?,
    };
    let log_path = log.path();
    let log_file = Arc::new(Mutex::new(BufWriter::new(std::fs::File::create(
        &log_path,
    )?)));
    let mut stage = start_attack_stage(config)?;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let readers = spawn_log_readers(&mut stage, &tally, &log_file);
    // Root's own socket, as `rtlab` run as root uses it (`rtlab_client::Client::connect`).
    let pinger = RootPinger::start(
        rtlab_core::rpc::root_socket_path(&stage.daemon.socket),
        config.answer_bound,
    );
    let mut watch = Watch::new(config.answer_bound);
    check_until_over(config, &mut stage, &pinger, &mut watch)?;
    let seconds_run = started.elapsed().as_secs_f64();
    let pings = end_attack(config, &mut stage, readers, pinger, &mut watch);
    let stage_record = StageRecord::put_away(stage);
    log_file
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush()
        .context("the action log")?;
    // For a violation replay does not bring back: the whole action log and the daemon's log
    // kept in `RTLAB_HOSTILE_KEEP` (a directory), to follow the threads it names through the run.
    if let (Some(keep), false) = (
        std::env::var_os("RTLAB_HOSTILE_KEEP"),
        watch.violations.is_empty(),
    ) {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).context("RTLAB_HOSTILE_KEEP")?;
        let name = |what: &str| keep.join(format!("hostile-{}.{what}", config.seed));
        std::fs::copy(&log_path, name("actions.jsonl")).context("keeping the action log")?;
        std::fs::write(name("daemon.log"), &stage_record.daemon_log)
            .context("keeping the daemon's log")?;
    }
    let granted_before_violation = match watch.violations.first() {
        Some(first) => sequence_before(config, first, &log_path)?
            .into_iter()
            .filter(|step| step.answer == "ok" && step.action.may_change_state())
            .filter(|step| step.sent_at_ns + 3_000_000_000 >= first.seen_at_ns)
            .collect(),
        None => Vec::new(),
    };
    let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    let report = AttackFindings {
        seconds_run,
        tally,
        watch,
        pings,
        stage_record,
        granted_before_violation,
    }
    .into_report(config);
    Ok((report, log))
}

/// Starts the stage with each attacker told the run's seed, its index, its senders, how long to
/// attack and its longest pause.
fn start_attack_stage(config: &RunConfig) -> anyhow::Result<Stage> {
    Stage::start(
        &config.cast,
        &config.attackers,
        |index, identity, uid_index, socket, tag| {
            let mut arguments = where_and_who(identity, uid_index, socket, tag);
            arguments.extend([
                "--seed".into(),
                config.seed.to_string(),
                "--index".into(),
                index.to_string(),
                "--senders".into(),
                config.senders_per_attacker.to_string(),
                "--seconds".into(),
                config.seconds.to_string(),
                "--max-pause-ms".into(),
                config.max_pause_ms.to_string(),
            ]);
            arguments
        },
    )
}

/// Starts a thread per attacker that reads its log lines, counts them into `tally` and writes
/// those a replay needs to `log_file`.
fn spawn_log_readers(
    stage: &mut Stage,
    tally: &Arc<Mutex<Tally>>,
    log_file: &Arc<Mutex<BufWriter<std::fs::File>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    stage
        .attackers
        .iter_mut()
        .filter_map(|attacker| attacker.take_stdout())
        .map(|stdout| {
            let tally = Arc::clone(tally);
            let log_file = Arc::clone(log_file);
            std::thread::spawn(move || read_attacker_log(stdout, &tally, &log_file))
        })
        .collect()
}

/// Reads one attacker's log lines until its stdout closes: each counted, the odd ones kept as
/// examples, and those that may have changed the daemon's state written to the action log.
fn read_attacker_log(
    stdout: impl BufRead,
    tally: &Mutex<Tally>,
    log_file: &Mutex<BufWriter<std::fs::File>>,
) {
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Ok(entry) = serde_json::from_str::<LogLine>(&line) else {
            continue;
        };
        tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .count(&entry);
        // Refused before the registry sees it: cannot have changed anything.
        let kept = entry.o != "rate_limited"
            && (entry.a.may_change_state() || matches!(entry.a, Action::Malformed { .. }));
        if kept {
            let mut file = log_file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(file, "{line}");
        }
    }
}

/// What the checks and root's pings found during an attack, counted as they come.
struct Watch {
    answer_bound: Duration,
    /// The first violations (at most 20).
    violations: Vec<Violation>,
    /// Violations seen: one per subject (a victim thread, a uid, the daemon) at each check.
    violations_seen: usize,
    /// Subjects seen in violation at a check after one where they were not.
    episodes: usize,
    /// The subjects in violation at the last check.
    open_episodes: BTreeSet<String>,
    daemon_restarts: usize,
    /// Each attacking uid's largest share seen.
    largest: BTreeMap<u32, UidShare>,
    largest_rtkit_ran: f64,
    checks: u64,
    late_answers: usize,
    late_in_hypervisor_stalls: usize,
    late_answer_samples: Vec<LateAnswer>,
}

impl Watch {
    fn new(answer_bound: Duration) -> Watch {
        Watch {
            answer_bound,
            violations: Vec::new(),
            violations_seen: 0,
            episodes: 0,
            open_episodes: BTreeSet::new(),
            daemon_restarts: 0,
            largest: BTreeMap::new(),
            largest_rtkit_ran: 0.0,
            checks: 0,
            late_answers: 0,
            late_in_hypervisor_stalls: 0,
            late_answer_samples: Vec::new(),
        }
    }

    /// Keeps each uid's largest share and the most RealtimeKit1's threads ran.
    fn note_shares(&mut self, shares: Vec<UidShare>) {
        for share in shares {
            self.largest_rtkit_ran = self.largest_rtkit_ran.max(share.rtkit_ran);
            let entry = self.largest.entry(share.uid).or_insert(share);
            if share.held + share.rtkit_ran > entry.held + entry.rtkit_ran {
                *entry = share;
            }
        }
    }

    /// Counts late answers: those a hypervisor stall covers apart, the others added to `seen` as
    /// violations; the first ones kept as samples.
    fn note_late(&mut self, late: Vec<LateAnswer>, seen: &mut Vec<Violation>, now: u64) {
        self.late_answers += late.len();
        for answer in &late {
            match answer.lateness {
                Lateness::Hypervisor => self.late_in_hypervisor_stalls += 1,
                Lateness::Daemon => seen.push(Violation {
                    kind: ViolationKind::Unanswered,
                    detail: answer.describe(self.answer_bound),
                    seen_at_ns: now,
                }),
            }
        }
        keep_first(&mut self.late_answer_samples, late);
    }

    /// Counts one check's violations, and the subjects newly in violation as episodes.
    fn count_check(&mut self, seen: Vec<Violation>) {
        let keys: BTreeSet<String> = seen.iter().map(Violation::subject).collect();
        self.episodes += keys.difference(&self.open_episodes).count();
        self.open_episodes = keys;
        self.violations_seen += seen.len();
        self.violations.extend(seen);
        self.violations.truncate(20);
    }

    /// Counts the violations found after the last check (one episode, if any).
    fn count_after_last_check(&mut self, last: Vec<Violation>) {
        if !last.is_empty() {
            self.violations_seen += last.len();
            self.episodes += 1;
            self.violations.extend(last);
            self.violations.truncate(20);
        }
    }
}

/// Checks every [`CHECK_INTERVAL`] until the attack's time is up, a stop is asked for, or (unless
/// `keep_going`) a violation is seen; a daemon that exited is started again.
fn check_until_over(
    config: &RunConfig,
    stage: &mut Stage,
    pinger: &RootPinger,
    watch: &mut Watch,
) -> anyhow::Result<()> {
    let attack_until = Instant::now() + Duration::from_secs_f64(config.seconds);
    // The checks run above every priority RealtimeKit1 grants: at SCHED_OTHER, the attackers'
    // SCHED_RR spinners starved them, and a thread granted, spinning and demoted between two
    // late checks was SCHED_RR at neither, so nothing it ran was metered.
    let above_rtkit = AboveRealtimeKit::enter();
    while Instant::now() < attack_until && !config.stop.load(Ordering::Relaxed) {
        let tick = Instant::now();
        let CheckFindings {
            violations: mut seen,
            shares,
        } = stage.checker.check();
        watch.checks += 1;
        watch.note_shares(shares);
        let now = rtlab_sys::clock::monotonic_ns();
        note_ping_trouble(pinger, watch, &mut seen, now);
        // First: a daemon that is gone (or going: a refused ping comes first) also leaves
        // root's ping unanswered.
        if !seen.is_empty() {
            std::thread::sleep(Duration::from_secs(1));
        }
        if stage.daemon.failed() {
            seen.insert(0, daemon_failed(stage, now));
        }
        let daemon_gone = seen
            .iter()
            .any(|violation| violation.kind == ViolationKind::DaemonExited);
        watch.count_check(seen);
        if watch.violations_seen > 0 && !config.keep_going {
            break;
        }
        if daemon_gone {
            watch.daemon_restarts += 1;
            // A new daemon must not inherit the checks' SCHED_FIFO.
            above_rtkit
                .aside(|| stage.restart_daemon(&config.cast.daemon))
                .context("restarting the daemon after it exited")?;
        }
        std::thread::sleep(CHECK_INTERVAL.saturating_sub(tick.elapsed()));
    }
    Ok(())
}

/// Adds to `seen` what root's pings show since the last check: one unanswered for
/// [`HUNG_AFTER`] (a hung daemon), late answers, and pings refused or broken.
fn note_ping_trouble(pinger: &RootPinger, watch: &mut Watch, seen: &mut Vec<Violation>, now: u64) {
    // A late answer is judged when it comes (with the steal time meanwhile); one that has
    // not come for seconds is a hung daemon.
    if let Some(waited) = pinger
        .outstanding_for(now)
        .filter(|waited| *waited > HUNG_AFTER)
    {
        seen.push(Violation {
            kind: ViolationKind::Unanswered,
            detail: format!(
                "root's ping unanswered for {} ms (bound {} ms)",
                waited.as_millis(),
                watch.answer_bound.as_millis()
            ),
            seen_at_ns: now,
        });
    }
    watch.note_late(pinger.take_late(), seen, now);
    for failure in pinger.take_failures() {
        seen.push(Violation {
            kind: ViolationKind::Unanswered,
            detail: failure,
            seen_at_ns: now,
        });
    }
}

/// The violation of a daemon that failed: its exit status (or that it is still reverting) and
/// the lines of its log that say why.
fn daemon_failed(stage: &mut Stage, now: u64) -> Violation {
    let status = stage
        .daemon
        .exited()
        .map_or("still reverting".to_owned(), |status| status.to_string());
    Violation {
        kind: ViolationKind::DaemonExited,
        detail: format!(
            "the daemon failed ({status}): {}",
            panic_lines(&stage.daemon.log_text())
        ),
        seen_at_ns: now,
    }
}

/// Ends the attack: stops root's pings, lets the attackers end (or kills them), waits for their
/// log readers, and counts the pings answered or refused after the last check. Returns the
/// pings' figures.
fn end_attack(
    config: &RunConfig,
    stage: &mut Stage,
    readers: Vec<std::thread::JoinHandle<()>>,
    pinger: RootPinger,
    watch: &mut Watch,
) -> crate::root_ping::PingFigures {
    pinger.stop();
    // The attackers stop on their own at `seconds`; at a violation, or if one hangs, they are
    // killed (dropping them closes their stdout, which ends the readers).
    let grace = if (watch.violations_seen == 0 || config.keep_going)
        && !config.stop.load(Ordering::Relaxed)
    {
        Duration::from_secs(15)
    } else {
        Duration::ZERO
    };
    if grace.is_zero() {
        // The request that did it may still be waiting for its answer (or learning that its
        // connection died): a moment for its log line.
        std::thread::sleep(Duration::from_secs(1));
    }
    for attacker in &mut stage.attackers {
        attacker.wait_for_end(grace);
    }
    stage.attackers.clear();
    for reader in readers {
        let _ = reader.join();
    }
    // The pings answered (or refused) after the last check count too.
    let PingerEnd {
        figures: pings,
        late,
        failures,
    } = pinger.join();
    let mut last: Vec<Violation> = Vec::new();
    let now = rtlab_sys::clock::monotonic_ns();
    watch.note_late(late, &mut last, now);
    last.extend(failures.into_iter().map(|failure| Violation {
        kind: ViolationKind::Unanswered,
        detail: failure,
        seen_at_ns: now,
    }));
    watch.count_after_last_check(last);
    pings
}

/// What the stage showed at the end of an attack, read before it is stopped.
struct StageRecord {
    overrun_us: u64,
    attacker_threads: Vec<crate::world::ProcessInfo>,
    victim_threads: usize,
    daemon_log: String,
    daemon_log_tail: Vec<String>,
    daemon_demotions: Vec<String>,
    daemon_stopped_by_sigterm: bool,
}

impl StageRecord {
    /// Reads the checker's figures, the attackers' threads and the daemon's log, then stops the
    /// stage.
    fn put_away(stage: Stage) -> StageRecord {
        let overrun_us = stage.checker.overrun_ns() / 1_000;
        let attacker_threads = stage
            .world
            .attackers
            .iter()
            .map(|attacker| attacker.process.clone())
            .collect();
        let victim_threads = stage.checker.victim_threads();
        let daemon_log = stage.daemon.log_text();
        let daemon_log_tail: Vec<String> = {
            let lines: Vec<&str> = daemon_log.lines().collect();
            lines[lines.len().saturating_sub(20)..]
                .iter()
                .map(|line| line.to_string())
                .collect()
        };
        let daemon_demotions: Vec<String> = daemon_log
            .lines()
            .filter(|line| line.contains("demoted"))
            .take(20)
            .map(str::to_owned)
            .collect();
        let daemon_stopped_by_sigterm = stage.stop();
        StageRecord {
            overrun_us,
            attacker_threads,
            victim_threads,
            daemon_log,
            daemon_log_tail,
            daemon_demotions,
            daemon_stopped_by_sigterm,
        }
    }
}

/// Everything an attack found, before it is a [`Report`].
struct AttackFindings {
    seconds_run: f64,
    tally: Tally,
    watch: Watch,
    pings: crate::root_ping::PingFigures,
    stage_record: StageRecord,
    granted_before_violation: Vec<Step>,
}

impl AttackFindings {
    /// The report of the attack run with `config` (no replay yet).
    fn into_report(self, config: &RunConfig) -> Report {
        let AttackFindings {
            seconds_run,
            tally,
            watch,
            pings,
            stage_record,
            granted_before_violation,
        } = self;
        Report {
            seed: config.seed,
            seconds_planned: config.seconds,
            seconds_run,
            attackers: config.attackers.iter().map(Identity::describe).collect(),
            daemon_user_limit: config.cast.daemon.user_limit,
            checked_limit: config.cast.limit,
            slack: crate::checker::SLACK,
            overrun_us: stage_record.overrun_us,
            victim_threads: stage_record.victim_threads,
            requests_tried: tally.requests,
            actions: tally.actions,
            granted: tally.granted,
            rtkit_calls: tally.rtkit_calls,
            rtkit_granted: tally.rtkit_granted,
            outcomes: tally.outcomes,
            oddities: tally.oddities,
            attacker_threads: stage_record.attacker_threads,
            granted_before_violation,
            daemon_log_tail: stage_record.daemon_log_tail,
            daemon_demotions: stage_record.daemon_demotions,
            checks: watch.checks,
            largest_shares: watch.largest.into_values().collect(),
            largest_rtkit_ran: watch.largest_rtkit_ran,
            pings_asked: pings.asked,
            pings_answered: pings.answered,
            worst_answer_ms: pings.worst_ms,
            p99_answer_ms: pings.p99_ms,
            median_answer_ms: pings.median_ms,
            answer_bound_ms: config.answer_bound.as_millis() as u64,
            late_answers: watch.late_answers,
            late_in_hypervisor_stalls: watch.late_in_hypervisor_stalls,
            late_answer_samples: watch.late_answer_samples,
            violations_total: watch.violations_seen,
            violation_episodes: watch.episodes,
            daemon_restarts: watch.daemon_restarts,
            violations: watch.violations,
            replay: None,
            daemon_stopped_by_sigterm: stage_record.daemon_stopped_by_sigterm,
        }
    }
}

/// The lines of a daemon's log that say why it stopped: a panic's message and where.
fn panic_lines(log: &str) -> String {
    log.lines()
        .filter(|line| {
            line.contains("panicked") || line.contains("overflow") || line.contains("rtlab: error")
        })
        .take(6)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The logged requests sent before `violation` was seen, in the order they were sent.
fn sequence_before(
    config: &RunConfig,
    violation: &Violation,
    log_path: &std::path::Path,
) -> anyhow::Result<Vec<Step>> {
    let text = std::fs::read_to_string(log_path)?;
    let mut entries: Vec<LogLine> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|entry: &LogLine| entry.t <= violation.seen_at_ns)
        .collect();
    entries.sort_by_key(|entry| entry.t);
    Ok(entries
        .into_iter()
        .map(|entry| Step {
            attacker: entry.w,
            identity: config.attackers[entry.w].describe(),
            action: entry.a,
            answer: entry.o,
            sent_at_ns: entry.t,
        })
        .collect())
}

/// One replay a shrinking search tries: a sequence of requests and the pace to send them at.
struct ReplayAttempt {
    steps: Vec<Step>,
    pace: Pace,
}

fn replay_and_shrink(
    config: &RunConfig,
    violation: &Violation,
    log_path: &std::path::Path,
) -> anyhow::Result<Replay> {
    let everything = sequence_before(config, violation, log_path)?;
    let changing_within = |seconds: u64| -> Vec<Step> {
        everything
            .iter()
            .filter(|step| step.action.may_change_state())
            .filter(|step| {
                step.sent_at_ns
                    .saturating_add(seconds.saturating_mul(1_000_000_000))
                    >= violation.seen_at_ns
            })
            .cloned()
            .collect()
    };
    let sequential =
        |steps: &[Step]| replay(config, steps, &violation.kind, Pace::Sequential).unwrap_or(false);
    let as_sent =
        |steps: &[Step]| replay(config, steps, &violation.kind, Pace::AsSent).unwrap_or(false);
    // Tried in turn, each only if the one before did not show the violation: the requests that
    // may change state sent in the last 10 s, one after the other; those of the last 60 s; all
    // of them (up to 20,000); every request; the last 10 s at the pace they were sent (for races
    // that need the time between requests). Replays take seconds each, and a benchmark's
    // violation may follow many minutes of requests.
    let all_changing = changing_within(u64::MAX);
    let attempt = |steps: Vec<Step>, pace: Pace| ReplayAttempt { steps, pace };
    let mut attempts: Vec<ReplayAttempt> = vec![
        attempt(changing_within(10), Pace::Sequential),
        attempt(changing_within(60), Pace::Sequential),
    ];
    if all_changing.len() <= 20_000 {
        attempts.push(attempt(all_changing.clone(), Pace::Sequential));
        if everything.len() <= 20_000 && everything.len() > all_changing.len() {
            attempts.push(attempt(everything.clone(), Pace::Sequential));
        }
    }
    attempts.push(attempt(changing_within(10), Pace::AsSent));
    attempts.dedup_by(|later, earlier| {
        later.steps.len() == earlier.steps.len() && later.pace == earlier.pace
    });
    let deadline = Instant::now() + config.shrink_time;
    let mut tries = 0;
    let mut found = None;
    for ReplayAttempt { steps, pace } in attempts {
        if tries >= config.shrink_tries || Instant::now() > deadline || config.stopped() {
            break;
        }
        tries += 1;
        let reproduced = match pace {
            Pace::Sequential => sequential(&steps),
            Pace::AsSent => as_sent(&steps),
        };
        if reproduced {
            found = Some((steps, pace));
            break;
        }
    }
    let Some((sequence, pace)) = found else {
        let tail = everything.len().saturating_sub(30);
        return Ok(Replay {
            violation: violation.clone(),
            sequence_length: everything.len(),
            reproduced: false,
            pace: "sequential (the last 10 s, 60 s, all), then the last 10 s as sent".to_owned(),
            shrunk: everything[tail..].to_vec(),
            tries,
            out_of_tries: false,
        });
    };
    let budget = config.shrink_tries.saturating_sub(tries);
    let in_time = || Instant::now() < deadline && !config.stopped();
    let shrunk = match pace {
        Pace::Sequential => ddmin(&sequence, sequential, budget, in_time),
        Pace::AsSent => ddmin(&sequence, as_sent, budget, in_time),
    };
    Ok(Replay {
        violation: violation.clone(),
        sequence_length: sequence.len(),
        reproduced: true,
        pace: format!("{pace:?}"),
        shrunk: shrunk.items,
        tries: shrunk.tries + tries,
        out_of_tries: shrunk.out_of_tries,
    })
}

/// How a replay spaces its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pace {
    /// One after the other, each as soon as the last was answered and checked.
    Sequential,
    /// At the times they were sent in the run (relative to the first), checked every 100 ms
    /// meanwhile.
    AsSent,
}

/// An attacker's first arguments: the daemon's socket, its tag, and which user it is.
fn where_and_who(
    identity: Identity,
    uid_index: usize,
    socket: &std::path::Path,
    tag: &str,
) -> Vec<String> {
    vec![
        "--socket".into(),
        socket.display().to_string(),
        "--tag".into(),
        tag.into(),
        "--uid".into(),
        identity.uid.to_string(),
        "--uid-index".into(),
        uid_index.to_string(),
    ]
}

/// A fresh stage whose attackers send nothing of their own: each sends what it is given on its
/// stdin (a replay, a directed probe).
pub fn quiet_stage(config: &RunConfig) -> anyhow::Result<Stage> {
    Stage::start(
        &config.cast,
        &config.attackers,
        |_, identity, uid_index, socket, tag| {
            let mut arguments = where_and_who(identity, uid_index, socket, tag);
            arguments.extend(["--senders".into(), "0".into()]);
            arguments
        },
    )
}

/// Sends `steps` one at a time, each by the fresh counterpart of the attacker process that sent
/// it, to a fresh stage, checking the kernel after each; whether a violation of `kind` was seen.
fn replay(
    config: &RunConfig,
    steps: &[Step],
    kind: &ViolationKind,
    pace: Pace,
) -> anyhow::Result<bool> {
    let mut stage = quiet_stage(config)?;
    let matches = |violations: &[Violation]| violations.iter().any(|seen| &seen.kind == kind);
    let mut reproduced = false;
    let began = Instant::now();
    let first_sent = steps.first().map_or(0, |step| step.sent_at_ns);
    for step in steps {
        if config.stopped() {
            break;
        }
        if pace == Pace::AsSent {
            let due = began + Duration::from_nanos(step.sent_at_ns.saturating_sub(first_sent));
            while Instant::now() < due && !reproduced {
                std::thread::sleep(
                    CHECK_INTERVAL.min(due.saturating_duration_since(Instant::now())),
                );
                reproduced = matches(&stage.checker.check().violations);
            }
        }
        if reproduced || (*kind == ViolationKind::DaemonExited && stage.daemon.failed()) {
            reproduced = true;
            break;
        }
        let attacker = &mut stage.attackers[step.attacker];
        attacker.write_line(&serde_json::to_string(&step.action)?)?;
        attacker.read_line()?;
        if matches(&stage.checker.check().violations) {
            reproduced = true;
            break;
        }
    }
    if !reproduced {
        // A share is used up by spinning, over seconds: checked until the window has passed.
        let until = Instant::now() + kind.settle_time(stage.checker.share_rule());
        loop {
            std::thread::sleep(CHECK_INTERVAL);
            reproduced = match kind {
                ViolationKind::DaemonExited => stage.daemon.failed(),
                _ => stage
                    .checker
                    .check()
                    .violations
                    .iter()
                    .any(|seen| &seen.kind == kind),
            };
            if reproduced || Instant::now() >= until || config.stopped() {
                break;
            }
        }
    }
    stage.stop();
    Ok(reproduced)
}
