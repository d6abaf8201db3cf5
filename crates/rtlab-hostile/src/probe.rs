//! Directed probes: a few requests the random attack may take long to find, sent to a fresh
//! stage, then the checker for a while.

use crate::action::{Action, RtkitCall, RtkitId, TargetSpec, ThreadRef, TimeSpec};
use crate::checker::Violation;
use crate::RunConfig;
use std::time::{Duration, Instant};

/// What a probe saw: each request with its answer, and every violation the checker found.
#[derive(Debug)]
pub struct Probed {
    pub answers: Vec<String>,
    pub violations: Vec<Violation>,
}

/// nobody makes its own thread SCHED_RR through RealtimeKit1 (priority 5), reserves it 1 ms every
/// 100 ms on `backend` (`dispatch`, `deadline`, `edf`), and its duty-cycled spin goes on for 8 s
/// of checks. The daemon once let such a thread rest at SCHED_RR between its dispatch slots,
/// unmetered (the watchdog leaves reserved threads to their reservation): 86–90 % of a CPU.
pub fn reserved_rtkit_spinner(config: &RunConfig, backend: &str) -> anyhow::Result<Probed> {
    let backend = backend.to_owned();
    let own = ThreadRef::Own { k: 0 };
    let steps = [
        Action::Rtkit {
            call: RtkitCall::MakeThreadRealtime {
                thread: RtkitId::Thread(own.clone()),
                priority: 5,
            },
        },
        Action::Reserve {
            target: TargetSpec::Thread { thread: own },
            amount_ns: 1_000_000,
            period_ns: 100_000_000,
            backend: Some(backend),
        },
    ];
    directed(config, &steps)
}

/// nobody makes two of its threads SCHED_RR through RealtimeKit1 (thread 1 spins 80 % of a CPU,
/// thread 0 90 %) and gives thread 0 a Time Constraint (100 ms by 3.5 s from now); thread 1's
/// spinning brings nobody over its share within about a second, while the constraint holds thread
/// 0. The daemon once saved thread 0's SCHED_RR as its policy under the constraint, demoted and
/// forgot it while the constraint held it (breaking the constraint), and at the deadline the
/// constraint gave it SCHED_RR back, which nothing metered: 70–80 % of a CPU for as long as the
/// thread lived (rtlab-hostile, 600 s, seed 570125387).
pub fn constrained_rtkit_spinner(config: &RunConfig) -> anyhow::Result<Probed> {
    let realtime = |k: usize| Action::Rtkit {
        call: RtkitCall::MakeThreadRealtime {
            thread: RtkitId::Thread(ThreadRef::Own { k }),
            priority: 5,
        },
    };
    let steps = [
        realtime(1),
        realtime(0),
        Action::BeginConstraint {
            thread: ThreadRef::Own { k: 0 },
            start: TimeSpec::Now { offset_ns: 0 },
            estimate_ns: 100_000_000,
            deadline: TimeSpec::Now {
                offset_ns: 3_500_000_000,
            },
        },
    ];
    directed(config, &steps)
}

/// Sends `steps` as nobody (attacker 0, whose threads spin 90 ms of every 100 ms once
/// real-time) to a fresh stage, one at a time with their answers, then runs the checker every
/// 500 ms for 8 s.
pub fn directed(config: &RunConfig, steps: &[Action]) -> anyhow::Result<Probed> {
    let mut stage = crate::harness::quiet_stage(config)?;
    // Attacker 0 is nobody.
    let mut answers = Vec::new();
    for step in steps {
        let attacker = &mut stage.attackers[0];
        attacker.write_line(&serde_json::to_string(step)?)?;
        let answer = attacker.read_line()?;
        answers.push(format!(
            "nobody: {} → {}",
            serde_json::to_string(step)?,
            answer.trim()
        ));
    }
    let until = Instant::now() + Duration::from_secs(8);
    let mut seen = Vec::new();
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
        seen.extend(stage.checker.check().violations);
    }
    stage.stop();
    Ok(Probed {
        answers,
        violations: seen,
    })
}
