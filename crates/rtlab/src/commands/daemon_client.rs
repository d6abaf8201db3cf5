//! What `reserve`, `release` and `reservations` share: the `--socket` flag, connecting to the
//! daemon, and turning the daemon's errors into rtlab's exit codes; and `--verify`, which
//! `reserve` and `reserve --auto` share.

use anyhow::Context as _;
use rtlab_client::{Client, ClientError};
use rtlab_core::rpc::ErrorCode;
use rtlab_core::Nanos;
use rtlab_session::supply::{verify_supply, VerifiedSupply};
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

/// How a failed call ends the command: a refusal is printed and exits 1; anything else goes to
/// `exit.rs` (bad input 2; no daemon, a broken connection or a system error in the daemon 3).
pub fn failure(error: ClientError) -> anyhow::Result<ExitCode> {
    if !error.is_refusal() {
        return Err(anyhow::Error::new(error));
    }
    let code = error.code().map_or("denied", ErrorCode::as_str);
    eprintln!("rtlab: denied ({code}): {error}");
    Ok(ExitCode::from(crate::exit::CHECK_FAILED))
}

/// `--verify`: watches thread `tid` for `duration` and says (unless `quiet`) what it received of
/// `amount` in every window of `period`.
pub(crate) fn verify(
    tid: u32,
    amount: Nanos,
    period: Nanos,
    duration: Nanos,
    quiet: bool,
) -> anyhow::Result<VerifiedSupply> {
    if !quiet {
        println!("{}", rtlab_render::reserve::verifying(tid, duration));
    }
    let verified = verify_supply(tid, amount, period, duration).context("--verify")?;
    if !quiet {
        print!(
            "{}",
            rtlab_render::reserve::verified(&verified, amount, period)
        );
    }
    Ok(verified)
}
