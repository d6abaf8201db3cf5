//! `rtlab reservations`: every reservation the daemon holds, one row per thread, and each CPU's
//! reserved fraction.

use super::daemon_client::{failure, SocketArgs};
use crate::output::PendingOutput;
use rtlab_core::rpc::RESERVATIONS_SCHEMA;
use rtlab_render::reserve::{reservation_rows, reservations};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
    #[command(flatten)]
    pub socket: SocketArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    let mut client = args.socket.connect()?;
    let table = match client.list() {
        Ok(list) => reservation_rows(&list),
        Err(error) => return failure(error),
    };
    let text = reservations(&table);
    let to_stdout_only = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        json.commit_json(RESERVATIONS_SCHEMA, None, &table)?;
    }
    if !to_stdout_only {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
