//! rtlab-store: the run history, in an embedded SQLite database, and where records are read from
//! and written to (`resolve`: a file, `-` or a stored id; `output`: files named only when complete).
//!
//! Every run that is not `--no-store` lands here so `rtlab history`, `show`, `forecast` and
//! `compare` can find it later by id. SQLite in WAL mode, bundled, so there is nothing to install
//! and a reader never blocks the writer. The whole Run record is stored as JSON beside a few
//! indexed columns; the JSON is the source of truth.

pub mod output;
mod resolve;
#[cfg(target_os = "linux")]
mod sudo;
#[cfg(not(target_os = "linux"))]
#[path = "sudo_none.rs"]
mod sudo;

/// The user who ran rtlab through sudo (found on Linux only: elsewhere the history is always the
/// current user's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SudoCaller {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

pub use output::{OutputError, PendingOutput};
pub use resolve::{load_record, LoadError};

use rtlab_core::{RecordError, RunRecord};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// True when `cause` is one of this crate's errors and the user's input is at fault: a name
/// that is no stored run, a file that is no Run record, an output path that cannot be written.
pub fn is_input_error(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<LoadError>()
        .is_some_and(LoadError::is_input)
        || cause
            .downcast_ref::<OutputError>()
            .is_some_and(OutputError::is_input)
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run history database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create {path}: {source}")]
    Directory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("giving {path} to {user} (the user behind sudo): {source}")]
    Owner {
        path: PathBuf,
        user: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no data directory: set RTLAB_HOME or HOME")]
    NoHome,
    #[error("no stored run with id '{0}' (see `rtlab history`)")]
    NotFound(String),
    #[error("run id '{prefix}' is ambiguous: it matches {count} runs")]
    Ambiguous { prefix: String, count: usize },
    #[error("stored run {id} is damaged: {source}")]
    Damaged {
        id: String,
        #[source]
        source: RecordError,
    },
}

pub use rtlab_core::run_listing::RunListing;

pub struct Store {
    connection: Connection,
    path: PathBuf,
    owner: Option<SudoCaller>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Store")
            .field("path", &self.path)
            .finish()
    }
}

/// Where the run history is, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryLocation {
    pub path: PathBuf,
    /// Under `sudo` (and no `RTLAB_HOME`): the user whose history it is, who gets what the store
    /// creates.
    pub sudo_caller: Option<SudoCaller>,
}

/// The default database location: `$RTLAB_HOME/rtlab.db`; else, under `sudo`, the invoking
/// user's `~/.local/share/rtlab/rtlab.db`; else `$XDG_DATA_HOME/rtlab/rtlab.db`
/// (`~/.local/share/rtlab/rtlab.db`).
pub fn default_location() -> Result<HistoryLocation, StoreError> {
    if let Some(home) = std::env::var_os("RTLAB_HOME").filter(|value| !value.is_empty()) {
        return Ok(HistoryLocation {
            path: PathBuf::from(home).join("rtlab.db"),
            sudo_caller: None,
        });
    }
    if let Some(caller) = sudo::caller() {
        return Ok(HistoryLocation {
            path: caller
                .home
                .join(".local")
                .join("share")
                .join("rtlab")
                .join("rtlab.db"),
            sudo_caller: Some(caller),
        });
    }
    dirs::data_dir()
        .map(|directory| HistoryLocation {
            path: directory.join("rtlab").join("rtlab.db"),
            sudo_caller: None,
        })
        .ok_or(StoreError::NoHome)
}

/// The default database path (see [`default_location`]).
pub fn default_path() -> Result<PathBuf, StoreError> {
    default_location().map(|location| location.path)
}

impl Store {
    pub fn open_default() -> Result<Store, StoreError> {
        let location = default_location()?;
        Store::open_for(&location.path, location.sudo_caller)
    }

    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_for(path, None)
    }

    /// Opens (creating) the database at `path`; with `owner`, gives every directory and file it
    /// creates to that user (the user behind sudo).
    pub fn open_for(path: &Path, owner: Option<SudoCaller>) -> Result<Store, StoreError> {
        let mut created = Vec::new();
        if owner.is_some() {
            created.extend(sudo::missing_directories(path));
            let mut companions = vec![path.to_owned()];
            for suffix in ["-wal", "-shm"] {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                companions.push(PathBuf::from(name));
            }
            created.extend(companions.into_iter().filter(|file| !file.exists()));
        }
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Directory {
                path: parent.to_owned(),
                source,
            })?;
        }
        let sqlite = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let connection = Connection::open(path).map_err(sqlite)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite)?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sqlite)?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS runs (
                    id TEXT PRIMARY KEY,
                    started_at TEXT NOT NULL,
                    duration_ns INTEGER NOT NULL,
                    hostname TEXT NOT NULL,
                    kernel TEXT NOT NULL,
                    n_series INTEGER NOT NULL,
                    worst_wakeup_ns INTEGER NOT NULL,
                    interrupted INTEGER NOT NULL,
                    summary TEXT NOT NULL,
                    record TEXT NOT NULL
                );
                CREATE INDEX IF NOT EXISTS runs_started_at ON runs(started_at);",
            )
            .map_err(sqlite)?;
        if let Some(owner) = &owner {
            sudo::give(owner, &created).map_err(|source| StoreError::Owner {
                path: path.to_owned(),
                user: owner.name.clone(),
                source,
            })?;
        }
        Ok(Store {
            connection,
            path: path.to_owned(),
            owner,
        })
    }

    /// The user behind sudo whose history this is, if rtlab runs under sudo.
    pub fn sudo_caller(&self) -> Option<&SudoCaller> {
        self.owner.as_ref()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Stores a record (replacing one with the same id). `summary` is a one-line description.
    pub fn insert(&self, record: &RunRecord, summary: &str) -> Result<(), StoreError> {
        let worst_wakeup_ns = record
            .series
            .iter()
            .filter(|series| series.metric == rtlab_core::Metric::Wakeup)
            .map(|series| series.max_ns)
            .max()
            .unwrap_or(0);
        let json = serde_json::to_string(record).expect("a Run record always serialises");
        self.connection
            .execute(
                "INSERT OR REPLACE INTO runs
                 (id, started_at, duration_ns, hostname, kernel, n_series, worst_wakeup_ns, interrupted, summary, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    record.id,
                    record.started_at,
                    record.duration_ns as i64,
                    record.host.hostname,
                    record.host.kernel,
                    record.series.len() as i64,
                    worst_wakeup_ns as i64,
                    record.interrupted,
                    summary,
                    json
                ],
            )
            .map_err(|error| self.sqlite(error))?;
        Ok(())
    }

    /// The newest `limit` runs, newest first.
    pub fn list(&self, limit: usize) -> Result<Vec<RunListing>, StoreError> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT id, started_at, duration_ns, hostname, kernel, n_series, worst_wakeup_ns, interrupted, summary
                 FROM runs ORDER BY started_at DESC, rowid DESC LIMIT ?1",
            )
            .map_err(|error| self.sqlite(error))?;
        let rows = statement
            .query_map(params![limit as i64], |row| {
                Ok(RunListing {
                    id: row.get(0)?,
                    started_at: row.get(1)?,
                    duration_ns: row.get::<_, i64>(2)? as u64,
                    hostname: row.get(3)?,
                    kernel: row.get(4)?,
                    n_series: row.get::<_, i64>(5)? as u64,
                    worst_wakeup_ns: row.get::<_, i64>(6)? as u64,
                    interrupted: row.get(7)?,
                    summary: row.get(8)?,
                })
            })
            .map_err(|error| self.sqlite(error))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|error| self.sqlite(error))
    }

    /// Finds a run by its id or an unambiguous prefix of it (at least 4 characters), or `latest`.
    pub fn get(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError> {
        let rows: Vec<(String, String)> = if id_or_prefix == "latest" {
            self.connection
                .query_row(
                    "SELECT id, record FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(|error| self.sqlite(error))?
                .into_iter()
                .collect()
        } else {
            if id_or_prefix.len() < 4 {
                return Err(StoreError::NotFound(id_or_prefix.to_owned()));
            }
            let mut statement = self
                .connection
                .prepare("SELECT id, record FROM runs WHERE substr(id, 1, length(?1)) = ?1 LIMIT 3")
                .map_err(|error| self.sqlite(error))?;
            let rows = statement
                .query_map(params![id_or_prefix], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(|error| self.sqlite(error))?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(|error| self.sqlite(error))?
        };
        match rows.as_slice() {
            [] => Err(StoreError::NotFound(id_or_prefix.to_owned())),
            [(id, json)] => RunRecord::from_json(json).map_err(|source| StoreError::Damaged {
                id: id.clone(),
                source,
            }),
            more => Err(StoreError::Ambiguous {
                prefix: id_or_prefix.to_owned(),
                count: more.len(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::LatencyHistogram;

    fn record(id: &str, started_at: &str, worst: u64) -> RunRecord {
        let mut histogram = LatencyHistogram::new();
        histogram.record(1_000);
        histogram.record(worst);
        let series =
            rtlab_core::rt_high_wakeup_series(0, &histogram, 0, vec![worst], vec![]).unwrap();
        RunRecord::new(id, started_at, 1_000_000_000, vec![series])
    }

    #[test]
    fn stores_lists_and_finds_by_prefix() {
        let directory = tempfile::tempdir().unwrap();
        let store = Store::open(&directory.path().join("sub/rtlab.db")).unwrap();
        store
            .insert(&record("aaaa1111", "2026-01-01T00:00:00Z", 5_000), "first")
            .unwrap();
        store
            .insert(&record("aaaa2222", "2026-01-02T00:00:00Z", 9_000), "second")
            .unwrap();
        let listing = store.list(10).unwrap();
        assert_eq!(listing.len(), 2);
        assert_eq!(listing[0].id, "aaaa2222");
        assert_eq!(listing[0].worst_wakeup_ns, 9_000);
        assert_eq!(store.get("aaaa1").unwrap().id, "aaaa1111");
        assert_eq!(store.get("latest").unwrap().id, "aaaa2222");
        assert!(matches!(
            store.get("aaaa"),
            Err(StoreError::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(store.get("zzzz"), Err(StoreError::NotFound(_))));
        assert!(matches!(store.get("aa"), Err(StoreError::NotFound(_))));
    }
}
