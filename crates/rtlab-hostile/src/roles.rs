//! What the harness's child processes do (`rtlab-hostile victim …`, `rtlab-hostile attacker …`):
//! start their named threads, say `{"ready": …}` on stdout, and end when their stdin closes or
//! their lifetime is over, whichever comes first, so none outlives the harness.
//!
//! An attacker's named threads sleep until RealtimeKit1 makes them SCHED_RR; then each spins
//! in a duty cycle of its own ([`SPIN_CYCLES`]: thread 0 is issue 39's napping spinner, 90 ms of
//! spinning and a 100 µs nap, which the canary never sees), until it is not real-time any more
//! (demoted, reset, given a nice level) or its process ends. Every spin is bounded three ways:
//! its own clock (at most 90 ms between naps), its policy (looked at every millisecond), and
//! the process's RLIMIT_RTTIME (set by the stage with `prlimit`, which the kernel enforces).

use crate::action::{Action, Shape, NAMED_THREADS};
use crate::wire::Attacker;
use crate::world::{Me, ProcessInfo, World};
use anyhow::Context;
use rand::{Rng, SeedableRng};
use rtlab_sys::sched::Policy;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A duty cycle: spin this long, then nap this long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinCycle {
    pub spin: Duration,
    pub nap: Duration,
}

/// How attacker thread `k` spins while it is SCHED_RR. About 99.9 %, 80 % and 30 % of a CPU.
pub const SPIN_CYCLES: [SpinCycle; NAMED_THREADS] = [
    SpinCycle {
        spin: Duration::from_millis(90),
        nap: Duration::from_micros(100),
    },
    SpinCycle {
        spin: Duration::from_millis(20),
        nap: Duration::from_millis(5),
    },
    SpinCycle {
        spin: Duration::from_millis(3),
        nap: Duration::from_millis(7),
    },
];

fn is_round_robin(tid: u32) -> bool {
    matches!(
        rtlab_sys::sched::thread_policy(tid),
        Ok(Policy::RoundRobin { .. })
    )
}

/// A named thread's life until `stop`: sleeping, or, with a `cycle` and while SCHED_RR, spinning
/// and napping in turn.
fn idle_or_spin(tid: u32, cycle: Option<SpinCycle>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match cycle {
            Some(SpinCycle {
                spin: spinning,
                nap,
            }) if is_round_robin(tid) => {
                let began = Instant::now();
                let mut looked = began;
                while began.elapsed() < spinning && !stop.load(Ordering::Relaxed) {
                    if looked.elapsed() >= Duration::from_millis(1) {
                        if !is_round_robin(tid) {
                            break;
                        }
                        looked = Instant::now();
                    }
                    std::hint::spin_loop();
                }
                std::thread::sleep(nap);
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Starts `NAMED_THREADS` threads named `name(k)`, each idle (sleeping) until `stop`; thread `k`
/// first sets its own policy to `policy(k)` if it is `Some` (a victim with a real-time thread and
/// a niced one, so that a lowered priority shows as clearly as a raised one). With `spins`
/// (attackers), each spins in its [`SPIN_CYCLES`] while SCHED_RR.
fn named_threads(
    name: impl Fn(usize) -> String,
    policy: impl Fn(usize) -> Option<Policy>,
    spins: bool,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<ProcessInfo> {
    let mut tids = Vec::new();
    for (k, cycle) in SPIN_CYCLES.into_iter().enumerate() {
        let (sender, receiver) = mpsc::channel();
        let stop = Arc::clone(stop);
        let policy = policy(k);
        std::thread::Builder::new()
            .name(name(k))
            .spawn(move || {
                if let Some(policy) = policy {
                    let _ = rtlab_sys::sched::set_current_thread_policy(policy);
                }
                let tid = rtlab_sys::cpu::current_tid();
                let _ = sender.send(tid);
                idle_or_spin(tid, spins.then_some(cycle), &stop);
            })
            .context("starting a named thread")?;
        tids.push(receiver.recv().context("a named thread's id")?);
    }
    Ok(ProcessInfo {
        pid: std::process::id(),
        tids,
    })
}

fn say(value: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}

/// Ends the process when stdin closes or `lifetime` is over.
fn end_with_stdin_or(lifetime: Duration) {
    let (closed, wait) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        let _ = closed.send(());
    });
    let _ = wait.recv_timeout(lifetime);
}

/// A victim (root's, a bystander of an attacking uid, a quiet user's): threads named
/// `prefix-k`, thread 0 SCHED_FIFO 3 when it may (root; the stage makes a bystander's so), thread
/// 1 at nice 4, thread 2 as it came. With `rtkit` (the bus's address and the victim's uid: the
/// quiet user), thread 2 asks RealtimeKit1 for SCHED_RR 5 first, as a program of a user who
/// attacks nobody would: no attacker's call may take it away.
pub fn victim(prefix: &str, lifetime: Duration, rtkit: Option<(&str, u32)>) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let info = named_threads(
        |k| crate::world::thread_name(prefix, k),
        |k| match k {
            0 => Some(Policy::Fifo { priority: 3 }),
            1 => Some(Policy::Other { nice: 4 }),
            _ => None,
        },
        false,
        &stop,
    )?;
    if let Some((address, uid)) = rtkit {
        let connection = crate::rtkit_wire::connect(address, uid)
            .with_context(|| format!("connecting to the bus at {address} as uid {uid}"))?;
        connection
            .call_method(
                Some(crate::rtkit_wire::BUS_NAME),
                crate::rtkit_wire::OBJECT_PATH,
                Some(crate::rtkit_wire::BUS_NAME),
                "MakeThreadRealtime",
                &(u64::from(info.tids[2]), 5u32),
            )
            .context("the quiet user's MakeThreadRealtime")?;
    }
    say(&serde_json::json!({ "ready": info }));
    end_with_stdin_or(lifetime);
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// How an attacker process is run (its command-line arguments).
#[derive(Clone, Debug)]
pub struct AttackerArgs {
    pub socket: PathBuf,
    pub tag: String,
    /// Its uid outside any user namespace.
    pub uid: u32,
    /// Its uid's index among the attacking uids (root's: one past them).
    pub uid_index: usize,
    pub seed: u64,
    pub index: usize,
    /// Sending threads (each with its own connection); 0: a replay, one action per stdin line.
    pub senders: usize,
    /// When it stops sending, from the moment it has the world.
    pub seconds: f64,
    /// Longest pause between two actions of one sender.
    pub max_pause_ms: u64,
}

/// One line of an attacker's log: when, who, what, and what came of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogLine {
    /// CLOCK_MONOTONIC ns when it was sent.
    pub t: u64,
    /// The attacker process's index.
    pub w: usize,
    pub a: Action,
    /// The answer in one word (`ok`, `permission`, …).
    pub o: String,
    /// Requests sent, and answered `ok`.
    pub n: u32,
    pub g: u32,
}

/// Performs `action` and writes its [`LogLine`] on stdout: the requests granted, or `None` when
/// stdout is closed (the harness is gone).
fn perform_and_log(
    attacker: &mut Attacker,
    index: usize,
    action: Action,
    stdout: &Mutex<std::io::Stdout>,
) -> Option<u32> {
    let t = rtlab_sys::clock::monotonic_ns();
    let outcome = attacker.perform(&action);
    let line = LogLine {
        t,
        w: index,
        a: action,
        o: outcome.answer,
        n: outcome.requests,
        g: outcome.granted,
    };
    let text = serde_json::to_string(&line).expect("a log line");
    let mut stdout = stdout.lock().unwrap_or_else(|e| e.into_inner());
    writeln!(stdout, "{text}").ok().map(|()| line.g)
}

/// The opening of an attacker with a bus: before its senders start (and before its uid holds
/// anything), it asks RealtimeKit1 to make its thread 0 (the napping spinner) SCHED_RR and waits
/// while that thread spins, until the daemon's watchdog demotes it (its share over the window
/// used up: about a second) or 3 s have passed. So every run meters a RealtimeKit1 thread that
/// spins for longer than the checker's interval, whatever the seed: later grants, when the uid
/// already holds most of its limit in SCHED_DEADLINE, spin for a few tens of milliseconds
/// before they are demoted, often between two checks. The request is logged like any other.
fn opening(args: &AttackerArgs, world: &World, me: &Me, stdout: &Mutex<std::io::Stdout>) {
    let action = Action::Rtkit {
        call: crate::action::RtkitCall::MakeThreadRealtime {
            thread: crate::action::RtkitId::Thread(crate::action::ThreadRef::Own { k: 0 }),
            priority: 5,
        },
    };
    let mut attacker = Attacker::new(args.socket.clone(), world.clone(), me.clone());
    let granted = perform_and_log(&mut attacker, args.index, action, stdout).is_some_and(|g| g > 0);
    let spinner = me.process.tids[0];
    let until = Instant::now() + Duration::from_secs(3);
    while granted && is_round_robin(spinner) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An attacker: named threads of its own, then, once the world has come on stdin, either
/// `senders` threads sending seeded random actions for `seconds` (each logged on stdout), or
/// (senders 0) one action per stdin line, each answered with its outcome.
pub fn attacker(args: AttackerArgs) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let tag = args.tag.clone();
    let info = named_threads(
        |k| crate::world::thread_name(&crate::world::attacker_prefix(&tag, args.uid_index), k),
        |_| None,
        true,
        &stop,
    )?;
    say(&serde_json::json!({ "ready": info }));
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let world: World = serde_json::from_str(
        &lines
            .next()
            .context("stdin closed before the world came")??,
    )
    .context("the world line")?;
    let me = Me {
        uid: args.uid,
        process: info,
    };
    if args.senders == 0 {
        let mut attacker = Attacker::new(args.socket.clone(), world, me);
        for line in lines {
            let action: Action = serde_json::from_str(&line?).context("an action line")?;
            let outcome = attacker.perform(&action);
            say(
                &serde_json::json!({"o": outcome.answer, "n": outcome.requests, "g": outcome.granted}),
            );
        }
        stop.store(true, Ordering::Relaxed);
        return Ok(());
    }
    let shape = Shape {
        root_victims: world.root_victims.len(),
        attacking_uids: world.attacking_uids.len(),
        my_uid: args.uid_index,
        privileged: args.uid == 0,
        rtkit: world.bus_address.is_some(),
    };
    let until = Instant::now() + Duration::from_secs_f64(args.seconds);
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    if shape.rtkit && !shape.privileged {
        opening(&args, &world, &me, &stdout);
    }
    let senders: Vec<_> = (0..args.senders)
        .map(|sender| {
            let mut attacker = Attacker::new(args.socket.clone(), world.clone(), me.clone());
            let stdout = Arc::clone(&stdout);
            let args = args.clone();
            std::thread::spawn(move || {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                    args.seed
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        .wrapping_add((args.index * 64 + sender) as u64),
                );
                while Instant::now() < until {
                    let action = Action::random(&mut rng, &shape);
                    if perform_and_log(&mut attacker, args.index, action, &stdout).is_none() {
                        return; // the harness is gone
                    }
                    let pause = rng.gen_range(0..=args.max_pause_ms);
                    std::thread::sleep(Duration::from_millis(pause));
                }
            })
        })
        .collect();
    for sender in senders {
        let _ = sender.join();
    }
    stop.store(true, Ordering::Relaxed);
    Ok(())
}
