//! The fields every rtlab JSON output begins with, so a reader can tell what a file is, what made
//! it and (where a machine is involved) on which machine, before reading the rest. A Run record
//! carries the same fields at its top level.

use crate::record::Host;
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

/// `schema`, `tool_version`, `cmdline`, `started_at` and, where a machine is involved, `host`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputHeader {
    /// `rtlab.<kind>/<version>`.
    pub schema: String,
    pub tool_version: String,
    #[serde(default)]
    pub cmdline: Vec<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
}

impl OutputHeader {
    /// The header of an output of `schema` made now, by this version, from this process's
    /// command line.
    pub fn now(schema: &str, host: Option<Host>) -> OutputHeader {
        OutputHeader {
            schema: schema.to_owned(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            cmdline: std::env::args().collect(),
            started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            host,
        }
    }
}
