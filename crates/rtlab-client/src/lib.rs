//! rtlab-client: ask the rtlab daemon for CPU Reservations and Time Constraints.
//!
//! A blocking client of `rtlab.rpc/1` over the daemon's Unix socket, with nothing but
//! `rtlab-core` (the protocol types) and `libc` (the C ABI's errno values, `gettid`, the
//! monotonic clock) beneath it, so that any program can link it: Rust programs through [`Client`],
//! C programs through `include/rtlab.h` and `librtlab_client.{so,a}` (see [`ffi`]).
//!
//! A thread the daemon finds already reserved is judged here by rtlab-core's `already_reserved`
//! rule ([`Client::reserve_thread`], [`Client::already_reserved`]), and what `reserve --auto`
//! sized is asked for by [`Client::reserve_sized`], so `rtlab reserve` and any other caller
//! answer alike.
//!
//! ```no_run
//! use rtlab_client::Client;
//! use rtlab_core::Nanos;
//!
//! let mut client = Client::connect_default()?;
//! // 2 ms of every 10 ms for the calling thread, held until released or the thread exits.
//! let grant = client.reserve_current_thread(Nanos::from_millis(2), Nanos::from_millis(10), None)?;
//! println!("granted {} ns of every {} ns", grant.granted.amount_ns, grant.granted.period_ns);
//! client.release_current_thread()?;
//! # Ok::<(), rtlab_client::ClientError>(())
//! ```

pub mod ffi;

use rtlab_core::already_reserved::{self, Judgement, Wish};
use rtlab_core::auto_plan::AutoReservation;
use rtlab_core::rpc::{
    decode_response, encode_request, BeginConstraintParams, BeginConstraintResult, Call,
    EndConstraintParams, EndConstraintResult, ErrorCode, ListResult, PingResult, ReleaseResult,
    ReleaseTarget, Request, ReserveParams, ResizeParams, ResponseError, RpcError, Target, WireRate,
    DEFAULT_SOCKET, MAX_LINE_BYTES, SOCKET_ENV,
};
use rtlab_core::Nanos;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use rtlab_core::rpc::{Backend, GrantInfo};

/// How long the client waits for an answer before giving up on the daemon.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// True when `cause` is a [`ClientError`] of the request's making (see [`ClientError::is_input`]).
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<ClientError>()
        .is_some_and(ClientError::is_input)
}

/// Replaces this process with `command` (a program and its arguments): the calling thread
/// becomes its main thread, so a reservation made for [`current_thread_id`] carries over, like
/// `chrt`. Returns only if the exec failed: that error, and whether giving the reservation back
/// to the daemon at `socket` worked.
pub fn exec_reserved(command: &[String], socket: &Path) -> (io::Error, Result<(), ClientError>) {
    use std::os::unix::process::CommandExt as _;
    let Some((program, arguments)) = command.split_first() else {
        let empty = io::Error::new(io::ErrorKind::InvalidInput, "no command");
        return (empty, Ok(()));
    };
    let error = std::process::Command::new(program).args(arguments).exec();
    let released = Client::connect(socket)
        .and_then(|mut client| client.release_current_thread())
        .map(drop);
    (error, released)
}

/// The daemon's socket: `explicit` (a `--socket` flag) if given, else `$RTLAB_SOCKET`, else
/// `/run/rtlab/rtlabd.sock`.
pub fn socket_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_owned();
    }
    match std::env::var_os(SOCKET_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(DEFAULT_SOCKET),
    }
}

/// What asking for a thread's reservation came to ([`Client::reserve_thread`]).
#[derive(Debug)]
pub enum ThreadReservation {
    Granted(GrantInfo),
    /// The thread already holds `grant`; `judgement` says whether it meets the wish.
    AlreadyReserved {
        grant: GrantInfo,
        judgement: Judgement,
    },
    /// Refused for another reason (or already reserved by a reservation the list did not show).
    Refused(ClientError),
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nobody listens on the socket.
    #[error("cannot reach the rtlab daemon at {socket} ({cause}): start it with `sudo rtlab daemon` (or `systemctl start rtlabd.socket`), or point --socket or RTLAB_SOCKET at a running one")]
    NotRunning { socket: String, cause: io::Error },
    /// The connection broke or timed out.
    #[error("talking to the rtlab daemon at {socket}: {source}")]
    Io {
        socket: String,
        #[source]
        source: io::Error,
    },
    /// The daemon closed the connection without answering.
    #[error("the rtlab daemon at {0} closed the connection without answering")]
    Closed(String),
    /// The daemon answered with an error.
    #[error("{0}")]
    Daemon(RpcError),
    /// The answer could not be read.
    #[error("{0}")]
    Protocol(String),
}

impl ClientError {
    /// The daemon's error code, when the daemon answered with an error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Daemon(error) => Some(error.code),
            _ => None,
        }
    }

    /// True when the daemon refused on its own terms (permission, a limit, no room, a thread
    /// already reserved): an answer, not a failure.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.code(),
            Some(
                ErrorCode::Permission
                    | ErrorCode::Limit
                    | ErrorCode::RateLimited
                    | ErrorCode::Denied
                    | ErrorCode::Infeasible
                    | ErrorCode::Unenforceable
                    | ErrorCode::AlreadyReserved
            )
        )
    }

    /// True when the request was at fault (malformed, no such thread or reservation).
    pub fn is_input(&self) -> bool {
        matches!(
            self.code(),
            Some(ErrorCode::BadRequest | ErrorCode::NoSuchThread | ErrorCode::NotFound)
        )
    }

    /// The negative errno the C ABI returns for this error.
    pub fn errno(&self) -> i32 {
        -match self {
            ClientError::NotRunning { .. } => libc::ECONNREFUSED,
            ClientError::Io { .. } => libc::EIO,
            ClientError::Closed(_) => libc::ECONNRESET,
            ClientError::Protocol(_) => libc::EPROTO,
            ClientError::Daemon(error) => match error.code {
                ErrorCode::BadRequest => libc::EINVAL,
                ErrorCode::TooLong => libc::EMSGSIZE,
                ErrorCode::Timeout => libc::ETIMEDOUT,
                ErrorCode::Busy => libc::EAGAIN,
                ErrorCode::Permission => libc::EPERM,
                ErrorCode::Limit => libc::EDQUOT,
                ErrorCode::RateLimited => libc::EAGAIN,
                ErrorCode::Denied => libc::ENOSPC,
                ErrorCode::Infeasible => libc::EBUSY,
                ErrorCode::Unenforceable => libc::EOPNOTSUPP,
                ErrorCode::NoSuchThread => libc::ESRCH,
                ErrorCode::AlreadyReserved => libc::EEXIST,
                ErrorCode::NotFound => libc::ENOENT,
                ErrorCode::System => libc::EIO,
            },
        }
    }
}

/// The calling thread's kernel thread id.
pub fn current_thread_id() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of Time Constraints.
pub fn monotonic_now() -> Nanos {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    Nanos(now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64)
}

/// A connection to the daemon. Calls are blocking and answered in order.
pub struct Client {
    socket: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Client")
            .field("socket", &self.socket)
            .finish()
    }
}

/// The result of ending a time constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstraintEnd {
    /// CPU time the thread used between begin and end.
    pub used: Nanos,
    pub met_deadline: bool,
}

impl Client {
    /// Connects to the socket [`socket_path`] names without a flag.
    pub fn connect_default() -> Result<Client, ClientError> {
        Client::connect(&socket_path(None))
    }

    /// Connects to the daemon at `socket` — as root, to root's own socket beside it first
    /// (`rtlab_core::rpc::root_socket_path`, served above every RealtimeKit1 priority), falling
    /// back to `socket` when that one is not there or not served.
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let root_socket = rtlab_core::rpc::root_socket_path(socket);
        // SAFETY: geteuid takes no arguments and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let at_root_socket = (euid == 0)
            .then(|| UnixStream::connect(&root_socket).ok())
            .flatten();
        let (socket, writer) = match at_root_socket {
            Some(writer) => (root_socket.as_path(), writer),
            None => (
                socket,
                UnixStream::connect(socket).map_err(|cause| ClientError::NotRunning {
                    socket: socket.display().to_string(),
                    cause,
                })?,
            ),
        };
        let io_error = |source| ClientError::Io {
            socket: socket.display().to_string(),
            source,
        };
        writer
            .set_read_timeout(Some(RESPONSE_TIMEOUT))
            .map_err(io_error)?;
        writer
            .set_write_timeout(Some(RESPONSE_TIMEOUT))
            .map_err(io_error)?;
        let reader = BufReader::new(writer.try_clone().map_err(io_error)?);
        Ok(Client {
            socket: socket.to_owned(),
            writer,
            reader,
            next_id: 1,
        })
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn io_error(&self, source: io::Error) -> ClientError {
        ClientError::Io {
            socket: self.socket.display().to_string(),
            source,
        }
    }

    /// Sends one call and returns its typed result.
    fn call<T: serde::de::DeserializeOwned>(&mut self, call: Call) -> Result<T, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = encode_request(&Request { id, call });
        if let Err(error) = self.writer.write_all(line.as_bytes()) {
            // The daemon may have refused the connection with a line before closing it.
            if let Ok(Some(answer)) = self.read_answer() {
                if let Some(refusal) = answer.error {
                    return Err(ClientError::Daemon(refusal));
                }
            }
            return Err(self.io_error(error));
        }
        let response = self
            .read_answer()?
            .ok_or_else(|| ClientError::Closed(self.socket.display().to_string()))?;
        if response.id != id && !(response.id == 0 && response.error.is_some()) {
            return Err(ClientError::Protocol(format!(
                "the daemon answered request {} to request {id}",
                response.id
            )));
        }
        response.into_result().map_err(|error| match error {
            ResponseError::Daemon(error) => ClientError::Daemon(error),
            ResponseError::Malformed(message) => ClientError::Protocol(message),
        })
    }

    fn read_answer(&mut self) -> Result<Option<rtlab_core::rpc::Response>, ClientError> {
        let mut line = Vec::new();
        let read = (&mut self.reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|error| self.io_error(error))?;
        if read == 0 {
            return Ok(None);
        }
        if !line.ends_with(b"\n") {
            return Err(ClientError::Protocol(if line.len() > MAX_LINE_BYTES {
                format!("the daemon's answer is longer than {MAX_LINE_BYTES} bytes")
            } else {
                "the daemon's answer ended without a newline".to_owned()
            }));
        }
        decode_response(&line)
            .map(Some)
            .map_err(|error| ClientError::Protocol(error.to_string()))
    }

    /// The daemon's protocol, version and default backend.
    pub fn ping(&mut self) -> Result<PingResult, ClientError> {
        self.call(Call::Ping)
    }

    /// Reserves `amount` of every `period` for `target`.
    pub fn reserve(
        &mut self,
        target: Target,
        amount: Nanos,
        period: Nanos,
        backend: Option<Backend>,
    ) -> Result<GrantInfo, ClientError> {
        self.reserve_with(ReserveParams {
            target,
            amount_ns: amount.0,
            period_ns: period.0,
            backend,
            reclaim: false,
        })
    }

    /// Reserves as `params` say (with [`ReserveParams::reclaim`], for one).
    pub fn reserve_with(&mut self, params: ReserveParams) -> Result<GrantInfo, ClientError> {
        self.call(Call::Reserve(params))
    }

    /// Reserves `amount` of every `period` for the calling thread.
    pub fn reserve_current_thread(
        &mut self,
        amount: Nanos,
        period: Nanos,
        backend: Option<Backend>,
    ) -> Result<GrantInfo, ClientError> {
        let tid = current_thread_id();
        self.reserve(Target::Thread { tid }, amount, period, backend)
    }

    /// Releases what `target` names.
    pub fn release(&mut self, target: ReleaseTarget) -> Result<ReleaseResult, ClientError> {
        self.call(Call::Release(target))
    }

    /// Releases the calling thread's reservation.
    pub fn release_current_thread(&mut self) -> Result<ReleaseResult, ClientError> {
        let tid = current_thread_id();
        self.release(ReleaseTarget::Thread { tid })
    }

    /// Changes reservation `grant_id` to `amount` of every `period` (same threads and id), with
    /// admission: a growth past the caller's limit or the machine's room is refused and the old
    /// size stays. The answer says what the kernel holds now (`kernel_held`).
    pub fn resize(
        &mut self,
        grant_id: u64,
        amount: Nanos,
        period: Nanos,
    ) -> Result<GrantInfo, ClientError> {
        self.call(Call::Resize(ResizeParams {
            grant_id,
            amount_ns: amount.0,
            period_ns: period.0,
        }))
    }

    /// Reserves thread `tid` as `params` say; when the daemon answers that it already holds a
    /// reservation, finds that reservation and judges whether it meets `wish` for the caller
    /// `caller_uid` (`rtlab_core::already_reserved`: the rule `reserve` and `reserve --auto`
    /// share).
    pub fn reserve_thread(
        &mut self,
        params: ReserveParams,
        tid: u32,
        caller_uid: u32,
        wish: Wish,
    ) -> ThreadReservation {
        match self.reserve_with(params) {
            Ok(grant) => ThreadReservation::Granted(grant),
            Err(error) => match self.already_reserved(&error, tid, caller_uid, wish) {
                Some((grant, judgement)) => ThreadReservation::AlreadyReserved { grant, judgement },
                None => ThreadReservation::Refused(error),
            },
        }
    }

    /// Reserves what `reserve --auto` sized for one thread (`reservation`: at least its amount in
    /// every window, on its backend), reclaiming: a thread whose work grows beyond its size runs
    /// on the bandwidth no reservation uses rather than being throttled (a root request; the
    /// daemon makes another user's without it). A reservation the thread already holds is judged
    /// as a sized wish: at least this share, with one activation's need in each window.
    pub fn reserve_sized(
        &mut self,
        reservation: &AutoReservation,
        caller_uid: u32,
    ) -> ThreadReservation {
        let params = sized_params(
            reservation.tid,
            reservation.amount,
            reservation.window,
            reservation.backend.into(),
        );
        let wish = Wish::AtLeast {
            amount_ns: reservation.amount.0,
            window_ns: reservation.window.0,
            per_activation_ns: reservation.amount.0
                / u64::from(reservation.periods_per_window).max(1),
        };
        self.reserve_thread(params, reservation.tid, caller_uid, wish)
    }

    /// After `error`: when it is the daemon's `already_reserved`, the reservation holding thread
    /// `tid` (from the list) and whether it meets `wish` for the caller `caller_uid`; `None` for
    /// any other error, or when the list fails or shows no reservation holding it.
    pub fn already_reserved(
        &mut self,
        error: &ClientError,
        tid: u32,
        caller_uid: u32,
        wish: Wish,
    ) -> Option<(GrantInfo, Judgement)> {
        if error.code() != Some(ErrorCode::AlreadyReserved) {
            return None;
        }
        let list = self.list().ok()?;
        let grant = already_reserved::holding(&list.grants, tid)?.clone();
        let judgement = already_reserved::judge(&grant, caller_uid, wish);
        Some((grant, judgement))
    }

    /// When the daemon refused (`error`) because the thread already holds a reservation: the
    /// thread, the reservation holding it and whether it is the caller's (`caller_uid`), asked
    /// for this very budget (`asked`, exactly: `Judgement::Met`, `reserve` exits 0), else why not
    /// (another user's, another budget, nothing held). `None` for any other refusal, or a target
    /// this does not judge (`--comm`, `--all-threads`: the daemon takes an activity asked again
    /// at its rate back itself).
    pub fn already_reserved_exactly(
        &mut self,
        error: &ClientError,
        target: &Target,
        asked: &WireRate,
        caller_uid: u32,
    ) -> Option<(u32, GrantInfo, Judgement)> {
        let tid = match *target {
            Target::Thread { tid } => tid,
            Target::Process {
                pid,
                all_threads: false,
            } => pid,
            _ => return None,
        };
        let wish = Wish::Exactly {
            amount_ns: asked.amount_ns,
            period_ns: asked.period_ns,
        };
        let (grant, judgement) = self.already_reserved(error, tid, caller_uid, wish)?;
        Some((tid, grant, judgement))
    }

    /// Reserves thread `tid` at least `amount` in every `window` on `backend`, reclaiming (as
    /// [`Client::reserve_sized`]; `reserve --auto --follow` after a thread's work changed).
    pub fn reserve_reclaiming(
        &mut self,
        tid: u32,
        amount: Nanos,
        window: Nanos,
        backend: Backend,
    ) -> Result<GrantInfo, ClientError> {
        self.reserve_with(sized_params(tid, amount, window, backend))
    }

    /// Releases grant `grant_id`: `Ok(false)` when the daemon no longer holds it.
    pub fn release_grant(&mut self, grant_id: u64) -> Result<bool, ClientError> {
        match self.release(ReleaseTarget::Grant { grant_id }) {
            Ok(_) => Ok(true),
            Err(error) if error.code() == Some(ErrorCode::NotFound) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Releases every grant of `grants`, on through failures: each that failed, with its error.
    pub fn release_grants(&mut self, grants: &[GrantInfo]) -> Vec<(u64, ClientError)> {
        grants
            .iter()
            .filter_map(|grant| {
                self.release(ReleaseTarget::Grant {
                    grant_id: grant.grant_id,
                })
                .err()
                .map(|error| (grant.grant_id, error))
            })
            .collect()
    }

    /// Every reservation in force and each CPU's reserved fraction.
    pub fn list(&mut self) -> Result<ListResult, ClientError> {
        self.call(Call::List)
    }

    /// Asks for `estimate` of CPU for thread `tid` between the absolute CLOCK_MONOTONIC times
    /// `start` and `deadline` (see [`monotonic_now`]); answered at once.
    pub fn begin_constraint(
        &mut self,
        tid: u32,
        start: Nanos,
        estimate: Nanos,
        deadline: Nanos,
    ) -> Result<u64, ClientError> {
        let result: BeginConstraintResult =
            self.call(Call::BeginConstraint(BeginConstraintParams {
                tid,
                start_ns: start.0,
                estimate_ns: estimate.0,
                deadline_ns: deadline.0,
            }))?;
        Ok(result.constraint_id)
    }

    /// Ends a time constraint: the CPU time used and whether the deadline was met.
    pub fn end_constraint(&mut self, constraint_id: u64) -> Result<ConstraintEnd, ClientError> {
        let result: EndConstraintResult =
            self.call(Call::EndConstraint(EndConstraintParams { constraint_id }))?;
        Ok(ConstraintEnd {
            used: Nanos(result.used_ns),
            met_deadline: result.met_deadline,
        })
    }
}

pub use rtlab_core::rpc::{ReleaseTarget as Release, Target as ReserveTarget};

/// What `reserve --auto` asks for a thread it sized: reclaiming, on its backend.
fn sized_params(tid: u32, amount: Nanos, window: Nanos, backend: Backend) -> ReserveParams {
    ReserveParams {
        target: Target::Thread { tid },
        amount_ns: amount.0,
        period_ns: window.0,
        backend: Some(backend),
        reclaim: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_environment_and_the_default() {
        // (The environment's part is exercised by the CLI tests: ffi's test sets RTLAB_SOCKET in
        // this process, so reading it here would race.)
        assert_eq!(
            socket_path(Some(Path::new("/tmp/x.sock"))),
            PathBuf::from("/tmp/x.sock")
        );
    }

    #[test]
    fn no_daemon_is_a_clear_error_with_econnrefused() {
        let directory = std::env::temp_dir().join(format!("rtlab-client-{}", std::process::id()));
        let error = Client::connect(&directory.join("none.sock")).unwrap_err();
        assert!(error.to_string().contains("rtlab daemon"), "{error}");
        assert!(error.to_string().contains("RTLAB_SOCKET"), "{error}");
        assert_eq!(error.errno(), -libc::ECONNREFUSED);
    }

    #[test]
    fn daemon_errors_map_to_their_errno() {
        let error = ClientError::Daemon(RpcError::new(ErrorCode::Permission, "no"));
        assert_eq!(error.errno(), -libc::EPERM);
        assert_eq!(error.code(), Some(ErrorCode::Permission));
    }
}
