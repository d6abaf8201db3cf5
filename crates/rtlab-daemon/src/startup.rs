//! Starting the daemon, as a library call: its configuration with the caller's overrides, the
//! socket bound first (a second daemon fails there, before its enforcer touches the journal of
//! the one already running), then the enforcer opened, which repairs what a killed daemon left.

use crate::{listen, ConfigError, DaemonConfig, Listening, SocketError, DEFAULT_CONFIG_PATH};
use rtlab_sched::enforce::{EnforceError, Enforcer};
use std::path::{Path, PathBuf};

/// A daemon ready to serve.
pub struct Startup {
    pub config: DaemonConfig,
    pub listening: Listening,
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
        enforcer,
    })
}
