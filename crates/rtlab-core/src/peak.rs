//! One of a series' largest samples with its time: a module of its own because both the Run
//! record (`record.rs`, a series' `peaks`) and their compact encoding (`packed.rs`) use it.

use serde::{Deserialize, Serialize};

/// One of the largest samples of a series, with when it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peak {
    /// Time of the sample since the start of measurement (after warm-up), ns.
    pub at_ns: u64,
    pub value_ns: u64,
}
