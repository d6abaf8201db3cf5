//! Lateness judged by the program's own cycle start (`trace record --cycle-marker`), as JACK
//! counts xruns, online and in bounded memory (a few words per thread), so the whole-trace
//! findings and `trace watch`'s summary count the same.
//!
//! A cycle marker is the moment the program began a cycle (JACK's preset: `JackEngine::ProcessNext`
//! or `ProcessCurrent`, where the engine has decided whether the last cycle's work is finished). The threads the cycle drives
//! are those the marker's thread wakes. At each marker, for each driven thread (read from
//! jack2's `JackEngine::Process`, `ProcessCurrent`, `CheckXRun` and
//! `JackTimedDriver::ProcessWait`):
//!
//! - the thread is *unfinished* when it is still in an activation (woken, not yet blocked
//!   again), or, when the trace has its work-done markers (the return of the function that
//!   does its cycle's work), when none came since the previous cycle start: a thread that
//!   finishes one cycle's work and goes on at once with the next never blocks in between. A
//!   finished thread lets the program switch to the next cycle's work.
//! - an unfinished thread within two periods of the last switch is a missed deadline (JACK:
//!   "client not finished", reported for the first failing cycle only); at two periods or more
//!   the program switches to the next cycle's work anyway (JACK's timeout) without counting one.
//! - when the marker's thread did not block (sleep) between the previous marker and this one,
//!   the previous cycle ended past its successor's start and the program began this one at
//!   once: a missed deadline for every driven thread (JACK's timed driver: "Process XRun").
//! - a marker with no activation of the thread since the previous one is a missed period.
//!
//! Each miss is charged to the thread's activation under way (or its next one), whose critical
//! path then says who held it back.
//!
//! PipeWire counts otherwise ([`CycleRule::Pipewire`], `--cycle-marker pipewire`; read from
//! PipeWire 0.3.65's `impl-node.c`, `module-profiler.c` and `pipewire-jack.c`). Its profiler
//! logs a line at every *complete* (the driver's `process_node` once every follower signalled)
//! and every *incomplete* (the driver's `node_ready`, a new cycle, while a follower has not
//! signalled: then `node_ready` also runs the driver's `process_node`, a second line), each
//! with every follower's status; pw-top's ERR and rtlab's count of the profile are the lines
//! whose follower is not finished. Its driver's timer catches up after a stall one cycle
//! after another. So, per follower (a thread the driver's thread wakes):
//!
//! - a cycle start (its trigger: the driver's thread waking it, else the marker) when it has
//!   not signalled since the last one: **two** unfinished cycles (the incomplete line and its
//!   complete line);
//! - its signal (its cycle's work done: a work-done marker, else its waking the driver's
//!   thread) that completes the graph while a trigger came since it woke: **one** — it reads
//!   that trigger at once and is awake again when the driver logs the complete line.

use super::Activation;
use std::collections::VecDeque;

/// How the threads a cycle marker drives are judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CycleRule {
    /// As JACK counts xruns (the module's first list).
    #[default]
    Jack,
    /// As PipeWire's profiler counts unfinished cycles (the module's second list).
    Pipewire,
}

impl CycleRule {
    pub fn name(self) -> &'static str {
        match self {
            CycleRule::Jack => "jack",
            CycleRule::Pipewire => "pipewire",
        }
    }

    /// `--cycle-rule`'s word read back: `pipewire`, else JACK's rule.
    pub fn from_name(word: &str) -> CycleRule {
        if word == CycleRule::Pipewire.name() {
            CycleRule::Pipewire
        } else {
            CycleRule::Jack
        }
    }
}

/// Intervals between markers kept for the period.
const INTERVALS_KEPT: usize = 64;
/// Intervals needed before the rules are applied (the period must be known).
const INTERVALS_NEEDED: usize = 8;
/// Clocks followed at most (threads hitting cycle markers: one per program's cycle).
pub(crate) const CLOCKS_KEPT: usize = 8;
/// Threads judged by the markers at most (those the marker's thread wakes, first come).
pub(crate) const DRIVEN_KEPT: usize = 64;
/// PipeWire's rule: a marker up to this share of a period early is on the driver's schedule.
const PIPEWIRE_EARLY_PERCENT: u64 = 15;
/// A program keeping its period in whole microseconds compares with up to this much less.
const PERIOD_ROUNDING_NS: u64 = 2_000;

/// The program's clock, from its cycle markers.
#[derive(Clone, Debug, Default)]
pub(crate) struct CycleClock {
    /// The thread that hit the markers (the latest one).
    pub tid: i32,
    pub n_markers: u64,
    pub last_ns: u64,
    intervals: VecDeque<u64>,
    /// The period: the median of the kept intervals (0: unknown).
    pub period_ns: u64,
    /// The marker's thread blocked since the last marker.
    pub blocked_since_marker: bool,
    /// The threads the marker's thread woke (judged by the markers).
    pub driven: Vec<i32>,
    /// Cycles that began at once after the previous one (it overran).
    pub overruns: u64,
    /// The last marker began a cycle at once after an overrun.
    restarted: bool,
    /// PipeWire's rule: a trigger (the clock's thread waking a follower) came since the last
    /// marker: that marker is the same cycle's.
    pipewire_triggered: bool,
    /// PipeWire's rule: when the driver meant the last cycle to start (its timer's schedule).
    pipewire_schedule_ns: Option<u64>,
    /// PipeWire's rule: the threads the clock's thread woke since it last blocked (this run).
    woken_this_run: Vec<i32>,
    /// PipeWire's rule: per thread the clock's thread wakes, what tells a follower from
    /// another thread it wakes (at most [`DRIVEN_KEPT`]).
    pipewire_wakes: Vec<PipewireWakes>,
}

/// How one thread the driver's thread wakes behaves (PipeWire's rule): a follower is triggered
/// in the driver's timer handler, before the handler re-arms the timer (the marker), and signals
/// back by waking the driver's thread. The driver's thread also wakes other threads: the
/// server's main thread (the profiler's flush, every 72 ms), `migration/N`, kworkers — after
/// the re-arm or in runs without one, and they never signal; their wake-ups are no cycle.
#[derive(Clone, Copy, Debug, Default)]
struct PipewireWakes {
    tid: i32,
    /// Runs of the clock's thread that woke it.
    woken: u32,
    /// Of those, runs in which a marker came after its wake-up.
    before_marker: u32,
    /// It woke the clock's thread (a signal) at least once.
    signalled: bool,
}

impl CycleClock {
    /// A marker at `time`: updates the period; returns whether the previous cycle overran
    /// (the marker's thread never blocked since it), once the period is known.
    pub(crate) fn marker(&mut self, time: u64, tid: i32) -> bool {
        let overran = self.n_markers > 0 && !self.blocked_since_marker && tid == self.tid;
        // The period from the cycles begun on the program's schedule: not the one begun at
        // once after an overrun, nor the one after it (a restarted clock sleeps a period from
        // when it restarted, plus its wake-up latency).
        if self.n_markers > 0 && !overran && !self.restarted {
            if self.intervals.len() == INTERVALS_KEPT {
                self.intervals.pop_front();
            }
            self.intervals.push_back(time.saturating_sub(self.last_ns));
            self.period_ns = period_of(&self.intervals);
        }
        self.restarted = overran;
        self.tid = tid;
        self.n_markers += 1;
        self.last_ns = time;
        self.blocked_since_marker = false;
        let judged = overran && self.period_ns > 0;
        self.overruns += u64::from(judged);
        judged
    }

    /// PipeWire's rule: whether a marker (`trigger` false) or the clock's thread waking a
    /// follower (`trigger` true) at `time` starts a cycle. A trigger does, once until the next
    /// marker, which is then its cycle's (the driver re-arms its timer after triggering). A
    /// marker without a trigger does when it comes on the driver's schedule: a period after
    /// the last cycle began, or at once while the driver catches up after a stall (its timer
    /// fires for every period missed, one cycle after another); not another timer the
    /// driver's thread re-arms in between (the profiler's flush).
    pub(crate) fn pipewire_cycle_start(&mut self, time: u64, trigger: bool) -> bool {
        if trigger {
            if std::mem::replace(&mut self.pipewire_triggered, true) {
                return false;
            }
        } else if std::mem::take(&mut self.pipewire_triggered) {
            return false;
        }
        let period = self.period_ns;
        let on_schedule = match self.pipewire_schedule_ns {
            Some(last) if period > 0 && !trigger => {
                time + period * PIPEWIRE_EARLY_PERCENT / 100 >= last + period
            }
            _ => true,
        };
        if !on_schedule {
            return false;
        }
        self.pipewire_schedule_ns = Some(match self.pipewire_schedule_ns {
            // Late: the driver's timer meant it a period after the last.
            Some(last) if period > 0 && time > last + period + period / 2 => last + period,
            _ => time,
        });
        true
    }

    /// `waker` woke `tid`: a thread the cycle drives when `waker` is the marker's thread.
    pub(crate) fn woke(&mut self, waker: i32, tid: i32) -> bool {
        if self.n_markers == 0 || waker != self.tid || tid == waker {
            return false;
        }
        if !self.driven.contains(&tid) && self.driven.len() < DRIVEN_KEPT {
            self.driven.push(tid);
        }
        if !self.woken_this_run.contains(&tid) && self.woken_this_run.len() < DRIVEN_KEPT {
            self.woken_this_run.push(tid);
            if let Some(wakes) = self.pipewire_wakes_of(tid) {
                wakes.woken += 1;
            }
        }
        true
    }

    /// The clock's thread blocked: its run ended.
    pub(crate) fn slept(&mut self) {
        self.blocked_since_marker = true;
        self.woken_this_run.clear();
    }

    /// PipeWire's rule: the threads the clock's thread woke in this run came before a marker.
    pub(crate) fn pipewire_run_marker(&mut self) {
        for tid in std::mem::take(&mut self.woken_this_run) {
            if let Some(wakes) = self.pipewire_wakes_of(tid) {
                wakes.before_marker += 1;
            }
        }
    }

    /// PipeWire's rule: `tid` woke the clock's thread (a signal, if it is a follower).
    pub(crate) fn pipewire_woken_by(&mut self, tid: i32) {
        if self.driven.contains(&tid) {
            if let Some(wakes) = self.pipewire_wakes_of(tid) {
                wakes.signalled = true;
            }
        }
    }

    /// PipeWire's rule: `tid` is a follower of this clock's driver — it signals back, and most
    /// runs that woke it re-armed the driver's timer after waking it (a trigger in the timer's
    /// handler). A thread is judged from its second such run on.
    pub(crate) fn is_pipewire_follower(&self, tid: i32) -> bool {
        self.pipewire_wakes.iter().any(|wakes| {
            wakes.tid == tid
                && wakes.signalled
                && wakes.before_marker >= 1
                && 2 * wakes.before_marker > wakes.woken.saturating_sub(1)
        })
    }

    /// The followers (PipeWire's rule), in the order they were first woken.
    pub(crate) fn pipewire_followers(&self) -> Vec<i32> {
        self.driven
            .iter()
            .copied()
            .filter(|&tid| self.is_pipewire_follower(tid))
            .collect()
    }

    fn pipewire_wakes_of(&mut self, tid: i32) -> Option<&mut PipewireWakes> {
        let index = match self
            .pipewire_wakes
            .iter()
            .position(|wakes| wakes.tid == tid)
        {
            Some(index) => index,
            None if self.pipewire_wakes.len() < DRIVEN_KEPT => {
                self.pipewire_wakes.push(PipewireWakes {
                    tid,
                    ..PipewireWakes::default()
                });
                self.pipewire_wakes.len() - 1
            }
            None => return None,
        };
        self.pipewire_wakes.get_mut(index)
    }
}

/// The median of the intervals, with at least [`INTERVALS_NEEDED`] of them; 0 otherwise. (Not
/// a mean: the late cycles of a disturbed stretch would pull it up, and the two-period rule is
/// judged to microseconds.)
fn period_of(intervals: &VecDeque<u64>) -> u64 {
    if intervals.len() < INTERVALS_NEEDED {
        return 0;
    }
    let mut sorted: Vec<u64> = intervals.iter().copied().collect();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// One thread judged by the markers.
#[derive(Clone, Debug, Default)]
pub(crate) struct CycleJudge {
    /// The last marker at which the program switched to the next cycle's work for it.
    last_switch_ns: Option<u64>,
    /// Deadlines missed so far (both kinds), and markers with no activation since the last.
    pub deadlines_missed: u64,
    pub missed_periods: u64,
    /// Misses at markers while it had no activation under way: for its next one, with what
    /// held the cycle's thread back.
    pub pending: u32,
    pending_delay: Option<Activation>,
    pub activated_since_marker: bool,
    seen_activation: bool,
    /// The trace has its work-done markers: finished means one came since the last cycle start.
    uses_work_done: bool,
    done_since_marker: bool,
    /// Its late activations (misses charged), the first [`super::streaming::LATE_KEPT`].
    pub late: Vec<Activation>,
    /// PipeWire's rule: its follower state as the driver sees it.
    pipewire: PipewireFollower,
}

/// One follower as PipeWire's driver sees it (`pw_node_activation`): whether it signalled since
/// its last trigger, and whether a trigger came since it woke (it reads it at once when it
/// signals).
#[derive(Clone, Copy, Debug, Default)]
struct PipewireFollower {
    seen_cycle: bool,
    /// Signals still awaited this cycle (1 after a trigger; PipeWire's `state->pending`).
    pending: i32,
    trigger_unread: bool,
    awaiting_run: bool,
    /// Signals are taken from work-done markers (else from its waking the driver's thread).
    uses_work_done: bool,
}

impl CycleJudge {
    /// A marker at `time`; `current` is its activation under way, if any. Returns the deadlines
    /// missed at this marker (also charged to `current`, or kept for the next activation).
    ///
    /// `cycle_delay` is the activation of the marker's thread that began this cycle, when it
    /// waited for a CPU (a cycle that came late): the misses charged here are then also its
    /// wait's (who held that thread), the first step of the late activation's path.
    pub(crate) fn marker(
        &mut self,
        time: u64,
        period_ns: u64,
        overran: bool,
        current: Option<&mut Activation>,
        cycle_delay: Option<&Activation>,
    ) -> u32 {
        let unfinished = if self.uses_work_done {
            !self.done_since_marker
        } else {
            current.is_some()
        };
        self.done_since_marker = false;
        if self.seen_activation && !self.activated_since_marker {
            self.missed_periods += 1;
        }
        self.activated_since_marker = false;
        let mut misses = u32::from(overran);
        match self.last_switch_ns {
            Some(last_switch) if unfinished && period_ns > 0 => {
                let two_periods = (2 * period_ns).saturating_sub(PERIOD_ROUNDING_NS);
                if time.saturating_sub(last_switch) >= two_periods {
                    self.last_switch_ns = Some(time);
                } else {
                    misses += 1;
                }
            }
            _ => self.last_switch_ns = Some(time),
        }
        self.charge(misses, current, cycle_delay);
        misses
    }

    /// Charges `misses` to the activation under way, or keeps them for the next.
    fn charge(
        &mut self,
        misses: u32,
        current: Option<&mut Activation>,
        cycle_delay: Option<&Activation>,
    ) {
        if misses == 0 {
            return;
        }
        self.deadlines_missed += u64::from(misses);
        match current {
            Some(activation) => {
                activation.cycle_deadlines += misses;
                if let Some(delay) = cycle_delay {
                    held_back_by(activation, delay);
                }
            }
            None => {
                self.pending += misses;
                if cycle_delay.is_some() {
                    self.pending_delay = cycle_delay.copied();
                }
            }
        }
    }

    /// PipeWire's rule: a cycle marker of its clock (missed periods, as the JACK rule counts
    /// them).
    pub(crate) fn pipewire_marker(&mut self) {
        if self.seen_activation && !self.activated_since_marker {
            self.missed_periods += 1;
        }
        self.activated_since_marker = false;
    }

    /// PipeWire's rule: the driver's thread woke this follower (its trigger): it reads its
    /// triggers when it next gets a CPU.
    pub(crate) fn pipewire_woken(&mut self) {
        self.pipewire.awaiting_run = true;
    }

    /// PipeWire's rule: a new cycle for this follower: two unfinished cycles when it has not
    /// signalled the last.
    pub(crate) fn pipewire_cycle_start(
        &mut self,
        current: Option<&mut Activation>,
        cycle_delay: Option<&Activation>,
    ) -> u32 {
        let follower = &mut self.pipewire;
        let misses = if follower.seen_cycle && follower.pending > 0 {
            2
        } else {
            0
        };
        follower.seen_cycle = true;
        follower.pending = 1;
        follower.trigger_unread = true;
        self.charge(misses, current, cycle_delay);
        misses
    }

    /// PipeWire's rule: it got its CPU after a wake-up: it read its triggers.
    pub(crate) fn pipewire_ran(&mut self) {
        if std::mem::take(&mut self.pipewire.awaiting_run) {
            self.pipewire.trigger_unread = false;
        }
    }

    /// PipeWire's rule: it signalled the driver (its cycle's work done). `from_marker`: a
    /// work-done marker (then its wake-ups of the driver's thread are not signals).
    pub(crate) fn pipewire_signalled(
        &mut self,
        from_marker: bool,
        current: Option<&mut Activation>,
    ) -> u32 {
        let follower = &mut self.pipewire;
        if from_marker {
            follower.uses_work_done = true;
        } else if follower.uses_work_done {
            return 0;
        }
        if !follower.seen_cycle {
            return 0;
        }
        // It completes the graph (pending reaches 0) with a trigger unread: it reads it at
        // once and is awake when the driver logs the complete line.
        let misses = u32::from(follower.pending == 1 && follower.trigger_unread);
        follower.trigger_unread = false;
        follower.pending -= 1;
        self.charge(misses, current, None);
        misses
    }

    /// It finished its cycle's work (a work-done marker).
    pub(crate) fn work_done(&mut self) {
        self.uses_work_done = true;
        self.done_since_marker = true;
    }

    /// An activation starts: it takes the misses waiting for it.
    pub(crate) fn activated(&mut self, activation: &mut Activation) {
        activation.cycle_deadlines += std::mem::take(&mut self.pending);
        if let Some(delay) = self.pending_delay.take() {
            held_back_by(activation, &delay);
        }
        self.activated_since_marker = true;
        self.seen_activation = true;
    }

    /// An activation ended: kept when misses were charged to it.
    pub(crate) fn completed(&mut self, activation: &Activation) {
        if activation.cycle_deadlines > 0 && self.late.len() < super::streaming::LATE_KEPT {
            self.late.push(*activation);
        }
    }
}

/// The wait of the cycle's thread (`delay`) as the gap before `activation`, when it is longer
/// than the gap already known: the cycle came late because that thread waited, and who held
/// it is the first step of the activation's critical path.
fn held_back_by(activation: &mut Activation, delay: &Activation) {
    if delay.wait_ns <= activation.gap_ns {
        return;
    }
    activation.gap_ns = delay.wait_ns;
    activation.gap_holder = delay.top_holder;
    activation.gap_holder_ns = delay.top_holder_ns;
    activation.gap_idle_ns = delay.wait_idle_ns;
    activation.gap_throttled_ns = delay.wait_throttled_ns;
    activation.gap_irq_ns = delay.wait_irq_ns;
    activation.gap_irq_source = delay.wait_irq_source;
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: u64 = 2_666_667;

    fn clock_with_period() -> CycleClock {
        let mut clock = CycleClock::default();
        for index in 0..10 {
            clock.blocked_since_marker = true;
            assert!(!clock.marker(index * PERIOD, 7));
        }
        clock
    }

    #[test]
    fn the_period_is_the_markers_mean_interval() {
        let mut clock = clock_with_period();
        assert!(clock.period_ns.abs_diff(PERIOD) <= 1, "{}", clock.period_ns);
        assert!(clock.woke(7, 42));
        assert!(!clock.woke(8, 42));
        assert_eq!(clock.driven, [42]);
    }

    #[test]
    fn a_cycle_begun_without_the_clock_sleeping_overran() {
        let mut clock = clock_with_period();
        assert!(clock.marker(10 * PERIOD + 50_000, 7));
        clock.blocked_since_marker = true;
        assert!(!clock.marker(11 * PERIOD, 7));
    }

    #[test]
    fn an_unfinished_thread_counts_once_until_the_switch_two_periods_on() {
        let mut judge = CycleJudge::default();
        let mut activation = Activation::default();
        assert_eq!(judge.marker(0, PERIOD, false, None, None), 0);
        judge.activated(&mut activation);
        // Still running one period on: the first failing cycle counts.
        assert_eq!(
            judge.marker(PERIOD, PERIOD, false, Some(&mut activation), None),
            1
        );
        // Two periods after the last switch: the program switches without counting.
        assert_eq!(
            judge.marker(2 * PERIOD, PERIOD, false, Some(&mut activation), None),
            0
        );
        // Still unfinished a period after that switch: counted again.
        assert_eq!(
            judge.marker(3 * PERIOD, PERIOD, false, Some(&mut activation), None),
            1
        );
        assert_eq!(activation.cycle_deadlines, 2);
        judge.completed(&activation);
        // Finished: a switch, nothing counted; then a cycle with no activation is a missed period.
        assert_eq!(judge.marker(4 * PERIOD, PERIOD, false, None, None), 0);
        assert_eq!(judge.missed_periods, 3);
        // An overrun while blocked waits for the next activation.
        assert_eq!(judge.marker(5 * PERIOD, PERIOD, true, None, None), 1);
        let mut next = Activation::default();
        judge.activated(&mut next);
        assert_eq!(next.cycle_deadlines, 1);
        assert_eq!(judge.deadlines_missed, 3);
        assert_eq!(judge.late.len(), 1);
    }

    #[test]
    fn with_work_done_markers_finished_means_one_came_since_the_last_cycle_start() {
        let mut judge = CycleJudge::default();
        let mut activation = Activation::default();
        judge.work_done();
        assert_eq!(
            judge.marker(0, PERIOD, false, Some(&mut activation), None),
            0
        );
        // Running on without blocking, but its work was done: finished.
        judge.work_done();
        assert_eq!(
            judge.marker(PERIOD, PERIOD, false, Some(&mut activation), None),
            0
        );
        // No work done since: unfinished, though blocked.
        assert_eq!(judge.marker(2 * PERIOD, PERIOD, false, None, None), 1);
    }

    #[test]
    fn pipewire_cycles_start_at_triggers_and_at_markers_on_the_drivers_schedule() {
        let mut clock = clock_with_period();
        let start = 10 * PERIOD;
        // A trigger starts a cycle; the marker after it is the same cycle's.
        assert!(clock.pipewire_cycle_start(start, true));
        assert!(
            !clock.pipewire_cycle_start(start, true),
            "a second follower's trigger"
        );
        assert!(!clock.pipewire_cycle_start(start + 8_000, false));
        // Another timer the driver's thread re-arms a third of a period on: no cycle.
        assert!(!clock.pipewire_cycle_start(start + PERIOD / 3, false));
        // The next marker without a trigger (the follower was running) on schedule: a cycle.
        assert!(clock.pipewire_cycle_start(start + PERIOD + 20_000, false));
        // A stall of 2.4 periods: the driver's timer fires for both periods missed, one
        // cycle after the other; then it waits for its schedule.
        let late = start + PERIOD + 24 * PERIOD / 10;
        assert!(clock.pipewire_cycle_start(late, false));
        assert!(clock.pipewire_cycle_start(late + 20_000, false));
        assert!(!clock.pipewire_cycle_start(late + 40_000, false));
        assert!(clock.pipewire_cycle_start(start + 4 * PERIOD + 10_000, true));
    }

    /// A follower that read its trigger, worked, signalled, and slept.
    fn pipewire_cycle(judge: &mut CycleJudge, activation: &mut Activation) -> u32 {
        let mut misses = judge.pipewire_cycle_start(None, None);
        judge.pipewire_woken();
        judge.pipewire_ran();
        misses += judge.pipewire_signalled(false, Some(activation));
        misses
    }

    #[test]
    fn pipewire_counts_two_lines_per_cycle_not_signalled_and_one_per_signal_with_a_trigger_unread()
    {
        let mut judge = CycleJudge::default();
        let mut activation = Activation::default();
        for _ in 0..3 {
            assert_eq!(pipewire_cycle(&mut judge, &mut activation), 0);
        }
        // Woken and running when a stall came: the driver's late cycle and its catch-up find
        // it unfinished (2 + 2); its signal completes the graph with both triggers unread
        // (1); the work it does for them signals nothing PipeWire logs.
        assert_eq!(judge.pipewire_cycle_start(None, None), 0);
        judge.pipewire_woken();
        judge.pipewire_ran();
        assert_eq!(judge.pipewire_cycle_start(Some(&mut activation), None), 2);
        assert_eq!(judge.pipewire_cycle_start(Some(&mut activation), None), 2);
        assert_eq!(judge.pipewire_signalled(false, Some(&mut activation)), 1);
        assert_eq!(judge.pipewire_signalled(false, Some(&mut activation)), 0);
        assert_eq!(pipewire_cycle(&mut judge, &mut activation), 0);
        // A catch-up cycle while it works on a trigger read at its signal: that one's signal
        // completes the graph with the catch-up's trigger unread (2 + 1 + 1).
        assert_eq!(judge.pipewire_cycle_start(None, None), 0);
        judge.pipewire_woken();
        judge.pipewire_ran();
        assert_eq!(judge.pipewire_cycle_start(Some(&mut activation), None), 2);
        assert_eq!(judge.pipewire_signalled(false, Some(&mut activation)), 1);
        assert_eq!(judge.pipewire_cycle_start(Some(&mut activation), None), 0);
        assert_eq!(judge.pipewire_signalled(false, Some(&mut activation)), 1);
        assert_eq!(pipewire_cycle(&mut judge, &mut activation), 0);
        // Woken but not yet run when the next cycle came (2): it reads both triggers at once
        // and its signal leaves none unread.
        assert_eq!(judge.pipewire_cycle_start(None, None), 0);
        judge.pipewire_woken();
        assert_eq!(judge.pipewire_cycle_start(Some(&mut activation), None), 2);
        judge.pipewire_ran();
        assert_eq!(judge.pipewire_signalled(false, Some(&mut activation)), 0);
        assert_eq!(activation.cycle_deadlines, 11);
        assert_eq!(judge.deadlines_missed, 11);
    }

    #[test]
    fn with_work_done_markers_pipewire_takes_its_signals_from_them() {
        let mut judge = CycleJudge::default();
        assert_eq!(judge.pipewire_cycle_start(None, None), 0);
        judge.pipewire_woken();
        judge.pipewire_ran();
        assert_eq!(judge.pipewire_signalled(true, None), 0);
        assert_eq!(judge.pipewire_cycle_start(None, None), 0);
        judge.pipewire_woken();
        judge.pipewire_ran();
        // Its wake-ups of the driver's thread are not signals once markers come.
        assert_eq!(judge.pipewire_signalled(false, None), 0);
        assert_eq!(judge.pipewire_cycle_start(None, None), 2);
        assert_eq!(judge.pending, 2);
    }
}
