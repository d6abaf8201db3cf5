//! `rtlab daemon`: runs the rtlab daemon in the foreground (systemd runs it as `rtlabd.service`,
//! socket-activated by `rtlabd.socket`). It shares CPU Reservations and Time Constraints among
//! the machine's programs over `rtlab.rpc/1` (docs/rpc.md) and reverts every thread it manages
//! when it stops; after a SIGKILL, the enforcer's journal under the state directory lets the
//! next start revert them.

use anyhow::Context as _;
use rtlab_daemon::{DaemonConfig, Stopped, DEFAULT_CONFIG_PATH};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Limits and defaults come from /etc/rtlab/rtlabd.toml (or --config); \
the socket from --socket, else $RTLAB_SOCKET, else the file's `socket`, else \
/run/rtlab/rtlabd.sock. Under systemd the socket comes from rtlabd.socket (LISTEN_FDS). \
SIGTERM or SIGINT stops it cleanly. Exit status: 0 stopped on request, 2 bad configuration, \
3 system error."
)]
pub struct Args {
    /// Listen on PATH [default: $RTLAB_SOCKET, else /run/rtlab/rtlabd.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Configuration file [default: /etc/rtlab/rtlabd.toml if it exists]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = match &args.config {
        Some(path) => DaemonConfig::load(path, true),
        None => DaemonConfig::load(std::path::Path::new(DEFAULT_CONFIG_PATH), false),
    }
    .map_err(|error| crate::exit::input(format!("--config: {error}")))?;
    if let Some(socket) = args.socket.clone().or_else(|| {
        std::env::var_os(rtlab_core::rpc::SOCKET_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    }) {
        config.socket = socket;
    }

    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_flag_only(&stop).context("installing SIGTERM/SIGINT handlers")?;
    let panicked = Arc::new(AtomicBool::new(false));
    {
        let panicked = Arc::clone(&panicked);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            panicked.store(true, Ordering::SeqCst);
        }));
    }

    // The socket first: a second daemon must fail here, before its enforcer touches the journal
    // of the one already running.
    let listening = rtlab_daemon::listen(&config.socket)?;
    let mut enforcer =
        rtlab_sched::enforce::Enforcer::open(&config.state_dir, config.default_backend)
            .with_context(|| {
                format!(
                    "opening the enforcer (state in {})",
                    config.state_dir.display()
                )
            })?;
    enforcer.set_placement(config.deadline_placement);
    enforcer.set_placement_linger(config.placement_linger);
    let repaired = enforcer.repaired();
    if !repaired.cpusets_removed.is_empty() || !repaired.cpuset_failures.is_empty() {
        eprintln!(
            "rtlab daemon: removed the cpuset partitions a previous daemon left: {:?}{}",
            repaired.cpusets_removed,
            if repaired.cpuset_failures.is_empty() {
                String::new()
            } else {
                format!(", could not undo: {}", repaired.cpuset_failures.join("; "))
            }
        );
    }
    if !repaired.restored.is_empty() || !repaired.failed.is_empty() {
        eprintln!(
            "rtlab daemon: a previous daemon stopped without reverting: restored threads {:?}{}",
            repaired.restored,
            if repaired.failed.is_empty() {
                String::new()
            } else {
                format!(", could not restore {:?}", repaired.failed)
            }
        );
    }
    let listener = listening
        .listener
        .try_clone()
        .context("duplicating the listening socket")?;
    let default_backend = rtlab_sched::enforce::Enforcement::default_backend(&enforcer);
    let placement = match enforcer.placement() {
        Ok(_) => "deadline reservations placed alone on one CPU".to_owned(),
        Err(reason) => format!("deadline reservations under global EDF: {reason}"),
    };
    eprintln!(
        "rtlab daemon: listening on {} (default backend {default_backend}, {placement}, {:.0} % of a CPU per user, hysteresis {})",
        match &listening.bound_path {
            Some(path) => path.display().to_string(),
            None => "the socket systemd passed".to_owned(),
        },
        config.user_limit * 100.0,
        rtlab_core::Nanos::from(config.hysteresis),
    );
    let stopped = rtlab_daemon::serve(listener, &config, Box::new(enforcer), stop, panicked)?;
    drop(listening);
    match stopped {
        Stopped::Requested => {
            eprintln!("rtlab daemon: stopped; every managed thread has its old policy back");
            Ok(ExitCode::SUCCESS)
        }
        Stopped::Panicked => anyhow::bail!(
            "a daemon thread panicked (above); every managed thread has its old policy back"
        ),
    }
}
