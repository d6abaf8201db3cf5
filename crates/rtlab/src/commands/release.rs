//! `rtlab release`: gives a reservation back to the daemon (the threads get their old policy).

use super::daemon_client::{failure, SocketArgs};
use rtlab_core::rpc::ReleaseTarget;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("target").required(true).args(["tid", "pid", "all_mine"])),
    after_help = "Exit status: 0 released, 1 not allowed (another user's reservation), 2 nothing \
to release there, 3 system error (no daemon)."
)]
pub struct Args {
    /// The reservation of this thread (for a thread sharing an activity: it leaves it)
    #[arg(long, value_name = "TID")]
    pub tid: Option<u32>,
    /// Every reservation holding a thread of this process
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Every reservation this user made
    #[arg(long)]
    pub all_mine: bool,
    #[command(flatten)]
    pub socket: SocketArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = if let Some(tid) = args.tid {
        ReleaseTarget::Thread { tid }
    } else if let Some(pid) = args.pid {
        ReleaseTarget::Process { pid }
    } else {
        ReleaseTarget::AllMine
    };
    let mut client = args.socket.connect()?;
    match client.release(target) {
        Ok(result) => {
            crate::output::print(&rtlab_render::reserve::released(&result))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => failure(error),
    }
}
