//! One stage of processes: a private system bus, a fresh daemon serving RealtimeKit1 on it,
//! root's victims, a bystander per attacking uid, a quiet user with a thread RealtimeKit1 made
//! real-time, and the attackers, with the [`World`] they share and the [`Checker`]'s baseline
//! read before the first attack. A run has one stage; each replay of a shrinking search another,
//! with new processes.
//!
//! The victims cover every way a call could reach another user's thread: root's victim has a
//! SCHED_FIFO thread, a niced one and a plain one; each bystander too (its FIFO thread set by
//! root, so a `ResetAll` that should have been refused shows); the quiet user (`bin`, who attacks
//! nobody) holds a SCHED_RR thread granted through RealtimeKit1, so a `ResetKnown` or
//! `Exit` that should have been refused, or a demotion that blamed every user instead of the one
//! over its share, shows too.

use crate::bus::Bus;
use crate::checker::{Checker, ShareRule, UidProcesses, Watched};
use crate::daemon::{Daemon, DaemonSettings};
use crate::process::{command_as, Spawned};
use crate::world::{
    bystander_prefix, quiet_prefix, root_victim_prefix, AttackerInfo, Identity, World,
};
use anyhow::Context;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

/// Who takes part, and how the daemon runs.
#[derive(Clone, Debug)]
pub struct Cast {
    /// The `rtlab-hostile` binary every child process runs.
    pub binary: PathBuf,
    pub daemon: DaemonSettings,
    /// The attacking unprivileged uids (each gets a bystander).
    pub attacking_uids: Vec<u32>,
    pub root_victims: usize,
    /// The limit the checker holds each attacking uid to (the daemon's default, 0.2).
    pub limit: f64,
    /// The longest any child process lives, whatever happens to the harness.
    pub lifetime: Duration,
}

/// RLIMIT_RTTIME of the attackers (µs): RealtimeKit1's largest (`RTTimeUSecMax`), so their
/// threads may be made real-time, and the kernel stops one that spins this long without a nap.
pub const ATTACKER_RTTIME_US: u64 = 200_000;

/// RLIMIT_RTTIME of the last two attackers (µs): over `RTTimeUSecMax`, so their real-time
/// requests must be refused.
pub const TOO_LARGE_RTTIME_US: u64 = 1_000_000;

/// The quiet user (`bin`): unprivileged, attacks nobody, has a thread RealtimeKit1 made
/// real-time.
pub const QUIET_UID: u32 = Identity::BIN;

/// The RLIMIT_RTTIME attacker `index` of `count` runs with.
pub fn attacker_rttime_us(index: usize, count: usize) -> u64 {
    if count >= 4 && index + 2 >= count {
        TOO_LARGE_RTTIME_US
    } else {
        ATTACKER_RTTIME_US
    }
}

/// A running stage. Dropped: attackers killed, the daemon stopped with SIGTERM (it reverts every
/// thread and gives RealtimeKit1 up), victims ended, the bus stopped, the directory removed.
pub struct Stage {
    pub attackers: Vec<Spawned>,
    pub daemon: Daemon,
    pub victims: Vec<Spawned>,
    /// After the daemon: it is stopped first.
    pub bus: Option<Bus>,
    pub world: World,
    pub checker: Checker,
    // Last: removed after everything in it has stopped.
    directory: tempfile::TempDir,
}

impl Stage {
    /// Starts everything; `attacker_arguments(index, identity, uid_index, socket, tag)` are the
    /// `attacker` subcommand's arguments for attacker `index`. The attackers have their world
    /// on stdin when this returns.
    pub fn start(
        cast: &Cast,
        identities: &[Identity],
        attacker_arguments: impl Fn(usize, Identity, usize, &std::path::Path, &str) -> Vec<String>,
    ) -> anyhow::Result<Stage> {
        let directory = tempfile::Builder::new()
            .prefix("rtlab-hostile-")
            .tempdir()
            .context("a temporary directory")?;
        // Every user reaches the socket.
        std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(0o755))?;
        let bus = if cast.daemon.rtkit {
            Some(Bus::start(directory.path())?)
        } else {
            None
        };
        let bus_address = bus.as_ref().map(|bus| bus.address.clone());
        let daemon = Daemon::start(
            &cast.daemon,
            directory.path(),
            "rtlabd",
            bus_address.as_deref(),
        )?;
        let tag = format!("{:04x}", rand::random::<u16>());
        let mut victims = Victims::default();
        let mut world = World {
            tag: tag.clone(),
            binary_comm: cast
                .binary
                .file_name()
                .map(|name| name.to_string_lossy().chars().take(15).collect())
                .unwrap_or_default(),
            root_victims: Vec::new(),
            attacking_uids: cast.attacking_uids.clone(),
            bystanders: Vec::new(),
            attackers: Vec::new(),
            bus_address: bus_address.clone(),
        };
        let launcher = VictimLauncher {
            binary: &cast.binary,
            lifetime: cast.lifetime.as_secs().to_string(),
            bus_address: bus_address.as_deref(),
        };
        victims.start_root_victims(&launcher, cast.root_victims, &mut world)?;
        victims.start_bystanders(&launcher, &cast.attacking_uids, &mut world)?;
        if bus_address.is_some() {
            victims.start_quiet_user(&launcher, &tag)?;
        }
        let mut attackers =
            start_attackers(cast, identities, attacker_arguments, &mut world, &daemon)?;
        let share = bus_address
            .as_ref()
            .map(|_| ShareRule::of(&cast.daemon, cast.limit));
        let checker = Checker::new(
            &victims.watched,
            attacking_uid_pids(cast, &world),
            cast.limit,
            share,
        )
        .context("reading the victims' policies")?;
        let line = serde_json::to_string(&world)?;
        for attacker in &mut attackers {
            attacker.write_line(&line)?;
        }
        Ok(Stage {
            attackers,
            daemon,
            victims: victims.processes,
            bus,
            world,
            checker,
            directory,
        })
    }

    /// Starts a new daemon on the same socket after the last one failed (stopped first, if it
    /// is still reverting) (the benchmark goes on
    /// after a crash); the attackers connect again by themselves.
    pub fn restart_daemon(&mut self, settings: &DaemonSettings) -> anyhow::Result<()> {
        self.daemon.stop();
        let bus = self.bus.as_ref().map(|bus| bus.address.as_str());
        self.daemon = Daemon::start(settings, self.directory.path(), "rtlabd", bus)?;
        Ok(())
    }

    /// Ends it in order: attackers, then the daemon (SIGTERM; whether it stopped by itself),
    /// then the victims.
    pub fn stop(mut self) -> bool {
        self.attackers.clear();
        let stopped = self.daemon.stop();
        for victim in &mut self.victims {
            victim.close_stdin();
        }
        stopped
    }
}

/// How a stage starts its victims: the binary, how long they may live, and the bus (for the
/// one RealtimeKit1 makes real-time).
struct VictimLauncher<'a> {
    binary: &'a std::path::Path,
    /// The longest a victim lives, whole seconds.
    lifetime: String,
    bus_address: Option<&'a str>,
}

impl VictimLauncher<'_> {
    /// Starts a victim as `identity` whose threads are named with `prefix`; with `rtkit`, it
    /// asks RealtimeKit1 on the bus to make a thread real-time.
    fn start(&self, identity: Identity, prefix: String, rtkit: bool) -> anyhow::Result<Spawned> {
        let rttime = rtkit.then_some(ATTACKER_RTTIME_US);
        let mut command = command_as(self.binary, identity, rttime);
        command.args([
            "victim",
            "--prefix",
            &prefix,
            "--lifetime-seconds",
            &self.lifetime,
        ]);
        if let (true, Some(address)) = (rtkit, self.bus_address) {
            command.args(["--rtkit-bus", address, "--uid", &identity.uid.to_string()]);
        }
        Spawned::start(command, identity)
    }
}

/// The victim processes started so far, and what the checker watches of them.
#[derive(Default)]
struct Victims {
    processes: Vec<Spawned>,
    watched: Vec<Watched>,
}

impl Victims {
    /// Starts `count` of root's victims.
    fn start_root_victims(
        &mut self,
        launcher: &VictimLauncher<'_>,
        count: usize,
        world: &mut World,
    ) -> anyhow::Result<()> {
        for v in 0..count {
            let root = Identity {
                uid: 0,
                user_namespace: false,
            };
            let mut victim = launcher.start(root, root_victim_prefix(&world.tag, v), false)?;
            let info = victim.ready()?;
            self.watched.push(Watched {
                role: format!("root's victim {v}"),
                pid: info.pid,
            });
            world.root_victims.push(info);
            self.processes.push(victim);
        }
        Ok(())
    }

    /// Starts a bystander for each attacking uid, as that uid, its thread 0 made SCHED_FIFO 3 by
    /// root.
    fn start_bystanders(
        &mut self,
        launcher: &VictimLauncher<'_>,
        attacking_uids: &[u32],
        world: &mut World,
    ) -> anyhow::Result<()> {
        for (u, &uid) in attacking_uids.iter().enumerate() {
            let identity = Identity {
                uid,
                user_namespace: false,
            };
            let mut bystander = launcher.start(identity, bystander_prefix(&world.tag, u), false)?;
            let info = bystander.ready()?;
            // What it may not do itself; a ResetAll of anyone but root must leave it.
            rtlab_sys::thread_control::set_thread_policy_with_flags(
                info.tids[0],
                rtlab_sys::sched::Policy::Fifo { priority: 3 },
                0,
            )
            .context("making a bystander's thread 0 SCHED_FIFO 3")?;
            self.watched.push(Watched {
                role: format!("{}'s bystander", identity.describe()),
                pid: info.pid,
            });
            world.bystanders.push(info);
            self.processes.push(bystander);
        }
        Ok(())
    }

    /// Starts the quiet user's process, which RealtimeKit1 gives a SCHED_RR thread.
    fn start_quiet_user(&mut self, launcher: &VictimLauncher<'_>, tag: &str) -> anyhow::Result<()> {
        let quiet = Identity {
            uid: QUIET_UID,
            user_namespace: false,
        };
        let mut victim = launcher
            .start(quiet, quiet_prefix(tag), true)
            .context("starting the quiet user's process")?;
        let info = victim
            .ready()
            .context("the quiet user's RealtimeKit1 grant")?;
        self.watched.push(Watched {
            role: format!("the quiet user's (uid {QUIET_UID})"),
            pid: info.pid,
        });
        self.processes.push(victim);
        Ok(())
    }
}

/// Starts the attackers in order, each at its RLIMIT_RTTIME, and records them in `world`.
fn start_attackers(
    cast: &Cast,
    identities: &[Identity],
    attacker_arguments: impl Fn(usize, Identity, usize, &std::path::Path, &str) -> Vec<String>,
    world: &mut World,
    daemon: &Daemon,
) -> anyhow::Result<Vec<Spawned>> {
    let mut attackers = Vec::new();
    for (index, &identity) in identities.iter().enumerate() {
        let rttime = attacker_rttime_us(index, identities.len());
        let mut command = command_as(&cast.binary, identity, Some(rttime));
        command.arg("attacker").args(attacker_arguments(
            index,
            identity,
            world.uid_index(identity.uid),
            &daemon.socket,
            &world.tag,
        ));
        let mut attacker = Spawned::start(command, identity)?;
        let process = attacker.ready()?;
        world.attackers.push(AttackerInfo { identity, process });
        attackers.push(attacker);
    }
    Ok(attackers)
}

/// Each attacking uid with the processes whose threads count towards its share: its attackers
/// and its bystander.
fn attacking_uid_pids(cast: &Cast, world: &World) -> Vec<UidProcesses> {
    cast.attacking_uids
        .iter()
        .enumerate()
        .map(|(u, &uid)| {
            let mut pids: Vec<u32> = world
                .attackers
                .iter()
                .filter(|attacker| attacker.identity.uid == uid)
                .map(|attacker| attacker.process.pid)
                .collect();
            pids.push(world.bystanders[u].pid);
            UidProcesses { uid, pids }
        })
        .collect()
}
