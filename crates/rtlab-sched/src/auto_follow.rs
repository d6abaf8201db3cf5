//! `reserve --auto --follow`'s decisions: a reservation that follows its thread. Each window of
//! observation (the kernel's per-task counters, `rtlab_trace::counters`, sampled all along)
//! says the thread's period and its CPU per activation at a high percentile; the reservation
//! grows at once when that need is more than it holds per activation, shrinks only after
//! [`FollowPolicy::shrink_after`] windows in a row below [`FollowPolicy::shrink_below`] of it (a
//! hysteresis, paper 003's de-initialisation: a thread that steps down briefly keeps its time),
//! and is mapped anew when the period changes (128 → 256 frames). Every change is a
//! [`FollowEvent`] saying what, from → to and why; a change the daemon refuses is said too, and
//! asked again the next window, never skipped in silence.
//!
//! The decisions ([`Follower`]) are pure and tested with synthetic windows; [`follow`] runs them
//! against anything that can observe a window and resize a reservation ([`FollowIo`]): the CLI's
//! `rtlab reserve --auto --follow`, and the daemon's own auto-sized RealtimeKit1 grants
//! (`[[rtkit.reserve]] size = "auto"`, rtlab-daemon's `rtkit::follow`). Sizes come
//! from [`crate::auto_reserve::size_for`], the very rule `reserve --auto` sizes by.

use crate::auto_reserve::{size_for, sized_need, AutoMachine, AutoReservation, AutoSize};
use rtlab_core::Nanos;

/// When to change a followed reservation.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowPolicy {
    /// A need below this share of what is held per activation counts towards a shrink.
    pub shrink_below: f64,
    /// Windows in a row below `shrink_below` before shrinking.
    pub shrink_after: u32,
    /// A period that moved by more than this share of the one reserved for is a new period.
    pub period_change: f64,
    /// Windows in a row that must find the same new period before the window is mapped anew: a
    /// thread throttled for a window skips activations and seems slower (measured on JACK at
    /// the step to 50 %: 2.7 → 3.1 ms for one window, mapped anew and back).
    pub remap_after: u32,
    /// A window with fewer activations says nothing (the thread idled, or was just born).
    pub min_activations: u64,
    /// A growth (and a shrink) asks for this much more than the need that triggered it, so that
    /// the next window's p99, a little higher by chance, does not ask again (measured on JACK
    /// without it: five growths of 0.1–0.4 ms in 5 s after one step).
    pub grow_headroom: f64,
}

/// How long a need must stay low before a shrink, and a new period be seen before the window is
/// mapped anew, whatever the window: a shorter window makes growth sooner, not the hysteresis
/// shorter.
pub const SHRINK_AFTER_TIME: Nanos = Nanos(3_000_000_000);
pub const REMAP_AFTER_TIME: Nanos = Nanos(2_000_000_000);

impl FollowPolicy {
    /// The default policy for windows of `window`: a growth after one window, a shrink after
    /// [`SHRINK_AFTER_TIME`] of low windows (at least 3), a re-map after [`REMAP_AFTER_TIME`] of
    /// windows agreeing (at least 2). At windows of 250 ms JACK's client stepping 20 → 50 % of
    /// its period under a FIFO competitor had 4–6 xruns at the step where 1 s windows had 77
    /// (BENCHMARKS.md), and jackd's tiny budget changed 33 times in 30 s with the hysteresis in
    /// windows (3 of them) where it changed 10 times at 1 s.
    pub fn for_window(window: Nanos) -> FollowPolicy {
        let windows_in =
            |time: Nanos| time.0.div_ceil(window.0.max(1)).min(u64::from(u32::MAX)) as u32;
        FollowPolicy {
            shrink_after: windows_in(SHRINK_AFTER_TIME).max(3),
            remap_after: windows_in(REMAP_AFTER_TIME).max(2),
            ..FollowPolicy::default()
        }
    }
}

impl Default for FollowPolicy {
    fn default() -> FollowPolicy {
        FollowPolicy {
            shrink_below: 0.70,
            shrink_after: 3,
            period_change: 0.10,
            remap_after: 2,
            min_activations: 10,
            grow_headroom: 0.10,
        }
    }
}

/// What one window of observation said of the thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FollowWindow {
    pub activations: u64,
    pub period: Option<Nanos>,
    /// CPU per cycle at the sizing percentile (p99).
    pub cpu_per_cycle_high: Nanos,
}

/// The size a followed reservation holds now.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowedSize {
    pub period: Nanos,
    /// CPU per activation it holds: `amount / periods_per_window`.
    pub need_per_activation: Nanos,
    pub size: AutoSize,
}

impl FollowedSize {
    /// The size `reserve --auto` gives `need` of every `period` on `machine`.
    pub fn sized(need: Nanos, period: Nanos, machine: &AutoMachine) -> FollowedSize {
        FollowedSize {
            period,
            need_per_activation: need,
            size: size_for(need, period, machine),
        }
    }

    /// What `reserve --auto` (or the daemon's `[[rtkit.reserve]] size = "auto"`) reserved, as
    /// a follower holds it at the start.
    pub fn from_reservation(reservation: &AutoReservation) -> FollowedSize {
        FollowedSize {
            period: reservation.period,
            need_per_activation: reservation.need_per_activation,
            size: AutoSize {
                periods_per_window: reservation.periods_per_window,
                amount: reservation.amount,
                window: reservation.window,
                backend: reservation.backend,
                expected_share: reservation.expected_share,
                why_backend: reservation.why_backend.clone(),
            },
        }
    }

    fn rate(&self) -> String {
        format!("{} of every {}", self.size.amount, self.size.window)
    }
}

/// Which way a change goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Grow,
    Shrink,
    /// The period changed: the window is mapped anew (the budget may go either way).
    Remap,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Grow => "grow",
            ChangeKind::Shrink => "shrink",
            ChangeKind::Remap => "re-map",
        }
    }
}

/// A change the follower asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowChange {
    pub kind: ChangeKind,
    pub from: FollowedSize,
    pub to: FollowedSize,
    /// Why, in words: the observation against what is held.
    pub why: String,
}

impl FollowChange {
    /// One line: what, from → to, why.
    pub fn describe(&self) -> String {
        format!(
            "{} {} → {}: {}",
            self.kind.as_str(),
            self.from.rate(),
            self.to.rate(),
            self.why
        )
    }
}

/// What the follower decided for one window.
#[derive(Clone, Debug, PartialEq)]
pub enum FollowStep {
    /// The size holds.
    Keep,
    /// Ask for this change.
    Change(FollowChange),
    /// The need cannot be given at all (more than a CPU, or another backend than the one held):
    /// said, and the size held is kept.
    CannotGrow(String),
}

/// The decisions of one followed reservation, window by window.
#[derive(Clone, Debug)]
pub struct Follower {
    held: FollowedSize,
    machine: AutoMachine,
    policy: FollowPolicy,
    /// Consecutive windows below the shrink threshold, and the highest need among them.
    low_windows: u32,
    low_need: Nanos,
    /// A new period seen, and in how many windows in a row.
    new_period: Option<(Nanos, u32)>,
}

impl Follower {
    pub fn new(held: FollowedSize, machine: AutoMachine, policy: FollowPolicy) -> Follower {
        Follower {
            held,
            machine,
            policy,
            low_windows: 0,
            low_need: Nanos(0),
            new_period: None,
        }
    }

    /// The size held now.
    pub fn held(&self) -> &FollowedSize {
        &self.held
    }

    /// What to do after `window`.
    pub fn step(&mut self, window: &FollowWindow) -> FollowStep {
        let Some(period) = window.period else {
            return FollowStep::Keep;
        };
        if window.activations < self.policy.min_activations || period.0 == 0 {
            return FollowStep::Keep;
        }
        let need = sized_need(window.cpu_per_cycle_high);
        let held = &self.held;
        let change = self.policy.period_change;
        let moved = period.0.abs_diff(held.period.0) as f64;
        if moved <= held.period.0 as f64 * change {
            self.new_period = None;
        } else {
            let seen = match self.new_period {
                Some((first, windows))
                    if (period.0.abs_diff(first.0) as f64) <= first.0 as f64 * change =>
                {
                    windows + 1
                }
                _ => 1,
            };
            self.new_period = Some((period, seen));
        }
        if self
            .new_period
            .is_some_and(|(_, seen)| seen >= self.policy.remap_after)
        {
            self.new_period = None;
            self.low_windows = 0;
            let why = format!(
                "the period changed from {} to {} (p99 {} per activation, need {need} with the margin)",
                held.period, period, window.cpu_per_cycle_high
            );
            return self.change(ChangeKind::Remap, need, period, why);
        }
        if need > held.need_per_activation {
            self.low_windows = 0;
            let with_headroom =
                Nanos((need.0 as f64 * (1.0 + self.policy.grow_headroom)).ceil() as u64);
            let why = format!(
                "p99 {} per activation plus the margin is {need}, more than the {} held per {} period (asked {with_headroom}: {:.0} % headroom)",
                window.cpu_per_cycle_high,
                held.need_per_activation,
                held.period,
                self.policy.grow_headroom * 100.0
            );
            return self.change(ChangeKind::Grow, with_headroom, held.period, why);
        }
        let threshold = held.need_per_activation.0 as f64 * self.policy.shrink_below;
        if (need.0 as f64) < threshold {
            self.low_windows += 1;
            self.low_need = self.low_need.max(need);
            if self.low_windows >= self.policy.shrink_after {
                let low_need = self.low_need;
                // The same headroom as a growth: shrunk to exactly the highest need seen, the
                // next window a little above it grew it again (JACK's server thread, measured:
                // a shrink and a growth every 5 s).
                let to_need =
                    Nanos((low_need.0 as f64 * (1.0 + self.policy.grow_headroom)).ceil() as u64);
                let why = format!(
                    "{} windows in a row needed at most {low_need} per activation (p99 plus the margin), under {:.0} % of the {} held (asked {to_need}: {:.0} % headroom)",
                    self.low_windows,
                    self.policy.shrink_below * 100.0,
                    held.need_per_activation,
                    self.policy.grow_headroom * 100.0
                );
                self.low_windows = 0;
                self.low_need = Nanos(0);
                return self.change(ChangeKind::Shrink, to_need, held.period, why);
            }
        } else {
            self.low_windows = 0;
            self.low_need = Nanos(0);
        }
        FollowStep::Keep
    }

    fn change(&self, kind: ChangeKind, need: Nanos, period: Nanos, why: String) -> FollowStep {
        // A need that cannot be given in full (more than a CPU, or only on another backend) is
        // given the most that maps, 5 % less at a time, as long as that is more than is held.
        let mut to_need = need;
        let mut to = None;
        for _ in 0..100 {
            if to_need < period {
                let sized = FollowedSize::sized(to_need, period, &self.machine);
                if sized.size.backend == self.held.size.backend {
                    to = Some(sized);
                    break;
                }
            }
            to_need = Nanos(to_need.0 / 20 * 19);
        }
        let capped = to_need < need;
        let why = if capped {
            format!("{why}; {need} of every {period} cannot be given on {} here, so the most that maps: {to_need}", self.held.size.backend.as_str())
        } else {
            why
        };
        let Some(to) = to.filter(|to| {
            !capped
                || kind != ChangeKind::Grow
                || to.need_per_activation > self.held.need_per_activation
        }) else {
            return FollowStep::CannotGrow(format!("{why}; {} kept", self.held.rate()));
        };
        if to.size.amount == self.held.size.amount && to.size.window == self.held.size.window {
            return FollowStep::Keep;
        }
        FollowStep::Change(FollowChange {
            kind,
            from: self.held.clone(),
            to,
            why,
        })
    }

    /// The change was made: it is what is held from now on.
    pub fn changed(&mut self, change: &FollowChange) {
        self.held = change.to.clone();
        self.low_windows = 0;
        self.low_need = Nanos(0);
        // A growth at the held period while a new one is being confirmed keeps the count.
        if change.kind == ChangeKind::Remap {
            self.new_period = None;
        }
    }
}

/// What a follow loop observes and changes.
pub trait FollowIo {
    /// Observes the thread for one window; `None` once the thread has ended (or a stop was
    /// asked for mid-window).
    fn observe_window(&mut self) -> Option<FollowWindow>;
    /// Asks for the reservation to hold `size` from now on: `Ok` with what the kernel holds
    /// after, in words; `Err` with the refusal (the old size is still held).
    fn resize(&mut self, size: &AutoSize) -> Result<String, String>;
    /// Whether the loop is to stop (SIGINT, SIGTERM, a caller shutting down).
    fn stop_requested(&self) -> bool;
}

/// One line of a follow loop's log.
#[derive(Clone, Debug, PartialEq)]
pub enum FollowEvent {
    /// A change made: what, from → to, why, and what the kernel holds after.
    Changed { change: FollowChange, held: String },
    /// A change the daemon refused (the old size is held): asked again the next window.
    Refused {
        change: FollowChange,
        reason: String,
    },
    /// A need that cannot be given at all.
    CannotGrow(String),
}

impl FollowEvent {
    /// The event in one line.
    pub fn describe(&self) -> String {
        match self {
            FollowEvent::Changed { change, held } => {
                format!("{}; the kernel holds {held}", change.describe())
            }
            FollowEvent::Refused { change, reason } => {
                format!("refused: {}: {reason}", change.describe())
            }
            FollowEvent::CannotGrow(reason) => format!("cannot grow: {reason}"),
        }
    }
}

/// Why a follow loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowEnd {
    ThreadEnded,
    Stopped,
}

/// Follows one reservation until its thread ends or a stop is asked for: observe a window,
/// decide, resize, report each change (and each refusal) through `report`.
pub fn follow(
    io: &mut dyn FollowIo,
    follower: &mut Follower,
    report: &mut dyn FnMut(&FollowEvent),
) -> FollowEnd {
    loop {
        if io.stop_requested() {
            return FollowEnd::Stopped;
        }
        let Some(window) = io.observe_window() else {
            return if io.stop_requested() {
                FollowEnd::Stopped
            } else {
                FollowEnd::ThreadEnded
            };
        };
        if io.stop_requested() {
            return FollowEnd::Stopped;
        }
        match follower.step(&window) {
            FollowStep::Keep => {}
            FollowStep::CannotGrow(reason) => report(&FollowEvent::CannotGrow(reason)),
            FollowStep::Change(change) => match io.resize(&change.to.size) {
                Ok(held) => {
                    follower.changed(&change);
                    report(&FollowEvent::Changed { change, held });
                }
                Err(reason) => report(&FollowEvent::Refused { change, reason }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    /// JACK at 128 frames, 48 kHz.
    const JACK_PERIOD: Nanos = Nanos(2_666_667);

    fn machine() -> AutoMachine {
        AutoMachine {
            n_cpus: 2,
            deadline_overrun: Nanos(4 * MS),
            granularity_described: "4ms tick (HZ=250), HRTICK_DL off".into(),
            deadline_share_per_cpu: 0.9,
            deadline_preferred: true,
        }
    }

    fn window(period: Nanos, p99: u64) -> FollowWindow {
        FollowWindow {
            activations: 375,
            period: Some(period),
            cpu_per_cycle_high: Nanos(p99),
        }
    }

    /// A follower holding what `reserve --auto` gives 20 % of a JACK period.
    fn follower() -> Follower {
        let need = sized_need(Nanos(533 * US));
        Follower::new(
            FollowedSize::sized(need, JACK_PERIOD, &machine()),
            machine(),
            FollowPolicy::default(),
        )
    }

    /// A scripted thread and daemon: windows in order, each resize answered from `refuse`.
    struct Script {
        windows: std::vec::IntoIter<FollowWindow>,
        refuse: bool,
        resized: Vec<AutoSize>,
    }

    impl FollowIo for Script {
        fn observe_window(&mut self) -> Option<FollowWindow> {
            self.windows.next()
        }
        fn resize(&mut self, size: &AutoSize) -> Result<String, String> {
            if self.refuse {
                Err("limit: reservation 4 is 3.0 % short".into())
            } else {
                self.resized.push(size.clone());
                Ok(format!("{} of every {}", size.amount, size.window))
            }
        }
        fn stop_requested(&self) -> bool {
            false
        }
    }

    fn run(windows: Vec<FollowWindow>, refuse: bool) -> (Vec<FollowEvent>, Script, Follower) {
        let mut script = Script {
            windows: windows.into_iter(),
            refuse,
            resized: Vec::new(),
        };
        let mut follower = follower();
        let mut events = Vec::new();
        let end = follow(&mut script, &mut follower, &mut |event| {
            events.push(event.clone())
        });
        assert_eq!(end, FollowEnd::ThreadEnded);
        (events, script, follower)
    }

    #[test]
    fn the_hysteresis_is_counted_in_time_whatever_the_window() {
        let quarter = FollowPolicy::for_window(Nanos(250 * MS));
        assert_eq!((quarter.shrink_after, quarter.remap_after), (12, 8));
        let second = FollowPolicy::for_window(Nanos(1_000 * MS));
        assert_eq!((second.shrink_after, second.remap_after), (3, 2));
        // Long windows keep at least the counts of the default.
        let long = FollowPolicy::for_window(Nanos(10_000 * MS));
        assert_eq!((long.shrink_after, long.remap_after), (3, 2));
        assert_eq!(
            FollowPolicy::for_window(Nanos(1_000 * MS)),
            FollowPolicy::default()
        );
    }

    #[test]
    fn a_step_up_grows_the_reservation_at_the_first_window_that_sees_it() {
        let (events, script, follower) = run(
            vec![
                window(JACK_PERIOD, 533 * US),
                window(JACK_PERIOD, 1_333 * US),
            ],
            false,
        );
        assert_eq!(events.len(), 1, "{events:?}");
        let FollowEvent::Changed { change, .. } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(change.kind, ChangeKind::Grow);
        let need = sized_need(Nanos(1_333 * US)).0 as f64;
        assert_eq!(
            change.to.need_per_activation,
            Nanos((need * 1.1).ceil() as u64)
        );
        assert!(change.to.size.amount > change.from.size.amount);
        let line = events[0].describe();
        assert!(
            line.starts_with("grow ") && line.contains(" → ") && line.contains("p99 1.3ms"),
            "{line}"
        );
        assert_eq!(script.resized, vec![change.to.size.clone()]);
        assert_eq!(follower.held(), &change.to);
    }

    #[test]
    fn noise_around_the_held_size_does_not_flap() {
        // p99 wobbling ±10 % around 20 % of the period: at most the one growth past the top of
        // the wobble, never a shrink.
        let windows = (0..30)
            .map(|index| {
                window(
                    JACK_PERIOD,
                    if index % 2 == 0 { 480 * US } else { 586 * US },
                )
            })
            .collect();
        let (events, ..) = run(windows, false);
        assert!(events.len() <= 1, "{events:?}");
        assert!(events.iter().all(|event| matches!(
            event,
            FollowEvent::Changed { change, .. } if change.kind == ChangeKind::Grow
        )));
    }

    #[test]
    fn a_step_down_shrinks_only_after_the_hysteresis() {
        let mut follower = follower();
        let big = window(JACK_PERIOD, 1_333 * US);
        let FollowStep::Change(grow) = follower.step(&big) else {
            panic!("no growth");
        };
        follower.changed(&grow);
        let low = window(JACK_PERIOD, 800 * US);
        assert_eq!(follower.step(&low), FollowStep::Keep);
        assert_eq!(follower.step(&low), FollowStep::Keep);
        // A window back up resets the count.
        assert_eq!(follower.step(&big), FollowStep::Keep);
        assert_eq!(follower.step(&low), FollowStep::Keep);
        assert_eq!(follower.step(&low), FollowStep::Keep);
        let FollowStep::Change(shrink) = follower.step(&window(JACK_PERIOD, 700 * US)) else {
            panic!("no shrink after three low windows");
        };
        assert_eq!(shrink.kind, ChangeKind::Shrink);
        // The highest need of the low windows, not the last one's.
        let need = sized_need(Nanos(800 * US)).0 as f64;
        assert_eq!(
            shrink.to.need_per_activation,
            Nanos((need * 1.1).ceil() as u64)
        );
        assert!(shrink.why.contains("3 windows in a row"), "{}", shrink.why);
    }

    #[test]
    fn a_new_period_is_mapped_anew_once_two_windows_agree() {
        // 128 → 256 frames: 5.333 ms, the same share of it.
        let (events, ..) = run(
            vec![
                window(JACK_PERIOD, 533 * US),
                window(Nanos(5_333_333), 1_066 * US),
                window(Nanos(5_333_333), 1_066 * US),
            ],
            false,
        );
        // The first window at the new period asks more per activation: a growth at the period
        // held; the second agrees on the period: mapped anew.
        assert_eq!(events.len(), 2, "{events:?}");
        let FollowEvent::Changed { change, .. } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(change.kind, ChangeKind::Grow);
        assert_eq!(change.to.period, JACK_PERIOD);
        let FollowEvent::Changed { change, .. } = &events[1] else {
            panic!("{events:?}");
        };
        assert_eq!(change.kind, ChangeKind::Remap);
        assert_eq!(change.to.period, Nanos(5_333_333));
        assert_eq!(change.to.size.window.0 % 5_333_333, 0, "{change:?}");
        assert!(change.why.contains("period changed"), "{}", change.why);
    }

    #[test]
    fn one_window_that_seems_slower_grows_at_the_held_period_and_is_not_mapped_anew() {
        // Throttled at a step up, the thread skipped activations: 3.1 ms for one window.
        let (events, ..) = run(
            vec![
                window(Nanos(3_100_000), 1_333 * US),
                window(JACK_PERIOD, 1_333 * US),
                window(Nanos(3_100_000), 1_333 * US),
            ],
            false,
        );
        assert_eq!(events.len(), 1, "{events:?}");
        let FollowEvent::Changed { change, .. } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(change.kind, ChangeKind::Grow);
        assert_eq!(change.to.period, JACK_PERIOD);
    }

    #[test]
    fn a_refused_growth_is_said_and_asked_again() {
        let (events, script, follower) = run(
            vec![
                window(JACK_PERIOD, 1_333 * US),
                window(JACK_PERIOD, 1_333 * US),
            ],
            true,
        );
        assert_eq!(events.len(), 2, "{events:?}");
        for event in &events {
            let FollowEvent::Refused { change, reason } = event else {
                panic!("{events:?}");
            };
            assert_eq!(change.kind, ChangeKind::Grow);
            assert!(reason.contains("short"), "{reason}");
            assert!(event.describe().starts_with("refused: grow "), "{event:?}");
        }
        assert!(script.resized.is_empty());
        // What is held is still the old size.
        assert_eq!(follower.held(), self::follower().held());
    }

    #[test]
    fn a_need_of_more_than_a_period_grows_to_the_most_that_maps_and_says_so() {
        let mut follower = follower();
        let FollowStep::Change(grow) = follower.step(&window(JACK_PERIOD, 2_600 * US)) else {
            panic!("did not grow");
        };
        assert!(grow.why.contains("the most that maps"), "{}", grow.why);
        assert!(grow.to.need_per_activation < JACK_PERIOD);
        assert!(grow.to.need_per_activation > grow.from.need_per_activation);
        follower.changed(&grow);
        // Held at the most that maps, the same need again cannot grow further: said.
        let FollowStep::CannotGrow(reason) = follower.step(&window(JACK_PERIOD, 2_600 * US)) else {
            panic!("grew past the most that maps");
        };
        assert!(reason.contains("kept"), "{reason}");
    }

    #[test]
    fn an_idle_window_changes_nothing() {
        let mut follower = follower();
        let idle = FollowWindow {
            activations: 2,
            period: Some(JACK_PERIOD),
            cpu_per_cycle_high: Nanos(0),
        };
        for _ in 0..10 {
            assert_eq!(follower.step(&idle), FollowStep::Keep);
        }
        let none = FollowWindow {
            activations: 0,
            period: None,
            cpu_per_cycle_high: Nanos(0),
        };
        assert_eq!(follower.step(&none), FollowStep::Keep);
    }
}
