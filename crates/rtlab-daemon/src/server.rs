//! The socket side: accepting clients, reading their lines, answering.
//!
//! # I/O design: a thread per connection, capped
//!
//! Each accepted connection gets its own small thread that reads with timeouts, and every request
//! then runs under the one registry mutex. Chosen over an event loop (mio/poll) because
//! * the work per request is microseconds of bookkeeping plus one enforcement call, and the
//!   registry must serialise those anyway, so an event loop would buy no parallelism;
//! * a blocking reader with a deadline per line is all it takes to keep a slow or silent client
//!   from stalling anyone else: it only ever holds its own thread, never the registry lock while
//!   reading or writing;
//! * clients are few (one connection per program that reserves), so the threads' cost is bounded
//!   by the caps: `max_connections` in all (512) and `max_connections_per_user` per uid (64), each
//!   thread with a 256 KiB stack of which it touches little. A connection over a cap gets a
//!   `busy` error line (written without blocking) and is closed.
//!
//! A connection's thread is not started for it when one is waiting: a thread that has served
//! its connection is kept 30 s for the next (`crate::thread_cache`), since starting and ending
//! threads takes process-wide locks in the kernel that a starved thread of the daemon may hold
//! while root waits. Root's socket has threads of its own, at root's policy.
//!
//! Every line is read with a cap ([`MAX_LINE_BYTES`]): a longer one gets `too_long` and the
//! connection is closed, since the rest of it cannot be framed. A request whose first byte
//! arrived must be complete within `request_timeout` (else `timeout` and close); an idle
//! connection is closed after `idle_timeout`. Writes have a timeout too, so a client that never
//! reads cannot hold its thread forever.
//!
//! A connection's caller is decided when it is accepted, under a pidfd of the peer
//! (`crate::peer`), and before each request that pidfd is asked whether the peer still runs: one
//! that has exited is refused and its connection closed. Each unprivileged uid's requests
//! are then counted against its burst budget (`crate::budget`), under a lock of its own; a uid
//! whose budget is spent has its new connections refused at accept, before a thread is started.
//!
//! Root first (`crate::precedence`): the accept loop takes every connection waiting and admits
//! root's (SO_PEERCRED uid 0) ahead of the rest; a thread serving an unprivileged peer runs at
//! nice 19; privileged callers enter the registry ahead of unprivileged ones, which enter one at
//! a time.
//!
//! # Root's socket
//!
//! A daemon run as root also listens on root's own socket (`rtlab_core::rpc::root_socket_path`,
//! mode 0600), with an accept thread of its own. That thread and the threads serving its
//! connections run at SCHED_FIFO one above the highest priority RealtimeKit1 grants
//! (`crate::precedence::root_policy`): users' granted threads may hold every CPU within their
//! shares, and root's answer must not wait for the fair server's 50 ms a second meanwhile. Only
//! uid 0 can connect (the file's mode; a peer of any other uid that gets there anyway is
//! refused), so no user can get work done above their own threads' priority through it: the
//! real-time work on this path is root's alone. Its connections are counted apart from the
//! shared socket's, so users filling `max_connections` there do not lock root out here.

use crate::budget::RequestBudget;
use crate::config::DaemonConfig;
use crate::peer::Peer;
use crate::precedence::{PiLock, RegistryGate, ThreadPriority};
use crate::registry::{resolve_target, wire_backend, Caller, Limits, Registry};
use crate::thread_cache::ThreadCache;
use crate::watch::Watcher;
use rtlab_core::rpc::{
    decode_request, Call, ErrorCode, PingResult, Request, Response, RpcError, Target,
    MAX_LINE_BYTES, RPC_PROTOCOL,
};
use rtlab_sched::enforce::Enforcement;
use rtlab_sys::ipc::PeerCredentials;
use rtlab_sys::sched::Policy;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the accept loop looks at the stop flag while no client connects.
const STOP_POLL: Duration = Duration::from_millis(100);

/// When the daemon last said that `accept` failed, shared by its accept loops (one notice a
/// minute for the daemon, not for each socket).
type LastSaid = Arc<Mutex<Option<Instant>>>;

/// The most connections taken from the listen queue before they are admitted, root's first.
const ACCEPT_BATCH: usize = 256;

/// Stack of a connection thread: requests are small and decoded iteratively.
const CONNECTION_STACK_BYTES: usize = 256 * 1024;

/// What went wrong serving.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    RealtimeKit(#[from] crate::rtkit::RtkitError),
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

/// How serving ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The stop flag was set (SIGTERM/SIGINT).
    Requested,
    /// A thread of the daemon panicked; everything was reverted.
    Panicked,
}

/// The sockets the daemon serves: the shared one, and root's own when it has one.
#[derive(Debug)]
pub struct Listeners {
    pub shared: UnixListener,
    /// Root's socket (mode 0600), served at [`crate::precedence::root_policy`].
    pub root: Option<UnixListener>,
}

impl From<UnixListener> for Listeners {
    /// The shared socket alone (a daemon not run as root, or tests).
    fn from(shared: UnixListener) -> Listeners {
        Listeners { shared, root: None }
    }
}

/// Which socket a connection came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    /// The shared socket: everyone.
    Shared,
    /// Root's socket: uid 0 only, served at `policy`.
    Root { policy: Policy },
}

/// Counts open connections, in all and per uid.
#[derive(Default)]
struct ConnectionCounts {
    total: usize,
    per_uid: HashMap<u32, usize>,
}

struct ConnectionSlot {
    counts: Arc<Mutex<ConnectionCounts>>,
    uid: u32,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        counts.total -= 1;
        if let Some(count) = counts.per_uid.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                counts.per_uid.remove(&self.uid);
            }
        }
    }
}

/// Locks ignoring poison: a panicking connection thread must not take the daemon's shutdown
/// (which reverts every thread) down with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The shared state of a running daemon.
struct Shared {
    /// The daemon's own threads (the accept loop's watchdog, shutdown) lock it directly;
    /// requests through `gate`.
    registry: Arc<PiLock<Registry>>,
    /// Root first, unprivileged requests one at a time (`crate::precedence`).
    gate: RegistryGate<Registry>,
    /// Woken after each answer, not in the middle of a request (see `crate::watch`).
    watcher: Watcher,
    config: DaemonConfig,
    counts: Arc<Mutex<ConnectionCounts>>,
    /// Root's socket's connections, counted apart (see "Root's socket" above).
    root_counts: Arc<Mutex<ConnectionCounts>>,
    accept_failure_said: LastSaid,
    budget: Mutex<RequestBudget>,
    /// The daemon's base priority (its threads' policy at start), for connection threads
    /// (`ThreadPriority`).
    base: Policy,
    /// The shared socket's connection threads, kept for the next connection
    /// (`crate::thread_cache`).
    threads: Arc<ThreadCache>,
    /// Root's socket's, started by its accept thread and so at root's policy.
    root_threads: Arc<ThreadCache>,
}

/// Serves `listeners` until `stop` is set or `panicked` is (by a panic hook), then reverts every
/// managed thread through `enforcement` and returns. The caller owns the socket files.
pub fn serve(
    listeners: impl Into<Listeners>,
    config: &DaemonConfig,
    enforcement: Box<dyn Enforcement>,
    stop: Arc<AtomicBool>,
    panicked: Arc<AtomicBool>,
) -> Result<Stopped, DaemonError> {
    let (watcher, watcher_loop) = Watcher::new().map_err(io_error("creating the watcher"))?;
    let registry = Arc::new(PiLock::new(Registry::new(
        enforcement,
        Limits {
            user_limit: config.user_limit,
            hysteresis: config.hysteresis,
            max_threads_per_user: config.max_threads_per_user,
        },
        watcher.clone(),
    )));
    let shared = Arc::new(Shared {
        registry: Arc::clone(&registry),
        gate: RegistryGate::new(Arc::clone(&registry)),
        watcher: watcher.clone(),
        config: config.clone(),
        counts: Arc::default(),
        root_counts: Arc::default(),
        accept_failure_said: Arc::default(),
        budget: Mutex::new(RequestBudget::new(
            config.requests_per_burst,
            config.burst_interval,
        )),
        base: rtlab_sys::sched::thread_policy(0).unwrap_or(Policy::Other { nice: 0 }),
        threads: ThreadCache::new("rtlabd-conn", CONNECTION_STACK_BYTES),
        root_threads: ThreadCache::new("rtlabd-rootconn", CONNECTION_STACK_BYTES),
    });
    let watcher_registry = Arc::clone(&registry);
    let watcher_panicked = Arc::clone(&panicked);
    let watcher_thread = std::thread::Builder::new()
        .name("rtlabd-watch".into())
        .spawn(move || {
            if watcher_loop.run(watcher_registry).is_err() {
                // Without the watcher no exit would be noticed: stop serving, revert everything.
                watcher_panicked.store(true, Ordering::SeqCst);
            }
        })
        .map_err(io_error("starting the watcher thread"))?;
    // RealtimeKit1 (`crate::rtkit`): always puts back what a killed daemon's service left; owns
    // the bus name only when configured.
    let realtimekit =
        match crate::rtkit::start(&config.state_dir, &config.rtkit, &registry, &panicked) {
            Ok(service) => service,
            Err(error) => {
                registry.lock().shut_down();
                watcher.stop();
                let _ = watcher_thread.join();
                return Err(error.into());
            }
        };
    let Listeners {
        shared: listener,
        root: root_listener,
    } = listeners.into();
    // Root's accept loop runs on a thread of its own (not scoped: a panic there must not unwind
    // through this function past the shutdown below, which reverts every thread).
    let ended = Arc::new(AtomicBool::new(false));
    let root_thread = root_listener.and_then(|root_listener| {
        let policy = crate::precedence::root_policy(config.rtkit.max_realtime_priority);
        let (shared, ended, stop, panicked) = (
            Arc::clone(&shared),
            Arc::clone(&ended),
            Arc::clone(&stop),
            Arc::clone(&panicked),
        );
        let spawned = std::thread::Builder::new()
            .name("rtlabd-root".into())
            .spawn(move || {
                // Without SCHED_RESET_ON_FORK: a connection thread it starts is born at root's
                // policy. Born at SCHED_OTHER (as from every other daemon thread), it waited for
                // the fair server before its first instruction while users' granted threads held
                // the CPUs: that was root's late answers, 100–430 ms, all of it between `spawn`
                // and the thread's start. The connection thread sets the flag for its own
                // children. Without CAP_SYS_NICE it stays at the daemon's priority, still apart.
                let _ = rtlab_sys::sched::set_current_thread_policy(policy);
                let until = StopWhen {
                    stop: &stop,
                    panicked: &panicked,
                    ended: Some(&ended),
                };
                if let Err(error) = accept_loop(&root_listener, &shared, &until, Door::Root { policy }) {
                    eprintln!("rtlab daemon: root's socket is no longer served ({error}); root is answered on the shared socket");
                }
            });
        spawned
            .inspect_err(|error| {
                eprintln!("rtlab daemon: root's socket is not served: starting its thread: {error}")
            })
            .ok()
    });
    let until = StopWhen {
        stop: &stop,
        panicked: &panicked,
        ended: None,
    };
    let result = accept_loop(&listener, &shared, &until, Door::Shared);
    ended.store(true, Ordering::SeqCst);
    if let Some(root_thread) = root_thread {
        let _ = root_thread.join();
    }
    shared.threads.close();
    shared.root_threads.close();
    registry.lock().shut_down();
    if let Some(service) = realtimekit {
        service.stop();
    }
    watcher.stop();
    let _ = watcher_thread.join();
    result
}

/// When an accept loop ends: the daemon's stop flag, a panic, or (root's loop) the shared
/// socket's loop having ended.
struct StopWhen<'a> {
    stop: &'a AtomicBool,
    panicked: &'a AtomicBool,
    ended: Option<&'a AtomicBool>,
}

impl StopWhen<'_> {
    fn stopped(&self) -> Option<Stopped> {
        if self.panicked.load(Ordering::SeqCst) {
            Some(Stopped::Panicked)
        } else if self.stop.load(Ordering::SeqCst)
            || self.ended.is_some_and(|ended| ended.load(Ordering::SeqCst))
        {
            Some(Stopped::Requested)
        } else {
            None
        }
    }
}

fn accept_loop(
    listener: &UnixListener,
    shared: &Arc<Shared>,
    until: &StopWhen<'_>,
    door: Door,
) -> Result<Stopped, DaemonError> {
    listener
        .set_nonblocking(true)
        .map_err(io_error("setting the socket non-blocking"))?;
    // systemd's WatchdogSec= (rtlabd.service): pinged from the shared socket's loop, after
    // taking the registry lock, so a daemon whose accept loop or registry is stuck stops pinging
    // and is restarted (the restart reverts what the journal names).
    let watchdog = match door {
        Door::Shared => rtlab_sys::service_manager::Watchdog::from_environment(),
        Door::Root { .. } => None,
    };
    let mut backoff = AcceptBackoff::saying_through(Arc::clone(&shared.accept_failure_said));
    loop {
        if let Some(stopped) = until.stopped() {
            return Ok(stopped);
        }
        if let Some(watchdog) = watchdog.as_ref().filter(|watchdog| watchdog.is_due()) {
            drop(shared.registry.lock());
            watchdog.ping_if_due();
        }
        rtlab_sys::ipc::poll_readable(&[listener.as_fd()], Some(STOP_POLL))
            .map_err(io_error("waiting for clients"))?;
        // Every connection waiting is taken first, then root's are admitted ahead of the rest:
        // a flood queued before root's connection does not go first (`crate::precedence`).
        let mut waiting: Vec<(UnixStream, PeerCredentials)> = Vec::new();
        loop {
            if waiting.len() >= ACCEPT_BATCH {
                break;
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    if let Ok(credentials) = rtlab_sys::ipc::peer_credentials(&stream) {
                        waiting.push((stream, credentials));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors or memory: the pending client stays queued (the listener
                // stays readable), so waiting before the next try keeps the loop from spinning;
                // the stop flag and the watchdog are still seen between waits.
                Err(error) => {
                    if let Some(notice) = backoff.failed(&error) {
                        eprintln!("{notice}");
                    }
                    let retry_at = Instant::now() + backoff.wait();
                    while until.stopped().is_none() {
                        let left = retry_at.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        std::thread::sleep(left.min(STOP_POLL));
                    }
                    break;
                }
            }
        }
        waiting.sort_by_key(|(_, credentials)| credentials.uid != 0);
        for (stream, credentials) in waiting {
            admit(stream, credentials, shared, door);
        }
    }
}

/// The accept loop's wait after `accept` fails for want of resources (EMFILE, ENFILE, ENOBUFS,
/// ENOMEM): 10 ms, doubling to 1 s while it keeps failing, back to none at the next success.
/// The failure is said at most once a minute, not once per try (near the limit accepts succeed
/// and fail by turns, as each refused connection frees its descriptor), and not once per accept
/// loop: `last_said` is the daemon's.
#[derive(Debug, Default)]
struct AcceptBackoff {
    current: Option<Duration>,
    last_said: LastSaid,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const LONGEST: Duration = Duration::from_secs(1);
    const SAY_EVERY: Duration = Duration::from_secs(60);

    fn saying_through(last_said: LastSaid) -> AcceptBackoff {
        AcceptBackoff {
            current: None,
            last_said,
        }
    }

    /// Notes a failure; the line to log, when one is due.
    fn failed(&mut self, error: &io::Error) -> Option<String> {
        self.current = Some(match self.current {
            None => Self::FIRST,
            Some(wait) => (wait * 2).min(Self::LONGEST),
        });
        let now = Instant::now();
        let mut last_said = lock(&self.last_said);
        if last_said.is_some_and(|said| now.duration_since(said) < Self::SAY_EVERY) {
            return None;
        }
        *last_said = Some(now);
        Some(format!(
            "rtlab daemon: accepting a client failed: {error}; new clients wait (retrying from 10 ms up to every 1 s) until it works again (said at most once a minute)"
        ))
    }

    fn wait(&self) -> Duration {
        self.current.unwrap_or_default()
    }

    fn succeeded(&mut self) {
        self.current = None;
    }
}

/// Writes one error line without blocking, then drops the connection.
fn refuse(mut stream: UnixStream, code: ErrorCode, message: String) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(
        Response::error(0, RpcError::new(code, message))
            .encode()
            .as_bytes(),
    );
}

fn admit(stream: UnixStream, credentials: PeerCredentials, shared: &Arc<Shared>, door: Door) {
    if matches!(door, Door::Root { .. }) && credentials.uid != 0 {
        // Only root can open the file (mode 0600); this is for a peer that got in anyway.
        refuse(
            stream,
            ErrorCode::Permission,
            format!(
                "this is root's socket; uid {} is served on {}",
                credentials.uid,
                shared.config.socket.display()
            ),
        );
        return;
    }
    // A uid that has spent its request budget is told so before anything is spent on it. uid 0
    // is never charged (it is privileged whatever its capabilities). The budget's lock is taken
    // by connection threads at nice 19: the accept thread never waits for it (when it is busy
    // the connection is admitted, and its requests are charged as they come).
    if credentials.uid != 0 {
        let spent = match shared.budget.try_lock() {
            Ok(budget) => budget.spent(credentials.uid, Instant::now()),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                poisoned.into_inner().spent(credentials.uid, Instant::now())
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(refusal) = spent {
            refuse(stream, refusal.code, refusal.message);
            return;
        }
    }
    let counts_of_door = match door {
        Door::Shared => &shared.counts,
        Door::Root { .. } => &shared.root_counts,
    };
    let slot = {
        let mut counts = lock(counts_of_door);
        if counts.total >= shared.config.max_connections {
            drop(counts);
            refuse(
                stream,
                ErrorCode::Busy,
                format!(
                    "the daemon has {} connections open, its limit (max_connections); try again later",
                    shared.config.max_connections
                ),
            );
            return;
        }
        let per_uid = counts.per_uid.get(&credentials.uid).copied().unwrap_or(0);
        if per_uid >= shared.config.max_connections_per_user {
            drop(counts);
            refuse(
                stream,
                ErrorCode::Busy,
                format!(
                    "uid {} has {per_uid} connections open, its limit (max_connections_per_user)",
                    credentials.uid
                ),
            );
            return;
        }
        counts.total += 1;
        *counts.per_uid.entry(credentials.uid).or_default() += 1;
        ConnectionSlot {
            counts: Arc::clone(counts_of_door),
            uid: credentials.uid,
        }
    };
    let threads = match door {
        Door::Shared => Arc::clone(&shared.threads),
        Door::Root { .. } => Arc::clone(&shared.root_threads),
    };
    let shared = Arc::clone(shared);
    let spawned = threads.run(move || {
        let _slot = slot;
        // Lowered at once unless the peer is root (its privilege is known only after
        // `Peer::of`, which is the peer's work too); raised again for a privileged peer.
        // On root's socket, at root's policy from the start.
        let normal = match door {
            Door::Shared => shared.base,
            Door::Root { policy } => policy,
        };
        let priority = ThreadPriority::new(normal, shared.base);
        if credentials.uid != 0 {
            priority.lower();
        } else if door != Door::Shared {
            priority.restore();
        }
        if stream.set_nonblocking(false).is_ok() {
            match Peer::of(&stream, credentials) {
                Ok(peer) => {
                    let privileged = peer.caller().is_ok_and(|caller| caller.privileged);
                    if credentials.uid != 0 && privileged {
                        priority.restore();
                    }
                    serve_connection(stream, &peer, &shared, &priority);
                }
                Err(gone) => refuse(stream, gone.code, gone.message),
            }
        }
        // The slot's lock is the accept thread's too: not taken at nice 19. Restored also
        // for the next connection this thread is kept for.
        priority.restore();
    });
    // A thread that cannot start drops its closure: the slot is freed, the client disconnected.
    drop(spawned);
}

/// Why no further line can be read from a connection.
enum ReadEnd {
    /// The client closed (or died), possibly mid-line.
    Closed,
    /// No request began within the idle timeout.
    Idle,
    /// A request began but did not end in time.
    Timeout,
    /// The line is longer than the cap.
    TooLong,
}

/// Reads `\n`-terminated lines with a length cap and deadlines, keeping what follows a line.
struct LineReader {
    buffer: Vec<u8>,
}

impl LineReader {
    fn new() -> LineReader {
        LineReader {
            buffer: Vec::with_capacity(1024),
        }
    }

    fn take_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buffer.iter().position(|byte| *byte == b'\n')?;
        let rest = self.buffer.split_off(end + 1);
        Some(std::mem::replace(&mut self.buffer, rest))
    }

    fn next_line(
        &mut self,
        stream: &mut UnixStream,
        idle_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Vec<u8>, ReadEnd> {
        let started = Instant::now();
        let mut request_began = (!self.buffer.is_empty()).then(Instant::now);
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(line) = self.take_line() {
                if line.len() > MAX_LINE_BYTES {
                    return Err(ReadEnd::TooLong);
                }
                return Ok(line);
            }
            if self.buffer.len() >= MAX_LINE_BYTES {
                return Err(ReadEnd::TooLong);
            }
            let (deadline, on_expiry) = match request_began {
                Some(began) => (began + request_timeout, ReadEnd::Timeout),
                None => (started + idle_timeout, ReadEnd::Idle),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(on_expiry);
            }
            if stream.set_read_timeout(Some(left)).is_err() {
                return Err(ReadEnd::Closed);
            }
            let room = (MAX_LINE_BYTES + 1 - self.buffer.len()).min(chunk.len());
            match stream.read(&mut chunk[..room]) {
                Ok(0) => return Err(ReadEnd::Closed),
                Ok(n) => {
                    self.buffer.extend_from_slice(&chunk[..n]);
                    request_began.get_or_insert_with(Instant::now);
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(ReadEnd::Closed),
            }
        }
    }
}

/// Who asks, then whether their budget allows it: `Err` with the answer when not, and whether the
/// connection must be closed after it (the peer has exited).
fn authorise(peer: &Peer, shared: &Shared) -> Result<Caller, (RpcError, bool)> {
    let caller = peer.caller().map_err(|gone| (gone, true))?;
    if !caller.privileged {
        lock(&shared.budget)
            .charge(caller.uid, Instant::now())
            .map_err(|limited| (limited, false))?;
    }
    Ok(caller)
}

fn serve_connection(
    mut stream: UnixStream,
    peer: &Peer,
    shared: &Shared,
    priority: &ThreadPriority,
) {
    let request_timeout = shared.config.request_timeout;
    if stream.set_write_timeout(Some(request_timeout)).is_err() {
        return;
    }
    let mut reader = LineReader::new();
    loop {
        let line = match reader.next_line(&mut stream, shared.config.idle_timeout, request_timeout)
        {
            Ok(line) => line,
            Err(ReadEnd::Closed | ReadEnd::Idle) => return,
            Err(ReadEnd::Timeout) => {
                let _ = stream.write_all(
                    Response::error(
                        0,
                        RpcError::new(
                            ErrorCode::Timeout,
                            format!(
                                "the request did not end with a newline within {} ms",
                                request_timeout.as_millis()
                            ),
                        ),
                    )
                    .encode()
                    .as_bytes(),
                );
                return;
            }
            Err(ReadEnd::TooLong) => {
                let _ = stream.write_all(
                    Response::error(
                        0,
                        RpcError::new(
                            ErrorCode::TooLong,
                            format!("request longer than {MAX_LINE_BYTES} bytes"),
                        ),
                    )
                    .encode()
                    .as_bytes(),
                );
                return;
            }
        };
        let decoded = decode_request(&line);
        let (response, close) = match (authorise(peer, shared), decoded) {
            (Err((refusal, close)), decoded) => {
                let id = match &decoded {
                    Ok(request) => request.id,
                    Err(error) => error.id.unwrap_or(0),
                };
                (Response::error(id, refusal), close)
            }
            (Ok(caller), Ok(request)) => {
                crate::precedence::take_last_held();
                let response = handle(&request, &caller, shared, priority);
                note_long_hold(&request, &caller);
                (response, false)
            }
            (Ok(_), Err(error)) => (
                Response::error(error.id.unwrap_or(0), error.to_rpc_error()),
                false,
            ),
        };
        let written = stream.write_all(response.encode().as_bytes());
        // The answer is out: now the watcher may take the registry lock to pick up new handles
        // and deadlines (a thread that exits meanwhile keeps its pidfd readable for it).
        shared.watcher.wake_if_pending();
        if written.is_err() || close {
            return;
        }
    }
}

/// A request that held the registry this long is named in the daemon's log: everyone else's
/// requests, root's among them, waited for it.
const LONG_HOLD: Duration = Duration::from_millis(20);

/// Says in the log (at most once a second) that `request` held the registry over [`LONG_HOLD`]:
/// which request, from which uid, for how long.
/// Lock-free (no thread waits for another to say it): the CLOCK_MONOTONIC second of the last.
fn note_long_hold(request: &Request, caller: &Caller) {
    static LAST_SAID_SECOND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let held = crate::precedence::take_last_held();
    if held < LONG_HOLD {
        return;
    }
    let second = rtlab_sys::clock::monotonic_ns() / 1_000_000_000 + 1;
    let last = LAST_SAID_SECOND.load(std::sync::atomic::Ordering::Relaxed);
    if last >= second
        || LAST_SAID_SECOND
            .compare_exchange(
                last,
                second,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_err()
    {
        return;
    }
    let mut call = format!("{:?}", request.call);
    call.truncate(400);
    eprintln!(
        "rtlab daemon: a request of uid {} held the registry for {} ms (everyone else's waited): {call}",
        caller.uid,
        held.as_millis()
    );
}

fn answer<T: serde::Serialize>(id: u64, result: Result<T, RpcError>) -> Response {
    match result {
        Ok(value) => Response::ok(id, &value),
        Err(error) => Response::error(id, error),
    }
}

/// Answers one request: pidfd opening and /proc reads happen before the registry lock is taken,
/// which is taken through the gate (`crate::precedence`): at once for a privileged caller,
/// after them and one at a time for the others.
fn handle(
    request: &Request,
    caller: &Caller,
    shared: &Shared,
    priority: &ThreadPriority,
) -> Response {
    let id = request.id;
    let registry = || shared.gate.for_caller(caller.privileged, priority);
    match &request.call {
        Call::Ping => {
            // Through the registry like every request: root's ping is answered in time only if
            // root's requests are.
            let backend = registry().default_backend();
            Response::ok(
                id,
                &PingResult {
                    protocol: RPC_PROTOCOL.to_owned(),
                    server_version: env!("CARGO_PKG_VERSION").to_owned(),
                    default_backend: wire_backend(backend),
                },
            )
        }
        Call::Reserve(params) => answer(
            id,
            resolve_target(&params.target).and_then(|resolved| {
                registry().reserve(
                    caller,
                    params,
                    resolved.owner,
                    resolved.threads,
                    resolved.handles,
                )
            }),
        ),
        Call::Release(target) => answer(id, registry().release(caller, target)),
        Call::Resize(params) => {
            let result = registry().resize(caller, params);
            if let Ok(grant) = &result {
                // Each change of size in the daemon's log (a refusal goes to the caller only:
                // a user sending refused requests must not fill the log).
                eprintln!(
                    "rtlab daemon: reservation {} ({}) resized by uid {} to {} of every {}",
                    grant.grant_id,
                    grant.owner,
                    caller.uid,
                    rtlab_core::Nanos(grant.requested.amount_ns),
                    rtlab_core::Nanos(grant.requested.period_ns)
                );
            }
            answer(id, result)
        }
        Call::List => answer(id, Ok(registry().list_for(caller))),
        Call::BeginConstraint(params) => answer(
            id,
            resolve_target(&Target::Thread { tid: params.tid }).and_then(|mut resolved| {
                let handle = resolved.handles.pop().expect("one handle per thread");
                registry().begin_constraint(caller, params, &resolved.threads[0], handle)
            }),
        ),
        Call::EndConstraint(params) => {
            answer(id, registry().end_constraint(caller, params.constraint_id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_wait_longer_each_time_and_are_said_once() {
        let mut backoff = AcceptBackoff::default();
        assert_eq!(backoff.wait(), Duration::ZERO);
        let error = io::Error::from_raw_os_error(24); // EMFILE
        let notice = backoff.failed(&error).expect("the first failure is said");
        assert!(notice.contains("retrying"), "{notice}");
        assert_eq!(backoff.wait(), Duration::from_millis(10));
        let waits: Vec<Duration> = (0..10)
            .map(|_| {
                assert!(backoff.failed(&error).is_none(), "said once a minute");
                backoff.wait()
            })
            .collect();
        assert_eq!(waits[0], Duration::from_millis(20));
        assert_eq!(waits[6], Duration::from_secs(1));
        assert_eq!(waits[9], Duration::from_secs(1));
        backoff.succeeded();
        assert_eq!(backoff.wait(), Duration::ZERO);
        assert!(
            backoff.failed(&error).is_none(),
            "not again within the minute"
        );
        assert_eq!(backoff.wait(), Duration::from_millis(10));
        // Another accept loop of the same daemon (root's socket's) does not say it again.
        let mut other = AcceptBackoff::saying_through(Arc::clone(&backoff.last_said));
        assert!(other.failed(&error).is_none(), "said once for the daemon");
        assert_eq!(other.wait(), Duration::from_millis(10));
    }
}
