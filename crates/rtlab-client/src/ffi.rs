//! The C ABI (`include/rtlab.h`): reservations and time constraints for the calling thread.
//!
//! Every function returns 0 or a negative errno (see [`ClientError::errno`]) and never unwinds
//! into C. One connection to the daemon is shared by every thread of the process (behind a
//! mutex) and opened at the first call, at `$RTLAB_SOCKET` or `/run/rtlab/rtlabd.sock`; a
//! connection the daemon closed meanwhile is reopened (and the call tried again once). The
//! daemon's message for the calling thread's last error is kept for `rtlab_last_error_message`.

use crate::{current_thread_id, monotonic_now, socket_path, Client, ClientError};
use rtlab_core::rpc::{Backend, GrantInfo};
use rtlab_core::Nanos;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// `RTLAB_BACKEND_DEADLINE` in rtlab.h.
pub const RTLAB_BACKEND_DEADLINE: i32 = 1;
/// `RTLAB_BACKEND_DISPATCH` in rtlab.h.
pub const RTLAB_BACKEND_DISPATCH: i32 = 2;

/// `struct rtlab_grant` in rtlab.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct rtlab_grant {
    pub grant_id: u64,
    pub requested_amount_ns: u64,
    pub requested_period_ns: u64,
    pub granted_amount_ns: u64,
    pub granted_period_ns: u64,
    /// The CPU the thread is confined to, or -1 (global EDF).
    pub cpu: i32,
    /// `RTLAB_BACKEND_DEADLINE` or `RTLAB_BACKEND_DISPATCH`.
    pub backend: i32,
}

impl From<&GrantInfo> for rtlab_grant {
    fn from(info: &GrantInfo) -> Self {
        rtlab_grant {
            grant_id: info.grant_id,
            requested_amount_ns: info.requested.amount_ns,
            requested_period_ns: info.requested.period_ns,
            granted_amount_ns: info.granted.amount_ns,
            granted_period_ns: info.granted.period_ns,
            cpu: info.cpu.map_or(-1, |cpu| cpu as i32),
            backend: match info.backend {
                Backend::Deadline => RTLAB_BACKEND_DEADLINE,
                Backend::Dispatch => RTLAB_BACKEND_DISPATCH,
            },
        }
    }
}

static CONNECTION: Mutex<Option<Client>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(error: &ClientError) {
    let text = error.to_string().replace('\0', " ");
    LAST_ERROR.with(|last| *last.borrow_mut() = CString::new(text).unwrap_or_default());
}

/// Runs `call` on the shared connection, opening it first if needed; maps errors to -errno.
///
/// A connection that was already open may have been closed by the daemon meanwhile (its idle
/// timeout, or a restart); when a call on it fails without an answer, it is reopened and the call
/// tried once more. The daemon never acted on a request it did not answer on a closed connection.
fn with_client<T>(mut call: impl FnMut(&mut Client) -> Result<T, ClientError>) -> Result<T, c_int> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut connection = CONNECTION
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut attempts_left = if connection.is_some() { 2 } else { 1 };
        loop {
            if connection.is_none() {
                *connection = Some(Client::connect(&socket_path(None))?);
            }
            let client = connection.as_mut().expect("connected above");
            let result = call(client);
            attempts_left -= 1;
            match result {
                Err(ClientError::Io { .. } | ClientError::Closed(_)) if attempts_left > 0 => {
                    *connection = None;
                }
                Err(ClientError::Io { .. } | ClientError::Closed(_) | ClientError::Protocol(_)) => {
                    // The connection is unusable now; the next call opens a new one.
                    *connection = None;
                    return result;
                }
                _ => return result,
            }
        }
    }));
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            remember(&error);
            Err(error.errno())
        }
        Err(_) => Err(-libc::EIO),
    }
}

/// Reserves `amount_ns` of every `period_ns` for the calling thread; fills `*grant` if not NULL.
///
/// # Safety
///
/// `grant` is NULL or points to a writable `struct rtlab_grant`.
#[no_mangle]
pub unsafe extern "C" fn rtlab_reserve(
    amount_ns: u64,
    period_ns: u64,
    grant: *mut rtlab_grant,
) -> c_int {
    if amount_ns == 0 || amount_ns > period_ns {
        return -libc::EINVAL;
    }
    match with_client(|client| {
        client.reserve_current_thread(Nanos(amount_ns), Nanos(period_ns), None)
    }) {
        Ok(info) => {
            if !grant.is_null() {
                // SAFETY: the caller passes NULL or a pointer to a writable `struct rtlab_grant`
                // (rtlab.h); NULL was excluded above.
                unsafe { grant.write(rtlab_grant::from(&info)) };
            }
            0
        }
        Err(errno) => errno,
    }
}

/// Releases the calling thread's reservation.
#[no_mangle]
pub extern "C" fn rtlab_release() -> c_int {
    match with_client(|client| client.release_current_thread()) {
        Ok(_) => 0,
        Err(errno) => errno,
    }
}

/// Asks for `estimate_ns` of CPU for the calling thread between the CLOCK_MONOTONIC times
/// `start_ns` and `deadline_ns`; on success `*id` names the constraint.
///
/// # Safety
///
/// `id` is NULL (refused with `-EINVAL`) or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn rtlab_begin_constraint(
    start_ns: u64,
    estimate_ns: u64,
    deadline_ns: u64,
    id: *mut u64,
) -> c_int {
    if id.is_null() || estimate_ns == 0 || start_ns >= deadline_ns {
        return -libc::EINVAL;
    }
    let tid = current_thread_id();
    match with_client(|client| {
        client.begin_constraint(tid, Nanos(start_ns), Nanos(estimate_ns), Nanos(deadline_ns))
    }) {
        Ok(constraint) => {
            // SAFETY: `id` is not NULL (checked above) and points to a writable uint64_t (rtlab.h).
            unsafe { id.write(constraint) };
            0
        }
        Err(errno) => errno,
    }
}

/// Ends constraint `id`: `*used_ns` (if not NULL) gets the CPU time used. Returns 0 if the
/// deadline was met, `-ETIME` if it was missed (with `*used_ns` filled all the same).
///
/// # Safety
///
/// `used_ns` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn rtlab_end_constraint(id: u64, used_ns: *mut u64) -> c_int {
    match with_client(|client| client.end_constraint(id)) {
        Ok(end) => {
            if !used_ns.is_null() {
                // SAFETY: the caller passes NULL or a pointer to a writable uint64_t (rtlab.h);
                // NULL was excluded above.
                unsafe { used_ns.write(end.used.0) };
            }
            if end.met_deadline {
                0
            } else {
                -libc::ETIME
            }
        }
        Err(errno) => errno,
    }
}

/// CLOCK_MONOTONIC now in nanoseconds (the clock of time constraints).
#[no_mangle]
pub extern "C" fn rtlab_now_ns() -> u64 {
    monotonic_now().0
}

/// What a negative return of the functions above means (a static string).
#[no_mangle]
pub extern "C" fn rtlab_strerror(error: c_int) -> *const c_char {
    let text: &'static CStr = match error.checked_neg().unwrap_or(0) {
        0 => c"success",
        libc::ECONNREFUSED => {
            c"the rtlab daemon is not running (start it with `rtlab daemon`, or set RTLAB_SOCKET)"
        }
        libc::EIO => c"input/output error talking to the rtlab daemon, or the daemon failed",
        libc::ECONNRESET => c"the rtlab daemon closed the connection",
        libc::EPROTO => c"the rtlab daemon's answer could not be read",
        libc::EINVAL => c"invalid argument",
        libc::EMSGSIZE => c"request too long",
        libc::ETIMEDOUT => c"the request timed out",
        libc::EAGAIN => c"the rtlab daemon is busy; try again",
        libc::EPERM => {
            c"permission denied: only root or CAP_SYS_NICE may reserve for another user's thread"
        }
        libc::EDQUOT => c"this user's reservation limit would be exceeded",
        libc::ENOSPC => c"denied: no CPU has room for this reservation",
        libc::EBUSY => c"the time constraint cannot be guaranteed",
        libc::EOPNOTSUPP => c"the backend cannot enforce this reservation on this machine",
        libc::ESRCH => c"no such thread",
        libc::EEXIST => c"the thread already holds a reservation",
        libc::ENOENT => c"no such reservation or time constraint",
        libc::ETIME => c"the time constraint missed its deadline",
        _ => c"unknown rtlab error",
    };
    text.as_ptr()
}

/// The daemon's message for the calling thread's last failed call ("" if none); valid until the
/// thread's next call.
#[no_mangle]
pub extern "C" fn rtlab_last_error_message() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::rpc::{decode_request, ErrorCode, Response, RpcError};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;

    /// A stand-in daemon that answers one request per connection with `not_found` and then closes
    /// the connection, as the real one does after its idle timeout.
    #[test]
    fn a_connection_the_daemon_closed_is_reopened_and_the_call_tried_again() {
        let directory = std::env::temp_dir().join(format!("rtlab-ffi-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let socket = directory.join("d.sock");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        // The only test in this crate that uses the environment and the shared connection.
        std::env::set_var(rtlab_core::rpc::SOCKET_ENV, &socket);
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (stream, _) = listener.accept().unwrap();
                let mut line = Vec::new();
                BufReader::new(&stream)
                    .read_until(b'\n', &mut line)
                    .unwrap();
                let request = decode_request(&line).unwrap();
                let answer = Response::error(
                    request.id,
                    RpcError::new(ErrorCode::NotFound, "thread holds no reservation"),
                );
                (&stream).write_all(answer.encode().as_bytes()).unwrap();
            }
        });
        assert_eq!(rtlab_release(), -libc::ENOENT);
        // The first connection is closed now; the second call reconnects and is answered.
        assert_eq!(rtlab_release(), -libc::ENOENT);
        server.join().unwrap();
        // SAFETY: rtlab_last_error_message returns a valid NUL-terminated string.
        let message = unsafe { CStr::from_ptr(rtlab_last_error_message()) };
        assert_eq!(message.to_str().unwrap(), "thread holds no reservation");
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn every_errno_the_abi_returns_has_its_own_text() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::Permission,
            ErrorCode::Limit,
            ErrorCode::Denied,
            ErrorCode::Infeasible,
            ErrorCode::NoSuchThread,
            ErrorCode::AlreadyReserved,
            ErrorCode::NotFound,
        ] {
            let errno = ClientError::Daemon(RpcError::new(code, "x")).errno();
            // SAFETY: rtlab_strerror returns a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(rtlab_strerror(errno)) };
            assert_ne!(text.to_str().unwrap(), "unknown rtlab error", "{code:?}");
        }
    }
}
