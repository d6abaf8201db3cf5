//! One stage of processes: a fresh daemon, root's victims, a bystander per attacking uid, and the
//! attackers, with the [`World`] they share and the [`Checker`]'s baseline read before the first
//! attack. A run has one stage; each replay of a shrinking search another, with new processes.

use crate::checker::{Checker, Watched};
use crate::daemon::{Daemon, DaemonSettings};
use crate::process::{command_as, Spawned};
use crate::world::{bystander_prefix, root_victim_prefix, AttackerInfo, Identity, World};
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

/// A running stage. Dropped: attackers killed, the daemon stopped with SIGTERM (it reverts every
/// thread), victims ended, the directory removed.
pub struct Stage {
    pub attackers: Vec<Spawned>,
    pub daemon: Daemon,
    pub victims: Vec<Spawned>,
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
        let daemon = Daemon::start(&cast.daemon, directory.path(), "rtlabd")?;
        let tag = format!("{:04x}", rand::random::<u16>());
        let lifetime = cast.lifetime.as_secs().to_string();
        let mut victims = Vec::new();
        let mut watched = Vec::new();
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
        };
        let victim_command = |identity: Identity, prefix: String| {
            let mut command = command_as(&cast.binary, identity);
            command.args([
                "victim",
                "--prefix",
                &prefix,
                "--lifetime-seconds",
                &lifetime,
            ]);
            Spawned::start(command, identity)
        };
        for v in 0..cast.root_victims {
            let root = Identity {
                uid: 0,
                user_namespace: false,
            };
            let mut victim = victim_command(root, root_victim_prefix(&tag, v))?;
            let info = victim.ready()?;
            watched.push(Watched {
                role: format!("root's victim {v}"),
                pid: info.pid,
            });
            world.root_victims.push(info);
            victims.push(victim);
        }
        for (u, &uid) in cast.attacking_uids.iter().enumerate() {
            let identity = Identity {
                uid,
                user_namespace: false,
            };
            let mut bystander = victim_command(identity, bystander_prefix(&tag, u))?;
            let info = bystander.ready()?;
            watched.push(Watched {
                role: format!("{}'s bystander", identity.describe()),
                pid: info.pid,
            });
            world.bystanders.push(info);
            victims.push(bystander);
        }
        let mut attackers = Vec::new();
        for (index, &identity) in identities.iter().enumerate() {
            let mut command = command_as(&cast.binary, identity);
            command.arg("attacker").args(attacker_arguments(
                index,
                identity,
                world.uid_index(identity.uid),
                &daemon.socket,
                &tag,
            ));
            let mut attacker = Spawned::start(command, identity)?;
            let process = attacker.ready()?;
            world.attackers.push(AttackerInfo { identity, process });
            attackers.push(attacker);
        }
        let uids = cast
            .attacking_uids
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
                (uid, pids)
            })
            .collect();
        let checker =
            Checker::new(&watched, uids, cast.limit).context("reading the victims' policies")?;
        let line = serde_json::to_string(&world)?;
        for attacker in &mut attackers {
            attacker.write_line(&line)?;
        }
        Ok(Stage {
            attackers,
            daemon,
            victims,
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
        self.daemon = Daemon::start(settings, self.directory.path(), "rtlabd")?;
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
