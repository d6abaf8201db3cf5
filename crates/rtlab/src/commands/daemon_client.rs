//! What `reserve`, `release` and `reservations` share: the `--socket` flag, connecting to the
//! daemon, and turning the daemon's errors into rtlab's exit codes.

use rtlab_client::{Client, ClientError};
use rtlab_core::rpc::ErrorCode;
use std::path::PathBuf;
use std::process::ExitCode;

/// The daemon's socket.
#[derive(Debug, Clone, clap::Args)]
pub struct SocketArgs {
    /// The daemon's socket [default: $RTLAB_SOCKET, else /run/rtlab/rtlabd.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

impl SocketArgs {
    /// Connects; without a daemon the error says how to start one (exit 3).
    pub fn connect(&self) -> anyhow::Result<Client> {
        Ok(Client::connect(&rtlab_client::socket_path(
            self.socket.as_deref(),
        ))?)
    }
}

/// How a failed call ends the command: a refusal is printed and exits 1, bad input exits 2,
/// everything else (no daemon, a broken connection, a system error in the daemon) exits 3.
pub fn failure(error: ClientError) -> anyhow::Result<ExitCode> {
    match error.code() {
        Some(
            ErrorCode::Permission
            | ErrorCode::Limit
            | ErrorCode::Denied
            | ErrorCode::Infeasible
            | ErrorCode::Unenforceable
            | ErrorCode::AlreadyReserved,
        ) => {
            let code = error.code().map_or("denied", ErrorCode::as_str);
            eprintln!("rtlab: denied ({code}): {error}");
            Ok(ExitCode::from(crate::exit::CHECK_FAILED))
        }
        Some(ErrorCode::BadRequest | ErrorCode::NoSuchThread | ErrorCode::NotFound) => {
            Err(crate::exit::input(error))
        }
        _ => Err(anyhow::Error::new(error)),
    }
}
