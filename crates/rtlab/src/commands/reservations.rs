//! `rtlab reservations`: every reservation the daemon holds, one row per thread, and each CPU's
//! reserved fraction.

use super::daemon_client::{failure, SocketArgs};
use crate::output::PendingOutput;
use rtlab_core::rpc::RESERVATIONS_SCHEMA;
use rtlab_render::reserve::{reservation_rows, reservations, CpuShare, ReservationRow};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub output: crate::output::JsonArgs,
    #[command(flatten)]
    pub socket: SocketArgs,
}

/// `rtlab reservations --json` under the common header.
#[derive(Debug, Serialize)]
struct ReservationsFile {
    reservations: Vec<ReservationRow>,
    cpus: Vec<CpuShare>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.output.prepare()?;
    let mut client = args.socket.connect()?;
    let list = match client.list() {
        Ok(list) => list,
        Err(error) => return failure(error),
    };
    let (rows, cpus) = reservation_rows(&list);
    let text = reservations(&rows, &cpus);
    let to_stdout_only = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        let file = ReservationsFile {
            reservations: rows,
            cpus,
        };
        json.commit_json(RESERVATIONS_SCHEMA, None, &file)?;
    }
    if !to_stdout_only {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
