//! `org.freedesktop.RealtimeKit1` on the system bus: programs that ask rtkit for real-time
//! (PipeWire, PulseAudio, WirePlumber, browsers' audio threads, GNOME Shell) get it from the rtlab
//! daemon unchanged, and their threads become visible (`rtlab reservations`) and upgradable
//! (`rtlab reserve`, or a `[[rtkit.reserve]]` policy that turns a named program's requests into
//! reservations).
//!
//! The interface is rtkit 0.13's: `MakeThreadRealtime(t thread, u priority)`,
//! `MakeThreadRealtimeWithPID(t process, t thread, u priority)`, `MakeThreadHighPriority(t, i)`,
//! `MakeThreadHighPriorityWithPID(t, t, i)`, `ResetKnown`, `ResetAll`, `Exit`, and the properties
//! `RTTimeUSecMax` (x), `MaxRealtimePriority` (i), `MinNiceLevel` (i); the rules are rtkit's
//! ([`policy`]): the caller (from the bus's `GetConnectionCredentials`, its pid checked against
//! the bus's pidfd of it where the bus gives one) may only ask for threads of its own uid, the
//! target process must have an RLIMIT_RTTIME hard limit of at most `RTTimeUSecMax`, priorities
//! and nice levels have bounds, users have burst, process and thread limits, and threads get
//! `SCHED_RR | SCHED_RESET_ON_FORK`. A [`canary`] demotes the threads of the users that starve a
//! CPU, and of a user whose threads run more than its share of one ([`meter`]). Every change is
//! journalled ([`book`]) and undone when the thread's grant ends, when the daemon stops, and at
//! the next start after a SIGKILL.
//!
//! The bus is zbus's (pure Rust, no hand-written wire protocol); its blocking connection runs its
//! own executor thread, and the methods are `async` only so that the bus call that reads the
//! caller's credentials does not block that executor; the rest is short synchronous work.
//!
//! `ResetKnown`, `ResetAll` and `Exit` are for root only (rtkit's bus policy denies them to
//! everyone else; rtlab checks the caller's uid too). `Exit` makes rtlab give the name up and put
//! its RealtimeKit1 threads back; the daemon itself goes on serving reservations.

pub mod book;
pub mod canary;
pub mod config;
mod follow;
pub mod meter;
pub mod observe;
pub mod policy;

use crate::precedence::PiLock;
use crate::registry::{Caller, Registry, TargetThread};
use crate::watch::{WatchHandle, Watcher};
use book::{Book, Given, Sizing, Target};
use config::{ReserveSize, RtkitConfig};
use policy::{Counted, Refusal};
use rtlab_core::rpc::{Backend, GrantInfo, ReserveParams, Target as WireTarget};
use rtlab_core::Nanos;
use rtlab_plan::Owner;
use rtlab_sys::sched::Policy;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;
use zbus::fdo::RequestNameFlags;

/// The bus name rtkit-daemon owns.
pub const BUS_NAME: &str = "org.freedesktop.RealtimeKit1";
/// The object rtkit-daemon serves.
pub const OBJECT_PATH: &str = "/org/freedesktop/RealtimeKit1";

/// The longest wait for the bus's answer to one of rtlab's own calls (Hello, RequestName, the
/// caller's credentials).
const BUS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the RealtimeKit1 service could not start.
#[derive(Debug, thiserror::Error)]
pub enum RtkitError {
    #[error("RealtimeKit1: connecting to the system bus (${{DBUS_SYSTEM_BUS_ADDRESS}}, else /run/dbus/system_bus_socket): {0}")]
    Bus(zbus::Error),
    #[error("RealtimeKit1: {BUS_NAME} is already owned by {owner}; rtlab does not fight over it: stop that service first (systemctl stop rtkit-daemon), or ask to take it over with --replace (the bus hands it over only when its owner allows replacement, which rtkit-daemon does not)")]
    NameTaken { owner: String },
    #[error("RealtimeKit1: the bus refused {BUS_NAME} to rtlab: {0} (is packaging/dbus/org.freedesktop.RealtimeKit1.conf installed in /usr/share/dbus-1/system.d/, and is the daemon root?)")]
    NameRefused(zbus::Error),
    #[error("RealtimeKit1: {context}: {source}")]
    System {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Locks ignoring poison (a panicked holder must not stop the reverting of threads).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Tells the operator (the daemon's stderr, systemd's journal under rtlabd.service) what the
/// service did on its own: the name it owns, threads put back after a killed daemon, a canary
/// that fired. These happen while the daemon runs, long after the binary's start-up message.
/// What the kernel really holds for a reservation the daemon just made, as its log says it: "the
/// kernel holds 2.2ms of every 8ms (27.5 % of a CPU)", read back by the registry
/// (`GrantInfo::kernel_held`), never recomputed from the request.
fn kernel_holds(info: &GrantInfo) -> String {
    match &info.kernel_held {
        Some(held) if held.read_from == "not_deadline" => format!(
            "the kernel holds nothing: sched_getattr finds the thread at {}",
            held.policy.as_deref().unwrap_or("another policy")
        ),
        Some(held) => format!(
            "the {} holds {} of every {} ({:.1} % of a CPU)",
            if held.read_from == "dispatcher" {
                "dispatcher"
            } else {
                "kernel"
            },
            Nanos(held.runtime_ns),
            Nanos(held.window_ns),
            held.share * 100.0
        ),
        None => "what the kernel holds was not read back".to_owned(),
    }
}

fn notice(message: &str) {
    eprintln!("rtlab daemon: RealtimeKit1: {message}");
}

/// Who called, from the bus.
#[derive(Clone, Copy, Debug)]
struct BusCaller {
    uid: u32,
    pid: u32,
}

struct Shared {
    config: RtkitConfig,
    book: Arc<PiLock<Book>>,
    registry: Arc<PiLock<Registry>>,
    exit: Mutex<mpsc::Sender<()>>,
    /// Set when the service stops: observations end early.
    stopping: AtomicBool,
    /// The threads observing `[[rtkit.reserve]]` threads, joined when the service stops.
    observations: Mutex<Vec<JoinHandle<()>>>,
}

/// The object served at [`OBJECT_PATH`].
struct RealtimeKit {
    shared: Arc<Shared>,
}

/// The caller behind a message: uid and pid from `GetConnectionCredentials`; where the bus also
/// hands over a pidfd of the caller (`ProcessFD`, dbus-broker and dbus-daemon 1.15.7+), the pid is
/// the pidfd's, so a caller that exited and whose pid was reused is not mistaken for the new one.
async fn caller_of(
    connection: &zbus::Connection,
    header: &zbus::message::Header<'_>,
) -> zbus::fdo::Result<BusCaller> {
    let sender = header
        .sender()
        .ok_or_else(|| zbus::fdo::Error::Failed("the call has no sender".to_owned()))?;
    let proxy = zbus::fdo::DBusProxy::new(connection).await?;
    let credentials = proxy
        .get_connection_credentials(sender.clone().into())
        .await?;
    let uid = credentials.unix_user_id().ok_or_else(|| {
        zbus::fdo::Error::Failed("the bus did not say which uid the caller has".to_owned())
    })?;
    let from_pidfd = credentials
        .process_fd()
        .and_then(|fd| rtlab_sys::ipc::pidfd_info(fd.as_fd()).ok())
        .map(|info| info.tgid);
    let pid = from_pidfd.or(credentials.process_id()).ok_or_else(|| {
        zbus::fdo::Error::Failed("the bus did not say which process the caller is".to_owned())
    })?;
    Ok(BusCaller { uid, pid })
}

fn id_argument(value: u64, what: &str) -> Result<u32, Refusal> {
    u32::try_from(value)
        .ok()
        .filter(|id| *id != 0 && *id <= i32::MAX as u32)
        .ok_or_else(|| Refusal::Failed(format!("{what} {value} is not a process or thread id")))
}

/// What was asked.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Realtime { priority: u32 },
    Nice { nice: i32 },
}

impl Shared {
    /// rtkit's `lookup_client` and `process_set_realtime`/`process_set_high_priority`.
    fn make(
        self: &Arc<Self>,
        caller: BusCaller,
        process: Option<u64>,
        thread: u64,
        ask: Ask,
        method: &'static str,
    ) -> Result<(), Refusal> {
        match ask {
            Ask::Realtime { priority } => policy::check_priority(priority, &self.config)?,
            Ask::Nice { nice } => policy::check_nice(nice, &self.config)?,
        }
        let pid = match process {
            Some(pid) => id_argument(pid, "process")?,
            None => caller.pid,
        };
        let tid = if thread == 0 {
            pid
        } else {
            id_argument(thread, "thread")?
        };
        let (handle, (tgid, real_uid, effective_uid)) = WatchHandle::open_with_owner(tid)
            .map_err(|error| Refusal::Failed(format!("no thread {tid}: {error}")))?;
        if tgid != pid {
            return Err(Refusal::Failed(format!(
                "thread {tid} is not a thread of process {pid}"
            )));
        }
        policy::check_owner(caller.uid, tid, real_uid, effective_uid)?;
        let (_, process_real_uid, process_effective_uid) =
            rtlab_sys::proc_thread::thread_owner(pid)
                .map_err(|error| Refusal::Failed(format!("no process {pid}: {error}")))?;
        policy::check_owner(caller.uid, pid, process_real_uid, process_effective_uid)?;
        let start_of = |id: u32| {
            rtlab_sys::thread_control::thread_start_time(id)
                .map_err(|error| Refusal::Failed(format!("reading /proc/{id}/stat: {error}")))
        };
        let process_start = start_of(pid)?;
        let thread_start = start_of(tid)?;
        // The start time is the checked thread's only if that thread still runs now (its pidfd,
        // opened before the owner check, says so): it fixes the thread's identity from here on.
        if !handle.is_the_same_thread() {
            return Err(Refusal::Failed(format!(
                "thread {tid} exited while it was being checked"
            )));
        }
        if let Ask::Realtime { .. } = ask {
            let (_, hard) =
                rtlab_sys::thread_control::process_rttime_limit(pid).map_err(|error| {
                    Refusal::Failed(format!("reading process {pid}'s RLIMIT_RTTIME: {error}"))
                })?;
            policy::check_rttime(pid, hard, &self.config)?;
        }
        let (held_by, held) = {
            let registry = self.registry.lock();
            (registry.holder_of_thread(tid), registry.held_by(caller.uid))
        };
        {
            let mut book = self.book.lock();
            book.forget_gone();
            policy::check_counts(
                &book.counted(),
                Counted {
                    uid: caller.uid,
                    pid,
                    process_start,
                    tid,
                },
                &self.config,
            )?;
            book.admit(caller.uid, held, Instant::now())?;
        }
        if let Some(holder) = held_by {
            // The thread holds an rtlab reservation or Time Constraint already, which outranks
            // SCHED_RR; changing its policy would break it. It has its real-time: say yes.
            notice(&format!(
                "thread {tid} of process {pid} asked for real-time and already holds {holder}; left as it is"
            ));
            return Ok(());
        }
        let target = Target {
            uid: caller.uid,
            pid,
            process_start,
            tid,
            thread_start,
            caller_pid: caller.pid,
            method,
        };
        let mut observe_for = None;
        if let Ask::Realtime { priority } = ask {
            match self.reserve_rule(&target) {
                Some((program, ReserveSize::Fixed { amount, period })) => {
                    match self.reserve_for(&target, amount, period, None) {
                        Ok(info) => {
                            notice(&format!(
                                "thread {} of {program} (pid {}) got reservation {} by [[rtkit.reserve]] instead of SCHED_RR: asked {amount} of every {period}; {}",
                                target.tid,
                                target.pid,
                                info.grant_id,
                                kernel_holds(&info)
                            ));
                            return self.book.lock().apply(
                                &target,
                                Policy::RoundRobin { priority },
                                Given::Reservation {
                                    grant_id: info.grant_id,
                                },
                                Some(handle),
                            );
                        }
                        Err(why) => notice(&format!(
                            "thread {} of {program} (pid {}): the [[rtkit.reserve]] reservation was refused ({why}); it gets SCHED_RR instead",
                            target.tid, target.pid
                        )),
                    }
                }
                Some((program, ReserveSize::Observed { observe, follow })) => {
                    observe_for = Some((program, observe, follow, priority));
                }
                None => {}
            }
        }
        let (policy, given) = match ask {
            Ask::Realtime { priority } => (
                Policy::RoundRobin { priority },
                Given::RoundRobin { priority },
            ),
            Ask::Nice { nice } => (Policy::Other { nice }, Given::Nice { nice }),
        };
        let result = self.book.lock().apply(&target, policy, given, Some(handle));
        if result.is_ok() {
            let what = match ask {
                Ask::Realtime { priority } => format!("SCHED_RR {priority}"),
                Ask::Nice { nice } => format!("nice {nice}"),
            };
            notice(&format!(
                "{method}: thread {tid} of process {pid} (uid {}) now runs at {what}",
                caller.uid
            ));
            if let Some((program, observe, follow, priority)) = observe_for {
                self.start_sizing(target, program, observe, follow, priority);
            }
        }
        result
    }

    /// The `[[rtkit.reserve]]` rule naming the target's program, if any.
    fn reserve_rule(&self, target: &Target) -> Option<(String, ReserveSize)> {
        let program = rtlab_sys::proc_thread::thread_comm(target.pid).ok()?;
        let rule = self
            .config
            .reserve
            .iter()
            .find(|rule| rule.program == program)?;
        Some((program, rule.size))
    }

    /// Sizes a `[[rtkit.reserve]]` thread by observation on a thread of its own: the caller has
    /// its SCHED_RR already (at `priority`); when the observation ends, the reservation it calls
    /// for replaces that, or the thread stays SCHED_RR and the book says why. With `follow` (a
    /// window) the same thread then follows the reservation ([`follow`]).
    fn start_sizing(
        self: &Arc<Self>,
        target: Target,
        program: String,
        observe: Nanos,
        follow: Option<Nanos>,
        priority: u32,
    ) {
        let Some(observer) = observe::observer() else {
            let reason = "this daemon has no thread observer to size it with".to_owned();
            notice(&format!(
                "thread {} of {program} (pid {}): {reason}; it stays SCHED_RR",
                target.tid, target.pid
            ));
            self.book.lock().set_sizing(
                target.tid,
                target.thread_start,
                Sizing::Unreserved { reason },
            );
            return;
        };
        let observing = Sizing::Observing {
            until: std::time::SystemTime::now() + observe.as_std(),
            observe: observe.as_std(),
        };
        if !self
            .book
            .lock()
            .set_sizing(target.tid, target.thread_start, observing)
        {
            return;
        }
        let (tid, thread_start) = (target.tid, target.thread_start);
        let shared = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("rtkit-observe".into())
            .spawn(move || {
                shared.size_by_observation(&*observer, &target, &program, observe, follow, priority)
            });
        match spawned {
            Ok(thread) => {
                let mut observations = lock(&self.observations);
                observations.retain(|thread| !thread.is_finished());
                observations.push(thread);
            }
            Err(error) => {
                self.book.lock().set_sizing(
                    tid,
                    thread_start,
                    Sizing::Unreserved {
                        reason: format!("the observation could not start: {error}"),
                    },
                );
            }
        }
    }

    /// The observation and what comes of it (on the observing thread), then, with `follow`,
    /// the following of the reservation made.
    fn size_by_observation(
        &self,
        observer: &dyn observe::ThreadObserver,
        target: &Target,
        program: &str,
        observe: Nanos,
        follow: Option<Nanos>,
        priority: u32,
    ) {
        let mut how = String::new();
        let mut machine = None;
        let sized = observer
            .observe(target.pid, observe, &self.stopping)
            .and_then(|observation| {
                how = observation.how.clone();
                machine = Some(observation.machine.clone());
                observe::size_thread(&observation, target.tid)
            });
        if self.stopping.load(Ordering::SeqCst)
            || !self
                .book
                .lock()
                .is_observing(target.tid, target.thread_start)
        {
            return;
        }
        let sizing = match &sized {
            Ok(reservation) => {
                let backend = match reservation.backend {
                    rtlab_sched::auto_reserve::AutoBackend::Deadline => Backend::Deadline,
                    rtlab_sched::auto_reserve::AutoBackend::Dispatch => Backend::Dispatch,
                };
                match self.reserve_for(
                    target,
                    reservation.amount,
                    reservation.window,
                    Some(backend),
                ) {
                    Ok(info) => Sizing::Reserved {
                        grant_id: info.grant_id,
                        detail: format!(
                            "period {}, {} per activation ({} plus {:.0} %) → reservation {}: asked {} of every {} ({}; {}); {}; observed through {how}",
                            reservation.period,
                            reservation.need_per_activation,
                            rtlab_sched::auto_reserve::SIZING_PERCENTILE,
                            rtlab_sched::auto_reserve::SIZING_MARGIN * 100.0,
                            info.grant_id,
                            reservation.amount,
                            reservation.window,
                            backend,
                            reservation.why_backend,
                            kernel_holds(&info)
                        ),
                    },
                    Err(why) => Sizing::Unreserved {
                        reason: format!(
                            "the observed reservation ({} of every {}) was refused: {why}",
                            reservation.amount, reservation.window
                        ),
                    },
                }
            }
            Err(why) => Sizing::Unreserved {
                reason: format!("no reservation from the observation: {why}"),
            },
        };
        notice(&format!(
            "thread {} of {program} (pid {}) by [[rtkit.reserve]]: {}",
            target.tid,
            target.pid,
            match &sizing {
                Sizing::Reserved { detail, .. } =>
                    format!("observed: {detail}, instead of SCHED_RR"),
                Sizing::Unreserved { reason } => format!("{reason}; it stays SCHED_RR"),
                Sizing::Observing { .. } => String::new(),
            }
        ));
        let kept = self
            .book
            .lock()
            .set_sizing(target.tid, target.thread_start, sizing.clone());
        if let (
            true,
            Sizing::Reserved { grant_id, detail },
            Some(window),
            Some(reservation),
            Some(machine),
        ) = (kept, &sizing, follow, sized.as_ref().ok(), machine)
        {
            follow::FollowedGrant {
                shared: self,
                observer,
                target,
                program,
                grant_id: *grant_id,
                window,
                sampler_priority: (priority + 1).clamp(1, 98),
            }
            .run(reservation, machine, detail);
            return;
        }
        if let (false, Sizing::Reserved { grant_id, .. }) = (kept, &sizing) {
            // The thread left the book while it was being reserved: its reservation goes too.
            let caller = Caller {
                pid: std::process::id(),
                uid: 0,
                privileged: true,
            };
            let _ = self.registry.lock().release(
                &caller,
                &rtlab_core::rpc::ReleaseTarget::Grant {
                    grant_id: *grant_id,
                },
            );
        }
    }

    /// A reservation of `amount` every `period` for the target thread through the daemon's
    /// registry (admission, enforcement, the user's limit), as its owner would ask for it.
    fn reserve_for(
        &self,
        target: &Target,
        amount: Nanos,
        period: Nanos,
        backend: Option<Backend>,
    ) -> Result<GrantInfo, String> {
        // The registry watches the thread through a pidfd of its own; the book keeps the other.
        let registry_handle = WatchHandle::open(target.tid, target.pid)
            .map_err(|error| format!("thread {}: {error}", target.tid))?;
        let comm = rtlab_sys::proc_thread::thread_comm(target.tid).unwrap_or_default();
        let params = ReserveParams {
            target: WireTarget::Thread { tid: target.tid },
            amount_ns: amount.0,
            period_ns: period.0,
            backend,
            reclaim: false,
        };
        let caller = Caller {
            pid: target.caller_pid,
            uid: target.uid,
            privileged: false,
        };
        let thread = TargetThread {
            pid: target.pid,
            tid: target.tid,
            comm,
            real_uid: target.uid,
            effective_uid: target.uid,
        };
        self.registry
            .lock()
            .reserve(
                &caller,
                &params,
                Owner::Thread(target.tid),
                vec![thread],
                vec![registry_handle],
            )
            .map_err(|error| error.message)
    }

    /// Root in the daemon's own user namespace: uid 0 in a user namespace of its own (`unshare
    /// -Ur`, which any user may make) is not root here.
    fn require_root(&self, caller: BusCaller, method: &str) -> Result<(), Refusal> {
        let own_namespace = matches!(
            rtlab_sys::user_namespace::user_namespace_of(caller.pid),
            Ok(rtlab_sys::user_namespace::Relation::Same)
        );
        if caller.uid == 0 && own_namespace {
            Ok(())
        } else if caller.uid == 0 {
            Err(Refusal::AccessDenied(format!(
                "{method} is for root only, and pid {} is root only in a user namespace of its own",
                caller.pid
            )))
        } else {
            Err(Refusal::AccessDenied(format!(
                "{method} is for root only (uid {} asked)",
                caller.uid
            )))
        }
    }

    /// rtkit's `reset_all`: the book's threads, then every SCHED_RR/SCHED_FIFO thread of every
    /// process not owned by root, except the threads rtlab's own reservations hold.
    fn reset_all(&self) -> usize {
        let mut changed = self.book.lock().reset_known();
        let Ok(pids) = rtlab_sys::proc_thread::process_ids() else {
            return changed;
        };
        let own_pid = std::process::id();
        for pid in pids {
            if pid == 1 || pid == own_pid {
                continue;
            }
            if !rtlab_sys::proc_thread::thread_owner(pid).is_ok_and(|owner| owner.2 != 0) {
                continue;
            }
            let Ok(tids) = rtlab_sys::sched::process_thread_ids(pid) else {
                continue;
            };
            for tid in tids {
                let realtime = matches!(
                    rtlab_sys::sched::thread_policy(tid),
                    Ok(Policy::RoundRobin { .. } | Policy::Fifo { .. })
                );
                if realtime && self.registry.lock().holder_of_thread(tid).is_none() {
                    let Ok(start) = rtlab_sys::thread_control::thread_start_time(tid) else {
                        continue;
                    };
                    if book::demote(tid, start) {
                        changed += 1;
                    }
                }
            }
        }
        changed
    }
}

/// What every method of the interface does first: ask the bus who called.
impl RealtimeKit {
    /// The four Make* methods: the caller, then [`Shared::make`] (`process` None: the caller's).
    async fn make(
        &self,
        connection: &zbus::Connection,
        header: &zbus::message::Header<'_>,
        process: Option<u64>,
        thread: u64,
        ask: Ask,
        method: &'static str,
    ) -> zbus::fdo::Result<()> {
        let caller = caller_of(connection, header).await?;
        Ok(self.shared.make(caller, process, thread, ask, method)?)
    }

    /// The methods for root only (ResetKnown, ResetAll, Exit): refused for any other caller.
    async fn require_root(
        &self,
        connection: &zbus::Connection,
        header: &zbus::message::Header<'_>,
        method: &str,
    ) -> zbus::fdo::Result<()> {
        let caller = caller_of(connection, header).await?;
        Ok(self.shared.require_root(caller, method)?)
    }
}

#[zbus::interface(name = "org.freedesktop.RealtimeKit1")]
impl RealtimeKit {
    async fn make_thread_realtime(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
        thread: u64,
        priority: u32,
    ) -> zbus::fdo::Result<()> {
        let ask = Ask::Realtime { priority };
        self.make(connection, &header, None, thread, ask, "MakeThreadRealtime")
            .await
    }

    #[zbus(name = "MakeThreadRealtimeWithPID")]
    async fn make_thread_realtime_with_pid(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
        process: u64,
        thread: u64,
        priority: u32,
    ) -> zbus::fdo::Result<()> {
        let ask = Ask::Realtime { priority };
        self.make(
            connection,
            &header,
            Some(process),
            thread,
            ask,
            "MakeThreadRealtimeWithPID",
        )
        .await
    }

    async fn make_thread_high_priority(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
        thread: u64,
        priority: i32,
    ) -> zbus::fdo::Result<()> {
        let ask = Ask::Nice { nice: priority };
        self.make(
            connection,
            &header,
            None,
            thread,
            ask,
            "MakeThreadHighPriority",
        )
        .await
    }

    #[zbus(name = "MakeThreadHighPriorityWithPID")]
    async fn make_thread_high_priority_with_pid(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
        process: u64,
        thread: u64,
        priority: i32,
    ) -> zbus::fdo::Result<()> {
        let ask = Ask::Nice { nice: priority };
        self.make(
            connection,
            &header,
            Some(process),
            thread,
            ask,
            "MakeThreadHighPriorityWithPID",
        )
        .await
    }

    async fn reset_known(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> zbus::fdo::Result<()> {
        self.require_root(connection, &header, "ResetKnown").await?;
        let changed = self.shared.book.lock().reset_known();
        notice(&format!("ResetKnown: {changed} threads put back"));
        Ok(())
    }

    async fn reset_all(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> zbus::fdo::Result<()> {
        self.require_root(connection, &header, "ResetAll").await?;
        let changed = self.shared.reset_all();
        notice(&format!(
            "ResetAll: {changed} threads put back to SCHED_OTHER"
        ));
        Ok(())
    }

    async fn exit(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> zbus::fdo::Result<()> {
        self.require_root(connection, &header, "Exit").await?;
        let changed = self.shared.book.lock().close();
        notice(&format!(
            "Exit: {changed} threads put back; giving {BUS_NAME} up (the daemon goes on serving reservations)"
        ));
        let _ = lock(&self.shared.exit).send(());
        Ok(())
    }

    #[zbus(property(emits_changed_signal = "const"), name = "RTTimeUSecMax")]
    fn rttime_usec_max(&self) -> i64 {
        self.shared.config.rttime_usec_max as i64
    }

    #[zbus(property(emits_changed_signal = "const"), name = "MaxRealtimePriority")]
    fn max_realtime_priority(&self) -> i32 {
        self.shared.config.max_realtime_priority as i32
    }

    #[zbus(property(emits_changed_signal = "const"), name = "MinNiceLevel")]
    fn min_nice_level(&self) -> i32 {
        self.shared.config.min_nice_level
    }
}

/// The running service; [`Service::stop`] ends it (after the registry put the threads back).
pub struct Service {
    connection: zbus::blocking::Connection,
    shared: Arc<Shared>,
    canary: Option<canary::Canary>,
    watcher: Watcher,
    watcher_thread: Option<JoinHandle<()>>,
    exit_thread: Option<JoinHandle<()>>,
    exit: mpsc::Sender<()>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Service")
            .field("canary", &self.canary)
            .finish_non_exhaustive()
    }
}

/// Says who owns [`BUS_NAME`]: its unique name, and its pid and program where the bus tells.
fn describe_owner(connection: &zbus::blocking::Connection) -> String {
    let Ok(proxy) = zbus::blocking::fdo::DBusProxy::new(connection) else {
        return "another program".to_owned();
    };
    let Ok(owner) = proxy.get_name_owner(BUS_NAME.try_into().expect("a valid bus name")) else {
        return "another program".to_owned();
    };
    match proxy.get_connection_unix_process_id(owner.clone().into()) {
        Ok(pid) => {
            let program =
                rtlab_sys::proc_thread::thread_comm(pid).unwrap_or_else(|_| "a program".to_owned());
            format!("{program} (pid {pid}, bus connection {owner})")
        }
        Err(_) => format!("bus connection {owner}"),
    }
}

/// Puts back what a killed daemon's RealtimeKit1 service left (always, with or without
/// `--rtkit`), then, when `[rtkit] enabled`, owns [`BUS_NAME`] and serves it with the canary.
/// `panicked` is set if the service's exit watcher fails (the daemon then stops and reverts).
pub fn start(
    state_dir: &Path,
    config: &RtkitConfig,
    registry: &Arc<PiLock<Registry>>,
    panicked: &Arc<AtomicBool>,
) -> Result<Option<Service>, RtkitError> {
    let system = |context: &str| {
        let context = context.to_owned();
        move |source| RtkitError::System { context, source }
    };
    let repaired = Book::repair(state_dir).map_err(system(&format!(
        "putting back the threads a killed daemon left ({})",
        Book::journal_directory(state_dir).display()
    )))?;
    if !repaired.restored.is_empty() || !repaired.failed.is_empty() {
        notice(&format!(
            "put back {} threads a killed daemon had made real-time ({:?}); {} could not be put back {:?}",
            repaired.restored.len(),
            repaired.restored,
            repaired.failed.len(),
            repaired.failed
        ));
    }
    if !config.enabled {
        return Ok(None);
    }
    let (watcher, watcher_loop) = Watcher::new().map_err(system("creating the exit watcher"))?;
    let book = Arc::new(PiLock::new(
        Book::open(state_dir, config.clone(), watcher.clone())
            .map_err(system("opening the journal"))?,
    ));
    let (exit_sender, exit_receiver) = mpsc::channel();
    let shared = Arc::new(Shared {
        config: config.clone(),
        book: Arc::clone(&book),
        registry: Arc::clone(registry),
        exit: Mutex::new(exit_sender.clone()),
        stopping: AtomicBool::new(false),
        observations: Mutex::new(Vec::new()),
    });
    let connection = match own_name(config, Arc::clone(&shared)) {
        Ok(connection) => connection,
        Err(error) if config.required => return Err(error),
        Err(error) => {
            // Enabled by the configuration alone (the package's default): the reservations are
            // served all the same.
            eprintln!(
                "rtlab daemon: {error}; serving reservations without RealtimeKit1 (with --rtkit the daemon would not start)"
            );
            return Ok(None);
        }
    };
    registry.lock().attach_realtimekit(Arc::clone(&book));
    let watcher_registry = Arc::clone(registry);
    let watcher_panicked = Arc::clone(panicked);
    let watcher_thread = std::thread::Builder::new()
        .name("rtkit-exits".into())
        .spawn(move || {
            if watcher_loop.run(watcher_registry).is_err() {
                watcher_panicked.store(true, Ordering::SeqCst);
            }
        })
        .map_err(system("starting the exit watcher"))?;
    let exit_connection = connection.clone();
    let exit_thread = std::thread::Builder::new()
        .name("rtkit-exit".into())
        .spawn(move || {
            // One message: Exit was called; a closed channel: the service is stopping.
            if exit_receiver.recv().is_ok() {
                let _ = exit_connection.release_name(BUS_NAME);
            }
        })
        .map_err(system("starting the Exit thread"))?;
    let mut service = Service {
        connection,
        shared,
        canary: None,
        watcher,
        watcher_thread: Some(watcher_thread),
        exit_thread: Some(exit_thread),
        exit: exit_sender,
    };
    // The watchdog runs without the canaries too: it meters the users' shares.
    let canary_book = Arc::clone(&book);
    service.canary = Some(
        canary::Canary::start(
            canary_book,
            Arc::clone(registry),
            config,
            |demotion| match demotion {
                canary::Demotion::Starvation {
                    cpu,
                    silent_for,
                    users,
                    demoted,
                } => notice(&format!(
                    "CPU {cpu} starved: its canary did not run for {} ms; {} ran real-time threads there: demoted {} threads {demoted:?} to SCHED_OTHER and refusing their requests for rtkit.canary_refusal (other users are not affected)",
                    silent_for.as_millis(),
                    canary::uid_list(users),
                    demoted.len(),
                )),
                canary::Demotion::OverShare { why, uid, demoted } => notice(&format!(
                    "{why}: demoted {} threads {demoted:?} to SCHED_OTHER and refusing uid {uid}'s requests for rtkit.user_share_refusal",
                    demoted.len(),
                )),
            },
        )
        .map_err(system("starting the canary and the watchdog"))?,
    );
    let address = std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .unwrap_or_else(|_| "unix:path=/run/dbus/system_bus_socket".to_owned());
    notice(&format!(
        "owns {BUS_NAME} at {OBJECT_PATH} on the system bus ({address}); max priority {}, min nice {}, RTTimeUSecMax {} µs, per user {:.1} % of a CPU over {}, canary {}",
        config.max_realtime_priority,
        config.min_nice_level,
        config.rttime_usec_max,
        config.user_share * 100.0,
        humantime::format_duration(config.user_share_window),
        if config.canary {
            format!("demotes after {} ms", config.canary_timeout.as_millis())
        } else {
            "off".to_owned()
        }
    ));
    Ok(Some(service))
}

/// Connects to the system bus with the service's object and owns [`BUS_NAME`].
fn own_name(
    config: &RtkitConfig,
    shared: Arc<Shared>,
) -> Result<zbus::blocking::Connection, RtkitError> {
    // A bus that does not answer (a policy that drops replies) must not hang the daemon's start.
    let connection = zbus::blocking::connection::Builder::system()
        .map(|builder| builder.method_timeout(BUS_TIMEOUT))
        .and_then(|builder| {
            builder.serve_at(
                OBJECT_PATH,
                RealtimeKit {
                    shared: Arc::clone(&shared),
                },
            )
        })
        .and_then(zbus::blocking::connection::Builder::build)
        .map_err(RtkitError::Bus)?;
    // Never AllowReplacement: once rtlab owns the name, nothing takes it over mid-run.
    let flags = if config.replace {
        RequestNameFlags::DoNotQueue | RequestNameFlags::ReplaceExisting
    } else {
        RequestNameFlags::DoNotQueue.into()
    };
    match connection.request_name_with_flags(BUS_NAME, flags) {
        Ok(
            zbus::fdo::RequestNameReply::PrimaryOwner | zbus::fdo::RequestNameReply::AlreadyOwner,
        ) => {}
        Ok(_) | Err(zbus::Error::NameTaken) => {
            return Err(RtkitError::NameTaken {
                owner: describe_owner(&connection),
            })
        }
        Err(error) => return Err(RtkitError::NameRefused(error)),
    }
    Ok(connection)
}

impl Service {
    /// Gives the name up and stops the canary and the exit watcher. The registry's shutdown has
    /// put every thread back already (its `shut_down` closes the book).
    pub fn stop(mut self) {
        let _ = self.connection.release_name(BUS_NAME);
        // Observations end within one of their windows; what they would reserve is refused by
        // the registry, which has shut down.
        self.shared.stopping.store(true, Ordering::SeqCst);
        let observations = std::mem::take(&mut *lock(&self.shared.observations));
        for thread in observations {
            let _ = thread.join();
        }
        self.canary = None;
        self.watcher.stop();
        if let Some(thread) = self.watcher_thread.take() {
            let _ = thread.join();
        }
        // Wakes the Exit thread, which gives the (already released) name up again and ends.
        let _ = self.exit.send(());
        if let Some(thread) = self.exit_thread.take() {
            let _ = thread.join();
        }
    }
}
