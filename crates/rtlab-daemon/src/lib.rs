//! rtlab-daemon: shares CPU Reservations and Time Constraints among the programs of one machine.
//!
//! Programs (through `rtlab-client`, its C ABI, or `rtlab reserve`) ask the daemon over a Unix
//! socket in `rtlab.rpc/1` (JSON lines, `rtlab_core::rpc`); the daemon decides who may ask for
//! which thread (SO_PEERCRED, a pidfd of the peer, /proc, a per-user limit and a request budget,
//! as rtkit does), admits through the planner and enforces through an [`Enforcement`](rtlab_sched::enforce::Enforcement), watches
//! every managed thread and gives its time back when it exits (an activity's after a hysteresis,
//! paper 003 §4.3), and reverts every thread when it stops.
//!
//! * [`config`] — `/etc/rtlab/rtlabd.toml`.
//! * [`socket`] — the listening socket (socket activation or a path).
//! * [`server`] — connections, line framing, timeouts, caps (the I/O design is explained there).
//! * [`peer`] — who is calling: credentials and privilege bound to a pidfd of the peer.
//! * [`thread_cache`] — connection threads kept for the next connection (none started on
//!   root's path).
//! * [`budget`] — each uid's burst budget of requests.
//! * [`precedence`] — root first: unprivileged peers' threads lowered, the registry entered by
//!   them one at a time, after any privileged caller waiting.
//! * [`registry`] — authorisation and the book of reservations, over the enforcement.
//! * [`watch`] — thread pidfds and the hysteresis timer.
//! * [`rtkit`] — `org.freedesktop.RealtimeKit1` on the system bus (`rtlab daemon --rtkit`).
//! * [`startup`] — configuration with overrides, the socket, then the enforcer.

pub mod budget;
pub mod config;
pub mod peer;
pub mod precedence;
pub mod registry;
pub mod rtkit;
pub mod server;
pub mod socket;
pub mod startup;
pub mod thread_cache;
pub mod watch;

pub use config::{ConfigError, DaemonConfig, DEFAULT_CONFIG_PATH};
pub use server::{serve, DaemonError, Listeners, Stopped};
pub use socket::{listen, Listening, SocketError};
