//! A directed probe the random attack did not find in 10 minutes: a user's thread made SCHED_RR
//! through RealtimeKit1, then reserved by the same user with the `dispatch` backend, rests at its
//! SCHED_RR between its slots (the enforcer's saved policy), while the watchdog skips reserved
//! threads when it meters the user's share. The thread's duty-cycled spin (90 ms on, 100 µs off)
//! then runs unmetered and is never demoted.
//!
//! ```sh
//! cargo build -p rtlab -p rtlab-hostile --example rtkit_reserved_spinner
//! flock -o /work/measure.lock target/debug/examples/rtkit_reserved_spinner [BACKEND]
//! ```
//!
//! Sends the two requests as nobody to a fresh stage (the harness's daemon, bus and victims),
//! then checks for 8 s. Exit 1 when the checker sees a violation (the hole is there), 0 when not,
//! 3 when the probe itself failed. BACKEND: `dispatch` (default), `deadline`, `edf`.

use rtlab_hostile::action::{Action, RtkitCall, RtkitId, TargetSpec, ThreadRef};
use rtlab_hostile::stage::Stage;
use rtlab_hostile::RunConfig;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    match probe() {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rtkit_reserved_spinner: error: {error:#}");
            ExitCode::from(3)
        }
    }
}

fn probe() -> anyhow::Result<bool> {
    let backend = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "dispatch".to_owned());
    let examples = std::env::current_exe()?;
    let debug = examples
        .parent()
        .and_then(|directory| directory.parent())
        .ok_or_else(|| anyhow::anyhow!("run it from target/*/examples"))?;
    let config = RunConfig::standard(debug.join("rtlab-hostile"), debug.join("rtlab"), 0, 30.0);
    let mut stage = Stage::start(
        &config.cast,
        &config.attackers,
        |_, identity, uid_index, socket, tag| {
            vec![
                "--socket".into(),
                socket.display().to_string(),
                "--tag".into(),
                tag.into(),
                "--uid".into(),
                identity.uid.to_string(),
                "--uid-index".into(),
                uid_index.to_string(),
                "--senders".into(),
                "0".into(),
            ]
        },
    )?;
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
    // Attacker 0 is nobody.
    for step in &steps {
        let attacker = &mut stage.attackers[0];
        attacker.write_line(&serde_json::to_string(step)?)?;
        println!(
            "nobody: {} → {}",
            serde_json::to_string(step)?,
            attacker.read_line()?.trim()
        );
    }
    let until = Instant::now() + Duration::from_secs(8);
    let mut seen = false;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
        for violation in stage.checker.check().0 {
            println!("VIOLATION {:?}: {}", violation.kind, violation.detail);
            seen = true;
        }
    }
    stage.stop();
    Ok(seen)
}
