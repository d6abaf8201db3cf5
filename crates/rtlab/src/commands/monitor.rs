//! `rtlab monitor`: flags, the start line and exit codes; the measuring windows and the
//! Prometheus exporter are `rtlab_monitor`. The daemon's grants reach the exporter
//! through [`DaemonGrants`], which lists the daemon as `rtlab reservations --json` does.

use anyhow::Context as _;
use rtlab_core::Nanos;
use rtlab_monitor::grants::{GrantListing, GrantSource};
use rtlab_monitor::{Monitor, MonitorConfig};
use rtlab_probe::Class;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve the metrics on http://ADDR/metrics (Prometheus text format)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub prometheus: SocketAddr,
    /// Wake-up period of every measuring thread (100 Hz by default: low overhead for weeks)
    #[arg(long, default_value = "10ms", value_parser = crate::flags::duration)]
    pub period: Nanos,
    /// Length of one measuring window: the worst-latency gauge covers the last window
    #[arg(long, default_value = "10s", value_parser = crate::flags::duration)]
    pub window: Nanos,
    /// Classes to measure: rt-high (SCHED_FIFO 90), rt-mid (SCHED_FIFO 50), normal (SCHED_OTHER)
    #[arg(long, value_delimiter = ',', default_value = "rt-high")]
    pub classes: Vec<Class>,
    #[command(flatten)]
    pub cpus: crate::flags::CpusArgs,
    /// Also measure hand-off latency (a waiter thread per class)
    #[arg(long)]
    pub handoff: bool,
    /// Stop after this long (e.g. 1h); default: until SIGINT or SIGTERM
    #[arg(long, value_parser = crate::flags::duration)]
    pub stop_after: Option<Nanos>,
    #[command(flatten)]
    pub explain: super::run::ExplainArgs,
    /// Do not list rtlabd's reservations and RealtimeKit1 threads (by default they are exported
    /// when a daemon answers on --socket)
    #[arg(long)]
    pub no_reservations: bool,
    #[command(flatten)]
    pub socket: super::daemon_client::SocketArgs,
}

/// The daemon's grants for the exporter: one connection, made again after a failure.
struct DaemonGrants {
    socket: std::path::PathBuf,
    client: Option<rtlab_client::Client>,
}

impl GrantSource for DaemonGrants {
    fn listing(&mut self) -> Result<GrantListing, String> {
        if self.client.is_none() {
            self.client = Some(
                rtlab_client::Client::connect(&self.socket).map_err(|error| error.to_string())?,
            );
        }
        let listed = self.client.as_mut().map(rtlab_client::Client::list);
        let list = match listed {
            Some(Ok(list)) => list,
            Some(Err(error)) => {
                self.client = None;
                return Err(error.to_string());
            }
            None => return Err("not connected".to_owned()),
        };
        let json =
            rtlab_render::reserve::reservations_json(&list).map_err(|error| error.to_string())?;
        Ok(GrantListing { list, json })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cpus = match &args.cpus.list {
        Some(cpus) => cpus.0.clone(),
        None => rtlab_sys::cpu::online_cpus().context("reading the online CPUs")?,
    };
    let config = MonitorConfig {
        listen: args.prometheus,
        period: args.period,
        window: args.window,
        classes: args.classes.clone(),
        cpus: cpus.clone(),
        handoff: args.handoff,
        stop_after: args.stop_after,
        explain: args.explain.config(),
    };
    let grants: Option<Box<dyn GrantSource>> = (!args.no_reservations).then(|| {
        Box::new(DaemonGrants {
            socket: rtlab_client::socket_path(args.socket.socket.as_deref()),
            client: None,
        }) as Box<dyn GrantSource>
    });
    let monitor = Monitor::bind(config, grants).map_err(|error| match error.setting() {
        Some("listen") => crate::exit::input(format!("--prometheus {}: {error}", args.prometheus)),
        Some(setting) => crate::exit::input(format!("{}: {error}", crate::flags::flag_of(setting))),
        None => anyhow::Error::new(error),
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)
        .context("installing the SIGINT/SIGTERM handler")?;
    let names: Vec<&str> = args.classes.iter().map(|class| class.name()).collect();
    eprintln!(
        "{}",
        rtlab_render::monitor::start_line(
            &names,
            &cpus,
            args.period,
            args.window,
            &args.prometheus.to_string()
        )
    );
    // Type=notify (rtlab-monitor.service): /metrics is served from here on.
    rtlab_sys::service_manager::ready(&format!("serving http://{}/metrics", args.prometheus));
    monitor.run(&stop)?;
    rtlab_sys::service_manager::stopping("stopped");
    // A stop by signal is how a monitor is meant to end: exit 0, as systemd expects.
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    /// The packaged unit's command line is one this CLI accepts.
    #[test]
    fn the_systemd_unit_parses() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging");
        let unit = std::fs::read_to_string(format!("{root}/rtlab-monitor.service")).unwrap();
        let exec = unit
            .lines()
            .find_map(|line| line.strip_prefix("ExecStart="))
            .expect("an ExecStart line");
        let words: Vec<&str> = exec.split_whitespace().skip(1).collect();
        let parsed = <super::super::Cli as clap::Parser>::try_parse_from(
            std::iter::once("rtlab").chain(words.iter().copied()),
        );
        assert!(
            parsed.is_ok(),
            "the unit's ExecStart does not parse: {exec}"
        );
    }
}
