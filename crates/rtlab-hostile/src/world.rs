//! The processes of one run and the names of their threads: what an attacker's symbolic targets
//! ([`crate::action`]) stand for in this run. The harness makes it once every process has said it
//! is ready and hands it to each attacker; a replay makes a new one with new processes.

use crate::action::{CommRef, ProcessRef, RtkitId, ThreadRef};
use serde::{Deserialize, Serialize};

/// Who a process runs as: a uid, and whether it sits in a user namespace of its own (`unshare
/// -Ur`), where it is root with every capability as far as it can see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub user_namespace: bool,
}

impl Identity {
    pub const NOBODY: u32 = 65_534;
    /// Debian's `daemon` user: the second attacking uid. Every uid here has an entry in
    /// /etc/passwd, which dbus-daemon asks of each connection (it refuses a uid without one).
    pub const DAEMON: u32 = 1;
    /// Debian's `bin` user: the quiet user, who attacks nobody.
    pub const BIN: u32 = 2;

    /// `nobody`, `daemon in unshare -Ur`, `root`.
    pub fn describe(&self) -> String {
        let name = match self.uid {
            0 => "root".to_owned(),
            Identity::NOBODY => "nobody".to_owned(),
            Identity::DAEMON => "daemon".to_owned(),
            Identity::BIN => "bin".to_owned(),
            uid => format!("uid {uid}"),
        };
        if self.user_namespace {
            format!("{name} in unshare -Ur")
        } else {
            name
        }
    }
}

/// A process and its named threads, in the order of their names (`-0`, `-1`, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub tids: Vec<u32>,
}

/// An attacker process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttackerInfo {
    pub identity: Identity,
    pub process: ProcessInfo,
}

/// Every process of a run the attackers may aim at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct World {
    /// Four hex digits in every thread name of this run, so no other program's thread shares one.
    pub tag: String,
    /// The name (`comm`) of every harness process's main thread.
    pub binary_comm: String,
    pub root_victims: Vec<ProcessInfo>,
    /// The unprivileged uids that attack, each with a bystander process no attacker of its own
    /// uid aims at: index `u` in both.
    pub attacking_uids: Vec<u32>,
    pub bystanders: Vec<ProcessInfo>,
    pub attackers: Vec<AttackerInfo>,
    /// The private system bus the daemon serves RealtimeKit1 on (`unix:path=…`), if it does.
    #[serde(default)]
    pub bus_address: Option<String>,
}

/// The thread names of a run: a process's named threads are `PREFIX-k`.
pub fn root_victim_prefix(tag: &str, v: usize) -> String {
    format!("hx{tag}r{v}")
}

pub fn bystander_prefix(tag: &str, u: usize) -> String {
    format!("hx{tag}b{u}")
}

/// The quiet user's process (a victim with a thread RealtimeKit1 made real-time).
pub fn quiet_prefix(tag: &str) -> String {
    format!("hx{tag}q")
}

/// An attacker's named threads: `u` is its uid's index (root's: one past the attacking uids).
pub fn attacker_prefix(tag: &str, u: usize) -> String {
    format!("hx{tag}a{u}")
}

pub fn thread_name(prefix: &str, k: usize) -> String {
    format!("{prefix}-{k}")
}

/// An attacker as the targets see it: its uid's index and its own process.
#[derive(Clone, Debug)]
pub struct Me {
    pub uid: u32,
    pub process: ProcessInfo,
}

impl World {
    /// The index of `uid` among the attacking uids (root's, or any other: one past them).
    pub fn uid_index(&self, uid: u32) -> usize {
        self.attacking_uids
            .iter()
            .position(|&attacking| attacking == uid)
            .unwrap_or(self.attacking_uids.len())
    }

    fn other_attacker(&self, me: &Me) -> Option<&ProcessInfo> {
        self.attackers
            .iter()
            .find(|attacker| {
                attacker.identity.uid != me.uid
                    && self.attacking_uids.contains(&attacker.identity.uid)
            })
            .map(|attacker| &attacker.process)
    }

    /// The thread id `thread` stands for (0 where the role has no thread in this world).
    pub fn tid(&self, me: &Me, thread: &ThreadRef) -> u32 {
        let nth = |process: Option<&ProcessInfo>, k: usize| {
            process
                .and_then(|process| process.tids.get(k))
                .copied()
                .unwrap_or(0)
        };
        match *thread {
            ThreadRef::Own { k } => nth(Some(&me.process), k),
            ThreadRef::OwnMain => me.process.pid,
            ThreadRef::RootVictim { v, k } => nth(self.root_victims.get(v), k),
            ThreadRef::Bystander { u, k } => nth(self.bystanders.get(u), k),
            ThreadRef::OtherAttacker { k } => nth(self.other_attacker(me), k),
            ThreadRef::Bogus { tid } => tid,
        }
    }

    pub fn pid(&self, me: &Me, process: &ProcessRef) -> u32 {
        let pid = |process: Option<&ProcessInfo>| process.map_or(0, |process| process.pid);
        match *process {
            ProcessRef::Own => me.process.pid,
            ProcessRef::RootVictim { v } => pid(self.root_victims.get(v)),
            ProcessRef::Bystander { u } => pid(self.bystanders.get(u)),
            ProcessRef::OtherAttacker => pid(self.other_attacker(me)),
            ProcessRef::Bogus { pid } => pid,
        }
    }

    /// The `u64` a RealtimeKit1 call carries for `id`.
    pub fn rtkit_id(&self, me: &Me, id: &RtkitId) -> u64 {
        match id {
            RtkitId::Thread(thread) => u64::from(self.tid(me, thread)),
            RtkitId::Process(process) => u64::from(self.pid(me, process)),
            RtkitId::Wrapped(thread) => u64::from(self.tid(me, thread)) + (1 << 32),
            RtkitId::Raw(id) => *id,
        }
    }

    pub fn comm(&self, me: &Me, comm: &CommRef) -> String {
        match comm {
            CommRef::Own { k } => {
                thread_name(&attacker_prefix(&self.tag, self.uid_index(me.uid)), *k)
            }
            CommRef::RootVictim { v, k } => thread_name(&root_victim_prefix(&self.tag, *v), *k),
            CommRef::Bystander { u, k } => thread_name(&bystander_prefix(&self.tag, *u), *k),
            CommRef::Binary => self.binary_comm.clone(),
            CommRef::Raw { name } => name.clone(),
        }
    }
}
