//! `rtlab plan`: feeds a file of reservation requests to the planner, without enforcing anything,
//! and shows what would be granted, what denied and why, and each CPU's timeline. It exists so the
//! planner's admission and layout can be explored (and scripted, with `--json`) before reserving.

use anyhow::Context as _;
use rtlab_core::{parse_duration, Nanos};
use rtlab_sched::{AdmissionPath, Planner, Request};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;

/// Slots printed per CPU in the text timeline; `--json` always has them all.
const TIMELINE_SLOTS_SHOWN: usize = 32;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "FILE holds one request per line, `OWNER AMOUNT/PERIOD` (e.g. `decoder 1ms/16ms`, \
`tid:4242 500us/10ms`), `#` starts a comment. Exit status: 0 when every request is granted, 1 when \
any is denied, 2 for a malformed file or flag."
)]
pub struct Args {
    /// Request file (`-` reads standard input)
    pub file: String,
    /// CPUs to plan for [default: the CPUs of this machine]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub cpus: Option<u16>,
    /// Base quantum: every granted period is a power-of-two multiple of it
    #[arg(long, value_name = "D", default_value = "1ms", value_parser = parse_quantum)]
    pub quantum: Nanos,
    /// Largest fraction of a CPU that reservations may take, in (0, 1]
    #[arg(long, value_name = "F", default_value_t = rtlab_sched::DEFAULT_CAP)]
    pub cap: f64,
    /// Also write the result as JSON to OUT (`-` writes only JSON, to standard output)
    #[arg(long, value_name = "OUT")]
    pub json: Option<String>,
}

fn parse_quantum(text: &str) -> Result<Nanos, String> {
    let quantum = parse_duration(text).map_err(|error| error.to_string())?;
    if quantum.0 == 0 {
        return Err("the quantum must be positive".to_owned());
    }
    Ok(quantum)
}

#[derive(Debug, Serialize)]
struct JsonRate {
    amount_ns: u64,
    period_ns: u64,
}

#[derive(Debug, Serialize)]
struct JsonGrant {
    owner: String,
    cpu: usize,
    requested: JsonRate,
    granted: JsonRate,
    incremental: bool,
}

#[derive(Debug, Serialize)]
struct JsonDenied {
    owner: String,
    reason: String,
}

#[derive(Debug, Serialize)]
struct JsonSlot {
    start_ns: u64,
    length_ns: u64,
    owner: String,
}

#[derive(Debug, Serialize)]
struct JsonCpu {
    cpu: usize,
    cycle_ns: u64,
    slots: Vec<JsonSlot>,
}

#[derive(Debug, Serialize)]
struct JsonPlan {
    grants: Vec<JsonGrant>,
    denied: Vec<JsonDenied>,
    cpus: Vec<JsonCpu>,
}

/// A duration printed exactly (the planner's roundings matter to the nanosecond): the largest unit
/// that divides it, else microseconds with every decimal needed.
fn exact(nanos: u64) -> String {
    for (unit, name) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if nanos >= unit && (nanos / unit) * unit == nanos {
            return format!("{}{name}", nanos / unit);
        }
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    let text = format!("{}.{:03}", nanos / 1_000, nanos % 1_000);
    format!("{}us", text.trim_end_matches('0'))
}

fn rate(amount: Nanos, period: Nanos) -> JsonRate {
    JsonRate {
        amount_ns: amount.0,
        period_ns: period.0,
    }
}

fn read_requests(file: &str) -> anyhow::Result<Vec<Request>> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading requests from standard input")?
    } else {
        std::fs::read_to_string(file)
            .map_err(|error| crate::exit::input(format!("reading {file}: {error}")))?
    };
    rtlab_sched::parse_requests(&text)
        .map_err(|error| crate::exit::input(format!("{file}: {error}")))
}

/// Where the JSON goes, opened before planning so a bad path fails at once.
enum JsonSink {
    Stdout,
    File(std::io::BufWriter<std::fs::File>, String),
}

fn open_json(json: Option<&str>) -> anyhow::Result<Option<JsonSink>> {
    Ok(match json {
        None => None,
        Some("-") => Some(JsonSink::Stdout),
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|error| crate::exit::input(format!("--json {path}: {error}")))?;
            Some(JsonSink::File(
                std::io::BufWriter::new(file),
                path.to_owned(),
            ))
        }
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let n_cpus = match args.cpus {
        Some(cpus) => usize::from(cpus),
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let mut planner = Planner::new(n_cpus, args.quantum, args.cap)
        .map_err(|error| crate::exit::input(format!("--cap/--cpus/--quantum: {error}")))?;
    let json_sink = open_json(args.json.as_deref())?;
    let requests = read_requests(&args.file)?;

    let mut output = JsonPlan {
        grants: Vec::new(),
        denied: Vec::new(),
        cpus: Vec::new(),
    };

    for request in &requests {
        match planner.reserve(request.owner.clone(), request.amount, request.period) {
            Ok(grant) => {
                output.grants.push(JsonGrant {
                    owner: grant.owner.to_string(),
                    cpu: grant.cpu,
                    requested: rate(grant.requested.amount, grant.requested.period),
                    granted: rate(grant.granted.amount, grant.granted.period),
                    incremental: grant.path == AdmissionPath::Incremental,
                });
            }
            Err(denied) => output.denied.push(JsonDenied {
                owner: request.owner.to_string(),
                reason: format!("line {}: {denied}", request.line),
            }),
        }
    }
    let plan = planner.plan();
    let violations = rtlab_sched::check::check(
        &plan,
        &planner.grants(),
        &[],
        planner.quantum(),
        planner.cap(),
    );
    if let Some(first) = violations.first() {
        anyhow::bail!(
            "planner self-check failed ({} problems), first: {first}",
            violations.len()
        );
    }
    output.cpus = plan
        .cpus
        .iter()
        .map(|schedule| JsonCpu {
            cpu: schedule.cpu,
            cycle_ns: schedule.cycle.0,
            slots: schedule
                .slots
                .iter()
                .map(|slot| JsonSlot {
                    start_ns: slot.start.0,
                    length_ns: slot.length.0,
                    owner: slot.owner.to_string(),
                })
                .collect(),
        })
        .collect();

    match json_sink {
        Some(JsonSink::Stdout) => {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut stdout, &output)
                .context("writing JSON to standard output")?;
            writeln!(stdout)?;
        }
        Some(JsonSink::File(mut writer, path)) => {
            serde_json::to_writer_pretty(&mut writer, &output)
                .with_context(|| format!("writing {path}"))?;
            writeln!(writer).with_context(|| format!("writing {path}"))?;
            writer.flush().with_context(|| format!("writing {path}"))?;
            write_text(&mut std::io::stdout().lock(), &planner, &requests, &output)?;
        }
        None => write_text(&mut std::io::stdout().lock(), &planner, &requests, &output)?,
    }
    Ok(if output.denied.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::CHECK_FAILED)
    })
}

fn write_text(
    out: &mut impl Write,
    planner: &Planner,
    requests: &[Request],
    output: &JsonPlan,
) -> std::io::Result<()> {
    let rebuilds = output
        .grants
        .iter()
        .filter(|grant| !grant.incremental)
        .count();
    writeln!(
        out,
        "{} requests on {} CPUs, quantum {}, cap {}: {} granted ({} incremental, {} rebuilds), {} denied",
        requests.len(),
        planner.n_cpus(),
        exact(planner.quantum().0),
        planner.cap(),
        output.grants.len(),
        output.grants.len() - rebuilds,
        rebuilds,
        output.denied.len()
    )?;
    if !output.grants.is_empty() {
        writeln!(out, "\nGranted")?;
        let owner_width = output
            .grants
            .iter()
            .map(|grant| grant.owner.len())
            .max()
            .unwrap_or(5)
            .max(5);
        writeln!(
            out,
            "  {:<owner_width$}  {:>4}  {:>17}  {:>17}  path",
            "owner", "cpu", "requested", "granted"
        )?;
        for grant in &output.grants {
            let requested = format!(
                "{}/{}",
                exact(grant.requested.amount_ns),
                exact(grant.requested.period_ns)
            );
            let granted = format!(
                "{}/{}",
                exact(grant.granted.amount_ns),
                exact(grant.granted.period_ns)
            );
            let path = if grant.incremental {
                "incremental"
            } else {
                "rebuild"
            };
            writeln!(
                out,
                "  {:<owner_width$}  {:>4}  {requested:>17}  {granted:>17}  {path}",
                grant.owner, grant.cpu
            )?;
        }
    }
    if !output.denied.is_empty() {
        writeln!(out, "\nDenied")?;
        for denied in &output.denied {
            writeln!(out, "  {}: {}", denied.owner, denied.reason)?;
        }
    }
    writeln!(out, "\nTimeline (one major cycle per CPU, repeating)")?;
    for cpu in &output.cpus {
        let reserved_percent = planner.utilisation_ppm(cpu.cpu) as f64 / 10_000.0;
        writeln!(
            out,
            "  cpu {}: cycle {}, {reserved_percent:.2}% reserved, {} slots",
            cpu.cpu,
            exact(cpu.cycle_ns),
            cpu.slots.len()
        )?;
        for slot in cpu.slots.iter().take(TIMELINE_SLOTS_SHOWN) {
            writeln!(
                out,
                "    {:>14} +{:<12} {}",
                exact(slot.start_ns),
                exact(slot.length_ns),
                slot.owner
            )?;
        }
        if cpu.slots.len() > TIMELINE_SLOTS_SHOWN {
            writeln!(
                out,
                "    … {} more slots (--json OUT lists them all)",
                cpu.slots.len() - TIMELINE_SLOTS_SHOWN
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::exact;

    #[test]
    fn exact_durations_lose_nothing() {
        assert_eq!(exact(0), "0ns");
        assert_eq!(exact(1_024_000_000), "1024ms");
        assert_eq!(exact(976_562), "976.562us");
        assert_eq!(exact(500_000), "500us");
        assert_eq!(exact(2_000_000_000), "2s");
        assert_eq!(exact(1_500), "1.5us");
    }
}
