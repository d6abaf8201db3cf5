//! A Run record named the way users name one: a file path, `-` for standard input, or a stored
//! run's id, unique id prefix or `latest`. A path that exists wins over an id.

use crate::{Store, StoreError};
use rtlab_core::{RecordError, RunRecord};

/// Why a named record could not be loaded. The message names the record; the cause is the
/// error's `source()` (printed after it by `anyhow`'s `{:#}`).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {name}")]
    Read {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// A binary file: the user's mistake, not a failing system.
    #[error("{name}: not a Run record: not text (invalid UTF-8 at byte {at})")]
    NotText { name: String, at: usize },
    #[error("{name}")]
    Record {
        name: String,
        #[source]
        source: RecordError,
    },
    #[error("'{name}' is neither a file nor a stored run")]
    NotStored {
        name: String,
        #[source]
        source: StoreError,
    },
    #[error(transparent)]
    Store(StoreError),
}

impl LoadError {
    /// True when the name or the file is at fault (not text, not a record, no such run).
    pub fn is_input(&self) -> bool {
        !matches!(self, LoadError::Read { .. } | LoadError::Store(_))
    }
}

/// Loads the record `name` names: a file, `-` (standard input), or a stored run (id, unique
/// prefix, `latest`) from the default store.
pub fn load_record(name: &str) -> Result<RunRecord, LoadError> {
    let path = std::path::Path::new(name);
    if name == "-" || path.exists() {
        let read = |source| LoadError::Read {
            name: if name == "-" {
                "a Run record from stdin".to_owned()
            } else {
                name.to_owned()
            },
            source,
        };
        let bytes = if name == "-" {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(read)?;
            bytes
        } else {
            std::fs::read(path).map_err(read)?
        };
        let text = String::from_utf8(bytes).map_err(|error| LoadError::NotText {
            name: name.to_owned(),
            at: error.utf8_error().valid_up_to(),
        })?;
        return RunRecord::from_json(&text).map_err(|source| LoadError::Record {
            name: name.to_owned(),
            source,
        });
    }
    let store = Store::open_default().map_err(LoadError::Store)?;
    store.get(name).map_err(|error| match error {
        StoreError::NotFound(_) | StoreError::Ambiguous { .. } => LoadError::NotStored {
            name: name.to_owned(),
            source: error,
        },
        other => LoadError::Store(other),
    })
}
