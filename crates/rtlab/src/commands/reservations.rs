//! `rtlab reservations`: every reservation the daemon holds, one row per thread, and each CPU's
//! reserved fraction.

use super::daemon_client::{failure, SocketArgs};
use crate::output::PendingOutput;
use rtlab_core::rpc::{ListResult, WireRate, RESERVATIONS_SCHEMA};
use rtlab_core::Nanos;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also write them as JSON to FILE (`-`: only JSON, to standard output)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub socket: SocketArgs,
}

/// One row of `reservations`: a thread under a reservation (or a lingering activity, without one).
#[derive(Debug, Serialize)]
struct Row {
    grant_id: u64,
    /// The uid that made the reservation.
    owner: u32,
    /// `tid:N` or the activity's name.
    reservation: String,
    pid: Option<u32>,
    tid: Option<u32>,
    comm: Option<String>,
    requested: WireRate,
    granted: WireRate,
    backend: String,
    cpu: Option<usize>,
    since: String,
    lingering_until: Option<String>,
}

#[derive(Debug, Serialize)]
struct Cpu {
    cpu: usize,
    reserved_fraction: f64,
}

#[derive(Debug, Serialize)]
struct ReservationsFile {
    schema: &'static str,
    tool_version: &'static str,
    cmdline: Vec<String>,
    started_at: String,
    reservations: Vec<Row>,
    cpus: Vec<Cpu>,
}

fn rows(list: &ListResult) -> Vec<Row> {
    let mut rows = Vec::new();
    for grant in &list.grants {
        let row = |pid, tid, comm| Row {
            grant_id: grant.grant_id,
            owner: grant.owner_uid,
            reservation: grant.owner.clone(),
            pid,
            tid,
            comm,
            requested: grant.requested,
            granted: grant.granted,
            backend: grant.backend.to_string(),
            cpu: grant.cpu,
            since: grant.since.clone(),
            lingering_until: grant.lingering_until.clone(),
        };
        if grant.threads.is_empty() {
            rows.push(row(None, None, None));
        }
        for thread in &grant.threads {
            rows.push(row(
                Some(thread.pid),
                Some(thread.tid),
                Some(thread.comm.clone()),
            ));
        }
    }
    rows
}

fn render(rows: &[Row], cpus: &[Cpu]) -> String {
    let mut text = String::new();
    if rows.is_empty() {
        text.push_str("no reservations\n");
    } else {
        text.push_str(&format!(
            "{:>5}  {:>6}  {:>7}  {:>7}  {:<15}  {:>15}  {:>15}  {:<8}  {:>3}  {}\n",
            "GRANT",
            "OWNER",
            "PID",
            "TID",
            "COMM",
            "REQUESTED",
            "GRANTED",
            "BACKEND",
            "CPU",
            "SINCE"
        ));
        for row in rows {
            let optional = |value: Option<u32>| value.map_or("-".to_owned(), |v| v.to_string());
            let rate =
                |rate: &WireRate| format!("{}/{}", Nanos(rate.amount_ns), Nanos(rate.period_ns));
            let since = match &row.lingering_until {
                Some(until) => format!("{} (lingering until {until})", row.since),
                None => row.since.clone(),
            };
            text.push_str(&format!(
                "{:>5}  {:>6}  {:>7}  {:>7}  {:<15}  {:>15}  {:>15}  {:<8}  {:>3}  {since}\n",
                row.grant_id,
                row.owner,
                optional(row.pid),
                optional(row.tid),
                row.comm.as_deref().unwrap_or(&row.reservation),
                rate(&row.requested),
                rate(&row.granted),
                row.backend,
                row.cpu.map_or("any".to_owned(), |cpu| cpu.to_string()),
            ));
        }
    }
    let shares: Vec<String> = cpus
        .iter()
        .map(|cpu| format!("CPU {} {:.1} %", cpu.cpu, cpu.reserved_fraction * 100.0))
        .collect();
    text.push_str(&format!("reserved: {}\n", shares.join(", ")));
    text
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let json = args.json.as_deref().map(PendingOutput::json).transpose()?;
    let mut client = args.socket.connect()?;
    let list = match client.list() {
        Ok(list) => list,
        Err(error) => return failure(error),
    };
    let rows = rows(&list);
    let cpus: Vec<Cpu> = list
        .cpus
        .iter()
        .map(|share| Cpu {
            cpu: share.cpu,
            reserved_fraction: share.reserved_fraction,
        })
        .collect();
    let text = render(&rows, &cpus);
    let to_stdout_only = json.as_ref().is_some_and(PendingOutput::is_stdout);
    if let Some(json) = json {
        let file = ReservationsFile {
            schema: RESERVATIONS_SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION"),
            cmdline: std::env::args().collect(),
            started_at,
            reservations: rows,
            cpus,
        };
        let mut json_text = serde_json::to_string_pretty(&file)?;
        json_text.push('\n');
        json.commit(&json_text)?;
    }
    if !to_stdout_only {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
