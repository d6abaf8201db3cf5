//! `rtlab daemon`: runs the rtlab daemon in the foreground (systemd runs it as `rtlabd.service`,
//! socket-activated by `rtlabd.socket`). It shares CPU Reservations and Time Constraints among
//! the machine's programs over `rtlab.rpc/1` (docs/rpc.md) and reverts every thread it manages
//! when it stops; after a SIGKILL, the enforcer's journal under the state directory lets the
//! next start revert them.

use anyhow::Context as _;
use rtlab_core::Nanos;
use rtlab_daemon::startup::{configure, run_foreground};
use rtlab_daemon::Stopped;
use rtlab_sched::enforce::Enforcement;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Limits and defaults come from /etc/rtlab/rtlabd.toml (or --config); \
the socket from --socket, else $RTLAB_SOCKET, else the file's `socket`, else \
/run/rtlab/rtlabd.sock. Under systemd the socket comes from rtlabd.socket (LISTEN_FDS). \
With --rtkit it also owns org.freedesktop.RealtimeKit1 on the system bus ($DBUS_SYSTEM_BUS_ADDRESS) \
and refuses to start if another program (rtkit-daemon) owns it. SIGTERM or SIGINT stops it cleanly. Exit status: 0 stopped on request, 2 bad configuration, \
3 system error."
)]
pub struct Args {
    /// Listen on PATH [default: $RTLAB_SOCKET, else /run/rtlab/rtlabd.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Configuration file [default: /etc/rtlab/rtlabd.toml if it exists]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also serve org.freedesktop.RealtimeKit1 on the system bus, as rtkit-daemon does, so
    /// programs that ask rtkit for real-time get it from rtlab (docs/rtkit.md; `[rtkit]` in the
    /// configuration)
    #[arg(long)]
    pub rtkit: bool,
    /// With --rtkit: take the name over from its owner where the bus allows (only an owner that
    /// allowed replacement gives it up; rtkit-daemon does not)
    #[arg(long, requires = "rtkit")]
    pub replace: bool,
}

/// Observes a `[[rtkit.reserve]]` program for the daemon as `rtlab reserve --auto` does: the
/// same trace of the process (`rtlab_trace::watch::observe`), the same reading of its threads and of
/// what the machine enforces; where tracing fails, the kernel's per-task counters
/// (`--observe-with schedstat`). A followed reservation's windows are the counters' alone, as
/// `reserve --auto --follow`'s.
struct AutoObserver;

impl rtlab_daemon::rtkit::observe::ThreadObserver for AutoObserver {
    fn observe(
        &self,
        pid: u32,
        duration: Nanos,
        stop: &AtomicBool,
    ) -> Result<rtlab_daemon::rtkit::observe::Observation, String> {
        let machine = rtlab_sched::auto_machine::detect()
            .map_err(|error| format!("{:#}", super::reserve_auto::machine_error(error)))?;
        let target = rtlab_trace::record::Target::Pid(pid);
        match super::trace_markers::observe(&target, duration.as_std(), None, stop) {
            Ok(report) => Ok(rtlab_daemon::rtkit::observe::Observation {
                threads: rtlab_trace::auto_observe::observed_threads(&report),
                machine,
                how: "a trace".to_owned(),
            }),
            // Where tracing is not allowed (the hardened unit), the kernel's per-task counters.
            Err(trace_error) => {
                let threads =
                    rtlab_trace::auto_observe::observed_by_counters(&target, duration.as_std(), stop)
                        .map_err(|error| {
                            let error = super::reserve_auto::counters_error(error);
                            format!(
                                "tracing failed ({trace_error:#}), and so did the kernel's counters ({error:#})"
                            )
                        })?;
                Ok(rtlab_daemon::rtkit::observe::Observation {
                    threads,
                    machine,
                    how: format!(
                        "the kernel's per-task counters (tracing failed: {trace_error:#})"
                    ),
                })
            }
        }
    }

    /// A followed reservation's window: the counters `reserve --auto --follow` follows by.
    fn observe_window(
        &self,
        tid: u32,
        duration: Nanos,
        sampler_priority: u32,
        stop: &AtomicBool,
    ) -> Option<rtlab_sched::auto_follow::FollowWindow> {
        rtlab_trace::auto_observe::counters_window(tid, duration.as_std(), sampler_priority, stop)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    rtlab_daemon::rtkit::observe::set_observer(Arc::new(AutoObserver));
    let mut config = configure(args.config.as_deref(), args.socket.clone())
        .map_err(|error| crate::exit::input(format!("--config: {error}")))?;
    config.rtkit.enabled |= args.rtkit;
    config.rtkit.required |= args.rtkit;
    config.rtkit.replace |= args.replace;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_flag_only(&stop).context("installing SIGTERM/SIGINT handlers")?;
    let stopped = run_foreground(config, stop, |startup| {
        if let Some(warning) = rtlab_daemon::peer::peer_pidfd_warning() {
            eprintln!("{warning}");
        }
        if let Some(warning) = rtlab_daemon::peer::open_files_warning() {
            eprintln!("{warning}");
        }
        // Type=notify (rtlabd.service): ready once the socket listens and the enforcer has
        // repaired what a previous daemon left.
        rtlab_sys::service_manager::ready(&match startup.listening.bound_path.as_deref() {
            Some(path) => format!("serving on {}", path.display()),
            None => "serving on the socket systemd passed".to_owned(),
        });
        eprint!(
            "{}",
            rtlab_render::reserve::daemon_started(
                startup.enforcer.repaired(),
                startup.listening.bound_path.as_deref(),
                &Enforcement::default_backend(&startup.enforcer).to_string(),
                &startup.enforcer.placement(),
                startup.config.user_limit,
                Nanos::from(startup.config.hysteresis),
            )
        );
    })?;
    rtlab_sys::service_manager::stopping("stopped; every managed thread has its old policy back");
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
