//! What an attacker does, symbolically: each request names its targets by role ("my thread 2",
//! "root's victim 1, thread 0", "the other user's bystander") and its times relative to the moment
//! it is sent, so the same list of actions can be sent again to a fresh daemon, with fresh
//! victims, when a violation is replayed and shrunk. Generated from a seeded generator.

use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Named threads each attacker process, victim and bystander starts (its main thread aside).
pub const NAMED_THREADS: usize = 3;

/// A thread, by its role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadRef {
    /// One of the attacker's own named threads.
    Own { k: usize },
    /// The attacker's own main thread.
    OwnMain,
    /// Thread `k` of root's victim process `v`.
    RootVictim { v: usize, k: usize },
    /// Thread `k` of the bystander process of attacking uid `u` (index into the attacking uids).
    Bystander { u: usize, k: usize },
    /// Thread `k` of an attacker process of another uid.
    OtherAttacker { k: usize },
    /// A thread id no thread has (0, past `pid_max`, the top of the range).
    Bogus { tid: u32 },
}

/// A process, by its role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessRef {
    Own,
    RootVictim { v: usize },
    Bystander { u: usize },
    OtherAttacker,
    Bogus { pid: u32 },
}

/// A thread name (`comm`), by its role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommRef {
    /// The name of the attacker's own thread `k` (shared by every attacker process of its uid).
    Own {
        k: usize,
    },
    RootVictim {
        v: usize,
        k: usize,
    },
    Bystander {
        u: usize,
        k: usize,
    },
    /// The harness binary's name: the main thread of every victim, bystander and attacker.
    Binary,
    /// Any other text.
    Raw {
        name: String,
    },
}

/// `reserve`'s target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetSpec {
    Thread {
        thread: ThreadRef,
    },
    Process {
        process: ProcessRef,
        all_threads: bool,
    },
    Comm {
        comm: CommRef,
    },
    Activity {
        name: String,
        threads: Vec<ThreadRef>,
    },
}

/// `release`'s target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseSpec {
    /// A grant id, mine or (most likely) someone else's: ids are small sequential numbers.
    GrantId {
        grant_id: u64,
    },
    Thread {
        thread: ThreadRef,
    },
    Process {
        process: ProcessRef,
    },
    AllMine,
}

/// An absolute CLOCK_MONOTONIC time on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeSpec {
    /// The moment of sending plus `offset_ns` (saturating at 0 and `u64::MAX`).
    Now { offset_ns: i64 },
    /// This number exactly (1, 0, `u64::MAX`).
    Absolute { ns: u64 },
}

impl TimeSpec {
    pub fn at(&self, now_ns: u64) -> u64 {
        match *self {
            TimeSpec::Now { offset_ns } => now_ns.saturating_add_signed(offset_ns),
            TimeSpec::Absolute { ns } => ns,
        }
    }
}

/// Which constraint `end_constraint` names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintRef {
    /// The `back`-th most recent constraint this attacker was granted (0 = the last).
    Recent { back: usize },
    /// Any id (most likely another user's, or none).
    Id { constraint_id: u64 },
}

/// A line that is not a valid request, each kind a way a decoder or a connection thread can go
/// wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Malformed {
    NotJson,
    EmptyObject,
    WrongProtocol,
    UnknownMethod,
    UnknownField,
    TwoTargets,
    NegativeNumbers,
    HugeFloats,
    StringNumbers,
    DeepNesting,
    /// Over 65,536 bytes: `too_long`, and the connection is closed.
    TooLong,
    InvalidUtf8,
    NulBytes,
    IdOverflow,
    ParamsArray,
    /// Half a request, then the connection is dropped.
    HalfThenClose,
    /// Half a request, then silence past `request_timeout`: `timeout`, closed.
    HalfThenWait,
}

const MALFORMED: &[Malformed] = &[
    Malformed::NotJson,
    Malformed::EmptyObject,
    Malformed::WrongProtocol,
    Malformed::UnknownMethod,
    Malformed::UnknownField,
    Malformed::TwoTargets,
    Malformed::NegativeNumbers,
    Malformed::HugeFloats,
    Malformed::StringNumbers,
    Malformed::DeepNesting,
    Malformed::TooLong,
    Malformed::InvalidUtf8,
    Malformed::NulBytes,
    Malformed::IdOverflow,
    Malformed::ParamsArray,
    Malformed::HalfThenClose,
];

/// One thing an attacker does: a request (valid or not), or a flood.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Action {
    Reserve {
        target: TargetSpec,
        amount_ns: u64,
        period_ns: u64,
        backend: Option<String>,
    },
    Release {
        target: ReleaseSpec,
    },
    BeginConstraint {
        thread: ThreadRef,
        start: TimeSpec,
        estimate_ns: u64,
        deadline: TimeSpec,
    },
    EndConstraint {
        constraint: ConstraintRef,
    },
    List,
    Ping,
    Malformed {
        kind: Malformed,
    },
    /// `count` pings written at once, then their answers read.
    PingFlood {
        count: u32,
    },
    /// `count` connections opened and held `hold_ms` without a word.
    ConnectionFlood {
        count: u32,
        hold_ms: u32,
    },
    /// The sending connection closed and opened again.
    Reconnect,
    /// A RealtimeKit1 call on the system bus, valid or not ([`RtkitCall`]).
    Rtkit {
        call: RtkitCall,
    },
}

/// A process or thread id as a RealtimeKit1 call carries it (a `u64` on the bus, where the daemon
/// uses 32 bits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtkitId {
    Thread(ThreadRef),
    Process(ProcessRef),
    /// The thread's id plus 2^32: the same thread to a daemon that truncated the `u64`.
    Wrapped(ThreadRef),
    /// This number (0: the caller's own main thread; `u64::MAX`, 2^31, …).
    Raw(u64),
}

/// The members of `org.freedesktop.RealtimeKit1`, called as rtkit's clients do or in ways they
/// should not (priorities and nice levels out of range, others' threads, wrong argument types).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "method")]
pub enum RtkitCall {
    MakeThreadRealtime {
        thread: RtkitId,
        priority: u32,
    },
    MakeThreadRealtimeWithPid {
        process: RtkitId,
        thread: RtkitId,
        priority: u32,
    },
    MakeThreadHighPriority {
        thread: RtkitId,
        nice: i32,
    },
    MakeThreadHighPriorityWithPid {
        process: RtkitId,
        thread: RtkitId,
        nice: i32,
    },
    ResetKnown,
    ResetAll,
    Exit,
    /// `org.freedesktop.DBus.Properties.Get` of `name` (one of the three, or a made-up one).
    Property {
        name: String,
    },
    /// `member` called with arguments of the wrong types (a string where a `u64` belongs, too
    /// few, too many): the bus library must refuse them before rtlab's code runs.
    WrongArguments {
        member: String,
        shape: WrongShape,
    },
    /// A connection that tells the bus it is uid 0 (`AUTH EXTERNAL 30`), as a process in
    /// `unshare -Ur` sees itself; the bus must refuse it, or the call must go as the real uid.
    ClaimingRoot {
        thread: RtkitId,
        priority: u32,
    },
}

/// How [`RtkitCall::WrongArguments`] gets its arguments wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WrongShape {
    Nothing,
    AString,
    Signed,
    TooMany,
}

const RTKIT_MEMBERS: &[&str] = &[
    "MakeThreadRealtime",
    "MakeThreadRealtimeWithPID",
    "MakeThreadHighPriority",
    "MakeThreadHighPriorityWithPID",
    "ResetKnown",
    "BecomeRoot",
];

impl Action {
    /// Whether the daemon may change a thread or its books for it: the actions a replay keeps
    /// first (the others are tried only when these alone do not reproduce a violation).
    pub fn may_change_state(&self) -> bool {
        matches!(
            self,
            Action::Reserve { .. }
                | Action::Release { .. }
                | Action::BeginConstraint { .. }
                | Action::EndConstraint { .. }
        ) || matches!(self, Action::Rtkit { call } if call.may_change_state())
    }

    /// A random action against the world `shape` describes: a RealtimeKit1 call one time in
    /// four when there is a bus, else a request on the daemon's socket.
    pub fn random(rng: &mut impl Rng, shape: &Shape) -> Action {
        if shape.rtkit && rng.gen_range(0..4) == 0 {
            return Action::Rtkit {
                call: RtkitCall::random(rng, shape),
            };
        }
        match rng.gen_range(0..100) {
            0..=29 => Action::Reserve {
                target: random_target(rng, shape),
                period_ns: random_period(rng),
                amount_ns: 0, // set below from the period
                backend: [None, Some("deadline"), Some("dispatch"), Some("edf")]
                    .choose(rng)
                    .copied()
                    .flatten()
                    .map(str::to_owned),
            }
            .with_amount(rng),
            30..=41 => Action::Release {
                target: match rng.gen_range(0..10) {
                    0..=4 => ReleaseSpec::GrantId {
                        grant_id: rng.gen_range(0..200),
                    },
                    5..=6 => ReleaseSpec::Thread {
                        thread: random_thread(rng, shape),
                    },
                    7..=8 => ReleaseSpec::Process {
                        process: random_process(rng, shape),
                    },
                    _ => ReleaseSpec::AllMine,
                },
            },
            42..=66 => {
                let thread = if rng.gen_bool(0.7) {
                    ThreadRef::Own {
                        k: rng.gen_range(0..NAMED_THREADS),
                    }
                } else {
                    random_thread(rng, shape)
                };
                let start = random_start(rng);
                let estimate_ns = match rng.gen_range(0..10) {
                    0 => 0,
                    1 => u64::MAX,
                    _ => rng.gen_range(0..200_000_000),
                };
                let deadline = match rng.gen_range(0..12) {
                    0 => TimeSpec::Absolute { ns: 1 },
                    1 => TimeSpec::Absolute { ns: u64::MAX },
                    2 => TimeSpec::Now {
                        offset_ns: -rng.gen_range(0..1_000_000_000_000),
                    },
                    3 => TimeSpec::Now {
                        offset_ns: rng.gen_range(1_000_000_000..1_000_000_000_000),
                    },
                    _ => match start {
                        TimeSpec::Now { offset_ns } if offset_ns.abs() < 2_000_000_000 => {
                            TimeSpec::Now {
                                offset_ns: offset_ns.max(0) + rng.gen_range(0..600_000_000),
                            }
                        }
                        _ => TimeSpec::Now {
                            offset_ns: rng.gen_range(0..600_000_000),
                        },
                    },
                };
                Action::BeginConstraint {
                    thread,
                    start,
                    estimate_ns,
                    deadline,
                }
            }
            67..=74 => Action::EndConstraint {
                constraint: if rng.gen_bool(0.6) {
                    ConstraintRef::Recent {
                        back: rng.gen_range(0..4),
                    }
                } else {
                    ConstraintRef::Id {
                        constraint_id: rng.gen_range(0..300),
                    }
                },
            },
            75..=79 => Action::List,
            80..=84 => Action::Ping,
            85..=94 => Action::Malformed {
                // The slow one holds the sender for over 5 s: rare.
                kind: if rng.gen_range(0..200) == 0 {
                    Malformed::HalfThenWait
                } else {
                    *MALFORMED.choose(rng).expect("kinds")
                },
            },
            95..=98 if shape.privileged => Action::Ping,
            95 => Action::PingFlood {
                count: rng.gen_range(10..200),
            },
            96..=98 => Action::ConnectionFlood {
                count: rng.gen_range(5..80),
                hold_ms: rng.gen_range(0..1_000),
            },
            _ => Action::Reconnect,
        }
    }

    fn with_amount(mut self, rng: &mut impl Rng) -> Action {
        if let Action::Reserve {
            amount_ns,
            period_ns,
            ..
        } = &mut self
        {
            *amount_ns = match rng.gen_range(0..20) {
                0 => 0,
                1 => u64::MAX,
                2 => period_ns.saturating_mul(2),
                3..=6 => (*period_ns as f64 * rng.gen_range(0.15..0.3)) as u64,
                _ => (*period_ns as f64 * rng.gen_range(0.0..1.0)) as u64,
            };
        }
        self
    }
}

/// What the generator may aim at.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub root_victims: usize,
    /// The attacking uids, by index; `my_uid` is this attacker's.
    pub attacking_uids: usize,
    pub my_uid: usize,
    /// Root (the checker's self-test): it aims at victims, not at the attacking users' own
    /// threads (which would only raise their shares), and does not flood (its connections would
    /// shut out root's own pings: `max_connections_per_user` counts root too).
    pub privileged: bool,
    /// Whether the daemon serves RealtimeKit1 on a bus the attackers reach.
    pub rtkit: bool,
}

impl RtkitCall {
    /// Whether the daemon may change a thread or its books for it.
    pub fn may_change_state(&self) -> bool {
        !matches!(
            self,
            RtkitCall::Property { .. } | RtkitCall::WrongArguments { .. }
        )
    }

    /// A random call: mostly real-time for the caller's own threads (which then spin, for the
    /// meter to catch), the rest aimed at others' threads, out of range, or malformed.
    pub fn random(rng: &mut impl Rng, shape: &Shape) -> RtkitCall {
        match rng.gen_range(0..100) {
            0..=34 => RtkitCall::MakeThreadRealtime {
                thread: random_rtkit_thread(rng, shape),
                priority: priority(rng),
            },
            35..=59 => RtkitCall::MakeThreadRealtimeWithPid {
                process: random_rtkit_process(rng, shape),
                thread: random_rtkit_thread(rng, shape),
                priority: priority(rng),
            },
            60..=69 => RtkitCall::MakeThreadHighPriority {
                thread: random_rtkit_thread(rng, shape),
                nice: nice(rng),
            },
            70..=79 => RtkitCall::MakeThreadHighPriorityWithPid {
                process: random_rtkit_process(rng, shape),
                thread: random_rtkit_thread(rng, shape),
                nice: nice(rng),
            },
            80..=82 => RtkitCall::ResetKnown,
            83..=85 => RtkitCall::ResetAll,
            // Root's Exit would end the service for the rest of the run.
            86..=87 if shape.privileged => RtkitCall::ResetKnown,
            86..=87 => RtkitCall::Exit,
            88..=92 => RtkitCall::Property {
                name: [
                    "RTTimeUSecMax",
                    "MaxRealtimePriority",
                    "MinNiceLevel",
                    "Nonexistent",
                ]
                .choose(rng)
                .expect("names")
                .to_string(),
            },
            93..=97 => RtkitCall::WrongArguments {
                member: RTKIT_MEMBERS.choose(rng).expect("members").to_string(),
                shape: *[
                    WrongShape::Nothing,
                    WrongShape::AString,
                    WrongShape::Signed,
                    WrongShape::TooMany,
                ]
                .choose(rng)
                .expect("shapes"),
            },
            _ => RtkitCall::ClaimingRoot {
                thread: random_rtkit_thread(rng, shape),
                priority: priority(rng),
            },
        }
    }
}

/// A SCHED_RR priority: mostly within rtkit's 1–20, now and then outside it.
fn priority(rng: &mut impl Rng) -> u32 {
    match rng.gen_range(0..10) {
        0 => *[0, 21, 99, 100, u32::MAX].choose(rng).expect("priorities"),
        _ => rng.gen_range(1..=20),
    }
}

/// A nice level: mostly within rtkit's −15–19, now and then outside it.
fn nice(rng: &mut impl Rng) -> i32 {
    match rng.gen_range(0..10) {
        0 => *[-20, -16, 20, i32::MIN, i32::MAX]
            .choose(rng)
            .expect("nice levels"),
        _ => rng.gen_range(-15..=19),
    }
}

/// Mostly the caller's own named threads (the ones that spin once real-time).
fn random_rtkit_thread(rng: &mut impl Rng, shape: &Shape) -> RtkitId {
    match rng.gen_range(0..20) {
        0..=10 if !shape.privileged => RtkitId::Thread(ThreadRef::Own {
            k: rng.gen_range(0..NAMED_THREADS),
        }),
        11 => RtkitId::Raw(
            *[0, u64::MAX, 1 << 31, 1 << 32, 4_194_305]
                .choose(rng)
                .expect("ids"),
        ),
        12 => RtkitId::Wrapped(random_thread(rng, shape)),
        _ => RtkitId::Thread(random_thread(rng, shape)),
    }
}

/// Mostly the caller's own process, so that `…WithPID` is granted as often as the thread fits.
fn random_rtkit_process(rng: &mut impl Rng, shape: &Shape) -> RtkitId {
    match rng.gen_range(0..10) {
        0..=4 if !shape.privileged => RtkitId::Process(ProcessRef::Own),
        5 => RtkitId::Raw(*[0, u64::MAX, 1 << 32, 1].choose(rng).expect("ids")),
        _ => RtkitId::Process(random_process(rng, shape)),
    }
}

fn random_period(rng: &mut impl Rng) -> u64 {
    match rng.gen_range(0..20) {
        0 => 0,
        1 => u64::MAX,
        2 => rng.gen_range(1..100_000),
        // 100 µs .. 1 s, log-uniform.
        _ => (10f64.powf(rng.gen_range(5.0..9.0))) as u64,
    }
}

fn random_start(rng: &mut impl Rng) -> TimeSpec {
    match rng.gen_range(0..10) {
        0 => TimeSpec::Absolute { ns: 1 },
        1 => TimeSpec::Absolute { ns: 0 },
        2 => TimeSpec::Absolute { ns: u64::MAX },
        3 => TimeSpec::Now {
            offset_ns: -rng.gen_range(1_000_000_000..1_000_000_000_000),
        },
        4 => TimeSpec::Now {
            offset_ns: rng.gen_range(1_000_000_000..1_000_000_000_000),
        },
        _ => TimeSpec::Now {
            offset_ns: rng.gen_range(-50_000_000..50_000_000),
        },
    }
}

/// Not the attacker's own bystander (any change to that would be its own doing): another uid's.
fn other_bystander(rng: &mut impl Rng, shape: &Shape) -> Option<usize> {
    let others: Vec<usize> = (0..shape.attacking_uids)
        .filter(|&u| u != shape.my_uid)
        .collect();
    others.choose(rng).copied()
}

fn random_thread(rng: &mut impl Rng, shape: &Shape) -> ThreadRef {
    let k = rng.gen_range(0..NAMED_THREADS);
    match rng.gen_range(0..10) {
        0..=2 => ThreadRef::Own { k },
        3 => ThreadRef::OwnMain,
        4..=6 if shape.root_victims > 0 => ThreadRef::RootVictim {
            v: rng.gen_range(0..shape.root_victims),
            k,
        },
        7 => match other_bystander(rng, shape) {
            Some(u) => ThreadRef::Bystander { u, k },
            None => ThreadRef::Own { k },
        },
        8 if !shape.privileged => ThreadRef::OtherAttacker { k },
        8 => ThreadRef::Bystander {
            u: rng.gen_range(0..shape.attacking_uids.max(1)),
            k,
        },
        _ => ThreadRef::Bogus {
            tid: *[0, u32::MAX, 4_194_305, 2_147_483_647]
                .choose(rng)
                .expect("ids"),
        },
    }
}

fn random_process(rng: &mut impl Rng, shape: &Shape) -> ProcessRef {
    match rng.gen_range(0..10) {
        0..=2 => ProcessRef::Own,
        3..=5 if shape.root_victims > 0 => ProcessRef::RootVictim {
            v: rng.gen_range(0..shape.root_victims),
        },
        6..=7 => match other_bystander(rng, shape) {
            Some(u) => ProcessRef::Bystander { u },
            None => ProcessRef::Own,
        },
        8 if !shape.privileged => ProcessRef::OtherAttacker,
        _ => ProcessRef::Bogus {
            pid: *[0, 1, u32::MAX, 4_194_305].choose(rng).expect("ids"),
        },
    }
}

fn random_comm(rng: &mut impl Rng, shape: &Shape) -> CommRef {
    let k = rng.gen_range(0..NAMED_THREADS);
    match rng.gen_range(0..10) {
        0..=3 => CommRef::Own { k },
        4..=5 if shape.root_victims > 0 => CommRef::RootVictim {
            v: rng.gen_range(0..shape.root_victims),
            k,
        },
        6 => match other_bystander(rng, shape) {
            Some(u) => CommRef::Bystander { u, k },
            None => CommRef::Own { k },
        },
        7 if !shape.privileged => CommRef::Binary,
        _ => CommRef::Raw {
            name: ["", "systemd", "kthreadd", "a\u{0}b", &"x".repeat(300)]
                .choose(rng)
                .expect("names")
                .to_string(),
        },
    }
}

fn random_target(rng: &mut impl Rng, shape: &Shape) -> TargetSpec {
    match rng.gen_range(0..20) {
        0..=8 => TargetSpec::Thread {
            thread: random_thread(rng, shape),
        },
        9..=12 => TargetSpec::Process {
            process: random_process(rng, shape),
            all_threads: rng.gen_bool(0.5),
        },
        13..=16 => TargetSpec::Comm {
            comm: random_comm(rng, shape),
        },
        _ => TargetSpec::Activity {
            name: ["decoder", "mixer", "comm:hx", "pid:1", ""]
                .choose(rng)
                .expect("names")
                .to_string(),
            threads: (0..rng.gen_range(0..4))
                .map(|_| {
                    if rng.gen_bool(0.6) {
                        ThreadRef::Own {
                            k: rng.gen_range(0..NAMED_THREADS),
                        }
                    } else {
                        random_thread(rng, shape)
                    }
                })
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_seed_gives_the_same_actions_and_they_survive_json() {
        let shape = Shape {
            root_victims: 2,
            attacking_uids: 2,
            my_uid: 1,
            privileged: false,
            rtkit: true,
        };
        let draw = |seed| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            (0..2_000)
                .map(|_| Action::random(&mut rng, &shape))
                .collect::<Vec<_>>()
        };
        let actions = draw(7);
        assert_eq!(actions, draw(7));
        assert_ne!(actions, draw(8));
        for action in &actions {
            let text = serde_json::to_string(action).unwrap();
            assert_eq!(&serde_json::from_str::<Action>(&text).unwrap(), action);
            // Never the attacker's own bystander: a change to it must be someone else's doing.
            assert!(!text.contains("\"bystander\":{\"u\":1"), "{text}");
        }
        assert!(actions.iter().any(|action| matches!(
            action,
            Action::BeginConstraint {
                start: TimeSpec::Absolute { ns: 1 },
                ..
            }
        )));
    }
}
