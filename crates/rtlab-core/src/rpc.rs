//! `rtlab.rpc/1`: the JSON-lines protocol between the rtlab daemon and its clients.
//!
//! It lives in core so that the client library depends on nothing but this crate, and so that the
//! daemon and the client cannot drift apart: both encode and decode with these types. Every
//! message is one JSON object on one line (at most [`MAX_LINE_BYTES`] bytes with its `\n`). The
//! wire format is written down in `docs/rpc.md`.
//!
//! A request names the protocol, an id chosen by the client, a method and its parameters:
//!
//! ```text
//! {"rpc":"rtlab.rpc/1","id":1,"method":"reserve","params":{"tid":4242,"amount_ns":2000000,"period_ns":10000000}}
//! ```
//!
//! The answer carries the same id and either a `result` or an `error`:
//!
//! ```text
//! {"rpc":"rtlab.rpc/1","id":1,"error":{"code":"permission","message":"uid 1000 may only reserve for its own threads; thread 1 belongs to uid 0"}}
//! ```
//!
//! Decoding is strict (unknown fields, methods and versions are errors that name the field), since
//! the daemon's input comes from any local user.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The protocol name and version every message carries.
pub const RPC_PROTOCOL: &str = "rtlab.rpc/1";

/// Longest line (including its `\n`) either side accepts; a longer one is an error and closes the
/// connection.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Where the daemon listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/rtlab/rtlabd.sock";

/// The environment variable that overrides [`DEFAULT_SOCKET`] (a `--socket` flag overrides both).
pub const SOCKET_ENV: &str = "RTLAB_SOCKET";

/// Root's own socket beside the daemon's `socket`: `rtlabd.sock` → `rtlabd.root.sock`, any other
/// name with `.root` appended. The daemon binds it (mode 0600) when it runs as root and serves it
/// above every priority RealtimeKit1 grants, so root's requests are answered while users' granted
/// threads hold the CPUs; a root client tries it first (docs/rpc.md, "Root's socket").
pub fn root_socket_path(socket: &std::path::Path) -> std::path::PathBuf {
    let name = socket
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root_name = match name.strip_suffix(".sock") {
        Some(stem) => format!("{stem}.root.sock"),
        None => format!("{name}.root"),
    };
    socket.with_file_name(root_name)
}

/// Schema of `rtlab reservations --json`.
pub const RESERVATIONS_SCHEMA: &str = "rtlab.reservations/1";

/// Schema of `rtlab reserve --json`.
pub const GRANT_SCHEMA: &str = "rtlab.grant/1";

/// How a reservation is enforced (the daemon's `BackendKind`, on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The kernel's SCHED_DEADLINE
    Deadline,
    /// rtlab's plan dispatcher
    Dispatch,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Deadline => "deadline",
            Backend::Dispatch => "dispatch",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Which threads a reservation is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// One thread.
    Thread { tid: u32 },
    /// A process: its main thread, or every thread as one activity sharing the reservation.
    Process { pid: u32, all_threads: bool },
    /// Every thread whose `comm` is this name (threads of unmodified programs, the remoter); one
    /// thread gets a thread reservation, several share one activity reservation `comm:NAME`.
    Comm { name: String },
    /// A named activity: these threads share one reservation. Reserving an activity that is
    /// still held (within the daemon's hysteresis after its last thread exited) takes it back.
    Activity { name: String, tids: Vec<u32> },
}

/// Which reservations to release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseTarget {
    /// The reservation of this thread (for an activity: the thread leaves it).
    Thread { tid: u32 },
    /// Every reservation holding a thread of this process.
    Process { pid: u32 },
    /// Every reservation the caller's uid made.
    AllMine,
    /// One reservation by its id.
    Grant { grant_id: u64 },
}

/// A rate on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireRate {
    pub amount_ns: u64,
    pub period_ns: u64,
}

impl WireRate {
    /// The fraction of one CPU, `amount / period`.
    pub fn fraction(&self) -> f64 {
        if self.period_ns == 0 {
            0.0
        } else {
            self.amount_ns as f64 / self.period_ns as f64
        }
    }
}

/// `reserve`'s parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReserveParams {
    pub target: Target,
    pub amount_ns: u64,
    pub period_ns: u64,
    /// `None`: the daemon's default backend.
    pub backend: Option<Backend>,
    /// Ask that a `deadline` reservation may also run on the deadline bandwidth no reservation
    /// uses (SCHED_FLAG_RECLAIM): at least the amount in every window, more when there is room.
    /// Granted to a privileged caller only; another's reservation is made without it, and its
    /// `kernel_held` says so.
    pub reclaim: bool,
}

/// `begin_constraint`'s parameters: `estimate_ns` of CPU for `tid` between the absolute
/// CLOCK_MONOTONIC times `start_ns` and `deadline_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeginConstraintParams {
    pub tid: u32,
    pub start_ns: u64,
    pub estimate_ns: u64,
    pub deadline_ns: u64,
}

/// `resize`'s parameters: reservation `grant_id` is to hold `amount_ns` of every `period_ns` from
/// now on (the same threads, owner and id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeParams {
    pub grant_id: u64,
    pub amount_ns: u64,
    pub period_ns: u64,
}

/// `end_constraint`'s parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndConstraintParams {
    pub constraint_id: u64,
}

/// A method with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Is the daemon there, which version?
    Ping,
    Reserve(ReserveParams),
    Release(ReleaseTarget),
    /// Change a held reservation's rate, with admission (its result is `GrantInfo`).
    Resize(ResizeParams),
    /// Every reservation in force and each CPU's reserved fraction.
    List,
    BeginConstraint(BeginConstraintParams),
    EndConstraint(EndConstraintParams),
}

impl Call {
    pub fn method(&self) -> &'static str {
        match self {
            Call::Ping => "ping",
            Call::Reserve(_) => "reserve",
            Call::Release(_) => "release",
            Call::Resize(_) => "resize",
            Call::List => "list",
            Call::BeginConstraint(_) => "begin_constraint",
            Call::EndConstraint(_) => "end_constraint",
        }
    }
}

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    pub call: Call,
}

/// The error codes of `rtlab.rpc/1` (strings on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not a valid request (JSON, version, method, fields).
    BadRequest,
    /// The line is longer than [`MAX_LINE_BYTES`]; the connection is closed.
    TooLong,
    /// The request did not arrive in time; the connection is closed.
    Timeout,
    /// Too many connections; try again later. The connection is closed.
    Busy,
    /// The caller may not act on that thread or reservation.
    Permission,
    /// The caller's uid would exceed its reservation limit.
    Limit,
    /// The caller's uid sent more requests than its burst budget allows (`requests_per_burst`
    /// within `burst_interval`); the message says when to try again. The connection goes on.
    RateLimited,
    /// The planner refused: no capacity, a bad rate.
    Denied,
    /// A time constraint cannot be guaranteed.
    Infeasible,
    /// The backend cannot give this grant on this machine.
    Unenforceable,
    /// No such thread or process (or no thread of that name).
    NoSuchThread,
    /// The thread is already under a reservation.
    AlreadyReserved,
    /// Nothing matched: no reservation or constraint with that id or thread.
    NotFound,
    /// The kernel refused, or the daemon failed.
    System,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::TooLong => "too_long",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Busy => "busy",
            ErrorCode::Permission => "permission",
            ErrorCode::Limit => "limit",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Denied => "denied",
            ErrorCode::Infeasible => "infeasible",
            ErrorCode::Unenforceable => "unenforceable",
            ErrorCode::NoSuchThread => "no_such_thread",
            ErrorCode::AlreadyReserved => "already_reserved",
            ErrorCode::NotFound => "not_found",
            ErrorCode::System => "system",
        }
    }
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(deny_unknown_fields)]
#[error("{message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// `ping`'s result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingResult {
    pub protocol: String,
    pub server_version: String,
    /// The backend used when a request names none.
    pub default_backend: Backend,
}

/// A thread under a reservation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// SCHED_DEADLINE parameters of a `deadline` grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireDeadlineParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// What a reservation really holds now, read back where it is enforced (the kernel's
/// SCHED_DEADLINE parameters through `sched_getattr`, or the dispatcher's slot table), beside what
/// was asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireKernelHeld {
    /// `sched_getattr` (the deadline backend, read from thread `tid`), `not_deadline` (the thread
    /// `tid` was found at another policy, named in `policy`: nothing is held) or `dispatcher` (its
    /// slot table on `cpu`).
    pub read_from: String,
    /// CPU time given in each window (the kernel's runtime; the dispatcher's least slot time in a
    /// window).
    pub runtime_ns: u64,
    /// The window (the kernel's period; the grant's period on the dispatcher).
    pub window_ns: u64,
    /// runtime / window.
    pub share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    /// The kernel's relative deadline (`sched_getattr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// The most dispatcher slots one window holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_window: Option<u32>,
    /// The policy `sched_getattr` found instead of SCHED_DEADLINE (`not_deadline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// `sched_getattr` found SCHED_FLAG_RECLAIM: the thread may also run on the deadline
    /// bandwidth no reservation uses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reclaim: bool,
}

/// A reservation in force (`reserve`'s result, and one entry of `list`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantInfo {
    pub grant_id: u64,
    /// The uid that made the reservation.
    pub owner_uid: u32,
    /// `tid:N` for a thread reservation, else the activity's name.
    pub owner: String,
    pub threads: Vec<WireThread>,
    pub requested: WireRate,
    pub granted: WireRate,
    pub backend: Backend,
    /// The CPU the threads are confined to; `None` under global EDF.
    pub cpu: Option<usize>,
    /// The CPU whose plan holds the reservation.
    pub planner_cpu: usize,
    /// `accepted` (the kernel's admission test passed) or `not_applicable` (the dispatcher).
    pub kernel_admission: String,
    pub deadline_params: Option<WireDeadlineParams>,
    /// When the reservation was granted (RFC 3339 UTC).
    pub since: String,
    /// For an activity whose last thread exited: when the daemon lets it go unless it is taken
    /// back (RFC 3339 UTC).
    pub lingering_until: Option<String>,
    /// What the kernel (or the dispatcher) really holds for it, read back when the answer was
    /// made; absent when there is nothing to read (no thread, a daemon before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_held: Option<WireKernelHeld>,
}

/// A CPU's reserved fraction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuShare {
    pub cpu: usize,
    pub reserved_fraction: f64,
}

/// `list`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListResult {
    pub grants: Vec<GrantInfo>,
    pub cpus: Vec<CpuShare>,
    /// Threads made real-time through `org.freedesktop.RealtimeKit1` (`rtlab daemon --rtkit`);
    /// absent from daemons without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub realtimekit: Vec<RealtimeKitThread>,
}

/// A thread a program made real-time (or high priority) through `org.freedesktop.RealtimeKit1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealtimeKitThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The uid that asked (the bus's credentials), which owns the thread.
    pub uid: u32,
    /// The process that asked (the bus's credentials).
    pub caller_pid: u32,
    /// The D-Bus method: `MakeThreadRealtime`, `MakeThreadRealtimeWithPID`, …
    pub method: String,
    /// What the thread was given: `SCHED_RR` (with `priority`), `SCHED_OTHER` (with `nice`), or
    /// `reservation` (a configured program's, `grant_id`).
    pub policy: String,
    pub priority: Option<u32>,
    pub nice: Option<i32>,
    /// The reservation that holds the thread now: the configured policy's, or one made since
    /// with `rtlab reserve` (which upgrades the thread; its release gives SCHED_RR back).
    pub grant_id: Option<u64>,
    /// When it was granted (RFC 3339 UTC).
    pub since: String,
    /// For a `[[rtkit.reserve]]` program sized by observation: where that stands, in words
    /// ("observing for 3s …", "observed: … → reservation 4 …", "no period found: …; stays
    /// SCHED_RR"). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizing: Option<String>,
}

/// `release`'s result: the reservations that ended (a thread leaving an activity that still has
/// threads ends none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseResult {
    pub released: Vec<u64>,
    /// Threads taken out of their reservations.
    pub threads: Vec<u32>,
}

/// `begin_constraint`'s result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeginConstraintResult {
    pub constraint_id: u64,
}

/// `end_constraint`'s result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndConstraintResult {
    /// CPU time the thread used between begin and end (its thread CPU clock).
    pub used_ns: u64,
    pub met_deadline: bool,
}

/// Why a line could not be decoded. `id` is the request's id when the line got that far, so the
/// error answer can carry it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    pub id: Option<u64>,
    pub code: ErrorCode,
    pub message: String,
}

impl DecodeError {
    fn bad(id: Option<u64>, message: impl Into<String>) -> DecodeError {
        DecodeError {
            id,
            code: ErrorCode::BadRequest,
            message: message.into(),
        }
    }

    pub fn to_rpc_error(&self) -> RpcError {
        RpcError::new(self.code, self.message.clone())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestEnvelope {
    rpc: String,
    id: u64,
    method: String,
    #[serde(default)]
    params: Option<serde_json::Value>,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
struct WireReserveParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    all_threads: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    activity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tids: Option<Vec<u32>>,
    amount_ns: u64,
    period_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backend: Option<Backend>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    reclaim: bool,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
struct WireReleaseParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    all_mine: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grant_id: Option<u64>,
}

/// Longest activity or comm name accepted.
pub const MAX_NAME_BYTES: usize = 256;

/// The longest reservation period, and Time Constraint window, the daemon plans: 10 s. Longer
/// ones are refused (`bad_request`): a period of 2^64 − 1 ns overflowed the planner's switch check
/// (found by the hostile-client harness, issue 39), and nothing periodic that needs a guarantee
/// runs slower.
pub const MAX_PERIOD_NS: u64 = 10_000_000_000;

/// Most threads one request may name.
pub const MAX_THREADS_PER_REQUEST: usize = 4096;

fn typed_params<T: DeserializeOwned>(
    id: u64,
    method: &str,
    params: Option<serde_json::Value>,
) -> Result<T, DecodeError> {
    let value = params.unwrap_or(serde_json::Value::Object(Default::default()));
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            "params".to_owned()
        } else {
            format!("params.{path}")
        };
        DecodeError::bad(
            Some(id),
            format!("{method}: {field}: {}", error.into_inner()),
        )
    })
}

fn no_params(id: u64, method: &str, params: Option<serde_json::Value>) -> Result<(), DecodeError> {
    match params {
        None => Ok(()),
        Some(serde_json::Value::Object(map)) if map.is_empty() => Ok(()),
        Some(_) => Err(DecodeError::bad(
            Some(id),
            format!("{method}: takes no params"),
        )),
    }
}

fn check_name(id: u64, field: &str, name: &str) -> Result<(), DecodeError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(DecodeError::bad(
            Some(id),
            format!("reserve: params.{field}: must be 1 to {MAX_NAME_BYTES} bytes"),
        ));
    }
    if name.chars().any(|character| character.is_control()) {
        return Err(DecodeError::bad(
            Some(id),
            format!("reserve: params.{field}: contains a control character"),
        ));
    }
    Ok(())
}

/// A rate the daemon plans: a positive amount no longer than its period, a period of at most
/// [`MAX_PERIOD_NS`].
fn check_rate(id: u64, method: &str, amount_ns: u64, period_ns: u64) -> Result<(), DecodeError> {
    let bad = |message: &str| DecodeError::bad(Some(id), format!("{method}: {message}"));
    if amount_ns == 0 {
        return Err(bad("params.amount_ns: must be positive"));
    }
    if amount_ns > period_ns {
        return Err(bad("params.amount_ns: exceeds period_ns"));
    }
    if period_ns > MAX_PERIOD_NS {
        return Err(bad(&format!(
            "params.period_ns: {period_ns} is longer than {} s, the longest period the daemon plans",
            MAX_PERIOD_NS / 1_000_000_000
        )));
    }
    Ok(())
}

fn reserve_params(id: u64, wire: WireReserveParams) -> Result<ReserveParams, DecodeError> {
    let bad = |message: &str| DecodeError::bad(Some(id), format!("reserve: {message}"));
    let chosen = [
        wire.tid.is_some(),
        wire.pid.is_some(),
        wire.comm.is_some(),
        wire.activity.is_some(),
    ]
    .iter()
    .filter(|set| **set)
    .count();
    if chosen != 1 {
        return Err(bad("params: name exactly one of tid, pid, comm, activity"));
    }
    if wire.all_threads && wire.pid.is_none() {
        return Err(bad("params.all_threads: only with pid"));
    }
    if wire.tids.is_some() && wire.activity.is_none() {
        return Err(bad("params.tids: only with activity"));
    }
    let target = if let Some(tid) = wire.tid {
        Target::Thread { tid }
    } else if let Some(pid) = wire.pid {
        Target::Process {
            pid,
            all_threads: wire.all_threads,
        }
    } else if let Some(name) = wire.comm {
        check_name(id, "comm", &name)?;
        Target::Comm { name }
    } else {
        let name = wire.activity.unwrap_or_default();
        check_name(id, "activity", &name)?;
        let tids = wire.tids.unwrap_or_default();
        if tids.len() > MAX_THREADS_PER_REQUEST {
            return Err(bad(&format!(
                "params.tids: more than {MAX_THREADS_PER_REQUEST} threads"
            )));
        }
        Target::Activity { name, tids }
    };
    check_rate(id, "reserve", wire.amount_ns, wire.period_ns)?;
    Ok(ReserveParams {
        target,
        amount_ns: wire.amount_ns,
        period_ns: wire.period_ns,
        backend: wire.backend,
        reclaim: wire.reclaim,
    })
}

fn release_params(id: u64, wire: WireReleaseParams) -> Result<ReleaseTarget, DecodeError> {
    let chosen = [
        wire.tid.is_some(),
        wire.pid.is_some(),
        wire.all_mine,
        wire.grant_id.is_some(),
    ]
    .iter()
    .filter(|set| **set)
    .count();
    if chosen != 1 {
        return Err(DecodeError::bad(
            Some(id),
            "release: params: name exactly one of tid, pid, all_mine, grant_id",
        ));
    }
    Ok(if let Some(tid) = wire.tid {
        ReleaseTarget::Thread { tid }
    } else if let Some(pid) = wire.pid {
        ReleaseTarget::Process { pid }
    } else if let Some(grant_id) = wire.grant_id {
        ReleaseTarget::Grant { grant_id }
    } else {
        ReleaseTarget::AllMine
    })
}

/// Decodes one request line (with or without its `\n`). Never panics, whatever the bytes.
pub fn decode_request(line: &[u8]) -> Result<Request, DecodeError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(DecodeError {
            id: None,
            code: ErrorCode::TooLong,
            message: format!("request longer than {MAX_LINE_BYTES} bytes"),
        });
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = std::str::from_utf8(line)
        .map_err(|error| DecodeError::bad(None, format!("request is not UTF-8: {error}")))?;
    let envelope: RequestEnvelope = serde_path_to_error::deserialize(
        &mut serde_json::Deserializer::from_str(text),
    )
    .map_err(|error| {
        // The id, when present and readable, still goes back with the error.
        let id = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|value| value.get("id").and_then(serde_json::Value::as_u64));
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            DecodeError::bad(id, format!("request: {inner}"))
        } else {
            DecodeError::bad(id, format!("request: {path}: {inner}"))
        }
    })?;
    let id = envelope.id;
    if envelope.rpc != RPC_PROTOCOL {
        return Err(DecodeError::bad(
            Some(id),
            format!(
                "request: rpc: unsupported protocol '{}' (this daemon speaks {RPC_PROTOCOL})",
                envelope.rpc
            ),
        ));
    }
    let method = envelope.method.as_str();
    let params = envelope.params;
    let call = match method {
        "ping" => {
            no_params(id, method, params)?;
            Call::Ping
        }
        "list" => {
            no_params(id, method, params)?;
            Call::List
        }
        "reserve" => Call::Reserve(reserve_params(id, typed_params(id, method, params)?)?),
        "release" => Call::Release(release_params(id, typed_params(id, method, params)?)?),
        "resize" => {
            let params: ResizeParams = typed_params(id, method, params)?;
            check_rate(id, method, params.amount_ns, params.period_ns)?;
            Call::Resize(params)
        }
        "begin_constraint" => {
            let params: BeginConstraintParams = typed_params(id, method, params)?;
            if params.estimate_ns == 0 || params.start_ns >= params.deadline_ns {
                return Err(DecodeError::bad(
                    Some(id),
                    "begin_constraint: params: needs estimate_ns > 0 and start_ns < deadline_ns",
                ));
            }
            Call::BeginConstraint(params)
        }
        "end_constraint" => Call::EndConstraint(typed_params(id, method, params)?),
        other => {
            return Err(DecodeError::bad(
                Some(id),
                format!(
                    "request: method: unknown method '{}' (expected ping, reserve, release, resize, list, begin_constraint or end_constraint)",
                    other.chars().take(64).collect::<String>()
                ),
            ))
        }
    };
    Ok(Request { id, call })
}

#[derive(Serialize)]
struct RequestOut<'a, P: Serialize> {
    rpc: &'static str,
    id: u64,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

/// Encodes a request as one line, `\n` included.
pub fn encode_request(request: &Request) -> String {
    fn line<P: Serialize>(id: u64, method: &str, params: Option<P>) -> String {
        let mut text = serde_json::to_string(&RequestOut {
            rpc: RPC_PROTOCOL,
            id,
            method,
            params,
        })
        .expect("requests always serialise");
        text.push('\n');
        text
    }
    let id = request.id;
    let method = request.call.method();
    match &request.call {
        Call::Ping | Call::List => line::<()>(id, method, None),
        Call::Reserve(params) => {
            let mut wire = WireReserveParams {
                amount_ns: params.amount_ns,
                period_ns: params.period_ns,
                backend: params.backend,
                reclaim: params.reclaim,
                ..Default::default()
            };
            match &params.target {
                Target::Thread { tid } => wire.tid = Some(*tid),
                Target::Process { pid, all_threads } => {
                    wire.pid = Some(*pid);
                    wire.all_threads = *all_threads;
                }
                Target::Comm { name } => wire.comm = Some(name.clone()),
                Target::Activity { name, tids } => {
                    wire.activity = Some(name.clone());
                    wire.tids = Some(tids.clone());
                }
            }
            line(id, method, Some(wire))
        }
        Call::Release(target) => {
            let mut wire = WireReleaseParams::default();
            match target {
                ReleaseTarget::Thread { tid } => wire.tid = Some(*tid),
                ReleaseTarget::Process { pid } => wire.pid = Some(*pid),
                ReleaseTarget::AllMine => wire.all_mine = true,
                ReleaseTarget::Grant { grant_id } => wire.grant_id = Some(*grant_id),
            }
            line(id, method, Some(wire))
        }
        Call::Resize(params) => line(id, method, Some(params)),
        Call::BeginConstraint(params) => line(id, method, Some(params)),
        Call::EndConstraint(params) => line(id, method, Some(params)),
    }
}

/// One answer as it travels: the result stays JSON until the caller, who knows the method, types it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub rpc: String,
    /// The request's id; 0 when the request was unreadable.
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Response {
    /// A success answer.
    pub fn ok<T: Serialize>(id: u64, result: &T) -> Response {
        Response {
            rpc: RPC_PROTOCOL.to_owned(),
            id,
            result: Some(serde_json::to_value(result).expect("results always serialise")),
            error: None,
        }
    }

    /// An error answer.
    pub fn error(id: u64, error: RpcError) -> Response {
        Response {
            rpc: RPC_PROTOCOL.to_owned(),
            id,
            result: None,
            error: Some(error),
        }
    }

    /// The answer as one line, `\n` included.
    pub fn encode(&self) -> String {
        let mut text = serde_json::to_string(self).expect("responses always serialise");
        text.push('\n');
        text
    }

    /// The typed result, or the daemon's error.
    pub fn into_result<T: DeserializeOwned>(self) -> Result<T, ResponseError> {
        match (self.result, self.error) {
            (_, Some(error)) => Err(ResponseError::Daemon(error)),
            (Some(value), None) => serde_path_to_error::deserialize(value).map_err(|error| {
                ResponseError::Malformed(format!("result.{}: {}", error.path(), error.inner()))
            }),
            (None, None) => Err(ResponseError::Malformed(
                "neither result nor error".to_owned(),
            )),
        }
    }
}

/// A response that is an error, or that cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ResponseError {
    #[error(transparent)]
    Daemon(RpcError),
    #[error("malformed response from the daemon: {0}")]
    Malformed(String),
}

/// Decodes one response line. Never panics, whatever the bytes.
pub fn decode_response(line: &[u8]) -> Result<Response, ResponseError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(ResponseError::Malformed(format!(
            "response longer than {MAX_LINE_BYTES} bytes"
        )));
    }
    let response: Response = serde_json::from_slice(line)
        .map_err(|error| ResponseError::Malformed(error.to_string()))?;
    if response.rpc != RPC_PROTOCOL {
        return Err(ResponseError::Malformed(format!(
            "rpc: unsupported protocol '{}' (expected {RPC_PROTOCOL})",
            response.rpc
        )));
    }
    Ok(response)
}

/// Parses `2ms/10ms` into (amount, period), both positive and amount ≤ period.
pub fn parse_rate(text: &str) -> Result<(crate::Nanos, crate::Nanos), String> {
    let (amount_text, period_text) = text
        .split_once('/')
        .ok_or_else(|| format!("'{text}' is not AMOUNT/PERIOD (example: 2ms/10ms)"))?;
    let amount = crate::parse_duration(amount_text).map_err(|error| error.to_string())?;
    let period = crate::parse_duration(period_text).map_err(|error| error.to_string())?;
    if amount.0 == 0 {
        return Err(format!("'{text}': the amount must be positive"));
    }
    if amount > period {
        return Err(format!("'{text}': the amount exceeds the period"));
    }
    Ok((amount, period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_socket_sits_beside_the_daemons() {
        use std::path::Path;
        assert_eq!(
            root_socket_path(Path::new(DEFAULT_SOCKET)),
            Path::new("/run/rtlab/rtlabd.root.sock")
        );
        assert_eq!(
            root_socket_path(Path::new("/tmp/s")),
            Path::new("/tmp/s.root")
        );
        assert_eq!(
            root_socket_path(Path::new("s.sock")),
            Path::new("s.root.sock")
        );
    }

    fn round_trip(call: Call) {
        let request = Request { id: 9, call };
        let line = encode_request(&request);
        assert!(line.ends_with('\n'));
        assert_eq!(decode_request(line.as_bytes()).unwrap(), request);
    }

    #[test]
    fn every_call_round_trips() {
        round_trip(Call::Ping);
        round_trip(Call::List);
        for target in [
            Target::Thread { tid: 5 },
            Target::Process {
                pid: 6,
                all_threads: true,
            },
            Target::Process {
                pid: 6,
                all_threads: false,
            },
            Target::Comm {
                name: "pulseaudio".into(),
            },
            Target::Activity {
                name: "mixer".into(),
                tids: vec![1, 2],
            },
        ] {
            round_trip(Call::Reserve(ReserveParams {
                target,
                amount_ns: 2_000_000,
                period_ns: 10_000_000,
                backend: Some(Backend::Dispatch),
                reclaim: false,
            }));
        }
        for target in [
            ReleaseTarget::Thread { tid: 1 },
            ReleaseTarget::Process { pid: 2 },
            ReleaseTarget::AllMine,
            ReleaseTarget::Grant { grant_id: 3 },
        ] {
            round_trip(Call::Release(target));
        }
        round_trip(Call::Resize(ResizeParams {
            grant_id: 3,
            amount_ns: 500_000,
            period_ns: 8_000_000,
        }));
        round_trip(Call::BeginConstraint(BeginConstraintParams {
            tid: 1,
            start_ns: 10,
            estimate_ns: 5,
            deadline_ns: 100,
        }));
        round_trip(Call::EndConstraint(EndConstraintParams {
            constraint_id: 4,
        }));
    }

    #[test]
    fn errors_name_the_field_and_keep_the_id() {
        let error = decode_request(
            br#"{"rpc":"rtlab.rpc/1","id":3,"method":"reserve","params":{"tid":1,"amount_ns":"x","period_ns":1}}"#,
        )
        .unwrap_err();
        assert_eq!(error.id, Some(3));
        assert!(error.message.contains("params.amount_ns"), "{error}");
        let error = decode_request(br#"{"rpc":"rtlab.rpc/2","id":4,"method":"ping"}"#).unwrap_err();
        assert_eq!(error.id, Some(4));
        assert!(error.message.contains("rtlab.rpc/2"), "{error}");
        let error = decode_request(&vec![b' '; MAX_LINE_BYTES + 1]).unwrap_err();
        assert_eq!(error.code, ErrorCode::TooLong);
    }

    #[test]
    fn responses_round_trip_and_type_their_result() {
        let line = Response::ok(
            2,
            &EndConstraintResult {
                used_ns: 5,
                met_deadline: true,
            },
        )
        .encode();
        let response = decode_response(line.trim_end().as_bytes()).unwrap();
        assert_eq!(response.id, 2);
        let result: EndConstraintResult = response.into_result().unwrap();
        assert_eq!(result.used_ns, 5);
        let line = Response::error(2, RpcError::new(ErrorCode::Denied, "no room")).encode();
        let error = decode_response(line.as_bytes())
            .unwrap()
            .into_result::<EndConstraintResult>()
            .unwrap_err();
        assert_eq!(
            error,
            ResponseError::Daemon(RpcError::new(ErrorCode::Denied, "no room"))
        );
    }

    #[test]
    fn a_period_past_the_longest_is_refused_naming_the_field() {
        // The hostile-client harness's finding: 2^64 − 1 ns was granted (dispatch) and the next
        // reservation on that CPU overflowed the planner's switch check.
        let line = format!(
            r#"{{"rpc":"rtlab.rpc/1","id":9,"method":"reserve","params":{{"tid":1,"amount_ns":1000,"period_ns":{}}}}}"#,
            u64::MAX
        );
        let error = decode_request(line.as_bytes()).unwrap_err();
        assert_eq!(error.code, ErrorCode::BadRequest);
        assert!(error.message.contains("params.period_ns"), "{error:?}");
        let line = format!(
            r#"{{"rpc":"rtlab.rpc/1","id":9,"method":"reserve","params":{{"tid":1,"amount_ns":1000,"period_ns":{MAX_PERIOD_NS}}}}}"#
        );
        assert!(decode_request(line.as_bytes()).is_ok());
    }

    #[test]
    fn resize_reads_its_documented_form_and_refuses_a_bad_rate_by_field() {
        let line = br#"{"rpc":"rtlab.rpc/1","id":7,"method":"resize","params":{"grant_id":3,"amount_ns":500000,"period_ns":8000000}}"#;
        assert_eq!(
            decode_request(line).unwrap(),
            Request {
                id: 7,
                call: Call::Resize(ResizeParams {
                    grant_id: 3,
                    amount_ns: 500_000,
                    period_ns: 8_000_000,
                }),
            }
        );
        for (params, field) in [
            (
                r#"{"grant_id":3,"amount_ns":0,"period_ns":8000000}"#,
                "params.amount_ns",
            ),
            (
                r#"{"grant_id":3,"amount_ns":9000000,"period_ns":8000000}"#,
                "params.amount_ns",
            ),
            (
                r#"{"grant_id":3,"amount_ns":1,"period_ns":20000000000}"#,
                "params.period_ns",
            ),
            (r#"{"amount_ns":1,"period_ns":8000000}"#, "grant_id"),
            (
                r#"{"grant_id":3,"amount_ns":1,"period_ns":8000000,"tid":4}"#,
                "tid",
            ),
        ] {
            let line =
                format!(r#"{{"rpc":"rtlab.rpc/1","id":8,"method":"resize","params":{params}}}"#);
            let error = decode_request(line.as_bytes()).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadRequest, "{params}");
            assert_eq!(error.id, Some(8));
            assert!(error.message.starts_with("resize: "), "{error}");
            assert!(error.message.contains(field), "{params}: {error}");
        }
    }

    #[test]
    fn rates_parse() {
        assert_eq!(
            parse_rate("2ms/10ms").unwrap(),
            (crate::Nanos::from_millis(2), crate::Nanos::from_millis(10))
        );
        assert!(parse_rate("2ms").is_err());
        assert!(parse_rate("20ms/10ms").is_err());
        assert!(parse_rate("0ms/10ms").is_err());
    }

    #[test]
    fn a_list_without_realtimekit_threads_reads_and_writes_as_before() {
        let old = r#"{"grants":[],"cpus":[{"cpu":0,"reserved_fraction":0.5}]}"#;
        let list: ListResult = serde_json::from_str(old).unwrap();
        assert!(list.realtimekit.is_empty());
        assert_eq!(serde_json::to_string(&list).unwrap(), old);
        let with_thread = r#"{"grants":[],"cpus":[],"realtimekit":[{"pid":5,"tid":6,"comm":"x","uid":1000,"caller_pid":5,"method":"MakeThreadRealtime","policy":"SCHED_RR","priority":20,"nice":null,"grant_id":null,"since":"2026-11-27T03:00:00.000Z"}]}"#;
        let list: ListResult = serde_json::from_str(with_thread).unwrap();
        assert_eq!(list.realtimekit[0].priority, Some(20));
        assert_eq!(serde_json::to_string(&list).unwrap(), with_thread);
    }
}
