//! Starting the daemon, as a library call: its configuration with the caller's overrides, the
//! socket bound first (a second daemon fails there, before its enforcer touches the journal of
//! the one already running), then the enforcer opened, which repairs what a killed daemon left.

use crate::{
    listen, serve, ConfigError, DaemonConfig, DaemonError, Listeners, Listening, SocketError,
    Stopped, DEFAULT_CONFIG_PATH,
};
use rtlab_sched::enforce::{EnforceError, Enforcer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A daemon ready to serve.
pub struct Startup {
    pub config: DaemonConfig,
    pub listening: Listening,
    /// Root's own socket (`rtlab_core::rpc::root_socket_path`), bound when the daemon runs as
    /// root: `Ok(None)` otherwise; `Err` when it could not be bound — the daemon serves without
    /// it (root is then answered on the shared socket, as everyone) and says why.
    pub root_listening: Result<Option<Listening>, SocketError>,
    pub enforcer: Enforcer,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error("opening the enforcer (state in {}): {source}", state_dir.display())]
    Enforcer {
        state_dir: PathBuf,
        #[source]
        source: EnforceError,
    },
}

/// Why a daemon run in the foreground ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("duplicating the listening socket")]
    Listener(#[source] std::io::Error),
    #[error(transparent)]
    Serve(#[from] DaemonError),
}

/// The configuration: the file at `path` (which must exist), else the default file when it
/// exists; the socket from `socket`, else `$RTLAB_SOCKET`, else the file's.
pub fn configure(
    path: Option<&Path>,
    socket: Option<PathBuf>,
) -> Result<DaemonConfig, ConfigError> {
    let mut config = match path {
        Some(path) => DaemonConfig::load(path, true),
        None => DaemonConfig::load(Path::new(DEFAULT_CONFIG_PATH), false),
    }?;
    if let Some(socket) = socket.or_else(|| {
        std::env::var_os(rtlab_core::rpc::SOCKET_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    }) {
        config.socket = socket;
    }
    Ok(config)
}

/// Binds the socket, then opens the enforcer (repairing what a previous daemon left; see
/// [`Enforcer::repaired`]) with the configured placement.
pub fn start(config: DaemonConfig) -> Result<Startup, StartError> {
    let listening = listen(&config.socket)?;
    // Not fatal: a file left at root's path (in a directory others may write, the socket's
    // directory can be one) must not keep the daemon from serving everyone else.
    let root_listening = if rtlab_sys::proc_thread::current_effective_uid() == 0 {
        crate::socket::bind_root(&rtlab_core::rpc::root_socket_path(&config.socket)).map(Some)
    } else {
        Ok(None)
    };
    let mut enforcer =
        Enforcer::open(&config.state_dir, config.default_backend).map_err(|source| {
            StartError::Enforcer {
                state_dir: config.state_dir.clone(),
                source,
            }
        })?;
    enforcer.set_placement(config.deadline_placement);
    enforcer.set_placement_linger(config.placement_linger);
    Ok(Startup {
        config,
        listening,
        root_listening,
        enforcer,
    })
}

/// Runs the daemon in the foreground: [`start`], then `started` (to tell the operator what was
/// repaired and where it listens), then [`serve`] until `stop` is set or one of its threads
/// panics (a panic hook, chained to the one before, notices), reverting every managed thread
/// either way. The socket file it bound is removed when it returns.
pub fn run_foreground(
    config: DaemonConfig,
    stop: Arc<AtomicBool>,
    started: impl FnOnce(&Startup),
) -> Result<Stopped, RunError> {
    let panicked = Arc::new(AtomicBool::new(false));
    {
        let panicked = Arc::clone(&panicked);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            panicked.store(true, Ordering::SeqCst);
        }));
    }
    let startup = start(config)?;
    started(&startup);
    let Startup {
        config,
        listening,
        root_listening,
        enforcer,
    } = startup;
    let listener = listening.listener.try_clone().map_err(RunError::Listener)?;
    let root_listening = root_listening.ok().flatten();
    let root_listener = root_listening
        .as_ref()
        .map(|root| root.listener.try_clone())
        .transpose()
        .map_err(RunError::Listener)?;
    let stopped = serve(
        Listeners {
            shared: listener,
            root: root_listener,
        },
        &config,
        Box::new(enforcer),
        stop,
        panicked,
    )?;
    drop(root_listening);
    drop(listening);
    Ok(stopped)
}
