//! rtlab-hostile: attacks the real rtlab daemon as hostile local users would and judges it by what
//! the kernel says, never by the daemon's answers; for tests and benchmarks, never installed.
//!
//! A hostile-client harness against the real rtlab daemon (issue 39, item 7): local users who
//! mean harm — nobody and daemon (uid 1), every second process of theirs inside a user namespace
//! of its own (`unshare -Ur`, where it looks root with every capability) — send seeded random
//! valid and malformed requests over many connections and threads, on the daemon's socket and as
//! RealtimeKit1 calls on a private system bus, while a checker reads the kernel every 100 ms: no
//! victim thread changed policy, no attacking uid holds more SCHED_DEADLINE bandwidth than its
//! limit, no attacking uid's SCHED_RR threads ran more than its share (with that bandwidth, plus
//! the daemon's demotion latency), and root's ping is answered within 100 ms (a late answer that a
//! hypervisor stall accounts for is reported apart). A violation stops
//! the attack and the requests sent until then are replayed against a fresh daemon and shrunk.
//! Run by CI for 20 s (`tests/hostile.rs`) and for 10 minutes as a benchmark
//! (`bench/daemon-hostile.sh`); never installed.
//!
//! The pieces, lowest first: `action` (what an attacker does, symbolically), `world` (what the
//! symbols stand for in one run), `wire` and `rtkit_wire` (an action as bytes on the socket, or
//! as a call on the bus), `process` (the children, as other users), `roles` (what the children
//! do), `bus` (the private bus), `daemon` (the daemon under test), `checker` (the kernel's word),
//! `root_ping` (root's timed pings), `shrink` (ddmin), `stage` (one set of processes), `harness`
//! (a run, its replay, its report).

pub mod action;
pub mod bus;
pub mod checker;
pub mod daemon;
pub mod harness;
pub mod probe;
pub mod process;
pub mod roles;
pub mod root_ping;
pub mod rtkit_wire;
pub mod shrink;
pub mod stage;
pub mod wire;
pub mod world;

pub use harness::{run, Report, RunConfig};
